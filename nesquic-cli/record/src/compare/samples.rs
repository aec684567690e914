//! Loading a run output (run directory, summary.json, or one role's .sqlog) into per-repetition
//! samples of every comparable metric.

use std::collections::BTreeMap;
use std::path::Path;

use nesquic_model::{Metrics, Role, RoleMetrics};

use crate::io::IoTotals;
use crate::workload::{TestcaseInfo, WorkloadFigures};
use crate::{RecordError, RunRecord};

type Result<T> = std::result::Result<T, RecordError>;

/// Whether a metric is a (nearly) deterministic count or a noisy measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Counts and ratios of counts: compared directly against a tolerance.
    Counter,
    /// Times, rates, CPU: need repetitions and a statistical test.
    Noisy,
}

/// Whether a metric fails the gate when no rule names it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DefaultGate {
    /// Reported only: a rule (`--fail-on`) makes it gate. Figures the peer drives (ACKs per
    /// receive call), the reverse path's ratios, and what a gated figure already sums up.
    Report,
    /// Gates against the comparison's limit for its kind (`--tolerance` for counters).
    Tolerance,
    /// Gates against this limit, percent in the worse direction (a default rule).
    Limit(f64),
    /// Gates against the comparison's limit for its kind on this role only, and reports on the
    /// other: the payload's own path (every testcase is a download, docs/protocol.md: the
    /// server sends the payload, the client receives it), not the ACKs the peer drives.
    DataPath(Role),
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
    /// Whether it fails the gate without a rule naming it.
    pub gates_by_default: DefaultGate,
    /// What it means.
    pub meaning: &'static str,
}

const fn metric(
    name: &'static str,
    kind: Kind,
    higher_is_better: bool,
    gates_by_default: DefaultGate,
    meaning: &'static str,
) -> MetricDef {
    MetricDef { name, kind, higher_is_better, gates_by_default, meaning }
}

use DefaultGate::{DataPath, Limit, Report, Tolerance};
use Kind::{Counter, Noisy};

/// Every metric `compare` knows, in report order. What gates by default is what a reviewer
/// calls a regression, on each side's own data path: the payload sender's send syscalls per
/// MB, the receiver's data-carrying receives per MB, each side's CPU per GB and crypto calls
/// per packet (docs/ci.md says why the rest only report: the ACK-diluted sums wobble).
pub const METRICS: &[MetricDef] = &[
    metric("goodput_mbps", Noisy, true, Report, "payload Mbit/s"),
    metric("transfer_s", Noisy, false, Report, "request to last byte"),
    metric("cpu_s", Noisy, false, Report, "user+system CPU seconds"),
    metric("cpu_s_per_gb", Noisy, false, Limit(5.0), "user+system CPU seconds per GB of payload"),
    metric("send_syscalls", Counter, false, Report, "send syscalls per run"),
    metric("recv_syscalls", Counter, false, Report, "receive syscalls per run, empty ones included"),
    metric("eagain_recvs", Counter, false, Report, "receive syscalls per run that found nothing (EAGAIN)"),
    metric("syscalls_per_mb", Counter, false, Report, "send+recv syscalls per MB of payload, empty receives included"),
    metric("sends_per_mb", Counter, false, DataPath(Role::Server), "send syscalls per MB of payload"),
    metric(
        "data_recvs_per_mb",
        Counter,
        false,
        DataPath(Role::Client),
        "receive syscalls that moved data, per MB of payload (empty ones apart)",
    ),
    metric("bytes_per_send", Counter, true, Report, "bytes per send syscall that moved data"),
    metric("datagrams_per_send", Counter, true, Report, "datagrams per send syscall that moved data"),
    metric("bytes_per_recv", Counter, true, Report, "bytes per receive syscall that moved data"),
    metric("datagrams_per_recv", Counter, true, Report, "datagrams per receive syscall that moved data"),
    metric("rcvbuf_drops", Counter, false, Report, "datagrams the kernel dropped at the side's full receive buffer"),
    metric("seal_calls_per_packet", Counter, false, Tolerance, "crypto.seal calls per datagram sent"),
    metric("open_calls_per_packet", Counter, false, Tolerance, "crypto.open calls per datagram received"),
    metric("seal_ns_per_packet", Noisy, false, Report, "crypto.seal ns per datagram sent"),
    metric("open_ns_per_packet", Noisy, false, Report, "crypto.open ns per datagram received"),
    metric("connections_per_s", Noisy, true, Report, "connections completed per second (testcases with several)"),
    metric("handshake_p99_ms", Noisy, false, Report, "99th-percentile handshake (testcases with several connections)"),
];

