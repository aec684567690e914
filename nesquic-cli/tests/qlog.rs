//! Every run writes qlog traces that standard readers load, with the same figures as the JSON
//! summary and the terminal; `nesquic report` reads them back and diagnoses broken files.

use std::path::Path;
use std::process::{Command, Output};

use nesquic_record::events::Event as NesquicEvent;
use nesquic_record::RunRecord;
use qlog::events::JsonEvent;
use serde_json::Value;

fn nesquic() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nesquic"));
    // Tests ask for the probes they check: `run` turns some on by default as root.
    c.env("NESQUIC_PROBE", "none");
    c.current_dir(env!("CARGO_TARGET_TMPDIR"));
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn run_into(dir: &Path) -> Output {
    let out = nesquic()
        .args(["run", "--size", "5MB", "--repeat", "2", "--interval", "10ms", "--out"])
        .arg(dir)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

#[test]
fn run_writes_loadable_qlog_matching_the_summary() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("run");
    let out = run_into(&dir);
    let summary = RunRecord::load(&dir.join("summary.json")).expect("summary.json");
    let spreads = summary.summary.clone().expect("a summary over the repetitions");
    let median = spreads.goodput_mbps.median;
    let terminal = String::from_utf8_lossy(&out.stdout);
    assert!(terminal.contains(&format!("{median:.1}")), "terminal lacks {median:.1}:\n{terminal}");

    for role in ["server", "client"] {
        let path = dir.join(format!("{role}.sqlog"));
        let bytes = std::fs::read(&path).expect("sqlog");
        let head = String::from_utf8_lossy(&bytes[..bytes.len().min(1024)]);
        assert!(head.contains("\"qlog_version\"") && head.contains("\"qlog_format\":\"JSON-SEQ\""), "{head}");

        // The qlog crate's own reader loads it; unknown nesquic: events come back as JSON events.
        let reader = qlog::reader::QlogSeqReader::with_file(&path).expect("qlog crate reads the header");
        assert_eq!(reader.qlog.file_schema, qlog::QLOGFILESEQ_URI);
        let vp = reader.qlog.trace.vantage_point.clone().expect("vantage point");
        assert_eq!(serde_json::to_value(&vp.ty).expect("ty"), role);
        let events: Vec<qlog::reader::Event> = reader.collect();
        let names: Vec<String> = events
            .iter()
            .map(|e| match e {
                qlog::reader::Event::Json(j) => j.name.clone(),
                qlog::reader::Event::Qlog(q) => format!("{:?}", q.data),
            })
            .collect();
        // A plain JSON-SEQ split sees every record the qlog reader saw: nothing was skipped.
        let records = bytes.split(|b| *b == 0x1e).filter(|r| !r.is_empty()).count();
        assert_eq!(events.len() + 1, records, "{names:?}");
        assert_eq!(names.first().map(String::as_str), Some("nesquic:run_started"));
        assert_eq!(names.last().map(String::as_str), Some("nesquic:run_summary"));
        let snapshots = names.iter().filter(|n| *n == "nesquic:metrics_updated").count();
        assert!(snapshots >= 2, "{role}: {snapshots} snapshots (one final per repetition at least)");

        let times: Vec<f64> = events
            .iter()
            .filter_map(|e| match e {
                qlog::reader::Event::Json(j) => Some(j.time),
                qlog::reader::Event::Qlog(_) => None,
            })
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "times not monotone: {times:?}");

        // Every Nesquic event reads back as its type (docs/qlog.md is tested against the types).
        let typed = nesquic_record::qlog::reader::read(&path).expect("strict reader").nesquic_events().expect("typed");
        let nesquic_records = names.iter().filter(|n| n.starts_with("nesquic:")).count();
        assert_eq!(typed.len(), nesquic_records, "every nesquic: event is one of the typed events");

        let started = typed.iter().find_map(|e| match e {
            NesquicEvent::RunStarted(d) => Some(d),
            _ => None,
        });
        let d = started.expect("run_started");
        assert_eq!(serde_json::to_value(d.role).expect("role"), role);
        assert_eq!(d.lut.name, "quinn");
        assert_eq!(d.testcase.size_bytes, 5_000_000);
        let host = &d.host;
        assert!(host.kernel.is_some() && host.cpu_model.is_some() && host.cores.is_some(), "{host:?}");
        assert!(!d.nesquic.git_revision.is_empty());

        let io = typed.iter().find_map(|e| match e {
            NesquicEvent::IoConfigured(io) => Some(io),
            _ => None,
        });
        let settings = &io.expect("io_configured").settings;
        assert!(settings.gso_max_segments >= 1, "{settings:?}");
        // The kernel's real answer: at least its minimum socket buffer, and what getsockopt says now.
        assert!(settings.recv_buffer >= 2304, "{settings:?}");
        assert_eq!(summary.repetitions[0].io_settings.len(), 2);

        let Some(NesquicEvent::RunSummary(s)) = typed.last() else { panic!("{role}: run_summary is not last") };
        assert_eq!(s.goodput_mbps, spreads.goodput_mbps);
        assert_eq!(s.transfer_s, spreads.transfer_s);
        let cpu = if role == "server" { spreads.server_cpu_s } else { spreads.client_cpu_s };
        assert_eq!(s.cpu_s, cpu);
        let finals: Vec<_> = typed
            .iter()
            .filter_map(|e| match e {
                NesquicEvent::MetricsUpdated(m) if m.last => Some(m),
                _ => None,
            })
            .collect();
        assert_eq!(finals.len(), 2, "one final snapshot per repetition");
        if role == "client" {
            assert_eq!(finals[0].progress_bytes, Some(5_000_000));
        }
    }

    // `nesquic report` prints the same figures back.
    let report = nesquic().arg("report").arg(&dir).output().expect("report");
    assert!(report.status.success(), "{}", stderr(&report));
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains(&format!("{median:.1}")) && text.contains("server") && text.contains("client"), "{text}");
}

