//! eBPF probes end to end, as root on the build machine's kernel. Each test checks exact figures
//! against a workload that knows what it did, and that no probe stays attached afterwards.
//! Tests run one at a time: "nothing attached" is a machine-wide fact.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::{
    assert_nothing_attached, category_calls as calls, find_syscall, function, function_mechanism, io_mechanism,
    json_name, load_json, load_record, our_programs, role_in, sent, syscall_name, Metrics, Role, RoleMetrics,
    RunRecord, Share, SyscallMetrics,
};
use nesquic_ebpf::profile::Unresolved;
use nesquic_ebpf::workload_report::{from_lines, CalibrateLine};
use nesquic_engine::overhead::OverheadReport;
use nesquic_engine::trace::TraceReport;
use nesquic_record::events::Event;
use serde_json::Value;

mod common;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_nesquic")).parent().expect("binary has a directory").to_path_buf()
}

fn workload() -> PathBuf {
    let w = target_dir().join("nesquic-workload");
    assert!(w.exists(), "{} missing: run `cargo test --workspace` (just test)", w.display());
    w
}

fn nesquic() -> Command {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "the eBPF tests load probes: run them as root (just test does in CI)");
    let mut c = Command::new(env!("CARGO_BIN_EXE_nesquic"));
    // Tests ask for the probes they check: `run` turns some on by default as root.
    c.env("NESQUIC_PROBE", "none");
    c.current_dir(env!("CARGO_TARGET_TMPDIR"));
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// One syscall's row (panics when it was not called).
fn syscall<'a>(role: &'a RoleMetrics, name: &str) -> &'a SyscallMetrics {
    find_syscall(role, name).unwrap_or_else(|| panic!("no {name} in {role:?}"))
}

/// A `nesquic trace --json` file.
fn load_trace(path: &Path) -> TraceReport {
    load_json(path)
}

/// `nesquic trace --probe PROBE --json DIR/trace.json -- COMMAND`, which must succeed: its report.
fn trace_into(dir: &Path, probe: &str, command: &[&std::ffi::OsStr]) -> TraceReport {
    common::trace_json(dir, &["--probe", probe], command).0
}

#[test]
fn workload_counts_are_exact() {
    // Not the recursive function: a kernel uretprobe keeps one call in flight per thread and
    // function, so nested calls are lost (the agent's shadow stack keeps them: the user test).
    workload_counts_are_exact_with("kernel", "uprobe:nesquic_workload_[ts]*", &["tracepoint", "uprobe"]);
}

/// The same exact figures from the user-space agent (libc interposition, inline hooks); the
/// entries it refuses (`nesquic_workload_short`, `_jump_back`) fall back to kernel uprobes.
#[test]
fn workload_counts_are_exact_in_user_space() {
    workload_counts_are_exact_with(
        "user",
        "uprobe:nesquic_workload_*",
        &["user (libc interposition)", "user (inline hook)"],
    );
}

fn workload_counts_are_exact_with(backend: &str, functions: &str, mechanisms: &[&str; 2]) {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let (json, report) = (dir.path().join("trace.json"), dir.path().join("workload.json"));
    let out = nesquic()
        .args(["trace", "--probe-backend", backend, "--probe", &format!("io,{functions}"), "--json"])
        .arg(&json)
        .arg("--")
        .arg(workload())
        .arg("--report")
        .arg(&report)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    let traced = load_trace(&json);
    // The workload's own report (its JSON has no serde type yet: read by key).
    let did: Value = load_json(&report);
    let role = &traced.probes.roles[0];
    assert_eq!(role.role, Role::Process);
    // What the workload is built to do, independent of its own counters...
    let fixed = [
        ("sendmsg", 7, 7000, 7, 0),
        ("sendmmsg", 3, 36000, 30, 0),
        // 4 datagrams, and 2 sends on the TCP connection: bytes, no datagrams.
        ("sendto", 6, 3000, 4, 0),
        ("recvmsg", 8, 7000, 7, 1),
        ("recvfrom", 4, 2000, 4, 0),
    ];
    // The file calls on its TCP socket, with the kernel backend (the agent interposes the socket
    // calls only); its file and pipe calls are not network I/O and are not counted.
    let tcp = [("write", 3, 3000), ("writev", 1, 1000), ("sendfile", 1, 4000), ("readv", 1, 0)];
    for (name, calls, bytes) in tcp.into_iter().filter(|_| backend == "kernel") {
        let s = syscall(role, name);
        // A stream socket: bytes, and no datagram or message.
        assert_eq!((s.timing.calls, s.bytes, s.datagrams, s.messages), (calls, bytes, 0, 0), "{name}: {s:?}");
        assert_eq!(json_name(&s.direction), if name.starts_with("read") { "recv" } else { "send" }, "{name}");
    }
    assert_io_rows(role, &fixed);
    // The sendto row mixes those 2 TCP calls with its 4 datagrams: no datagrams per call printed.
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.trim_start().starts_with("sendto ")).unwrap_or_else(|| panic!("{text}"));
    assert!(!line.contains("0.67"), "4 datagrams over 6 calls is no figure of the UDP calls: {line}");
    let tcp_line = text.lines().find(|l| l.contains("on stream sockets (TCP)")).unwrap_or_else(|| panic!("{text}"));
    let mut tcp_rows = vec!["sendto 2 of 6 calls", "write 3 of 3 calls", "read 1 of 1 calls"];
    if backend == "kernel" {
        tcp_rows.extend(["writev 1 of 1 calls", "sendfile 1 of 1 calls", "readv 1 of 1 calls"]);
    }
    for row in tcp_rows {
        assert!(tcp_line.contains(row), "{row}: {tcp_line}");
    }
    // ...and, where the kernel decides how many calls it takes (GRO batching), its own counters.
    let socket_calls = ["sendmsg", "sendmmsg", "sendto", "recvmsg", "recvmmsg", "recvfrom"];
    let file_calls = ["write", "writev", "sendfile", "read", "readv"];
    let followed =
        if backend == "kernel" { [&socket_calls[..], &file_calls[..]].concat() } else { socket_calls.to_vec() };
    for name in followed {
        let s = syscall(role, name);
        let probed = [s.timing.calls, s.bytes, s.datagrams, s.eagain];
        for (field, probed) in ["calls", "bytes", "datagrams", "eagain"].into_iter().zip(probed) {
            assert_eq!(
                Some(probed),
                did[name][field].as_u64(),
                "{name}.{field}: probes {s:?} vs workload {}",
                did[name]
            );
        }
        assert_eq!(s.errors, 0, "{name}");
        assert_eq!(io_mechanism(s), mechanisms[0], "{name}");
    }
    let f = |name: &str| function(role, name);
    assert_eq!(function_mechanism(f("nesquic_workload_tick")), mechanisms[1]);
    assert_eq!(function_mechanism(f("nesquic_workload_sleep_1ms")), mechanisms[1]);
    if backend == "user" {
        // Refused by the agent (3 bytes long; a branch back into its first bytes): kernel uprobes,
        // each called once.
        for refused in ["nesquic_workload_short", "nesquic_workload_jump_back"] {
            assert_eq!((function_mechanism(f(refused)).as_str(), f(refused).timing.calls), ("uprobe", 1), "{refused}");
        }
        assert!(stderr(&out).contains("the agent cannot hook it: too short"), "{}", stderr(&out));
        // Five nested calls, every one kept, the outermost lasting longest.
        let recurse = f("nesquic_workload_recurse");
        assert_eq!(recurse.timing.calls, 5, "{recurse:?}");
    }
    assert_eq!(Some(f("nesquic_workload_tick").timing.calls), did["nesquic_workload_tick"].as_u64());
    assert_eq!(f("nesquic_workload_tick").timing.calls, 50);
    let sleep = f("nesquic_workload_sleep_1ms");
    assert_eq!(sleep.timing.calls, 5);
    let mean_ms = sleep.timing.total_ns as f64 / 5.0 / 1e6;
    assert!((1.0..5.0).contains(&mean_ms), "a 1 ms sleep measured {mean_ms} ms");
    assert_eq!(traced.probes.lost.exit_without_entry, 0);
    assert_eq!(traced.probes.lost.inflight_full, 0);
    assert_nothing_attached();
}

