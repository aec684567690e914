//! Calibration, the one module that owns it: the procedure and the arithmetic of what Nesquic's
//! own probes add to what they measure, on this machine, so timed figures can be compensated.
//! The record keeps the figures (`nesquic_record::calibration`, which also applies them); the
//! workload writes its clock's figures as typed lines (`nesquic_ebpf::workload_report`); the
//! eBPF crate provides the probes and the agent, not the procedure.
//!
//! Kernel uprobes, per kind of probe site: the shipped workload (`nesquic-workload --calibrate`)
//! runs the same busy loop behind three prologues (`push`, 5-byte NOP, `mov`: emulated,
//! emulated, single-stepped), with timing probes on all three, alternating batches with a
//! never-probed twin of the loop timed by the workload's own clock: the true cost, measured in
//! the same run under the same conditions (this VM's speed drifts by tens of percent between
//! runs). The probes' mean is the true cost plus the overhead that falls between their two
//! timestamps; the difference, over several rounds, is the overhead (median) and its spread.
//!
//! The user-space agent (`--agent-calibrate`): two identical tiny functions, one hooked in count
//! mode and one in time mode, against a never-hooked twin, in alternating batches. Rounds run
//! with and without the agent, alternating too; the cost is (hooked - twin) with the agent minus
//! the same difference without it (the layout noise of the three copies), as a mean over rounds.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::time::Duration;

use nesquic_ebpf::catalog::ResolvedFunction;
use nesquic_ebpf::sites::{ProbeSite, SiteKind};
use nesquic_ebpf::user::{AgentProcess, UserBackend, UserError};
use nesquic_ebpf::workload_report::{from_lines, AgentCalibrateRound, CalibrateLine};
use nesquic_ebpf::{Metrics, ObjectSymbols};

use crate::error::StepExt;
use crate::lifecycle::{start, Launch, ProbeTracker, Supervisor};
use crate::plan::ProbePlan;
use crate::process::Role;
use crate::EngineError;

pub use nesquic_record::calibration::{Calibration, KindCalibration};

/// What a hooked call costs (the model's type, as the record keeps it).
pub use nesquic_ebpf::user::AgentCost;

type Result<T> = std::result::Result<T, EngineError>;

/// Busy-loop iterations per call: ~1-2 us, the order of a crypto call on a packet.
const ITERATIONS: u64 = 2_000;
const CALLS: u64 = 2_000;
const ROUNDS: usize = 5;
/// Agent calibration: rounds with and without the agent (alternating), calls per round.
const AGENT_ROUNDS: usize = 5;
const AGENT_CALLS: u64 = 1_000_000;
/// Longest a calibration workload may run (a round takes well under a second).
const ROUND_LIMIT: Duration = Duration::from_secs(60);
const FUNCTIONS: [(&str, SiteKind); 3] = [
    ("nesquic_cal_push", SiteKind::Push),
    ("nesquic_cal_nop", SiteKind::Nop),
    ("nesquic_cal_step", SiteKind::SingleStep),
];

