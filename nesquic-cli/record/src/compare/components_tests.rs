//! Per-component deltas on typed run records whose answer is known: the server's profile splits
//! its CPU into components at ns per datagram chosen here, head adds 140 ns to
//! `connection.recovery` alone, and each round wobbles every component on its own.

use nesquic_model::packet_cost::PacketCost;
use nesquic_model::profile::{Profile, RoleProfile, Share};
use nesquic_protocol::Role;

use super::components::{component_deltas, cpu_verdicts, ComponentDelta, CostOf};
use super::gate_tests::{record, repetition, samples, Dir, SideIo, GATE};
use super::*;

/// Datagrams the server sends a round.
const DATAGRAMS: u64 = 17_600;
/// Samples a round's profile has, so that shares resolve 0.01 ns at these costs.
const SAMPLES: u64 = 1_000_000;

/// The server's components (as the rules name them), the function that stands for each, and
/// base's ns per datagram: 2,300 in all, so +140 ns is +6.1% CPU.
const COMPONENTS: [(&str, &str, f64); 4] = [
    ("connection.recovery", "quinn_proto::connection::Connection::detect_lost_packets", 400.0),
    ("crypto.aead", "ring_core_aes_gcm_enc_update_vaes_avx2", 900.0),
    ("packet_io.kernel", "udp_sendmsg", 800.0),
    ("other", "memcpy", 200.0),
];

/// One repetition whose server spends `ns[i]` per datagram in component i: its CPU time, the
/// profile's shares and the cost derived from them as the engine derives it.
fn round(ns: [f64; 4]) -> serde_json::Value {
    let total: f64 = ns.iter().sum();
    let cpu_s = total * DATAGRAMS as f64 / 1e9;
    let shares = |names: [&str; 4]| -> Vec<Share> {
        names
            .iter()
            .zip(ns)
            .map(|(name, x)| Share::of(name.to_string(), (x / total * SAMPLES as f64).round() as u64, SAMPLES))
            .collect()
    };
    let mut profile = RoleProfile {
        role: Role::Server,
        samples: SAMPLES,
        components: shares(COMPONENTS.map(|c| c.0)),
        split: shares(COMPONENTS.map(|c| c.0)),
        top_functions: shares(COMPONENTS.map(|c| c.1)),
        unknown_leaves: Vec::new(),
        unclassified_leaves: Vec::new(),
        frameless_callers: 0,
        rep_movsb_leaves: 0,
        lost_stacks: 0,
        cost: None,
        folded: Vec::new(),
    };
    profile.cost = PacketCost::of(&profile, cpu_s, "sent", DATAGRAMS, "io probes", 25_000_000);
    let dir = |datagrams| Dir { moved: datagrams / 10, eagain: 0, datagrams, bytes: datagrams * 1452 };
    let server = SideIo { cpu_s, send: dir(DATAGRAMS), recv: dir(2_000) };
    let client = SideIo { cpu_s: 0.35, send: dir(2_000), recv: dir(DATAGRAMS) };
    let mut rep = repetition(Some(server), Some(client));
    let profile =
        Profile { frequency_hz: 999, clock: Default::default(), roles: vec![profile], sampler: None, maps_reads: None };
    rep["profile"] = serde_json::to_value(profile).expect("a profile's JSON");
    rep
}

/// Ten interleaved rounds; head adds `extra` ns to each component; every component of every
/// round wobbles by up to `wobble` on its own (seeded).
fn job(seed: u64, extra: [f64; 4], wobble: f64) -> (RunSamples, RunSamples) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut side = |add: [f64; 4]| {
        let mut ns = [0.0; 4];
        for (i, c) in COMPONENTS.iter().enumerate() {
            ns[i] = (c.2 + add[i]) * (1.0 + wobble * (2.0 * rng.f64() - 1.0));
        }
        round(ns)
    };
    let (mut base, mut head) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        base.push(side([0.0; 4]));
        head.push(side(extra));
    }
    (samples(&record(base)), samples(&record(head)))
}

fn find<'a>(deltas: &'a [ComponentDelta], of: CostOf, name: &str) -> &'a ComponentDelta {
    deltas.iter().find(|d| d.of == of && d.name == name).unwrap_or_else(|| panic!("no {name}: {deltas:#?}"))
}

#[test]
fn a_component_that_grew_by_140_ns_is_found_and_named_in_the_cpu_verdict() {
    let (base, head) = job(7, [140.0, 0.0, 0.0, 0.0], 0.01);
    let deltas = component_deltas(&base, &head, Pairing::Paired, 1.0 - GATE.alpha);
    for (component, function, base_ns) in COMPONENTS {
        let truth = if component == "connection.recovery" { 140.0 } else { 0.0 };
        for (of, name) in [(CostOf::Component, component), (CostOf::Function, function)] {
            let d = find(&deltas, of, name);
            let (low, high) = d.interval_ns.unwrap_or_else(|| panic!("{name} has an interval: {d:?}"));
            assert!(low <= truth && truth <= high, "{name}: truth {truth} outside {d:?}");
            // Each round wobbles by up to 1%: the estimate is within 1% of base's figure.
            assert!((d.delta_ns - truth).abs() < 0.01 * base_ns, "{name}: {d:?}");
            assert_eq!((d.pairing, d.samples, d.role), (Pairing::Paired, (10, 10), Role::Server));
            assert_eq!(d.moved(), truth != 0.0, "{name}: {d:?}");
        }
    }
    // The largest change comes first among the server's components.
    assert_eq!(deltas[0].name, "connection.recovery");
    let rows = compare(&base, &head, &[], &GATE, Pairing::Paired).expect("judged");
    let cpu = rows.iter().find(|r| r.metric == "server.cpu_s_per_gb").expect("cpu row");
    assert_ne!(cpu.verdict, Verdict::Unchanged, "{cpu:?}");
    let lines = cpu_verdicts(&rows, &deltas);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert!(line.starts_with("server cpu_s_per_gb +6."), "{line}");
    assert!(line.contains(": connection.recovery +14"), "{line}");
    assert!(!line.contains("crypto.aead") && !line.contains("packet_io.kernel"), "{line}");
}

#[test]
fn unchanged_components_name_nothing_and_runs_without_a_profile_have_no_rows() {
    let (base, head) = job(8, [0.0; 4], 0.01);
    let deltas = component_deltas(&base, &head, Pairing::Paired, 1.0 - GATE.alpha);
    assert!(deltas.iter().all(|d| d.interval_ns.is_some_and(|(l, h)| l <= 0.0 && 0.0 <= h)), "{deltas:#?}");
    let rows = compare(&base, &head, &[], &GATE, Pairing::Paired).expect("judged");
    assert!(cpu_verdicts(&rows, &deltas).is_empty(), "an unchanged CPU row has no cause to give");
    // The gate's own records carry no profile: no component, no function.
    let plain = samples(&record(vec![repetition(None, None), repetition(None, None)]));
    assert!(plain.costs.is_empty() && component_deltas(&plain, &plain, Pairing::Paired, 0.99).is_empty());
    // One side with a profile, the other without: nothing to set against it.
    assert!(component_deltas(&base, &plain, Pairing::Unpaired, 0.99).is_empty());
}