/// The io probes' metrics, per role.
const IO_METRICS: [&str; 10] = [
    "send_syscalls",
    "recv_syscalls",
    "eagain_recvs",
    "syscalls_per_mb",
    "sends_per_mb",
    "data_recvs_per_mb",
    "bytes_per_send",
    "datagrams_per_send",
    "bytes_per_recv",
    "datagrams_per_recv",
];

/// "multi-conn 4x1x10000000 (40000000 bytes)": what a run asked for.
fn scenario(testcase: &TestcaseInfo, size: u64) -> String {
    format!("{} {} ({size} bytes)", testcase.name, testcase.workload.shape())
}

/// A value, or why a repetition has none.
type Measured = std::result::Result<f64, String>;

/// Multi-connection figures of one repetition, if it had several connections.
fn workload_metrics(w: Option<&WorkloadFigures>, put: &mut impl FnMut(String, Measured)) {
    if let Some(w) = w.filter(|w| w.connections > 1) {
        put("connections_per_s".into(), Ok(w.handshakes_per_s));
        put("handshake_p99_ms".into(), Ok(w.handshake_ms.p99));
    }
}

/// Looks a metric up by its name without role.
pub fn def(name: &str) -> Option<&'static MetricDef> {
    METRICS.iter().find(|m| m.name == name)
}

/// Repetitions of a run that did not measure a metric, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmeasured {
    /// 1-based repetitions without a value.
    pub repetitions: Vec<usize>,
    /// Why (from the first of them): "its io probes measured nothing".
    pub why: String,
}

/// One run output, as samples.
#[derive(Debug, Default)]
pub struct RunSamples {
    /// LUT name, version and options.
    pub lut: String,
    /// Scenario identity: testcase and size. Runs that differ here are not compared.
    pub testcase: String,
    /// Repetitions in the run.
    pub repetitions: usize,
    /// `goodput_mbps` or `server.cpu_s` -> one value per repetition.
    pub metrics: BTreeMap<String, Vec<f64>>,
    /// Metrics some repetitions (or all) have no value of, and why: a gate must not pass on a
    /// figure that was not measured.
    pub unmeasured: BTreeMap<String, Unmeasured>,
    /// Why this run's probes cannot be trusted: an agent that did not start in a LUT process,
    /// a function it did not patch (what it would have counted reads as "not called").
    pub probe_failures: Vec<String>,
    /// Faults the run injected on purpose (`NAME=VALUE`): such a run is not judged.
    pub faults: Vec<String>,
    /// Repetitions that failed ("repetition 3 failed: ..."): not in the samples, and such a run
    /// is not judged.
    pub failed_repetitions: Vec<String>,
    /// The record is from a run that did not finish (killed, or still running): not judged.
    pub in_progress: bool,
    /// The run's findings (`None`: loaded from a trace, which carries none).
    pub findings: Option<Vec<super::findings_diff::FindingKey>>,
    /// CPU ns per datagram by profile component and top function, per repetition (empty
    /// without `--probe profile`, and from a trace).
    pub costs: super::components::CostSamples,
}

impl RunSamples {
    /// Empty samples of one scenario (filled by the loaders; tests build them directly).
    pub fn new(lut: &str, testcase: &str, repetitions: usize) -> Self {
        Self { lut: lut.into(), testcase: testcase.into(), repetitions, ..Self::default() }
    }

