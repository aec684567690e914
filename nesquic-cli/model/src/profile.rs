//! The sampling profile as measured: per role, the shares of CPU-clock samples by component and
//! by function, each with its 95% Wilson interval (a share from n samples is an estimate, and
//! says how good), what the sampler itself cost, and the CPU cost per datagram by component
//! ([`PacketCost`], computed in [`crate::packet_cost`]). Sampling, symbolising and classifying are
//! `nesquic-ebpf`'s.

use serde::{Deserialize, Serialize};

use crate::Role;

/// What the sampling program cost, timed by the program itself: time spent in it on the LUT's
/// samples, not the timer interrupt around it. A sample that inserts a new stack pair into the
/// maps (cold memory, new stack-map buckets) costs many times a steady one, so the two are
/// counted apart. (Records written before this split hold only `runs` and `run_ns`, from the
/// kernel's BPF statistics; `samples + inserts` is 0 there.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplerCost {
    /// Times the program ran (every CPU-clock tick on every CPU, the LUT's or not).
    pub runs: u64,
    /// Total time inside the program, ns (`sample_ns + insert_ns`).
    pub run_ns: u64,
    /// The LUT's samples whose stack pair was already counted (the steady state).
    #[serde(default)]
    pub samples: u64,
    /// Time inside the program on those, ns.
    #[serde(default)]
    pub sample_ns: u64,
    /// The LUT's samples that inserted their stack pair (its first sample).
    #[serde(default)]
    pub inserts: u64,
    /// Time inside the program on those, ns.
    #[serde(default)]
    pub insert_ns: u64,
    /// Of `samples + inserts`, those whose kernel stack the program walked. On the scheduler tick
    /// a sample that interrupted user code skips the walk: its kernel stack is only the tick's own
    /// path. (None in records written before this was counted.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_walks: Option<u64>,
}

impl SamplerCost {
    /// Mean ns per steady sample, if any.
    pub fn steady_ns(&self) -> Option<f64> {
        (self.samples > 0).then(|| self.sample_ns as f64 / self.samples as f64)
    }

    /// Mean ns per first insert, if any.
    pub fn insert_ns_each(&self) -> Option<f64> {
        (self.inserts > 0).then(|| self.insert_ns as f64 / self.inserts as f64)
    }
}

/// A share of samples with its 95% Wilson interval.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Share {
    /// Component or function.
    pub name: String,
    /// Samples attributed.
    pub samples: u64,
    /// samples / total.
    pub share: f64,
    /// 95% interval, low end.
    pub ci95_low: f64,
    /// 95% interval, high end.
    pub ci95_high: f64,
}

impl Share {
    /// `samples` of `total`, with its 95% Wilson interval.
    pub fn of(name: String, samples: u64, total: u64) -> Self {
        let (share, ci95_low, ci95_high) = nesquic_stats::wilson(samples, total, nesquic_stats::Z95);
        Self { name, samples, share, ci95_low, ci95_high }
    }
}

/// One role's profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RoleProfile {
    /// Which process.
    pub role: Role,
    /// Samples in total.
    pub samples: u64,
    /// Per top-level component (`packet_io`: the sum of `packet_io.*`), largest first; they sum
    /// to `samples`.
    pub components: Vec<Share>,
    /// Per component as the rules name it (`packet_io.kernel`, `packet_io.copy`), largest first;
    /// they sum to `samples` as well.
    #[serde(default)]
    pub split: Vec<Share>,
    /// Innermost function of each sample (kernel frame, else user frame), largest first (top 15).
    pub top_functions: Vec<Share>,
    /// Samples whose innermost frame has no name, per reason (`[unknown: no mapping]`, ...).
    #[serde(default)]
    pub unknown_leaves: Vec<Share>,
    /// The 20 hottest innermost frames of the samples no rule named (`other`, `kernel_other`,
    /// `unknown`): what a new rule should cover.
    #[serde(default)]
    pub unclassified_leaves: Vec<Share>,
    /// Samples whose leaf had no frame and whose caller was taken from the stack pointer
    /// (`profile::frameless`): the walk alone would have skipped that caller.
    #[serde(default)]
    pub frameless_callers: u64,
    /// Samples that interrupted a `rep movsb` in user code (glibc's copy of large buffers): what
    /// the `rep_movsb_copy` finding weighs. The function's name cannot tell, its vector loops
    /// share it.
    #[serde(default)]
    pub rep_movsb_leaves: u64,
    /// Samples that lost their user or kernel stack to a stack-map hash collision (classified
    /// by what is left of them).
    #[serde(default)]
    pub lost_stacks: u64,
    /// CPU cost per datagram and per payload byte by component, when a datagram count exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<PacketCost>,
    /// Every sampled stack, folded (`outer;...;leaf` with user frames first, then kernel
    /// frames) with its count, sorted by stack: what a flame graph draws. Counts sum to
    /// `samples`. Not in the record (large): the engine writes it beside it.
    #[serde(skip)]
    pub folded: Vec<(String, u64)>,
}

