//! `nesquic matrix`: every combination runs, in rounds, into one table; impossible ones are
//! listed as skipped; bad lists are errors.

use std::process::Command;

use common::{json_name, load_json, load_record, Role};
use nesquic_record::io::IoSource;
use nesquic_render::matrix::Row;

mod common;

fn nesquic() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nesquic"));
    // Tests ask for the probes they check: `run` turns some on by default as root.
    c.env("NESQUIC_PROBE", "none");
    c.current_dir(env!("CARGO_TARGET_TMPDIR"));
    c
}

/// `nesquic matrix ARGS` with its runs under `dir`; fails the test unless it succeeds; returns its
/// stdout and the rows of its `--json`.
fn matrix(dir: &tempfile::TempDir, args: &[&str]) -> (String, Vec<Row>) {
    let json = dir.path().join("matrix.json");
    let out = nesquic()
        .arg("matrix")
        .args(args)
        .arg("--out")
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8_lossy(&out.stdout).into_owned(), load_json(&json))
}

#[test]
fn every_io_path_of_two_luts_lands_in_one_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (stdout, rows) =
        matrix(&dir, &["--lut", "quinn,quiche", "--io", "native,nesquic,plain", "--size", "2MB", "--repeat", "2"]);
    let combos: Vec<(String, String)> = rows.iter().map(|r| (r.lut.clone(), json_name(&r.io))).collect();
    let expected =
        [("quinn", "native"), ("quinn", "nesquic"), ("quinn", "plain"), ("quiche", "nesquic"), ("quiche", "plain")];
    assert_eq!(combos, expected.map(|(a, b)| (a.to_string(), b.to_string())).to_vec());
    for r in rows {
        assert_eq!(r.rounds, 2, "{r:?}");
        assert_eq!(r.run_dirs.len(), 2);
        for d in &r.run_dirs {
            assert!(d.join("summary.json").exists(), "{}", d.display());
        }
        assert!(r.summary.goodput_mbps.median > 0.0);
        // What bound goodput: per-thread times are read whatever the probes.
        let binding = r.binding.as_deref().expect("a binding constraint");
        assert!(["CPU (", "none named"].iter().any(|l| binding.contains(l)), "{binding}");
        let io = json_name(&r.io);
        if io == "native" {
            // No probes: quinn-udp's syscalls are not counted by anyone.
            assert!(r.figures.server_syscalls_per_mb.is_none(), "{r:?}");
        } else {
            // The I/O layer counts its own: a plain loop is one datagram per syscall.
            assert_eq!(r.figures.syscall_source.map(IoSource::label), Some("io-layer"));
            let per_send = r.figures.server_datagrams_per_send.expect("per send");
            if io == "plain" {
                assert!((per_send - 1.0).abs() < 1e-9, "{r:?}");
            } else {
                assert!(per_send > 4.0, "{r:?}");
            }
        }
    }
    assert!(stdout.contains("skipped: LUT 'quiche' does not support --io native"), "{stdout}");
    assert!(stdout.contains("goodput Mbit/s") && stdout.contains("binding constraint"), "{stdout}");
}

#[test]
fn unknown_lut_and_io_are_errors() {
    let out = nesquic().args(["matrix", "--lut", "quinn,nope"]).output().expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown LUT 'nope'"));
    let out = nesquic().args(["matrix", "--io", "fast"]).output().expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--io fast"));
}

#[test]
fn testcases_are_a_dimension_on_every_lut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (stdout, rows) =
        matrix(&dir, &["--lut", "quinn,quiche", "--testcase", "bulk,multi-stream", "--size", "1MB", "--repeat", "1"]);
    let cells: Vec<(String, String, usize)> =
        rows.iter().map(|r| (r.lut.clone(), r.testcase.name.clone(), r.summary.repetitions)).collect();
    let expected = [("quinn", "bulk"), ("quinn", "multi-stream"), ("quiche", "bulk"), ("quiche", "multi-stream")];
    assert_eq!(cells, expected.map(|(l, t)| (l.to_string(), t.to_string(), 1)).to_vec());
    for multi in [&rows[1], &rows[3]] {
        assert_eq!(multi.testcase.workload.streams, 8);
        let fairness = multi.summary.workload.as_ref().and_then(|w| w.stream_fairness).expect("fairness");
        assert!(fairness.median > 0.125);
    }
    assert!(!stdout.contains("skipped"), "{stdout}");
    let out = nesquic().args(["matrix", "--testcase", "bulk,nope"]).output().expect("run nesquic");
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("unknown testcase 'nope'"));
}

