//! The layer's own accounting: what it asked the kernel to do.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::{Deserialize, Serialize};

/// Totals for one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectionCounters {
    /// Syscalls made (successful or not).
    pub syscalls: u64,
    /// UDP datagrams moved (a GSO/GRO buffer counts as its segments).
    pub datagrams: u64,
    /// Payload bytes moved.
    pub bytes: u64,
    /// Calls that failed with `EAGAIN`/`EWOULDBLOCK`.
    pub would_block: u64,
    /// Calls that failed with any other error.
    pub errors: u64,
}

/// A snapshot of both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Send side.
    pub send: DirectionCounters,
    /// Receive side.
    pub recv: DirectionCounters,
}

#[derive(Debug, Default)]
pub(crate) struct AtomicDirection {
    syscalls: AtomicU64,
    datagrams: AtomicU64,
    bytes: AtomicU64,
    would_block: AtomicU64,
    errors: AtomicU64,
}

impl AtomicDirection {
    pub(crate) fn call(&self) {
        self.syscalls.fetch_add(1, Relaxed);
    }

    pub(crate) fn moved(&self, datagrams: u64, bytes: u64) {
        self.datagrams.fetch_add(datagrams, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
    }

    pub(crate) fn failed(&self, err: &std::io::Error) {
        if err.kind() == std::io::ErrorKind::WouldBlock {
            self.would_block.fetch_add(1, Relaxed);
        } else {
            self.errors.fetch_add(1, Relaxed);
        }
    }

    pub(crate) fn snapshot(&self) -> DirectionCounters {
        DirectionCounters {
            syscalls: self.syscalls.load(Relaxed),
            datagrams: self.datagrams.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            would_block: self.would_block.load(Relaxed),
            errors: self.errors.load(Relaxed),
        }
    }
}
