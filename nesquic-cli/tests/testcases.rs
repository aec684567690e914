//! Testcases end to end: every built-in scenario on every LUT (quinn native and quinn-proto over
//! Nesquic's I/O and the plain loop, quiche, tquic, msquic, quic-go, aioquic, ngtcp2, s2n-quic, tcp-tls), on loopback and on a veth
//! link (root), payloads verified and the per-connection figures consistent with what was asked;
//! each LUT executable's own report listing every connection and stream and adding up; users'
//! scenario files and overrides; clear errors for what cannot run.

mod common;

use common::{assert_done_adds_up, leaked_namespaces, nesquic, run_record, serial, stderr, RunRecord, Shape};
use nesquic_record::figures::RepetitionFigures;

/// Checks one run of `testcase` (sizes as asked) and returns its first repetition.
fn check(report: &RunRecord, testcase: &str, connections: u32, streams: u32, size: u64) -> RepetitionFigures {
    assert_eq!(report.testcase.name, testcase);
    let total = u64::from(connections * streams) * size;
    assert_eq!(report.size_bytes, total, "{testcase}");
    let rep = report.repetitions[0].clone();
    assert_eq!((rep.bytes, rep.payload_verified), (total, true), "{testcase}");
    assert!(rep.goodput_mbps > 0.0);
    if connections == 1 && streams == 1 {
        assert!(rep.workload.is_none(), "bulk has no per-connection figures: {rep:?}");
        return rep;
    }
    let w = rep.workload.as_ref().unwrap_or_else(|| panic!("workload missing in {rep:?}"));
    assert_eq!((w.connections, w.streams_per_connection), (connections, streams));
    let h = &w.handshake_ms;
    assert!(h.min > 0.0 && h.min <= h.p50 && h.p50 <= h.p90 && h.p90 <= h.p99 && h.p99 <= h.max);
    // The repetition's handshake figure is the median connection's.
    assert_eq!(rep.handshake_ms, h.p50, "{testcase}");
    assert!((w.handshakes_per_s - f64::from(connections) / w.elapsed_s).abs() < 1e-6);
    // Aggregate goodput covers all bytes, so it is at least the slowest connection's share.
    assert!(w.connection_goodput_mbps.min <= w.connection_goodput_mbps.max);
    rep
}

/// Every testcase with `lut` (its `--lut`/`--io` arguments) on loopback and veth, small sizes.
fn every_testcase(lut: &[&str]) {
    let _g = serial();
    for link in ["loopback", "veth"] {
        let run = |args: &[&str]| run_record(&[lut, args, &["--link", link]].concat());
        let report = run(&["--testcase", "bulk", "--size", "2MB"]);
        check(&report, "bulk", 1, 1, 2_000_000);

        let report = run(&["--testcase", "multi-conn", "--size", "2MB"]);
        let rep = check(&report, "multi-conn", 4, 1, 2_000_000);
        let workload = |rep: &RepetitionFigures| rep.workload.clone().expect("workload");
        let fairness = workload(&rep).connection_fairness.expect("connection fairness");
        assert!(fairness > 0.25 && fairness <= 1.0, "{lut:?} {link}: Jain index {fairness}");
        assert!(report
            .summary
            .as_ref()
            .and_then(|s| s.workload.as_ref())
            .and_then(|w| w.connection_fairness)
            .is_some());

        let report = run(&["--testcase", "handshakes"]);
        let rep = check(&report, "handshakes", 200, 1, 1_000);
        // 4 at a time out of 200: not a sharing experiment, so no fairness figure.
        assert!(workload(&rep).connection_fairness.is_none(), "{rep:?}");
        assert!(workload(&rep).handshakes_per_s > 10.0);

        let report = run(&["--testcase", "multi-stream", "--size", "1MB"]);
        let rep = check(&report, "multi-stream", 1, 8, 1_000_000);
        let fairness = workload(&rep).stream_fairness.expect("stream fairness");
        assert!(fairness > 0.125 && fairness <= 1.0, "{lut:?} {link}: Jain index {fairness}");
    }
    assert!(leaked_namespaces().is_empty(), "namespaces left behind: {:?}", leaked_namespaces());
}

