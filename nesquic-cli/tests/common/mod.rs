//! Helpers the end-to-end test files share (each file is its own crate and uses a subset).
#![allow(dead_code)]

pub mod lut;
pub mod ssh_host;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

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
/// its summary (`--json`).
pub fn run_json(args: &[&str]) -> serde_json::Value {
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
    serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("json")
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
pub fn direct(
    binary: &Path,
    extra: &[&str],
    client_ca: Option<&Path>,
    shape: Shape,
) -> Result<serde_json::Value, String> {
    direct_with(binary, extra, client_ca, shape, &[])
}

/// [`direct`], with environment variables for the server (fault injection).
pub fn direct_with(
    binary: &Path,
    extra: &[&str],
    client_ca: Option<&Path>,
    shape: Shape,
    server_env: &[(&str, &str)],
) -> Result<serde_json::Value, String> {
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
        .find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(&l).ok()?;
            (v["event"] == "listening").then(|| v["addr"].as_str().map(str::to_string)).flatten()
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
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "done")
        .expect("done line");
    Ok(done)
}

fn u64_at(v: &serde_json::Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(serde_json::Value::as_u64).unwrap_or_else(|| panic!("{pointer} missing in {v}"))
}

/// A `done` line of a multi-connection or multi-stream run: every connection and stream
/// present with its verified bytes, each stream's time inside its connection's, the per-connection
/// sums equal to the aggregate, and the aggregate times consistent with the connections'.
pub fn assert_done_adds_up(done: &serde_json::Value, shape: Shape) {
    let list = done["connections"].as_array().unwrap_or_else(|| panic!("no connections in {done}"));
    assert_eq!(list.len(), shape.connections as usize, "{done}");
    let mut sum = 0;
    let (mut first_request, mut last_byte) = (u64::MAX, 0);
    for c in list {
        let s = c["streams"].as_array().expect("streams");
        assert_eq!(s.len(), shape.streams as usize, "{c}");
        for stream in s {
            assert_eq!(stream["bytes"].as_u64(), Some(shape.size), "every stream verified {} B: {c}", shape.size);
            assert!(u64_at(stream, "/transfer_ns") <= u64_at(c, "/transfer_ns"), "{c}");
        }
        assert!(u64_at(c, "/handshake_ns") > 0, "{c}");
        sum += s.iter().map(|s| u64_at(s, "/bytes")).sum::<u64>();
        let start = u64_at(c, "/start_ns") + u64_at(c, "/handshake_ns");
        first_request = first_request.min(start);
        last_byte = last_byte.max(start + u64_at(c, "/transfer_ns"));
    }
    assert_eq!(u64_at(done, "/bytes"), sum);
    assert_eq!(sum, shape.size * u64::from(shape.connections * shape.streams));
    assert_eq!(u64_at(done, "/transfer_ns"), last_byte - first_request);
    assert!(u64_at(done, "/elapsed_ns") >= last_byte, "{done}");
}

/// Names of loaded BPF programs that are ours (`nq_` prefix).
pub fn our_programs() -> Vec<String> {
    let out = Command::new("bpftool").args(["-j", "prog", "show"]).output().expect("bpftool");
    let progs: serde_json::Value = serde_json::from_slice(&out.stdout).expect("bpftool json");
    progs
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .filter(|n| n.starts_with("nq_"))
        .map(String::from)
        .collect()
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
