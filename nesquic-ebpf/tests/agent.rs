//! The user-space agent end to end, as a normal user: `nesquic-workload` (which knows exactly
//! what it did) runs with `libnesquic_agent.so` preloaded, and the counters must say the same.
//! Needs the agent built (`just build`, or `cargo build --release -p nesquic-agent`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use nesquic_ebpf::metrics::{FunctionMetrics, Mechanism, RoleMetrics, SyscallMetrics};
use nesquic_ebpf::sites::choose;
use nesquic_ebpf::user::{AgentProcess, UserBackend};
use nesquic_ebpf::{ObjectSymbols, ResolvedFunction};
use serde_json::Value;

/// Held by the calibration test, which times differences of a few ns, and by the tests that
/// load every CPU with many threads: those must not run beside it (cargo runs a file's tests
/// in parallel).
fn cpu_heavy() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn workload() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nesquic-workload"))
}

/// A workload function as the catalog would resolve it.
fn function(name: &str, timed: bool, bytes_arg: u32) -> ResolvedFunction {
    function_in(&workload(), name, timed, bytes_arg)
}

/// A function of `object` as the catalog would resolve it.
fn function_in(object: &Path, name: &str, timed: bool, bytes_arg: u32) -> ResolvedFunction {
    let symbols = ObjectSymbols::load(object).expect("symbols");
    let f = symbols
        .functions
        .iter()
        .find(|f| f.raw == name)
        .unwrap_or_else(|| panic!("{name} not in {}", object.display()));
    let site = choose(&f.prologue);
    ResolvedFunction {
        category: "test".into(),
        backend: "custom".into(),
        object: object.to_path_buf(),
        name: name.into(),
        raw_name: name.into(),
        address: f.address,
        file_offset: f.file_offset + site.skip,
        site,
        bytes_arg,
        timed,
        size: f.size,
    }
}

fn run(agent: &AgentProcess, dir: &Path, extra: &[&str]) -> (Output, Value) {
    let report = dir.join("workload.json");
    let mut cmd = Command::new(workload());
    cmd.arg("--report").arg(&report).args(extra);
    agent.apply_to(&mut cmd);
    let out = cmd.output().expect("run the workload");
    assert!(out.status.success(), "workload failed: {}", String::from_utf8_lossy(&out.stderr));
    let did = serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("report json");
    (out, did)
}

fn func<'a>(role: &'a RoleMetrics, name: &str) -> Option<&'a FunctionMetrics> {
    role.functions.iter().find(|f| f.name == name)
}

fn io<'a>(role: &'a RoleMetrics, name: &str) -> &'a SyscallMetrics {
    role.io.iter().find(|s| s.syscall.as_str() == name).unwrap_or_else(|| panic!("{name} missing: {:?}", role.io))
}

