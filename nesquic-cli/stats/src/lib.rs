//! The arithmetic of every figure's spread and confidence, in one place: the median and
//! nearest-rank percentiles (`center`), mean, variance and standard deviation (`moments`),
//! head/base ratios of paired or unpaired samples as geometric means with Student-t intervals
//! and one-sided p-values (`ratio`), Holm's correction of a family of tests (`family`), Wilson
//! intervals of a proportion and the noise of a difference of two proportions (`proportion`),
//! and quantiles of log2 histograms (`histogram`).
//!
//! Must not know runs, probes, LUTs, serde or I/O: it takes numbers and returns numbers; the
//! callers name them and decide how they are stored and printed. Its one dependency, statrs (the
//! t distribution), is the default feature `t`; without it the crate depends on nothing.

pub mod center;
pub mod family;
pub mod histogram;
pub mod moments;
pub mod proportion;
#[cfg(feature = "t")]
pub mod ratio;

pub use center::{median, nearest_rank};
pub use family::holm;
pub use histogram::log2_quantile_upper_bound;
pub use moments::{mean, mean_var, std_dev};
pub use proportion::{two_proportion_half_width, wilson, Z95};
#[cfg(feature = "t")]
pub use ratio::RatioEstimate;