/// The calibration `probes` need: `None` unless they time some function (kernel uprobe sites
/// and/or the agent's hooks). Each part is measured once per process, then reused. Stops, with
/// its workload killed, once `interrupted` is set (SIGTERM, Ctrl-C).
pub fn for_probes(probes: &crate::backend::Probes, interrupted: &AtomicBool) -> Result<Option<Calibration>> {
    let kernel_times = probes.kernel.as_ref().is_some_and(|k| k.functions().iter().any(|f| f.timed));
    let user_times = probes.user.as_ref().is_some_and(|u| u.times_functions());
    if !kernel_times && !user_times {
        return Ok(None);
    }
    let mut c = if kernel_times {
        run(interrupted).step("calibrate the timing probes")?
    } else {
        Calibration { kinds: Vec::new(), rounds: 0, agent: None }
    };
    if user_times {
        c.agent = Some(agent_cost(interrupted).step("calibrate the user-space agent")?);
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
fn agent_cost(interrupted: &AtomicBool) -> Result<AgentCost> {
    static CACHE: std::sync::Mutex<Option<AgentCost>> = std::sync::Mutex::new(None);
    let mut cached = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = *cached {
        return Ok(c);
    }
    let workload = workload_binary()?;
    let scratch = tempfile::tempdir().map_err(EngineError::os("agent calibration scratch directory"))?;
    let c = measure_agent_cost(&workload, scratch.path(), AGENT_ROUNDS, AGENT_CALLS, interrupted)?;
    *cached = Some(c);
    Ok(c)
}

/// The calibration for this process: measured on first use (~1 s), then reused (a matrix runs
/// many transfers; the machine does not change between them).
fn run(interrupted: &AtomicBool) -> Result<Calibration> {
    static CACHE: std::sync::Mutex<Option<Calibration>> = std::sync::Mutex::new(None);
    let mut cached = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = cached.as_ref() {
        return Ok(c.clone());
    }
    let c = measure(interrupted)?;
    *cached = Some(c.clone());
    Ok(c)
}

fn measure(interrupted: &AtomicBool) -> Result<Calibration> {
    let workload = workload_binary()?;
    let plan = ProbePlan::new("uprobe:nesquic_cal_*", &workload)?;
    let scratch = tempfile::tempdir().map_err(EngineError::os("calibration scratch directory"))?;
    let mut per_kind: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new(), Vec::new()); FUNCTIONS.len()];
    let mut session = plan.open_session()?;
    for round in 0..ROUNDS {
        let out = scratch.path().join(format!("round-{round}.json"));
        let metrics = probed_run(&mut session, &workload, &out, interrupted)?;
        let results = read_results(&out)?;
        for (i, (name, _)) in FUNCTIONS.iter().enumerate() {
            let r = results
                .get(*name)
                .ok_or_else(|| EngineError::msg(format!("{name} missing from the workload's report")))?;
            let measured =
                probe_mean(&metrics, name).ok_or_else(|| EngineError::msg(format!("probes saw no call of {name}")))?;
            per_kind[i].0.push(r.twin_ns_per_call);
            per_kind[i].1.push(measured);
            per_kind[i].2.push(r.ns_per_call);
        }
    }
    drop(session);
    let kinds = FUNCTIONS
        .iter()
        .zip(per_kind)
        .map(|((_, kind), (truth, measured, self_probed))| kind_figures(*kind, &truth, &measured, &self_probed))
        .collect();
    Ok(Calibration { kinds, rounds: ROUNDS, agent: None })
}

