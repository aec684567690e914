//! Quantiles of a log2 histogram: bucket `b` counts durations in [2^b, 2^(b+1)).

/// Upper bound (2^(b+1)) of the bucket of `hist` holding quantile `q` (0 < q <= 1), the value of
/// rank ceil(q * total), 1-based; 0 for an empty histogram.
pub fn log2_quantile_upper_bound(hist: &[u64], q: f64) -> u64 {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return 0;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (b, count) in hist.iter().enumerate() {
        seen += count;
        if seen >= rank {
            return 1u64 << (b + 1).min(63);
        }
    }
    // Unreachable: the last bucket brings `seen` to `total` >= `rank`.
    1u64 << hist.len().min(63)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_the_right_bucket() {
        // 98 calls in [1024, 2048) and 2 in [2^20, 2^21): the median and p98 are in the first
        // bucket, p99 (rank 99) in the second.
        let mut h = [0u64; 32];
        h[10] = 98;
        h[20] = 2;
        assert_eq!(log2_quantile_upper_bound(&h, 0.5), 2048);
        assert_eq!(log2_quantile_upper_bound(&h, 0.98), 2048);
        assert_eq!(log2_quantile_upper_bound(&h, 0.99), 1 << 21);
        assert_eq!(log2_quantile_upper_bound(&[0; 32], 0.5), 0);
        // One call in bucket 0 ([1, 2)): every quantile's bound is 2.
        assert_eq!(log2_quantile_upper_bound(&[1], 0.01), 2);
    }
}
