//! `nesquic run` end to end: real LUT processes over loopback.
//!
//! The LUT executables live next to `nesquic` in the target directory; `cargo test --workspace`
//! (what `just test` runs) builds them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::Role;
use nesquic_record::run::PinnedCpus;

mod common;

fn nesquic() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nesquic"));
    // Tests ask for the probes they check: `run` turns some on by default as root.
    c.env("NESQUIC_PROBE", "none");
    // Run directories (nesquic-runs/...) land in cargo's scratch space, not the source tree.
    c.current_dir(env!("CARGO_TARGET_TMPDIR"));
    c
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_nesquic")).parent().expect("binary has a directory").to_path_buf()
}

fn require_lut_binaries() {
    let lut = target_dir().join("nesquic-lut-quinn");
    assert!(lut.exists(), "{} is missing: run the tests with `cargo test --workspace` (just test)", lut.display());
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Pids of live processes whose environment carries `token` (LUT children inherit it).
fn processes_with_token(token: &str) -> Vec<u32> {
    let needle = format!("NESQUIC_TEST_TOKEN={token}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("procfs").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if let Ok(env) = std::fs::read(entry.path().join("environ")) {
            if env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
                // Zombies still show up until reaped; only count live processes.
                let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
                if !state.contains(") Z") {
                    found.push(pid);
                }
            }
        }
    }
    found
}

#[test]
fn quinn_transfers_verified_payload_with_per_side_figures() {
    require_lut_binaries();
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let out = nesquic()
        .args(["run", "--lut", "quinn", "--size", "5MB", "--repeat", "2", "--json"])
        .arg(&json)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "nesquic run failed: {}", stderr(&out));
    let report = common::load_record(&json);
    assert_eq!(report.size_bytes, 5_000_000);
    assert_eq!(report.lut.name, "quinn");
    assert!(report.lut.version.starts_with("0.11"));
    let reps = &report.repetitions;
    assert_eq!(reps.len(), 2);
    let cores = std::thread::available_parallelism().expect("cores").get() as f64;
    for rep in reps {
        assert_eq!(rep.bytes, 5_000_000);
        assert!(rep.payload_verified);
        let (goodput, transfer) = (rep.goodput_mbps, rep.transfer_s);
        // Goodput is recomputed from its inputs: bits (not bytes) per second, 10^6 per Mbit.
        assert!(goodput > 0.0);
        assert!((goodput - 5_000_000.0 * 8.0 / transfer / 1e6).abs() < 1e-6 * goodput);
        assert!(rep.handshake_ms > 0.0);
        for (side, p) in [("server", &rep.server), ("client", &rep.client)] {
            let cpu = p.cpu_utilisation_pct;
            assert!(cpu > 0.0 && cpu <= 100.0 * cores, "{side} CPU {cpu}% implausible on {cores} cores");
            let (total, user, sys) = (p.cpu_total_s, p.cpu_user_s, p.cpu_system_s);
            assert!((total - user - sys).abs() < 1e-9 && total > 0.0);
        }
    }
    let median = report.summary.as_ref().expect("summary").goodput_mbps.median;
    let (a, b) = (reps[0].goodput_mbps, reps[1].goodput_mbps);
    assert!((median - (a + b) / 2.0).abs() < 1e-9, "median of two is their mean");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("goodput (Mbit/s)") && stdout.contains("payload verified"), "{stdout}");
}

#[test]
fn unknown_lut_lists_known_ones() {
    let out = nesquic().args(["run", "--lut", "nosuchquic"]).output().expect("run nesquic");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("nosuchquic") && err.contains("quinn"), "{err}");
}

#[test]
fn bad_size_is_rejected_with_an_explanation() {
    let out = nesquic().args(["run", "--size", "12 parsecs"]).output().expect("run nesquic");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("--size") && err.contains("12 parsecs"), "{err}");
}

#[test]
fn server_dying_mid_transfer_fails_the_run_without_orphans() {
    require_lut_binaries();
    let token = format!("crash-{}", std::process::id());
    let out = nesquic()
        .args(["run", "--size", "50MB", "--timeout", "60s"])
        .env("NESQUIC_FAULT_SERVER_ABORT_AFTER_BYTES", "1000000")
        .env("NESQUIC_ALLOW_FAULTS", "1")
        .env("NESQUIC_TEST_TOKEN", &token)
        .output()
        .expect("run nesquic");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("server") && err.contains("SIGABRT"), "{err}");
    assert_eq!(processes_with_token(&token), Vec::<u32>::new(), "orphaned LUT processes");
}

