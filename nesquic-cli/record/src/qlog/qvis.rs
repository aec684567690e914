//! `--qlog-compat qvis`: a copy of a run's trace that qvis (the common qlog viewer) draws.
//!
//! qvis reads qlog draft-02: it draws its sequence diagram from `transport:packet_sent` /
//! `packet_received` and its congestion graph from `recovery:metrics_updated`; it understands
//! `time_format` `relative` with a numeric `reference_time` (ms since the Unix epoch), and it
//! matches `metrics_updated` by the part after the colon alone. So the copy:
//! - names the library's merged events as draft-02 did (their `original_name` when it has a
//!   draft-02 namespace, else `quic:X` mapped back);
//! - renames Nesquic's `metrics_updated` to `nesquic:probe_totals`, which qvis cannot mistake
//!   for its own;
//! - gives every event the library's `group_id` scheme (Nesquic's events: `nesquic`), so qvis
//!   splits a multi-connection trace into one sequence per connection.

use std::path::Path;

use serde_json::{json, Value};

use crate::RecordError;

/// Nesquic's periodic totals, as named in the qvis copy.
pub const PROBE_TOTALS: &str = "nesquic:probe_totals";

/// What the copy holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QvisCopy {
    /// Events written.
    pub events: usize,
    /// Of which the library's (packets, recovery).
    pub library_events: usize,
}

/// Writes the qvis copy of `trace` to `out`.
pub fn write(trace: &Path, out: &Path) -> Result<QvisCopy, RecordError> {
    let parsed = super::reader::read(trace)?;
    let mut header = parsed.header;
    let epoch = header["trace"]["common_fields"]["reference_time"]["epoch"].as_str().map(String::from);
    let epoch_ms = epoch.as_deref().and_then(super::time::parse_rfc3339_ms).ok_or_else(|| RecordError::Qlog {
        path: trace.to_path_buf(),
        problem: "the header has no reference_time.epoch in RFC 3339".into(),
    })?;
    header["qlog_version"] = json!("0.3");
    header["qlog_format"] = json!("JSON-SEQ");
    let common = &mut header["trace"]["common_fields"];
    common["time_format"] = json!("relative");
    common["reference_time"] = json!(epoch_ms);

    let grouped = parsed.events.iter().any(|e| e.get("group_id").is_some());
    let mut library_events = 0;
    let mut lines = String::new();
    let mut push = |v: &Value| -> Result<(), RecordError> {
        let text = serde_json::to_string(v)
            .map_err(|source| RecordError::Json { what: format!("{} (qvis copy)", trace.display()), source })?;
        lines.push('\x1e');
        lines.push_str(&text);
        lines.push('\n');
        Ok(())
    };
    push(&header)?;
    for mut event in parsed.events.iter().cloned() {
        let name = event["name"].as_str().unwrap_or_default().to_string();
        let renamed = match event.get("original_name").and_then(Value::as_str) {
            Some(original) => {
                library_events += 1;
                draft02_name(original)
            }
            None if name == "nesquic:metrics_updated" => PROBE_TOTALS.to_string(),
            None => draft02_name(&name),
        };
        event["name"] = json!(renamed);
        if let Some(map) = event.as_object_mut() {
            map.remove("original_name");
            if grouped && !map.contains_key("group_id") {
                map.insert("group_id".into(), json!("nesquic"));
            }
        }
        push(&event)?;
    }
    crate::files::write(out, lines.as_bytes())?;
    Ok(QvisCopy { events: parsed.events.len(), library_events })
}

/// An event name as qlog draft-02 spelled it: `quic:packet_sent` -> `transport:packet_sent`,
/// `quic:recovery_metrics_updated` -> `recovery:metrics_updated`, `quic:udp_datagrams_sent` ->
/// `transport:datagrams_sent`; names already in a draft-02 namespace and Nesquic's own stay.
pub fn draft02_name(name: &str) -> String {
    let Some(("quic", event)) = name.split_once(':') else { return name.to_string() };
    match event {
        "recovery_metrics_updated" => "recovery:metrics_updated".into(),
        "udp_datagrams_sent" => "transport:datagrams_sent".into(),
        "udp_datagrams_received" => "transport:datagrams_received".into(),
        "congestion_state_updated"
        | "loss_timer_updated"
        | "packet_lost"
        | "marked_for_retransmit"
        | "recovery_parameters_set" => format!("recovery:{event}"),
        "parameters_set"
        | "packet_sent"
        | "packet_received"
        | "packet_dropped"
        | "packet_buffered"
        | "packets_acked"
        | "datagrams_sent"
        | "datagrams_received"
        | "datagram_dropped"
        | "stream_state_updated"
        | "frames_processed"
        | "data_moved"
        | "version_information"
        | "alpn_information" => {
            format!("transport:{event}")
        }
        "key_updated" | "key_discarded" => format!("security:{event}"),
        _ => format!("connectivity:{event}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_back_to_draft_02() {
        assert_eq!(draft02_name("quic:packet_sent"), "transport:packet_sent");
        assert_eq!(draft02_name("quic:recovery_metrics_updated"), "recovery:metrics_updated");
        assert_eq!(draft02_name("quic:packet_lost"), "recovery:packet_lost");
        assert_eq!(draft02_name("quic:udp_datagrams_sent"), "transport:datagrams_sent");
        assert_eq!(draft02_name("quic:connection_started"), "connectivity:connection_started");
        assert_eq!(draft02_name("transport:packet_received"), "transport:packet_received");
        assert_eq!(draft02_name("nesquic:run_started"), "nesquic:run_started");
    }

    #[test]
    fn the_copy_is_what_qvis_reads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (trace, out) = (dir.path().join("t.sqlog"), dir.path().join("q.sqlog"));
        let text = "\x1e{\"file_schema\":\"x\",\"serialization_format\":\"y\",\"trace\":{\"common_fields\":{\"reference_time\":{\"clock_type\":\"system\",\"epoch\":\"2026-11-23T19:19:29.613Z\"},\"time_format\":\"relative_to_epoch\"}}}\n\
                    \x1e{\"time\":1.0,\"name\":\"nesquic:run_started\",\"data\":{}}\n\
                    \x1e{\"time\":2.0,\"name\":\"quic:packet_sent\",\"original_name\":\"transport:packet_sent\",\"group_id\":\"ab\",\"data\":{}}\n\
                    \x1e{\"time\":3.0,\"name\":\"nesquic:metrics_updated\",\"data\":{}}\n";
        std::fs::write(&trace, text).expect("write");
        let copy = write(&trace, &out).expect("copy");
        assert_eq!(copy, QvisCopy { events: 3, library_events: 1 });
        let back = super::super::reader::read(&out).expect("still a valid trace");
        assert_eq!(back.header["qlog_version"], "0.3");
        assert_eq!(back.header["trace"]["common_fields"]["time_format"], "relative");
        assert_eq!(back.header["trace"]["common_fields"]["reference_time"], 1_795_461_569_613.0);
        let names: Vec<&str> = back.events.iter().filter_map(|e| e["name"].as_str()).collect();
        assert_eq!(names, ["nesquic:run_started", "transport:packet_sent", PROBE_TOTALS]);
        assert!(back.events.iter().all(|e| e.get("group_id").is_some() && e.get("original_name").is_none()));
    }
}
