//! Proportions: the Wilson interval of one share of samples, and how far two independently
//! sampled shares land apart by chance alone.

/// The normal quantile of a 95% two-sided interval.
pub const Z95: f64 = 1.96;

/// `successes` of `total` with its Wilson score interval at normal quantile `z`:
/// `(share, low, high)`, the bounds clamped to 0..=1. A `total` of 0 counts as 1 (share 0), so
/// an empty sample gives a share of 0, not NaN.
pub fn wilson(successes: u64, total: u64, z: f64) -> (f64, f64, f64) {
    let n = total.max(1) as f64;
    let p = successes as f64 / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    (p, (centre - half).max(0.0), (centre + half).min(1.0))
}

/// Half-width of the interval of `p1 - p2` at normal quantile `z`, for shares `p1` of `n1` and
/// `p2` of `n2` samples (the normal approximation; `n` below 1 counts as 1).
pub fn two_proportion_half_width(p1: f64, n1: f64, p2: f64, n2: f64, z: f64) -> f64 {
    z * (p1 * (1.0 - p1) / n1.max(1.0) + p2 * (1.0 - p2) / n2.max(1.0)).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_newcombes_examples() {
        // Newcombe (1998), "Two-sided confidence intervals for the single proportion", 95%:
        // 81/263 -> 0.2553..0.3662, 15/148 -> 0.0624..0.1605, 0/20 -> 0..0.1611, 1/29 -> 0.0061..0.1718.
        for (s, n, low, high) in
            [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)]
        {
            let (p, lo, hi) = wilson(s, n, Z95);
            assert!((p - s as f64 / n as f64).abs() < 1e-15);
            assert!((lo - low).abs() < 5e-5 && (hi - high).abs() < 5e-5, "{s}/{n}: {lo} {hi}");
        }
        assert_eq!(wilson(0, 0, Z95).0, 0.0);
    }

    #[test]
    fn two_proportions() {
        // 50% of 100 against 40% of 100: se = sqrt(0.0025 + 0.0024) = 0.07; 1.96 * 0.07 = 0.1372.
        assert!((two_proportion_half_width(0.5, 100.0, 0.4, 100.0, Z95) - 0.1372).abs() < 1e-12);
    }
}
