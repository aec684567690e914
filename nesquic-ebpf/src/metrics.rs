//! What the probes measured, read out of the per-CPU maps and summed: the types live in
//! `nesquic-model` (re-exported here); this module builds them from the kernel's aggregates.

use crate::Role;

use crate::layout::{NqStats, SYSCALLS};
pub use crate::timing::{quantile_upper_bound, Timing};
pub use nesquic_model::metrics::{AgentLost, DutyScaled, FunctionMetrics, Metrics, RoleMetrics, SyscallMetrics};

/// `mechanism` of I/O measured by the syscall tracepoints.
pub const MECHANISM_TRACEPOINT: &str = "tracepoint";
/// `mechanism` of functions measured by kernel uprobes.
pub const MECHANISM_UPROBE: &str = "uprobe";
/// `mechanism` of functions measured by the agent's inline hooks.
pub const MECHANISM_INLINE_HOOK: &str = "user (inline hook)";
/// `mechanism` of I/O measured by the agent's libc interposition.
pub const MECHANISM_INTERPOSITION: &str = "user (libc interposition)";

/// A function as the session knows it (index = attach cookie).
#[derive(Debug, Clone)]
pub struct FunctionLabel {
    /// Category.
    pub category: String,
    /// Name.
    pub name: String,
    /// Object.
    pub object: String,
    /// Timed or only counted.
    pub timed: bool,
    /// Probe site kind.
    pub site: Option<crate::sites::SiteKind>,
}

/// Builds one role's metrics from summed per-syscall and per-function stats.
pub fn role_metrics(role: Role, io: &[NqStats], functions: &[(FunctionLabel, NqStats)]) -> RoleMetrics {
    let io = io
        .iter()
        .enumerate()
        .filter(|(_, s)| s.calls > 0)
        .map(|(i, s)| SyscallMetrics {
            syscall: SYSCALLS[i].to_string(),
            direction: if crate::layout::is_send(i) { "send" } else { "recv" }.to_string(),
            timing: crate::timing::from_stats(s),
            errors: s.errors,
            eagain: s.eagain,
            bytes: s.bytes,
            datagrams: s.datagrams,
            messages: s.messages,
            segmented_messages: s.segmented,
            mechanism: MECHANISM_TRACEPOINT.to_string(),
        })
        .collect();
    let functions = functions
        .iter()
        .filter(|(_, s)| s.calls > 0)
        .map(|(l, s)| FunctionMetrics {
            category: l.category.clone(),
            name: l.name.clone(),
            object: l.object.clone(),
            timing: crate::timing::from_stats(s),
            bytes: s.bytes,
            timed: l.timed,
            site: l.site,
            compensated_mean_ns: None,
            compensation_uncertainty_ns: None,
            duty: None,
            mechanism: MECHANISM_UPROBE.to_string(),
        })
        .collect();
    RoleMetrics { role, io, functions, io_crosscheck: Vec::new(), agent_lost: None }
}
