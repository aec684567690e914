//! Loading a run output (run directory, summary.json, or one role's .sqlog) into per-repetition
//! samples of every comparable metric.

use std::collections::BTreeMap;
use std::path::Path;

use nesquic_ebpf::RoleMetrics;

use crate::io::IoTotals;
use crate::workload::{TestcaseInfo, WorkloadFigures};
use crate::{RecordError, RunRecord};

type Result<T> = std::result::Result<T, RecordError>;

/// Whether a metric is a (nearly) deterministic count or a noisy measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Counts and ratios of counts: compared directly against a tolerance.
    Counter,
    /// Times, rates, CPU: need repetitions and a statistical test.
    Noisy,
}

/// A metric's definition.
#[derive(Debug, Clone, Copy)]
pub struct MetricDef {
    /// Name without role (`syscalls_per_mb`).
    pub name: &'static str,
    /// Counter or noisy.
    pub kind: Kind,
    /// Larger values are better (goodput, bytes per syscall).
    pub higher_is_better: bool,
    /// What it means.
    pub meaning: &'static str,
}

/// Every metric `compare` knows, in report order.
pub const METRICS: &[MetricDef] = &[
    MetricDef { name: "goodput_mbps", kind: Kind::Noisy, higher_is_better: true, meaning: "payload Mbit/s" },
    MetricDef { name: "transfer_s", kind: Kind::Noisy, higher_is_better: false, meaning: "request to last byte" },
    MetricDef { name: "cpu_s", kind: Kind::Noisy, higher_is_better: false, meaning: "user+system CPU seconds" },
    MetricDef { name: "send_syscalls", kind: Kind::Counter, higher_is_better: false, meaning: "send syscalls per run" },
    MetricDef {
        name: "recv_syscalls",
        kind: Kind::Counter,
        higher_is_better: false,
        meaning: "receive syscalls per run",
    },
    MetricDef {
        name: "syscalls_per_mb",
        kind: Kind::Counter,
        higher_is_better: false,
        meaning: "send+recv syscalls per MB of payload",
    },
    MetricDef {
        name: "bytes_per_send",
        kind: Kind::Counter,
        higher_is_better: true,
        meaning: "bytes per send syscall",
    },
    MetricDef {
        name: "datagrams_per_send",
        kind: Kind::Counter,
        higher_is_better: true,
        meaning: "datagrams per send syscall",
    },
    MetricDef {
        name: "bytes_per_recv",
        kind: Kind::Counter,
        higher_is_better: true,
        meaning: "bytes per receive syscall",
    },
    MetricDef {
        name: "datagrams_per_recv",
        kind: Kind::Counter,
        higher_is_better: true,
        meaning: "datagrams per receive syscall",
    },
    MetricDef {
        name: "seal_calls_per_packet",
        kind: Kind::Counter,
        higher_is_better: false,
        meaning: "crypto.seal calls per datagram sent",
    },
    MetricDef {
        name: "open_calls_per_packet",
        kind: Kind::Counter,
        higher_is_better: false,
        meaning: "crypto.open calls per datagram received",
    },
    MetricDef {
        name: "seal_ns_per_packet",
        kind: Kind::Noisy,
        higher_is_better: false,
        meaning: "crypto.seal ns per datagram sent",
    },
    MetricDef {
        name: "open_ns_per_packet",
        kind: Kind::Noisy,
        higher_is_better: false,
        meaning: "crypto.open ns per datagram received",
    },
    MetricDef {
        name: "connections_per_s",
        kind: Kind::Noisy,
        higher_is_better: true,
        meaning: "connections completed per second (testcases with several)",
    },
    MetricDef {
        name: "handshake_p99_ms",
        kind: Kind::Noisy,
        higher_is_better: false,
        meaning: "99th-percentile handshake (testcases with several connections)",
    },
];

/// "multi-conn 4x1x10000000 (40000000 bytes)": what a run asked for.
fn scenario(testcase: &TestcaseInfo, size: u64) -> String {
    format!("{} {} ({size} bytes)", testcase.name, testcase.workload.shape())
}

/// Multi-connection figures of one repetition, if it had several connections.
fn workload_metrics(w: Option<&WorkloadFigures>, push: &mut impl FnMut(String, f64)) {
    if let Some(w) = w.filter(|w| w.connections > 1) {
        push("connections_per_s".into(), w.handshakes_per_s);
        push("handshake_p99_ms".into(), w.handshake_ms.p99);
    }
}

/// Looks a metric up by its name without role.
pub fn def(name: &str) -> Option<&'static MetricDef> {
    METRICS.iter().find(|m| m.name == name)
}

/// One run output, as samples.
#[derive(Debug)]
pub struct RunSamples {
    /// LUT name, version and options.
    pub lut: String,
    /// Scenario identity: testcase and size. Runs that differ here are not compared.
    pub testcase: String,
    /// `goodput_mbps` or `server.cpu_s` -> one value per repetition.
    pub metrics: BTreeMap<String, Vec<f64>>,
}