/// `nesquic trace` through a shell, in user space: the agent follows the command into the
/// programs it starts (a child the shell forks, and the program it execs in its own process), and
/// counts every one of their calls exactly, as the tracepoints would. Before, it stayed in the
/// shell and reported no I/O at all.
#[test]
fn trace_in_user_space_follows_a_script_into_its_programs() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = (dir.path().join("first.json"), dir.path().join("second.json"));
    let script = format!(
        "{w} --report {first} && exec {w} --report {second}",
        w = workload().display(),
        first = first.display(),
        second = second.display()
    );
    let (traced, _) = common::trace_json(
        dir.path(),
        &["--probe-backend", "user", "--probe", "io"],
        &["/bin/sh".as_ref(), "-c".as_ref(), script.as_ref()],
    );
    let role = &traced.probes.roles[0];
    // Twice what one workload does.
    assert_io_rows(
        role,
        &[
            ("sendmsg", 14, 14000, 14, 0),
            ("sendmmsg", 6, 72000, 60, 0),
            ("sendto", 12, 6000, 8, 0),
            ("recvmsg", 16, 14000, 14, 2),
            ("recvfrom", 8, 4000, 8, 0),
        ],
    );
    for s in &role.io {
        assert_eq!(io_mechanism(s), "user (libc interposition)", "{s:?}");
    }
    // The kernel decides how many recvmmsg calls GRO takes: the two workloads' own counts.
    let did: Vec<Value> = [&first, &second].map(|p| load_json(p)).into();
    let recvmmsg = syscall(role, "recvmmsg");
    assert_eq!(
        Some(recvmmsg.timing.calls),
        did.iter().map(|d| d["recvmmsg"]["calls"].as_u64()).sum::<Option<u64>>(),
        "{recvmmsg:?}"
    );
    // Which processes it ran in: the shell, the child it forked, and the program it exec'd in
    // its own process (same pid as the shell).
    let agent = &traced.agents[0];
    let names: Vec<&str> = agent.processes.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["sh", "nesquic-workloa", "nesquic-workloa"], "{agent:?}");
    assert_eq!(agent.processes[0].pid, agent.processes[2].pid, "exec keeps the pid: {agent:?}");
    assert_ne!(agent.processes[0].pid, agent.processes[1].pid, "{agent:?}");
    assert_eq!(agent.processes_unlisted, 0);
    assert_nothing_attached();
}

/// The programs a followed command starts that cannot load the agent are named, with why, and
/// nothing they do is counted: a statically linked one (busybox-static, scripts/setup.sh) and
/// one started by `env -i` with an environment that no longer carries the agent.
#[test]
fn trace_in_user_space_names_the_programs_it_cannot_measure() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("unmeasured.json");
    let script = format!(
        "/bin/busybox true && env -i {w} --report {report} && exec /bin/busybox true",
        w = workload().display(),
        report = report.display()
    );
    let (traced, err) = common::trace_json(
        dir.path(),
        &["--probe-backend", "user", "--probe", "io"],
        &["/bin/sh".as_ref(), "-c".as_ref(), script.as_ref()],
    );
    // The workload ran (its own report) and none of its I/O was counted.
    let did: Value = load_json(&report);
    assert!(did["sendmsg"]["calls"].as_u64().is_some_and(|n| n > 0), "{did}");
    assert!(traced.probes.roles[0].io.iter().all(|s| s.timing.calls == 0), "{:?}", traced.probes.roles[0].io);
    let agent = &traced.agents[0];
    let seen: Vec<(&str, Option<&str>)> =
        agent.processes.iter().map(|p| (p.name.as_str(), p.without_agent.as_deref())).collect();
    let no_env = "started with an environment without the agent's variables";
    assert_eq!(
        seen,
        [
            ("sh", None),
            ("busybox", Some("statically linked")),
            ("env", None),
            ("nesquic-workloa", Some(no_env)),
            ("busybox", Some("statically linked")),
        ],
        "{agent:?}"
    );
    // The exec'd busybox replaced the shell: same pid.
    assert_eq!(agent.processes[0].pid, agent.processes[4].pid, "{agent:?}");
    assert!(err.contains("the command started 3 programs the user-space agent cannot load into"), "{err}");
    assert_nothing_attached();
}

/// Past the list's 16 entries the programs without the agent are still counted as such, and an
/// exec that failed (a static program without the execute bit: `Permission denied`) is no program:
/// listed, its entry is skipped; unlisted, its number is given back.
#[test]
fn trace_in_user_space_counts_unmeasured_programs_past_the_list_and_no_failed_exec() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let not_executable = dir.path().join("busybox-0644");
    std::fs::copy("/bin/busybox", &not_executable).expect("copy busybox");
    std::fs::set_permissions(&not_executable, std::os::unix::fs::PermissionsExt::from_mode(0o644)).expect("chmod");
    // One failed exec among the listed entries, 20 static programs, one failed exec past the list.
    let script = format!(
        "{bad} true; i=0; while [ $i -lt 20 ]; do /bin/busybox true; i=$((i+1)); done; {bad} true; true",
        bad = not_executable.display()
    );
    let (traced, err) = common::trace_json(
        dir.path(),
        &["--probe-backend", "user", "--probe", "io"],
        &["/bin/sh".as_ref(), "-c".as_ref(), script.as_ref()],
    );
    let agent = &traced.agents[0];
    let seen: Vec<(&str, Option<&str>)> =
        agent.processes.iter().map(|p| (p.name.as_str(), p.without_agent.as_deref())).collect();
    // Entries: sh, the failed exec (skipped), then 14 of the 20 busybox runs.
    let mut listed = vec![("sh", None)];
    listed.extend(std::iter::repeat_n(("busybox", Some("statically linked")), 14));
    assert_eq!(seen, listed, "{agent:?}");
    assert_eq!((agent.processes_unlisted, agent.processes_unlisted_without_agent), (6, 6), "{agent:?}");
    assert!(err.contains("the command started 20 programs the user-space agent cannot load into"), "{err}");
    assert!(err.contains("cannot load into, so nothing they did is in these counts: busybox (14 runs, pids "), "{err}");
    assert!(err.contains("): statically linked, 6 more, not listed;"), "{err}");
    assert_nothing_attached();
}

/// Each `(syscall, calls, bytes, datagrams, eagain)` row is exactly what `role` measured.
fn assert_io_rows(role: &RoleMetrics, rows: &[(&str, u64, u64, u64, u64)]) {
    for &(name, calls, bytes, datagrams, eagain) in rows {
        let s = syscall(role, name);
        assert_eq!(
            (s.timing.calls, s.bytes, s.datagrams, s.eagain),
            (calls, bytes, datagrams, eagain),
            "{name}: {s:?}"
        );
    }
}