#[test]
fn timeout_kills_both_sides() {
    require_lut_binaries();
    let token = format!("timeout-{}", std::process::id());
    let out = nesquic()
        .args(["run", "--size", "100GB", "--timeout", "1500ms"])
        .env("NESQUIC_TEST_TOKEN", &token)
        .output()
        .expect("run nesquic");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("timed out"), "{}", stderr(&out));
    assert_eq!(processes_with_token(&token), Vec::<u32>::new(), "orphaned LUT processes");
}

#[test]
fn missing_lut_executable_says_where_it_looked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = nesquic().args(["run", "--lut-dir"]).arg(dir.path()).output().expect("run nesquic");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("nesquic-lut-quinn") && err.contains(&*dir.path().to_string_lossy()), "{err}");
}

#[test]
fn corrupted_payload_fails_the_run() {
    require_lut_binaries();
    let token = format!("corrupt-{}", std::process::id());
    let out = nesquic()
        .args(["run", "--size", "2MB"])
        .env("NESQUIC_FAULT_SERVER_CORRUPT_AT", "1234567")
        .env("NESQUIC_ALLOW_FAULTS", "1")
        .env("NESQUIC_TEST_TOKEN", &token)
        .output()
        .expect("run nesquic");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("client") && err.contains("1234567"), "{err}");
    assert_eq!(processes_with_token(&token), Vec::<u32>::new(), "orphaned LUT processes");
}

#[test]
fn quiche_has_no_native_io_and_says_what_it_supports() {
    require_lut_binaries();
    let out = nesquic().args(["run", "--lut", "quiche", "--io", "native"]).output().expect("run nesquic");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("does not support --io native") && err.contains("nesquic, plain"), "{err}");
}

#[test]
fn quinn_proto_over_nesquic_io_survives_injected_loss_end_to_end() {
    require_lut_binaries();
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let out = nesquic()
        .args(["run", "--lut", "quinn", "--io", "nesquic", "--size", "3MB", "--json"])
        .arg(&json)
        .env("NESQUIC_FAULT_DROP_RX", "0,200,201,700")
        .env("NESQUIC_ALLOW_FAULTS", "1")
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    let report = common::load_record(&json);
    let rep = &report.repetitions[0];
    assert_eq!((rep.bytes, rep.payload_verified), (3_000_000, true));
    let settings = &rep.io_settings;
    assert!(settings.iter().all(|(_, s)| s.stack == "nesquic-io" && s.gso_max_segments == 64), "{settings:?}");
    // Both sides dropped four received datagrams (the variable reaches both LUT processes).
    let counters = |role: Role| rep.io_layer_counters.iter().find(|p| p.0 == role).map(|p| p.1);
    let (server, client) = (counters(Role::Server).expect("server"), counters(Role::Client).expect("client"));
    assert!(client.recv.datagrams > 2000, "{client:?}");
    assert!(server.send.datagrams >= client.recv.datagrams);
}

#[test]
fn msquic_profiles_and_the_options_that_do_not_apply() {
    require_lut_binaries();
    let out = nesquic()
        .args(["run", "--lut", "msquic", "--msquic-profile", "low-latency", "--size", "2MB"])
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    let out = nesquic().args(["run", "--lut", "quinn", "--msquic-profile", "low-latency"]).output().expect("run");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--msquic-profile only applies to --lut msquic"), "{}", stderr(&out));
    let out = nesquic().args(["run", "--lut", "msquic", "--io", "nesquic"]).output().expect("run");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("does not support --io nesquic"), "{}", stderr(&out));
}

