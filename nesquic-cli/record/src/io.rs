//! Packet I/O totals of one side, per direction, from whichever measurement a repetition has: the
//! probes (any LUT) or the I/O layer's own counters (LUTs on Nesquic's I/O layer). Every ratio
//! Nesquic prints (syscalls per MB, datagrams per syscall, crypto calls per datagram) starts here.

use nesquic_model::metrics::{Direction, Mechanism, Syscall, SyscallMetrics};
use nesquic_model::RoleMetrics;
use nesquic_protocol::Role;
use serde::{Deserialize, Serialize};

use crate::figures::RepetitionFigures;

/// One direction's totals.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DirectionTotals {
    /// Syscalls, failed ones included.
    pub calls: u64,
    /// Of them, calls that returned EAGAIN: an empty receive (the LUT polled and found
    /// nothing), a send the socket buffer refused.
    pub eagain: u64,
    /// Of them, calls that failed otherwise.
    pub errors: u64,
    /// Datagrams they carried.
    pub datagrams: u64,
    /// Payload bytes they carried.
    pub bytes: u64,
}

impl DirectionTotals {
    /// Calls that moved data: what a per-call ratio (bytes per receive) divides by.
    pub fn moved_calls(&self) -> u64 {
        self.calls.saturating_sub(self.eagain + self.errors)
    }
}

/// Both directions of one side.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IoTotals {
    /// Sending.
    pub send: DirectionTotals,
    /// Receiving.
    pub recv: DirectionTotals,
}

/// Which measurement the totals came from (its JSON form is its [`IoSource::label`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IoSource {
    /// The probes (tracepoints or the agent's interposition).
    #[serde(rename = "probes")]
    Probes,
    /// The I/O layer's own counters, as the LUT reported them.
    #[serde(rename = "io-layer")]
    IoLayer,
}

impl IoSource {
    /// As printed.
    pub fn label(self) -> &'static str {
        match self {
            Self::Probes => "probes",
            Self::IoLayer => "io-layer",
        }
    }
}

impl IoTotals {
    /// Summed over the syscalls the probes saw for one role.
    pub fn of(role: &RoleMetrics) -> Self {
        let sum = |dir: Direction| {
            role.io.iter().filter(|s| s.direction == dir).fold(DirectionTotals::default(), |t, s| DirectionTotals {
                calls: t.calls + s.timing.calls,
                eagain: t.eagain + s.eagain,
                errors: t.errors + s.errors,
                datagrams: t.datagrams + s.datagrams,
                bytes: t.bytes + s.bytes,
            })
        };
        Self { send: sum(Direction::Send), recv: sum(Direction::Recv) }
    }

    /// From the I/O layer's counters.
    pub fn of_counters(c: &nesquic_io::Counters) -> Self {
        let dir = |d: &nesquic_io::DirectionCounters| DirectionTotals {
            calls: d.syscalls,
            eagain: d.would_block,
            errors: d.errors,
            datagrams: d.datagrams,
            bytes: d.bytes,
        };
        Self { send: dir(&c.send), recv: dir(&c.recv) }
    }

    /// Syscalls both ways.
    pub fn calls(&self) -> u64 {
        self.send.calls + self.recv.calls
    }

    /// Server and client totals of one repetition: from the probes when they saw packet I/O,
    /// else from the I/O layer's counters; `None` when it has neither.
    pub fn of_repetition(rep: &RepetitionFigures) -> Option<SidesIo> {
        if let Some(m) = &rep.probes {
            let side = |role: Role| m.roles.iter().find(|r| r.role == role).map(Self::of);
            if let (Some(s), Some(c)) = (side(Role::Server), side(Role::Client)) {
                if s.send.calls + c.recv.calls > 0 {
                    return Some((s, c, IoSource::Probes));
                }
            }
        }
        let layer =
            |role: Role| rep.io_layer_counters.iter().find(|(r, _)| *r == role).map(|(_, c)| Self::of_counters(c));
        Some((layer(Role::Server)?, layer(Role::Client)?, IoSource::IoLayer))
    }
}

/// Server totals, client totals, and where they came from.
pub type SidesIo = (IoTotals, IoTotals, IoSource);

