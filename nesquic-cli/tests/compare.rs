//! `nesquic compare` as a CI gate: real runs that differ on purpose (quinn with GSO on vs off),
//! a run against itself, and bad inputs. Needs root (syscall counts come from the io probes).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use nesquic_record::compare::{Row, Verdict};
use nesquic_record::RunRecord;
use nesquic_render::compare::Report;

/// `compare --format json`'s report.
fn report(out: &Output) -> Report<'static> {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(out)))
}

/// One metric's row of a report.
fn row<'a>(report: &'a Report<'_>, metric: &str) -> &'a Row {
    report.rows.iter().find(|r| r.metric == metric).unwrap_or_else(|| panic!("no {metric} row"))
}

fn nesquic() -> Command {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "compare tests use the eBPF io probes: run them as root");
    let mut c = Command::new(env!("CARGO_BIN_EXE_nesquic"));
    // Tests ask for the probes they check: `run` turns some on by default as root.
    c.env("NESQUIC_PROBE", "none");
    c.current_dir(env!("CARGO_TARGET_TMPDIR"));
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs quinn 5 times with `extra` options into a fresh directory under cargo's scratch space.
fn run(name: &str, size: &str, extra: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("compare-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = nesquic()
        .args(["run", "--size", size, "--repeat", "5", "--probe", "io", "--out"])
        .arg(&dir)
        .args(extra)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    dir
}

/// (GSO on, GSO on again, GSO off), shared by the tests of this file.
fn runs() -> &'static (PathBuf, PathBuf, PathBuf) {
    static RUNS: OnceLock<(PathBuf, PathBuf, PathBuf)> = OnceLock::new();
    RUNS.get_or_init(|| {
        (run("base", "3MB", &[]), run("again", "3MB", &[]), run("nogso", "3MB", &["--lut-opt", "gso=off"]))
    })
}

fn compare(base: &Path, head: &Path, extra: &[&str]) -> Output {
    nesquic().arg("compare").arg(base).arg(head).args(extra).output().expect("compare")
}

