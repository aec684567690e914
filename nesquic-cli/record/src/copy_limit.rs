//! The machine's own `memcpy` of a large buffer, at every placement of the destination's page
//! offset against the source's, measured by Nesquic on the same machine after a run whose
//! profile caught a side in a `rep movsb` (the instruction glibc's memcpy copies large buffers
//! with on CPUs with fast string moves; the profile counts the samples that interrupted one).
//! Some CPUs run `rep movsb` many times slower at a few placements (measured on this project's
//! AMD EPYC VM: 3.5 GB/s when the destination lies 1-15 bytes past the source in its page,
//! ~100 GB/s elsewhere), and a stack whose buffers keep such a placement pays it on every copy.

use serde::{Deserialize, Serialize};

use crate::figures::RepetitionFigures;

/// The machine's copy speed at one size over the page-offset placements tried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyLimit {
    /// Bytes per copy benchmarked.
    pub bytes: u64,
    /// What copied: `glibc memcpy (...)`.
    pub library: String,
    /// Best of the rounds with destination and source at the same page offset, GB/s.
    pub same_offset_gb_s: f64,
    /// The slowest placement's best round, GB/s.
    pub slowest_gb_s: f64,
    /// The destination's page offset minus the source's (mod 4096) at the slowest placement.
    pub slowest_placement: u64,
    /// Placements tried, and how many of them copied at under a quarter of the same-offset speed.
    pub placements: u64,
    /// See [`CopyLimit::placements`].
    pub slow_placements: u64,
}

/// A side's profile samples that interrupted a `rep movsb` in user code, and all its samples,
/// over the repetitions; `None` without a profile.
pub fn rep_movsb_samples(repetitions: &[RepetitionFigures], role: nesquic_protocol::Role) -> Option<(u64, u64)> {
    let roles: Vec<_> = repetitions
        .iter()
        .filter_map(|r| r.profile.as_ref())
        .flat_map(|p| &p.roles)
        .filter(|r| r.role == role)
        .collect();
    (!roles.is_empty()).then(|| (roles.iter().map(|r| r.rep_movsb_leaves).sum(), roles.iter().map(|r| r.samples).sum()))
}
