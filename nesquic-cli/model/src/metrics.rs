//! What the probes measured, summed per role, per syscall and per probed function. Percentiles
//! come from the log2 histograms and are reported as the upper bound of the bucket holding them
//! (`p50_le_ns`: half the calls took at most this long).

use serde::{Deserialize, Serialize};

use crate::health::HealthCounts;
pub use crate::syscall::{Direction, Syscall};
pub use crate::timing::{quantile_upper_bound, Timing};
use crate::Role;

/// Everything one measurement window saw.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Metrics {
    /// How packet I/O was measured ("syscall tracepoints").
    pub io_mechanism: Option<String>,
    /// How functions were timed ("uprobe+uretprobe").
    pub function_mechanism: Option<String>,
    /// Whether this kernel has kprobes (not needed by the tracepoint path; recorded for context).
    pub kprobes_available: bool,
    /// Per role.
    pub roles: Vec<RoleMetrics>,
    /// What the kernel side could not measure (all zero when nothing was lost).
    pub lost: HealthCounts,
    /// The kernel's UDP path per function (fentry or kprobes, where the kernel has them).
    #[serde(default)]
    pub kernel_io: crate::kernel_io::KernelIo,
}

/// One role (server, client, process).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RoleMetrics {
    /// Which process.
    pub role: Role,
    /// Per syscall, only those called.
    pub io: Vec<SyscallMetrics>,
    /// Per probed function, only those called.
    pub functions: Vec<FunctionMetrics>,
    /// `--probe-backend both`: the agent's I/O rows, measured in the same run as `io` (the
    /// tracepoints'), for comparison. Empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io_crosscheck: Vec<SyscallMetrics>,
    /// What the user-space agents of this role could not record (summed over their processes);
    /// `None` where no agent measured the role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_lost: Option<AgentLost>,
    /// The role's socket carries a TCP byte stream (the LUT said so): its calls move bytes, and
    /// `datagrams` and `segmented_messages` are 0 ([`RoleMetrics::as_byte_stream`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub byte_stream: bool,
    /// The role's socket calls block (the LUT said so): the time inside one includes waiting,
    /// so it is no share of the process's CPU.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blocking_calls: bool,
}

impl RoleMetrics {
    /// Whether the role's socket calls moved bytes but no datagram: the LUT said its socket is
    /// TCP ([`RoleMetrics::byte_stream`]), or the probes, which count no datagram or message for a
    /// call on a stream socket, saw calls succeed and none move a datagram (`nesquic trace` of a
    /// TCP program).
    pub fn is_byte_stream(&self) -> bool {
        if self.byte_stream {
            return true;
        }
        let succeeded: u64 = self.io.iter().map(|s| s.timing.calls.saturating_sub(s.eagain + s.errors)).sum();
        succeeded > 0 && self.io.iter().all(|s| s.messages == 0)
    }

    /// Marks the role's calls as a TCP byte stream's, on the LUT's own word (its `io` event). The
    /// probes count no datagram on a stream socket already; records of runs before they looked
    /// at the socket's type counted each call as one, and this takes those counts back, so
    /// nothing downstream shows a datagram figure, per call or per CPU nanosecond, for calls that
    /// moved none.
    pub fn as_byte_stream(&mut self) {
        self.byte_stream = true;
        for s in self.io.iter_mut().chain(&mut self.io_crosscheck) {
            s.datagrams = 0;
            s.segmented_messages = 0;
        }
    }
}

/// Calls of timed functions an agent could not record, from its health counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentLost {
    /// Neither counted nor timed: the thread's shadow stack was full (nesting deeper than
    /// `nesquic_agent_abi::SHADOW_DEPTH` timed calls).
    pub shadow_full: u64,
    /// Never recorded: the frame was left without returning (longjmp, unwinding).
    pub shadow_dropped: u64,
}

impl AgentLost {
    /// Nothing lost.
    pub fn is_clean(&self) -> bool {
        *self == AgentLost::default()
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &AgentLost) {
        self.shadow_full += other.shadow_full;
        self.shadow_dropped += other.shadow_dropped;
    }
}