impl RoleProfile {
    /// Samples whose innermost frame has no name.
    pub fn unknown_leaf_samples(&self) -> u64 {
        self.unknown_leaves.iter().map(|s| s.samples).sum()
    }
}

/// The profile of one window.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Profile {
    /// Sampling frequency per CPU (per busy CPU on the tick).
    pub frequency_hz: u64,
    /// What the samples were taken on (records before it existed: the CPU clock).
    #[serde(default)]
    pub clock: SampleClock,
    /// Per role.
    pub roles: Vec<RoleProfile>,
    /// What the sampling program itself cost, from the kernel's BPF statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler: Option<SamplerCost>,
    /// Nesquic's reads of the processes' memory maps, to symbolise the samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maps_reads: Option<MapsReads>,
}

/// Nesquic's reads of /proc/PID/maps during a profile: its own CPU, not the LUT's, but each read
/// walks the process's maps under its memory-map lock (polling every 100 ms measured 1.009x, 1.000-1.019,
/// msquic CPU per GB over 200 paired rounds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapsReads {
    /// Reads made.
    pub reads: u64,
    /// Their time in total, ns.
    pub read_ns: u64,
    /// Times a process's executable memory changed size (code mapped or unmapped) after its
    /// first read, each causing a read.
    pub code_changes: u64,
}

/// What a sampling profile samples on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleClock {
    /// A CPU-clock perf event per CPU at a rate of its own (`profile`, `profile:HZ`), as
    /// `perf record -F`.
    #[default]
    CpuClock,
    /// The scheduler tick (`profile:tick`): HZ a second per busy CPU, on an interrupt the CPU
    /// takes anyway, at a fixed phase (it can alias with timer-driven work).
    SchedulerTick,
    /// A CPU-clock perf event per CPU whose period and phase are drawn anew at random every
    /// 10-30 ms (`profile:~HZ`; `frequency_hz` is the mean).
    RandomCpuClock,
    /// Without root: a CPU-clock perf event per CPU on the LUT's own processes, user mode only
    /// (`exclude_kernel`, what `perf_event_paranoid` 2 allows). Time in the kernel is not
    /// sampled: the shares are of the user-mode CPU.
    UserModeCpuClock,
}

impl SampleClock {
    /// How the profile header names it.
    pub fn label(self) -> &'static str {
        match self {
            SampleClock::CpuClock => "per CPU, CPU-clock, fixed period",
            SampleClock::SchedulerTick => {
                "per busy CPU, the scheduler tick: no interrupt of its own, but a fixed phase that timer-driven work can alias with"
            }
            SampleClock::RandomCpuClock => "mean per CPU, CPU-clock at random intervals",
            SampleClock::UserModeCpuClock => {
                "per CPU, CPU-clock, user mode only (no root: time in the kernel is not sampled, the shares are of the user-mode CPU)"
            }
        }
    }

    /// What the sampler's own clock leaves out, for its cost line.
    pub fn interrupt(self) -> &'static str {
        match self {
            SampleClock::CpuClock | SampleClock::RandomCpuClock => {
                "the timer interrupt around the program not included"
            }
            SampleClock::SchedulerTick => "no interrupt of its own: it runs in the tick's",
            SampleClock::UserModeCpuClock => "nesquic's draining of the perf buffers; the interrupt is the LUT's",
        }
    }
}

/// One component's cost.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ComponentCost {
    /// Component (`crypto`, `packet_io.kernel`, ...).
    pub name: String,
    /// CPU ns per datagram: cpu time x share / datagrams.
    pub ns_per_datagram: f64,
    /// The same from the share's 95% interval, low end.
    pub ns_per_datagram_ci95_low: f64,
    /// High end.
    pub ns_per_datagram_ci95_high: f64,
    /// CPU ns per payload byte.
    pub ns_per_byte: f64,
}

/// A role's cost per datagram and per byte, by component.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PacketCost {
    /// `sent` (server) or `received` (client).
    pub direction: String,
    /// Datagrams in that direction.
    pub datagrams: u64,
    /// Where `datagrams` comes from (`io probes (syscall tracepoints)`, `LUT I/O counters`).
    pub datagram_source: String,
    /// Payload bytes of the window.
    pub payload_bytes: u64,
    /// The role's CPU time (user + system) the shares are applied to.
    pub cpu_s: f64,
    /// CPU ns per datagram over all components.
    pub ns_per_datagram: f64,
    /// Per top-level component, largest first.
    pub components: Vec<ComponentCost>,
    /// Per component as the rules name it (`packet_io.kernel`), largest first.
    pub split: Vec<ComponentCost>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_interval_brackets_the_share() {
        let s = Share::of("x".into(), 70, 100);
        assert!((s.share - 0.7).abs() < 1e-12);
        assert!(s.ci95_low > 0.59 && s.ci95_low < 0.7 && s.ci95_high > 0.7 && s.ci95_high < 0.79, "{s:?}");
    }
}
