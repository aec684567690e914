//! `--link veth` end to end (root): namespaces + veth, rate (tbf), loss (netem or tc-bpf),
//! measured conditions, and that nothing is left behind, also after an interrupted or killed run.

mod common;

use std::time::Duration;

use common::{load_record, nesquic, our_namespaces, run_record, serial, stderr, RunRecord};
use nesquic_link::relay::DirectionStats;
use nesquic_record::run::QdiscDropsRecord;

#[test]
fn every_lut_transfers_over_veth_and_nothing_is_left() {
    let _g = serial();
    for lut in ["quinn", "quiche", "msquic"] {
        let report = run_record(&["--lut", lut, "--link", "veth", "--size", "3MB"]);
        let rep = &report.repetitions[0];
        assert_eq!((rep.bytes, rep.payload_verified), (3_000_000, true), "{lut}");
        assert_eq!(report.link.as_ref().map(|l| l.kind.as_str()), Some("veth"), "{lut}");
        assert!(our_namespaces().is_empty(), "{lut}: left {:?}", our_namespaces());
    }
}

#[test]
fn a_rate_limited_link_keeps_goodput_below_the_rate() {
    let _g = serial();
    let report = run_record(&["--lut", "quinn", "--link", "veth", "--rate", "100mbit", "--size", "8MB"]);
    let goodput = report.summary.as_ref().expect("summary").goodput_mbps.median;
    assert!(goodput < 100.0 && goodput > 20.0, "goodput {goodput} Mbit/s on a 100 Mbit/s link");
    let link = report.link.as_ref().expect("link");
    let mechanisms = link.mechanisms.join(", ");
    assert!(mechanisms.contains("100mbit"), "{mechanisms}");
    // Each end's qdisc is named with what it dropped (a count, not why it is unknown): tbf on
    // both, and nothing else.
    let QdiscDropsRecord::PerQdisc(qdiscs) = &link.qdisc_drops else { panic!("per qdisc: {link:?}") };
    let kinds: Vec<(&str, &str)> = qdiscs.iter().map(|q| (q.end.as_str(), q.kind.as_str())).collect();
    assert_eq!(kinds, [("server", "tbf"), ("client", "tbf")]);
    assert!(our_namespaces().is_empty());
}

#[test]
fn five_percent_loss_is_applied_measured_noticed_by_the_lut_and_survived() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("run");
    let json = dir.path().join("run.json");
    let out = nesquic()
        .args(["run", "--lut", "quinn", "--link", "veth", "--loss", "5", "--size", "5MB", "--lut-qlog", "--json"])
        .arg(&json)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    let report = load_record(&json);
    assert!(report.repetitions[0].payload_verified);
    let loss = report.link.as_ref().and_then(|l| l.observed_loss).expect("measured loss");
    let pct = loss.pct;
    assert!(loss.dropped > 0 && (1.0..=12.0).contains(&pct), "{loss:?}");
    // quinn's own qlog (merged into the server trace) declares packets lost.
    let server_trace = std::fs::read_to_string(out_dir.join("server.sqlog")).expect("server trace");
    let lost = server_trace.matches("packet_lost").count();
    assert!(lost > 0, "the LUT noticed no loss");
    assert!(our_namespaces().is_empty());
}

#[test]
fn conditions_need_veth_and_bad_ones_are_errors() {
    let _g = serial();
    for (args, expected) in [
        (&["run", "--loss", "1"][..], "add --link veth"),
        (&["run", "--delay", "10"][..], "add --link veth"),
        (&["run", "--link", "veth", "--delay=-3"][..], "--delay -3 ms: expected 0-10000"),
        (&["run", "--link", "veth", "--loss", "120"][..], "--loss 120%: expected 0-100"),
        (&["run", "--link", "veth", "--reorder", "5"][..], "--reorder needs --delay"),
    ] {
        let out = nesquic().args(args).output().expect("run");
        assert!(!out.status.success() && stderr(&out).contains(expected), "{args:?}: {}", stderr(&out));
    }
    assert!(our_namespaces().is_empty());
}

