//! Remote roles over SSH (root): a test host is a network namespace with its own sshd
//! (`common::ssh_host`); the "remote" nesquic is the binary under test.

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::ssh_host::{nesquic_path, SshHost};
use common::{assert_nothing_attached, json_name, load_record, nesquic, our_programs, serial, stderr, Role, RunRecord};
use nesquic_record::events::HostInfo;
use nesquic_record::figures::RepetitionFigures;

/// `nesquic run` with the server on `host`, extra flags after.
fn remote_run(host: &SshHost, extra: &[&str]) -> Command {
    let mut c = nesquic();
    c.args(["run", "--server-host", &host.target()]).args(host.ssh_args());
    c.arg("--remote-nesquic").arg(nesquic_path()).args(extra);
    c
}

/// Per direction: (syscalls, datagrams, bytes) the probes counted for one role.
fn probe_totals(rep: &RepetitionFigures, role: Role, direction: &str) -> (u64, u64, u64) {
    let probes = rep.probes.as_ref().expect("probes");
    let figures = common::role_in(probes, role);
    let rows = || figures.io.iter().filter(|s| json_name(&s.direction) == direction);
    (rows().map(|s| s.timing.calls).sum(), rows().map(|s| s.datagrams).sum(), rows().map(|s| s.bytes).sum())
}

/// The I/O layer's own counters of `role`: (syscalls, datagrams, bytes) for `direction`.
fn own_counters(rep: &RepetitionFigures, role: Role, direction: &str) -> (u64, u64, u64) {
    let pair = rep.io_layer_counters.iter().find(|p| p.0 == role);
    let counters = pair.unwrap_or_else(|| panic!("{role:?} reported no counters: {rep:?}")).1;
    let c = if direction == "send" { counters.send } else { counters.recv };
    (c.syscalls, c.datagrams, c.bytes)
}

/// One role's host in a record.
fn host_of(record: &RunRecord, role: Role) -> &HostInfo {
    &record.hosts.iter().find(|h| h.0 == role).unwrap_or_else(|| panic!("no {role:?} host")).1
}

#[test]
fn quinn_server_on_a_remote_host_is_probed_there() {
    let _serial = serial();
    let host = SshHost::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("remote.json");
    let args = ["--lut", "quinn", "--io", "nesquic", "--size", "5MB", "--probe", "io", "--repeat", "2", "--lut-qlog"];
    let html = dir.path().join("run.html");
    let mut c = remote_run(&host, &args);
    let out = c.arg("--json").arg(&json).arg("--out").arg(dir.path().join("run")).arg("--html").arg(&html).output();
    let out = out.expect("run nesquic");
    assert!(out.status.success(), "{}\nsshd: {}", stderr(&out), host.log());
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Both hosts' probes counted exactly what each LUT's own I/O layer counted.
    assert!(stdout.contains("agree exactly in all 2 repetition(s)") && !stdout.contains("DISAGREE"), "{stdout}");
    assert!(stdout.contains(&format!("server host {}", host.target())), "{stdout}");
    // The remote LUT's own qlog came back and was merged into the server's trace.
    let err = stderr(&out);
    let merged = err.lines().find(|l| l.contains("LUT qlog events into") && l.ends_with("server.sqlog"));
    let count = merged.and_then(|l| l.split_whitespace().nth(2)).and_then(|n| n.parse::<u64>().ok());
    assert!(count.is_some_and(|n| n > 1000), "{err}");
    let record = load_record(&json);
    for rep in &record.repetitions {
        assert!(rep.server.cpu_total_s > 0.0, "{rep:?}");
        for role in [Role::Server, Role::Client] {
            for direction in ["send", "recv"] {
                let probed = probe_totals(rep, role, direction);
                assert_eq!(probed, own_counters(rep, role, direction), "{role:?} {direction}");
                assert!(probed.1 > 0, "{role:?} {direction}: nothing counted");
            }
        }
    }
    // Per host: where it ran, the NIC on the route to the other host, the clock offset.
    let server = host_of(&record, Role::Server);
    assert_eq!(server.name.as_deref(), Some(host.target().as_str()));
    assert!(server.nic.as_deref().is_some_and(|n| n.starts_with("nqssh")), "{server:?}");
    assert!(!server.offloads.is_empty(), "{server:?}");
    // The HTML report names the server's host and its NIC in its Hosts table.
    let page = std::fs::read_to_string(&html).expect("html report");
    let hosts_table = page.split("<h3>Hosts</h3>").nth(1).expect("a Hosts table");
    let nic = server.nic.as_deref().expect("nic");
    assert!(hosts_table.contains(&host.target()) && hosts_table.contains(nic), "{hosts_table:.2000}");
    // One kernel, one clock: the offset measured is within its own uncertainty of zero.
    let clock = server.clock.as_ref().expect("clock");
    let (offset, rtt) = (clock.offset_ns, clock.rtt_ns as i64);
    assert!(offset.abs() <= rtt / 2 + 1_000_000, "clock {clock:?}");
    assert!(host.processes_named("nesquic").is_empty(), "nesquic or its LUT left on the remote host");
}