#[test]
fn tcp_tls_is_the_reference_row_and_ratios_come_from_the_medians() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, rows) = matrix(&dir, &["--lut", "quinn,tcp-tls", "--size", "2MB", "--repeat", "1"]);
    let row = |lut: &str| rows.iter().find(|r| r.lut == lut).expect("row");
    let (quinn, tcp) = (row("quinn"), row("tcp-tls"));
    let versus = |r: &Row| r.versus.clone().unwrap_or_else(|| panic!("no versus: {r:?}"));
    let (quinn_versus, tcp_versus) = (versus(quinn), versus(tcp));
    assert_eq!((tcp_versus.goodput_ratio, tcp_versus.cpu_per_byte_ratio), (1.0, 1.0), "{tcp:?}");
    assert_eq!(quinn_versus.reference, "tcp-tls");
    let goodput = |r: &Row| r.summary.goodput_mbps.median;
    let cpu = |r: &Row| r.summary.server_cpu_s.median + r.summary.client_cpu_s.median;
    assert!((quinn_versus.goodput_ratio - goodput(quinn) / goodput(tcp)).abs() < 1e-9, "{quinn:?}");
    assert!((quinn_versus.cpu_per_byte_ratio - cpu(quinn) / cpu(tcp)).abs() < 1e-9, "{quinn:?}");
}

/// `--probe profile:9999,io`: one table of CPU ns per datagram by component across LUTs, from each
/// run's measured cost (per-packet figures times datagrams give back the CPU time).
#[test]
fn cost_per_packet_by_component_is_one_table_across_luts() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A higher rate than the default (499 Hz): 20 MB is a few tens of ms of CPU per side.
    let args = ["--lut", "quinn,msquic", "--size", "20MB", "--repeat", "1", "--probe", "profile:9999,io"];
    let (stdout, rows) = matrix(&dir, &args);
    assert!(stdout.contains("CPU ns per datagram by component"), "{stdout}");
    for r in &rows {
        let summary = load_record(&r.run_dirs[0].join("summary.json"));
        let rep = &summary.repetitions[0];
        let packet_cost = r.packet_cost.as_ref().unwrap_or_else(|| panic!("no packet cost: {r:?}"));
        for (side, role, cost, cpu) in [
            ("server", Role::Server, &packet_cost.server, &rep.server),
            ("client", Role::Client, &packet_cost.client, &rep.client),
        ] {
            let cost = cost.as_ref().unwrap_or_else(|| panic!("{side}: {r:?}"));
            let total = cost.ns_per_datagram;
            let components = &cost.components;
            // Where every stack must spend: sealing/opening, sending/receiving, the connection.
            for name in ["crypto", "packet_io", "connection"] {
                assert!(components.get(name).is_some_and(|v| *v > 0.0), "{side} {name}: {r:?}");
            }
            let sum: f64 = components.values().sum();
            assert!((sum - total).abs() <= 1e-6 * total, "{side}: components {sum} vs total {total}");
            // The figure is the run's own: ns per datagram x datagrams = the side's CPU time.
            let profile = rep.profile.as_ref().expect("profile");
            let role = profile.roles.iter().find(|x| x.role == role).expect("role");
            let datagrams = role.cost.as_ref().expect("cost").datagrams as f64;
            let cpu_s = cpu.cpu_total_s;
            assert!(
                (total * datagrams / 1e9 - cpu_s).abs() <= 1e-6 * cpu_s,
                "{side}: {total} x {datagrams} vs {cpu_s}"
            );
        }
    }
}

/// Issue 52: a cell whose runs fail is named under "failed:" and the matrix goes on; the other
/// cells' rows are printed and written, and the exit status says a run failed.
#[test]
fn a_failed_cell_is_named_and_the_others_are_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("matrix.json");
    // The quinn and TCP+TLS servers obey the abort; quiche's does not (its runs succeed).
    let out = nesquic()
        .args(["matrix", "--lut", "quinn,quiche", "--size", "2MB", "--repeat", "2", "--out"])
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .env("NESQUIC_FAULT_SERVER_ABORT_AFTER_BYTES", "100000")
        .env("NESQUIC_ALLOW_FAULTS", "1")
        .output()
        .expect("run nesquic");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("2 of 4 run(s) failed"), "{stderr}");
    let failed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("failed: quinn --io")).collect();
    assert_eq!(failed.len(), 2, "{stdout}");
    assert!(failed[0].contains("round 1") && failed[1].contains("round 2"), "{stdout}");
    let rows: Vec<Row> = load_json(&json);
    assert_eq!(rows.iter().map(|r| (r.lut.as_str(), r.rounds)).collect::<Vec<_>>(), [("quiche", 2)]);
}