#[test]
fn socket_buffer_knobs_are_applied_or_refused() {
    require_lut_binaries();
    let default: u64 =
        std::fs::read_to_string("/proc/sys/net/core/rmem_default").expect("sysctl").trim().parse().expect("number");
    for (lut, io) in [("quinn", "native"), ("quiche", "nesquic"), ("quinn", "plain")] {
        let dir = tempfile::tempdir().expect("tempdir");
        let json = dir.path().join("run.json");
        let out = nesquic()
            .args(["run", "--lut", lut, "--io", io, "--rcvbuf", "16x", "--size", "2MB", "--json"])
            .arg(&json)
            .output()
            .expect("run nesquic");
        assert!(out.status.success(), "{lut}/{io}: {}", stderr(&out));
        let report = common::load_record(&json);
        for pair in &report.repetitions[0].io_settings {
            // As root the *FORCE option is used, so the kernel grants exactly what was asked.
            assert_eq!(pair.1.recv_buffer, 16 * default, "{lut}/{io}: {pair:?}");
        }
    }
    let out = nesquic().args(["run", "--lut", "msquic", "--rcvbuf", "16x"]).output().expect("run");
    assert!(!out.status.success() && stderr(&out).contains("rcvbuf"), "{}", stderr(&out));
    let out = nesquic().args(["run", "--lut", "quinn", "--rcvbuf", "lots"]).output().expect("run");
    assert!(!out.status.success() && stderr(&out).contains("--rcvbuf"), "{}", stderr(&out));
}

#[test]
fn congestion_control_is_chosen_per_lut_or_refused() {
    require_lut_binaries();
    for (lut, io, cc) in [
        ("quinn", "native", "newreno"),
        ("quinn", "native", "bbr"),
        ("quinn", "nesquic", "bbr"),
        ("quiche", "nesquic", "newreno"),
        ("quiche", "nesquic", "bbr"),
        ("msquic", "native", "bbr"),
    ] {
        let out = nesquic()
            .args(["run", "--lut", lut, "--io", io, "--cc", cc, "--size", "2MB"])
            .output()
            .expect("run nesquic");
        assert!(out.status.success(), "{lut}/{io} --cc {cc}: {}", stderr(&out));
    }
    let out = nesquic().args(["run", "--lut", "msquic", "--cc", "newreno"]).output().expect("run");
    assert!(!out.status.success() && stderr(&out).contains("cc=newreno"), "{}", stderr(&out));
}

/// The CPUs a process's threads may run on, from /proc (`Cpus_allowed_list`), one per thread.
fn thread_cpus(pid: u32) -> Vec<String> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    let status = |t: std::fs::DirEntry| std::fs::read_to_string(t.path().join("status")).ok();
    tasks
        .filter_map(status)
        .filter_map(|s| s.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:").map(|v| v.trim().to_string())))
        .collect()
}

