//! The TCP+TLS baseline (`--lut tcp-tls`) end to end: every testcase on loopback and veth with
//! the payload verified; the executable's own `done` report with every connection and stream
//! (one TCP connection each) summing to the aggregate; probes that count its TCP syscalls and
//! TLS records the same on both backends; a wrong trust anchor failing the handshake; `--cc`,
//! `--rcvbuf` and `ktls=on` (root: namespaces and probes).

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use common::{nesquic, our_namespaces, run_json, serial, stderr};

/// TLS 1.3 record plaintext limit (rustls' default fragment size).
const RECORD: u64 = 16_384;
/// The payload pattern's period: the server hands rustls one period-long window per write.
const PERIOD: u64 = 131_071;

fn lut_binary() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_nesquic")).with_file_name("nesquic-lut-tcp-tls")
}

fn u64_at(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(Value::as_u64).unwrap_or_else(|| panic!("{pointer} missing in {v}"))
}

#[test]
fn every_testcase_runs_on_loopback_and_veth() {
    let _g = serial();
    for link in ["loopback", "veth"] {
        for (testcase, size, connections, streams) in [
            ("bulk", 2_000_000u64, 1u64, 1u64),
            ("multi-conn", 1_000_000, 4, 1),
            ("handshakes", 1_000, 200, 1),
            ("multi-stream", 1_000_000, 1, 8),
        ] {
            let report =
                run_json(&["--lut", "tcp-tls", "--testcase", testcase, "--size", &size.to_string(), "--link", link]);
            let rep = &report["repetitions"][0];
            let total = size * connections * streams;
            assert_eq!(rep["bytes"].as_u64(), Some(total), "{link} {testcase}");
            assert_eq!(rep["payload_verified"], true, "{link} {testcase}");
            assert!(rep["handshake_ms"].as_f64().expect("handshake") > 0.0);
            if connections * streams > 1 {
                let w = &rep["workload"];
                assert_eq!(
                    (w["connections"].as_u64(), w["streams_per_connection"].as_u64()),
                    (Some(connections), Some(streams)),
                    "{link} {testcase}"
                );
            }
        }
    }
    assert!(our_namespaces().is_empty(), "namespaces left behind: {:?}", our_namespaces());
}

/// Runs the executable's server and client directly; returns the client's `done` line, or its
/// stderr when it fails.
fn direct(client_ca: Option<&Path>, size: u64, connections: u32, parallel: u32, streams: u32) -> Result<Value, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = nesquic_lut_adapters::tls::generate(dir.path()).expect("certificate");
    let shape = |client: bool| {
        let mut args = vec!["--connections".to_string(), connections.to_string()];
        args.extend(["--streams".to_string(), streams.to_string()]);
        if client {
            args.extend(["--parallel".to_string(), parallel.to_string()]);
        }
        args
    };
    let mut server = Command::new(lut_binary())
        .args(["server", "--listen", "127.0.0.1:0", "--cert"])
        .arg(&certs.cert)
        .arg("--key")
        .arg(&certs.key)
        .args(shape(false))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start server");
    let mut lines = BufReader::new(server.stdout.take().expect("stdout")).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            let v: Value = serde_json::from_str(&l).ok()?;
            (v["event"] == "listening").then(|| v["addr"].as_str().map(str::to_string)).flatten()
        })
        .expect("listening line");
    let client = Command::new(lut_binary())
        .args(["client", "--connect", &addr, "--size", &size.to_string(), "--ca"])
        .arg(client_ca.unwrap_or(&certs.cert))
        .args(shape(true))
        .output()
        .expect("run client");
    if !client.status.success() {
        let _ = server.kill();
        let _ = server.wait();
        return Err(stderr(&client));
    }
    let status = server.wait().expect("server");
    assert!(status.success(), "server failed");
    let stdout = String::from_utf8_lossy(&client.stdout);
    let done = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["event"] == "done")
        .expect("done line");
    Ok(done)
}

