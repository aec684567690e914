//! Loading a run output (run directory, summary.json, or one role's .sqlog) into per-repetition
//! samples of every comparable metric.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::Value;

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

/// "multi-conn 4x1x10000000 (40000000 bytes)": what a run asked for, from its `testcase`
/// record (summary.json or `nesquic:run_started`); runs before testcases existed were bulk.
fn scenario(testcase: Option<&Value>, size: u64) -> String {
    let name = testcase.and_then(|t| t["name"].as_str().or(t.as_str())).unwrap_or("bulk");
    match testcase.and_then(|t| serde_json::from_value::<nesquic_testcases::Workload>(t["workload"].clone()).ok()) {
        Some(w) => format!("{name} {} ({size} bytes)", w.shape()),
        None => format!("{name} {size} bytes"),
    }
}

/// Multi-connection figures of one repetition (its `workload` record), if any.
fn workload_metrics(w: &Value, push: &mut impl FnMut(String, f64)) {
    if let (Some(rate), Some(p99)) = (w["handshakes_per_s"].as_f64(), w["handshake_ms"]["p99"].as_f64()) {
        if w["connections"].as_u64().is_some_and(|c| c > 1) {
            push("connections_per_s".into(), rate);
            push("handshake_p99_ms".into(), p99);
        }
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
        bail!("{} not found (give a run directory, its summary.json, or a .sqlog)", file.display());
    }
    if file.extension().is_some_and(|e| e == "sqlog") {
        return from_sqlog(&file);
    }
    let text = std::fs::read_to_string(&file).with_context(|| format!("read {}", file.display()))?;
    let v: Value = serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", file.display()))?;
    from_summary(&v).with_context(|| format!("{} is not a nesquic run summary", file.display()))
}

fn from_summary(v: &Value) -> Result<RunSamples> {
    let size = v["size_bytes"].as_u64().context("no size_bytes")?;
    let reps = v["repetitions"].as_array().context("no repetitions")?;
    if reps.is_empty() {
        bail!("no repetitions");
    }
    let mut metrics: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for rep in reps {
        let mut push = |k: String, x: f64| metrics.entry(k).or_default().push(x);
        push("goodput_mbps".into(), rep["goodput_mbps"].as_f64().context("goodput_mbps")?);
        push("transfer_s".into(), rep["transfer_s"].as_f64().context("transfer_s")?);
        for role in ["server", "client"] {
            push(format!("{role}.cpu_s"), rep[role]["cpu_total_s"].as_f64().context("cpu_total_s")?);
        }
        workload_metrics(&rep["workload"], &mut push);
        if let Some(roles) = rep["probes"]["roles"].as_array() {
            for r in roles {
                probe_metrics(r, size, 1.0, &mut push);
            }
        }
    }
    Ok(RunSamples {
        lut: format!(
            "{} {} {}",
            v["lut"]["name"].as_str().unwrap_or("?"),
            v["lut"]["version"].as_str().unwrap_or("?"),
            v["lut_options"]
        ),
        testcase: scenario(v.get("testcase"), size),
        metrics,
    })
}

/// One role's .sqlog: per-repetition figures from run_summary; probe totals divided by the
/// repetitions (the trace keeps totals only).
fn from_sqlog(file: &Path) -> Result<RunSamples> {
    let trace = crate::qlog::reader::read(file)?;
    let summary = trace
        .named("nesquic:run_summary")
        .next()
        .with_context(|| format!("{} has no nesquic:run_summary: the run did not finish", file.display()))?;
    let started = trace.named("nesquic:run_started").next();
    let d = &summary["data"];
    let role = d["role"].as_str().context("run_summary without role")?.to_string();
    let size = d["size_bytes"].as_u64().context("run_summary without size_bytes")?;
    let reps = d["repetitions"].as_f64().unwrap_or(1.0).max(1.0);
    let mut metrics: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut push = |k: String, x: f64| metrics.entry(k).or_default().push(x);
    for rep in d["per_repetition"].as_array().context("run_summary without per_repetition")? {
        push("goodput_mbps".into(), rep["goodput_mbps"].as_f64().context("goodput_mbps")?);
        push("transfer_s".into(), rep["transfer_s"].as_f64().context("transfer_s")?);
        push(format!("{role}.cpu_s"), rep["cpu_s"].as_f64().context("cpu_s")?);
        workload_metrics(&rep["workload"], &mut push);
    }
    if let Some(roles) = d["probes"]["roles"].as_array() {
        for r in roles {
            probe_metrics(r, size, reps, &mut push);
        }
    }
    let lut = started.map(|s| &s["data"]["lut"]);
    Ok(RunSamples {
        lut: format!(
            "{} {}",
            lut.and_then(|l| l["name"].as_str()).unwrap_or("?"),
            lut.and_then(|l| l["version"].as_str()).unwrap_or("?")
        ),
        testcase: scenario(started.map(|s| &s["data"]["testcase"]), size),
        metrics,
    })
}

/// Probe-derived metrics of one role; `per` divides totals (number of repetitions they span).
fn probe_metrics(role: &Value, size: u64, per: f64, push: &mut impl FnMut(String, f64)) {
    let Some(name) = role["role"].as_str() else { return };
    let sum = |dir: &str, field: &str| -> f64 {
        role["io"].as_array().map_or(0.0, |io| {
            io.iter().filter(|s| s["direction"] == dir).filter_map(|s| s[field].as_f64()).sum::<f64>()
        })
    };
    let (send_calls, recv_calls) = (sum("send", "calls"), sum("recv", "calls"));
    if send_calls + recv_calls > 0.0 {
        let (sent_dg, recv_dg) = (sum("send", "datagrams"), sum("recv", "datagrams"));
        push(format!("{name}.send_syscalls"), send_calls / per);
        push(format!("{name}.recv_syscalls"), recv_calls / per);
        push(format!("{name}.syscalls_per_mb"), (send_calls + recv_calls) / per / (size as f64 / 1e6));
        if send_calls > 0.0 {
            push(format!("{name}.bytes_per_send"), sum("send", "bytes") / send_calls);
            push(format!("{name}.datagrams_per_send"), sent_dg / send_calls);
        }
        if recv_calls > 0.0 {
            push(format!("{name}.bytes_per_recv"), sum("recv", "bytes") / recv_calls);
            push(format!("{name}.datagrams_per_recv"), recv_dg / recv_calls);
        }
        let func = |category: &str, field: &str| -> f64 {
            role["functions"].as_array().map_or(0.0, |f| {
                f.iter().filter(|x| x["category"] == category).filter_map(|x| x[field].as_f64()).sum::<f64>()
            })
        };
        for (cat, key, packets) in [("crypto.seal", "seal", sent_dg), ("crypto.open", "open", recv_dg)] {
            let calls = func(cat, "calls");
            if calls > 0.0 && packets > 0.0 {
                push(format!("{name}.{key}_calls_per_packet"), calls / packets);
                let ns = func(cat, "total_ns");
                // Counted-only probes have no time; only timed runs compare it.
                if ns > 0.0 {
                    push(format!("{name}.{key}_ns_per_packet"), ns / packets);
                }
            }
        }
    }
}