/// Per-side packet I/O and crypto figures of one configuration over its repetitions (medians):
/// what a row of `nesquic matrix` shows beside goodput and CPU.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IoFigures {
    /// Send+recv syscalls per MB of payload, server side.
    pub server_syscalls_per_mb: Option<f64>,
    /// The same, client side.
    pub client_syscalls_per_mb: Option<f64>,
    /// Payload bytes per send syscall that moved data on the server: GSO and mmsg batching at
    /// work.
    pub server_bytes_per_send: Option<f64>,
    /// Datagrams per send syscall that moved data on the server.
    pub server_datagrams_per_send: Option<f64>,
    /// Datagrams per receive syscall that moved data on the client (empty, EAGAIN, receives
    /// say how often it polled, not how much a call carried).
    pub client_datagrams_per_recv: Option<f64>,
    /// Mean ns per server `crypto.seal` call (timed probes; calibrated overhead subtracted).
    pub server_seal_ns: Option<f64>,
    /// Mean ns per client `crypto.open` call, likewise.
    pub client_open_ns: Option<f64>,
    /// Server `crypto.seal` calls per datagram it sent (counted or timed crypto probes).
    pub server_seals_per_datagram: Option<f64>,
    /// Client `crypto.open` calls per datagram it received.
    pub client_opens_per_datagram: Option<f64>,
    /// Where the syscall figures came from: "probes" or "io-layer".
    pub syscall_source: Option<IoSource>,
}

impl IoFigures {
    /// Over `reps`, each carrying `payload_bytes`.
    pub fn of(reps: &[RepetitionFigures], payload_bytes: u64) -> Self {
        let mb = payload_bytes as f64 / 1e6;
        let per_rep: Vec<SidesIo> = reps.iter().filter_map(IoTotals::of_repetition).collect();
        let median = |f: &dyn Fn(&SidesIo) -> Option<f64>| -> Option<f64> {
            crate::stats::median(&per_rep.iter().filter_map(f).collect::<Vec<_>>())
        };
        let timed = |role: Role, category: &str| {
            crate::stats::median(&reps.iter().filter_map(|r| timed_ns(r, role, category)).collect::<Vec<_>>())
        };
        Self {
            server_syscalls_per_mb: median(&|(s, _, _)| Some(s.calls() as f64 / mb)),
            client_syscalls_per_mb: median(&|(_, c, _)| Some(c.calls() as f64 / mb)),
            server_bytes_per_send: median(&|(s, _, _)| ratio(s.send.bytes, s.send.moved_calls())),
            // A byte stream's calls moved bytes but no datagram: no figure rather than 0.
            server_datagrams_per_send: median(&|(s, _, _)| {
                ratio(s.send.datagrams, s.send.moved_calls()).filter(|r| *r > 0.0)
            }),
            client_datagrams_per_recv: median(&|(_, c, _)| {
                ratio(c.recv.datagrams, c.recv.moved_calls()).filter(|r| *r > 0.0)
            }),
            server_seal_ns: timed(Role::Server, "crypto.seal"),
            client_open_ns: timed(Role::Client, "crypto.open"),
            server_seals_per_datagram: per_packet(reps, Role::Server, "crypto.seal"),
            client_opens_per_datagram: per_packet(reps, Role::Client, "crypto.open"),
            syscall_source: per_rep.first().map(|p| p.2),
        }
    }
}

/// Mean duration of a timed probe category in one repetition: calibrated (probe overhead
/// subtracted) where a calibration ran, else raw.
fn timed_ns(rep: &RepetitionFigures, role: Role, category: &str) -> Option<f64> {
    let m = rep.probes.as_ref()?.roles.iter().find(|r| r.role == role)?;
    let (calls, ns) = m.functions.iter().filter(|f| f.category == category && f.timed).fold((0u64, 0.0f64), |a, f| {
        let mean = f.compensated_mean_ns.unwrap_or_else(|| f.timing.mean_ns());
        (a.0 + f.timing.calls, a.1 + mean * f.timing.calls as f64)
    });
    (calls > 0).then(|| ns / calls as f64)
}

/// Median over `reps` of `role`'s `category` calls per datagram it sent (server) or received
/// (client).
fn per_packet(reps: &[RepetitionFigures], role: Role, category: &str) -> Option<f64> {
    let per_rep: Vec<f64> = reps
        .iter()
        .filter_map(|r| {
            let (server, client, _) = IoTotals::of_repetition(r)?;
            let datagrams = if role == Role::Server { server.send.datagrams } else { client.recv.datagrams };
            ratio(crypto_calls(r, role, category)?, datagrams)
        })
        .collect();
    crate::stats::median(&per_rep)
}