/// Every event record after the header, as the qlog crate's generic event (time, name, data).
fn strict_events(bytes: &[u8]) -> Vec<JsonEvent> {
    bytes
        .split(|b| *b == 0x1e)
        .filter(|r| !r.is_empty())
        .skip(1)
        .map(|r| serde_json::from_slice(r).expect("each record is a qlog event"))
        .collect()
}

#[test]
fn out_dir_with_files_is_never_overwritten() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("keep.txt"), "precious").expect("write");
    let out = nesquic().args(["run", "--size", "1MB", "--out"]).arg(tmp.path()).output().expect("run");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("never overwrites"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(tmp.path().join("keep.txt")).expect("kept"), "precious");
}

#[test]
fn broken_qlog_files_are_diagnosed_by_record() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("run");
    run_into(&dir);
    let good = std::fs::read(dir.join("server.sqlog")).expect("sqlog");

    let truncated = tmp.path().join("truncated.sqlog");
    std::fs::write(&truncated, &good[..good.len() - 10]).expect("write");
    let out = nesquic().arg("report").arg(&truncated).output().expect("report");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("truncated") && stderr(&out).contains("record"), "{}", stderr(&out));

    let mut corrupt = good.clone();
    let second = corrupt.iter().enumerate().filter(|(_, b)| **b == 0x1e).nth(2).map(|(i, _)| i).expect("3 records");
    corrupt[second + 1] = b'#'; // the record's opening brace
    let corrupt_path = tmp.path().join("corrupt.sqlog");
    std::fs::write(&corrupt_path, &corrupt).expect("write");
    let out = nesquic().arg("report").arg(&corrupt_path).output().expect("report");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("record 3") && stderr(&out).contains("not valid JSON"), "{}", stderr(&out));

    let out = nesquic().arg("report").arg(tmp.path().join("missing")).output().expect("report");
    assert!(!out.status.success() && stderr(&out).contains("does not exist"), "{}", stderr(&out));
}

#[test]
fn lut_qlog_is_merged_on_one_clock() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("run");
    let out = nesquic().args(["run", "--size", "2MB", "--lut-qlog", "--out"]).arg(&dir).output().expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    for role in ["server", "client"] {
        let path = dir.join(format!("{role}.sqlog"));
        assert!(dir.join(format!("lut-{role}-1.sqlog")).exists(), "raw LUT qlog kept");
        let bytes = std::fs::read(&path).expect("sqlog");
        let events = strict_events(&bytes);
        let quic = events.iter().filter(|e| e.name.starts_with("quic:")).count();
        let ours = events.iter().filter(|e| e.name.starts_with("nesquic:")).count();
        assert!(quic > 100 && ours >= 3, "{role}: {quic} quic events, {ours} nesquic events");
        assert!(events.iter().any(|e| e.name == "quic:packet_sent"), "{role}: no packet_sent");
        let times: Vec<f64> = events.iter().map(|e| e.time).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{role}: not sorted by time");
        // On one clock: the library's events fall between run_started and run_summary.
        let first_quic = events.iter().find(|e| e.name.starts_with("quic:")).expect("quic");
        assert!(first_quic.time > events[0].time, "{role}: library event before run_started");
        assert_eq!(events.last().expect("events").name, "nesquic:run_summary");
        // Still loadable by the qlog crate.
        let reader = qlog::reader::QlogSeqReader::with_file(&path).expect("header");
        assert_eq!(reader.count(), events.len());
    }
    // `nesquic report` reads the run's traces, not the library's raw files beside them.
    let report = nesquic().arg("report").arg(&dir).output().expect("report");
    assert!(report.status.success(), "{}", stderr(&report));
}