/// One workload run with the timing probes on; returns what they measured.
fn probed_run(
    session: &mut nesquic_ebpf::ProbeSession,
    workload: &Path,
    out: &Path,
    interrupted: &AtomicBool,
) -> Result<Metrics> {
    let args: Vec<std::ffi::OsString> =
        vec!["--calibrate".into(), ITERATIONS.to_string().into(), CALLS.to_string().into(), out.into()];
    let (tx, rx) = channel();
    let mut watch = Supervisor::new(rx, ROUND_LIMIT, interrupted, "the calibration workload");
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

/// The workload's `--calibrate` report: its own clock's figures per calibration function.
fn read_results(path: &Path) -> Result<std::collections::HashMap<String, CalibrateLine>> {
    let text = std::fs::read_to_string(path).map_err(EngineError::os(format!("read {}", path.display())))?;
    let lines: Vec<CalibrateLine> = from_lines(&text)
        .map_err(|e| EngineError::msg(format!("{}: not the workload's calibration lines ({e})", path.display())))?;
    Ok(lines.into_iter().map(|l| (l.function.clone(), l)).collect())
}

fn probe_mean(metrics: &Metrics, name: &str) -> Option<f64> {
    let role = metrics.roles.iter().find(|r| r.role == Role::Process)?;
    let f = role.functions.iter().find(|f| f.name == name && f.timing.calls > 0)?;
    Some(f.timing.mean_ns())
}

/// The agent's cost per call: runs `workload` (`nesquic-workload`) `rounds` times with the agent
/// and as many without, alternating, `calls` calls per function per round; `scratch` receives
/// the workload's reports. Every figure is measured or the calibration is an error
/// ([`UserError::Calibration`]): a round in which the agent did not start or did not time its
/// function has no figure to stand in.
pub fn measure_agent_cost(
    workload: &Path,
    scratch: &Path,
    rounds: usize,
    calls: u64,
    interrupted: &AtomicBool,
) -> Result<AgentCost> {
    if rounds == 0 {
        return Err(UserError::Calibration("no rounds asked for".into()).into());
    }
    let symbols = ObjectSymbols::load(workload)
        .map_err(|e| UserError::Io { what: e.to_string(), source: std::io::Error::other("symbols") })?;
    let pick = |name: &str, timed: bool| {
        symbols.functions.iter().find(|f| f.raw == name).map(|f| ResolvedFunction {
            category: "calibration".into(),
            backend: "custom".into(),
            object: workload.to_path_buf(),
            name: name.into(),
            raw_name: name.into(),
            address: f.address,
            file_offset: f.file_offset,
            site: ProbeSite { skip: 0, kind: SiteKind::SingleStep },
            bytes_arg: 0,
            timed,
            size: f.size,
        })
    };
    let missing = || UserError::Io {
        what: format!("{}: calibration functions", workload.display()),
        source: std::io::Error::other("nesquic_agent_cal_* not found"),
    };
    let functions = [
        pick("nesquic_agent_cal_count", false).ok_or_else(missing)?,
        pick("nesquic_agent_cal_time", true).ok_or_else(missing)?,
    ];
    let (backend, refused) = UserBackend::prepare(scratch, &functions, false)?;
    if let Some((f, why)) = refused.first() {
        return Err(UserError::Io {
            what: format!("calibration site {}", f.name),
            source: std::io::Error::other(why.clone()),
        }
        .into());
    }
    let (mut hooked, mut bare, mut window) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..rounds {
        let agent = backend.process(i, Role::Process)?;
        let round = agent_round(workload, scratch, calls, Some(&agent), interrupted)?;
        let measured =
            agent_mean(&agent, workload).map_err(|why| UserError::Calibration(format!("round {}: {why}", i + 1)))?;
        window.push(measured - round.twin_ns);
        hooked.push(round);
        bare.push(agent_round(workload, scratch, calls, None, interrupted)?);
    }
    Ok(agent_figures(&hooked, &bare, &window))
}

/// The agent's mean for the timed calibration function in one round, or why there is none.
fn agent_mean(agent: &AgentProcess, workload: &Path) -> std::result::Result<f64, String> {
    const TIMED: &str = "nesquic_agent_cal_time";
    let state = agent.state();
    if !state.ready {
        return Err(format!(
            "the agent did not start in {} (is {} a current build of the agent?)",
            workload.display(),
            nesquic_ebpf::user::agent_library().map_or_else(|e| e.to_string(), |p| p.display().to_string())
        ));
    }
    if let Some(s) = agent.patch_status().into_iter().find(|s| s.name == TIMED && !s.patched) {
        return Err(format!("the agent did not hook {TIMED}: {}", s.reason));
    }
    agent
        .snapshot()
        .functions
        .into_iter()
        .find(|f| f.name == TIMED && f.timing.calls > 0)
        .map(|f| f.timing.mean_ns())
        .ok_or_else(|| format!("the agent timed no call of {TIMED}"))
}

/// One `--agent-calibrate` round, under `agent` when given: the workload's clock's figures.
fn agent_round(
    workload: &Path,
    scratch: &Path,
    calls: u64,
    agent: Option<&AgentProcess>,
    interrupted: &AtomicBool,
) -> std::result::Result<AgentCalibrateRound, UserError> {
    let out = scratch.join("agent-calibration.json");
    let mut cmd = std::process::Command::new(workload);
    cmd.args(["--agent-calibrate", &calls.to_string(), "1"]).arg(&out);
    if let Some(a) = agent {
        a.apply_to(&mut cmd);
    }
    let io = |source| UserError::Io { what: format!("calibration run of {}", workload.display()), source };
    let mut child = cmd.spawn().map_err(io)?;
    let status = wait_or_kill(&mut child, ROUND_LIMIT, interrupted).map_err(io)?;
    if !status.success() {
        return Err(io(std::io::Error::other(format!("exited with {status}"))));
    }
    let text = std::fs::read_to_string(&out).map_err(io)?;
    let no_figures = |why: String| {
        UserError::Calibration(format!("{} reported no figures in {} ({why})", workload.display(), out.display()))
    };
    let round = from_lines::<AgentCalibrateRound>(&text)
        .map_err(|e| no_figures(e.to_string()))?
        .into_iter()
        .next()
        .ok_or_else(|| no_figures("no line".into()))?;
    if ![round.count_ns, round.time_ns, round.twin_ns].iter().all(|v| v.is_finite()) {
        return Err(no_figures(format!("{round:?}")));
    }
    Ok(round)
}

/// Waits for `child` at most `limit`, and no longer than until `interrupted` is set; then kills
/// and reaps it. `cmd.status()` waited for as long as the workload ran, deaf to SIGTERM.
fn wait_or_kill(
    child: &mut std::process::Child,
    limit: Duration,
    interrupted: &AtomicBool,
) -> std::io::Result<std::process::ExitStatus> {
    let until = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        let stop = if interrupted.load(Ordering::Relaxed) {
            Some("interrupted: the calibration workload was killed".to_string())
        } else if std::time::Instant::now() >= until {
            Some(format!("the calibration workload ran past {limit:?} and was killed"))
        } else {
            None
        };
        if let Some(why) = stop {
            // Either may fail only because it already exited: the wait reaps it either way.
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other(why));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One site kind's figures from its rounds: the twin's true cost, the probes' mean and the
/// program's probed cost per round (medians), the overhead (probes - truth, median) and its
/// standard deviation.
fn kind_figures(kind: SiteKind, truth: &[f64], measured: &[f64], self_probed: &[f64]) -> KindCalibration {
    let diffs: Vec<f64> = measured.iter().zip(truth).map(|(m, t)| m - t).collect();
    let costs: Vec<f64> = self_probed.iter().zip(truth).map(|(p, t)| p - t).collect();
    KindCalibration {
        kind,
        true_ns: median(truth),
        measured_ns: median(measured),
        overhead_ns: median(&diffs),
        uncertainty_ns: std_dev(&diffs),
        pair_cost_ns: median(&costs),
    }
}

/// The agent's figures from its rounds with (`hooked`) and without it (`bare`, same length) and
/// the in-window time per hooked round: means over rounds and their standard deviations.
fn agent_figures(hooked: &[AgentCalibrateRound], bare: &[AgentCalibrateRound], window: &[f64]) -> AgentCost {
    let diffs = |pick: fn(&AgentCalibrateRound) -> f64| -> Vec<f64> {
        hooked.iter().zip(bare).map(|(h, b)| (pick(h) - h.twin_ns) - (pick(b) - b.twin_ns)).collect()
    };
    let (count, time) = (diffs(|r| r.count_ns), diffs(|r| r.time_ns));
    AgentCost {
        count_ns: mean(&count),
        count_sd_ns: std_dev(&count),
        time_ns: mean(&time),
        time_sd_ns: std_dev(&time),
        window_ns: mean(window),
        window_sd_ns: std_dev(window),
        bare_ns: mean(&bare.iter().map(|r| r.twin_ns).collect::<Vec<_>>()),
        rounds: hooked.len(),
    }
}

/// Median over rounds; 0 without rounds (a calibration always has at least one).
fn median(v: &[f64]) -> f64 {
    nesquic_stats::median(v).unwrap_or(0.0)
}

/// Mean over rounds; 0 without rounds (a calibration always has at least one).
fn mean(v: &[f64]) -> f64 {
    nesquic_stats::mean(v).unwrap_or(0.0)
}

/// Standard deviation over rounds; 0 below two rounds (no spread measured).
fn std_dev(v: &[f64]) -> f64 {
    nesquic_stats::std_dev(v).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calibration_workload_is_killed_once_interrupted() {
        let interrupted = std::sync::Arc::new(AtomicBool::new(false));
        let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("sleep");
        let flag = interrupted.clone();
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            flag.store(true, Ordering::Relaxed);
        });
        let started = std::time::Instant::now();
        let e = wait_or_kill(&mut child, ROUND_LIMIT, &interrupted).expect_err("interrupted");
        setter.join().expect("setter");
        assert!(e.to_string().contains("interrupted"), "{e}");
        // Generous for a loaded machine; the sleep alone would take 30 s.
        assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
        assert!(child.try_wait().expect("reaped").is_some());
        // The time limit, and an ordinary exit.
        let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("sleep");
        let never = AtomicBool::new(false);
        let e = wait_or_kill(&mut child, Duration::from_millis(50), &never).expect_err("too long");
        assert!(e.to_string().contains("ran past"), "{e}");
        let mut child = std::process::Command::new("true").spawn().expect("true");
        assert!(wait_or_kill(&mut child, ROUND_LIMIT, &never).expect("exits").success());
    }

    #[test]
    fn kind_figures_are_medians_of_the_rounds_and_the_spread_of_the_overhead() {
        // Overheads per round: 10, 12, 20 (measured - truth); program's costs: 30, 33, 40.
        let k = kind_figures(SiteKind::Push, &[100.0, 101.0, 99.0], &[110.0, 113.0, 119.0], &[130.0, 134.0, 139.0]);
        assert_eq!((k.true_ns, k.measured_ns, k.overhead_ns, k.pair_cost_ns), (100.0, 113.0, 12.0, 33.0));
        // Sample sd of 10, 12, 20: mean 14, squares 16 + 4 + 36 = 56, / 2 = 28.
        assert!((k.uncertainty_ns - 28.0_f64.sqrt()).abs() < 1e-12, "{k:?}");
        let one = kind_figures(SiteKind::Nop, &[1.0], &[3.0], &[4.0]);
        assert_eq!((one.overhead_ns, one.uncertainty_ns), (2.0, 0.0));
    }

    #[test]
    fn agent_figures_subtract_the_layout_noise_and_average_over_rounds() {
        let r = |count_ns, time_ns, twin_ns| AgentCalibrateRound { count_ns, time_ns, twin_ns };
        // With the agent: count 5, 7, 12 above the twin, time 30, 34, 41; without: 1 and 2 each
        // round. Means, not medians: count 7 (median 6), time 33 (median 32), window 25 (24).
        let hooked = [r(15.0, 40.0, 10.0), r(17.0, 44.0, 10.0), r(22.0, 51.0, 10.0)];
        let bare = [r(11.0, 12.0, 10.0), r(12.0, 13.0, 11.0), r(11.0, 12.0, 10.0)];
        let a = agent_figures(&hooked, &bare, &[20.0, 24.0, 31.0]);
        assert_eq!((a.count_ns, a.time_ns, a.window_ns, a.rounds), (7.0, 33.0, 25.0, 3));
        assert!((a.bare_ns - 31.0 / 3.0).abs() < 1e-12, "{a:?}");
        // count diffs 4, 6, 11: squares 9 + 1 + 16 = 26, / 2; time 28, 32, 39 and window 20, 24,
        // 31: 25 + 1 + 36 = 62, / 2.
        assert!((a.count_sd_ns - 13.0_f64.sqrt()).abs() < 1e-12, "{a:?}");
        assert!((a.time_sd_ns - 31.0_f64.sqrt()).abs() < 1e-12 && (a.window_sd_ns - 31.0_f64.sqrt()).abs() < 1e-12);
    }
}
