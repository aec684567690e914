//! Calls, time and a log2 histogram of durations: what every timed probe (syscall, function,
//! kernel path) aggregates into, from the kernel's maps or the agent's counters.

use serde::{Deserialize, Serialize};

/// log2 latency buckets per histogram (`hist[b]` counts durations with `floor(log2(ns)) == b`):
/// the kernel's maps and the agent's counters both have this many.
pub const HIST_BUCKETS: usize = 40;

/// Aggregates shared by syscalls and functions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timing {
    /// Calls.
    pub calls: u64,
    /// Total time inside, ns.
    pub total_ns: u64,
    /// Median, as the upper bound of its log2 bucket.
    pub p50_le_ns: u64,
    /// 99th percentile, as the upper bound of its log2 bucket.
    pub p99_le_ns: u64,
    /// `hist[b]`: calls with floor(log2(ns)) == b.
    pub hist: Vec<u64>,
}

impl Timing {
    /// From calls, total time and a log2 histogram (the kernel's maps and the agent's counters
    /// share these semantics).
    pub fn from_parts(calls: u64, total_ns: u64, hist: &[u64; HIST_BUCKETS]) -> Self {
        Self {
            calls,
            total_ns,
            p50_le_ns: quantile_upper_bound(hist, 0.50),
            p99_le_ns: quantile_upper_bound(hist, 0.99),
            hist: hist.to_vec(),
        }
    }

    /// Mean duration, ns.
    pub fn mean_ns(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.calls as f64
        }
    }
}

/// Upper bound (2^(b+1) ns) of the log2 bucket holding quantile `q`; 0 without calls.
pub fn quantile_upper_bound(hist: &[u64], q: f64) -> u64 {
    nesquic_stats::log2_quantile_upper_bound(&hist[..hist.len().min(HIST_BUCKETS)], q)
}

impl Timing {
    /// No calls yet (to sum into).
    pub fn empty() -> Self {
        Self { calls: 0, total_ns: 0, p50_le_ns: 0, p99_le_ns: 0, hist: vec![0; HIST_BUCKETS] }
    }

    /// Adds `other`'s calls, time and histogram; percentiles are recomputed.
    pub fn absorb(&mut self, other: &Timing) {
        self.calls += other.calls;
        self.total_ns += other.total_ns;
        for (a, b) in self.hist.iter_mut().zip(&other.hist) {
            *a += b;
        }
        self.p50_le_ns = quantile_upper_bound(&self.hist, 0.50);
        self.p99_le_ns = quantile_upper_bound(&self.hist, 0.99);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_the_right_bucket() {
        let mut h = [0u64; HIST_BUCKETS];
        h[10] = 98; // 1024..2047 ns
        h[20] = 2; // ~1 ms
        assert_eq!(quantile_upper_bound(&h, 0.5), 2048);
        assert_eq!(quantile_upper_bound(&h, 0.98), 2048);
        assert_eq!(quantile_upper_bound(&h, 0.99), 1 << 21);
        assert_eq!(quantile_upper_bound(&[0; HIST_BUCKETS], 0.5), 0);
    }
}
