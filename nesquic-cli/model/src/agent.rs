//! The user-space agent as a record sees it: each function's patch outcome in a process, and
//! what a hooked call costs (measured by `nesquic-ebpf`'s calibration).

use serde::{Deserialize, Serialize};

/// Timed calls in flight per thread in the agent (its shadow stack's depth): a call nested
/// deeper is neither counted nor timed ([`crate::AgentLost::shadow_full`]). The agent's ABI
/// defines it; `nesquic-ebpf` asserts at compile time that the two agree.
pub const SHADOW_DEPTH: usize = 256;

/// A function's patch outcome in one process, as the agent reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchStatus {
    /// Demangled name.
    pub name: String,
    /// Object file.
    pub object: String,
    /// Hooked and counting.
    pub patched: bool,
    /// What happened (`patched`, or why not).
    pub reason: String,
}

/// What a hooked call costs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AgentCost {
    /// Added per counted call, ns (mean over rounds).
    pub count_ns: f64,
    /// Its standard deviation over rounds, ns.
    pub count_sd_ns: f64,
    /// Added per timed call, ns.
    pub time_ns: f64,
    /// Its standard deviation over rounds, ns.
    pub time_sd_ns: f64,
    /// Of a timed call's cost, what falls between its two timestamps (the agent's measured
    /// mean minus the unhooked twin's time), ns: subtracted from timed durations.
    pub window_ns: f64,
    /// Its standard deviation over rounds, ns.
    pub window_sd_ns: f64,
    /// The unhooked function's own time per call, ns.
    pub bare_ns: f64,
    /// Rounds (per side).
    pub rounds: usize,
}