#[test]
fn counts_times_and_io_match_what_the_workload_did() {
    let dir = tempfile::tempdir().expect("tempdir");
    let functions = [
        function("nesquic_workload_tick", false, 1),
        function("nesquic_workload_sleep_1ms", true, 0),
        function("nesquic_workload_recurse", true, 1),
        function("nesquic_workload_short", false, 0),
        function("nesquic_workload_jump_back", false, 0),
        function("nesquic_workload_rip_relative", false, 0),
    ];
    let (backend, refused) = UserBackend::prepare(dir.path(), &functions, true).expect("prepare");
    // Unsafe sites are refused before launch, each with its reason.
    let reason = |n: &str| refused.iter().find(|(f, _)| f.name == n).map(|(_, r)| r.clone());
    assert!(reason("nesquic_workload_short").is_some_and(|r| r.contains("too short")), "{refused:?}");
    assert!(
        reason("nesquic_workload_jump_back").is_some_and(|r| r.contains("targets the patched bytes")),
        "{refused:?}"
    );
    assert_eq!(refused.len(), 2, "{refused:?}");

    let agent = backend.process(0, nesquic_ebpf::Role::Process).expect("process");
    let child = dir.path().join("child.txt");
    let (_, did) = run(&agent, dir.path(), &["--child-report", child.to_str().expect("utf-8")]);
    let state = agent.state();
    assert!(state.ready && state.plan_status == nesquic_agent_abi::plan_status::OK, "{state:?}");
    assert!(agent.patch_status().iter().all(|s| s.patched), "{:?}", agent.patch_status());
    let role = agent.snapshot();

    // Counted: every call, and the byte argument (tick(i) for i in 0..50).
    let tick = func(&role, "nesquic_workload_tick").expect("tick");
    assert_eq!((tick.timing.calls, tick.bytes), (50, (0..50).sum::<u64>()));
    assert_eq!(tick.mechanism, Mechanism::InlineHook);
    assert!(!tick.timed && tick.timing.total_ns == 0);

    // Timed: the 1 ms sleeps agree with the workload's own clock within 5%.
    let sleep = func(&role, "nesquic_workload_sleep_1ms").expect("sleep");
    assert_eq!(sleep.timing.calls, 5);
    let own = did["sleep_ns"].as_f64().expect("sleep_ns");
    let ratio = sleep.timing.total_ns as f64 / own;
    assert!((0.95..1.05).contains(&ratio), "agent {} ns vs workload {own} ns", sleep.timing.total_ns);
    // A sleep never ends early, so each call took at least 1 ms. No upper bound: a loaded machine
    // oversleeps (CI saw 10 ms a call), and the agreement above is the real check.
    assert!(sleep.timing.mean_ns() >= 1.0e6, "mean {} ns", sleep.timing.mean_ns());

    // Recursion: 5 nested calls, each 200 us busy plus its inner calls: 15 x 200 us in all.
    let recurse = func(&role, "nesquic_workload_recurse").expect("recurse");
    assert_eq!(recurse.timing.calls, 5);
    assert_eq!(recurse.bytes, 4 + 3 + 2 + 1);
    let own = did["recurse_ns"].as_f64().expect("recurse_ns");
    let ratio = recurse.timing.total_ns as f64 / own;
    assert!((0.95..1.05).contains(&ratio), "nested total: agent {} ns vs workload {own} ns", recurse.timing.total_ns);
    assert!(own >= 3.0e6, "the workload's own figure {own} ns");
    assert_eq!(recurse.timing.hist.iter().sum::<u64>(), 5);
    assert_eq!(state.health.shadow_dropped + state.health.shadow_full, 0);

    // A RIP-relative first instruction, relocated into the trampoline: still counted, and the
    // function still reads its static (7 x 1000 + 0 + 1 + ... + 6).
    let rip = func(&role, "nesquic_workload_rip_relative").expect("rip_relative");
    assert_eq!(rip.timing.calls, did["nesquic_workload_rip_relative"].as_u64().expect("calls"));
    assert_eq!(rip.timing.calls, 7);
    assert_eq!(did["rip_relative_sum"], 7 * 1000 + (0..7).sum::<u64>());

    // Refused functions are not counted here (they fall back to the kernel).
    assert!(func(&role, "nesquic_workload_short").is_none());

    // Packet I/O: the figures the tracepoint test asserts, and the workload's own counters.
    for (name, calls, bytes, datagrams, eagain) in [
        ("sendmsg", 7, 7000, 7, 0),
        ("sendmmsg", 3, 36000, 30, 0),
        // 4 datagrams, and 2 `send`s on the TCP connection: bytes, no datagrams.
        ("sendto", 6, 3000, 4, 0),
        ("recvmsg", 8, 7000, 7, 1),
        ("recvfrom", 4, 2000, 4, 0),
    ] {
        let s = io(&role, name);
        assert_eq!((s.timing.calls, s.bytes, s.datagrams, s.eagain), (calls, bytes, datagrams, eagain), "{name}");
    }
    for name in ["sendmsg", "sendmmsg", "sendto", "recvmsg", "recvmmsg", "recvfrom"] {
        let s = io(&role, name);
        let w = &did[name];
        assert_eq!(
            (Some(s.timing.calls), Some(s.bytes), Some(s.datagrams), Some(s.eagain)),
            (w["calls"].as_u64(), w["bytes"].as_u64(), w["datagrams"].as_u64(), w["eagain"].as_u64()),
            "{name}: agent {s:?} vs workload {w}"
        );
        assert_eq!(s.errors, 0, "{name}");
        assert_eq!(s.mechanism, Mechanism::Interposition);
    }
    let mmsg = io(&role, "sendmmsg");
    assert_eq!((mmsg.messages, mmsg.segmented_messages), (6, 6));
    // `write`/`read` on its TCP socket are counted (as the kernel backend counts them); its
    // writes and reads of a file and a pipe are not, and `send`/`recv` join the sendto/recvfrom rows.
    let (write, read) = (io(&role, "write"), io(&role, "read"));
    assert_eq!((write.timing.calls, write.bytes, write.datagrams, write.messages), (3, 3000, 0, 0), "{write:?}");
    assert_eq!(
        (Some(read.timing.calls), Some(read.bytes), read.datagrams, read.messages),
        (did["read"]["calls"].as_u64(), Some(9000), 0, 0),
        "{read:?}"
    );
    assert!(role.io.iter().all(|s| !["send", "recv"].contains(&s.syscall.as_str())), "{:?}", role.io);

    // The agent did not spread to the child the workload started.
    let child = std::fs::read_to_string(&child).expect("child report");
    assert_eq!(child.trim(), "preload=\nplan=\nmaps=0", "child inherited the agent");
}

