//! quiche and quinn-proto transfers through the translation layer over real loopback sockets:
//! payload verified by the client, every I/O-layer switch, injected loss and reordering.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use nesquic_io::{Counters, IoConfig, IoSwitches};
use nesquic_protocol::client::Workload;
use nesquic_protocol::report::ClientResult;
use nesquic_translation::quiche_shim::Quiche;
use nesquic_translation::quinn_shim::QuinnProtoStack as QuinnProto;
use nesquic_translation::{Impairment, Stack, StackOptions, Summary};

const SIZE: u64 = 3_000_000;

struct Certs {
    _dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
}

fn certs() -> Certs {
    let dir = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (dir.path().join("cert.der"), dir.path().join("key.der"));
    std::fs::write(&cert, certified.cert.der()).unwrap();
    std::fs::write(&key, certified.key_pair.serialize_der()).unwrap();
    Certs { _dir: dir, cert, key }
}

/// Runs one transfer; returns (server, client) summaries.
fn transfer<S: Stack>(switches: IoSwitches, client_impairment: Impairment, size: u64) -> (Summary, Summary) {
    let (server, client) = workload::<S>(switches, client_impairment, Workload::bulk(size));
    let done = client.report.as_ref().unwrap();
    assert_eq!(done.bytes, size, "verified bytes");
    assert!(done.transfer_ns > 0 && done.handshake_ns > 0 && done.connections.is_empty(), "{done:?}");
    (server, client)
}

/// Runs the client workload `shape` against a server expecting its connections and streams.
fn workload<S: Stack>(switches: IoSwitches, client_impairment: Impairment, shape: Workload) -> (Summary, Summary) {
    let certs = certs();
    let config = IoConfig { switches, ..IoConfig::default() };
    let server_io = nesquic_translation::bind("127.0.0.1:0".parse().unwrap(), &config).unwrap();
    let server_addr: SocketAddr = server_io.local_addr().unwrap();
    let options = StackOptions { pacing: true, max_streams: shape.streams, ..StackOptions::default() };
    let (cert, key) = (certs.cert.clone(), certs.key.clone());
    let server_options = options.clone();
    let server = std::thread::spawn(move || {
        let connections = shape.connections;
        nesquic_translation::serve::<S>(&server_io, &cert, &key, connections, &server_options, &Impairment::default())
    });
    let client_io = nesquic_translation::bind("0.0.0.0:0".parse().unwrap(), &config).unwrap();
    let mut last_progress = 0;
    let client = nesquic_translation::download::<S>(
        &client_io,
        server_addr,
        &certs.cert,
        shape,
        &options,
        &client_impairment,
        &mut |bytes| last_progress = bytes,
    )
    .unwrap_or_else(|e| panic!("{} client: {e}", S::NAME));
    let server = server.join().unwrap().unwrap_or_else(|e| panic!("{} server: {e}", S::NAME));
    let done = client.report.as_ref().unwrap();
    let total = u64::from(shape.connections) * u64::from(shape.streams) * shape.size;
    assert_eq!(done.bytes, total, "verified bytes");
    assert_eq!(last_progress, total, "final progress report");
    (server, client)
}

/// Both directions' counters are consistent between the two sockets (nothing lost on loopback
/// with 8 MiB buffers): what one side sent, the other received.
fn assert_mirrored(server: &Counters, client: &Counters) {
    assert_eq!(server.send.datagrams, client.recv.datagrams, "server -> client datagrams");
    assert_eq!(server.send.bytes, client.recv.bytes, "server -> client bytes");
    assert_eq!(client.send.datagrams, server.recv.datagrams, "client -> server datagrams");
}

fn check_fast_path<S: Stack>() {
    let stack = S::NAME;
    let (server, client) = transfer::<S>(IoSwitches::default(), Impairment::default(), SIZE);
    assert_mirrored(&server.io, &client.io);
    let s = server.io.send;
    assert!(s.bytes > SIZE && s.datagrams >= SIZE / 1452, "{s:?}");
    // GSO + sendmmsg: many datagrams per syscall; GRO + recvmmsg on the client likewise.
    assert!(s.datagrams >= 8 * s.syscalls, "{stack} server sent {} datagrams in {} syscalls", s.datagrams, s.syscalls);
    let r = client.io.recv;
    assert!(r.datagrams >= 4 * r.syscalls, "{stack} client got {} datagrams in {} syscalls", r.datagrams, r.syscalls);
}

fn check_without_offloads<S: Stack>(switches: IoSwitches) {
    let (server, client) = transfer::<S>(switches, Impairment::default(), SIZE);
    assert_mirrored(&server.io, &client.io);
    let (s, r) = (server.io.send, client.io.recv);
    if switches.mmsg && !switches.plain {
        // One datagram per message, but batched messages per call.
        assert!(s.datagrams > s.syscalls, "{s:?}");
    } else {
        // One datagram per syscall: every successful call moved exactly one.
        assert_eq!(s.datagrams, s.syscalls - s.would_block - s.errors, "{s:?}");
        assert_eq!(r.datagrams, r.syscalls - r.would_block - r.errors, "{r:?}");
    }
}

#[test]
fn quiche_over_gso_gro_mmsg() {
    check_fast_path::<Quiche>();
}

#[test]
fn quinn_proto_over_gso_gro_mmsg() {
    check_fast_path::<QuinnProto>();
}

