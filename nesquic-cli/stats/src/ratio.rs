//! head/base of a noisy figure with a confidence interval, on logs so the interval is a ratio's
//! and stays positive. Paired (interleaved rounds: one log-ratio per round, Student's t) or
//! unpaired (two separate runs: Welch's t on the logs of each side). The one-sided p-values ask
//! whether the true ratio lies beyond a limit, which is what a gate with a tolerance needs.

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::moments::mean_var;

/// head/base with its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioEstimate {
    /// Point estimate: the geometric mean of the paired ratios, or the ratio of the sides'
    /// geometric means when unpaired.
    pub ratio: f64,
    /// Lower bound of the interval.
    pub low: f64,
    /// Upper bound of the interval.
    pub high: f64,
    /// Two-sided confidence of `low..high` (0.99).
    pub confidence: f64,
    /// Degrees of freedom of the t distribution used (Welch's when unpaired).
    pub df: f64,
    /// Mean of the log ratio.
    mean_log: f64,
    /// Its standard error.
    se_log: f64,
}

/// Natural logs of `x`; `None` if any value is not positive (a ratio needs positive figures).
fn logs(x: &[f64]) -> Option<Vec<f64>> {
    x.iter().map(|&v| (v > 0.0 && v.is_finite()).then(|| v.ln())).collect()
}

impl RatioEstimate {
    /// From interleaved rounds: `base[i]` and `head[i]` ran side by side in round `i`. `None`
    /// with fewer than two pairs, unequal lengths or a figure that is not positive.
    pub fn paired(base: &[f64], head: &[f64], confidence: f64) -> Option<Self> {
        if base.len() != head.len() {
            return None;
        }
        let d: Vec<f64> = logs(head)?.iter().zip(logs(base)?).map(|(h, b)| h - b).collect();
        let (mean, var) = mean_var(&d)?;
        Self::from_log(mean, (var / d.len() as f64).sqrt(), d.len() as f64 - 1.0, confidence)
    }

    /// From two runs taken separately (no pairing): Welch's interval on the difference of the
    /// mean logs. `None` with fewer than two values a side or a figure that is not positive.
    pub fn unpaired(base: &[f64], head: &[f64], confidence: f64) -> Option<Self> {
        let (mb, vb) = mean_var(&logs(base)?)?;
        let (mh, vh) = mean_var(&logs(head)?)?;
        let (nb, nh) = (base.len() as f64, head.len() as f64);
        let (qb, qh) = (vb / nb, vh / nh);
        let se = (qb + qh).sqrt();
        let df =
            if se > 0.0 { (qb + qh).powi(2) / (qb * qb / (nb - 1.0) + qh * qh / (nh - 1.0)) } else { nb + nh - 2.0 };
        Self::from_log(mh - mb, se, df, confidence)
    }

    /// Back from its printed figures (a stored report): the log moments behind the p-values
    /// are not stored, so they are set from the ratio and the interval's upper half-width.
    pub fn from_printed(ratio: f64, low: f64, high: f64, confidence: f64, df: f64) -> Self {
        let mean_log = ratio.ln();
        let t = StudentsT::new(0.0, 1.0, df).map_or(f64::NAN, |t| t.inverse_cdf(0.5 + confidence / 2.0));
        let se_log = if t > 0.0 { (high.ln() - mean_log) / t } else { 0.0 };
        Self { ratio, low, high, confidence, df, mean_log, se_log }
    }

    fn from_log(mean_log: f64, se_log: f64, df: f64, confidence: f64) -> Option<Self> {
        let t = StudentsT::new(0.0, 1.0, df).ok()?;
        let half = t.inverse_cdf(0.5 + confidence / 2.0) * se_log;
        Some(Self {
            ratio: mean_log.exp(),
            low: (mean_log - half).exp(),
            high: (mean_log + half).exp(),
            confidence,
            df,
            mean_log,
            se_log,
        })
    }

    /// One-sided p-value against "the true ratio is at most `limit`": small when the data say
    /// head/base exceeds `limit` (a figure that should not grow grew by more than the limit).
    pub fn p_above(&self, limit: f64) -> f64 {
        self.p_beyond(self.mean_log - limit.ln())
    }

    /// One-sided p-value against "the true ratio is at least `limit`": small when head/base
    /// is below `limit` (a figure that should not shrink shrank by more than the limit).
    pub fn p_below(&self, limit: f64) -> f64 {
        self.p_beyond(limit.ln() - self.mean_log)
    }