/// Median over the repetitions of a run of the server's send figures: (syscalls, bytes).
fn median_server_sends(record: &RunRecord) -> (f64, f64) {
    let reps = &record.repetitions;
    let median = |pick: fn((u64, u64, u64)) -> u64| {
        let mut v: Vec<f64> = reps.iter().map(|r| pick(probe_totals(r, Role::Server, "send")) as f64).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(|t| t.0), median(|t| t.2))
}

#[test]
fn remote_server_counts_what_the_same_transfer_counts_locally() {
    let _serial = serial();
    let host = SshHost::start();
    let dir = tempfile::tempdir().expect("tempdir");
    // quinn's own I/O (quinn-udp, GSO capped at 10 datagrams): ~350 sends for 5 MB.
    let args = ["--lut", "quinn", "--size", "5MB", "--probe", "io", "--repeat", "3"];
    let (remote, local) = (dir.path().join("remote.json"), dir.path().join("local.json"));
    let out = remote_run(&host, &args).arg("--json").arg(&remote).output().expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    // The same transfer with both roles here, over a veth pair like the test host's.
    let out = nesquic().arg("run").args(args).args(["--link", "veth", "--json"]).arg(&local).output();
    let out = out.expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    let (remote, local) = (median_server_sends(&load_record(&remote)), median_server_sends(&load_record(&local)));
    // Neither side may count double or miss one of its sockets; beyond that the figures move
    // with timing. Every payload byte leaves the server at least once, but losses on the
    // loaded veth pair add retransmissions: 5.4 to 6.5 MB sent here for 5 MB of payload. How
    // many datagrams each GSO send carries depends on timing too: one CI run saw 434 sends
    // against 368. So both only need to be of the same count.
    assert!(remote.1 >= 5e6 && local.1 >= 5e6, "server bytes below the payload: remote {remote:?}, local {local:?}");
    let (sends, bytes) = (remote.0 / local.0, remote.1 / local.1);
    let same_count = 0.67..=1.5;
    assert!(same_count.contains(&sends), "server sends: remote {remote:?}, local {local:?} (ratio {sends:.3})");
    assert!(same_count.contains(&bytes), "server bytes: remote {remote:?}, local {local:?} (ratio {bytes:.3})");
    let roles = |r: &RunRecord| r.repetitions[0].probes.as_ref().map(|p| p.roles.len());
    assert_eq!(roles(&load_record(&dir.path().join("remote.json"))), Some(2), "both roles' figures");
}

/// The ssh client the local nesquic (`parent`) started.
fn ssh_child_of(parent: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")).ok()?;
    let mut all: Vec<u32> = children.split_whitespace().filter_map(|p| p.parse().ok()).collect();
    // The reaper threads fork: look through every thread's children.
    for task in std::fs::read_dir(format!("/proc/{parent}/task")).ok()?.flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        all.extend(list.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
    }
    all.into_iter().find(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "ssh"))
}