#[test]
fn quiche_and_quinn_proto_without_gso_and_gro() {
    let switches = IoSwitches { gso: false, gro: false, mmsg: true, plain: false };
    check_without_offloads::<Quiche>(switches);
    check_without_offloads::<QuinnProto>(switches);
}

#[test]
fn quiche_and_quinn_proto_over_the_plain_loop() {
    check_without_offloads::<Quiche>(IoSwitches::plain());
    check_without_offloads::<QuinnProto>(IoSwitches::plain());
}

#[test]
fn lost_and_reordered_datagrams_are_recovered_by_the_stacks_timers() {
    recovers::<Quiche>();
    recovers::<QuinnProto>();
}

fn recovers<S: Stack>() {
    let stack = S::NAME;
    {
        // Datagram 0 is the server's first handshake flight (its loss needs a PTO timer), the
        // others are payload in the middle of the transfer.
        let impairment = Impairment { drop: vec![0, 300, 301, 302, 900], reorder: vec![500, 1200] };
        let (server, client) = transfer::<S>(IoSwitches::default(), impairment, SIZE);
        assert_eq!(client.stats.dropped, 5, "{stack}");
        assert_eq!(client.stats.reordered, 2, "{stack}");
        // The transfer verified every byte although 5 datagrams never reached the stack, so
        // their contents were retransmitted.
        assert_eq!(client.io.recv.datagrams, server.io.send.datagrams, "{stack}: loopback lost nothing else");
    }
}

/// Every connection and stream is in the report, each with its verified bytes, and the
/// per-connection sums add up to the total.
fn check_shape(done: &ClientResult, shape: Workload, stack: &str) {
    assert_eq!(done.connections.len(), shape.connections as usize, "{stack}: {done:?}");
    for c in &done.connections {
        assert_eq!(c.streams.len(), shape.streams as usize, "{stack}: {c:?}");
        assert!(c.streams.iter().all(|s| s.bytes == shape.size && s.transfer_ns > 0 && s.transfer_ns <= c.transfer_ns));
        assert!(c.handshake_ns > 0, "{stack}: {c:?}");
    }
    assert_eq!(done.connections.iter().map(|c| c.bytes()).sum::<u64>(), done.bytes, "{stack}");
    assert!(done.elapsed_ns >= done.transfer_ns, "{stack}: {done:?}");
    let mut starts: Vec<u64> = done.connections.iter().map(|c| c.start_ns).collect();
    assert_eq!(starts[0], 0, "{stack}: start times count from the first connection");
    starts.dedup();
    assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{stack}: listed in start order: {starts:?}");
}

fn runs_every_shape<S: Stack>() {
    for shape in [
        // multi-conn, handshakes (more connections than run at once), multi-stream; small sizes.
        Workload { connections: 4, parallel: 4, streams: 1, size: 500_000 },
        Workload { connections: 12, parallel: 3, streams: 1, size: 1000 },
        Workload { connections: 1, parallel: 1, streams: 8, size: 300_000 },
        Workload { connections: 3, parallel: 2, streams: 3, size: 100_000 },
    ] {
        let (_, client) = workload::<S>(IoSwitches::default(), Impairment::default(), shape);
        check_shape(client.report.as_ref().unwrap(), shape, S::NAME);
    }
}

#[test]
fn quiche_and_quinn_proto_run_many_connections_and_streams() {
    runs_every_shape::<Quiche>();
    runs_every_shape::<QuinnProto>();
}

#[test]
fn a_wrong_trust_anchor_fails_the_handshake() {
    refuses_wrong_anchor::<Quiche>();
    refuses_wrong_anchor::<QuinnProto>();
}

fn refuses_wrong_anchor<S: Stack>() {
    let stack = S::NAME;
    let certs = certs();
    let other = certs_other(&certs.cert);
    let config = IoConfig::default();
    {
        let server_io = nesquic_translation::bind("127.0.0.1:0".parse().unwrap(), &config).unwrap();
        let addr = server_io.local_addr().unwrap();
        let (cert, key) = (certs.cert.clone(), certs.key.clone());
        // The server waits for a connection that never completes; leave its thread behind.
        std::thread::spawn(move || {
            let _ = nesquic_translation::serve::<S>(
                &server_io,
                &cert,
                &key,
                1,
                &StackOptions::default(),
                &Impairment::default(),
            );
        });
        let client_io = nesquic_translation::bind("0.0.0.0:0".parse().unwrap(), &config).unwrap();
        let result = nesquic_translation::download::<S>(
            &client_io,
            addr,
            &other,
            Workload::bulk(1000),
            &StackOptions::default(),
            &Impairment::default(),
            &mut |_| {},
        );
        let err = result.err().unwrap_or_else(|| panic!("{stack}: a client trusting another certificate connected"));
        assert!(err.to_string().contains("closed"), "{stack}: {err}");
    }
}

/// A second, unrelated certificate next to `cert`.
fn certs_other(cert: &Path) -> PathBuf {
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let path = cert.with_file_name("other.der");
    std::fs::write(&path, other.cert.der()).unwrap();
    path
}

#[test]
fn malformed_fault_variables_are_errors() {
    std::env::set_var(nesquic_translation::driver::DROP_ENV, "3,x");
    let err = Impairment::from_env().unwrap_err().to_string();
    std::env::remove_var(nesquic_translation::driver::DROP_ENV);
    assert!(err.contains("NESQUIC_FAULT_DROP_RX") && err.contains("3,x"), "{err}");
}