    /// P(T >= distance / se): how likely a distance this far past the limit is under it.
    fn p_beyond(&self, distance: f64) -> f64 {
        if self.se_log == 0.0 {
            // Identical ratios in every pair: no noise to doubt them.
            return if distance > 0.0 { 0.0 } else { 1.0 };
        }
        StudentsT::new(0.0, 1.0, self.df).map_or(1.0, |t| t.sf(distance / self.se_log))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paired_interval_matches_a_hand_computed_t_interval() {
        // Log-ratios ln(1.02), ln(1.04), ln(1.06), ln(1.02), ln(1.04): t(4, 0.995) = 4.604.
        let base = [100.0; 5];
        let head = [102.0, 104.0, 106.0, 102.0, 104.0];
        let e = RatioEstimate::paired(&base, &head, 0.99).expect("estimate");
        let d: Vec<f64> = head.iter().map(|h| (h / 100.0_f64).ln()).collect();
        let mean = d.iter().sum::<f64>() / 5.0;
        let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 4.0).sqrt();
        let half = 4.604_094_5 * sd / 5.0_f64.sqrt();
        assert!((e.ratio - mean.exp()).abs() < 1e-12);
        assert!((e.low - (mean - half).exp()).abs() < 1e-6, "{e:?}");
        assert!((e.high - (mean + half).exp()).abs() < 1e-6, "{e:?}");
        assert_eq!(e.df, 4.0);
    }

    #[test]
    fn one_sided_p_values_point_the_right_way() {
        let base = [100.0; 6];
        let head = [110.0, 111.0, 109.0, 110.5, 109.5, 110.0];
        let e = RatioEstimate::paired(&base, &head, 0.99).expect("estimate");
        assert!(e.p_above(1.03) < 1e-4, "10% growth is beyond +3%");
        assert!(e.p_above(1.2) > 0.999, "10% growth is not beyond +20%");
        assert!(e.p_below(0.97) > 0.999, "growth is not shrinkage");
    }

    #[test]
    fn degenerate_inputs() {
        assert!(RatioEstimate::paired(&[1.0], &[1.0], 0.99).is_none(), "one pair has no spread");
        assert!(RatioEstimate::paired(&[1.0, 2.0], &[1.0], 0.99).is_none(), "pairs must match");
        assert!(RatioEstimate::paired(&[1.0, 0.0], &[1.0, 1.0], 0.99).is_none(), "zero has no log");
        let same = RatioEstimate::paired(&[2.0, 4.0], &[2.2, 4.4], 0.99).expect("constant ratio");
        assert!((same.ratio - 1.1).abs() < 1e-12 && (same.low - 1.1).abs() < 1e-12);
        assert_eq!((same.p_above(1.05), same.p_above(1.2)), (0.0, 1.0));
    }

    #[test]
    fn printed_figures_give_back_the_p_values() {
        let head = [110.0, 111.0, 109.0, 110.5, 109.5, 110.0];
        let e = RatioEstimate::paired(&[100.0; 6], &head, 0.99).expect("estimate");
        let back = RatioEstimate::from_printed(e.ratio, e.low, e.high, e.confidence, e.df);
        assert!((back.se_log - e.se_log).abs() < 1e-12 && (back.p_above(1.09) - e.p_above(1.09)).abs() < 1e-9);
    }

    #[test]
    fn unpaired_uses_welch() {
        // Equal spreads, equal sizes: Welch's df is n1 + n2 - 2.
        let base = [10.0, 11.0, 12.0, 10.5, 11.5];
        let head = [20.0, 22.0, 24.0, 21.0, 23.0];
        let e = RatioEstimate::unpaired(&base, &head, 0.95).expect("estimate");
        assert!((e.df - 8.0).abs() < 1e-9, "{}", e.df);
        // The interval is symmetric on logs; t(8, 0.975) = 2.306, se = sqrt(2 var / 5).
        let logs: Vec<f64> = base.iter().map(|x: &f64| x.ln()).collect();
        let mean = logs.iter().sum::<f64>() / 5.0;
        let var = logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 4.0;
        let half = 2.306_004 * (2.0 * var / 5.0).sqrt();
        assert!((e.ratio - 2.0).abs() < 1e-9 && (e.high - 2.0 * half.exp()).abs() < 1e-5, "{e:?}");
        assert!((e.low * e.high - e.ratio * e.ratio).abs() < 1e-9);
    }
}
