//! Helpers the end-to-end test files share (each file is its own crate and uses a subset).
#![allow(dead_code)]

pub mod lut;
pub mod ssh_host;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

// The types the tests read, in one place (each test file uses a subset).
#[allow(unused_imports)]
pub use nesquic_ebpf::profile::Share;
#[allow(unused_imports)]
pub use nesquic_ebpf::{FunctionMetrics, Metrics, RoleMetrics, SyscallMetrics};
#[allow(unused_imports)]
pub use nesquic_protocol::report::{ClientResult, LutEvent};
#[allow(unused_imports)]
pub use nesquic_protocol::Role;
#[allow(unused_imports)]
pub use nesquic_record::RunRecord;

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises the tests of one file that share machine state (namespaces, probes).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `nesquic`, run from cargo's scratch directory (run directories land there).
pub fn nesquic() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nesquic"));
    // Tests ask for the probes they check: `run` turns some on by default as root.
    c.env("NESQUIC_PROBE", "none");
    c.current_dir(env!("CARGO_TARGET_TMPDIR"));
    c
}

/// A process's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `nesquic trace OPTIONS --json DIR/trace.json -- COMMAND`, which must succeed: its report and
/// stderr.
pub fn trace_json(
    dir: &Path,
    options: &[&str],
    command: &[&std::ffi::OsStr],
) -> (nesquic_engine::trace::TraceReport, String) {
    let json = dir.join("trace.json");
    let out =
        nesquic().arg("trace").args(options).arg("--json").arg(&json).arg("--").args(command).output().expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    (load_json(&json), stderr(&out))
}

/// Network namespaces nesquic created (`nq-<pid>-s|c`).
pub fn our_namespaces() -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("nq-"))
        .map(String::from)
        .collect()
}

/// Namespaces nesquic left behind: those whose creating process (`nq-<pid>-…`) is gone. Runs of
/// other tests in the same binary may hold theirs right now.
pub fn leaked_namespaces() -> Vec<String> {
    our_namespaces()
        .into_iter()
        .filter(|n| {
            let pid = n.trim_start_matches("nq-").split('-').next().unwrap_or_default();
            !std::path::Path::new("/proc").join(pid).exists()
        })
        .collect()
}

/// `nesquic run ARGS` into a scratch run directory; fails the test unless it succeeds; returns
/// its typed record (`--json`).
pub fn run_record(args: &[&str]) -> RunRecord {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let out = nesquic()
        .arg("run")
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--out")
        .arg(dir.path().join("run"))
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    load_record(&json)
}

/// A run record nesquic wrote (`--json`, or a run directory's summary.json).
pub fn load_record(path: &Path) -> RunRecord {
    RunRecord::load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Any JSON file nesquic wrote, as the type it was written from.
pub fn load_json<T: serde::de::DeserializeOwned>(path: &Path) -> T {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A qlog trace nesquic wrote, read strictly (JSON-SEQ framing, event times never decreasing),
/// and Nesquic's events in it, typed.
pub fn qlog_trace(path: &Path) -> (nesquic_record::qlog::reader::QlogTrace, Vec<nesquic_record::events::Event>) {
    let trace = nesquic_record::qlog::reader::read(path).unwrap_or_else(|e| panic!("{e}"));
    let events = trace.nesquic_events().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (trace, events)
}

// Typed reads of the probe figures. The probe rows' direction, syscall and mechanism are read
// through their JSON names here only, so the tests do not change when those become enums.

/// The probes of repetition `rep` (panics when the run had none).
pub fn probes(record: &RunRecord, rep: usize) -> &Metrics {
    record.repetitions[rep].probes.as_ref().unwrap_or_else(|| panic!("repetition {rep} has no probes"))
}

/// One side's probe figures in a probes section.
pub fn role_in(metrics: &Metrics, role: Role) -> &RoleMetrics {
    metrics.roles.iter().find(|r| r.role == role).unwrap_or_else(|| panic!("{role:?} missing"))
}

/// One side's probe figures in the first repetition.
pub fn role_metrics(record: &RunRecord, role: Role) -> &RoleMetrics {
    role_in(probes(record, 0), role)
}

/// A value's JSON name (`"send"`, `"sendmsg"`, `"uprobe"`): what the file says, whatever the
/// Rust type holding it.
pub fn json_name<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        other => panic!("not a name: {other:?}"),
    }
}

