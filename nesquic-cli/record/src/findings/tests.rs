//! Each rule on constructed records: the case that triggers it, and the same case with the
//! cause removed, which must not.

use serde_json::json;

use super::*;
// One direction: calls that moved data, empty (EAGAIN) calls, messages, datagrams, bytes.
use crate::test_rows::{syscall, SyscallCounts as Dir};

const SIZE: u64 = 25_000_000;

/// One side: what it sent and received, its socket's GSO/GRO, and its profile (samples, of
/// them in packet I/O, of them in the kernel's packet path).
#[derive(Clone, Copy)]
struct Side {
    send: Dir,
    recv: Dir,
    gso: u64,
    gro: u64,
    profile: Option<(u64, u64, u64)>,
}

fn share(name: &str, samples: u64, total: u64) -> serde_json::Value {
    json!({ "name": name, "samples": samples, "share": samples as f64 / total as f64, "ci95_low": 0.0, "ci95_high": 1.0 })
}

fn record(server: Side, client: Side) -> RunRecord {
    let process = json!({ "cpu_user_s": 0.3, "cpu_system_s": 0.0, "cpu_total_s": 0.3, "wall_s": 1.0,
                          "cpu_utilisation_pct": 30.0, "max_rss_kib": 9000 });
    let io = |s: Side| {
        json!({ "stack": "quinn-udp", "gso_max_segments": s.gso, "gro_segments": s.gro, "send_mmsg": false,
                "recv_mmsg": true, "recv_buffer": 212_992, "send_buffer": 212_992 })
    };
    let role = |name: &str, s: Side| {
        json!({ "role": name, "io": [syscall("sendmsg", "send", s.send), syscall("recvmmsg", "recv", s.recv)],
                "functions": [] })
    };
    let profile_role = |name: &str, s: Side| {
        s.profile.map(|(total, packet_io, kernel)| {
            json!({ "role": name, "samples": total,
                    "components": [share("packet_io", packet_io, total), share("other", total - packet_io, total)],
                    "split": [share("packet_io.kernel", kernel, total)], "top_functions": [] })
        })
    };
    let profiles: Vec<serde_json::Value> =
        [profile_role("server", server), profile_role("client", client)].into_iter().flatten().collect();
    let mut rep = json!({
        "bytes": SIZE, "payload_verified": true, "goodput_mbps": 2000.0, "transfer_s": 0.1, "handshake_ms": 1.0,
        "server": process, "client": process,
        "io_settings": [["server", io(server)], ["client", io(client)]],
        "probes": { "io_mechanism": "syscall tracepoints", "function_mechanism": null, "kprobes_available": true,
                    "roles": [role("server", server), role("client", client)], "lost": {} }
    });
    if !profiles.is_empty() {
        rep["profile"] = json!({ "frequency_hz": 999, "roles": profiles });
    }
    let spread = json!({ "median": 1.0, "min": 1.0, "max": 1.0 });
    serde_json::from_value(json!({
        "schema_version": crate::SCHEMA_VERSION, "nesquic_version": "test",
        "lut": { "name": "quinn", "version": "0.11", "crypto_backend": "ring", "io": "native", "binary": "/lut" },
        "size_bytes": SIZE, "repetitions": [rep],
        "summary": { "repetitions": 1, "goodput_mbps": spread, "transfer_s": spread, "handshake_ms": spread,
                     "server_cpu_s": spread, "server_cpu_pct": spread, "client_cpu_s": spread, "client_cpu_pct": spread }
    }))
    .expect("a run record")
}