/// One syscall of one role.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SyscallMetrics {
    /// `sendmsg`, `recvmmsg`, ...
    pub syscall: Syscall,
    /// `send` or `recv`.
    pub direction: Direction,
    /// Calls and time.
    #[serde(flatten)]
    pub timing: Timing,
    /// Failed calls other than EAGAIN.
    pub errors: u64,
    /// Calls that returned EAGAIN.
    pub eagain: u64,
    /// Bytes moved (return values / msg_len).
    pub bytes: u64,
    /// Datagrams moved (GSO/GRO split).
    pub datagrams: u64,
    /// Messages (msghdrs) moved: one per call except for sendmmsg/recvmmsg.
    #[serde(default)]
    pub messages: u64,
    /// Messages that carried more than one datagram: evidence that GSO (send) or GRO
    /// (receive) was in use.
    #[serde(default)]
    pub segmented_messages: u64,
    /// What measured it: `tracepoint` or `user (libc interposition)`.
    #[serde(default)]
    pub mechanism: Mechanism,
}

impl SyscallMetrics {
    /// Calls that succeeded on a stream socket (TCP), which move bytes and no message: the
    /// succeeded calls beyond the messages, for the syscalls that move one message a call on a
    /// datagram socket; `None` for sendmmsg/recvmmsg, whose calls move several.
    pub fn stream_calls(&self) -> Option<u64> {
        match self.syscall {
            Syscall::Sendmmsg | Syscall::Recvmmsg => None,
            _ => Some(self.timing.calls.saturating_sub(self.eagain + self.errors).saturating_sub(self.messages)),
        }
    }

    /// Whether some of the row's calls were on stream sockets (in `nesquic trace` of a program
    /// using UDP and TCP, beside calls on datagram sockets): its datagrams per call and time per
    /// datagram would divide by calls, and time, that moved no datagram.
    pub fn has_stream_calls(&self) -> bool {
        self.stream_calls().is_some_and(|n| n > 0)
    }
}

/// One probed function of one role.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FunctionMetrics {
    /// Category (`crypto.seal`) or `uprobe:<glob>`.
    pub category: String,
    /// Demangled name.
    pub name: String,
    /// Object file.
    pub object: String,
    /// Calls and time.
    #[serde(flatten)]
    pub timing: Timing,
    /// Bytes from the catalog's byte-count argument (0 if none).
    pub bytes: u64,
    /// Timed (entry + return probe); false: only counted, time figures are zero.
    #[serde(default = "yes")]
    pub timed: bool,
    /// How the kernel executes the probed instruction (decides the probe's cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<crate::sites::SiteKind>,
    /// Mean duration with the calibrated probe overhead subtracted (timed functions, when a
    /// calibration ran), and its uncertainty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensated_mean_ns: Option<f64>,
    /// Uncertainty of `compensated_mean_ns` (one standard deviation of the calibration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensation_uncertainty_ns: Option<f64>,
    /// Duty-cycled probes: the fraction of the time they were attached (measured), and the raw
    /// calls and bytes scaled by its inverse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duty: Option<DutyScaled>,
    /// What measured it: `uprobe` or `user (inline hook)`.
    #[serde(default)]
    pub mechanism: Mechanism,
}

/// What measured a syscall or function row. The JSON strings are the ones records have always
/// held; a row from a record written before rows named their mechanism reads as `""`
/// ([`Mechanism::Unrecorded`]) and is written back the same way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mechanism {
    /// I/O by the kernel's syscall tracepoints.
    #[serde(rename = "tracepoint")]
    Tracepoint,
    /// Functions by kernel uprobes.
    #[serde(rename = "uprobe")]
    Uprobe,
    /// Functions by the user-space agent's inline hooks.
    #[serde(rename = "user (inline hook)")]
    InlineHook,
    /// I/O by the user-space agent's libc interposition.
    #[serde(rename = "user (libc interposition)")]
    Interposition,
    /// Not recorded (records older than the field).
    #[default]
    #[serde(rename = "")]
    Unrecorded,
}