#[test]
fn gso_off_is_a_syscall_regression() {
    let (base, _, nogso) = runs();
    let out = compare(base, nogso, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let judged = report(&out);
    let verdict = |m: &str| row(&judged, m).verdict;
    // The payload sender's sends per MB gate; the sums and the per-call figures behind them
    // report (docs/ci.md).
    assert_eq!(verdict("server.sends_per_mb"), Verdict::Regression);
    assert_eq!(verdict("server.syscalls_per_mb"), Verdict::Worse);
    assert_eq!(verdict("server.send_syscalls"), Verdict::Worse);
    assert_eq!(verdict("server.datagrams_per_send"), Verdict::Worse);
    assert!(row(&judged, "server.send_syscalls").change_pct > 100.0);
    // The reverse direction is an improvement, not a regression.
    let out =
        compare(nogso, base, &["--format", "json", "--fail-on", "goodput_mbps<-99%", "--fail-on", "cpu_s>+1000%"]);
    let report = report(&out);
    assert_eq!(row(&report, "server.send_syscalls").verdict, Verdict::Improvement);
}

#[test]
fn a_run_against_itself_and_a_rerun_pass() {
    let (base, again, _) = runs();
    let out = compare(base, base, &[]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no regression"));
    // A rerun of the same configuration, taken separately: its verdict is statistics (a false
    // alarm stays possible, at alpha for the whole family), so only the report is checked here,
    // and the warning that separate runs drift.
    let out = compare(base, again, &["--format", "markdown"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("| metric | base | head |") && text.contains("`server.syscalls_per_mb`"), "{text}");
    assert!(stderr(&out).contains("drift"), "{}", stderr(&out));
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
}

#[test]
fn rules_decide_the_metrics_they_name() {
    let (base, _, nogso) = runs();
    let dir = tempfile::tempdir().expect("tempdir");
    let toml = dir.path().join("gate.toml");
    // Every metric that regresses with GSO off gets a rule it stays within: the gate passes.
    std::fs::write(
        &toml,
        "[fail_on]\nsend_syscalls = \"+100000%\"\nrecv_syscalls = \"+100000%\"\nsyscalls_per_mb = \"+100000%\"\n\
         sends_per_mb = \"+100000%\"\ndata_recvs_per_mb = \"+100000%\"\n\
         bytes_per_send = \"-100%\"\ndatagrams_per_send = \"-100%\"\nbytes_per_recv = \"-100%\"\n\
         datagrams_per_recv = \"-100%\"\ngoodput_mbps = \"-100%\"\ntransfer_s = \"+100000%\"\ncpu_s = \"+100000%\"\n\
         cpu_s_per_gb = \"+100000%\"\n",
    )
    .expect("write");
    let out = compare(base, nogso, &["--thresholds", toml.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    // A tight rule on one metric fails it.
    let out =
        compare(base, nogso, &["--thresholds", toml.to_str().expect("utf-8"), "--fail-on", "server.send_syscalls>+5%"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn bad_inputs_exit_2() {
    let (base, _, _) = runs();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = compare(base, &dir.path().join("missing"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not found"), "{}", stderr(&out));

    let corrupt = dir.path().join("summary.json");
    std::fs::write(&corrupt, "{\"size_bytes\": 3000000, \"repetitions\": [").expect("write");
    let out = compare(base, &corrupt, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not valid JSON"), "{}", stderr(&out));

    let other = run("small", "1MB", &[]);
    let out = compare(base, &other, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("different test cases"), "{}", stderr(&out));

    let out = compare(base, base, &["--fail-on", "speed>+1%"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown metric"), "{}", stderr(&out));
}

#[test]
fn a_single_sqlog_compares_its_role() {
    let (base, _, nogso) = runs();
    let out = compare(&base.join("server.sqlog"), &nogso.join("server.sqlog"), &["--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = report(&out);
    let metrics: Vec<&str> = report.rows.iter().map(|r| r.metric.as_str()).collect();
    assert!(
        metrics.contains(&"server.syscalls_per_mb") && !metrics.iter().any(|m| m.starts_with("client.")),
        "{metrics:?}"
    );
}

fn handshake_calls(dir: &Path) -> Vec<(String, u64)> {
    let summary = RunRecord::load(&dir.join("summary.json")).expect("summary");
    assert_eq!(summary.repetitions[0].bytes, 2_000_000);
    let probes = summary.repetitions[0].probes.as_ref().expect("probes");
    let mut out: Vec<(String, u64)> = probes
        .roles
        .iter()
        .map(|r| {
            let calls = r.functions.iter().map(|f| f.timing.calls).sum();
            (r.role.to_string(), calls)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn exec_lut_runs_an_external_command_like_the_built_in_path() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let quinn = Path::new(env!("CARGO_BIN_EXE_nesquic")).with_file_name("nesquic-lut-quinn");
    let server = format!("{} server --listen $NESQUIC_LISTEN --cert $NESQUIC_CERT --key $NESQUIC_KEY", quinn.display());
    let client = format!("{} client --connect $NESQUIC_CONNECT --ca $NESQUIC_CA --size $NESQUIC_SIZE", quinn.display());
    let (exec_dir, builtin_dir) = (tmp.path().join("exec"), tmp.path().join("builtin"));
    let out = nesquic()
        .args(["run", "--lut", "exec", "--server-cmd", &server, "--client-cmd", &client])
        .args(["--size", "2MB", "--probe", "crypto.handshake", "--out"])
        .arg(&exec_dir)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    let out = nesquic()
        .args(["run", "--size", "2MB", "--probe", "crypto.handshake", "--out"])
        .arg(&builtin_dir)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    // The TLS handshake is deterministic: the same calls on each side, probed through env + sh + exec.
    let (exec, builtin) = (handshake_calls(&exec_dir), handshake_calls(&builtin_dir));
    assert!(exec.iter().all(|(_, n)| *n > 0), "{exec:?}");
    assert_eq!(exec, builtin);

    let out = nesquic()
        .args(["run", "--lut", "exec", "--server-cmd", "/nonexistent/server", "--client-cmd", "x"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("not an executable"), "{}", stderr(&out));
    let out = nesquic().args(["run", "--lut", "exec"]).output().expect("run");
    assert!(!out.status.success() && stderr(&out).contains("--server-cmd"), "{}", stderr(&out));
}

/// A server still running 10 s after its client finished is killed, and the error says that, not
/// "raise --timeout" (the run's own limit, 5 minutes, was never reached; raising it changes nothing).
#[test]
fn a_server_that_outlives_its_client_is_named_not_the_time_limit() {
    let quinn = Path::new(env!("CARGO_BIN_EXE_nesquic")).with_file_name("nesquic-lut-quinn");
    // The real server, then 60 s more of the same process (nesquic runs `exec CMD`; the inner
    // shell execs the sleep, so the kill reaches it).
    let server = format!(
        "sh -c '{} server --listen $NESQUIC_LISTEN --cert $NESQUIC_CERT --key $NESQUIC_KEY && exec sleep 60'",
        quinn.display()
    );
    let client = format!("{} client --connect $NESQUIC_CONNECT --ca $NESQUIC_CA --size $NESQUIC_SIZE", quinn.display());
    let out = nesquic()
        .args(["run", "--lut", "exec", "--server-cmd", &server, "--client-cmd", &client, "--size", "1MB"])
        .output()
        .expect("run");
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("the server was still running 10 s after the client finished"), "{err}");
    assert!(!err.contains("--timeout"), "{err}");
}

#[test]
fn testcases_are_part_of_the_identity_and_bring_their_metrics() {
    // Same total bytes (3 MB), different shape: not comparable.
    let (base, _, _) = runs();
    let streams = run("streams", "1MB", &["--testcase", "multi-stream", "--streams", "3"]);
    let out = compare(base, &streams, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("multi-stream 1x3x1000000 (3000000 bytes)"), "{}", stderr(&out));

    let hs = run("handshakes", "1KB", &["--testcase", "handshakes", "--connections", "40"]);
    let out = compare(&hs, &hs, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = report(&out);
    let metrics: Vec<&str> = report.rows.iter().map(|r| r.metric.as_str()).collect();
    for metric in ["connections_per_s", "handshake_p99_ms"] {
        assert!(metrics.iter().any(|m| m.contains(metric)), "{metric} missing: {metrics:?}");
    }
}
