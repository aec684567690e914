//! Statistics for noisy figures: median and the two-sided Mann-Whitney U test.

/// Median (mean of the middle two for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.to_vec();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Two-sided p-value of the Mann-Whitney U test that `a` and `b` come from the same
/// distribution. Exact for small samples: by the U distribution without ties (up to 12 per
/// side), by enumerating every split of the pooled ranks with ties (up to 200,000 splits);
/// normal approximation with tie and continuity correction beyond that.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    // Rank the pooled sample, averaging ranks over ties.
    let mut pooled: Vec<(f64, bool)> = a.iter().map(|&x| (x, true)).chain(b.iter().map(|&x| (x, false))).collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut ranks = vec![0.0; pooled.len()];
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < pooled.len() {
        let mut j = i;
        while j + 1 < pooled.len() && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for r in ranks.iter_mut().take(j + 1).skip(i) {
            *r = avg;
        }
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let r1: f64 = pooled.iter().zip(&ranks).filter(|(p, _)| p.1).map(|(_, r)| r).sum();
    let u1 = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let u = u1.min((n1 * n2) as f64 - u1);
    if tie_term == 0.0 && n1 <= 12 && n2 <= 12 {
        return exact_p(n1, n2, u);
    }
    if binomial(n1 + n2, n1) <= 200_000.0 {
        return permutation_p(&ranks, n1, r1);
    }
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let n = n1f + n2f;
    let mean = n1f * n2f / 2.0;
    let var = n1f * n2f / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    (2.0 * normal_sf(z)).min(1.0)
}

/// P(U <= u) * 2 under H0, by counting rank arrangements (dynamic programming).
fn exact_p(n1: usize, n2: usize, u: f64) -> f64 {
    // counts[i][j][k]: arrangements of i + j items with U statistic k.
    let max_u = n1 * n2;
    let mut prev: Vec<Vec<f64>> = vec![vec![0.0; max_u + 1]; n2 + 1];
    for row in prev.iter_mut() {
        row[0] = 1.0; // i = 0: one arrangement, U = 0
    }
    for _i in 1..=n1 {
        let mut cur: Vec<Vec<f64>> = vec![vec![0.0; max_u + 1]; n2 + 1];
        cur[0][0] = 1.0;
        for j in 1..=n2 {
            for k in 0..=max_u {
                // Largest item from sample 1 (adds j to U) or from sample 2.
                let from_a = if k >= j { prev[j][k - j] } else { 0.0 };
                cur[j][k] = from_a + cur[j - 1][k];
            }
        }
        prev = cur;
    }
    let total: f64 = prev[n2].iter().sum();
    let below: f64 = prev[n2].iter().take(u.floor() as usize + 1).sum();
    (2.0 * below / total).min(1.0)
}

/// Exact conditional p-value with ties: the share of all ways to pick `n1` of the pooled ranks
/// whose rank sum is at least as far from its mean as the observed one.
fn permutation_p(ranks: &[f64], n1: usize, observed_sum: f64) -> f64 {
    let mean = n1 as f64 * (ranks.len() + 1) as f64 / 2.0;
    let observed = (observed_sum - mean).abs() - 1e-9;
    let (mut extreme, mut total) = (0u64, 0u64);
    fn walk(
        ranks: &[f64],
        start: usize,
        left: usize,
        sum: f64,
        mean: f64,
        observed: f64,
        counts: (&mut u64, &mut u64),
    ) {
        if left == 0 {
            *counts.1 += 1;
            if (sum - mean).abs() >= observed {
                *counts.0 += 1;
            }
            return;
        }
        for i in start..=ranks.len() - left {
            walk(ranks, i + 1, left - 1, sum + ranks[i], mean, observed, (&mut *counts.0, &mut *counts.1));
        }
    }
    walk(ranks, 0, n1, 0.0, mean, observed, (&mut extreme, &mut total));
    extreme as f64 / total.max(1) as f64
}

fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// 1 - Phi(z) for z >= 0 (Abramowitz-Stegun 7.1.26 on erfc; error < 1.5e-7).
fn normal_sf(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    0.5 * poly * (-x * x).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn mann_whitney_matches_known_values() {
        // Completely separated samples of 5: the exact two-sided p is 2/252.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [6.0, 7.0, 8.0, 9.0, 10.0];
        assert!((mann_whitney_p(&a, &b) - 2.0 / 252.0).abs() < 1e-12);
        // Interleaved samples: no evidence.
        let c = [1.0, 3.0, 5.0, 7.0, 9.0];
        let d = [2.0, 4.0, 6.0, 8.0, 10.0];
        assert!(mann_whitney_p(&c, &d) > 0.5);
        // Identical samples (all ties): p = 1.
        assert_eq!(mann_whitney_p(&[1.0; 5], &[1.0; 5]), 1.0);
        // Separated samples with ties inside one of them are still 2/252 (exact, by enumeration),
        // where the normal approximation would say 0.012.
        let tied = [9.0, 9.0, 9.4, 9.5, 9.6];
        assert!((mann_whitney_p(&tied, &[1.0; 5]) - 2.0 / 252.0).abs() < 1e-12);
        // Normal approximation on larger separated samples.
        let e: Vec<f64> = (0..20).map(f64::from).collect();
        let f: Vec<f64> = (100..120).map(f64::from).collect();
        assert!(mann_whitney_p(&e, &f) < 1e-6);
        // n = 12 per side, U = 36: the exact p (0.0387) is close to the normal approximation
        // (z = 35.5 / sqrt(300) = 2.05 -> p = 0.040).
        let g: Vec<f64> = (0..12).map(f64::from).collect();
        let h: Vec<f64> = (0..12).map(|x| f64::from(x) + 3.5).collect();
        let p = mann_whitney_p(&g, &h);
        assert!((p - 0.040).abs() < 0.003, "{p}");
    }
}