/// The syscall a row counts.
pub fn syscall_name(s: &SyscallMetrics) -> String {
    json_name(&s.syscall)
}

/// Whether a row counts sends.
pub fn is_send(s: &SyscallMetrics) -> bool {
    json_name(&s.direction) == "send"
}

/// Whether a row counts receives.
pub fn is_recv(s: &SyscallMetrics) -> bool {
    json_name(&s.direction) == "recv"
}

/// Who measured a syscall row.
pub fn io_mechanism(s: &SyscallMetrics) -> String {
    json_name(&s.mechanism)
}

/// Who measured a function row.
pub fn function_mechanism(f: &FunctionMetrics) -> String {
    json_name(&f.mechanism)
}

/// One syscall's row, if it was called.
pub fn find_syscall<'a>(role: &'a RoleMetrics, name: &str) -> Option<&'a SyscallMetrics> {
    role.io.iter().find(|s| syscall_name(s) == name)
}

/// One function's row (panics when missing).
pub fn function<'a>(role: &'a RoleMetrics, name: &str) -> &'a FunctionMetrics {
    role.functions.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("{name} missing"))
}

/// Calls of every function of one probe category.
pub fn category_calls(role: &RoleMetrics, category: &str) -> u64 {
    role.functions.iter().filter(|f| f.category == category).map(|f| f.timing.calls).sum()
}

/// Bytes of every function of one probe category.
pub fn category_bytes(role: &RoleMetrics, category: &str) -> u64 {
    role.functions.iter().filter(|f| f.category == category).map(|f| f.bytes).sum()
}

/// Sum of `field` over one side's send rows.
pub fn sent(role: &RoleMetrics, field: fn(&SyscallMetrics) -> u64) -> u64 {
    role.io.iter().filter(|s| is_send(s)).map(field).sum()
}

/// Sum of `field` over one side's receive rows.
pub fn received(role: &RoleMetrics, field: fn(&SyscallMetrics) -> u64) -> u64 {
    role.io.iter().filter(|s| is_recv(s)).map(field).sum()
}

/// Waits up to `grace` for `child` to exit on its own, kills it otherwise, and says how it ended
/// and what it wrote to stderr (piped).
fn stop_and_explain(child: &mut std::process::Child, grace: Duration) -> String {
    let deadline = std::time::Instant::now() + grace;
    let mut status = child.try_wait().ok().flatten();
    while status.is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        status = child.try_wait().ok().flatten();
    }
    let ended = match status {
        Some(status) => format!("exited on its own ({status})"),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            "still running, killed".to_string()
        }
    };
    let mut err = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
    }
    format!("{ended}; stderr: {}", err.trim())
}

/// A workload for [`direct`]: connections, connections at once, streams each, bytes per stream.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub connections: u32,
    pub parallel: u32,
    pub streams: u32,
    pub size: u64,
}

/// Runs a LUT executable's server and client directly (`extra`: arguments both roles get, such
/// as `--io nesquic`); returns the client's `done` line, or its stderr when it fails.
pub fn direct(binary: &Path, extra: &[&str], client_ca: Option<&Path>, shape: Shape) -> Result<ClientResult, String> {
    direct_with(binary, extra, client_ca, shape, &[])
}