/// quinn over loopback at 25 MB, as measured: the server sends 17,600 datagrams of 1,452 B in
/// 1,815 sendmsg calls (9.7 a call, GSO up to 64), the client receives them 8 at a time
/// (GRO) and acknowledges every ~4th, with some empty receives on both sides.
fn quinn() -> (Side, Side) {
    let bulk = Dir { moved: 1_815, eagain: 0, messages: 1_815, datagrams: 17_600, bytes: 17_600 * 1_452 };
    let acks = Dir { moved: 4_400, eagain: 0, messages: 4_400, datagrams: 4_400, bytes: 4_400 * 40 };
    let server =
        Side { send: bulk, recv: Dir { eagain: 1_000, ..acks }, gso: 64, gro: 64, profile: Some((1_000, 300, 250)) };
    let client = Side {
        send: acks,
        recv: Dir { moved: 2_200, eagain: 500, messages: 2_200, ..bulk },
        gso: 64,
        gro: 64,
        profile: Some((1_000, 250, 200)),
    };
    (server, client)
}

fn rules(r: &RunRecord) -> Vec<(Rule, Role)> {
    find(r).iter().map(|f| (f.rule, f.role)).collect()
}

#[test]
fn quinn_as_measured_has_one_finding_the_capped_gso_batch() {
    let (server, client) = quinn();
    let findings = find(&record(server, client));
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!((f.rule, f.role, f.severity), (Rule::GsoBatchCapped, Role::Server, Severity::High));
    // 9.7 per message against min(64, 45 of 1,452 B in 64 KB) = 45: 4.6x.
    assert!(f.seen.contains("9.7 datagrams per send message") && f.seen.contains("allows 45"), "{}", f.seen);
    assert!(f.seen.contains("4.6x fewer sends"), "{}", f.seen);
    assert!(f.why.contains("MAX_TRANSMIT_SEGMENTS") && f.why.contains("30% of the server's CPU"), "{}", f.why);
    assert!(f.try_this.starts_with("nesquic ab --lut quinn --lut-path"), "{}", f.try_this);
    assert_eq!(f.cpu_share_at_stake, Some(0.3));
}

#[test]
fn a_batch_near_the_limit_is_no_finding() {
    let (mut server, client) = quinn();
    server.send.messages = 17_600 / 38;
    assert!(rules(&record(server, client)).is_empty());
}

#[test]
fn without_a_profile_the_severity_is_low_and_says_how_to_measure_it() {
    let (mut server, client) = quinn();
    server.profile = None;
    let f = &find(&record(server, client))[0];
    assert_eq!(f.severity, Severity::Low);
    assert!(f.why.contains("add --probe profile"), "{}", f.why);
}

#[test]
fn gso_off_is_its_own_finding() {
    let (mut server, client) = quinn();
    server.gso = 1;
    server.send.messages = 17_600;
    server.send.moved = 17_600;
    assert_eq!(rules(&record(server, client)), [(Rule::GsoOff, Role::Server)]);
}

#[test]
fn one_datagram_per_receive_against_a_batching_peer_is_gro_ineffective() {
    let (server, mut client) = quinn();
    client.gro = 1;
    client.recv.messages = 17_600;
    client.recv.moved = 17_600;
    let found = find(&record(server, client));
    let gro = found.iter().find(|f| f.rule == Rule::GroIneffective).expect("GRO finding");
    assert_eq!(gro.role, Role::Client);
    assert!(gro.seen.contains("GRO is off"), "{}", gro.seen);
    // A peer that does not batch leaves nothing to coalesce: no finding.
    let (mut server, mut client) = quinn();
    (server.send.messages, client.recv.messages) = (17_600, 17_600);
    assert!(!rules(&record(server, client)).contains(&(Rule::GroIneffective, Role::Client)));
}

#[test]
fn mostly_empty_receives_are_busy_polling() {
    let (mut server, client) = quinn();
    server.recv.eagain = 6_000;
    assert!(rules(&record(server, client)).contains(&(Rule::BusyPolling, Role::Server)));
    server.recv.eagain = 1_000;
    assert!(!rules(&record(server, client)).contains(&(Rule::BusyPolling, Role::Server)));
}

#[test]
fn an_ack_per_datagram_is_ack_heavy() {
    let (server, mut client) = quinn();
    client.send.datagrams = 17_000;
    assert!(rules(&record(server, client)).contains(&(Rule::AckHeavy, Role::Client)));
}