/// `--hammer THREADS CALLS` under the agent hooking `functions`: the workload checks every result
/// against the same arithmetic done without a probe; every function must be patched. Returns the
/// agent and the workload's report.
fn hammer(dir: &Path, functions: &[ResolvedFunction], threads: u64, calls: u64) -> (AgentProcess, Value) {
    let (backend, refused) = UserBackend::prepare(dir, functions, false).expect("prepare");
    assert!(refused.is_empty(), "{refused:?}");
    let agent = backend.process(0, nesquic_ebpf::Role::Process).expect("process");
    let out = dir.join("hammer.json");
    let mut cmd = Command::new(workload());
    cmd.args(["--hammer", &threads.to_string(), &calls.to_string()]).arg(&out);
    agent.apply_to(&mut cmd);
    let status = cmd.output().expect("run the workload");
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let did: Value = serde_json::from_slice(&std::fs::read(&out).expect("report")).expect("json");
    assert_eq!(did["mismatches"].as_u64(), Some(0), "{did}");
    assert!(agent.patch_status().iter().all(|s| s.patched), "{:?}", agent.patch_status());
    (agent, did)
}

#[test]
fn many_threads_hammering_timed_functions_keep_every_call_and_every_register() {
    let _quiet = cpu_heavy();
    let dir = tempfile::tempdir().expect("tempdir");
    // bytes: argument 7 (on the stack) of _args is the loop index i.
    let functions = [function("nesquic_workload_args", true, 7), function("nesquic_workload_fargs", true, 0)];
    let (threads, calls) = (4u64, 100_000u64);
    let (agent, did) = hammer(dir.path(), &functions, threads, calls);
    let state = agent.state();
    assert_eq!(state.health.shadow_dropped + state.health.shadow_full, 0, "{state:?}");
    let role = agent.snapshot();
    let args = func(&role, "nesquic_workload_args").expect("args");
    let fargs = func(&role, "nesquic_workload_fargs").expect("fargs");
    // _args directly and once more nested inside every _fargs call.
    assert_eq!(args.timing.calls, 2 * threads * calls);
    assert_eq!(Some(args.timing.calls), did["nesquic_workload_args"].as_u64());
    assert_eq!(fargs.timing.calls, threads * calls);
    assert_eq!(args.bytes, 2 * threads * (0..calls).sum::<u64>());
    for f in [args, fargs] {
        assert!(f.timed && f.timing.total_ns > 0, "{f:?}");
        assert_eq!(f.timing.hist.iter().sum::<u64>(), f.timing.calls, "{}", f.name);
    }
    // Nesting: each _fargs call contains a whole _args call.
    assert!(fargs.timing.total_ns as f64 / fargs.timing.calls as f64 > args.timing.mean_ns(), "{fargs:?} {args:?}");
}