impl Mechanism {
    /// The label, as in the JSON (`user (inline hook)`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Mechanism::Tracepoint => "tracepoint",
            Mechanism::Uprobe => "uprobe",
            Mechanism::InlineHook => "user (inline hook)",
            Mechanism::Interposition => "user (libc interposition)",
            Mechanism::Unrecorded => "",
        }
    }
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One message of a send/receive syscall, as the kernel reported it (`--qlog-datagrams`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramEvent {
    /// CLOCK_MONOTONIC at syscall exit, ns.
    pub ts_ns: u64,
    /// Bytes of the message.
    pub bytes: u64,
    /// Which process.
    pub role: Role,
    /// The syscall (its direction says sent or received).
    pub syscall: Syscall,
    /// Datagrams in the message.
    pub datagrams: u32,
    /// Datagram size (the last may be shorter).
    pub segment: u32,
}

/// Counts of a duty-cycled function, extrapolated to the whole run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DutyScaled {
    /// Attached time / observed time.
    pub fraction: f64,
    /// `calls / fraction`.
    pub calls: f64,
    /// `bytes / fraction`.
    pub bytes: f64,
}

impl Metrics {
    /// Extrapolates every function's counts from the time its probes were attached.
    pub fn apply_duty(&mut self, fraction: f64) {
        if fraction <= 0.0 {
            return;
        }
        for role in &mut self.roles {
            for f in &mut role.functions {
                f.duty = Some(DutyScaled {
                    fraction,
                    calls: f.timing.calls as f64 / fraction,
                    bytes: f.bytes as f64 / fraction,
                });
            }
        }
    }
}

fn yes() -> bool {
    true
}

impl Metrics {
    /// Sums several windows (repetitions) into one; percentiles are recomputed from the merged
    /// histograms. `None` for an empty list.
    pub fn merge(all: &[Metrics]) -> Option<Metrics> {
        let mut out = all.first()?.clone();
        for m in &all[1..] {
            out.lost.add(&m.lost);
            out.kernel_io.absorb(&m.kernel_io);
            for role in &m.roles {
                let Some(mine) = out.roles.iter_mut().find(|r| r.role == role.role) else {
                    out.roles.push(role.clone());
                    continue;
                };
                absorb_io(&mut mine.io, &role.io);
                absorb_io(&mut mine.io_crosscheck, &role.io_crosscheck);
                mine.byte_stream |= role.byte_stream;
                mine.blocking_calls |= role.blocking_calls;
                if let Some(lost) = &role.agent_lost {
                    mine.agent_lost.get_or_insert_with(AgentLost::default).add(lost);
                }
                for f in &role.functions {
                    let same =
                        |x: &&mut FunctionMetrics| x.category == f.category && x.name == f.name && x.object == f.object;
                    match mine.functions.iter_mut().find(same) {
                        Some(x) => {
                            x.timing.absorb(&f.timing);
                            x.bytes += f.bytes;
                            x.duty = match (x.duty, f.duty) {
                                (Some(a), Some(b)) => {
                                    let calls = a.calls + b.calls;
                                    let raw = x.timing.calls as f64;
                                    Some(DutyScaled {
                                        fraction: if calls > 0.0 { raw / calls } else { a.fraction },
                                        calls,
                                        bytes: a.bytes + b.bytes,
                                    })
                                }
                                _ => None,
                            };
                        }
                        None => mine.functions.push(f.clone()),
                    }
                }
            }
        }
        Some(out)
    }
}

