//! `nesquic trace -- CMD ARGS`: any command run under the probes (role "process"), for programs
//! that are not LUTs and for testing the probes' exact counts.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::channel;
use std::time::Duration;

use nesquic_ebpf::profile::Profile;
use nesquic_ebpf::Metrics;
use nesquic_record::calibration::Calibration;
use nesquic_record::run::AgentReport;

use crate::backend::{BackendChoice, KernelNeeds, Probes};
use crate::duty::DutySpec;
use crate::lifecycle::{start, Launch, ProbeTracker, Probed, Supervisor};
use crate::plan::ProbePlan;
use crate::process::{Exit, Role};
use crate::run::RunReporter;
use crate::EngineError;

type Result<T> = std::result::Result<T, EngineError>;

/// What to trace.
pub struct TraceSpec {
    /// The executable.
    pub binary: PathBuf,
    /// Its arguments.
    pub args: Vec<std::ffi::OsString>,
    /// The probe list.
    pub probe: String,
    /// Who measures.
    pub backend: BackendChoice,
    /// Duty-cycled function probes.
    pub duty: Option<DutySpec>,
    /// Kill the command after this long.
    pub timeout: Duration,
}

/// What `nesquic trace --json` writes: the command, how it ended, its CPU time and what the
/// probes saw (read back by the tests as this type).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct TraceReport {
    /// The command line traced.
    pub command: Vec<String>,
    /// How it ended.
    pub exit: String,
    /// User CPU seconds.
    pub cpu_user_s: f64,
    /// System CPU seconds.
    pub cpu_system_s: f64,
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// The probes' totals (compensated when timed).
    pub probes: Metrics,
    /// The agent in the process, when it measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentReport>,
    /// The sampling profile, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// The timing calibration, when probes timed anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
}

/// What the probes saw of the command.
pub struct Traced {
    /// How it ended, and its CPU time.
    pub exit: Exit,
    /// The probes' totals (compensated when timed).
    pub metrics: Metrics,
    /// The agent in the process, when it measured.
    pub agents: Vec<AgentReport>,
    /// The sampling profile, when asked for.
    pub profile: Option<Profile>,
    /// The timing calibration, when probes timed anything.
    pub calibration: Option<Calibration>,
}

/// Runs the command under the probes; stops it once `interrupted` is set.
pub fn execute(spec: &TraceSpec, interrupted: &AtomicBool, reporter: &mut dyn RunReporter) -> Result<Traced> {
    let plan = ProbePlan::new(&spec.probe, &spec.binary)?;
    let (_scratch, dir) = crate::backend::scratch_dir()?;
    let needs = KernelNeeds { duty: spec.duty.is_some(), agent_follows_programs: true, ..KernelNeeds::default() };
    let probes = Probes::open(&plan, spec.backend, &spec.binary, &dir, needs)?;
    reporter.probes_opened(&probes);
    let calibration = crate::calibrate::for_probes(&probes, interrupted)?;
    if let Some(c) = &calibration {
        reporter.calibrated(c);
    }
    let (mut session, mut user, mut user_profile) = (probes.kernel, probes.user, probes.user_profile);
    let kernel = crate::kernel::as_probes(session.as_mut(), user_profile.as_mut());
    let mut tracker = ProbeTracker::new(kernel, user.as_mut(), spec.duty);
    let (tx, rx) = channel();
    let mut watch = Supervisor::new(rx, spec.timeout, interrupted, "the command");
    let launch = Launch::command(&spec.binary, &spec.args);
    let mut process = start(&launch, tx, &mut tracker)?;
    let exit = watch.until_exit(&mut process, &mut tracker)?;
    let Probed { metrics, agents, profile } = tracker.collect(true, &[Role::Process])?;
    // Only the user-mode profile (no root, no counting probes) counts no totals.
    let mut metrics = metrics.unwrap_or_else(crate::backend::no_totals);
    if let Some(c) = &calibration {
        c.compensate(&mut metrics);
    }
    Ok(Traced { exit, metrics, agents, profile, calibration })
}