#[test]
fn more_threads_than_shards_still_count_every_call() {
    let _quiet = cpu_heavy();
    use nesquic_agent_abi::{self as abi, Counters, CountersHeader, Shard, Stats};
    // Plan 1: timed with a stack byte argument (the inline code claims the shard) and counted
    // (inline code). Plan 2: timed alone (the entry stub claims it, float arguments live).
    let plans = [
        vec![function("nesquic_workload_args", true, 7), function("nesquic_workload_fargs", false, 0)],
        vec![function("nesquic_workload_fargs", true, 0)],
    ];
    let (threads, calls) = (abi::SHARDS as u64 + 8, 20_000u64);
    for functions in plans {
        let dir = tempfile::tempdir().expect("tempdir");
        let (agent, _did) = hammer(dir.path(), &functions, threads, calls);
        let file = std::fs::read(agent.counters_path()).expect("counters");
        // Every worker thread claimed a shard (the main thread never calls a hooked function),
        // and the last 8 shared the overflow shard.
        let header = abi::read::<CountersHeader>(&file, 0).expect("header");
        assert_eq!(u64::from(header.threads), threads);
        let shard_slot0 = |shard: usize| {
            let at = std::mem::offset_of!(Counters, shards) + shard * std::mem::size_of::<Shard>();
            abi::read::<Stats>(&file, at).expect("slot 0").calls
        };
        assert_eq!(shard_slot0(abi::OVERFLOW_SHARD), 8 * calls * if functions.len() == 2 { 2 } else { 1 });
        assert!((0..abi::SHARDS).all(|i| shard_slot0(i) > 0));
        let role = agent.snapshot();
        let fargs = func(&role, "nesquic_workload_fargs").expect("fargs");
        assert_eq!(fargs.timing.calls, threads * calls);
        if let Some(args) = func(&role, "nesquic_workload_args") {
            assert_eq!(args.timing.calls, 2 * threads * calls);
            assert_eq!(args.bytes, 2 * threads * (0..calls).sum::<u64>());
            assert_eq!(args.timing.hist.iter().sum::<u64>(), args.timing.calls);
        } else {
            assert_eq!(fargs.timing.hist.iter().sum::<u64>(), fargs.timing.calls);
        }
        let state = agent.state();
        assert_eq!(state.health.shadow_dropped + state.health.shadow_full, 0, "{state:?}");
    }
}

/// Runs `nesquic-workload ARGS... OUT` (under the agent when given) and returns OUT's JSON lines.
fn workload_lines(agent: Option<&AgentProcess>, dir: &Path, args: &[&str]) -> Vec<Value> {
    let out = dir.join("mode.json");
    let mut cmd = Command::new(workload());
    cmd.args(args).arg(&out);
    if let Some(agent) = agent {
        agent.apply_to(&mut cmd);
    }
    let status = cmd.output().expect("run the workload");
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let text = std::fs::read_to_string(&out).expect("report");
    text.lines().map(|l| serde_json::from_str(l).expect("json line")).collect()
}

