//! `nesquic trace -- CMD ARGS`: run any command under the probes (role "process"), and print
//! and write what they saw; the sequence itself is the engine's (`nesquic_engine::trace`).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use nesquic_engine::trace::{TraceReport, TraceSpec, Traced};

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
    /// The command to run, after `--`. The programs it execs and starts are measured with it:
    /// the kernel backend follows its forks, the user-space agent loads into each dynamically
    /// linked program it starts (a script, `env`, `cargo run`; the output names them). A
    /// statically linked program (Go's) cannot load the agent, nor one started with an
    /// environment stripped of it (`env -i`): the output names those it saw started and warns
    /// that they are not counted; `--probe-backend kernel` measures them.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// Runs `nesquic trace`.
pub fn execute(args: &TraceArgs) -> Result<()> {
    // Signals first: once probes are attached, Ctrl-C must unwind through their cleanup.
    let interrupted = crate::run::install_signal_flag()?;
    crate::run::clear_leftovers();
    let binary = find_executable(&args.command[0])?;
    let spec = TraceSpec {
        binary: binary.clone(),
        args: args.command[1..].to_vec(),
        probe: args.probe.clone(),
        backend: args.probe_backend,
        duty: args.duty,
        timeout: args.timeout,
    };
    let traced = nesquic_engine::trace::execute(&spec, &interrupted, &mut crate::run::Terminal::new(false))?;
    let Traced { exit, metrics, agents, profile, calibration } = traced;
    nesquic_render::probes::print_agent_problems(&agents);
    if let Some(line) = nesquic_render::probes::agent_processes(&agents) {
        println!("{line}");
    }
    let cpu = (exit.user + exit.system).as_secs_f64();
    nesquic_render::probes::print_summary(
        &metrics,
        &HashMap::from([(nesquic_ebpf::Role::Process, cpu)]),
        "whole command",
    );
    nesquic_render::probes::print_duty(&metrics);
    if let Some(c) = &calibration {
        nesquic_render::probes::print_compensated(&metrics, c);
    }
    if let Some(p) = &profile {
        nesquic_render::profile::print_profile(p, "whole command", (exit.user + exit.system).as_secs_f64());
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
        nesquic_record::files::write(path, serde_json::to_string_pretty(&report)?.as_bytes())
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
