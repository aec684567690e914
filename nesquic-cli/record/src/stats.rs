//! The median/min/max spread of a figure over repetitions, as recorded; the arithmetic (the one
//! median every command shares, re-exported here) is `nesquic-stats`'.

use serde::{Deserialize, Serialize};

pub use nesquic_stats::median;

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