#[test]
fn per_connection_and_per_stream_figures_add_up() {
    let _g = serial();
    for (connections, parallel, streams) in [(6u32, 3u32, 1u32), (2, 2, 4), (3, 1, 3)] {
        let size = 300_000u64;
        let done = direct(None, size, connections, parallel, streams).expect("run");
        let list = done["connections"].as_array().expect("connections");
        assert_eq!(list.len(), connections as usize, "{done}");
        let mut sum = 0;
        let (mut first_request, mut last_byte) = (u64::MAX, 0);
        for c in list {
            let s = c["streams"].as_array().expect("streams");
            assert_eq!(s.len(), streams as usize, "{c}");
            for stream in s {
                assert_eq!(stream["bytes"].as_u64(), Some(size), "every stream's TCP connection verified {size} B");
                // Each stream's own TCP connection: request to last byte, inside its connection's window.
                assert!(u64_at(stream, "/transfer_ns") <= u64_at(c, "/transfer_ns"), "{c}");
            }
            sum += s.iter().map(|s| u64_at(s, "/bytes")).sum::<u64>();
            let start = u64_at(c, "/start_ns") + u64_at(c, "/handshake_ns");
            first_request = first_request.min(start);
            last_byte = last_byte.max(start + u64_at(c, "/transfer_ns"));
        }
        assert_eq!(u64_at(&done, "/bytes"), sum);
        assert_eq!(sum, size * u64::from(connections * streams));
        assert_eq!(u64_at(&done, "/transfer_ns"), last_byte - first_request);
        assert!(u64_at(&done, "/elapsed_ns") >= last_byte, "{done}");
    }
}

#[test]
fn a_wrong_trust_anchor_fails_the_handshake() {
    let _g = serial();
    let other = tempfile::tempdir().expect("tempdir");
    let stranger = nesquic_lut_adapters::tls::generate(other.path()).expect("certificate");
    let err = direct(Some(&stranger.cert), 1000, 1, 1, 1).expect_err("must not connect");
    assert!(err.contains("handshake") && err.contains("invalid peer certificate"), "{err}");
}

/// One role's probe figures.
fn role<'a>(report: &'a Value, name: &str) -> &'a Value {
    let roles = report["repetitions"][0]["probes"]["roles"].as_array().expect("roles");
    roles.iter().find(|r| r["role"] == name).unwrap_or_else(|| panic!("{name} missing"))
}

fn calls(role: &Value, category: &str) -> u64 {
    let functions = role["functions"].as_array().expect("functions");
    functions.iter().filter(|f| f["category"] == category).map(|f| f["calls"].as_u64().expect("calls")).sum()
}

/// (calls, bytes) over one role's I/O rows of one direction.
fn io(role: &Value, direction: &str) -> (u64, u64) {
    let rows = role["io"].as_array().expect("io");
    let rows = rows.iter().filter(|s| s["direction"] == direction);
    rows.fold((0, 0), |(c, b), s| (c + s["calls"].as_u64().expect("calls"), b + s["bytes"].as_u64().expect("bytes")))
}

/// The payload records: the server writes one pattern period at a time, cut into 16 KiB records.
fn payload_records(size: u64) -> u64 {
    let (full, rest) = (size / PERIOD, size % PERIOD);
    full * PERIOD.div_ceil(RECORD) + rest.div_ceil(RECORD)
}

