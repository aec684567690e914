//! Turning repetition outcomes into the figures Nesquic prints and writes: per repetition and as
//! median/min/max over repetitions. Every figure comes from a measurement; nothing is estimated.

use serde::{Deserialize, Serialize};

use nesquic_protocol::Role;

pub use crate::stats::Spread;
use nesquic_model::agent::PatchStatus;

/// CPU accounting of one process, from the kernel (`wait4` rusage).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct ProcessFigures {
    /// User CPU seconds.
    pub cpu_user_s: f64,
    /// System CPU seconds.
    pub cpu_system_s: f64,
    /// User + system.
    pub cpu_total_s: f64,
    /// Process lifetime (spawn to exit), seconds.
    pub wall_s: f64,
    /// cpu_total / wall, in percent of one core (can exceed 100 with threads).
    pub cpu_utilisation_pct: f64,
    /// Peak RSS, KiB.
    pub max_rss_kib: u64,
}

/// Figures of one repetition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepetitionFigures {
    /// Payload bytes verified by the client.
    pub bytes: u64,
    /// Whether the client verified length and content.
    pub payload_verified: bool,
    /// Payload bits per second / 10^6, over the transfer time.
    pub goodput_mbps: f64,
    /// Request sent to last byte verified, seconds.
    pub transfer_s: f64,
    /// Handshake, milliseconds.
    pub handshake_ms: f64,
    /// The server process.
    pub server: ProcessFigures,
    /// The client process.
    pub client: ProcessFigures,
    /// The LUT processes' pids (to match external tools' records, e.g. `perf`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pids: Vec<(Role, i32)>,
    /// Each side's effective UDP settings, as the LUT reported them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io_settings: Vec<(Role, nesquic_protocol::report::IoSettings)>,
    /// Datagrams the kernel dropped at each side's UDP sockets (`SO_MEMINFO` of the sockets,
    /// duplicated with pidfd_getfd and read after the exit; else the `drops` column of
    /// /proc/net/udp sampled every 20 ms, a lower bound). A side not measured (remote, no socket
    /// found) is absent, not 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rcvbuf_drops: Vec<(Role, u64)>,
    /// What reading `rcvbuf_drops` cost nesquic's run loop (its thread's CPU time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf_drops_cost: Option<ReadCost>,
    /// Each local side's threads over the transfer: time on a CPU and waiting for one
    /// (`/proc/PID/task/TID/schedstat`, read from the client's start to the end of the transfer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<nesquic_model::threads::SideThreads>,
    /// What reading `threads` cost nesquic's run loop (its thread's CPU time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_cost: Option<ReadCost>,
    /// The I/O layer's own counters per side (LUTs on Nesquic's I/O layer), as the LUT reported
    /// them at exit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io_layer_counters: Vec<(Role, nesquic_io::Counters)>,
    /// The LUT's own qlog files (with `--lut-qlog`): role, path relative to the run directory
    /// (older records: as the LUT reported it), wall clock of their time zero.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lut_qlogs: Vec<(Role, std::path::PathBuf, u64)>,
    /// Multi-connection/multi-stream testcases: per-connection goodput, fairness, handshake rate
    /// and latency percentiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<crate::workload::WorkloadFigures>,
    /// The sampling profile of this repetition (with `--probe profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<nesquic_model::profile::Profile>,
    /// What the probes measured in this repetition (with `--probe`); each row names its
    /// mechanism (user-space agent, uprobe, tracepoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<nesquic_model::Metrics>,
    /// The user-space agent in each LUT process: initialised or not, each function patched or
    /// why not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentReport>,
    /// Remote roles with timed probes: the calibration their own host measured and compensated
    /// their timed rows with (the run's `calibration` is this host's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remote_calibration: Vec<(Role, crate::calibration::Calibration)>,
}

/// A repetition that failed: which (1-based) and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedRepetition {
    /// 1-based, as in "rep 3/5".
    pub repetition: u32,
    /// The error, with its causes.
    pub error: String,
}