/// The LUT executable's own `done` report (run directly, `extra`: its `--io`) lists every
/// connection and stream, and they add up to the aggregate; a flipped payload byte on every
/// stream fails the client, naming its offset.
fn done_reports_add_up(executable: &str, extra: &[&str]) {
    let binary = common::lut::lut_binary(executable, "`just build` builds every LUT executable");
    for (connections, parallel, streams) in [(6, 3, 1), (2, 2, 4), (3, 1, 3)] {
        let shape = Shape { connections, parallel, streams, size: 300_000 };
        let done =
            common::direct(&binary, extra, None, shape).unwrap_or_else(|e| panic!("{executable} {extra:?}: {e}"));
        assert_done_adds_up(&done, shape);
    }
    let shape = Shape { connections: 2, parallel: 2, streams: 2, size: 300_000 };
    let corrupt = [("NESQUIC_FAULT_SERVER_CORRUPT_AT", "123457")];
    let err = common::direct_with(&binary, extra, None, shape, &corrupt)
        .expect_err(&format!("{executable} {extra:?}: a corrupted payload was accepted"));
    assert!(err.contains("123457"), "{executable} {extra:?}: {err}");
}

/// One test per LUT and I/O path: every testcase on loopback and veth, and its executable's
/// `done` report adding up (and failing on a corrupted byte).
macro_rules! every_lut {
    ($($name:ident: $executable:literal, [$($arg:literal),*];)*) => {$(
        #[test]
        fn $name() {
            let io: &[&str] = &[$($arg),*];
            every_testcase(&[&["--lut", $executable], io].concat());
            done_reports_add_up($executable, io);
        }
    )*};
}

every_lut! {
    quinn_native: "quinn", [];
    quinn_proto_over_nesquic_io: "quinn", ["--io", "nesquic"];
    quinn_proto_over_plain_io: "quinn", ["--io", "plain"];
    quiche_over_nesquic_io: "quiche", [];
    tquic_over_nesquic_io: "tquic", [];
    msquic: "msquic", [];
    quic_go: "quic-go", [];
    aioquic: "aioquic", [];
    ngtcp2: "ngtcp2", [];
    s2n_quic: "s2n-quic", [];
    tcp_tls: "tcp-tls", [];
}

#[test]
fn a_scenario_file_and_overrides_shape_the_run() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("mine.toml");
    std::fs::write(
        &file,
        "name = \"mine\"\ndescription = \"three in a row, two streams each\"\nconnections = 3\nparallel = 1\nstreams = 2\nsize = \"300KB\"\n",
    )
    .expect("write");
    let file = file.to_str().expect("utf-8 path");
    let report = run_record(&["--testcase-file", file]);
    let rep = check(&report, "mine", 3, 2, 300_000);
    assert!(rep.workload.as_ref().expect("workload").connection_fairness.is_none(), "one at a time: {rep:?}");
    assert_eq!(report.testcase.origin, file);
    // --connections/--streams/--size override the file.
    let report = run_record(&["--testcase-file", file, "--connections", "2", "--streams", "3", "--size", "100KB"]);
    check(&report, "mine", 2, 3, 100_000);
}

#[test]
fn what_cannot_run_is_refused_with_the_reason() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--testcase", "nope"],
            "unknown testcase 'nope'; known testcases: bulk, multi-conn, handshakes, multi-stream",
        ),
        (
            &["--testcase", "multi-conn", "--lut", "exec", "--server-cmd", "/bin/true", "--client-cmd", "/bin/true"],
            "runs one connection with one stream (the commands are given one NESQUIC_SIZE",
        ),
        (&["--testcase", "bulk", "--parallel", "2"], "parallel = 2 exceeds connections = 1"),
        (&["--testcase-file", "/nonexistent/x.toml"], "read testcase file /nonexistent/x.toml"),
    ];
    for (args, expected) in cases {
        let out = nesquic().arg("run").args(*args).output().expect("run nesquic");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(stderr(&out).contains(expected), "{args:?}: {}", stderr(&out));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\ndescription = \"d\"\nsize = \"1MB\"\nstreems = 2\n").expect("write");
    let out = nesquic().arg("run").arg("--testcase-file").arg(&bad).output().expect("run nesquic");
    assert!(
        !out.status.success() && stderr(&out).contains("streems") && stderr(&out).contains("line 4"),
        "{}",
        stderr(&out)
    );

    let out = nesquic().arg("testcases").output().expect("nesquic testcases");
    let text = String::from_utf8_lossy(&out.stdout);
    for name in ["bulk", "multi-conn", "handshakes", "multi-stream"] {
        assert!(text.contains(name), "{text}");
    }
}

#[test]
fn report_prints_a_testcase_back_from_its_traces() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    let out = nesquic()
        .args(["run", "--testcase", "handshakes", "--connections", "20", "--out"])
        .arg(&run)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    let out = nesquic().arg("report").arg(&run).output().expect("report");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "testcase handshakes: 20 connection(s) (4 at once) x 1 stream(s) x 1000 bytes",
        "connections/s",
        "handshake p99 (ms)",
    ] {
        assert!(text.contains(expected), "{expected:?} missing:\n{text}");
    }
}