/// Calls of `category`'s probed functions on `role`, counted or timed; `None` without them.
fn crypto_calls(rep: &RepetitionFigures, role: Role, category: &str) -> Option<u64> {
    let m = rep.probes.as_ref()?.roles.iter().find(|r| r.role == role)?;
    let calls: Vec<u64> = m.functions.iter().filter(|f| f.category == category).map(|f| f.timing.calls).collect();
    (!calls.is_empty()).then(|| calls.iter().sum())
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// Where the probes' per-direction totals for `role` differ from the I/O layer's own counters
/// (empty: they agree exactly).
pub fn disagreements(role: Role, layer: &nesquic_io::Counters, probes: &nesquic_model::Metrics) -> Vec<String> {
    let Some(m) = probes.roles.iter().find(|r| r.role == role) else {
        return vec!["no probe figures for this role".into()];
    };
    let seen = IoTotals::of(m);
    let mut out = Vec::new();
    for (direction, own, probed) in [("send", &layer.send, seen.send), ("recv", &layer.recv, seen.recv)] {
        for (what, layer_value, probe_value) in [
            ("syscalls", own.syscalls, probed.calls),
            ("datagrams", own.datagrams, probed.datagrams),
            ("bytes", own.bytes, probed.bytes),
        ] {
            if layer_value != probe_value {
                out.push(format!("{direction} {what}: I/O layer {layer_value}, probes {probe_value}"));
            }
        }
    }
    out
}

/// Where the agent's and the tracepoints' I/O figures differ (empty: they agree exactly).
pub fn crosscheck_differences(role: &RoleMetrics) -> Vec<String> {
    if role.io_crosscheck.is_empty() && role.io.is_empty() {
        return Vec::new();
    }
    let key = |s: &SyscallMetrics| (s.syscall, s.direction);
    let mut names: Vec<(Syscall, Direction)> = role.io.iter().chain(&role.io_crosscheck).map(key).collect();
    // By name, as the listing has always been ordered.
    names.sort_by_key(|(s, d)| (s.as_str(), d.as_str()));
    names.dedup();
    let mut out = Vec::new();
    for (syscall, direction) in names {
        let find =
            |rows: &[SyscallMetrics]| rows.iter().find(|s| s.syscall == syscall && s.direction == direction).cloned();
        let (k, u) = (find(&role.io), find(&role.io_crosscheck));
        let figures = |s: &Option<SyscallMetrics>| {
            s.as_ref().map_or((0, 0, 0, 0), |s| (s.timing.calls, s.bytes, s.datagrams, s.messages))
        };
        let (kf, uf) = (figures(&k), figures(&u));
        if kf != uf {
            out.push(format!(
                "{syscall}: {} calls/bytes/datagrams/messages {}/{}/{}/{}, agent {}/{}/{}/{}",
                Mechanism::Tracepoint,
                kf.0,
                kf.1,
                kf.2,
                kf.3,
                uf.0,
                uf.1,
                uf.2,
                uf.3
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_receives_are_counted_apart() {
        // 10 recvmmsg calls: 4 found nothing (EAGAIN), 1 failed, 5 carried 15 datagrams.
        let role: RoleMetrics = serde_json::from_value(serde_json::json!({
            "role": "client", "functions": [],
            "io": [{ "syscall": "recvmmsg", "direction": "recv", "calls": 10, "total_ns": 0, "p50_le_ns": 0,
                     "p99_le_ns": 0, "hist": [], "errors": 1, "eagain": 4, "bytes": 15_000, "datagrams": 15 }]
        }))
        .expect("role metrics");
        let io = IoTotals::of(&role);
        assert_eq!((io.recv.calls, io.recv.eagain, io.recv.errors, io.recv.moved_calls()), (10, 4, 1, 5));
        let layer = nesquic_io::Counters {
            send: nesquic_io::DirectionCounters {
                syscalls: 3,
                datagrams: 30,
                bytes: 43_560,
                would_block: 1,
                errors: 0,
            },
            recv: nesquic_io::DirectionCounters::default(),
        };
        let io = IoTotals::of_counters(&layer);
        assert_eq!((io.send.calls, io.send.eagain, io.send.moved_calls()), (3, 1, 2));
        // The matrix's datagrams per send: over the two sends that moved data.
        let rep = |c: nesquic_io::Counters| -> RepetitionFigures {
            let process = serde_json::json!({ "cpu_user_s": 0.1, "cpu_system_s": 0.0, "cpu_total_s": 0.1, "wall_s": 1.0,
                                              "cpu_utilisation_pct": 10.0, "max_rss_kib": 1 });
            serde_json::from_value(serde_json::json!({
                "bytes": 1, "payload_verified": true, "goodput_mbps": 1.0, "transfer_s": 1.0, "handshake_ms": 1.0,
                "server": process, "client": process,
                "io_layer_counters": [["server", c], ["client", nesquic_io::Counters::default()]]
            }))
            .expect("repetition")
        };
        assert_eq!(IoFigures::of(&[rep(layer)], 1_000_000).server_datagrams_per_send, Some(15.0));
    }
}