#[test]
fn quinn_with_io_and_crypto_probes() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let size = 5_000_000u64;
    let out = nesquic()
        .args(["run", "--lut", "quinn", "--size", "5MB", "--probe", "io,crypto,crypto.seal:time", "--json"])
        .arg(&json)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    let report = load_record(&json);
    let role = |name: Role| role_in(common::probes(&report, 0), name);
    for name in [Role::Server, Role::Client] {
        let r = role(name);
        assert!(calls(r, "crypto.seal") > 0 && calls(r, "crypto.open") > 0, "{name:?}: {r:?}");
        assert!(calls(r, "crypto.header_protection") > 0, "{name:?}");
        assert!(calls(r, "crypto.handshake") > 0, "{name:?}");
    }
    // The agent measures its own start-up in each process, and the run prints it.
    for agent in &report.repetitions[0].agents {
        let ns = agent.startup_cpu_ns.unwrap_or_else(|| panic!("no start-up cost: {agent:?}"));
        assert!((1_000..50_000_000).contains(&ns), "agent start-up {ns} ns: {agent:?}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("user-space agent start-up (its CPU before main, median): server "), "{stdout}");
    let server = role(Role::Server);
    // Every packet is sealed; a datagram can hold several coalesced packets, never less than one.
    assert!(calls(server, "crypto.seal") >= sent(server, |s| s.datagrams), "{server:?}");
    assert!(
        sent(server, |s| s.bytes) >= size,
        "server sent {} bytes for a {size}-byte payload",
        sent(server, |s| s.bytes)
    );
    let seal_bytes = common::category_bytes(server, "crypto.seal");
    assert!(seal_bytes >= size && seal_bytes < 2 * size, "server sealed {seal_bytes} bytes for {size}");
    // crypto.seal was asked with :time (entry + return probes), the rest only counted.
    for f in &server.functions {
        let timed = f.category == "crypto.seal";
        assert_eq!(f.timed, timed, "{f:?}");
        assert_eq!(f.timing.total_ns > 0, timed, "{f:?}");
    }
    assert_nothing_attached();
}

#[test]
fn probes_lists_quinn_crypto_targets() {
    let _g = serial();
    let out = nesquic().args(["probes", "--lut", "quinn", "--probe", "crypto"]).output().expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in
        ["crypto.seal", "encrypt_in_place", "crypto.open", "decrypt_in_place", "nesquic-lut-quinn", "matched nothing"]
    {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
    // Every quinn crypto entry takes the agent's jump; with the kernel backend all are uprobes.
    let functions = text.matches("measured by:").count();
    assert!(functions >= 6, "{text}");
    assert_eq!(text.matches("measured by: user (inline hook)").count(), functions, "{text}");
    let out = nesquic()
        .args(["probes", "--lut", "quinn", "--probe", "io,crypto", "--probe-backend", "kernel"])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("measured by: uprobe (root; --probe-backend kernel)").count(), functions, "{text}");
    assert!(text.contains("io: syscall tracepoints") && !text.contains("libc interposition"), "{text}");
}

#[test]
fn unmatched_glob_suggests_near_symbols() {
    let _g = serial();
    let out = nesquic()
        .args(["trace", "--probe", "uprobe:nesquic_workload_tik", "--"])
        .arg(workload())
        .args(["--report", "/dev/null"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("matched no function") && err.contains("nesquic_workload_tick"), "{err}");
    assert_nothing_attached();
}

#[test]
fn stripped_binary_is_refused() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let stripped = dir.path().join("stripped-workload");
    let st = Command::new("strip").arg("-o").arg(&stripped).arg(workload()).status().expect("strip");
    assert!(st.success());
    let out =
        nesquic().args(["trace", "--probe", "uprobe:nesquic_workload_*", "--"]).arg(&stripped).output().expect("run");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("stripped"), "{}", stderr(&out));
}

fn unprivileged(args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"])
        .arg(env!("CARGO_BIN_EXE_nesquic"))
        .args(args)
        .current_dir("/tmp")
        .env_remove("NESQUIC_PROBE")
        .output()
        .expect("setpriv")
}

#[test]
fn unprivileged_user_gets_a_clear_error_for_kernel_probes() {
    let _g = serial();
    for args in [
        &["trace", "--probe-backend", "kernel", "--probe", "io", "--", "/bin/true"][..],
        // The fixed-rate profile samples in user mode without root; the tick is a kernel hook.
        &["trace", "--probe", "profile:tick", "--", "/bin/true"][..],
    ] {
        let out = unprivileged(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains("need root"), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("only the kernel can measure"), "{args:?}: {}", stderr(&out));
    }
    // Without root, on a static LUT (quic-go's), the agent cannot count: the default is the
    // user-mode profile alone, and it says why.
    let dir = tempfile::Builder::new().prefix("nesquic-nonroot-").tempdir_in("/tmp").expect("tempdir");
    std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).expect("chown to nobody");
    let out_dir = dir.path().join("run");
    let out = unprivileged(&["run", "--lut", "quic-go", "--size", "1MB", "--out", out_dir.to_str().expect("utf-8")]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("nesquic: probes: profile (the default without eBPF: user-mode samples"), "{err}");
    assert!(err.contains("need root") && err.contains("the user-space agent cannot count here"), "{err}");
    let report = load_record(&out_dir.join("summary.json"));
    assert!(report.repetitions[0].probes.is_none(), "no counts without root or the agent");
    assert_eq!(
        report.repetitions[0].profile.as_ref().map(|p| p.clock),
        Some(nesquic_ebpf::profile::SampleClock::UserModeCpuClock)
    );
}

/// Without root the user-space agent measures a whole LUT run by default: I/O and crypto, exact
/// enough to check against the payload (the server seals at least one packet per datagram it
/// sends); and the profile samples the LUT's own processes in user mode (issue 52), naming the
/// server's crypto.
#[test]
fn unprivileged_user_runs_quinn_with_user_space_probes() {
    let _g = serial();
    let dir = tempfile::Builder::new().prefix("nesquic-nonroot-").tempdir_in("/tmp").expect("tempdir");
    // The user's own directory: nesquic refuses to write runs into one others can write to.
    std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).expect("chown to nobody");
    let out_dir = dir.path().join("run");
    // 300 MB: ~100 user-mode samples a side at 251 Hz, ~20 of them in the server's crypto.
    let out = unprivileged(&["run", "--lut", "quinn", "--size", "300MB", "--out", out_dir.to_str().expect("utf-8")]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("nesquic: probes: profile,io,crypto (the default without eBPF"), "{err}");
    let report = load_record(&out_dir.join("summary.json"));
    assert!(report.repetitions[0].payload_verified);
    let probes = common::probes(&report, 0);
    assert_eq!(json_name(&probes.io_mechanism), "user (libc interposition)");
    let server = role_in(probes, Role::Server);
    let sent = sent(server, |s| s.datagrams);
    assert!(sent > 3000, "300 MB is more than 3000 datagrams: {server:?}");
    assert!(
        calls(server, "crypto.seal") >= sent,
        "seal calls {} < datagrams sent {sent}",
        calls(server, "crypto.seal")
    );
    for f in &server.functions {
        assert_eq!(function_mechanism(f), "user (inline hook)", "{f:?}");
    }
    let rep = &report.repetitions[0];
    let profile = rep.profile.as_ref().unwrap_or_else(|| panic!("no user-mode profile: {rep:?}"));
    assert_eq!(profile.clock, nesquic_ebpf::profile::SampleClock::UserModeCpuClock);
    assert_eq!(profile.frequency_hz, nesquic_ebpf::catalog::DEFAULT_PROFILE_HZ);
    assert_eq!(profile.roles.len(), 2, "{profile:?}");
    for role in &profile.roles {
        assert!(role.samples >= 20, "{role:?}");
    }
    let server = profile.roles.iter().find(|r| r.role == Role::Server).expect("server profile");
    let crypto: u64 = server.components.iter().filter(|c| c.name.starts_with("crypto")).map(|c| c.samples).sum();
    assert!(crypto > 0, "the server's crypto is named: {:?}", server.components);
    // Without kernel frames: no component of the kernel's.
    assert!(server.components.iter().all(|c| !c.name.starts_with("kernel")), "{:?}", server.components);
}

