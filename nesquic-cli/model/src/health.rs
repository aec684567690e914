//! What the kernel side could not measure, as counts: the serde form of the probes' health
//! counters. `nesquic-ebpf` reads them from its `#[repr(C)]` map layout and converts; the
//! record and qlog hold only this type, so the kernel ABI is not part of the file format.

use serde::{Deserialize, Serialize};

/// Calls, returns, reads and events the kernel side lost (all zero when nothing was lost).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HealthCounts {
    /// Entries not recorded because an in-flight map was full.
    pub inflight_full: u64,
    /// Returns seen without their entry.
    pub exit_without_entry: u64,
    /// Re-entered functions whose outer call was lost.
    pub nested_overwrites: u64,
    /// User memory that could not be read.
    pub user_read_failures: u64,
    /// mmsg batches larger than the parsed maximum.
    pub truncated_batches: u64,
    /// Per-message events the ring buffer had no room for (`--qlog-datagrams`).
    pub events_dropped: u64,
    /// Sampled stacks lost to a stack-map bucket that held another stack (the profile keeps
    /// such a sample's user leaf).
    pub stack_collisions: u64,
}

impl HealthCounts {
    /// Adds another window's (or CPU's) counts.
    pub fn add(&mut self, o: &HealthCounts) {
        self.inflight_full += o.inflight_full;
        self.exit_without_entry += o.exit_without_entry;
        self.nested_overwrites += o.nested_overwrites;
        self.user_read_failures += o.user_read_failures;
        self.truncated_batches += o.truncated_batches;
        self.events_dropped += o.events_dropped;
        self.stack_collisions += o.stack_collisions;
    }

    /// Nothing was lost.
    pub fn is_clean(&self) -> bool {
        *self == HealthCounts::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_sums_every_count_once() {
        let mut a = HealthCounts { events_dropped: 1, stack_collisions: 3, ..HealthCounts::default() };
        a.add(&HealthCounts { inflight_full: 4, stack_collisions: 2, ..HealthCounts::default() });
        assert_eq!(
            a,
            HealthCounts { inflight_full: 4, events_dropped: 1, stack_collisions: 5, ..HealthCounts::default() }
        );
    }
}
