//! A strict JSON-SEQ qlog reader: every problem is reported with the record number and byte
//! offset, so a truncated or corrupt file is diagnosed instead of silently skipped.

use std::path::Path;

use serde_json::Value;

use crate::events::{Event, RunStarted, RunSummary};
use crate::RecordError;

/// A problem in the bytes of a trace (the caller adds the file).
type Problem = String;

/// A parsed trace.
#[derive(Debug)]
pub struct QlogTrace {
    /// The header record.
    pub header: Value,
    /// Every event, in file order.
    pub events: Vec<Value>,
}

impl QlogTrace {
    /// Events with this name.
    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.events.iter().filter(move |e| e["name"] == name)
    }

    /// Nesquic's events, typed, in file order (a library's own merged events are skipped). A
    /// Nesquic event whose data does not match its type is a problem naming it.
    pub fn nesquic_events(&self) -> Result<Vec<Event>, Problem> {
        let typed = self.events.iter().filter_map(|e| Event::from_record(e).map(|r| (e, r)));
        typed
            .map(|(e, r)| {
                r.map_err(|err| format!("event {} at {} ms does not match its type: {err}", e["name"], e["time"]))
            })
            .collect()
    }

    /// The run's `run_summary` (None: the run did not finish).
    pub fn run_summary(&self) -> Result<Option<RunSummary>, Problem> {
        Ok(self.nesquic_events()?.into_iter().find_map(|e| match e {
            Event::RunSummary(s) => Some(*s),
            _ => None,
        }))
    }

    /// The run's `run_started`.
    pub fn run_started(&self) -> Result<Option<RunStarted>, Problem> {
        Ok(self.nesquic_events()?.into_iter().find_map(|e| match e {
            Event::RunStarted(s) => Some(*s),
            _ => None,
        }))
    }

    /// `trace.vantage_point.type`.
    pub fn vantage(&self) -> &str {
        self.header["trace"]["vantage_point"]["type"].as_str().unwrap_or("unknown")
    }
}

/// Reads and validates `path` (a regular file, bounded: traces come with run directories from
/// anywhere, and one may be a link to /dev/zero).
pub fn read(path: &Path) -> Result<QlogTrace, RecordError> {
    let bytes = crate::files::read_bounded(path, crate::files::MAX_LUT_QLOG_BYTES)?;
    parse(&bytes).map_err(|problem| RecordError::Qlog { path: path.to_path_buf(), problem })
}

/// Reads and validates trace `rel` of run directory `dir`: only inside it, never through a link
/// ([`crate::files::read_in`]): a run directory from elsewhere may hold `server.sqlog` as a link
/// to a file of this host.
pub fn read_in(dir: &Path, rel: &Path) -> Result<QlogTrace, RecordError> {
    let bytes = crate::files::read_in(dir, rel, crate::files::MAX_LUT_QLOG_BYTES)?;
    let path = dir.join(rel);
    parse(&bytes).map_err(|problem| RecordError::Qlog { path, problem })
}

/// Like [`read`], but accepts events out of time order (for a trace about to be sorted).
pub fn read_unordered(path: &Path) -> Result<QlogTrace, RecordError> {
    let bytes = crate::files::read_bounded(path, crate::files::MAX_LUT_QLOG_BYTES)?;
    parse_records(&bytes, false).map_err(|problem| RecordError::Qlog { path: path.to_path_buf(), problem })
}

/// Parses JSON-SEQ bytes: records start with 0x1E and end with LF; the first is the header;
/// event times never decrease.
pub fn parse(bytes: &[u8]) -> Result<QlogTrace, Problem> {
    parse_records(bytes, true)
}

fn parse_records(bytes: &[u8], ordered: bool) -> Result<QlogTrace, Problem> {
    if bytes.is_empty() {
        return Err("the file is empty".into());
    }
    if bytes[0] != 0x1e {
        return Err(format!("byte 0 is {:#04x}, not the record separator 0x1E: not JSON-SEQ (RFC 7464)", bytes[0]));
    }
    let mut header = None;
    let mut events = Vec::new();
    let mut offset = 0;
    let mut last_time = f64::NEG_INFINITY;
    for (index, record) in bytes.split(|b| *b == 0x1e).enumerate().skip(1) {
        let at = offset + 1;
        offset += record.len() + 1;
        let n = index; // 1-based record number
        if record.last() != Some(&b'\n') {
            return Err(format!("record {n} (byte {at}) is truncated: it does not end with a line feed"));
        }
        let value: Value =
            serde_json::from_slice(record).map_err(|e| format!("record {n} (byte {at}) is not valid JSON: {e}"))?;
        if header.is_none() {
            for field in ["file_schema", "serialization_format", "trace"] {
                if value.get(field).is_none() {
                    return Err(format!("record 1 (the header) has no `{field}`"));
                }
            }
            header = Some(value);
            continue;
        }
        let time = value["time"].as_f64().ok_or_else(|| format!("record {n} (byte {at}) has no numeric `time`"))?;
        if value["name"].as_str().is_none() {
            return Err(format!("record {n} (byte {at}) has no `name`"));
        }
        if ordered && time < last_time {
            return Err(format!("record {n} (byte {at}) goes back in time ({time} ms after {last_time} ms)"));
        }
        last_time = time;
        events.push(value);
    }
    Ok(QlogTrace { header: header.ok_or("no header record")?, events })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &[u8] = b"\x1e{\"file_schema\":\"x\",\"serialization_format\":\"y\",\"trace\":{}}\n\x1e{\"time\":1.5,\"name\":\"nesquic:a\",\"data\":{}}\n";

    #[test]
    fn reads_a_good_trace() {
        let t = parse(GOOD).expect("parses");
        assert_eq!(t.events.len(), 1);
        assert_eq!(t.named("nesquic:a").count(), 1);
    }

    #[test]
    fn problems_name_the_record() {
        let truncated = &GOOD[..GOOD.len() - 5];
        assert!((parse(truncated).expect_err("truncated")).contains("record 2"));
        let corrupt = [&GOOD[..GOOD.len() - 3], b"x}\n"].concat();
        assert!((parse(&corrupt).expect_err("corrupt")).contains("record 2 (byte"));
        assert!((parse(b"{}\n").expect_err("plain json")).contains("0x1E"));
        let backwards = [GOOD, b"\x1e{\"time\":1.0,\"name\":\"n\",\"data\":{}}\n"].concat();
        assert!((parse(&backwards).expect_err("time")).contains("back in time"));
    }
}
