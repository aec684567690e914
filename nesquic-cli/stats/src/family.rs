//! Correction for testing a family of metrics at once. A gate that tests twenty figures each at
//! 1% fails an unchanged commit far more often than 1% of the time; Holm's step-down method keeps
//! the chance of any false failure in the family at alpha, without assuming independence.

/// Holm-adjusted p-values, in the order given: reject where the adjusted value is below alpha.
/// The smallest p is multiplied by m, the next by m - 1, ...; each adjusted value is at least
/// the one before it in that order, and at most 1.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut adjusted = vec![1.0; m];
    let mut running = 0.0_f64;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holm_matches_the_textbook_example() {
        // Four tests: 0.01, 0.04, 0.03, 0.005 -> sorted 0.005 (x4), 0.01 (x3), 0.03 (x2), 0.04 (x1).
        let adjusted = holm(&[0.01, 0.04, 0.03, 0.005]);
        let want = [0.03, 0.06, 0.06, 0.02];
        for (a, w) in adjusted.iter().zip(want) {
            assert!((a - w).abs() < 1e-12, "{adjusted:?}");
        }
        assert_eq!(holm(&[0.5, 0.9]), vec![1.0, 1.0]);
        assert!(holm(&[]).is_empty());
    }
}
