//! The one median every command shares, and the median/min/max spread of a figure over
//! repetitions (the gate's ratio statistics live in `compare`).

use serde::{Deserialize, Serialize};

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

/// Median, minimum and maximum of one figure over repetitions.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Spread {
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
}

impl Spread {
    /// Spread of `values`; `None` when empty.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let v: Vec<f64> = values.into_iter().collect();
        let median = median(&v)?;
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Self { median, min, max })
    }
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
}