#[test]
fn sigint_detaches_probes_and_kills_the_command() {
    let _g = serial();
    let token = format!("sigint-{}", std::process::id());
    let child = nesquic()
        .args(["trace", "--probe-backend", "kernel", "--probe", "io", "--", "/bin/sleep", "30"])
        .env("NESQUIC_TEST_TOKEN", &token)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Wait until the probes are attached.
    for _ in 0..100 {
        if !our_programs().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!our_programs().is_empty(), "probes never attached");
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().expect("wait");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    assert_nothing_attached();
    let sleepers = std::fs::read_dir("/proc")
        .expect("proc")
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("environ"))
                .map(|env| env.split(|b| *b == 0).any(|kv| kv == format!("NESQUIC_TEST_TOKEN={token}").as_bytes()))
                .unwrap_or(false)
        })
        .count();
    assert_eq!(sleepers, 0, "the traced command outlived nesquic");
}

#[test]
fn crashing_lut_leaves_no_probe_behind() {
    let _g = serial();
    let out = nesquic()
        .args(["run", "--size", "20MB", "--probe", "io,crypto.seal"])
        .env("NESQUIC_FAULT_SERVER_ABORT_AFTER_BYTES", "1000000")
        .env("NESQUIC_ALLOW_FAULTS", "1")
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("SIGABRT"), "{}", stderr(&out));
    assert_nothing_attached();
}

#[test]
fn overhead_compares_probe_sets_against_no_probes() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("overhead.json");
    let out = nesquic()
        .args(["run", "--size", "5MB", "--repeat", "2", "--probe", "io", "--overhead", "--json"])
        .arg(&json)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    let report: OverheadReport = load_json(&json);
    let sets = &report.sets;
    assert_eq!(sets.iter().map(|s| s.probes.as_str()).collect::<Vec<_>>(), ["", "io"]);
    assert_eq!(sets[0].goodput_ratio, 1.0);
    for s in sets {
        assert_eq!(s.repetitions.len(), 2);
        assert!(s.goodput_ratio > 0.0);
    }
    // Probed repetitions carry their measurements; unprobed ones none.
    assert!(sets[1].repetitions[0].probes.is_some());
    assert!(sets[0].repetitions[0].probes.is_none());
    // The agent's start-up (io is the agent's libc interposition here) is part of what it costs.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("user-space agent start-up with io (its CPU before main, median): server "), "{stdout}");
    // `--overhead-sets together`: only the whole list against none.
    let out = nesquic()
        .args(["run", "--size", "5MB", "--repeat", "2", "--probe", "io,crypto", "--overhead", "--overhead-sets"])
        .args(["together", "--json"])
        .arg(&json)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    let report: OverheadReport = load_json(&json);
    let names: Vec<&str> = report.sets.iter().map(|s| s.probes.as_str()).collect();
    assert_eq!(names, ["", "io,crypto"]);
    assert_nothing_attached();
}

#[test]
fn overhead_without_probes_measures_the_default_set_as_one() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("overhead.json");
    let out = nesquic()
        .args(["run", "--lut", "quinn", "--size", "5MB", "--repeat", "3", "--overhead", "--json"])
        .arg(&json)
        .env_remove("NESQUIC_PROBE")
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    let report: OverheadReport = load_json(&json);
    let sets = &report.sets;
    // What `nesquic run` turns on for quinn, as one set: no per-item sets.
    let names: Vec<&str> = sets.iter().map(|s| s.probes.as_str()).collect();
    assert_eq!(names, ["", "profile,io,crypto"]);
    for s in sets {
        assert_eq!(s.repetitions.len(), 3);
    }
    let paired = sets[1].goodput_paired.expect("goodput_paired");
    assert_eq!(paired.df, 2.0, "three pairs: {paired:?}");
    assert!(paired.low < paired.ratio, "{paired:?}");
    let probed = &sets[1].repetitions[0];
    assert!(probed.profile.is_some() && probed.probes.is_some(), "{probed:?}");
    assert!(stderr(&out).contains("nesquic: probes: profile,io,crypto (the default"), "{}", stderr(&out));
    assert_nothing_attached();
}

#[test]
fn qlog_datagram_events_add_up_to_the_io_counters() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    let out = nesquic()
        .args(["run", "--size", "5MB", "--probe", "io", "--qlog-datagrams", "--out"])
        .arg(&run)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    for role in ["server", "client"] {
        // The strict reader refuses events out of time order.
        let (_, events) = common::qlog_trace(&run.join(format!("{role}.sqlog")));
        let Some(Event::RunSummary(summary)) = events.last() else { panic!("{role}: run_summary is not last") };
        let probes = summary.probes.as_ref().expect("probes in run_summary");
        let io = &probes.roles[0].io;
        for direction in ["send", "recv"] {
            let (mut count, mut length) = (0u64, 0u64);
            for e in &events {
                let d = match (direction, e) {
                    ("send", Event::UdpDatagramsSent(d)) | ("recv", Event::UdpDatagramsReceived(d)) => d,
                    _ => continue,
                };
                count += d.count;
                length += d.raw.iter().map(|r| r.length).sum::<u64>();
            }
            let rows = || io.iter().filter(|s| json_name(&s.direction) == direction);
            let (want_dg, want_bytes): (u64, u64) = (rows().map(|s| s.datagrams).sum(), rows().map(|s| s.bytes).sum());
            assert_eq!((count, length), (want_dg, want_bytes), "{role} {direction}");
            assert!(count > 0, "{role} {direction}: no events");
        }
        assert_eq!(probes.lost.events_dropped, 0);
    }
    assert_nothing_attached();
}