#[test]
fn io_from_many_threads_at_once_is_counted_exactly() {
    let _quiet = cpu_heavy();
    let dir = tempfile::tempdir().expect("tempdir");
    let (backend, _) = UserBackend::prepare(dir.path(), &[], true).expect("prepare");
    let agent = backend.process(0, nesquic_ebpf::Role::Process).expect("process");
    // 40 threads add to the same two I/O rows at once: no count may be lost.
    let (threads, calls) = (40u64, 3_000u64);
    let did = &workload_lines(Some(&agent), dir.path(), &["--io-hammer", &threads.to_string(), &calls.to_string()])[0];
    assert_eq!(did["other"].as_u64(), Some(0), "{did}");
    assert_eq!(did["sendmsg"].as_u64(), Some(threads * calls), "{did}");

    let role = agent.snapshot();
    let send = io(&role, "sendmsg");
    let datagram = 100;
    assert_eq!(
        (send.timing.calls, send.bytes, send.datagrams, send.errors),
        (threads * calls, threads * calls * datagram, threads * calls, 0)
    );
    assert_eq!(send.timing.hist.iter().sum::<u64>(), send.timing.calls);
    let recv = io(&role, "recvmsg");
    assert_eq!((recv.timing.calls, recv.eagain, recv.bytes, recv.errors), (threads * calls, threads * calls, 0, 0));
}

#[test]
fn calls_the_agent_could_not_record_are_reported_as_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let functions = [
        function("nesquic_workload_deep", true, 0),
        function("nesquic_workload_escape", true, 0),
        function("nesquic_workload_escapes", true, 0),
    ];
    let (backend, refused) = UserBackend::prepare(dir.path(), &functions, false).expect("prepare");
    assert!(refused.is_empty(), "{refused:?}");
    let agent = backend.process(0, nesquic_ebpf::Role::Process).expect("process");
    // 300 nested calls (the first SHADOW_DEPTH timed, the rest lost), then 9 calls that leave
    // their frame without returning.
    let (deep, escapes) = (300u64, 9u64);
    let depth = nesquic_ebpf::user::SHADOW_DEPTH as u64;
    let did = &workload_lines(Some(&agent), dir.path(), &["--lost", &deep.to_string(), &escapes.to_string()])[0];
    assert_eq!((did["deep"].as_u64(), did["escapes"].as_u64()), (Some(deep), Some(escapes)), "{did}");
    assert!(agent.patch_status().iter().all(|s| s.patched), "{:?}", agent.patch_status());
    let role = agent.snapshot();
    let lost = role.agent_lost.expect("the agent ran: its losses are known");
    assert_eq!((lost.shadow_full, lost.shadow_dropped), (deep - depth, escapes), "{lost:?}");
    let calls = |name: &str| func(&role, name).map_or(0, |f| f.timing.calls);
    assert_eq!(calls("nesquic_workload_deep"), depth);
    assert_eq!(calls("nesquic_workload_escape"), 0, "an escaped call has no end to time");
    assert_eq!(calls("nesquic_workload_escapes"), 1);

    // A process whose agent loses nothing says so (zero, not absent).
    let clean = backend.process(1, nesquic_ebpf::Role::Process).expect("process");
    workload_lines(Some(&clean), dir.path(), &["--lost", "10", "0"]);
    assert_eq!(clean.snapshot().agent_lost, Some(nesquic_ebpf::metrics::AgentLost::default()));
}