/// Loads a run directory (its summary.json), a summary.json, or a single role's .sqlog.
pub fn load(path: &Path) -> Result<RunSamples> {
    let file = if path.is_dir() { path.join("summary.json") } else { path.to_path_buf() };
    if !file.exists() {
        return Err(RecordError::Invalid(format!(
            "{} not found (give a run directory, its summary.json, or a .sqlog)",
            file.display()
        )));
    }
    if file.extension().is_some_and(|e| e == "sqlog") {
        return from_sqlog(&file);
    }
    let record = RunRecord::load(&file)?;
    from_record(&record)
        .map_err(|e| RecordError::Invalid(format!("{} is not a nesquic run summary: {e}", file.display())))
}

fn from_record(r: &RunRecord) -> Result<RunSamples> {
    if r.repetitions.is_empty() {
        return Err(RecordError::Invalid("no repetitions".into()));
    }
    let mut metrics: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for rep in &r.repetitions {
        let mut push = |k: String, x: f64| metrics.entry(k).or_default().push(x);
        push("goodput_mbps".into(), rep.goodput_mbps);
        push("transfer_s".into(), rep.transfer_s);
        push("server.cpu_s".into(), rep.server.cpu_total_s);
        push("client.cpu_s".into(), rep.client.cpu_total_s);
        workload_metrics(rep.workload.as_ref(), &mut push);
        for role in rep.probes.iter().flat_map(|p| &p.roles) {
            probe_metrics(role, r.size_bytes, 1.0, &mut push);
        }
    }
    Ok(RunSamples {
        lut: format!("{} {} {:?}", r.lut.name, r.lut.version, r.lut_options),
        testcase: scenario(&r.testcase, r.size_bytes),
        metrics,
    })
}

/// One role's .sqlog: per-repetition figures from run_summary; probe totals divided by the
/// repetitions (the trace keeps totals only).
fn from_sqlog(file: &Path) -> Result<RunSamples> {
    let bad = |what: &str| RecordError::Invalid(format!("{}: {what}", file.display()));
    let trace = crate::qlog::reader::read(file)?;
    let invalid = |problem: String| RecordError::Qlog { path: file.to_path_buf(), problem };
    let summary = trace
        .run_summary()
        .map_err(invalid)?
        .ok_or_else(|| bad("has no nesquic:run_summary: the run did not finish"))?;
    let started = trace.run_started().map_err(invalid)?;
    let role = summary.role.to_string();
    let reps = (summary.repetitions as f64).max(1.0);
    let mut metrics: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut push = |k: String, x: f64| metrics.entry(k).or_default().push(x);
    for rep in &summary.per_repetition {
        push("goodput_mbps".into(), rep.goodput_mbps);
        push("transfer_s".into(), rep.transfer_s);
        push(format!("{role}.cpu_s"), rep.cpu_s);
        workload_metrics(rep.workload.as_ref(), &mut push);
    }
    for r in summary.probes.iter().flat_map(|p| &p.roles) {
        probe_metrics(r, summary.size_bytes, reps, &mut push);
    }
    let lut = started.as_ref().map_or_else(|| "? ?".to_string(), |s| format!("{} {}", s.lut.name, s.lut.version));
    Ok(RunSamples { lut, testcase: scenario(&summary.testcase_or_bulk(), summary.size_bytes), metrics })
}

/// Probe-derived metrics of one role; `per` divides totals (number of repetitions they span).
fn probe_metrics(role: &RoleMetrics, size: u64, per: f64, push: &mut impl FnMut(String, f64)) {
    let name = &role.role;
    let io = IoTotals::of(role);
    let (send_calls, recv_calls) = (io.send.calls as f64, io.recv.calls as f64);
    if send_calls + recv_calls == 0.0 {
        return;
    }
    let (sent_dg, recv_dg) = (io.send.datagrams as f64, io.recv.datagrams as f64);
    push(format!("{name}.send_syscalls"), send_calls / per);
    push(format!("{name}.recv_syscalls"), recv_calls / per);
    push(format!("{name}.syscalls_per_mb"), (send_calls + recv_calls) / per / (size as f64 / 1e6));
    if send_calls > 0.0 {
        push(format!("{name}.bytes_per_send"), io.send.bytes as f64 / send_calls);
        push(format!("{name}.datagrams_per_send"), sent_dg / send_calls);
    }
    if recv_calls > 0.0 {
        push(format!("{name}.bytes_per_recv"), io.recv.bytes as f64 / recv_calls);
        push(format!("{name}.datagrams_per_recv"), recv_dg / recv_calls);
    }
    let func = |category: &str| -> (f64, f64) {
        role.functions
            .iter()
            .filter(|f| f.category == category)
            .fold((0.0, 0.0), |(c, ns), f| (c + f.timing.calls as f64, ns + f.timing.total_ns as f64))
    };
    for (cat, key, packets) in [("crypto.seal", "seal", sent_dg), ("crypto.open", "open", recv_dg)] {
        let (calls, ns) = func(cat);
        if calls > 0.0 && packets > 0.0 {
            push(format!("{name}.{key}_calls_per_packet"), calls / packets);
            // Counted-only probes have no time; only timed runs compare it.
            if ns > 0.0 {
                push(format!("{name}.{key}_ns_per_packet"), ns / packets);
            }
        }
    }
}
