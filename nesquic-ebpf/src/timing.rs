//! Calls, time and a log2 histogram of durations ([`Timing`], `nesquic-model`'s), built from the
//! kernel's per-CPU aggregates.

pub use nesquic_model::timing::{quantile_upper_bound, Timing};

use crate::layout::NqStats;

/// The timing of one summed kernel aggregate.
pub(crate) fn from_stats(s: &NqStats) -> Timing {
    Timing::from_parts(s.calls, s.total_ns, &s.hist)
}