#[test]
fn dropped_ssh_session_fails_cleanly_and_leaves_nothing_behind() {
    let _serial = serial();
    let host = SshHost::start();
    // Kernel probes, so the remote role's eBPF programs are there to be left behind.
    let args = ["--lut", "quinn", "--size", "20GB", "--probe", "io", "--probe-backend", "kernel", "--timeout", "60s"];
    let mut child = remote_run(&host, &args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn");
    let until = Instant::now() + Duration::from_secs(20);
    while host.processes_named("nesquic-lut").is_empty() {
        assert!(Instant::now() < until, "the remote LUT never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(!our_programs().is_empty(), "the remote probes should be attached mid-run");
    let ssh = ssh_child_of(child.id()).expect("nesquic's ssh client");
    // SAFETY: plain syscall on the ssh client this test's nesquic started.
    unsafe { libc::kill(ssh as i32, libc::SIGKILL) };
    let started = Instant::now();
    let out: Output = loop {
        if child.try_wait().expect("wait").is_some() {
            break child.wait_with_output().expect("output");
        }
        assert!(started.elapsed() < Duration::from_secs(20), "nesquic did not end after its SSH session dropped");
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains(&format!("lost the SSH session to {}", host.target())), "{err}");
    let until = Instant::now() + Duration::from_secs(10);
    while !host.processes_named("nesquic").is_empty() {
        assert!(Instant::now() < until, "left on the remote host: {:?}", host.processes_named("nesquic"));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_nothing_attached();
}

fn failing_run(host: &SshHost, extra: &[&str], remote_nesquic: Option<&std::path::Path>) -> String {
    let mut c = nesquic();
    c.args(["run", "--server-host", &host.target()]).args(host.ssh_args());
    c.arg("--remote-nesquic").arg(remote_nesquic.unwrap_or(&nesquic_path())).args(extra);
    let out = c.output().expect("run nesquic");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn another_nesquic_version_on_the_remote_host_is_refused() {
    let _serial = serial();
    let host = SshHost::start();
    let fake = host.dir.path().join("old-nesquic");
    let hello = r#"{"type":"hello","wire":1,"version":"0.0.1 (elsewhere)","host":{}}"#;
    std::fs::write(&fake, format!("#!/bin/sh\nread line\necho '{hello}'\n")).expect("script");
    Command::new("chmod").arg("755").arg(&fake).status().expect("chmod");
    let err = failing_run(&host, &["--size", "1MB"], Some(&fake));
    let ours = format!("{} (", env!("CARGO_PKG_VERSION"));
    assert!(err.contains("nesquic version mismatch") && err.contains("0.0.1 (elsewhere)"), "{err}");
    assert!(err.contains(&ours) && err.contains(&host.target()), "{err}");
}

#[test]
fn unreachable_host_missing_nesquic_and_refused_key_are_clear_errors() {
    let _serial = serial();
    let host = SshHost::start();
    // Nothing listens on port 1 there.
    let mut c = nesquic();
    c.args(["run", "--server-host", &host.target(), "--ssh-option", "Port=1", "--size", "1MB"]);
    let out = c.output().expect("run nesquic");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("cannot reach {} over SSH", host.target())), "{err}");

    let err = failing_run(&host, &["--size", "1MB"], Some(std::path::Path::new("/nonexistent/nesquic")));
    assert!(err.contains(&format!("/nonexistent/nesquic not found on {}", host.target())), "{err}");
    assert!(err.contains("--remote-nesquic"), "{err}");

    // A key the host does not know: batch mode fails at once instead of asking for a password.
    let stranger = host.dir.path().join("stranger");
    let ok = Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f"]).arg(&stranger).status();
    assert!(ok.expect("ssh-keygen").success());
    let mut c = nesquic();
    c.args(["run", "--server-host", &host.target(), "--size", "1MB"]).args(host.ssh_args_with_key(&stranger));
    let out = c.output().expect("run nesquic");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("SSH authentication to {} failed", host.target())), "{err}");
}

#[test]
fn remote_lut_failure_is_reported_with_its_output() {
    let _serial = serial();
    let host = SshHost::start();
    // An address the remote host does not have: its server cannot bind.
    let err = failing_run(&host, &["--size", "1MB", "--server-addr", "10.79.0.1"], None);
    assert!(err.contains(&format!("server on {} ended with exit code", host.target())), "{err}");
    assert!(err.contains("before it listened"), "{err}");
    assert!(host.processes_named("nesquic").is_empty());
}

#[test]
fn client_on_a_remote_host_downloads_from_a_local_server() {
    let _serial = serial();
    let host = SshHost::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let mut c = nesquic();
    c.args(["run", "--client-host", &host.target()]).args(host.ssh_args());
    c.arg("--remote-nesquic").arg(nesquic_path());
    c.args(["--lut", "quinn", "--size", "5MB", "--probe", "io,crypto.open:time", "--json"]).arg(&json);
    let out = c.output().expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    let record = load_record(&json);
    let rep = &record.repetitions[0];
    // The remote client's result (its `done` line) and both roles' probe figures arrived.
    assert_eq!(rep.bytes, 5_000_000, "{rep:?}");
    assert!(rep.goodput_mbps > 0.0, "{rep:?}");
    for role in [Role::Server, Role::Client] {
        assert!(probe_totals(rep, role, "send").1 > 0, "{role:?}: nothing sent");
    }
    // Timed probes: each host calibrated its own, and each role's timed rows were compensated
    // with its own host's figures (the run's `calibration` is the local one).
    assert!(record.calibration.is_some(), "no local calibration: {record:?}");
    let remote = &rep.remote_calibration;
    assert!(remote.len() == 1 && remote[0].0 == Role::Client, "{remote:?}");
    let client_rows = common::role_in(rep.probes.as_ref().expect("probes"), Role::Client);
    let timed: Vec<_> = client_rows.functions.iter().filter(|f| f.timed).collect();
    assert!(!timed.is_empty(), "no timed function on the remote client: {client_rows:?}");
    for f in timed {
        assert!(f.timing.calls > 1000, "{f:?}");
        assert!(f.compensated_mean_ns.is_some(), "not compensated: {f:?}");
    }
    let client = host_of(&record, Role::Client);
    assert_eq!(client.name.as_deref(), Some(host.target().as_str()));
    assert!(host.processes_named("nesquic").is_empty());
}

#[test]
fn a_multi_connection_testcase_runs_with_a_remote_server() {
    let _serial = serial();
    let host = SshHost::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let args = ["--lut", "quinn", "--testcase", "multi-stream", "--connections", "3", "--parallel", "2"];
    let out = remote_run(&host, &args).args(["--streams", "2", "--size", "200KB", "--json"]).arg(&json).output();
    let out = out.expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    let record = load_record(&json);
    let rep = &record.repetitions[0];
    // 3 connections x 2 streams x 200 KB, each stream verified by the local client.
    assert_eq!((rep.bytes, rep.payload_verified), (1_200_000, true), "{rep:?}");
    let w = rep.workload.as_ref().expect("workload");
    assert_eq!((w.connections, w.streams_per_connection), (3, 2), "{w:?}");
    assert!(host.processes_named("nesquic").is_empty());
}
