//! The probed lifecycle and a repetition's logic, without root and without a QUIC library: LUT
//! processes are shell commands (the `exec` LUT) that print protocol lines, and the probes are
//! an observer that records what it is told, or the real tracker over a fake kernel session
//! ([`KernelProbes`]) and fake user-space agents ([`AgentPlan`], [`UserAgent`]).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use nesquic_ebpf::layout::NqDatagramEvent;
use nesquic_ebpf::metrics::{AgentLost, Direction, FunctionMetrics, Mechanism, Syscall, SyscallMetrics, Timing};

const MECHANISM_INLINE_HOOK: &str = Mechanism::InlineHook.as_str();
const MECHANISM_INTERPOSITION: &str = Mechanism::Interposition.as_str();
const MECHANISM_UPROBE: &str = Mechanism::Uprobe.as_str();
use nesquic_ebpf::profile::{ProcessMaps, Profile};
use nesquic_ebpf::sites::{ProbeSite, SiteKind};
use nesquic_ebpf::user::{PatchStatus, PlannedFunction, UserError};
use nesquic_ebpf::ResolvedFunction;
use nesquic_ebpf::{Metrics, RoleMetrics};
use nesquic_engine::backend::{Fallback, UserProbes};
use nesquic_engine::duty::DutySpec;
use nesquic_engine::kernel::KernelProbes;
use nesquic_engine::user::{AgentPlan, UserAgent};

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
    let launch = Launch::command(Path::new("/bin/sh"), &args);
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
    let launch = Launch::command(Path::new("/bin/sh"), &args);
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
fn a_limit_past_what_the_clock_holds_never_expires_and_does_not_panic() {
    let never = AtomicBool::new(false);
    let (_tx, rx) = channel::<ProcessEvent>();
    // Instant + Duration::MAX overflows: the deadline is as far as the clock goes instead.
    let mut watch = Supervisor::new(rx, Duration::MAX, &never, "the command");
    assert!(watch.deadline() > Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600));
    watch.poll = Duration::from_millis(1);
    assert!(matches!(watch.next(&mut []), Ok(None)), "nothing happened within a poll: no event, no timeout");
}

