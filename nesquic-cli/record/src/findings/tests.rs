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

/// A run that could not load eBPF (no profile on either side) is told an experiment it can run
/// there: the agent's `--probe io`, not the profile.
#[test]
fn without_any_profile_the_experiment_asks_for_no_profile() {
    let (mut server, mut client) = quinn();
    (server.profile, client.profile) = (None, None);
    let found = find(&record(server, client));
    let f = found.iter().find(|f| f.rule == Rule::GsoBatchCapped).expect("the GSO batch finding");
    assert_eq!(
        f.try_this,
        "nesquic ab --lut quinn --lut-path YOUR_CHECKOUT --base-rev HEAD --head-rev YOUR_CHANGE --probe io"
    );
    assert!(found.iter().all(|f| !f.try_this.contains("profile")), "{found:#?}");
}

#[test]
fn gso_off_is_its_own_finding() {
    let (mut server, client) = quinn();
    server.gso = 1;
    server.send.messages = 17_600;
    server.send.moved = 17_600;
    let mut r = record(server, client);
    assert_eq!(rules(&r), [(Rule::GsoOff, Role::Server)]);
    // The same calls from a LUT that reports a TCP socket carry a byte stream, not datagrams: no
    // datagram finding (tcp-tls's server sent 500 MB in 3,817 calls, each once counted as a
    // datagram). A record without `transport` (older LUTs, the fixture's JSON) is UDP.
    for rep in &mut r.repetitions {
        for (_, io) in &mut rep.io_settings {
            io.transport = nesquic_protocol::report::Transport::Tcp;
        }
    }
    assert!(rules(&r).is_empty(), "{:?}", rules(&r));
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

#[test]
fn gso_off_with_a_heavy_kernel_path_gives_its_time_per_datagram() {
    let (mut server, client) = quinn();
    (server.gso, server.send.messages, server.send.moved) = (1, 17_600, 17_600);
    // 400 of 1,000 samples in the kernel's packet path (>= 30%).
    server.profile = Some((1_000, 500, 400));
    let found = find(&record(server, client));
    assert_eq!(found.iter().map(|f| (f.rule, f.role)).collect::<Vec<_>>(), [(Rule::KernelPerDatagram, Role::Server)]);
    let f = &found[0];
    // 0.3 s of CPU x 40% over 17,600 sent + 4,400 received datagrams: 5.45 us.
    assert!(
        f.seen.starts_with(
            "the server's kernel packet path takes 40% of its CPU, 5.45 us per datagram (17600 sent, 4400 received), \
             while it sends 1.00 datagrams per send message: GSO is off on its socket"
        ),
        "{}",
        f.seen
    );
    assert_eq!((f.severity, f.cpu_share_at_stake), (Severity::High, Some(0.4)));
    // The cause removed (GSO batches of 9.7): no kernel-time finding, the batch one instead.
    let (mut server, client) = quinn();
    server.profile = Some((1_000, 500, 400));
    assert_eq!(rules(&record(server, client)), [(Rule::GsoBatchCapped, Role::Server)]);
    // Too few samples to read a share from: the plain GSO-off finding.
    let (mut server, client) = quinn();
    (server.gso, server.send.messages, server.send.moved) = (1, 17_600, 17_600);
    server.profile = Some((19, 10, 8));
    assert_eq!(rules(&record(server, client)), [(Rule::GsoOff, Role::Server)]);
}

/// A LUT qlog with `lost` packet_lost events and the window going 100k -> 50k -> 80k -> 40k
/// on one connection (two cuts) and 90k -> 90k on another (none).
fn lut_qlog(dir: &std::path::Path, lost: usize) -> std::path::PathBuf {
    let mut text = String::from("\u{1e}{\"qlog_version\":\"0.3\",\"qlog_format\":\"JSON-SEQ\",\"trace\":{}}\n");
    let mut event = |name: &str, group: &str, data: serde_json::Value| {
        let e = json!({ "time": 1.0, "name": name, "data": data, "group_id": group });
        text += &format!("\u{1e}{e}\n");
    };
    for cwnd in [100_000, 50_000, 80_000, 40_000] {
        event("recovery:metrics_updated", "a", json!({ "congestion_window": cwnd }));
        event("recovery:metrics_updated", "a", json!({ "bytes_in_flight": 1200 }));
    }
    for cwnd in [90_000, 90_000] {
        event("recovery:metrics_updated", "b", json!({ "congestion_window": cwnd }));
    }
    for n in 0..lost {
        event("recovery:packet_lost", "a", json!({ "header": { "packet_number": n } }));
    }
    std::fs::write(dir.join("lut-server-1.sqlog"), text).expect("write qlog");
    "lut-server-1.sqlog".into()
}

/// quinn over a veth with the relay reordering 966 of 7,655 datagrams, the server's qlog
/// declaring `lost` packets lost; the client received `received` of the 17,600 sent.
fn reordered(dir: &std::path::Path, lost: usize, received: u64) -> RunRecord {
    let (server, mut client) = quinn();
    client.recv.datagrams = received;
    let mut r = record(server, client);
    let stats = |reordered: u64| {
        json!({ "datagrams": 7655, "bytes": 1, "reordered": reordered, "undelayed": 386, "held_ns_sum": 0,
                "held_ns_min": 0, "held_ns_max": 0, "send_errors": 0, "drawn_ns_min": 0, "drawn_ns_max": 0,
                "late_ns_sum": 0, "late_ns_max": 0 })
    };
    r.link = serde_json::from_value(json!({ "kind": "veth", "mechanisms": [],
        "conditions": { "delay_ms": 2.0, "reorder_pct": 5.0 }, "qdisc_drops": [],
        "relay": { "up": stats(25), "down": stats(966) } }))
    .expect("link");
    r.repetitions[0].lut_qlogs = vec![(Role::Server, lut_qlog(dir, lost), 0)];
    r.run_dir = Some(dir.to_path_buf());
    r
}

#[test]
fn losses_declared_for_datagrams_that_arrived_are_misread_congestion() {
    let tmp = tempfile::tempdir().expect("tempdir");
    assert_eq!(
        recovery_of(tmp.path(), &lut_qlog(tmp.path(), 600)),
        Some(Recovery { declared_lost: 600, window_cuts: 2 })
    );
    let found = find(&reordered(tmp.path(), 600, 17_599));
    let f = found.iter().find(|f| f.rule == Rule::MisreadLoss).expect("misread loss");
    assert_eq!((f.role, f.severity), (Role::Server, Severity::High));
    assert_eq!(
        f.seen,
        "the server declared 600 packets lost (3.4% of the 17600 datagrams it sent) and cut its congestion window 2 \
         times, but 17599 of them reached the client (1 missing); the relay delivered 966 of the 7655 it carried \
         (12.6%) out of order"
    );
    assert!(f.try_this.contains("--link veth --delay 2 --reorder 5 --lut-qlog"), "{}", f.try_this);
    // The client's receives of one datagram each are the relay's forwarding, not its GRO.
    let mut r = reordered(tmp.path(), 600, 17_599);
    let client = r.repetitions[0].probes.as_mut().and_then(|p| p.roles.iter_mut().find(|r| r.role == Role::Client));
    let recv = client
        .and_then(|c| c.io.iter_mut().find(|s| s.direction == nesquic_model::Direction::Recv))
        .expect("client recv row");
    recv.messages = recv.datagrams;
    assert!(!rules(&r).contains(&(Rule::GroIneffective, Role::Client)));
    r.link = None;
    assert!(rules(&r).contains(&(Rule::GroIneffective, Role::Client)));
    // The cause removed: in order, the stack declares nothing lost.
    assert!(!rules(&reordered(tmp.path(), 0, 17_600)).iter().any(|(r, _)| *r == Rule::MisreadLoss));
    // Real loss: 600 declared, 500 missing on the way: the stack read it right.
    assert!(!rules(&reordered(tmp.path(), 600, 17_100)).iter().any(|(r, _)| *r == Rule::MisreadLoss));
    // No link, or no LUT qlog: nothing to judge by.
    let mut r = reordered(tmp.path(), 600, 17_599);
    r.link = None;
    assert!(!rules(&r).iter().any(|(r, _)| *r == Rule::MisreadLoss));
    let mut r = reordered(tmp.path(), 600, 17_599);
    r.repetitions[0].lut_qlogs.clear();
    assert!(!rules(&r).iter().any(|(r, _)| *r == Rule::MisreadLoss));
}

#[test]
fn lut_qlogs_named_outside_the_run_directory_are_not_read() {
    let (outside, run) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let qlog = outside.path().join(lut_qlog(outside.path(), 600));
    let misread = |r: &RunRecord| rules(r).iter().any(|(r, _)| *r == Rule::MisreadLoss);
    let mut r = reordered(run.path(), 600, 17_599);
    assert!(misread(&r), "the run directory's own qlog is read");
    // An absolute path, a `..` path and a link in the run directory all lead to the same file.
    let up = std::path::Path::new("..").join(outside.path().file_name().expect("name")).join("lut-server-1.sqlog");
    std::os::unix::fs::symlink(&qlog, run.path().join("link.sqlog")).expect("symlink");
    for named in [qlog.clone(), up, "link.sqlog".into()] {
        r.repetitions[0].lut_qlogs = vec![(Role::Server, named.clone(), 0)];
        assert!(!misread(&r), "{} was read", named.display());
    }
    // A device is not read either (it would never end).
    r.repetitions[0].lut_qlogs = vec![(Role::Server, "/dev/zero".into(), 0)];
    assert!(!misread(&r));
}

/// quinn's record with the server's seal timed at `mean_ns` per call of 1,425 B, crypto `crypto`
/// of its 1,000 profile samples, the sampled leaf `leaf`, and the machine's AES-128-GCM at
/// 0.1 ns/B (AES-256-GCM 0.12, ChaCha20 0.2).
fn with_crypto(mean_ns: f64, crypto: u64, leaf: &str) -> RunRecord {
    let (server, client) = quinn();
    let mut r = record(server, client);
    let mut rep = serde_json::to_value(&r.repetitions[0]).expect("rep");
    rep["probes"]["roles"][0]["functions"] = json!([{ "category": "crypto.seal", "name": "encrypt_in_place",
        "object": "/lut", "calls": 10_000, "total_ns": 10_000 * 300, "p50_le_ns": 512, "p99_le_ns": 512,
        "hist": [], "bytes": 14_250_000, "timed": true, "compensated_mean_ns": mean_ns, "mechanism": "user (inline hook)" }]);
    let profile = &mut rep["profile"]["roles"][0];
    profile["components"] = json!([share("crypto", crypto, 1_000), share("packet_io", 300, 1_000)]);
    profile["top_functions"] = json!([share(leaf, crypto, 1_000)]);
    r.repetitions[0] = serde_json::from_value(rep).expect("rep");
    // 1.5x of the machine's AES-128-GCM unless a test says otherwise: neither far nor near.
    r.lut_options = vec!["cipher=aes128gcm".into()];
    r.crypto_limit = Some(crate::crypto_limit::CryptoLimit {
        packet_bytes: 1_425,
        library: "ring".into(),
        aes128gcm_ns_per_byte: 0.1,
        aes256gcm_ns_per_byte: 0.12,
        chacha20_ns_per_byte: 0.2,
        cpu_aes: true,
        cpu_pclmulqdq: true,
    });
    r
}

fn crypto_rules(r: &RunRecord) -> Vec<(Rule, Role)> {
    rules(r).into_iter().filter(|(rule, _)| matches!(rule, Rule::CryptoVsMachine | Rule::CryptoNoAesNi)).collect()
}

#[test]
fn a_seal_far_above_the_machine_s_speed_is_a_finding_and_one_near_it_is_not() {
    // 712.5 ns per 1,425 B = 0.5 ns/B against AES-128-GCM's 0.1 with --cipher aes128gcm: 5x.
    let mut r = with_crypto(712.5, 250, "aes_hw_ctr32_encrypt_blocks");
    r.lut_options = vec!["cipher=aes128gcm".into()];
    let found = find(&r);
    let f = found.iter().find(|f| f.rule == Rule::CryptoVsMachine).expect("crypto finding");
    assert_eq!((f.role, f.severity), (Role::Server, Severity::High));
    assert!(f.seen.starts_with("the server seals 0.500 ns per byte (1425 B per call, timed); this machine's AES-128-GCM seals 0.100 ns per byte"), "{}", f.seen);
    assert!(f.seen.ends_with(": 5.0x"), "{}", f.seen);
    // Without --cipher the suite is not known: held against the slowest, ChaCha20's 0.2 (2.5x).
    r.lut_options.clear();
    assert!(find(&r).iter().any(|f| f.rule == Rule::CryptoVsMachine
        && f.seen.ends_with("ChaCha20-Poly1305 seals 0.200 ns per byte at that size (ring): 2.5x")));
    // A seal of another size than the one benchmarked (an ACK's) is not compared.
    r.crypto_limit.as_mut().expect("limit").packet_bytes = 40;
    assert!(crypto_rules(&r).is_empty());
    // The cause removed: 0.15 ns/B, 1.5x, is neither far nor at the limit.
    let mut r = with_crypto(213.75, 250, "aes_hw_ctr32_encrypt_blocks");
    r.lut_options = vec!["cipher=aes128gcm".into()];
    assert!(crypto_rules(&r).is_empty(), "{:?}", crypto_rules(&r));
    // On ChaCha20 at its limit (0.22 ns/B against 0.2: 1.1x) with crypto 25% of the CPU, while
    // AES-128-GCM seals at 0.1 here: the experiment is the faster suite.
    let mut r = with_crypto(313.5, 250, "chacha20_poly1305_seal");
    r.lut_options = vec!["cipher=chacha20".into()];
    let f = find(&r).into_iter().find(|f| f.rule == Rule::CryptoVsMachine).expect("at the limit");
    assert!(f.why.contains("already seals at this machine's speed"), "{f:?}");
    assert_eq!(
        f.try_this,
        "nesquic ab --lut quinn --base-opt cipher=chacha20 --head-opt cipher=aes128gcm --probe profile,io"
    );
    // ... but not when crypto is a small part of the CPU.
    let mut r = with_crypto(313.5, 100, "chacha20_poly1305_seal");
    r.lut_options = vec!["cipher=chacha20".into()];
    assert!(crypto_rules(&r).is_empty());
    // At the limit on the fastest suite already (AES-128-GCM, 1.1x, crypto 25%): nothing to try.
    let r = with_crypto(156.75, 250, "aes_hw_ctr32_encrypt_blocks");
    assert!(crypto_rules(&r).is_empty(), "{:?}", crypto_rules(&r));
}

#[test]
fn software_aes_on_a_cpu_with_aes_ni_is_a_finding() {
    let r = with_crypto(213.75, 250, "ring_core_0_17_14__aes_nohw_encrypt");
    assert_eq!(crypto_rules(&r), [(Rule::CryptoNoAesNi, Role::Server)]);
    // The hardware entry points: no finding; a CPU without AES-NI: nothing better to use.
    assert!(crypto_rules(&with_crypto(213.75, 250, "ring_core_0_17_14__aes_gcm_enc_update_vaes_avx2")).is_empty());
    let mut r = with_crypto(213.75, 250, "vpaes_encrypt");
    assert_eq!(crypto_rules(&r), [(Rule::CryptoNoAesNi, Role::Server)]);
    r.crypto_limit.as_mut().expect("limit").cpu_aes = false;
    assert!(crypto_rules(&r).is_empty());
}

fn with_copies(copy: u64, slow_placements: u64) -> RunRecord {
    let (server, client) = quinn();
    let mut r = record(server, client);
    let mut rep = serde_json::to_value(&r.repetitions[0]).expect("rep");
    rep["profile"]["roles"][1]["rep_movsb_leaves"] = json!(copy);
    r.repetitions[0] = serde_json::from_value(rep).expect("rep");
    r.copy_limit = Some(crate::copy_limit::CopyLimit {
        bytes: 16_384,
        library: "libc memcpy".into(),
        same_offset_gb_s: 98.8,
        slowest_gb_s: 3.5,
        slowest_placement: 9,
        placements: 1_366,
        slow_placements,
    });
    r
}

fn copy_rules(r: &RunRecord) -> Vec<(Rule, Role)> {
    rules(r).into_iter().filter(|(rule, _)| *rule == Rule::RepMovsbCopy).collect()
}

#[test]
fn rep_movsb_copies_on_a_machine_with_slow_placements_are_a_finding() {
    // tcp-tls's client as measured: 46% of its samples in the rep movsb copy.
    let r = with_copies(460, 5);
    let f = find(&r).into_iter().find(|f| f.rule == Rule::RepMovsbCopy).expect("copy finding");
    assert_eq!((f.role, f.severity), (Role::Client, Severity::High));
    // 25 MB over 460/1000 of the client's 0.3 s: 0.2 GB/s of payload per second of rep movsb.
    assert!(
        f.seen.starts_with(
            "46% of the client's samples (460 of 1000) interrupted a rep movsb (glibc's memcpy of large buffers), \
             0.2 GB/s of payload per second of it"
        ),
        "{}",
        f.seen
    );
    assert!(f.seen.contains("3.5 GB/s with the destination 9 B past the source"), "{}", f.seen);
    assert!(f.seen.contains("(5 of 1366 placements") && f.seen.ends_with("against 98.8 GB/s at the same page offset"));
    assert!(f.try_this.starts_with(&format!("{REP_MOVSB_OFF} nesquic run --lut quinn")), "{}", f.try_this);
    assert_eq!(copy_rules(&with_copies(0, 5)), []);
    // The causes removed: a machine without slow placements, or a small share of copies.
    assert_eq!(copy_rules(&with_copies(460, 0)), []);
    assert_eq!(copy_rules(&with_copies(40, 5)), []);
    let mut r = with_copies(460, 5);
    r.copy_limit = None;
    assert_eq!(copy_rules(&r), []);
    // Copies at the fast placements: 5 GB over the same 0.138 s is 36 GB/s of payload per second
    // of rep movsb, far above 2 x the slow 3.5 GB/s (quiche's server measured ~14).
    let mut r = with_copies(460, 5);
    r.size_bytes = 5_000_000_000;
    assert_eq!(copy_rules(&r), []);
    r.size_bytes = 960_000_000; // 7.0 GB/s: at the bound, still a finding
    assert_eq!(copy_rules(&r), [(Rule::RepMovsbCopy, Role::Client)]);
}

/// quinn as measured, with each side's busiest thread busy for `server` and `client` (on a CPU,
/// waiting for one) of a 1 s transfer at `goodput` Mbit/s, and a link of `rate` if given.
fn with_threads(server: (f64, f64), client: (f64, f64), goodput: f64, rate: Option<&str>) -> RunRecord {
    let (s, c) = quinn();
    let mut r = record(s, c);
    let side = |role: Role, (on_cpu, waiting): (f64, f64)| nesquic_model::threads::SideThreads {
        role,
        window_ns: 1_000_000_000,
        threads: vec![
            nesquic_model::threads::ThreadTime {
                tid: 7,
                name: format!("{role}-main"),
                on_cpu_ns: (on_cpu * 1e9) as u64,
                runqueue_ns: (waiting * 1e9) as u64,
            },
            nesquic_model::threads::ThreadTime { tid: 8, name: "helper".into(), on_cpu_ns: 1_000_000, runqueue_ns: 0 },
        ],
    };
    r.repetitions[0].threads = vec![side(Role::Server, server), side(Role::Client, client)];
    r.summary.as_mut().expect("summary").goodput_mbps.median = goodput;
    if let Some(rate) = rate {
        r.link = Some(
            serde_json::from_value(json!({ "kind": "veth", "mechanisms": [], "conditions": { "rate": rate } }))
                .expect("link"),
        );
    }
    r
}

fn binding_of(r: &RunRecord) -> Option<Finding> {
    find(r).into_iter().find(|f| f.rule == Rule::BindingConstraint)
}

#[test]
fn goodput_at_96_percent_of_the_link_s_rate_names_the_link_and_at_half_does_not() {
    let r = with_threads((0.3, 0.0), (0.2, 0.0), 192.0, Some("200mbit"));
    let f = binding_of(&r).expect("binding constraint");
    assert_eq!((f.role, f.severity), (Role::Server, Severity::High));
    assert_eq!(f.seen, "goodput is 192.0 Mbit/s, 96% of the link's 200 Mbit/s rate (--rate 200mbit): the link binds");
    assert!(f.try_this.contains("--link veth --rate 2gbit"), "{}", f.try_this);
    // The binding constraint comes first, ahead of the CPU findings of the same severity.
    assert_eq!(find(&r)[0].rule, Rule::BindingConstraint);
    // Half the rate: the link is not full and no thread saturated: nothing named, and it says so.
    let f = binding_of(&with_threads((0.3, 0.0), (0.2, 0.0), 100.0, Some("200mbit"))).expect("binding constraint");
    assert_eq!(f.severity, Severity::Low);
    assert!(f.seen.starts_with("no binding constraint named at 100.0 Mbit/s"), "{}", f.seen);
    assert!(f.seen.contains("the client's busiest thread was busy 20%") && f.seen.contains("50% of the link's 200"));
    assert!(f.why.contains("off-CPU") && f.try_this.contains("--lut-qlog"), "{f:#?}");
}

#[test]
fn a_client_thread_on_cpu_98_percent_is_capped_by_its_cost_and_one_that_waited_by_its_cpu() {
    let f = binding_of(&with_threads((0.5, 0.0), (0.97, 0.01), 3000.0, None)).expect("binding constraint");
    assert_eq!((f.role, f.severity), (Role::Client, Severity::High));
    assert!(
        f.seen.starts_with(
            "the client's busiest thread \"client-main\" was on a CPU 97% of the transfer and waiting for one 1% (98% \
             busy, 1 of the run's 1 repetitions saturated); the client's profile: other 75%, packet_io 25%"
        ),
        "{}",
        f.seen
    );
    assert!(f.seen.ends_with("is capped by the client's cost per packet"), "{}", f.seen);
    assert!(f.try_this.starts_with("nesquic ab --lut quinn --lut-path"), "{}", f.try_this);
    // Runnable the whole transfer but on a CPU only 30% of it: the CPU was shared.
    let f = binding_of(&with_threads((0.5, 0.0), (0.3, 0.68), 300.0, None)).expect("binding constraint");
    assert_eq!(f.role, Role::Client);
    assert!(f.seen.ends_with("is capped by the CPU time the client was given"), "{}", f.seen);
    assert!(f.try_this.contains("--pin"), "{}", f.try_this);
    // The cause removed: the client blocked 40% of the transfer; the server saturated instead.
    let f = binding_of(&with_threads((0.99, 0.0), (0.6, 0.0), 3000.0, None)).expect("binding constraint");
    assert_eq!(f.role, Role::Server);
    assert!(f.seen.ends_with("is capped by the server's cost per packet"), "{}", f.seen);
    // No thread saturated, but the server's threads waited for a CPU 50% of the transfer, 5x as
    // long as they ran: named for it, as the side that waited longest.
    let f = binding_of(&with_threads((0.1, 0.5), (0.2, 0.3), 300.0, None)).expect("binding constraint");
    assert_eq!(f.role, Role::Server);
    assert!(f.seen.contains("its 2 threads together were on a CPU 10% and waiting for one 50%"), "{}", f.seen);
    assert!(f.seen.ends_with("is capped by the CPU time the server was given"), "{}", f.seen);
    assert_eq!(
        constraint(&with_threads((0.1, 0.5), (0.2, 0.3), 300.0, None)),
        Some(Constraint::Cpu { role: Role::Server, shared: true })
    );
    // Neither saturated (94% is below the bound) nor contended: none named.
    let f = binding_of(&with_threads((0.94, 0.0), (0.6, 0.0), 3000.0, None)).expect("binding constraint");
    assert!(f.seen.starts_with("no binding constraint named"), "{}", f.seen);
    // No per-thread times and no link: no evidence at all, no finding.
    let (s, c) = quinn();
    assert!(binding_of(&record(s, c)).is_none());
}
