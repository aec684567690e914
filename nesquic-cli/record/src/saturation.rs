//! Per-thread saturation over repetitions: for each side, the repetition whose busiest thread
//! sits at the median busy share (on a CPU or waiting for one, over the transfer), and the lines
//! the terminal and the Markdown summary print for it, with what reading the threads cost.

use nesquic_model::threads::SideThreads;
use nesquic_protocol::Role;

use crate::figures::RepetitionFigures;

/// One side's threads over the run's repetitions.
#[derive(Debug, Clone, PartialEq)]
pub struct SideSaturation {
    /// The repetition whose busiest thread is at the median busy share (the upper median).
    pub median: SideThreads,
    /// Repetitions that read the side's threads.
    pub repetitions: usize,
    /// How many of them had the side saturated.
    pub saturated: usize,
}

impl SideSaturation {
    /// `role`'s threads over `repetitions`; `None` where none read them (a remote side, a run
    /// recorded before they were read, a kernel without schedstat).
    pub fn of(repetitions: &[RepetitionFigures], role: Role) -> Option<Self> {
        let mut sides: Vec<&SideThreads> =
            repetitions.iter().flat_map(|r| &r.threads).filter(|s| s.role == role && s.window_ns > 0).collect();
        if sides.is_empty() {
            return None;
        }
        sides.sort_by(|a, b| a.busiest_share().total_cmp(&b.busiest_share()));
        Some(Self {
            median: sides[sides.len() / 2].clone(),
            repetitions: sides.len(),
            saturated: sides.iter().filter(|s| s.saturated()).count(),
        })
    }

    /// Whether the side was saturated in most repetitions (the median one).
    pub fn saturated(&self) -> bool {
        self.median.saturated()
    }

    /// "client threads over the transfer: busiest thread ... (median of 3 repetitions; saturated in
    /// 3)".
    pub fn describe(&self) -> String {
        let over = if self.repetitions > 1 {
            format!(" (the median of {} repetitions; saturated in {})", self.repetitions, self.saturated)
        } else {
            String::new()
        };
        format!("{} threads over the transfer: {}{over}", self.median.role, self.median.describe())
    }
}

/// The lines of each side's threads and, when they were read, what reading them cost nesquic.
pub fn describe(repetitions: &[RepetitionFigures]) -> Vec<String> {
    let mut lines: Vec<String> = nesquic_protocol::role::LUT_ROLES
        .into_iter()
        .filter_map(|role| SideSaturation::of(repetitions, role))
        .map(|s| s.describe())
        .collect();
    let (reads, cpu_ns) =
        repetitions.iter().filter_map(|r| r.threads_cost).fold((0, 0), |(n, ns), c| (n + c.reads, ns + c.cpu_ns));
    if reads > 0 {
        lines.push(format!(
            "per-thread times (/proc/PID/task/TID/schedstat): {reads} readings, {:.2} ms of nesquic's CPU ({:.1} us a reading)",
            cpu_ns as f64 / 1e6,
            cpu_ns as f64 / 1e3 / reads as f64
        ));
    }
    lines
}