/// `--qlog-compat qvis`: what qvis's sequence diagram and congestion graph read (its
/// QlogLoaderV2 and TextSequenceJSONToQlog): a draft-02 header with a numeric reference time,
/// `transport:packet_sent`/`packet_received` with a packet number, `recovery:metrics_updated` with
/// a congestion window, and no other event whose name ends in `:metrics_updated`.
#[test]
fn qvis_copy_has_draft_02_packets_and_congestion_and_no_lookalikes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("run");
    let refused = nesquic().args(["run", "--size", "1MB", "--qlog-compat", "qvis", "--out"]).arg(&dir).output();
    let refused = refused.expect("run");
    assert!(!refused.status.success() && stderr(&refused).contains("add --lut-qlog"), "{}", stderr(&refused));

    let args = ["run", "--size", "2MB", "--lut-qlog", "--qlog-compat", "qvis", "--out"];
    let out = nesquic().args(args).arg(&dir).output().expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    for role in ["server", "client"] {
        let bytes = std::fs::read(dir.join("qvis").join(format!("{role}.sqlog"))).expect("qvis copy");
        let head = String::from_utf8_lossy(&bytes[..1024.min(bytes.len())]).to_string();
        assert!(head.contains("\"qlog_version\":\"0.3\"") && head.contains("\"qlog_format\":\"JSON-SEQ\""), "{head}");
        // qvis's draft-02 format is the point here: its header and packet fields are read as the
        // JSON qvis reads (the qlog crate speaks the current drafts only).
        let header: Value = serde_json::from_slice(bytes.split(|b| *b == 0x1e).nth(1).expect("header")).expect("json");
        let common = &header["trace"]["common_fields"];
        assert_eq!(common["time_format"], "relative");
        assert!(common["reference_time"].as_f64().is_some_and(|t| t > 1.7e12), "{common}");

        let events = strict_events(&bytes);
        let named = |n: &'static str| events.iter().filter(move |e| e.name == n);
        let (sent, received) = (named("transport:packet_sent").count(), named("transport:packet_received").count());
        assert!(sent > 10 && received > 10, "{role}: {sent} packets sent, {received} received");
        assert!(named("transport:packet_sent").all(|e| e.data["header"]["packet_number"].is_u64()));
        let cwnd = named("recovery:metrics_updated").filter(|e| e.data["congestion_window"].is_u64()).count();
        assert!(cwnd > 0, "{role}: no congestion window");
        let lookalikes: Vec<&str> = events
            .iter()
            .map(|e| e.name.as_str())
            .filter(|n| n.ends_with(":metrics_updated") && *n != "recovery:metrics_updated")
            .collect();
        assert!(lookalikes.is_empty(), "{lookalikes:?}");
        assert!(named("nesquic:probe_totals").count() >= 1);
        assert!(events.iter().all(|e| !e.name.starts_with("quic:")));
        let times: Vec<f64> = events.iter().map(|e| e.time).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{role}: not sorted by time");
    }
}

/// Issue 52: with `--lut-qlog`, a library qlog cut short (its last record truncated) or not
/// written at all fails the run after its repetitions, but keeps their record and the traces.
#[test]
fn a_cut_short_or_missing_library_qlog_keeps_the_record() {
    let quinn = Path::new(env!("CARGO_BIN_EXE_nesquic")).with_file_name("nesquic-lut-quinn");
    let quinn = quinn.display();
    let server = format!("{quinn} server --listen $NESQUIC_LISTEN --cert $NESQUIC_CERT --key $NESQUIC_KEY");
    let client = format!("{quinn} client --connect $NESQUIC_CONNECT --ca $NESQUIC_CA --size $NESQUIC_SIZE");
    // The server's qlog loses its last 20 bytes once written (after the server's process ends).
    let cut = format!("sh -c '{server} --qlog \"$NESQUIC_QLOG\" && truncate -s -20 \"$NESQUIC_QLOG\"'");
    let whole = format!("{client} --qlog $NESQUIC_QLOG");
    let tmp = tempfile::tempdir().expect("tempdir");
    for (case, server_cmd, client_cmd, why) in
        [("cut", &cut, &whole, "not valid JSON"), ("missing", &server, &client, "exec wrote no qlog")]
    {
        let dir = tmp.path().join(case);
        let out = nesquic()
            .args(["run", "--lut", "exec", "--server-cmd", server_cmd, "--client-cmd", client_cmd])
            .args(["--size", "2MB", "--repeat", "2", "--lut-qlog", "--out"])
            .arg(&dir)
            .output()
            .expect("run nesquic");
        let err = stderr(&out);
        assert!(!out.status.success(), "{case}: {err}");
        let summary = dir.join("summary.json");
        assert!(err.contains(why) && err.contains(&*summary.to_string_lossy()), "{case}: {err}");
        let record = RunRecord::load(&summary).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(record.repetitions.len(), 2, "{case}");
        assert!(record.repetitions.iter().all(|r| r.payload_verified && r.bytes == 2_000_000), "{case}");
        assert!(record.unfinished.iter().any(|u| u.contains(why)), "{case}: {:?}", record.unfinished);
        assert!(record.failed_repetitions.is_empty() && !record.in_progress, "{case}");
        // Our traces stay whole (unmerged), with their run summary.
        for role in ["server", "client"] {
            let trace = nesquic_record::qlog::reader::read(&dir.join(format!("{role}.sqlog")));
            let trace = trace.unwrap_or_else(|e| panic!("{case}: {e}"));
            assert!(trace.run_summary().expect("typed").is_some(), "{case} {role}: no run_summary");
        }
    }
}