#[test]
fn profile_attributes_cpu_to_the_hot_function() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let workload = workload();
    let traced = trace_into(dir.path(), "profile:499", &[workload.as_os_str(), "--spin".as_ref(), "1500".as_ref()]);
    let profile = traced.profile.as_ref().expect("profile");
    let role = &profile.roles[0];
    let samples = role.samples;
    // 1.5 s of wall time of one busy thread at 499 Hz: a sample per 2 ms of its CPU time, which
    // busy processes beside it can cut by half (1.51 s of CPU quiet, 0.75-1.1 s beside busy
    // loops; samples per 499 Hz x CPU second 0.99-1.01 in both).
    let cpu_s = traced.cpu_user_s + traced.cpu_system_s;
    let per_cpu_second = samples as f64 / (499.0 * cpu_s);
    assert!(cpu_s > 0.3 && (0.9..=1.1).contains(&per_cpu_second), "{samples} samples in {cpu_s} s of CPU");
    // The share of `name` in one of the role's ranked lists.
    let share_in = |list: &[Share], name: &str| list.iter().find(|f| f.name == name).map_or(0.0, |f| f.share);
    let (hot, cold) =
        (share_in(&role.top_functions, "nesquic_workload_hot"), share_in(&role.top_functions, "nesquic_workload_cold"));
    assert!((0.4..=0.6).contains(&hot), "hot {hot}, cold {cold}: {role:?}");
    assert!((0.1..=0.3).contains(&cold), "hot {hot}, cold {cold}");
    // 30% of the time is in libc's memcpy, a leaf without a frame, called by a function the
    // catalog's `*_aead_*` rule names: that time is the caller's component, crypto.aead, not
    // memory (where it lands if the walk skips the frameless leaf's caller).
    let split = |name: &str| share_in(&role.split, name);
    let (aead, copy) = (split("crypto.aead"), split("memory.copy"));
    assert!((0.2..=0.4).contains(&aead), "crypto.aead {aead}, memory.copy {copy}: {role:?}");
    assert!(copy < 0.05, "crypto.aead {aead}, memory.copy {copy}: {role:?}");
    // The sampler ran on every tick of every CPU (at least the busy thread's ~750 ticks), and
    // the kernel timed it: a handful of microseconds per run, a small share of the 1.5 s spun.
    let sampler = profile.sampler.expect("sampler cost");
    let (runs, run_ns) = (sampler.runs, sampler.run_ns);
    assert!(runs >= samples, "{runs} sampler runs for {samples} samples");
    let per_run_us = run_ns as f64 / runs as f64 / 1e3;
    assert!((0.05..100.0).contains(&per_run_us), "{per_run_us} us per sampler run");
    assert!((run_ns as f64) < 0.05 * 1.5e9, "sampler took {run_ns} ns of a 1.5 s run");
    // The program times itself on each of the process's samples, apart for the first sample of
    // each stack pair (the insert): together they are exactly the samples counted.
    let (steady, inserts) = (sampler.samples, sampler.inserts);
    assert_eq!(steady + inserts, samples, "{sampler:?}");
    assert!(inserts >= 1 && sampler.insert_ns + sampler.sample_ns == run_ns, "{sampler:?}");
    assert_nothing_attached();
}

#[test]
fn quinn_profile_splits_cpu_into_components() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let out = nesquic()
        .args(["run", "--size", "150MB", "--probe", "profile:999", "--json"])
        .arg(&json)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    let report = load_record(&json);
    for role in &report.repetitions[0].profile.as_ref().expect("profile").roles {
        let total = role.samples;
        let components = &role.components;
        let sum: u64 = components.iter().map(|c| c.samples).sum();
        assert_eq!(sum, total, "every sample is in exactly one component");
        let share = |n: &str| components.iter().find(|c| c.name == n).map_or(0.0, |c| c.share);
        assert!(total > 50, "{role:?}");
        // Both sides seal/open every packet and make send/receive syscalls: both components show
        // up (their size varies from run to run; see the intervals).
        assert!(share("crypto") > 0.0 && share("packet_io") > 0.0, "{role:?}");
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains("sampling profile"));
    assert_nothing_attached();
}

#[test]
fn run_turns_on_the_cheap_probes_by_default_and_none_turns_them_off() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |probe: Option<&str>| {
        let json = dir.path().join("run.json");
        let mut c = nesquic();
        // 600 MB: enough CPU time for the default profile (251 Hz, as the tick on Debian's
        // kernels: ~330 samples a side per GB of quinn) to sample both sides.
        c.env_remove("NESQUIC_PROBE").args(["run", "--size", "600MB", "--json"]).arg(&json);
        if let Some(p) = probe {
            c.args(["--probe", p]);
        }
        let out = c.output().expect("run");
        assert!(out.status.success(), "{}", stderr(&out));
        (load_record(&json), String::from_utf8_lossy(&out.stdout).into_owned(), stderr(&out))
    };
    let (report, stdout, err) = run(None);
    assert!(err.contains("nesquic: probes: profile,io,crypto (the default"), "{err}");
    let rep = &report.repetitions[0];
    let profile = rep.profile.as_ref().unwrap_or_else(|| panic!("no profile: {rep:?}"));
    assert_eq!(profile.roles.len(), 2, "{rep:?}");
    assert!(rep.probes.is_some(), "io probes ran: {rep:?}");
    assert!(stdout.contains("sampling profile") && stdout.contains("component"), "{stdout}");
    // ~200 samples a side at 251 Hz (49 Hz once gave ~15, and a note on how to get more).
    assert_eq!(profile.clock, nesquic_ebpf::profile::SampleClock::CpuClock, "{err}");
    assert_eq!(profile.frequency_hz, nesquic_ebpf::catalog::DEFAULT_PROFILE_HZ, "{err}");
    for role in &profile.roles {
        assert!(role.samples >= 100, "{role:?}");
    }
    assert!(!stdout.contains("few samples ("), "{stdout}");
    let (report, stdout, err) = run(Some("none"));
    let rep = &report.repetitions[0];
    assert!(rep.probes.is_none() && rep.profile.is_none(), "{rep:?}");
    assert!(!stdout.contains("sampling profile") && !err.contains("probes:"), "{stdout}{err}");
    assert_nothing_attached();
}

/// Per direction totals of one role's probe figures: (syscalls, datagrams, bytes).
fn probe_totals(role: &RoleMetrics, direction: &str) -> (u64, u64, u64) {
    let rows = || role.io.iter().filter(|s| json_name(&s.direction) == direction);
    (rows().map(|s| s.timing.calls).sum(), rows().map(|s| s.datagrams).sum(), rows().map(|s| s.bytes).sum())
}

/// A LUT on Nesquic's I/O layer: the layer's own counters and the eBPF probes count the same
/// syscalls, datagrams and bytes in every repetition, and `expected` are the syscalls used.
fn io_layer_agrees_with_probes(lut: &str, io: &str, expected: [&str; 2], extra: &[&str]) -> RunRecord {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let out = nesquic()
        .args(["run", "--lut", lut, "--io", io, "--size", "4MB", "--repeat", "2"])
        .args(extra)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("agree exactly in all 2 repetition(s)") && !stdout.contains("DISAGREE"), "{stdout}");
    let report = load_record(&json);
    for rep in &report.repetitions {
        let counters = &rep.io_layer_counters;
        assert_eq!(counters.len(), 2, "{rep:?}");
        for (role_name, own) in counters {
            let probes = rep.probes.as_ref().expect("probes");
            let role = role_in(probes, *role_name);
            for (direction, own) in [("send", own.send), ("recv", own.recv)] {
                let own = (own.syscalls, own.datagrams, own.bytes);
                let (calls, datagrams, bytes) = probe_totals(role, direction);
                assert_eq!(own, (calls, datagrams, bytes), "{lut} {role_name:?} {direction}");
                assert!(datagrams > 0, "{lut} {role_name:?} {direction}: nothing counted");
            }
            for name in expected {
                let made = find_syscall(role, name).map_or(0, |s| s.timing.calls);
                assert!(made > 0, "{lut} {role_name:?} made no {name}");
            }
        }
    }
    assert_nothing_attached();
    report
}