#[test]
fn the_agent_keeps_nothing_in_the_run_directory() {
    // The plan and the counters are memfds: a run directory that cannot hold a file (or whose
    // filesystem refuses shared mappings, as 9p does) does not matter.
    let dir = tempfile::tempdir().expect("tempdir");
    let nowhere = Path::new("/nonexistent-dir/nesquic-run");
    let functions = [function("nesquic_workload_tick", false, 1), function("nesquic_workload_sleep_1ms", true, 0)];
    let (backend, refused) = UserBackend::prepare(nowhere, &functions, true).expect("prepare");
    assert!(refused.is_empty(), "{refused:?}");
    let agent = backend.process(0, nesquic_ebpf::Role::Process).expect("process");
    // Once the LUT has started, the plan is no longer needed: only the counters must outlive it.
    drop(backend);
    assert!(agent.counters_path().starts_with("/proc"), "{}", agent.counters_path().display());
    run(&agent, dir.path(), &[]);
    let state = agent.state();
    assert!(state.ready && state.plan_status == nesquic_agent_abi::plan_status::OK, "{state:?}");
    let role = agent.snapshot();
    let tick = func(&role, "nesquic_workload_tick").expect("tick");
    assert_eq!((tick.timing.calls, tick.bytes), (50, (0..50).sum::<u64>()));
    assert_eq!(func(&role, "nesquic_workload_sleep_1ms").map(|f| f.timing.calls), Some(5));
    assert_eq!(io(&role, "sendmsg").timing.calls, 7);
    assert!(!nowhere.exists());
}

/// Builds a test fixture (`tests/fixtures/NAME.rs`) into a shared library with `rustc`, which
/// is there wherever `cargo test` runs (no C compiler, no extra workspace member).
fn build_fixture(name: &str, out: &Path, extra: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(format!("{name}.rs"));
    std::fs::create_dir_all(out.parent().expect("parent")).expect("mkdir");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let status = Command::new(rustc)
        .args(["--edition", "2021", "--crate-type", "cdylib", "-C", "opt-level=2", "-C", "panic=abort"])
        .args(extra)
        .arg("-o")
        .arg(out)
        .arg(&src)
        .output()
        .expect("run rustc");
    assert!(status.status.success(), "rustc {}: {}", src.display(), String::from_utf8_lossy(&status.stderr));
    std::fs::canonicalize(out).expect("canonical")
}

#[test]
fn objects_loaded_by_dlopen_after_start_up_are_hooked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = build_fixture("dlopen_plugin", &dir.path().join("lib/plugins/libnesquic_plugin.so"), &[]);
    let fixture = build_fixture(
        "dlopen_fixture",
        &dir.path().join("lib/libnesquic_fixture.so"),
        &["-C", "link-arg=-Wl,--enable-new-dtags,-rpath,$ORIGIN/plugins"],
    );
    let functions =
        [function_in(&fixture, "nesquic_fixture_work", false, 1), function_in(&plugin, "nesquic_plugin_work", true, 0)];
    let (backend, refused) = UserBackend::prepare(dir.path(), &functions, false).expect("prepare");
    assert!(refused.is_empty(), "{refused:?}");
    let agent = backend.process(0, nesquic_ebpf::Role::Process).expect("process");
    let calls = 1234u64;
    let out = dir.path().join("dlopen.json");
    let mut cmd = Command::new(workload());
    cmd.arg("--dlopen").arg(&fixture).arg(calls.to_string()).arg(&out);
    agent.apply_to(&mut cmd);
    let status = cmd.output().expect("run the workload");
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let did: Value = serde_json::from_slice(&std::fs::read(&out).expect("report")).expect("json");
    // The plugin's bare name was searched on the fixture's RUNPATH although the agent sat
    // between it and glibc (a planned object was still missing).
    assert_eq!(did["plugin_loaded"], Value::Bool(true), "{did}");
    assert_eq!(did["mismatches"].as_u64(), Some(0), "{did}");

    let status = agent.patch_status();
    assert!(status.iter().all(|s| s.patched), "{status:?}");
    let state = agent.state();
    assert_eq!(state.health.dlopen_hooked, 2, "{state:?}");
    let role = agent.snapshot();
    let work = func(&role, "nesquic_fixture_work").expect("fixture work");
    assert_eq!((work.timing.calls, work.bytes), (calls, (0..calls).sum::<u64>()));
    assert_eq!(work.mechanism, Mechanism::InlineHook);
    let plugin_work = func(&role, "nesquic_plugin_work").expect("plugin work");
    assert_eq!(plugin_work.timing.calls, calls);
    assert!(plugin_work.timed && plugin_work.timing.total_ns > 0);
    assert_eq!(plugin_work.timing.hist.iter().sum::<u64>(), calls);
}

