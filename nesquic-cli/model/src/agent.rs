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

/// A process the agent ran in (`nesquic trace` follows a command into the programs it execs
/// and starts; a LUT process is one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessSeen {
    /// Its pid (an exec keeps it: a script that execs its program is two entries, one pid).
    pub pid: u32,
    /// Its name as the kernel keeps it (`comm`, up to 15 bytes of the executable's file name).
    pub name: String,
    /// Set for a program a followed process exec'd or spawned that cannot load the agent: why
    /// ("statically linked", ...). Nothing it did is in the counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_agent: Option<String>,
}

/// The processes an agent ran in or saw started without it: the first few listed, the rest
/// counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessesSeen {
    /// The first ones, in the order they started.
    pub listed: Vec<ProcessSeen>,
    /// How many more there were, not listed.
    pub unlisted: u32,
    /// Of those unlisted, how many cannot load the agent (nothing they did is in the counts).
    pub unlisted_without_agent: u32,
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