#[test]
fn quiche_io_layer_counters_match_the_probes_and_crypto_is_seen() {
    let _g = serial();
    let report = io_layer_agrees_with_probes("quiche", "nesquic", ["sendmmsg", "recvmmsg"], &["--probe", "io,crypto"]);
    let probes = common::probes(&report, 0);
    for role in &probes.roles {
        for category in ["crypto.seal", "crypto.open", "crypto.header_protection", "crypto.handshake"] {
            let calls = calls(role, category);
            assert!(calls > 0, "{:?}: no {category} calls (BoringSSL targets)", role.role);
        }
        // The default backend: the agent's hooks and interposition, named on every row.
        for f in &role.functions {
            assert_eq!(function_mechanism(f), "user (inline hook)", "{f:?}");
        }
        for s in &role.io {
            assert_eq!(io_mechanism(s), "user (libc interposition)", "{s:?}");
        }
    }
    let server = role_in(probes, Role::Server);
    let sent = sent(server, |s| s.datagrams);
    assert!(calls(server, "crypto.seal") >= sent, "every datagram the server sent was sealed: {server:?}");
}

#[test]
fn quinn_proto_plain_loop_is_sendto_recvfrom_and_counted_alike() {
    let _g = serial();
    io_layer_agrees_with_probes("quinn", "plain", ["sendto", "recvfrom"], &["--probe", "io"]);
}

#[test]
fn msquic_transfers_with_its_own_gso_and_probes_see_its_crypto() {
    let _g = serial();
    let msquic = target_dir().join("nesquic-lut-msquic");
    assert!(msquic.exists(), "{} missing: `just build` builds it (its own workspace)", msquic.display());
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let size = 5_000_000u64;
    let out = nesquic()
        .args(["run", "--lut", "msquic", "--size", "5MB", "--probe", "io,crypto", "--json"])
        .arg(&json)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = load_record(&json);
    let rep = &report.repetitions[0];
    assert_eq!((rep.bytes, rep.payload_verified), (size, true));
    let role = |name: Role| role_in(common::probes(&report, 0), name);
    for name in [Role::Server, Role::Client] {
        let r = role(name);
        for category in ["crypto.seal", "crypto.open", "crypto.header_protection", "crypto.handshake"] {
            assert!(calls(r, category) > 0, "{name:?}: no {category} (CxPlat*/quictls targets)");
        }
    }
    // One CxPlatEncrypt per datagram the server sent, and GSO packed many per message. (A handful
    // of handshake-time datagrams go out without their own CxPlatEncrypt call: 7 in every run
    // seen, independent of the payload size.)
    let server = role(Role::Server);
    let sendmsg = syscall(server, "sendmsg");
    let datagrams = sendmsg.datagrams;
    let seals = calls(server, "crypto.seal");
    assert!(seals + 16 >= datagrams && seals <= datagrams, "{seals} seals for {datagrams} datagrams: {server:?}");
    assert!(sendmsg.segmented_messages > 0, "{sendmsg:?}");
    assert!(datagrams >= 4 * sendmsg.messages, "{sendmsg:?}");
    // Measured in user space by default: CxPlat* hooked inline, sendmsg interposed in libc.
    assert_eq!(io_mechanism(sendmsg), "user (libc interposition)");
    assert!(server.functions.iter().all(|f| function_mechanism(f) == "user (inline hook)"), "{server:?}");
    assert!(stdout.contains("offload seen: GSO yes"), "{stdout}");
    assert_nothing_attached();
}

#[test]
fn calibrated_timing_recovers_a_known_cost_on_every_site_kind() {
    let _g = serial();
    // The kernel's uprobe cost on this VM moves between the calibration and the measured calls
    // now and then (quiet machine: 2 of 11 runs had push or nop 21% off, the overhead 3.4 us in
    // the run against 1.1 us calibrated): up to 4 whole attempts, each a fresh calibration and
    // run, and every attempt's failure is printed if none holds.
    let mut failures = Vec::new();
    for attempt in 1..=4 {
        match calibration_attempt() {
            Ok(()) => break,
            Err(why) => failures.push(format!("attempt {attempt}: {why}")),
        }
    }
    assert!(failures.len() < 4, "{}", failures.join("\n"));
    assert_nothing_attached();
}

/// One `nesquic trace` of the calibration workload, checked against the workload's own clock.
fn calibration_attempt() -> Result<(), String> {
    // ~5-10 us of busy loop per call: a few times an emulated probe pair's own cost (~1 us here,
    // uncompensated ~15% high), well above the calibration's spread.
    let (iterations, calls) = ("20000", "500");
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("trace.json");
    // Under SCHED_FIFO (inherited by the workload): a call is a few us of wall time, and on a
    // loaded machine a preemption inside one added ms to a batch (4 attempts of 4 failed, push
    // 540% off, at load ~6 on 2 CPUs); real-time, 12 runs of 12 held at load ~8, push and nop
    // within 7%. Root runs these tests.
    let out = std::process::Command::new("chrt")
        .args(["-f", "10", env!("CARGO_BIN_EXE_nesquic")])
        .args(["trace", "--probe-backend", "kernel", "--probe", "uprobe:nesquic_cal_*", "--json"])
        .arg(&json)
        .arg("--")
        .arg(workload())
        .args(["--calibrate", iterations, calls])
        .arg(dir.path().join("probed.json"))
        .output()
        .expect("run nesquic");
    if !out.status.success() {
        return Err(stderr(&out));
    }
    // The true cost: the workload's own clock on the never-probed twin of the same loop, timed
    // in alternating batches in the same run.
    let mut truth = std::collections::HashMap::new();
    let text = std::fs::read_to_string(dir.path().join("probed.json")).expect("workload report");
    for line in from_lines::<CalibrateLine>(&text).expect("the workload's calibration lines") {
        truth.insert(line.function, line.twin_ns_per_call);
    }
    let report = load_trace(&json);
    let kinds = &report.calibration.as_ref().expect("calibration").kinds;
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    let role = &report.probes.roles[0];
    for (name, site) in [("nesquic_cal_push", "push"), ("nesquic_cal_nop", "nop"), ("nesquic_cal_step", "single_step")]
    {
        let f = function(role, name);
        assert_eq!(f.site.as_ref().map(json_name).as_deref(), Some(site), "{f:?}");
        let truth = truth[name];
        let raw = f.timing.total_ns as f64 / f.timing.calls as f64;
        let compensated = f.compensated_mean_ns.expect("compensated");
        let error = (compensated - truth).abs() / truth;
        if site == "single_step" {
            // Single-stepping's cost on this VM swings by several us between runs: require only
            // that compensation moves the figure towards the truth.
            if error >= (raw - truth).abs() / truth {
                return Err(format!("{name}: compensated {compensated:.0} ns, raw {raw:.0} ns, true {truth:.0} ns"));
            }
        } else if error > 0.2 {
            return Err(format!(
                "{name}: compensated {compensated:.0} ns vs true {truth:.0} ns (raw {raw:.0} ns): {:.0}% off",
                error * 100.0
            ));
        }
        if raw <= compensated {
            return Err(format!(
                "{name}: compensation must remove something (raw {raw:.0}, compensated {compensated:.0} ns)"
            ));
        }
    }
    Ok(())
}