    /// Adds repetition `rep`'s (1-based) value of `key`, or why it has none.
    fn put(&mut self, rep: usize, key: String, value: Measured) {
        match value {
            Ok(x) => self.metrics.entry(key).or_default().push(x),
            Err(why) => self
                .unmeasured
                .entry(key)
                .or_insert_with(|| Unmeasured { repetitions: Vec::new(), why })
                .repetitions
                .push(rep),
        }
    }
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

/// "repetition 3", "repetitions 1, 2 and 5", "every repetition".
pub(crate) fn repetitions_text(reps: &[usize], of: usize) -> String {
    match reps {
        [one] if of > 1 => format!("repetition {one}"),
        _ if reps.len() == of => "every repetition".into(),
        [init @ .., last] => {
            let init: Vec<String> = init.iter().map(ToString::to_string).collect();
            format!("repetitions {} and {last}", init.join(", "))
        }
        [] => "no repetition".into(),
    }
}

/// One run record, as samples (one per repetition, in order).
pub fn from_record(r: &RunRecord) -> Result<RunSamples> {
    if r.repetitions.is_empty() {
        let failed: Vec<String> = r.failed_repetitions.iter().map(ToString::to_string).collect();
        let why = if failed.is_empty() { String::new() } else { format!(" ({})", failed.join("; ")) };
        return Err(RecordError::Invalid(format!("no measured repetition{why}")));
    }
    let lut = format!("{} {} {:?}", r.lut.name, r.lut.version, r.lut_options);
    let mut samples = RunSamples::new(&lut, &scenario(&r.testcase, r.size_bytes), r.repetitions.len());
    samples.findings = Some(
        r.findings
            .iter()
            .map(|f| super::findings_diff::FindingKey { rule: f.rule, role: f.role, severity: f.severity })
            .collect(),
    );
    samples.costs = super::components::cost_samples(&r.repetitions);
    // Which repetitions gave each metric a value or a reason: the rest are gaps too.
    let mut seen: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut agent_problems: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let gb = r.size_bytes as f64 / 1e9;
    for (i, rep) in r.repetitions.iter().enumerate() {
        let n = i + 1;
        let mut put = |k: String, x: Measured| {
            seen.entry(k.clone()).or_default().push(n);
            samples.put(n, k, x);
        };
        put("goodput_mbps".into(), Ok(rep.goodput_mbps));
        put("transfer_s".into(), Ok(rep.transfer_s));
        for (role, p) in [("server", &rep.server), ("client", &rep.client)] {
            put(format!("{role}.cpu_s"), Ok(p.cpu_total_s));
            if gb > 0.0 {
                put(format!("{role}.cpu_s_per_gb"), Ok(p.cpu_total_s / gb));
            }
        }
        workload_metrics(rep.workload.as_ref(), &mut put);
        for (role, drops) in &rep.rcvbuf_drops {
            put(format!("{role}.rcvbuf_drops"), Ok(*drops as f64));
        }
        if let Some(m) = &rep.probes {
            for role in &m.roles {
                probe_metrics(m, role, r.size_bytes, 1.0, &mut put);
            }
        }
        for a in &rep.agents {
            if !a.ready {
                let problem = format!("the user-space agent did not start in the {}", a.role);
                agent_problems.entry(problem).or_default().push(n);
            }
            for f in a.functions.iter().filter(|f| a.ready && !f.patched) {
                let problem = format!("the {}'s agent did not patch {}: {}", a.role, f.name, f.reason);
                agent_problems.entry(problem).or_default().push(n);
            }
        }
    }
    for (key, reps) in &seen {
        let missing: Vec<usize> = (1..=samples.repetitions).filter(|n| !reps.contains(n)).collect();
        if !missing.is_empty() {
            let gap = samples
                .unmeasured
                .entry(key.clone())
                .or_insert_with(|| Unmeasured { repetitions: Vec::new(), why: "not in the record".into() });
            gap.repetitions.extend(missing);
            gap.repetitions.sort_unstable();
        }
    }
    samples.faults = r.faults.iter().map(|f| format!("{}={}", f.name, f.value)).collect();
    samples.failed_repetitions = r.failed_repetitions.iter().map(ToString::to_string).collect();
    samples.in_progress = r.in_progress;
    samples.probe_failures = agent_problems
        .into_iter()
        .map(|(problem, reps)| format!("{problem} ({})", repetitions_text(&reps, r.repetitions.len())))
        .collect();
    Ok(samples)
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
    let lut = started.as_ref().map_or_else(|| "? ?".to_string(), |s| format!("{} {}", s.lut.name, s.lut.version));
    let testcase = scenario(&summary.testcase_or_bulk(), summary.size_bytes);
    let mut samples = RunSamples::new(&lut, &testcase, summary.per_repetition.len());
    samples.failed_repetitions = summary.failed_repetitions.iter().map(ToString::to_string).collect();
    let reps = (summary.repetitions as f64).max(1.0);
    let gb = summary.size_bytes as f64 / 1e9;
    for (i, rep) in summary.per_repetition.iter().enumerate() {
        let mut put = |k: String, x: Measured| samples.put(i + 1, k, x);
        put("goodput_mbps".into(), Ok(rep.goodput_mbps));
        put("transfer_s".into(), Ok(rep.transfer_s));
        put(format!("{role}.cpu_s"), Ok(rep.cpu_s));
        if gb > 0.0 {
            put(format!("{role}.cpu_s_per_gb"), Ok(rep.cpu_s / gb));
        }
        workload_metrics(rep.workload.as_ref(), &mut put);
    }
    if let Some(m) = &summary.probes {
        for r in &m.roles {
            // Totals over every repetition: one sample, standing for all of them.
            probe_metrics(m, r, summary.size_bytes, reps, &mut |k, x| samples.put(1, k, x));
        }
    }
    Ok(samples)
}

/// Probe-derived metrics of one role, each a value or why there is none; `per` divides totals
/// (number of repetitions they span). Per-call ratios count only the calls that moved data: an
/// empty (EAGAIN) receive says how often the LUT polled, not how much a call carried.
fn probe_metrics(m: &Metrics, role: &RoleMetrics, size: u64, per: f64, put: &mut impl FnMut(String, Measured)) {
    let name = &role.role;
    let io = IoTotals::of(role);
    let key = |metric: &str| format!("{name}.{metric}");
    if io.calls() == 0 {
        // With io probes on, a side that made no packet syscall is a probe that saw nothing.
        if m.io_mechanism.is_some() {
            for metric in IO_METRICS {
                put(key(metric), Err("its io probes measured nothing".into()));
            }
        }
    } else {
        let calls = |n: u64| Ok(n as f64 / per);
        let ratio = |a: u64, b: u64, direction: &str| {
            if b > 0 {
                Ok(a as f64 / b as f64)
            } else {
                Err(format!("no {direction} syscall moved data"))
            }
        };
        let (sends, recvs) = (io.send.moved_calls(), io.recv.moved_calls());
        put(key("send_syscalls"), calls(io.send.calls));
        put(key("recv_syscalls"), calls(io.recv.calls));
        put(key("eagain_recvs"), calls(io.recv.eagain));
        let mb = size as f64 / 1e6;
        put(key("syscalls_per_mb"), Ok(io.calls() as f64 / per / mb));
        put(key("sends_per_mb"), Ok(io.send.calls as f64 / per / mb));
        put(key("data_recvs_per_mb"), Ok(recvs as f64 / per / mb));
        put(key("bytes_per_send"), ratio(io.send.bytes, sends, "send"));
        put(key("datagrams_per_send"), ratio(io.send.datagrams, sends, "send"));
        put(key("bytes_per_recv"), ratio(io.recv.bytes, recvs, "receive"));
        put(key("datagrams_per_recv"), ratio(io.recv.datagrams, recvs, "receive"));
    }
    let (sent_dg, recv_dg) = (io.send.datagrams as f64, io.recv.datagrams as f64);
    for (category, short, packets, verb) in
        [("crypto.seal", "seal", sent_dg, "sent"), ("crypto.open", "open", recv_dg, "received")]
    {
        let rows: Vec<_> = role.functions.iter().filter(|f| f.category == category).collect();
        let calls: f64 = rows.iter().map(|f| f.timing.calls as f64).sum();
        let ns: f64 = rows.iter().map(|f| f.timing.total_ns as f64).sum();
        let (calls_key, ns_key) = (key(&format!("{short}_calls_per_packet")), key(&format!("{short}_ns_per_packet")));
        if calls == 0.0 {
            let why = format!("no {category} call was counted");
            put(calls_key, Err(why.clone()));
            put(ns_key, Err(why));
        } else if packets == 0.0 {
            let why = format!("no datagram {verb} was counted (io probes off, or they measured nothing)");
            put(calls_key, Err(why.clone()));
            put(ns_key, Err(why));
        } else {
            put(calls_key, Ok(calls / packets));
            // Counted-only probes have no time.
            if rows.iter().any(|f| f.timed) && ns > 0.0 {
                put(ns_key, Ok(ns / packets));
            } else {
                put(ns_key, Err(format!("its {category} probes counted calls without timing them")));
            }
        }
    }
}
