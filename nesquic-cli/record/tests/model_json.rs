//! Records written while syscall, direction and mechanism were strings read back into the
//! model's enums and write out the same JSON: `data/run-before-model-crate.json` is a run of
//! the binary before the change (`nesquic run --lut quinn --size 5MB --probe io,crypto`, agent
//! backend), `bench/probe-overhead-quinn-kernel.json` holds 40 kernel-backend repetitions.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;

use nesquic_model::metrics::{Direction, Mechanism, Syscall, SyscallMetrics};
use nesquic_model::Metrics;
use nesquic_record::RunRecord;
use serde_json::Value;

fn read(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// `after` with the health counter added since (`lost.stack_collisions`) removed where `before`
/// lacks it and it reads 0: the only field an old record may gain.
fn without_new_counters(before: &Value, mut after: Value) -> Value {
    if before["lost"].get("stack_collisions").is_none() {
        let lost = after["lost"].as_object_mut().unwrap();
        assert_eq!(lost.remove("stack_collisions"), Some(Value::from(0)), "an old record has no such losses");
    }
    after
}

/// Rows per (role, syscall or "fn", direction, mechanism), read through the typed model.
fn rows(all: &[&Metrics]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for m in all {
        for r in &m.roles {
            for s in &r.io {
                assert_eq!(s.direction, s.syscall.direction(), "{s:?}");
                *out.entry(format!("{} {} {} {}", r.role, s.syscall, s.direction, s.mechanism)).or_default() += 1;
            }
            for f in &r.functions {
                *out.entry(format!("{} fn {}", r.role, f.mechanism)).or_default() += 1;
            }
        }
    }
    out
}

#[test]
fn a_run_record_from_before_the_model_crate_writes_back_the_same_probes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/run-before-model-crate.json");
    let before = read(&path);
    let record: RunRecord = serde_json::from_value(before.clone()).unwrap();
    let after = serde_json::to_value(&record).unwrap();
    let reps = before["repetitions"].as_array().unwrap();
    assert_eq!(reps.len(), 1);
    for (i, rep) in reps.iter().enumerate() {
        let probes = &rep["probes"];
        assert_eq!(without_new_counters(probes, after["repetitions"][i]["probes"].clone()), *probes, "repetition {i}");
    }
    let metrics: Vec<&Metrics> = record.repetitions.iter().filter_map(|r| r.probes.as_ref()).collect();
    let expected = [
        ("client fn user (inline hook)", 6),
        ("client recvmmsg recv user (libc interposition)", 1),
        ("client sendmsg send user (libc interposition)", 1),
        ("server fn user (inline hook)", 6),
        ("server recvmmsg recv user (libc interposition)", 1),
        ("server sendmsg send user (libc interposition)", 1),
    ];
    assert_eq!(rows(&metrics), expected.map(|(k, n)| (k.to_string(), n)).into_iter().collect());
    let server_send = &metrics[0].roles[0].io[0];
    assert_eq!(
        (server_send.syscall, server_send.direction, server_send.mechanism, server_send.timing.calls),
        (Syscall::Sendmsg, Direction::Send, Mechanism::Interposition, 385)
    );
}

#[test]
fn kernel_backend_probes_from_before_the_model_crate_write_back_the_same_json() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/probe-overhead-quinn-kernel.json");
    let bench = read(&path);
    let mut metrics = Vec::new();
    for set in bench["sets"].as_array().unwrap() {
        for rep in set["repetitions"].as_array().unwrap() {
            let Some(probes) = rep.get("probes").filter(|p| !p.is_null()) else { continue };
            let m: Metrics = serde_json::from_value(probes.clone()).unwrap();
            assert_eq!(without_new_counters(probes, serde_json::to_value(&m).unwrap()), *probes);
            metrics.push(m);
        }
    }
    let expected = [
        ("client fn uprobe", 180),
        ("client recvmmsg recv tracepoint", 20),
        ("client sendmsg send tracepoint", 20),
        ("server fn uprobe", 180),
        ("server recvmmsg recv tracepoint", 20),
        ("server sendmsg send tracepoint", 20),
    ];
    assert_eq!(metrics.len(), 40);
    assert_eq!(
        rows(&metrics.iter().collect::<Vec<_>>()),
        expected.map(|(k, n)| (k.to_string(), n)).into_iter().collect()
    );
}

#[test]
fn an_unknown_syscall_direction_or_mechanism_is_an_error_and_a_missing_mechanism_stays_empty() {
    let row = |syscall: &str, direction: &str, mechanism: Option<&str>| {
        let mut v = serde_json::json!({
            "syscall": syscall, "direction": direction, "calls": 1, "total_ns": 10, "p50_le_ns": 16,
            "p99_le_ns": 16, "hist": [], "errors": 0, "eagain": 0, "bytes": 1200, "datagrams": 1,
        });
        if let Some(m) = mechanism {
            v["mechanism"] = Value::from(m);
        }
        v
    };
    let parse = |v: Value| serde_json::from_value::<SyscallMetrics>(v);
    assert!(parse(row("sendmsg", "send", Some("tracepoint"))).is_ok());
    assert!(parse(row("sendmsgx", "send", Some("tracepoint"))).is_err(), "not a syscall the probes follow");
    assert!(parse(row("sendmsg", "sent", Some("tracepoint"))).is_err(), "not a direction");
    assert!(parse(row("sendmsg", "send", Some("ebpf"))).is_err(), "not a mechanism");
    let old = parse(row("sendto", "send", None)).unwrap();
    assert_eq!(old.mechanism, Mechanism::Unrecorded);
    assert_eq!(serde_json::to_value(&old).unwrap()["mechanism"], Value::from(""));
}
