//! The probed lifecycle and a repetition's logic, without root and without a QUIC library: LUT
//! processes are shell commands (the `exec` LUT) that print protocol lines, and the probes are
//! an observer that records what it is told.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::channel;
use std::time::Duration;

use nesquic_engine::lifecycle::{start, Launch, ProbeTracker, ProcessObserver, Supervisor};
use nesquic_engine::process::{ProcessEvent, Role};
use nesquic_engine::repetition::{run_repetition, RepetitionOutcome, RepetitionSpec};
use nesquic_engine::{Cause, EngineError};
use nesquic_lut_adapters::exec::ExecLut;
use nesquic_lut_adapters::report::{ClientResult, LutEvent};
use nesquic_lut_adapters::tls::CertFiles;
use nesquic_lut_adapters::IoMode;

/// Records every call, and gives each process one environment variable.
#[derive(Default)]
struct Recording {
    spawned: Vec<(Role, i32)>,
    events: Vec<(Role, LutEvent)>,
    ticks: usize,
}

impl ProcessObserver for Recording {
    fn environment(&mut self, role: Role) -> Result<Vec<(String, OsString)>, Cause> {
        Ok(vec![("NESQUIC_TEST_ROLE".into(), role.to_string().into())])
    }
    fn spawned(&mut self, role: Role, pid: i32) -> Result<(), Cause> {
        self.spawned.push((role, pid));
        Ok(())
    }
    fn tick(&mut self, _progress: u64) -> Result<(), Cause> {
        self.ticks += 1;
        Ok(())
    }
    fn lut_event(&mut self, role: Role, event: &LutEvent) -> Result<(), Cause> {
        self.events.push((role, event.clone()));
        Ok(())
    }
}

fn sh(script: &str) -> Vec<OsString> {
    vec!["-c".into(), script.into()]
}

