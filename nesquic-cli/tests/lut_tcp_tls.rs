//! The TCP+TLS baseline (`--lut tcp-tls`) end to end (every testcase on loopback and veth, and its
//! `done` report adding up, are in testcases.rs with every other LUT): probes that count its TCP syscalls and
//! TLS records the same on both backends; a wrong trust anchor failing the handshake; `--cc`,
//! `--rcvbuf` and `ktls=on` (root: namespaces and probes).

mod common;

use std::path::PathBuf;

use common::lut::{calls, role};
use common::{nesquic, run_record, serial, stderr, Role, RoleMetrics, Shape};

/// TLS 1.3 record plaintext limit (rustls' default fragment size).
const RECORD: u64 = 16_384;
/// The payload pattern's longest window: the server hands rustls one such window per write.
const WINDOW: u64 = 131_071;

fn lut_binary() -> PathBuf {
    common::lut::lut_binary("tcp-tls", "`just build` builds it (cargo build --release -p nesquic-lut-bins)")
}

#[test]
fn a_wrong_trust_anchor_fails_the_handshake() {
    let _g = serial();
    let other = tempfile::tempdir().expect("tempdir");
    let stranger = nesquic_lut_adapters::tls::generate(other.path()).expect("certificate");
    let shape = Shape { connections: 1, parallel: 1, streams: 1, size: 1000 };
    let err = common::direct(&lut_binary(), &[], Some(&stranger.cert), shape).expect_err("must not connect");
    assert!(err.contains("handshake") && err.contains("invalid peer certificate"), "{err}");
}

/// (calls, bytes) over one role's I/O rows of one direction.
fn io(role: &RoleMetrics, direction: &str) -> (u64, u64) {
    let rows = role.io.iter().filter(|s| common::json_name(&s.direction) == direction);
    rows.fold((0, 0), |(c, b), s| (c + s.timing.calls, b + s.bytes))
}

/// The payload records: the server writes one pattern window at a time, cut into 16 KiB records.
fn payload_records(size: u64) -> u64 {
    let (full, rest) = (size / WINDOW, size % WINDOW);
    full * WINDOW.div_ceil(RECORD) + rest.div_ceil(RECORD)
}

#[test]
fn probes_count_tcp_syscalls_and_tls_records_alike_on_both_backends() {
    let _g = serial();
    let size = 4_000_000u64;
    let records = payload_records(size);
    let mut seen = Vec::new();
    for backend in ["user", "kernel"] {
        let report = run_record(&[
            "--lut",
            "tcp-tls",
            "--size",
            &size.to_string(),
            "--probe",
            "io,crypto",
            "--probe-backend",
            backend,
        ]);
        let (server, client) = (role(&report, Role::Server), role(&report, Role::Client));
        let (server_sends, server_sent) = io(server, "send");
        let (client_recvs, client_received) = io(client, "recv");
        let (_, client_sent) = io(client, "send");
        let (_, server_received) = io(server, "recv");
        // What one side sent, the other received; TLS adds 22 B per record (header, type, tag).
        assert_eq!(server_sent, client_received, "{backend}");
        assert_eq!(client_sent, server_received, "{backend}");
        assert!(server_sent >= size + 22 * records && server_sent < size + 22 * records + 8192, "{backend}");
        // One sendmsg per pattern window (its records together), plus the handshake flight and tickets.
        let windows = size.div_ceil(WINDOW);
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
    let report = run_record(&[
        "--lut", "tcp-tls", "--size", "1MB", "--cc", "newreno", "--rcvbuf", "1000000", "--sndbuf", "600000",
    ]);
    let settings = &report.repetitions[0].io_settings;
    assert_eq!(settings.len(), 2, "{settings:?}");
    for pair in settings {
        let io = &pair.1;
        // Read back with getsockopt on the connected sockets.
        assert_eq!(io.congestion_control.as_deref(), Some("reno"), "{pair:?}");
        assert_eq!(io.recv_buffer, 1_000_000, "{pair:?}");
        assert_eq!(io.send_buffer, 600_000, "{pair:?}");
    }
    let report = run_record(&["--lut", "tcp-tls", "--size", "1MB", "--cc", "bbr"]);
    for pair in &report.repetitions[0].io_settings {
        assert_eq!(pair.1.congestion_control.as_deref(), Some("bbr"), "{pair:?}");
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