#[test]
fn duty_cycled_counts_extrapolate_to_the_full_count() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("trace.json");
    let calls_file = dir.path().join("steady.json");
    // A steady load: one call every 100 us for 3 s (30,000 calls), paced by the clock.
    let out = nesquic()
        .args(["trace", "--duty", "50ms/500ms", "--probe", "uprobe:nesquic_workload_tick", "--json"])
        .arg(&json)
        .arg("--")
        .arg(workload())
        .args(["--steady", "3000", "100"])
        .arg(&calls_file)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    // The workload's own count (no serde type for it yet: read by key).
    let made: Value = load_json(&calls_file);
    let made = made["calls"].as_f64().expect("calls");
    let report = load_trace(&json);
    let f = &report.probes.roles[0].functions[0];
    let raw = f.timing.calls as f64;
    let duty = f.duty.as_ref().expect("duty");
    let (fraction, scaled) = (duty.fraction, duty.calls);
    // The probes really were off most of the time, and the fraction is what was measured.
    assert!(fraction > 0.01 && fraction < 0.2, "fraction {fraction}");
    assert!(raw < 0.25 * made, "{raw} of {made} calls seen: not duty-cycled");
    assert!((scaled - raw / fraction).abs() < 1e-6 * scaled);
    let error = (scaled - made).abs() / made;
    assert!(error <= 0.1, "extrapolated {scaled:.0} vs {made} calls made ({:.1}% off)", error * 100.0);
    let lost = &report.probes.lost;
    assert_eq!((lost.exit_without_entry, lost.nested_overwrites), (0, 0), "{lost:?}");
    assert_nothing_attached();
}

/// Calls of the functions whose names contain `part`, on both sides.
fn calls_named(probes: &Metrics, part: &str) -> u64 {
    probes.roles.iter().flat_map(|r| &r.functions).filter(|f| f.name.contains(part)).map(|f| f.timing.calls).sum()
}

/// Runs `lut` on 3 MB with `extra` arguments and `probes`; returns the run's summary.
fn probed_run(lut: &str, extra: &[&str], probes: &str) -> RunRecord {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let out = nesquic()
        .args(["run", "--lut", lut, "--size", "3MB", "--probe", probes, "--json"])
        .arg(&json)
        .args(extra)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{lut} {extra:?}: {}", stderr(&out));
    load_record(&json)
}

#[test]
fn the_chosen_cipher_is_the_aead_that_runs() {
    let _g = serial();
    // (LUT, probe list, a function only ChaCha20-Poly1305 calls, a function only AES-GCM calls)
    let luts = [
        ("quinn", "uprobe:ring::aead::algorithm::*_seal", "chacha20_poly1305_seal", "aes_gcm_seal"),
        ("msquic", "uprobe:Poly1305_Update", "Poly1305_Update", ""),
    ];
    for (lut, probes, chacha_fn, aes_fn) in luts {
        let mut per_cipher = Vec::new();
        for cipher in ["aes128gcm", "chacha20"] {
            let report = probed_run(lut, &["--cipher", cipher], probes);
            assert!(report.repetitions[0].payload_verified);
            assert!(
                report.lut_options.iter().any(|o| o.contains(&format!("cipher={cipher}"))),
                "{:?}",
                report.lut_options
            );
            let rep = common::probes(&report, 0);
            per_cipher
                .push((calls_named(rep, chacha_fn), if aes_fn.is_empty() { 0 } else { calls_named(rep, aes_fn) }));
        }
        let [(aes_chacha, aes_aes), (chacha_chacha, chacha_aes)] = per_cipher[..] else { unreachable!() };
        // 3 MB is ~2,100 packets per direction, each sealed once.
        assert_eq!(aes_chacha, 0, "{lut}: ChaCha20 ran although AES-128-GCM was chosen");
        assert!(chacha_chacha > 2_000, "{lut}: {chacha_chacha} ChaCha20-Poly1305 calls");
        if !aes_fn.is_empty() {
            // Only the Initial packets (always AES-128-GCM, RFC 9001) use AES under chacha20.
            assert!(aes_aes > 2_000 && chacha_aes < 50, "{lut}: AES-GCM seals {aes_aes} vs {chacha_aes}");
        }
    }
    let out = nesquic().args(["run", "--lut", "quiche", "--cipher", "chacha20"]).output().expect("run nesquic");
    assert!(
        !out.status.success() && stderr(&out).contains("cannot choose its TLS 1.3 cipher suite"),
        "{}",
        stderr(&out)
    );
    assert_nothing_attached();
}

#[test]
fn the_chosen_congestion_controller_is_the_one_that_runs() {
    let _g = serial();
    // (LUT, probes on every controller's per-ACK function, [(--cc, the chosen one's name part)])
    type Controllers = &'static [(&'static str, &'static str)];
    let luts: [(&str, &str, Controllers); 3] = [
        (
            "quinn",
            "uprobe:*congestion::cubic::Cubic as *::on_ack,uprobe:*congestion::bbr::Bbr as *::on_ack,\
             uprobe:*new_reno::NewReno as *::on_ack",
            &[("cubic", "Cubic as"), ("newreno", "NewReno as"), ("bbr", "Bbr as")],
        ),
        (
            "quiche",
            "uprobe:quiche::recovery::congestion::cubic::on_packets_acked,\
             uprobe:quiche::recovery::congestion::reno::on_packets_acked,uprobe:*BBRv2 as *::on_congestion_event",
            &[("cubic", "cubic::on_packets_acked"), ("newreno", "reno::on_packets_acked"), ("bbr", "BBRv2 as")],
        ),
        (
            "msquic",
            "uprobe:*CongestionControlOnDataAcknowledged",
            &[("cubic", "CubicCongestionControl"), ("bbr", "BbrCongestionControl")],
        ),
    ];
    for (lut, probes, controllers) in luts {
        for (cc, chosen) in controllers {
            let report = probed_run(lut, &["--cc", cc], probes);
            let rep = common::probes(&report, 0);
            assert!(calls_named(rep, chosen) > 0, "{lut} --cc {cc}: {chosen} never ran");
            for (other_cc, other) in controllers.iter().filter(|(c, _)| c != cc) {
                assert_eq!(calls_named(rep, other), 0, "{lut} --cc {cc}: the {other_cc} controller ran too");
            }
        }
    }
    assert_nothing_attached();
}