#[test]
fn pin_puts_each_side_and_all_its_threads_on_its_cpu() {
    require_lut_binaries();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Crossed on purpose (server on the higher CPU), so the default placement cannot pass.
    let (server, client) = if cpus > 1 { (1, 0) } else { (0, 0) };
    let token = format!("pin-{}", std::process::id());
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    // Output goes to a file: nobody reads a pipe until the run ends, and a full one would stall it.
    let log = dir.path().join("stderr");
    let mut child = nesquic()
        .args(["run", "--lut", "quinn", "--size", "500MB", "--pin", &format!("{server},{client}")])
        .arg("--json")
        .arg(&json)
        .env("NESQUIC_TEST_TOKEN", &token)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("start nesquic");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = std::collections::BTreeMap::new();
    while seen.len() < 2 && std::time::Instant::now() < deadline {
        for pid in processes_with_token(&token) {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<String> =
                cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            let role = if args.iter().any(|a| a == "server") { "server" } else { "client" };
            let threads = thread_cpus(pid);
            // Past exec and running its runtime's threads: what the run measures.
            if args.first().is_some_and(|a| a.contains("nesquic-lut-quinn")) && threads.len() > 1 {
                seen.insert(role, threads);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let status = child.wait().expect("wait for nesquic");
    assert!(status.success(), "{}", std::fs::read_to_string(&log).unwrap_or_default());
    for (role, cpu) in [("server", server), ("client", client)] {
        let threads = seen.get(role).unwrap_or_else(|| panic!("never saw the {role} running: {seen:?}"));
        assert!(threads.iter().all(|t| *t == cpu.to_string()), "{role} threads on {threads:?}, pinned to {cpu}");
    }
    let record = common::load_record(&json);
    assert_eq!(record.pinned_cpus, Some(PinnedCpus { server, client }));
}

#[test]
fn pin_refuses_cpus_this_machine_does_not_offer() {
    let out = nesquic().args(["run", "--lut", "quinn", "--pin", "0,4095"]).output().expect("run nesquic");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("CPU 4095 is not one nesquic may run on"), "{}", stderr(&out));
    let out = nesquic().args(["run", "--lut", "quinn", "--pin", "0"]).output().expect("run nesquic");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("two CPU numbers"), "{}", stderr(&out));
}

/// summary.json of run directory `dir`, as JSON (what any reader of the file sees).
fn summary_json(dir: &Path) -> serde_json::Value {
    let path = dir.join("summary.json");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Issue 52: a repetition that fails keeps every repetition measured before it, in a record that
/// marks the failure, and the commands that read records say so instead of using it.
#[test]
fn a_failed_repetition_keeps_the_repetitions_measured_before_it() {
    require_lut_binaries();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("run");
    let out = nesquic()
        .args(["run", "--size", "2MB", "--repeat", "3", "--out"])
        .arg(&dir)
        .env("NESQUIC_FAULT_CORRUPT_IN_REPETITION", "3")
        .env("NESQUIC_ALLOW_FAULTS", "1")
        .output()
        .expect("run nesquic");
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    let summary_path = dir.join("summary.json").display().to_string();
    assert!(err.contains("rep 3/3 failed") && err.contains(&summary_path), "{err}");
    assert!(err.contains("payload mismatch at byte offset 1000"), "{err}");
    let record = summary_json(&dir);
    let reps = record["repetitions"].as_array().expect("repetitions");
    assert_eq!(reps.len(), 2, "{record:#}");
    for rep in reps {
        assert_eq!((rep["bytes"].as_u64(), rep["payload_verified"].as_bool()), (Some(2_000_000), Some(true)));
    }
    let failed = record["failed_repetitions"].as_array().expect("failed_repetitions");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["repetition"], 3);
    assert!(failed[0]["error"].as_str().is_some_and(|e| e.contains("payload mismatch at byte offset 1000")));
    assert_eq!(
        (record["summary"]["repetitions"].as_u64(), record["summary"]["failed_repetitions"].as_u64()),
        (Some(2), Some(1))
    );
    let median = record["summary"]["goodput_mbps"]["median"].as_f64().expect("median");
    let goodputs: Vec<f64> = reps.iter().filter_map(|r| r["goodput_mbps"].as_f64()).collect();
    assert!((median - (goodputs[0] + goodputs[1]) / 2.0).abs() < 1e-9, "the median is over the 2 measured only");
    assert_eq!(record.get("in_progress"), None, "the last write says the run finished");

    // `report` reads the traces: the figures of 2 repetitions and the failed one named.
    let report = nesquic().arg("report").arg(&dir).output().expect("report");
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(report.status.success(), "{}", stderr(&report));
    assert!(text.contains("2 repetition(s)") && text.contains("repetition 3 failed"), "{text}");
    // `findings` reads the 2 and says a third failed.
    let findings = nesquic().arg("findings").arg(&dir).output().expect("findings");
    assert!(findings.status.success(), "{}", stderr(&findings));
    assert!(stderr(&findings).contains("repetition 3 failed"), "{}", stderr(&findings));
    // `compare` judges no run with a failed repetition (exit 2: nothing judged), and says why.
    let compare = nesquic().arg("compare").arg(&dir).arg(&dir).output().expect("compare");
    assert_eq!(compare.status.code(), Some(2), "{}", stderr(&compare));
    assert!(stderr(&compare).contains("repetition 3 failed"), "{}", stderr(&compare));

    // A run whose first repetition fails still writes a record that says so.
    let first = tmp.path().join("first");
    let out = nesquic()
        .args(["run", "--size", "2MB", "--repeat", "2", "--out"])
        .arg(&first)
        .env("NESQUIC_FAULT_CORRUPT_IN_REPETITION", "1")
        .env("NESQUIC_ALLOW_FAULTS", "1")
        .output()
        .expect("run nesquic");
    assert!(!out.status.success() && stderr(&out).contains("rep 1/2 failed"), "{}", stderr(&out));
    let record = summary_json(&first);
    assert_eq!(record["repetitions"].as_array().map(Vec::len), Some(0), "{record:#}");
    assert_eq!(record["failed_repetitions"][0]["repetition"], 1, "{record:#}");
    assert_eq!(record.get("summary"), None, "no figures without a measured repetition");
    let report = nesquic().arg("report").arg(&first).output().expect("report");
    assert!(!report.status.success(), "nothing to report");
    assert!(stderr(&report).contains("no repetition was measured: repetition 1 failed"), "{}", stderr(&report));
    let compare = nesquic().arg("compare").arg(&first).arg(&dir).output().expect("compare");
    assert_eq!(compare.status.code(), Some(2), "{}", stderr(&compare));
    assert!(stderr(&compare).contains("no measured repetition"), "{}", stderr(&compare));
}

/// Issue 52: a failed `--overhead` round is left out and named; the rounds before and after it
/// are measured, printed and written, and the exit status says one failed.
#[test]
fn a_failed_overhead_round_keeps_the_other_rounds() {
    require_lut_binaries();
    let tmp = tempfile::tempdir().expect("tempdir");
    let json = tmp.path().join("overhead.json");
    let out = nesquic()
        .args(["run", "--size", "2MB", "--repeat", "3", "--overhead", "--probe", "io", "--json"])
        .arg(&json)
        .env("NESQUIC_FAULT_CORRUPT_IN_REPETITION", "2")
        .env("NESQUIC_ALLOW_FAULTS", "1")
        .output()
        .expect("run nesquic");
    let (err, text) = (stderr(&out), String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("1 of 3 round(s) failed") && err.contains("round 2"), "{err}");
    assert!(text.contains("probe overhead, 2 round(s)") && text.contains("round 2 left out"), "{text}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("the JSON is written")).expect("JSON");
    assert_eq!(report["rounds"], 2, "{report:#}");
    assert_eq!(report["failed_rounds"][0]["round"], 2, "{report:#}");
    assert!(report["failed_rounds"][0]["error"].as_str().is_some_and(|e| e.contains("payload mismatch")));
    for set in report["sets"].as_array().expect("sets") {
        let reps = set["repetitions"].as_array().expect("repetitions");
        assert_eq!(reps.len(), 2, "rounds 1 and 3 of {}", set["probes"]);
        assert!(reps.iter().all(|r| r["payload_verified"] == true));
    }
}

/// Unmounts a tmpfs when dropped (also when the test fails).
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Issue 52: a full disk under `--out` ends the run with an error naming the file, and the
/// record written before (every repetition up to the last write that fitted) stays whole.
#[test]
fn a_full_disk_keeps_the_record_written_before() {
    require_lut_binaries();
    let tmp = tempfile::tempdir().expect("tempdir");
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(tmp.path())
        .status()
        .expect("mount (the tests run as root)");
    assert!(status.success(), "mount a 64 KiB tmpfs on {}", tmp.path().display());
    let _mounted = Mounted(tmp.path().to_path_buf());
    let dir = tmp.path().join("run");
    // Each repetition adds about 2 KB to summary.json and 1 KB to each trace (one snapshot per
    // repetition at this interval): 64 KiB are full well before 40.
    let out = nesquic()
        .args(["run", "--size", "1MB", "--repeat", "40", "--interval", "60s", "--out"])
        .arg(&dir)
        .output()
        .expect("run nesquic");
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("No space left on device") && err.contains(&*dir.to_string_lossy()), "{err}");
    let record = summary_json(&dir);
    let reps = record["repetitions"].as_array().expect("repetitions");
    assert!(!reps.is_empty() && reps.len() < 40, "{} repetitions kept", reps.len());
    assert!(reps.iter().all(|r| r["payload_verified"] == true));
    match record["failed_repetitions"].as_array() {
        // A trace filled the disk during a repetition, and the record of that failure fitted.
        Some(failed) => {
            let error = failed[0]["error"].as_str().unwrap_or_default();
            assert!(error.contains("No space left on device"), "{record:#}");
        }
        // The record itself did not fit: the error says how many repetitions the file keeps.
        None => assert!(err.contains(&format!("keeps the {} repetition(s)", reps.len())), "{err}"),
    }
}
