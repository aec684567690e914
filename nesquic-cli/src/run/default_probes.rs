//! Which probes `nesquic run` turns on when `--probe` is not given: the cheap ones (each about 1%
//! of the LUT's CPU or less, measured per event and alone; end to end the set measured 0.955-0.983x
//! goodput over 300 paired rounds per LUT: docs/probe-overhead.md), so the main command says
//! where the CPU goes. `nesquic run --overhead` measures the set as one.
//! `--probe none` turns every probe off.

use nesquic_engine::backend::{who_measures, BackendChoice};
use nesquic_engine::plan::ProbePlan;
use nesquic_engine::run::RunPlan;

/// What `--probe none` says.
pub const NONE: &str = "none";

/// The probe list for `plan` when `--probe` was not given, or `None` (with the reason on
/// stderr) when probes cannot run: the sampling profile (199 Hz: ~0.8% of the sampled CPU) and
/// packet I/O always, counted crypto only where the user-space agent counts every crypto entry
/// (0.6 ns a call; kernel uprobes cost 0.47x goodput). docs/probe-overhead.md has the figures.
pub fn choose(plan: &RunPlan) -> Option<String> {
    // Privileges and the agent are this host's: a role elsewhere is probed only on request.
    if plan.remote.any() {
        eprintln!("nesquic: running without probes: a role runs on another host (--probe LIST asks for them there)");
        return None;
    }
    if let Err(why) = nesquic_ebpf::preflight::check_privileges() {
        eprintln!("nesquic: running without probes: {why} (--probe none skips this note)");
        return None;
    }
    let list = if agent_counts_crypto(plan) { "profile,io,crypto" } else { "profile,io" };
    eprintln!("nesquic: probes: {list} (the default, the cheap ones: docs/probe-overhead.md; --probe none for none)");
    Some(list.to_string())
}

/// Whether the user-space agent, not kernel uprobes, would count every crypto entry of the
/// plan's executable.
fn agent_counts_crypto(plan: &RunPlan) -> bool {
    if plan.probe_backend == BackendChoice::Kernel {
        return false;
    }
    let Ok(crypto) = ProbePlan::new("crypto", &plan.binary) else { return false };
    if crypto.resolution.functions.is_empty() {
        return false;
    }
    who_measures(&crypto, &plan.binary, plan.probe_backend).is_ok_and(|who| who.user && who.refused.is_empty())
}