/// Adds `from`'s syscall rows to `into`'s (same syscall: summed).
fn absorb_io(into: &mut Vec<SyscallMetrics>, from: &[SyscallMetrics]) {
    for s in from {
        match into.iter_mut().find(|x| x.syscall == s.syscall) {
            Some(x) => {
                x.timing.absorb(&s.timing);
                x.errors += s.errors;
                x.eagain += s.eagain;
                x.bytes += s.bytes;
                x.datagrams += s.datagrams;
                x.messages += s.messages;
                x.segmented_messages += s.segmented_messages;
            }
            None => into.push(s.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(direction: Direction, datagrams: u64) -> SyscallMetrics {
        SyscallMetrics {
            syscall: Syscall::Sendmsg,
            direction,
            timing: Timing { calls: 10, total_ns: 1000, p50_le_ns: 100, p99_le_ns: 200, hist: Vec::new() },
            errors: 0,
            eagain: 0,
            bytes: 160_000,
            datagrams,
            messages: 10,
            segmented_messages: 3,
            mechanism: Mechanism::Tracepoint,
        }
    }

    /// What the probes count on a stream socket (bytes, no datagram or message) makes a role a
    /// byte stream; a receive that only ever found nothing (EAGAIN) does not, nor a datagram.
    #[test]
    fn a_role_whose_calls_moved_bytes_and_no_datagram_is_a_byte_stream() {
        let role = |rows: Vec<SyscallMetrics>| RoleMetrics {
            role: Role::Process,
            io: rows,
            functions: Vec::new(),
            io_crosscheck: Vec::new(),
            agent_lost: None,
            byte_stream: false,
            blocking_calls: false,
        };
        let stream = SyscallMetrics { datagrams: 0, messages: 0, segmented_messages: 0, ..row(Direction::Send, 0) };
        let nothing_yet = SyscallMetrics { eagain: 10, bytes: 0, ..stream.clone() };
        assert!(role(vec![stream.clone()]).is_byte_stream());
        assert!(role(vec![stream.clone(), nothing_yet.clone()]).is_byte_stream());
        assert!(!role(vec![nothing_yet]).is_byte_stream());
        assert!(!role(vec![stream, row(Direction::Recv, 10)]).is_byte_stream());
        assert!(!role(vec![]).is_byte_stream());
    }

    /// A row whose succeeded calls outnumber its messages had calls on a stream socket; EAGAIN
    /// and failed calls move nothing on either kind, and an mmsg call moves several messages.
    #[test]
    fn a_row_with_calls_on_udp_and_tcp_sockets_is_told_apart() {
        let udp = row(Direction::Send, 10);
        assert_eq!((udp.stream_calls(), udp.has_stream_calls()), (Some(0), false));
        let waited =
            SyscallMetrics { eagain: 4, errors: 1, timing: Timing { calls: 15, ..udp.timing.clone() }, ..udp.clone() };
        assert_eq!((waited.stream_calls(), waited.has_stream_calls()), (Some(0), false));
        let mixed = SyscallMetrics { timing: Timing { calls: 16, ..udp.timing.clone() }, ..udp.clone() };
        assert_eq!((mixed.stream_calls(), mixed.has_stream_calls()), (Some(6), true));
        let tcp_only = SyscallMetrics { datagrams: 0, messages: 0, segmented_messages: 0, ..udp.clone() };
        assert_eq!((tcp_only.stream_calls(), tcp_only.has_stream_calls()), (Some(10), true));
        let batched = SyscallMetrics { syscall: Syscall::Sendmmsg, messages: 40, ..mixed };
        assert_eq!((batched.stream_calls(), batched.has_stream_calls()), (None, false));
    }

    #[test]
    fn a_byte_stream_keeps_its_calls_and_bytes_and_moves_no_datagram_through_a_merge() {
        let mut role = RoleMetrics {
            role: Role::Server,
            io: vec![row(Direction::Send, 10)],
            functions: Vec::new(),
            io_crosscheck: vec![row(Direction::Send, 10)],
            agent_lost: None,
            byte_stream: false,
            blocking_calls: false,
        };
        role.as_byte_stream();
        for s in role.io.iter().chain(&role.io_crosscheck) {
            assert_eq!((s.timing.calls, s.bytes, s.messages), (10, 160_000, 10));
            assert_eq!((s.datagrams, s.segmented_messages), (0, 0));
        }
        let window = |role: &RoleMetrics| Metrics {
            io_mechanism: None,
            function_mechanism: None,
            kprobes_available: false,
            roles: vec![role.clone()],
            lost: HealthCounts::default(),
            kernel_io: Default::default(),
        };
        let mut plain = role.clone();
        plain.byte_stream = false;
        // Whichever repetition said so first: the merged role is a byte stream.
        let merged = Metrics::merge(&[window(&plain), window(&role)]).expect("two windows");
        assert!(merged.roles[0].byte_stream);
        assert_eq!(merged.roles[0].io[0].timing.calls, 20);
    }
}