#[test]
fn probes_count_tcp_syscalls_and_tls_records_alike_on_both_backends() {
    let _g = serial();
    let size = 4_000_000u64;
    let records = payload_records(size);
    let mut seen = Vec::new();
    for backend in ["user", "kernel"] {
        let report = run_json(&[
            "--lut",
            "tcp-tls",
            "--size",
            &size.to_string(),
            "--probe",
            "io,crypto",
            "--probe-backend",
            backend,
        ]);
        let (server, client) = (role(&report, "server"), role(&report, "client"));
        let (server_sends, server_sent) = io(server, "send");
        let (client_recvs, client_received) = io(client, "recv");
        let (_, client_sent) = io(client, "send");
        let (_, server_received) = io(server, "recv");
        // What one side sent, the other received; TLS adds 22 B per record (header, type, tag).
        assert_eq!(server_sent, client_received, "{backend}");
        assert_eq!(client_sent, server_received, "{backend}");
        assert!(server_sent >= size + 22 * records && server_sent < size + 22 * records + 8192, "{backend}");
        // One sendmsg per pattern window (its records together), plus the handshake flight and tickets.
        let windows = size.div_ceil(PERIOD);
        assert!((windows..windows + 8).contains(&server_sends), "{backend}: {server_sends} sends, {windows} windows");
        // Receives take up to 256 KiB: at least size / 256 KiB of them.
        assert!(client_recvs >= size / (256 * 1024), "{backend}: {client_recvs} receives");
        // Every record the server seals the client opens, and the other way round; the payload's
        // records plus a few (handshake flight, session tickets, close_notify).
        let sealed = calls(server, "crypto.seal");
        assert_eq!(sealed, calls(client, "crypto.open"), "{backend}");
        assert_eq!(calls(client, "crypto.seal"), calls(server, "crypto.open"), "{backend}");
        assert!((records..records + 8).contains(&sealed), "{backend}: {sealed} sealed, {records} payload records");
        // The client seals its Finished, its request and its close_notify.
        assert_eq!(calls(client, "crypto.seal"), 3, "{backend}");
        assert!(calls(client, "crypto.handshake") > 0 && calls(server, "crypto.handshake") > 0, "{backend}");
        assert_eq!(calls(server, "crypto.header_protection"), 0, "TLS over TCP has no header protection");
        seen.push((sealed, calls(server, "crypto.open"), server_sends));
    }
    assert_eq!(seen[0], seen[1], "user and kernel backends: (seal, open, sends)");
    // Both at once: the agent's interposition and the tracepoints see the same TCP syscalls.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = nesquic()
        .args(["run", "--lut", "tcp-tls", "--size", "4MB", "--probe", "io", "--probe-backend", "both"])
        .arg("--out")
        .arg(dir.path().join("run"))
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("tracepoints agree exactly").count(), 2, "{stdout}");
}

#[test]
fn congestion_control_and_buffers_are_applied_and_reported() {
    let _g = serial();
    let report = run_json(&[
        "--lut", "tcp-tls", "--size", "1MB", "--cc", "newreno", "--rcvbuf", "1000000", "--sndbuf", "600000",
    ]);
    let settings = report["repetitions"][0]["io_settings"].as_array().expect("io settings");
    assert_eq!(settings.len(), 2, "{settings:?}");
    for pair in settings {
        let io = &pair[1];
        // Read back with getsockopt on the connected sockets.
        assert_eq!(io["congestion_control"], "reno", "{pair}");
        assert_eq!(io["recv_buffer"].as_u64(), Some(1_000_000), "{pair}");
        assert_eq!(io["send_buffer"].as_u64(), Some(600_000), "{pair}");
    }
    let report = run_json(&["--lut", "tcp-tls", "--size", "1MB", "--cc", "bbr"]);
    for pair in report["repetitions"][0]["io_settings"].as_array().expect("io settings") {
        assert_eq!(pair[1]["congestion_control"], "bbr", "{pair}");
    }
}

#[test]
fn ktls_and_unknown_options_are_refused_with_the_reason() {
    let _g = serial();
    let out = nesquic()
        .args(["run", "--lut", "tcp-tls", "--size", "1KB", "--lut-opt", "ktls=on"])
        .output()
        .expect("run nesquic");
    assert!(!out.status.success());
    let err = stderr(&out);
    let ulp = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp").unwrap_or_default();
    if ulp.split_whitespace().any(|u| u == "tls") {
        assert!(err.contains("kTLS is not implemented"), "{err}");
    } else {
        assert!(err.contains("kernel has no tls ULP") && err.contains("ENOENT"), "{err}");
    }
    let out = nesquic().args(["run", "--lut", "tcp-tls", "--size", "1KB", "--gso", "off"]).output().expect("run");
    assert!(
        !out.status.success() && stderr(&out).contains("does not understand --lut-opt gso=off"),
        "{}",
        stderr(&out)
    );
    let out = nesquic().args(["run", "--lut", "tcp-tls", "--io", "nesquic"]).output().expect("run");
    assert!(!out.status.success() && stderr(&out).contains("does not support --io nesquic"), "{}", stderr(&out));
}
