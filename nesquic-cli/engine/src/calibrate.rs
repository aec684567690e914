//! Probe-overhead calibration: what a uprobe + uretprobe pair adds to the durations it measures,
//! on this machine, per kind of probe site, so timed figures can be compensated.
//!
//! The shipped workload (`nesquic-workload --calibrate`) runs the same busy loop behind three
//! prologues (`push`, 5-byte NOP, `mov`: emulated, emulated, single-stepped), with timing probes
//! on all three, alternating batches with a never-probed twin of the loop timed by the workload's
//! own clock: the true cost, measured in the same run under the same conditions (this VM's speed
//! drifts by tens of percent between runs). The probes' mean is the true cost plus the overhead
//! that falls between their two timestamps; the difference, over several rounds, is the overhead
//! and its spread.

use std::path::{Path, PathBuf};
use std::sync::mpsc::channel;
use std::time::Duration;

use nesquic_ebpf::sites::SiteKind;
use nesquic_ebpf::Metrics;

use crate::error::StepExt;
use crate::lifecycle::{start, Launch, ProbeTracker, Supervisor};
use crate::plan::ProbePlan;
use crate::process::Role;
use crate::EngineError;

pub use nesquic_record::calibration::{Calibration, KindCalibration};

type Result<T> = std::result::Result<T, EngineError>;

/// Busy-loop iterations per call: ~1-2 us, the order of a crypto call on a packet.
const ITERATIONS: u64 = 2_000;
const CALLS: u64 = 2_000;
const ROUNDS: usize = 5;
/// Agent calibration: rounds with and without the agent (alternating), calls per round.
const AGENT_ROUNDS: usize = 5;
const AGENT_CALLS: u64 = 1_000_000;
const FUNCTIONS: [(&str, SiteKind); 3] = [
    ("nesquic_cal_push", SiteKind::Push),
    ("nesquic_cal_nop", SiteKind::Nop),
    ("nesquic_cal_step", SiteKind::SingleStep),
];

/// The calibration `probes` need: `None` unless they time some function (kernel uprobe sites
/// and/or the agent's hooks). Each part is measured once per process, then reused.
pub fn for_probes(probes: &crate::backend::Probes) -> Result<Option<Calibration>> {
    let kernel_times = probes.kernel.as_ref().is_some_and(|k| k.functions().iter().any(|f| f.timed));
    let user_times = probes.user.as_ref().is_some_and(|u| u.times_functions());
    if !kernel_times && !user_times {
        return Ok(None);
    }
    let mut c = if kernel_times {
        run().step("calibrate the timing probes")?
    } else {
        Calibration { kinds: Vec::new(), rounds: 0, agent: None }
    };
    if user_times {
        c.agent = Some(agent_cost().step("calibrate the user-space agent")?);
    }
    Ok(Some(c))
}

/// The workload binary next to the running executable (it ships with nesquic).
pub fn workload_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().map_err(EngineError::os("locate the nesquic executable"))?;
    let path = exe.parent().map(PathBuf::from).unwrap_or_default().join("nesquic-workload");
    if !path.is_file() {
        return Err(EngineError::msg(format!("{} is missing (it ships with nesquic: `just build`)", path.display())));
    }
    Ok(path)
}

/// The agent's cost per call on this machine: measured on first use (~1 s), then reused.
fn agent_cost() -> Result<nesquic_ebpf::user::calibrate::AgentCost> {
    static CACHE: std::sync::Mutex<Option<nesquic_ebpf::user::calibrate::AgentCost>> = std::sync::Mutex::new(None);
    let mut cached = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = *cached {
        return Ok(c);
    }
    let workload = workload_binary()?;
    let scratch = tempfile::tempdir().map_err(EngineError::os("agent calibration scratch directory"))?;
    let c = nesquic_ebpf::user::calibrate::measure_cost(&workload, scratch.path(), AGENT_ROUNDS, AGENT_CALLS)?;
    *cached = Some(c);
    Ok(c)
}

/// The calibration for this process: measured on first use (~1 s), then reused (a matrix runs
/// many transfers; the machine does not change between them).
fn run() -> Result<Calibration> {
    static CACHE: std::sync::Mutex<Option<Calibration>> = std::sync::Mutex::new(None);
    let mut cached = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = cached.as_ref() {
        return Ok(c.clone());
    }
    let c = measure()?;
    *cached = Some(c.clone());
    Ok(c)
}

