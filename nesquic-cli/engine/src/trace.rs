//! `nesquic trace -- CMD ARGS`: any command run under the probes (role "process"), for programs
//! that are not LUTs and for testing the probes' exact counts.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

use nesquic_ebpf::profile::Profile;
use nesquic_ebpf::Metrics;
use nesquic_record::calibration::Calibration;
use nesquic_record::run::AgentReport;

use crate::backend::{BackendChoice, KernelNeeds, Probes};
use crate::duty::DutySpec;
use crate::error::StepExt;
use crate::plan::ProbePlan;
use crate::process::{Exit, LutProcess, ProcessEvent, Role};
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
    let needs = KernelNeeds { duty: spec.duty.is_some(), ..KernelNeeds::default() };
    let probes = Probes::open(&plan, spec.backend, &spec.binary, &dir, needs)?;
    reporter.probes_opened(&probes);
    let calibration = crate::calibrate::for_probes(&probes)?;
    if let Some(c) = &calibration {
        reporter.calibrated(c);
    }
    let (mut session, mut user) = (probes.kernel, probes.user);
    let env = match user.as_mut() {
        Some(u) => u.environment(Role::Process)?,
        None => Vec::new(),
    };
    let (tx, rx) = channel();
    let mut process = LutProcess::spawn_inheriting_output(Role::Process, &spec.binary, &spec.args, &env, tx)?;
    // Invariant: a pid from fork is positive.
    let pid = u32::try_from(process.pid).unwrap_or_default();
    if let Some(session) = session.as_mut() {
        session.track(pid, Role::Process.index())?;
    }
    let mut duty = spec.duty.map(crate::duty::DutyCycle::new);
    if let Some(d) = duty.as_mut() {
        d.begin(Instant::now());
    }
    process.release()?;
    let deadline = Instant::now() + spec.timeout;
    // The profile symbolises with the process's memory map, which is gone once it exits.
    let mut maps = nesquic_ebpf::profile::MapsCache::default();
    let exit = loop {
        if session.as_ref().is_some_and(|s| s.is_profiling()) {
            maps.refresh([pid]);
        }
        if interrupted.load(Ordering::Relaxed) {
            process.kill();
            return Err(EngineError::msg("interrupted: command killed, probes detached"));
        }
        if Instant::now() >= deadline {
            process.kill();
            return Err(EngineError::msg(format!(
                "timed out after {:?}: command killed (raise it with --timeout)",
                spec.timeout
            )));
        }
        if let (Some(d), Some(session)) = (duty.as_mut(), session.as_mut()) {
            d.tick(session).step("duty-cycle the function probes")?;
        }
        let wait = duty.as_ref().map_or(Duration::from_millis(50), |d| {
            d.next_toggle().clamp(Duration::from_millis(1), Duration::from_millis(50))
        });
        match rx.recv_timeout(wait) {
            Ok(ProcessEvent::Exited(_, exit)) => {
                process.mark_reaped();
                break exit;
            }
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Err(EngineError::msg("lost contact with the command")),
        }
    };
    let mut kernel = match session.as_ref() {
        Some(s) => Some(s.snapshot(&[Role::Process.slot()])?),
        None => None,
    };
    if let (Some(fraction), Some(m)) = (duty.as_mut().and_then(|d| d.finish()), kernel.as_mut()) {
        m.apply_duty(fraction);
    }
    let mut metrics = match user.as_ref() {
        Some(u) => u.merge_into(kernel),
        // Invariant: Probes::open opens a kernel session whenever there is no agent.
        None => kernel.ok_or_else(|| EngineError::msg("no probe session"))?,
    };
    let agents = user.as_mut().map(|u| u.finish_repetition()).unwrap_or_default();
    if let Some(c) = &calibration {
        c.compensate(&mut metrics);
    }
    let profile = match session.as_mut() {
        Some(s) if s.is_profiling() => Some(crate::plan::build_profile(s, &maps.maps, &[Role::Process.slot()])?),
        _ => None,
    };
    Ok(Traced { exit, metrics, agents, profile, calibration })
}