/// [`direct`], with environment variables for the server (fault injection).
pub fn direct_with(
    binary: &Path,
    extra: &[&str],
    client_ca: Option<&Path>,
    shape: Shape,
    server_env: &[(&str, &str)],
) -> Result<ClientResult, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = nesquic_lut_adapters::tls::generate(dir.path()).expect("certificate");
    let counts = |client: bool| {
        let mut args = vec!["--connections".to_string(), shape.connections.to_string()];
        args.extend(["--streams".to_string(), shape.streams.to_string()]);
        if client {
            args.extend(["--parallel".to_string(), shape.parallel.to_string()]);
        }
        args
    };
    let mut server = Command::new(binary)
        .args(["server", "--listen", "127.0.0.1:0", "--cert"])
        .arg(&certs.cert)
        .arg("--key")
        .arg(&certs.key)
        .args(counts(false))
        .args(extra)
        .envs(server_env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start server");
    let mut lines = BufReader::new(server.stdout.take().expect("stdout")).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| match serde_json::from_str(&l) {
            Ok(LutEvent::Listening { addr }) => Some(addr.to_string()),
            _ => None,
        })
        .expect("listening line");
    let client = Command::new(binary)
        .args(["client", "--connect", &addr, "--size", &shape.size.to_string(), "--ca"])
        .arg(client_ca.unwrap_or(&certs.cert))
        .args(counts(true))
        .args(extra)
        .output()
        .expect("run client");
    if !client.status.success() {
        // The server's side of the story: a server that failed first (its exit ends every
        // connection) makes the client's error a consequence, not the cause.
        let server_side = stop_and_explain(&mut server, Duration::from_secs(3));
        return Err(format!("{}\nserver: {server_side}", stderr(&client)));
    }
    let status = server.wait().expect("server");
    if !status.success() {
        panic!("{}: server failed: {}", binary.display(), stop_and_explain(&mut server, Duration::ZERO));
    }
    let stdout = String::from_utf8_lossy(&client.stdout);
    let done = stdout
        .lines()
        .find_map(|l| match serde_json::from_str(l) {
            Ok(LutEvent::Done(result)) => Some(result),
            _ => None,
        })
        .expect("done line");
    Ok(done)
}

/// A `done` line of a multi-connection or multi-stream run: every connection and stream
/// present with its verified bytes, each stream's time inside its connection's, the per-connection
/// sums equal to the aggregate, and the aggregate times consistent with the connections'.
pub fn assert_done_adds_up(done: &ClientResult, shape: Shape) {
    assert_eq!(done.connections.len(), shape.connections as usize, "{done:?}");
    let mut sum = 0;
    let (mut first_request, mut last_byte) = (u64::MAX, 0);
    for c in &done.connections {
        assert_eq!(c.streams.len(), shape.streams as usize, "{c:?}");
        for stream in &c.streams {
            assert_eq!(stream.bytes, shape.size, "every stream verified {} B: {c:?}", shape.size);
            assert!(stream.transfer_ns <= c.transfer_ns, "{c:?}");
        }
        assert!(c.handshake_ns > 0, "{c:?}");
        sum += c.bytes();
        let start = c.start_ns + c.handshake_ns;
        first_request = first_request.min(start);
        last_byte = last_byte.max(start + c.transfer_ns);
    }
    assert_eq!(done.bytes, sum);
    assert_eq!(sum, shape.size * u64::from(shape.connections * shape.streams));
    assert_eq!(done.transfer_ns, last_byte - first_request);
    assert!(done.elapsed_ns >= last_byte, "{done:?}");
}

/// One program in `bpftool -j prog show` (bpftool's format, not nesquic's).
#[derive(serde::Deserialize)]
struct BpfProg {
    #[serde(default)]
    name: Option<String>,
}

/// Names of loaded BPF programs that are ours (`nq_` prefix).
pub fn our_programs() -> Vec<String> {
    let out = Command::new("bpftool").args(["-j", "prog", "show"]).output().expect("bpftool");
    let progs: Vec<BpfProg> = serde_json::from_slice(&out.stdout).expect("bpftool json");
    progs.into_iter().filter_map(|p| p.name).filter(|n| n.starts_with("nq_")).collect()
}

/// Fails unless every probe of ours is gone (within 5 s).
pub fn assert_nothing_attached() {
    // Program teardown after the last fd closes is immediate, but give the kernel a moment.
    for _ in 0..50 {
        if our_programs().is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("probes still loaded: {:?}", our_programs());
}