#[test]
fn a_record_without_probes_has_no_findings() {
    let (server, client) = quinn();
    let mut r = record(server, client);
    r.repetitions[0].probes = None;
    assert!(find(&r).is_empty());
}

#[test]
fn gso_turned_off_by_the_run_is_tested_by_turning_it_on() {
    let (mut server, client) = quinn();
    (server.gso, server.send.messages) = (1, 17_600);
    let mut r = record(server, client);
    r.lut_options = vec!["gso=off".into()];
    let f = find(&r).into_iter().find(|f| f.rule == Rule::GsoOff).expect("GSO off");
    assert_eq!(
        f.try_this,
        "nesquic ab --lut quinn --io native --base-opt gso=off --head-opt gso=on --probe profile,io"
    );
}

/// quinn's record with the kernel's receive-buffer drops per side.
fn with_drops(server: u64, client: u64) -> RunRecord {
    let (s, c) = quinn();
    let mut r = record(s, c);
    r.repetitions[0].rcvbuf_drops = vec![(Role::Server, server), (Role::Client, client)];
    r
}

#[test]
fn drops_at_the_receive_buffer_name_the_count_the_share_and_16x() {
    let mut r = with_drops(0, 400);
    r.link = serde_json::from_value(json!({ "kind": "veth", "mechanisms": [],
        "conditions": { "rate": "100mbit" }, "qdisc_drops": [] }))
    .expect("link");
    let found = find(&r);
    let f = found.iter().find(|f| f.rule == Rule::RcvbufDrops).expect("drops finding");
    assert_eq!((f.role, f.severity), (Role::Client, Severity::High));
    // 400 dropped of 17,600 received + 400: 2.22%, at quinn's 212,992 B (208 KiB).
    assert_eq!(
        f.seen,
        "the client dropped 400 datagrams (2.22% of the 18000 that reached its sockets) at a full receive buffer \
         of 208 KiB (SO_RCVBUF 212992 B granted); try --rcvbuf 16x"
    );
    assert_eq!(
        f.try_this,
        "nesquic run --lut quinn --io native --size 25000000 --link veth --rate 100mbit --rcvbuf 16x --probe profile,io"
    );
    // Only the side that dropped.
    assert!(!rules(&r).contains(&(Rule::RcvbufDrops, Role::Server)));
}

#[test]
fn no_drops_or_no_measurement_is_no_drops_finding() {
    assert!(!rules(&with_drops(0, 0)).iter().any(|(rule, _)| *rule == Rule::RcvbufDrops));
    let (s, c) = quinn();
    assert!(!rules(&record(s, c)).iter().any(|(rule, _)| *rule == Rule::RcvbufDrops));
}

#[test]
fn a_buffer_the_run_asked_for_is_tried_16_times_larger() {
    let mut r = with_drops(0, 9);
    r.lut_options = vec!["rcvbuf=4096".into(), "gso=on".into()];
    let f = find(&r).into_iter().find(|f| f.rule == Rule::RcvbufDrops).expect("drops finding");
    // 9 of 17,609: 0.05%, low.
    assert_eq!(f.severity, Severity::Low);
    assert!(f.seen.ends_with("try --rcvbuf 65536"), "{}", f.seen);
    assert_eq!(
        f.try_this,
        "nesquic run --lut quinn --io native --size 25000000 --lut-opt gso=on --rcvbuf 65536 --probe profile,io"
    );
}

#[test]
fn the_summary_line_sums_the_drops_per_side() {
    let mut r = with_drops(1, 400);
    r.repetitions.push(r.repetitions[0].clone());
    assert_eq!(
        describe_rcvbuf_drops(&r.repetitions).as_deref(),
        Some("receive-buffer drops (kernel's count at the LUT's UDP sockets, over 2 repetitions): server 2, client 800 datagrams")
    );
    r.repetitions.iter_mut().for_each(|rep| rep.rcvbuf_drops.clear());
    assert_eq!(describe_rcvbuf_drops(&r.repetitions), None);
}
