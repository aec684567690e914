//! The agent's own cost per hit, measured: the workload (`--agent-calibrate`) times two
//! identical tiny functions, one hooked in count mode and one in time mode, against a
//! never-hooked twin, in alternating batches. Rounds run with and without the agent, alternating
//! too; the cost is (hooked - twin) with the agent minus the same difference without it (which
//! is the layout noise of the three copies).

use std::path::Path;
use std::process::Command;

use crate::catalog::ResolvedFunction;
use crate::symbols::ObjectSymbols;

use super::{UserBackend, UserError};

pub use nesquic_model::agent::AgentCost;

/// One round's mean ns per call, by the workload's own clock.
struct Round {
    /// The counted function.
    count: f64,
    /// The timed function.
    time: f64,
    /// Their never-hooked twin.
    twin: f64,
}

/// Runs `workload` (`nesquic-workload`) `rounds` times with the agent and as many without,
/// alternating, `calls` calls per function per round; `scratch` receives the workload's reports.
/// Every figure is measured or the calibration is an error ([`UserError::Calibration`]): a round
/// in which the agent did not start or did not time its function has no figure to stand in.
pub fn measure_cost(workload: &Path, scratch: &Path, rounds: usize, calls: u64) -> Result<AgentCost, UserError> {
    if rounds == 0 {
        return Err(UserError::Calibration("no rounds asked for".into()));
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
            site: crate::sites::ProbeSite { skip: 0, kind: crate::sites::SiteKind::SingleStep },
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
        });
    }
    let (mut hooked, mut bare, mut window) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..rounds {
        let agent = backend.process(i, crate::Role::Process)?;
        let round = run_round(workload, scratch, calls, Some(&agent))?;
        let measured =
            agent_mean(&agent, workload).map_err(|why| UserError::Calibration(format!("round {}: {why}", i + 1)))?;
        window.push(measured - round.twin);
        hooked.push(round);
        bare.push(run_round(workload, scratch, calls, None)?);
    }
    let diffs = |pick: fn(&Round) -> f64| -> Vec<f64> {
        hooked.iter().zip(&bare).map(|(h, b)| (pick(h) - h.twin) - (pick(b) - b.twin)).collect()
    };
    let (count, time) = (diffs(|r| r.count), diffs(|r| r.time));
    Ok(AgentCost {
        count_ns: mean(&count),
        count_sd_ns: sd(&count),
        time_ns: mean(&time),
        time_sd_ns: sd(&time),
        window_ns: mean(&window),
        window_sd_ns: sd(&window),
        bare_ns: mean(&bare.iter().map(|r| r.twin).collect::<Vec<_>>()),
        rounds,
    })
}

/// The agent's mean for the timed calibration function in one round, or why there is none.
fn agent_mean(agent: &super::AgentProcess, workload: &Path) -> Result<f64, String> {
    const TIMED: &str = "nesquic_agent_cal_time";
    let state = agent.state();
    if !state.ready {
        return Err(format!(
            "the agent did not start in {} (is {} a current build of the agent?)",
            workload.display(),
            super::agent_library().map_or_else(|e| e.to_string(), |p| p.display().to_string())
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

fn run_round(
    workload: &Path,
    scratch: &Path,
    calls: u64,
    agent: Option<&super::AgentProcess>,
) -> Result<Round, UserError> {
    let out = scratch.join("agent-calibration.json");
    let mut cmd = Command::new(workload);
    cmd.args(["--agent-calibrate", &calls.to_string(), "1"]).arg(&out);
    if let Some(a) = agent {
        a.apply_to(&mut cmd);
    }
    let io = |source| UserError::Io { what: format!("calibration run of {}", workload.display()), source };
    let status = cmd.status().map_err(io)?;
    if !status.success() {
        return Err(io(std::io::Error::other(format!("exited with {status}"))));
    }
    let text = std::fs::read_to_string(&out).map_err(io)?;
    let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap_or("{}"))
        .map_err(|e| io(std::io::Error::other(e.to_string())))?;
    let get = |k: &str| {
        line[k].as_f64().filter(|v| v.is_finite()).ok_or_else(|| {
            UserError::Calibration(format!("{} reported no {k} in {}", workload.display(), out.display()))
        })
    };
    Ok(Round { count: get("count_ns")?, time: get("time_ns")?, twin: get("twin_ns")? })
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn sd(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}