/// `--probe-backend both`: in the same run the agent's libc interposition and the kernel's
/// syscall tracepoints count the same calls, bytes, datagrams and messages, for every LUT.
#[test]
fn both_backends_count_the_same_io_for_every_lut() {
    let _g = serial();
    for lut in ["quinn", "quiche", "msquic"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let json = dir.path().join("run.json");
        let out = nesquic()
            .args(["run", "--lut", lut, "--size", "5MB", "--probe", "io", "--probe-backend", "both", "--json"])
            .arg(&json)
            .output()
            .expect("run nesquic");
        assert!(out.status.success(), "{lut}: {}", stderr(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.matches("tracepoints agree exactly").count(), 2, "{lut}: {stdout}");
        let report = load_record(&json);
        for role in &common::probes(&report, 0).roles {
            let figures = |rows: &[SyscallMetrics]| -> Vec<(String, u64, u64, u64, u64)> {
                let mut v: Vec<_> =
                    rows.iter().map(|s| (syscall_name(s), s.timing.calls, s.bytes, s.datagrams, s.messages)).collect();
                v.sort();
                v
            };
            let (kernel, user) = (figures(&role.io), figures(&role.io_crosscheck));
            assert!(kernel.iter().map(|r| r.3).sum::<u64>() > 300, "{lut}: {role:?}");
            assert_eq!(kernel, user, "{lut} {:?}: tracepoints vs agent", role.role);
            assert!(role.io.iter().all(|s| io_mechanism(s) == "tracepoint"), "{role:?}");
            assert!(role.io_crosscheck.iter().all(|s| io_mechanism(s) == "user (libc interposition)"), "{role:?}");
        }
    }
    assert_nothing_attached();
}

/// The profile's `app` component (the benchmark harness) is matched by name: the harness's
/// functions must still carry the names its rules expect in every LUT executable.
#[test]
fn harness_functions_carry_the_names_the_app_component_matches() {
    for lut in ["nesquic-lut-quinn", "nesquic-lut-quiche", "nesquic-lut-msquic"] {
        let out = Command::new("nm").arg("-C").arg(target_dir().join(lut)).output().expect("nm");
        let symbols = String::from_utf8_lossy(&out.stdout);
        // The compare loop is a `target_feature` function: never inlined, so always its own symbol.
        for needle in ["nesquic_protocol::payload::equal_avx512", "nesquic_protocol::payload::equal_avx2"] {
            assert!(
                symbols.contains(needle),
                "{lut}: no symbol with {needle}: update the `app` component in probes.toml"
            );
        }
    }
}

/// Issue 19: for each LUT on a 20 MB transfer, the rule-named components where they must be
/// (crypto, packet I/O, connection) hold samples on both sides, the components sum to every sample
/// (top level and split), and the per-datagram figures times the probed datagrams give back the
/// role's CPU time.
#[test]
fn every_lut_profile_names_crypto_packet_io_and_connection_with_cost_per_datagram() {
    let _g = serial();
    for lut in ["quinn", "quiche", "msquic"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let json = dir.path().join("run.json");
        // A higher rate than the default: 20 MB is a fraction of a second of CPU.
        let out = nesquic()
            .args(["run", "--lut", lut, "--size", "20MB", "--probe", "io,profile:9999", "--json"])
            .arg(&json)
            .output()
            .expect("run");
        assert!(out.status.success(), "{lut}: {}", stderr(&out));
        let report = load_record(&json);
        let rep = &report.repetitions[0];
        for role in &rep.profile.as_ref().expect("profile").roles {
            let name = role.role;
            let total = role.samples;
            assert!(total > 100, "{lut} {name:?}: {total} samples");
            for (list, shares) in [("components", &role.components), ("split", &role.split)] {
                let sum: u64 = shares.iter().map(|c| c.samples).sum();
                assert_eq!(sum, total, "{lut} {name:?}: {list} hold every sample once");
            }
            let samples = |n: &str| role.components.iter().find(|c| c.name == n).map_or(0, |c| c.samples);
            for family in ["crypto", "packet_io", "connection"] {
                assert!(samples(family) > 0, "{lut} {name:?}: no {family} samples: {role:?}");
            }
            let cost = role.cost.as_ref().expect("cost");
            let datagrams = cost.datagrams;
            assert_eq!(cost.datagram_source, "io probes", "{lut} {name:?}");
            let cpu_s = if name == Role::Client { rep.client.cpu_total_s } else { rep.server.cpu_total_s };
            assert_eq!(cost.cpu_s, cpu_s, "{lut} {name:?}");
            let back: f64 = cost.components.iter().map(|c| c.ns_per_datagram * datagrams as f64).sum::<f64>() / 1e9;
            assert!((back - cpu_s).abs() < 1e-6 * cpu_s.max(1.0), "{lut} {name:?}: {back} s vs {cpu_s} s");
            let (_, probed, _) = probe_totals(
                role_in(common::probes(&report, 0), name),
                if name == Role::Client { "recv" } else { "send" },
            );
            assert_eq!(datagrams, probed, "{lut} {name:?}: the datagram count is the probes'");
        }
    }
    assert_nothing_attached();
}

/// `dlopen`s argv[1] 300 ms in (past its start-up), spins 300 ms in its
/// `nq_plugin_spin`, `dlclose`s it and lives 300 ms more.
const DLOPEN_LATE: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
    if (argc < 2) return 1;
    usleep(300000);
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    long (*spin)(long) = (long (*)(long))dlsym(lib, "nq_plugin_spin");
    long sum = 0;
    for (double end = now() + 0.3; now() < end;) sum += spin(100000);
    dlclose(lib);
    usleep(300000);
    return sum == 1 ? 3 : 0;
}
"#;

const SPIN_PLUGIN: &str = "long nq_plugin_spin(long n) { unsigned long x = n; \
    for (long i = 0; i < n; i++) x = x * 6364136223846793005UL + 1442695040888963407UL; return (long)(x >> 1); }\n";

/// After start-up the maps are read when a process's executable memory changes size instead of
/// every 100 ms: a library loaded after start-up and unloaded before the process ends is
/// still named (the 5 s safety net never reads in this 0.9 s process after its start).
#[test]
fn code_mapped_late_and_unmapped_is_named_from_its_change_of_executable_memory() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let compile = |name: &str, source: &str, args: &[&str]| {
        let (src, out) = (dir.path().join(format!("{name}.c")), dir.path().join(name));
        std::fs::write(&src, source).expect("write the source");
        let status = Command::new("cc").args(args).arg("-o").arg(&out).arg(&src).status().expect("run cc");
        assert!(status.success(), "cc {name}");
        out
    };
    let plugin = compile("libnqspin.so", SPIN_PLUGIN, &["-shared", "-fPIC", "-O1", "-fno-omit-frame-pointer"]);
    let program = compile("dlopen-late", DLOPEN_LATE, &["-O1", "-fno-omit-frame-pointer"]);
    let traced = trace_into(dir.path(), "profile:tick", &[program.as_os_str(), plugin.as_os_str()]);
    let profile = traced.profile.as_ref().expect("profile");
    let role = &profile.roles[0];
    // 300 ms of wall time of one busy thread on the tick, nearly all the process's CPU time (a
    // busy process beside it can take a third of it): HZ samples per CPU second, at least half
    // of them named.
    let spin = role.top_functions.iter().find(|f| f.name == "nq_plugin_spin").map_or(0, |f| f.samples);
    let cpu_s = traced.cpu_user_s + traced.cpu_system_s;
    assert!(cpu_s > 0.1, "{cpu_s} s of CPU");
    let expected = profile.frequency_hz as f64 * cpu_s;
    assert!(spin as f64 >= 0.5 * expected, "{spin} samples in nq_plugin_spin of ~{expected}: {role:?}");
    // The library's mapping changed the process's executable memory, which started the reads
    // that named it (the unmapping may too).
    let reads = profile.maps_reads.expect("maps reads");
    assert!(reads.code_changes >= 1 && reads.reads >= reads.code_changes, "{reads:?}");
    let no_mapping =
        role.unknown_leaves.iter().find(|s| s.name == Unresolved::NoMapping.label()).map_or(0, |s| s.samples);
    assert!(no_mapping < spin / 10, "{no_mapping} samples with no mapping: {role:?}");
    assert_nothing_attached();
}
