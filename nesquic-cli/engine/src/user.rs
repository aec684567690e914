//! The seam between the engine and the user-space probe agent: what following processes asks of
//! it (an agent per LUT process: its environment, what it counted so far, whether it started
//! and what it patched). [`UserBackend`] and [`AgentProcess`] are the real ones (a shared library
//! preloaded into the LUT, counters in a shared file); tests put fakes behind the traits to check
//! how the agents' figures are merged with the kernel's without an agent or root, as
//! [`crate::kernel::KernelProbes`] does for the eBPF session.

use std::ffi::OsString;

use nesquic_ebpf::user::{AgentProcess, PatchStatus, PlannedFunction, ProcessesSeen, UserBackend, UserError};
use nesquic_ebpf::{Role, RoleMetrics};

/// The agent's plan for a run: what it hooks, and an agent for each process.
pub trait AgentPlan {
    /// The functions every agent of the run hooks.
    fn planned(&self) -> &[PlannedFunction];
    /// The agent of the `index`-th process of the run (its own counters), started as `role`.
    fn agent(&self, index: usize, role: Role) -> Result<Box<dyn UserAgent>, UserError>;
}

/// One LUT process's agent.
pub trait UserAgent {
    /// Variables to add to the process's environment.
    fn env(&self) -> Vec<(String, OsString)>;
    /// What it measured so far, as the kernel path reports it.
    fn snapshot(&self) -> RoleMetrics;
    /// Whether it finished starting in the process.
    fn ready(&self) -> bool;
    /// Per planned function: patched, or why not.
    fn patch_status(&self) -> Vec<PatchStatus>;
    /// CPU time its start-up took in the process, ns (`None` before it started).
    fn startup_cpu_ns(&self) -> Option<u64>;
    /// The processes it ran in or saw started without it (the first `MAX_PROCESSES` listed).
    fn processes(&self) -> ProcessesSeen {
        ProcessesSeen::default()
    }
}

impl AgentPlan for UserBackend {
    fn planned(&self) -> &[PlannedFunction] {
        UserBackend::planned(self)
    }
    fn agent(&self, index: usize, role: Role) -> Result<Box<dyn UserAgent>, UserError> {
        Ok(Box::new(self.process(index, role)?))
    }
}

impl UserAgent for AgentProcess {
    fn env(&self) -> Vec<(String, OsString)> {
        AgentProcess::env(self).to_vec()
    }
    fn snapshot(&self) -> RoleMetrics {
        AgentProcess::snapshot(self)
    }
    fn ready(&self) -> bool {
        self.state().ready
    }
    fn patch_status(&self) -> Vec<PatchStatus> {
        AgentProcess::patch_status(self)
    }
    fn startup_cpu_ns(&self) -> Option<u64> {
        let state = self.state();
        state.ready.then_some(state.init_cpu_ns)
    }
    fn processes(&self) -> ProcessesSeen {
        AgentProcess::processes(self)
    }
}