#[test]
fn a_command_runs_to_its_exit_with_the_observers_environment() {
    let never = AtomicBool::new(false);
    let (tx, rx) = channel();
    let mut watch = Supervisor::new(rx, Duration::from_secs(20), &never, "the command");
    let mut observer = Recording::default();
    // Exits 7 only if the observer's variable arrived: the environment is applied before exec.
    let args = sh(r#"test "$NESQUIC_TEST_ROLE" = process && exit 7; exit 1"#);
    let launch =
        Launch { role: Role::Process, binary: Path::new("/bin/sh"), args: &args, netns: None, inherit_output: true };
    let mut process = start(&launch, tx, &mut observer).unwrap();
    assert_eq!(observer.spawned, vec![(Role::Process, process.pid)], "the observer saw the pid before it ran");
    let exit = watch.until_exit(&mut process, &mut observer).unwrap();
    assert!(!exit.success());
    assert!(exit.describe().contains('7'), "{}", exit.describe());
}

#[test]
fn the_deadline_kills_what_runs_and_says_how_to_raise_it() {
    let never = AtomicBool::new(false);
    let (tx, rx) = channel();
    let mut watch = Supervisor::new(rx, Duration::from_millis(200), &never, "the command");
    let mut observer = Recording::default();
    let args = sh("sleep 30");
    let launch =
        Launch { role: Role::Process, binary: Path::new("/bin/sh"), args: &args, netns: None, inherit_output: true };
    let mut process = start(&launch, tx, &mut observer).unwrap();
    let err = watch.until_exit(&mut process, &mut observer).unwrap_err().to_string();
    assert!(err.contains("timed out") && err.contains("--timeout"), "{err}");
    assert!(observer.ticks > 0, "the observer was ticked while waiting");
    let pid = process.pid;
    drop(process);
    // Killed; its waiter thread reaps it (asynchronously): the pid goes away, it does not linger.
    let gone = |pid: i32| !Path::new(&format!("/proc/{pid}")).exists();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !gone(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(gone(pid), "pid {pid} still exists 5 s after the kill");
}

#[test]
fn interruption_is_an_error_naming_what_was_killed() {
    let interrupted = AtomicBool::new(true);
    let (_tx, rx) = channel::<ProcessEvent>();
    let mut watch = Supervisor::new(rx, Duration::from_secs(20), &interrupted, "the LUT processes");
    let err = watch.next(&mut []).unwrap_err().to_string();
    assert!(err.starts_with("interrupted: the LUT processes killed"), "{err}");
}

#[test]
fn a_tracker_without_probes_collects_nothing() {
    let mut tracker = ProbeTracker::new(None, None, None);
    tracker.spawned(Role::Process, 1).unwrap();
    let probed = tracker.collect(true, &[Role::Process]).unwrap();
    assert!(probed.metrics.is_none() && probed.profile.is_none() && probed.agents.is_empty());
    assert_eq!(tracker.pids, vec![(Role::Process, 1)]);
}

/// One repetition of the `exec` LUT with these server and client scripts.
fn repetition(server: &str, client: &str, timeout: Duration) -> (Result<RepetitionOutcome, EngineError>, Recording) {
    let dir = tempfile::tempdir().unwrap();
    let script = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        format!("/bin/sh {}", path.display())
    };
    let lut = ExecLut { server_cmd: script("server.sh", server), client_cmd: script("client.sh", client) };
    let certs = CertFiles { cert: "/nonexistent/cert.der".into(), key: "/nonexistent/key.der".into() };
    let never = AtomicBool::new(false);
    let spec = RepetitionSpec {
        lut: &lut,
        binary: Path::new("/usr/bin/env"),
        io: IoMode::Native,
        workload: nesquic_testcases::Workload::bulk(1000),
        certs: &certs,
        timeout,
        interrupted: &never,
        progress_after: Duration::from_secs(3600),
        label: "test".into(),
        options: &[],
        duty: None,
        topology: None,
        remote: None,
        lut_qlog: None,
    };
    let mut observer = Recording::default();
    let outcome = run_repetition(&spec, &mut observer);
    (outcome, observer)
}

const LISTEN: &str = r#"echo '{"event":"listening","addr":"127.0.0.1:4433"}'"#;

#[test]
fn a_repetition_collects_both_exits_and_the_clients_result() {
    // The client checks it was told where the server listens.
    let client = r#"test "$NESQUIC_CONNECT" = 127.0.0.1:4433 || exit 9
        echo '{"event":"progress","bytes":500}'
        echo '{"event":"done","bytes":1000,"handshake_ns":1500000,"transfer_ns":2000000}'"#;
    let (outcome, observer) = repetition(&format!("{LISTEN}; sleep 0.2"), client, Duration::from_secs(20));
    let outcome = outcome.unwrap();
    assert_eq!(
        outcome.client_result,
        ClientResult {
            bytes: 1000,
            handshake_ns: 1_500_000,
            transfer_ns: 2_000_000,
            elapsed_ns: 0,
            connections: vec![]
        }
    );
    assert!(outcome.server.success() && outcome.client.success());
    let roles: Vec<Role> = observer.spawned.iter().map(|(r, _)| *r).collect();
    assert_eq!(roles, [Role::Server, Role::Client], "server first, client once it listened");
    let events: Vec<&LutEvent> = observer.events.iter().map(|(_, e)| e).collect();
    assert!(matches!(events[0], LutEvent::Listening { .. }), "{events:?}");
    assert!(events.iter().any(|e| matches!(e, LutEvent::Progress { bytes: 500 })), "{events:?}");
}

#[test]
fn a_crashing_client_ends_the_repetition_with_its_status_and_output() {
    let (outcome, _) = repetition(
        &format!("{LISTEN}; sleep 30"),
        "echo 'handshake failed: bad certificate' >&2; exit 3",
        Duration::from_secs(20),
    );
    let err = outcome.unwrap_err().to_string();
    assert!(err.contains("client") && err.contains('3') && err.contains("bad certificate"), "{err}");
}

#[test]
fn a_server_that_never_listens_times_out() {
    let (outcome, observer) = repetition("sleep 30", "true", Duration::from_millis(300));
    let err = outcome.unwrap_err().to_string();
    assert!(err.contains("timed out"), "{err}");
    assert_eq!(observer.spawned.len(), 1, "the client never started");
}

#[test]
fn a_client_that_exits_without_a_result_is_an_error() {
    let (outcome, _) = repetition(&format!("{LISTEN}; sleep 0.1"), "true", Duration::from_secs(20));
    let err = outcome.unwrap_err().to_string();
    assert!(err.contains("without reporting a result"), "{err}");
}