#[test]
fn a_shortened_deadline_says_why_and_never_moves_back() {
    let never = AtomicBool::new(false);
    let (_tx, rx) = channel::<ProcessEvent>();
    let mut watch = Supervisor::new(rx, Duration::from_secs(60), &never, "the LUT processes");
    let soon = Instant::now() + Duration::from_millis(20);
    watch.shorten(soon, || "the server lingered".into());
    watch.shorten(soon + Duration::from_secs(30), || unreachable!("a later instant does not shorten"));
    assert_eq!(watch.deadline(), soon);
    watch.poll = Duration::from_millis(5);
    let err = loop {
        if let Err(e) = watch.next(&mut []) {
            break e.to_string();
        }
    };
    assert_eq!(err, "timed out: the server lingered");
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
        pin: None,
        client: None,
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
    let started = std::time::Instant::now();
    let (outcome, _) = repetition(
        &format!("{LISTEN}; sleep 30"),
        "echo 'handshake failed: bad certificate' >&2; exit 3",
        Duration::from_secs(20),
    );
    let err = outcome.unwrap_err().to_string();
    assert!(err.contains("client") && err.contains('3') && err.contains("bad certificate"), "{err}");
    // The server, still running, gets a short grace to fail on its own, then is killed.
    assert!(!err.contains("and the server"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "waited {:?} for the server", started.elapsed());
}

#[test]
fn when_both_sides_fail_both_are_reported_whichever_exits_first() {
    // The client finds the corruption; the server, told by the closing connection, exits first.
    let (outcome, _) = repetition(
        &format!("{LISTEN}; sleep 0.1; echo 'write payload: connection lost: closed by peer' >&2; exit 1"),
        "sleep 0.4; echo 'payload differs at byte 1234567' >&2; exit 2",
        Duration::from_secs(20),
    );
    let err = outcome.unwrap_err().to_string();
    assert!(err.starts_with("server") && err.contains("closed by peer"), "{err}");
    assert!(err.contains("and the client") && err.contains("1234567") && err.contains("exit code 2"), "{err}");
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

/// A kernel probe session without the kernel: it counts `calls` to one function while its
/// function probes count, and records what the engine asked of it.
#[derive(Default)]
struct FakeKernel {
    tracked: Vec<(u32, Role)>,
    /// Every switch, in order: ("attached" | "counting", on).
    switches: Vec<(&'static str, bool)>,
    profiling: bool,
    profiled: Vec<Vec<Role>>,
    cleared: usize,
}

/// What the fake's one function counted: 1,000 calls of 64 bytes.
const CALLS: u64 = 1000;

impl KernelProbes for FakeKernel {
    fn track(&mut self, pid: u32, role: Role) -> Result<(), EngineError> {
        self.tracked.push((pid, role));
        Ok(())
    }
    fn set_functions_counting(&mut self, on: bool) -> Result<(), EngineError> {
        self.switches.push(("counting", on));
        Ok(())
    }
    fn set_functions_attached(&mut self, on: bool) -> Result<(), EngineError> {
        self.switches.push(("attached", on));
        Ok(())
    }
    fn detaching(&self) -> bool {
        false
    }
    fn is_profiling(&self) -> bool {
        self.profiling
    }
    fn drain_datagram_events(&mut self) -> Vec<NqDatagramEvent> {
        Vec::new()
    }
    fn snapshot(&self, roles: &[Role]) -> Result<Metrics, EngineError> {
        let function = |role| RoleMetrics {
            role,
            io: Vec::new(),
            functions: vec![FunctionMetrics {
                category: "crypto.seal".into(),
                name: "seal".into(),
                object: "/fake".into(),
                timing: Timing {
                    calls: CALLS,
                    total_ns: CALLS * 100,
                    p50_le_ns: 128,
                    p99_le_ns: 128,
                    hist: Vec::new(),
                },
                bytes: CALLS * 64,
                timed: true,
                site: None,
                compensated_mean_ns: None,
                compensation_uncertainty_ns: None,
                duty: None,
                mechanism: Mechanism::Uprobe,
            }],
            io_crosscheck: Vec::new(),
            agent_lost: None,
            byte_stream: false,
            blocking_calls: false,
        };
        Ok(Metrics {
            io_mechanism: None,
            function_mechanism: Some("uprobe".into()),
            kprobes_available: false,
            roles: roles.iter().map(|&r| function(r)).collect(),
            lost: Default::default(),
            kernel_io: Default::default(),
        })
    }
    fn profile(&mut self, _maps: &HashMap<u32, ProcessMaps>, roles: &[Role]) -> Result<Profile, EngineError> {
        self.profiled.push(roles.to_vec());
        Ok(Profile { frequency_hz: 99, clock: Default::default(), roles: Vec::new(), sampler: None, maps_reads: None })
    }
    fn clear(&mut self) -> Result<(), EngineError> {
        self.cleared += 1;
        Ok(())
    }
}

#[test]
fn duty_cycled_counts_are_scaled_by_the_measured_attached_fraction() {
    let mut kernel = FakeKernel::default();
    let duty = DutySpec { window: Duration::from_millis(20), period: Duration::from_millis(100) };
    let mut tracker = ProbeTracker::new(Some(&mut kernel), None, Some(duty));
    tracker.spawned(Role::Server, 42).unwrap();
    let until = Instant::now() + Duration::from_millis(350);
    while Instant::now() < until {
        tracker.tick(0).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let probed = tracker.collect(true, &[Role::Server]).unwrap();
    let metrics = probed.metrics.expect("a successful run has totals");
    assert!(probed.profile.is_none(), "no profile unless the session profiles");
    let f = &metrics.roles[0].functions[0];
    assert_eq!((metrics.roles[0].role, f.timing.calls), (Role::Server, CALLS));
    let scaled = f.duty.expect("duty-cycled counts are scaled");
    // The fraction is measured between the switches: at least the 20 ms windows, at most all of it.
    assert!(scaled.fraction > 0.0 && scaled.fraction < 1.0, "{scaled:?}");
    assert_eq!((scaled.calls, scaled.bytes), (CALLS as f64 / scaled.fraction, (CALLS * 64) as f64 / scaled.fraction));
    // Windows close (stop counting, then detach) and reopen (attach, then count), in that order.
    assert_eq!(kernel.tracked, vec![(42, Role::Server)]);
    let first_cycle = [("counting", false), ("attached", false), ("attached", true), ("counting", true)];
    assert!(kernel.switches.len() >= 4 && kernel.switches[..4] == first_cycle, "{:?}", kernel.switches);
    assert_eq!(kernel.cleared, 1);
}

#[test]
fn a_failed_run_collects_no_totals_but_leaves_the_probes_clean() {
    let mut kernel = FakeKernel { profiling: true, ..FakeKernel::default() };
    let mut tracker = ProbeTracker::new(Some(&mut kernel), None, None);
    tracker.spawned(Role::Server, 7).unwrap();
    tracker.spawned(Role::Client, 8).unwrap();
    let probed = tracker.collect(false, &[Role::Server, Role::Client]).unwrap();
    assert!(probed.metrics.is_none() && probed.profile.is_none());
    let probed = tracker.collect(true, &[Role::Server, Role::Client]).unwrap();
    let roles: Vec<Role> = probed.metrics.as_ref().unwrap().roles.iter().map(|r| r.role).collect();
    assert_eq!(roles, [Role::Server, Role::Client]);
    assert_eq!(probed.profile.map(|p| p.frequency_hz), Some(99));
    assert_eq!(kernel.tracked, vec![(7, Role::Server), (8, Role::Client)]);
    assert_eq!((kernel.profiled.len(), kernel.cleared), (1, 2));
    assert!(kernel.switches.is_empty(), "no duty cycle, no switches: {:?}", kernel.switches);
}

/// The agent's plan without an agent: one hooked function, and for each process an agent that
/// "counted" `AGENT_SENDS` sendmmsg calls and `AGENT_OPENS` calls of the hooked function.
struct FakePlan {
    planned: Vec<PlannedFunction>,
    ready: bool,
}

const AGENT_SENDS: u64 = 250;
const AGENT_OPENS: u64 = 4000;

impl FakePlan {
    fn new(ready: bool) -> Self {
        let function = ResolvedFunction {
            category: "crypto.open".into(),
            backend: "fake".into(),
            object: "/fake/lut".into(),
            name: "open".into(),
            raw_name: "open".into(),
            address: 0x1000,
            file_offset: 0x1000,
            site: ProbeSite { skip: 0, kind: SiteKind::Push },
            bytes_arg: 0,
            timed: false,
            size: 64,
        };
        Self { planned: vec![PlannedFunction { function, slot: 0 }], ready }
    }
}

impl AgentPlan for FakePlan {
    fn planned(&self) -> &[PlannedFunction] {
        &self.planned
    }
    fn agent(&self, index: usize, role: Role) -> Result<Box<dyn UserAgent>, UserError> {
        Ok(Box::new(FakeAgent { index, role, ready: self.ready, planned: self.planned.clone() }))
    }
}

/// What each fake agent says its start-up cost.
const FAKE_STARTUP_NS: u64 = 250_000;

struct FakeAgent {
    index: usize,
    role: Role,
    ready: bool,
    planned: Vec<PlannedFunction>,
}

impl UserAgent for FakeAgent {
    fn env(&self) -> Vec<(String, OsString)> {
        vec![("NESQUIC_FAKE_AGENT".into(), format!("{} {}", self.index, self.role).into())]
    }
    fn snapshot(&self) -> RoleMetrics {
        let timing = |calls| Timing { calls, total_ns: 0, p50_le_ns: 0, p99_le_ns: 0, hist: Vec::new() };
        RoleMetrics {
            role: self.role,
            io: vec![SyscallMetrics {
                syscall: Syscall::Sendmmsg,
                direction: Direction::Send,
                timing: timing(AGENT_SENDS),
                errors: 0,
                eagain: 0,
                bytes: AGENT_SENDS * 12_000,
                datagrams: AGENT_SENDS * 10,
                messages: AGENT_SENDS,
                segmented_messages: AGENT_SENDS,
                mechanism: Mechanism::Interposition,
            }],
            functions: vec![FunctionMetrics {
                category: "crypto.open".into(),
                name: "open".into(),
                object: "/fake/lut".into(),
                timing: timing(AGENT_OPENS),
                bytes: 0,
                timed: false,
                site: None,
                compensated_mean_ns: None,
                compensation_uncertainty_ns: None,
                duty: None,
                mechanism: Mechanism::InlineHook,
            }],
            io_crosscheck: Vec::new(),
            // Its process's health counters: a known loss per process.
            agent_lost: Some(AgentLost { shadow_full: 7, shadow_dropped: self.index as u64 }),
            byte_stream: false,
            blocking_calls: false,
        }
    }
    fn startup_cpu_ns(&self) -> Option<u64> {
        self.ready.then_some(FAKE_STARTUP_NS)
    }
    fn ready(&self) -> bool {
        self.ready
    }
    fn patch_status(&self) -> Vec<PatchStatus> {
        self.planned
            .iter()
            .map(|p| PatchStatus {
                name: p.function.name.clone(),
                object: p.function.object.display().to_string(),
                patched: self.ready,
                reason: if self.ready { "patched" } else { "agent did not run in the process" }.into(),
            })
            .collect()
    }
}

fn refused() -> Vec<Fallback> {
    vec![Fallback { name: "seal".into(), reason: "no room for the hook".into() }]
}

#[test]
fn the_agents_figures_join_the_kernels_and_each_process_gets_its_own_agent() {
    let mut kernel = FakeKernel::default();
    let mut user = UserProbes::new(Box::new(FakePlan::new(true)), true, false, refused());
    let mut tracker = ProbeTracker::new(Some(&mut kernel), Some(&mut user), None);
    for (index, (role, pid)) in [(Role::Server, 11), (Role::Client, 12)].into_iter().enumerate() {
        let env = tracker.environment(role).unwrap();
        assert_eq!(env, vec![("NESQUIC_FAKE_AGENT".to_string(), OsString::from(format!("{index} {role}")))]);
        tracker.spawned(role, pid).unwrap();
    }
    let probed = tracker.collect(true, &[Role::Server, Role::Client]).unwrap();
    let m = probed.metrics.expect("a successful run has totals");
    // The agent measured I/O, so its rows are the I/O figures, and it says so.
    assert_eq!(m.io_mechanism.as_deref(), Some(MECHANISM_INTERPOSITION));
    assert_eq!(
        m.function_mechanism.as_deref(),
        Some(format!("{MECHANISM_INLINE_HOOK}; {MECHANISM_UPROBE} for 1 refused entry").as_str())
    );
    for role in &m.roles {
        let sends: Vec<u64> = role.io.iter().map(|s| s.timing.calls).collect();
        assert_eq!(sends, [AGENT_SENDS], "{}", role.role);
        assert!(role.io_crosscheck.is_empty());
        // The kernel's uprobe (the refused function) and the agent's hook, side by side.
        let calls: Vec<(&str, u64)> = role.functions.iter().map(|f| (f.category.as_str(), f.timing.calls)).collect();
        assert_eq!(calls, [("crypto.seal", CALLS), ("crypto.open", AGENT_OPENS)], "{}", role.role);
    }
    // Each process's agent losses reach its role's figures (the kernel's `lost` stays apart).
    let lost: Vec<(Role, Option<AgentLost>)> = m.roles.iter().map(|r| (r.role, r.agent_lost)).collect();
    assert_eq!(
        lost,
        [
            (Role::Server, Some(AgentLost { shadow_full: 7, shadow_dropped: 0 })),
            (Role::Client, Some(AgentLost { shadow_full: 7, shadow_dropped: 1 }))
        ]
    );
    let reports: Vec<(Role, bool, usize, Option<u64>)> =
        probed.agents.iter().map(|a| (a.role, a.ready, a.functions.len(), a.startup_cpu_ns)).collect();
    assert_eq!(
        reports,
        [(Role::Server, true, 1, Some(FAKE_STARTUP_NS)), (Role::Client, true, 1, Some(FAKE_STARTUP_NS))]
    );
    assert_eq!(kernel.tracked, vec![(11, Role::Server), (12, Role::Client)]);
}

#[test]
fn with_the_crosscheck_the_tracepoints_stay_the_reference_and_the_agents_rows_are_set_beside() {
    let mut kernel = FakeKernel::default();
    let mut user = UserProbes::new(Box::new(FakePlan::new(true)), true, true, Vec::new());
    let mut tracker = ProbeTracker::new(Some(&mut kernel), Some(&mut user), None);
    tracker.environment(Role::Server).unwrap();
    tracker.spawned(Role::Server, 21).unwrap();
    let m = tracker.collect(true, &[Role::Server]).unwrap().metrics.unwrap();
    assert_eq!(m.io_mechanism, None, "the fake kernel measured no I/O, and the agent's rows are not the figures");
    assert_eq!(m.function_mechanism.as_deref(), Some(MECHANISM_INLINE_HOOK));
    let server = &m.roles[0];
    assert!(server.io.is_empty());
    assert_eq!(server.io_crosscheck.iter().map(|s| s.datagrams).collect::<Vec<_>>(), [AGENT_SENDS * 10]);
}

#[test]
fn agents_that_never_started_are_reported_and_a_failed_run_merges_nothing() {
    let mut user = UserProbes::new(Box::new(FakePlan::new(false)), true, false, Vec::new());
    let mut tracker = ProbeTracker::new(None, Some(&mut user), None);
    tracker.environment(Role::Client).unwrap();
    tracker.spawned(Role::Client, 31).unwrap();
    let probed = tracker.collect(false, &[Role::Client]).unwrap();
    assert!(probed.metrics.is_none());
    let report = &probed.agents[..];
    assert_eq!(report.len(), 1);
    assert!(!report[0].ready && !report[0].functions[0].patched, "{:?}", report[0]);
    // The next repetition starts fresh agents: nothing left from this one.
    let probed = tracker.collect(true, &[Role::Client]).unwrap();
    assert!(probed.agents.is_empty());
    let m = probed.metrics.expect("without a kernel session the agents' figures are the totals");
    assert!(m.roles.is_empty(), "no agent ran in this repetition: {:?}", m.roles);
}
