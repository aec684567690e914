//! Goodput and CPU over time, from the traces' `nesquic:metrics_updated` snapshots (totals since
//! the repetition started, every `--interval`, and one at its end): rates between consecutive
//! snapshots, one line per repetition (and side, for CPU).

use std::collections::BTreeMap;

use nesquic_protocol::Role;
use nesquic_record::events::MetricsUpdated;

use crate::input::RunInput;
use crate::page::Page;
use crate::plot::{self, Series};
use crate::HtmlError;

/// Per repetition, (elapsed s, cumulative value) from `role`'s snapshots that carry `value`,
/// starting at (0, 0): the processes start with nothing sent and no CPU used. The final
/// snapshot (taken once the processes are gone) gets `at_end(repetition)` where it has no value.
fn cumulative(
    snapshots: &[(Role, MetricsUpdated)],
    role: Role,
    value: impl Fn(&MetricsUpdated) -> Option<f64>,
    at_end: impl Fn(u32) -> Option<f64>,
) -> BTreeMap<u32, Vec<(f64, f64)>> {
    let mut out: BTreeMap<u32, Vec<(f64, f64)>> = BTreeMap::new();
    for (_, m) in snapshots.iter().filter(|(r, _)| *r == role) {
        let v = value(m).or_else(|| if m.last { at_end(m.repetition) } else { None });
        let Some(v) = v else { continue };
        out.entry(m.repetition).or_insert_with(|| vec![(0.0, 0.0)]).push((m.elapsed_ms / 1e3, v));
    }
    out
}

/// Rates over windows of at least `min_dt` seconds, at each window's end, times `scale`. A
/// snapshot closer than that to the last one (the final one, taken as the processes exit) joins
/// the next window: over a few milliseconds, a counter's step is no rate.
fn rates(points: &[(f64, f64)], scale: f64, min_dt: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let Some(mut anchor) = points.first().copied() else { return out };
    for &(t, v) in &points[1..] {
        let dt = t - anchor.0;
        if dt > 0.0 && dt >= min_dt {
            out.push((t, (v - anchor.1) / dt * scale));
            anchor = (t, v);
        }
    }
    out
}

/// Goodput (client's verified bytes) and CPU (each side) over time.
pub fn section(page: &mut Page, input: &RunInput) -> Result<(), HtmlError> {
    page.h2("Over time");
    // Half the snapshot period: periodic snapshots make windows, the final one joins the last.
    let min_dt = input.started.as_ref().map_or(0.0, |s| s.snapshot_interval_ms) / 2e3;
    let snapshots = &input.snapshots;
    let bytes = |m: &MetricsUpdated| m.progress_bytes.map(|b| b as f64);
    let goodput: Vec<Series> = cumulative(snapshots, Role::Client, bytes, |_| None)
        .into_iter()
        .map(|(rep, points)| Series { name: format!("rep {rep}"), points: rates(&points, 8.0 / 1e6, min_dt) })
        .collect();
    let mut cpu = Vec::new();
    for role in [Role::Server, Role::Client] {
        // The CPU the kernel accounted at exit (wait4), at the final snapshot.
        let at_end = |rep: u32| {
            let r = input.record.repetitions.get(usize::try_from(rep).ok()?.checked_sub(1)?)?;
            Some(if role == Role::Server { r.server.cpu_total_s } else { r.client.cpu_total_s })
        };
        for (rep, points) in cumulative(snapshots, role, |m| m.cpu_s, at_end) {
            cpu.push(Series { name: format!("{role} rep {rep}"), points: rates(&points, 100.0, min_dt) });
        }
    }
    page.note("Rates between snapshots of the traces (nesquic:metrics_updated, every --interval; CPU from /proc, in clock ticks). A transfer shorter than the interval shows one point: its average.");
    page.raw(&plot::lines(
        "goodput-over-time",
        "Goodput over time",
        "s since the repetition started",
        "Mbit/s",
        &goodput,
        false,
    )?);
    page.raw(&plot::lines(
        "cpu-over-time",
        "CPU over time",
        "s since the repetition started",
        "% of one core",
        &cpu,
        false,
    )?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_differences_over_time() {
        let r = rates(&[(0.0, 0.0), (0.5, 1e6), (1.0, 3e6), (1.0, 3e6)], 8.0 / 1e6, 0.0);
        assert_eq!(r, vec![(0.5, 16.0), (1.0, 32.0)]);
        // A step 10 ms after the last window joins the next one.
        let r = rates(&[(0.0, 0.0), (0.5, 1e6), (0.51, 2e6), (1.0, 3e6)], 8.0 / 1e6, 0.25);
        assert_eq!(r, vec![(0.5, 16.0), (1.0, 32.0)]);
    }
}