impl std::fmt::Display for FailedRepetition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // On one line: a LUT's last output follows on the error's next lines.
        let error: Vec<&str> = self.error.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        write!(f, "repetition {} failed: {}", self.repetition, error.join(" "))
    }
}

/// Spreads over all measured repetitions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// Repetitions summarised.
    pub repetitions: usize,
    /// Repetitions that failed: not in these figures (the record says which and why).
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub failed_repetitions: usize,
    /// Goodput, Mbit/s.
    pub goodput_mbps: Spread,
    /// Transfer time, s.
    pub transfer_s: Spread,
    /// Handshake time, ms.
    pub handshake_ms: Spread,
    /// Server CPU seconds.
    pub server_cpu_s: Spread,
    /// Server CPU utilisation, %.
    pub server_cpu_pct: Spread,
    /// Client CPU seconds.
    pub client_cpu_s: Spread,
    /// Client CPU utilisation, %.
    pub client_cpu_pct: Spread,
    /// Multi-connection/multi-stream testcases: their figures over repetitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadSummary>,
}

/// Spreads over repetitions of the multi-connection/multi-stream figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkloadSummary {
    /// Connections per second.
    pub handshakes_per_s: Spread,
    /// Median handshake, ms.
    pub handshake_p50_ms: Spread,
    /// 99th-percentile handshake, ms.
    pub handshake_p99_ms: Spread,
    /// Slowest connection's goodput, Mbit/s.
    pub connection_goodput_min_mbps: Spread,
    /// Jain's index over connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_fairness: Option<Spread>,
    /// Jain's index over streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_fairness: Option<Spread>,
}

impl WorkloadSummary {
    /// The summary table's rows (label, spread, digits) for a run of `connections` connections:
    /// connection rate, handshake percentiles and the slowest connection only with several.
    pub fn rows(&self, connections: u32) -> Vec<(&'static str, Spread, usize)> {
        let mut rows = Vec::new();
        if connections > 1 {
            rows.push(("connections/s", self.handshakes_per_s, 1));
            rows.push(("handshake p50 (ms)", self.handshake_p50_ms, 2));
            rows.push(("handshake p99 (ms)", self.handshake_p99_ms, 2));
            rows.push(("slowest conn (Mbit/s)", self.connection_goodput_min_mbps, 1));
        }
        rows.extend(self.connection_fairness.map(|f| ("conn fairness (Jain)", f, 3)));
        rows.extend(self.stream_fairness.map(|f| ("stream fairness (Jain)", f, 3)));
        rows
    }

    /// Over the repetitions that ran a multi-connection or multi-stream testcase.
    pub fn of(reps: &[RepetitionFigures]) -> Option<Self> {
        let w: Vec<&crate::workload::WorkloadFigures> = reps.iter().filter_map(|r| r.workload.as_ref()).collect();
        let spread =
            |f: &dyn Fn(&crate::workload::WorkloadFigures) -> Option<f64>| Spread::of(w.iter().filter_map(|x| f(x)));
        Some(Self {
            handshakes_per_s: spread(&|x| Some(x.handshakes_per_s))?,
            handshake_p50_ms: spread(&|x| Some(x.handshake_ms.p50))?,
            handshake_p99_ms: spread(&|x| Some(x.handshake_ms.p99))?,
            connection_goodput_min_mbps: spread(&|x| Some(x.connection_goodput_mbps.min))?,
            connection_fairness: spread(&|x| x.connection_fairness),
            stream_fairness: spread(&|x| x.stream_fairness),
        })
    }
}

/// One configuration against a reference one (the TCP+TLS baseline in `nesquic matrix`): median
/// goodput and median CPU (server + client) per payload byte, as ratios.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VersusReference {
    /// The reference row's LUT.
    pub reference: String,
    /// This goodput / the reference's (above 1: faster).
    pub goodput_ratio: f64,
    /// This CPU per byte / the reference's (above 1: costs more CPU per byte).
    pub cpu_per_byte_ratio: f64,
}