fn measure() -> Result<Calibration> {
    let workload = workload_binary()?;
    let plan = ProbePlan::new("uprobe:nesquic_cal_*", &workload)?;
    let scratch = tempfile::tempdir().map_err(EngineError::os("calibration scratch directory"))?;
    let mut per_kind: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new(), Vec::new()); FUNCTIONS.len()];
    let mut session = plan.open_session()?;
    for round in 0..ROUNDS {
        let out = scratch.path().join(format!("round-{round}.json"));
        let metrics = probed_run(&mut session, &workload, &out)?;
        let results = read_results(&out)?;
        for (i, (name, _)) in FUNCTIONS.iter().enumerate() {
            let r = results
                .get(*name)
                .ok_or_else(|| EngineError::msg(format!("{name} missing from the workload's report")))?;
            let measured =
                probe_mean(&metrics, name).ok_or_else(|| EngineError::msg(format!("probes saw no call of {name}")))?;
            per_kind[i].0.push(r.twin_ns);
            per_kind[i].1.push(measured);
            per_kind[i].2.push(r.self_ns);
        }
    }
    drop(session);
    let kinds = FUNCTIONS
        .iter()
        .zip(per_kind)
        .map(|((_, kind), (truth, measured, self_probed))| {
            let diffs: Vec<f64> = measured.iter().zip(&truth).map(|(m, t)| m - t).collect();
            let costs: Vec<f64> = self_probed.iter().zip(&truth).map(|(p, t)| p - t).collect();
            KindCalibration {
                kind: *kind,
                true_ns: median(&truth),
                measured_ns: median(&measured),
                overhead_ns: median(&diffs),
                uncertainty_ns: stddev(&diffs),
                pair_cost_ns: median(&costs),
            }
        })
        .collect();
    Ok(Calibration { kinds, rounds: ROUNDS, agent: None })
}

/// One workload run with the timing probes on; returns what they measured.
fn probed_run(session: &mut nesquic_ebpf::ProbeSession, workload: &Path, out: &Path) -> Result<Metrics> {
    let args: Vec<std::ffi::OsString> =
        vec!["--calibrate".into(), ITERATIONS.to_string().into(), CALLS.to_string().into(), out.into()];
    // Nothing interrupts a calibration but the workload's own minute: it is killed on drop.
    let never = std::sync::atomic::AtomicBool::new(false);
    let (tx, rx) = channel();
    let mut watch = Supervisor::new(rx, Duration::from_secs(60), &never, "the calibration workload");
    let mut tracker = ProbeTracker::new(Some(session), None, None);
    let launch = Launch::command(workload, &args);
    let mut process = start(&launch, tx, &mut tracker)?;
    let exit = watch.until_exit(&mut process, &mut tracker)?;
    if !exit.success() {
        return Err(EngineError::msg(format!("calibration workload ended with {}", exit.describe())));
    }
    let probed = tracker.collect(true, &[Role::Process])?;
    // Invariant: the tracker has a kernel session, so a successful run has metrics.
    probed.metrics.ok_or_else(|| EngineError::msg("the calibration probes measured nothing"))
}

/// One calibration function's figures from the workload's own clock.
struct SelfTimed {
    /// Per probed call, everything included.
    self_ns: f64,
    /// Per call of the never-probed twin: the true cost.
    twin_ns: f64,
}

fn read_results(path: &Path) -> Result<std::collections::HashMap<String, SelfTimed>> {
    let text = std::fs::read_to_string(path).map_err(EngineError::os(format!("read {}", path.display())))?;
    let mut out = std::collections::HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let bad = |what: &str| EngineError::msg(format!("{}: {what} in {line}", path.display()));
        let v: serde_json::Value = serde_json::from_str(line).map_err(|_| bad("not JSON"))?;
        let name = v["function"].as_str().ok_or_else(|| bad("no function name"))?.to_string();
        let self_ns = v["ns_per_call"].as_f64().ok_or_else(|| bad("no ns_per_call"))?;
        let twin_ns = v["twin_ns_per_call"].as_f64().ok_or_else(|| bad("no twin_ns_per_call"))?;
        out.insert(name, SelfTimed { self_ns, twin_ns });
    }
    Ok(out)
}

fn probe_mean(metrics: &Metrics, name: &str) -> Option<f64> {
    let role = metrics.roles.iter().find(|r| r.role == Role::Process)?;
    let f = role.functions.iter().find(|f| f.name == name && f.timing.calls > 0)?;
    Some(f.timing.mean_ns())
}

fn median(v: &[f64]) -> f64 {
    nesquic_record::stats::median(v).unwrap_or(0.0)
}

fn stddev(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stddev_and_median() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert!((stddev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) - 2.138).abs() < 1e-3);
        assert_eq!(stddev(&[1.0]), 0.0);
    }
}
