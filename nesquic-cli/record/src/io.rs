//! Packet I/O totals of one side, per direction, from whichever measurement a repetition has: the
//! probes (any LUT) or the I/O layer's own counters (LUTs on Nesquic's I/O layer). Every ratio
//! Nesquic prints (syscalls per MB, datagrams per syscall, crypto calls per datagram) starts here.

use nesquic_ebpf::RoleMetrics;
use nesquic_protocol::Role;

use crate::figures::RepetitionFigures;

/// One direction's totals.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DirectionTotals {
    /// Syscalls.
    pub calls: u64,
    /// Datagrams they carried.
    pub datagrams: u64,
    /// Payload bytes they carried.
    pub bytes: u64,
}

/// Both directions of one side.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IoTotals {
    /// Sending.
    pub send: DirectionTotals,
    /// Receiving.
    pub recv: DirectionTotals,
}

/// Which measurement the totals came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoSource {
    /// The probes (tracepoints or the agent's interposition).
    Probes,
    /// The I/O layer's own counters, as the LUT reported them.
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
        let sum = |dir: &str| {
            role.io.iter().filter(|s| s.direction == dir).fold(DirectionTotals::default(), |t, s| DirectionTotals {
                calls: t.calls + s.timing.calls,
                datagrams: t.datagrams + s.datagrams,
                bytes: t.bytes + s.bytes,
            })
        };
        Self { send: sum("send"), recv: sum("recv") }
    }

    /// From the I/O layer's counters.
    pub fn of_counters(c: &nesquic_io::Counters) -> Self {
        let dir = |d: &nesquic_io::DirectionCounters| DirectionTotals {
            calls: d.syscalls,
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
    pub fn of_repetition(rep: &RepetitionFigures) -> Option<(Self, Self, IoSource)> {
        if let Some(m) = &rep.probes {
            let side = |role: Role| m.roles.iter().find(|r| r.role == role.to_string()).map(Self::of);
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
