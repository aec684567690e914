//! What the probes measured, read out of the per-CPU maps and summed: the types live in
//! `nesquic-model` (re-exported here); this module builds them from the kernel's aggregates.

use crate::Role;

use crate::layout::NqStats;
pub use crate::timing::{quantile_upper_bound, Timing};
pub use nesquic_model::metrics::{
    AgentLost, Direction, DutyScaled, FunctionMetrics, Mechanism, Metrics, RoleMetrics, Syscall, SyscallMetrics,
};

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
    // `io` is in map order, which `Syscall::ALL` follows (layout.rs checks it).
    let io = io
        .iter()
        .zip(Syscall::ALL)
        .filter(|(s, _)| s.calls > 0)
        .map(|(s, syscall)| SyscallMetrics {
            syscall,
            direction: syscall.direction(),
            timing: crate::timing::from_stats(s),
            errors: s.errors,
            eagain: s.eagain,
            bytes: s.bytes,
            datagrams: s.datagrams,
            messages: s.messages,
            segmented_messages: s.segmented,
            mechanism: Mechanism::Tracepoint,
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
            mechanism: Mechanism::Uprobe,
        })
        .collect();
    RoleMetrics {
        role,
        io,
        functions,
        io_crosscheck: Vec::new(),
        agent_lost: None,
        byte_stream: false,
        blocking_calls: false,
    }
}