/// The relay's figures for one direction, or `None` where netem applied the conditions.
fn relay_direction(report: &RunRecord, direction: &str) -> Option<DirectionStats> {
    let link = report.link.as_ref().expect("link");
    let Some(relay) = &link.relay else {
        assert!(link.mechanisms.iter().any(|m| m.contains("netem")), "{link:?}");
        return None;
    };
    Some(if direction == "up" { relay.up } else { relay.down })
}

#[test]
fn delay_is_applied_both_ways_and_measured() {
    let _g = serial();
    let report = run_record(&["--lut", "quinn", "--link", "veth", "--delay", "10", "--size", "2MB"]);
    assert!(report.repetitions[0].payload_verified);
    // A 1-RTT handshake over 10 ms each way takes at least 20 ms.
    let handshake = report.repetitions[0].handshake_ms;
    assert!((20.0..500.0).contains(&handshake), "handshake {handshake} ms with 10 ms each way");
    for direction in ["up", "down"] {
        let Some(d) = relay_direction(&report, direction) else { return };
        let datagrams = d.datagrams as f64;
        let ms = |ns: u64| ns as f64 / 1e6;
        // Every datagram drew exactly 10 ms; it was held at least that (lateness only adds, and
        // stays far below the delay unless the machine is swamped).
        assert!((ms(d.drawn_ns_min) - 10.0).abs() < 1e-3 && (ms(d.drawn_ns_max) - 10.0).abs() < 1e-3, "{d:?}");
        let mean = ms(d.held_ns_sum) / datagrams;
        assert!(datagrams > 10.0 && ms(d.held_ns_min) >= 10.0 && mean < 20.0, "{direction}: {d:?}");
        assert_eq!((d.reordered, d.undelayed), (0, 0), "{direction}: {d:?}");
    }
    assert!(our_namespaces().is_empty());
}

#[test]
fn jitter_and_reordering_are_applied_measured_and_survived() {
    let _g = serial();
    let report = run_record(&["--lut", "quinn", "--link", "veth", "--delay", "5", "--reorder", "5", "--size", "3MB"]);
    assert!(report.repetitions[0].payload_verified);
    if let Some(d) = relay_direction(&report, "down") {
        let undelayed = d.undelayed as f64 * 100.0 / d.datagrams as f64;
        // 5% of ~2000+ datagrams drawn: well within 2.5-8%.
        assert!((2.5..8.0).contains(&undelayed), "{undelayed}% sent undelayed: {d:?}");
        assert!(d.reordered > 0, "{d:?}");
    }
    let report = run_record(&["--lut", "quinn", "--link", "veth", "--delay", "5", "--jitter", "2", "--size", "1MB"]);
    assert!(report.repetitions[0].payload_verified);
    if let Some(d) = relay_direction(&report, "down") {
        // The draws span the jitter; what was actually held is never shorter than drawn (the
        // relay's lateness on a busy machine only adds).
        let ms = |ns: u64| ns as f64 / 1e6;
        let (low, high) = (ms(d.drawn_ns_min), ms(d.drawn_ns_max));
        assert!(low >= 3.0 && high <= 7.0 && high - low > 2.0, "drawn {low}-{high} ms for 5 ± 2 ms: {d:?}");
        assert!(ms(d.held_ns_min) >= low, "{d:?}");
    }
    assert!(our_namespaces().is_empty());
}

#[test]
fn interrupted_and_killed_runs_leave_no_namespace_behind() {
    let _g = serial();
    for signal in [libc::SIGINT, libc::SIGKILL] {
        let mut child = nesquic()
            .args(["run", "--lut", "quinn", "--link", "veth", "--rate", "50mbit", "--size", "2GB"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn nesquic");
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!our_namespaces().is_empty(), "the run did not create its namespaces");
        // SAFETY: signals our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().expect("wait");
        assert!(!status.success());
        if signal == libc::SIGKILL {
            // Nothing can clean up after SIGKILL; the next run sweeps namespaces whose owner died.
            let next = nesquic().args(["run", "--link", "veth", "--size", "1MB"]).output().expect("run");
            assert!(next.status.success(), "{}", stderr(&next));
        }
        assert!(our_namespaces().is_empty(), "after signal {signal}: {:?}", our_namespaces());
    }
}