#[test]
fn a_corrupt_plan_patches_nothing_and_the_process_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let functions = [function("nesquic_workload_tick", false, 0)];
    let (backend, refused) = UserBackend::prepare(dir.path(), &functions, true).expect("prepare");
    assert!(refused.is_empty());
    std::fs::write(backend.plan_path(), b"not a plan at all").expect("corrupt the plan");
    let agent = backend.process(0, nesquic_ebpf::Role::Process).expect("process");
    run(&agent, dir.path(), &[]);
    let state = agent.state();
    assert!(state.ready, "{state:?}");
    assert_ne!(state.plan_status, nesquic_agent_abi::plan_status::OK);
    let status = agent.patch_status();
    assert!(!status[0].patched && status[0].reason.contains("plan"), "{status:?}");
    assert!(agent.snapshot().functions.is_empty());
}

#[test]
fn mismatched_bytes_leave_the_function_unpatched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let functions = [function("nesquic_workload_tick", false, 0), function("nesquic_workload_sleep_1ms", true, 0)];
    let (backend, _) = UserBackend::prepare(dir.path(), &functions, false).expect("prepare");
    // Flip the first expected byte of target 0.
    let mut plan = std::fs::read(backend.plan_path()).expect("plan");
    let at = std::mem::size_of::<nesquic_agent_abi::PlanHeader>()
        + std::mem::offset_of!(nesquic_agent_abi::PlanTarget, expected);
    plan[at] ^= 0xff;
    std::fs::write(backend.plan_path(), plan).expect("write plan");
    let agent = backend.process(0, nesquic_ebpf::Role::Process).expect("process");
    run(&agent, dir.path(), &[]);
    let status = agent.patch_status();
    assert!(!status[0].patched && status[0].reason.contains("differ"), "{status:?}");
    assert!(status[1].patched, "{status:?}");
    let role = agent.snapshot();
    assert!(func(&role, "nesquic_workload_tick").is_none());
    assert_eq!(func(&role, "nesquic_workload_sleep_1ms").map(|f| f.timing.calls), Some(5));
    assert!(role.io.is_empty(), "I/O was not asked for");
}

#[test]
fn an_fd_number_reused_behind_the_wrappers_back_is_seen_for_what_it_holds_now() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (backend, _) = UserBackend::prepare(dir.path(), &[], true).expect("prepare");
    let agent = backend.process(0, nesquic_ebpf::Role::Process).expect("process");
    let calls = 50u64;
    let did = &workload_lines(Some(&agent), dir.path(), &["--fd-reuse", &calls.to_string()])[0];
    // One number, held in turn by a file, a UDP socket, a TCP socket and a file.
    let fds = did["fds"].as_array().expect("fds");
    assert!(fds.iter().all(|fd| fd == &fds[0]), "{did}");
    let bytes = calls * 100;
    for holder in ["file_bytes", "udp_bytes", "tcp_bytes", "again_bytes"] {
        assert_eq!(did[holder].as_u64(), Some(bytes), "{did}");
    }
    let role = agent.snapshot();
    // `write` counts on IPv4/IPv6 sockets only: the UDP socket's calls, as datagrams; neither file's.
    let write = io(&role, "write");
    assert_eq!((write.timing.calls, write.bytes, write.datagrams), (calls, bytes, calls), "{write:?}");
    // The TCP socket's `send`s (the `sendto` system call, reported in its row) move bytes, no
    // datagrams.
    let send = io(&role, "sendto");
    assert_eq!((send.timing.calls, send.bytes, send.datagrams, send.messages), (calls, bytes, 0, 0), "{send:?}");
}
