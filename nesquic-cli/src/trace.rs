//! `nesquic trace -- CMD ARGS`: run any command under the probes (role "process"). Useful for
//! programs that are not LUTs, and how the probes' exact counts are tested.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::backend::{KernelNeeds, Probes};
use crate::probes::ProbePlan;
use crate::run::process::{LutProcess, ProcessEvent, Role};
use crate::units;

/// `nesquic trace` arguments.
#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// Probes, as for `nesquic run --probe` (uprobe globs resolve against the command's binary).
    #[arg(long, value_name = "LIST", default_value = "io")]
    pub probe: String,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Duty-cycle the function probes: attached WINDOW out of every PERIOD (e.g. 50ms/500ms);
    /// counts are extrapolated with the measured attached fraction (raw and scaled reported).
    #[arg(long, value_name = "WINDOW/PERIOD", value_parser = crate::duty::parse)]
    pub duty: Option<crate::duty::DutySpec>,
    /// Who measures: auto, user, kernel, both (as for `nesquic run --probe-backend`).
    #[arg(long, value_enum, default_value_t = crate::backend::BackendChoice::Auto)]
    pub probe_backend: crate::backend::BackendChoice,
    /// Kill the command after this long.
    #[arg(long, default_value = "10m", value_parser = units::parse_duration)]
    pub timeout: Duration,
    /// The command to run, after `--`.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// What `--json` holds.
#[derive(Debug, Serialize)]
struct TraceReport {
    command: Vec<String>,
    exit: String,
    cpu_user_s: f64,
    cpu_system_s: f64,
    wall_s: f64,
    probes: nesquic_ebpf::Metrics,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    agents: Vec<crate::backend::AgentReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    profile: Option<nesquic_ebpf::profile::Profile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    calibration: Option<crate::calibrate::Calibration>,
}

/// Runs `nesquic trace`.
pub fn execute(args: &TraceArgs) -> Result<()> {
    // Signals first: once probes are attached, Ctrl-C must unwind through their cleanup.
    let interrupted = crate::run::install_signal_flag()?;
    let binary = find_executable(&args.command[0])?;
    let plan = ProbePlan::new(&args.probe, &binary)?;
    let (_scratch, dir) = crate::backend::scratch_dir()?;
    let needs = KernelNeeds { duty: args.duty.is_some(), ..KernelNeeds::default() };
    let probes = Probes::open(&plan, args.probe_backend, &binary, &dir, needs)?;
    for line in probes.describe() {
        eprintln!("nesquic: probes: {line}");
    }
    let calibration = nesquic_engine::calibrate::for_probes(&probes)?;
    if let Some(c) = &calibration {
        crate::calibrate::print(c);
    }
    let (mut session, mut user) = (probes.kernel, probes.user);
    let env = match user.as_mut() {
        Some(u) => u.environment(Role::Process)?,
        None => Vec::new(),
    };
    let (tx, rx) = channel();
    let mut process = LutProcess::spawn_inheriting_output(Role::Process, &binary, &args.command[1..], &env, tx)?;
    let pid = u32::try_from(process.pid).context("negative pid")?;
    if let Some(session) = session.as_mut() {
        session.track(pid, Role::Process.index())?;
    }
    let mut duty = args.duty.map(crate::duty::DutyCycle::new);
    if let Some(d) = duty.as_mut() {
        d.begin(Instant::now());
    }
    process.release()?;
    let deadline = Instant::now() + args.timeout;
    // The profile symbolises with the process's memory map, which is gone once it exits.
    let mut maps = nesquic_ebpf::profile::MapsCache::default();
    let exit = loop {
        if session.as_ref().is_some_and(|s| s.is_profiling()) {
            maps.refresh([pid]);
        }
        if interrupted.load(Ordering::Relaxed) {
            process.kill();
            bail!("interrupted: command killed, probes detached");
        }
        if Instant::now() >= deadline {
            process.kill();
            bail!("timed out after {:?}: command killed (raise it with --timeout)", args.timeout);
        }
        if let (Some(d), Some(session)) = (duty.as_mut(), session.as_mut()) {
            d.tick(session).context("duty-cycle the function probes")?;
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
            Err(RecvTimeoutError::Disconnected) => bail!("lost contact with the command"),
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
        None => kernel.context("no probe session")?,
    };
    let agents = user.as_mut().map(|u| u.finish_repetition()).unwrap_or_default();
    crate::probes::print_agent_problems(&agents);
    if let Some(c) = &calibration {
        c.compensate(&mut metrics);
    }
    let profile = match session.as_mut() {
        Some(s) if s.is_profiling() => Some(crate::probes::build_profile(s, &maps.maps, &[Role::Process.slot()])?),
        _ => None,
    };
    drop((session, user));
    let cpu = (exit.user + exit.system).as_secs_f64();
    crate::probes::print_summary(&metrics, &BTreeMap::from([("process".to_string(), cpu)]), "whole command");
    crate::probes::print_duty(&metrics);
    if let Some(c) = &calibration {
        crate::probes::print_compensated(&metrics, c);
    }
    if let Some(p) = &profile {
        crate::probes::print_profile(p, "whole command", (exit.user + exit.system).as_secs_f64());
    }
    if let Some(path) = &args.json {
        let report = TraceReport {
            command: args.command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
            exit: exit.describe(),
            cpu_user_s: exit.user.as_secs_f64(),
            cpu_system_s: exit.system.as_secs_f64(),
            wall_s: exit.wall.as_secs_f64(),
            probes: metrics,
            agents,
            profile,
            calibration,
        };
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("write {}", path.display()))?;
    }
    if !exit.success() {
        bail!("{} ended with {}", binary.display(), exit.describe());
    }
    Ok(())
}

/// `cmd` as given if it holds a `/`, else the first match on `PATH`.
fn find_executable(cmd: &OsString) -> Result<PathBuf> {
    let p = PathBuf::from(cmd);
    if p.components().count() > 1 {
        anyhow::ensure!(p.is_file(), "{} not found", p.display());
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(&p))
        .find(|c| c.is_file())
        .with_context(|| format!("{} not found on PATH", p.display()))
}