impl VersusReference {
    /// `this` against `reference`, both summaries of transfers of the same payload.
    pub fn of(reference_name: &str, reference: &Summary, this: &Summary) -> Self {
        let cpu = |s: &Summary| s.server_cpu_s.median + s.client_cpu_s.median;
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
        Self {
            reference: reference_name.to_string(),
            goodput_ratio: ratio(this.goodput_mbps.median, reference.goodput_mbps.median),
            cpu_per_byte_ratio: ratio(cpu(this), cpu(reference)),
        }
    }
}

impl Summary {
    /// The summary table's rows (label, spread, digits), the testcase's figures for a run of
    /// `connections` connections included: what the terminal, Markdown and HTML tables show.
    pub fn rows(&self, connections: u32) -> Vec<(&'static str, Spread, usize)> {
        let mut rows = vec![
            ("goodput (Mbit/s)", self.goodput_mbps, 1),
            ("transfer (s)", self.transfer_s, 3),
            ("handshake (ms)", self.handshake_ms, 2),
            ("server CPU (s)", self.server_cpu_s, 3),
            ("server CPU (%)", self.server_cpu_pct, 1),
            ("client CPU (s)", self.client_cpu_s, 3),
            ("client CPU (%)", self.client_cpu_pct, 1),
        ];
        rows.extend(self.workload.iter().flat_map(|w| w.rows(connections)));
        rows
    }

    /// Summarises; `None` when there are no repetitions.
    pub fn of(reps: &[RepetitionFigures]) -> Option<Self> {
        let spread = |f: &dyn Fn(&RepetitionFigures) -> f64| Spread::of(reps.iter().map(f));
        Some(Self {
            repetitions: reps.len(),
            failed_repetitions: 0,
            goodput_mbps: spread(&|r| r.goodput_mbps)?,
            transfer_s: spread(&|r| r.transfer_s)?,
            handshake_ms: spread(&|r| r.handshake_ms)?,
            server_cpu_s: spread(&|r| r.server.cpu_total_s)?,
            server_cpu_pct: spread(&|r| r.server.cpu_utilisation_pct)?,
            client_cpu_s: spread(&|r| r.client.cpu_total_s)?,
            client_cpu_pct: spread(&|r| r.client.cpu_utilisation_pct)?,
            workload: WorkloadSummary::of(reps),
        })
    }
}

/// The agent in one LUT process of one repetition, as it reported itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentReport {
    /// Role.
    pub role: Role,
    /// The agent initialised in the process.
    pub ready: bool,
    /// Per planned function: patched, or why not.
    pub functions: Vec<PatchStatus>,
    /// CPU time the agent's start-up took in the process, ns: what it costs the LUT before
    /// `main` (absent from records written before it was measured, and where it did not start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_cpu_ns: Option<u64>,
    /// The processes it ran in: the LUT's, or a followed command's programs (`nesquic trace`);
    /// empty in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<nesquic_model::agent::ProcessSeen>,
    /// How many processes it ran in, when more than the list holds (0: the list is complete).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub processes_unlisted: u32,
    /// Of those unlisted, the programs that cannot load the agent (not measured).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub processes_unlisted_without_agent: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_odd_and_even_counts() {
        assert_eq!(Spread::of([3.0, 1.0, 2.0]), Some(Spread { median: 2.0, min: 1.0, max: 3.0 }));
        assert_eq!(Spread::of([4.0, 1.0, 2.0, 3.0]), Some(Spread { median: 2.5, min: 1.0, max: 4.0 }));
        assert_eq!(Spread::of([]), None);
    }
}

/// What a periodic read of kernel counters cost the reader: how many reads, and their CPU time
/// (the reading thread's own clock).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadCost {
    /// Reads made.
    pub reads: u64,
    /// CPU time they took, ns.
    pub cpu_ns: u64,
}
