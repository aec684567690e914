//! `nesquic run --probe LIST --overhead`: what the probes cost. Each round runs the transfer
//! without probes, with each probe item alone, and with the whole list, in an order that rotates
//! every round (so drift on a noisy machine hits every set alike). Ratios are of medians over
//! rounds, against the unprobed runs of the same invocation.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use super::repetition::RepetitionSpec;
use super::{measure, RepetitionFigures, Spread};
use crate::backend::{BackendChoice, KernelNeeds, Probes};
use crate::probes::ProbePlan;

/// One probe set's figures.
#[derive(Debug, Serialize)]
struct SetResult {
    /// The `--probe` list of this set; empty for the unprobed baseline.
    probes: String,
    goodput_mbps: Spread,
    /// Client + server CPU seconds per payload gigabyte (10^9 bytes).
    cpu_s_per_gb: Spread,
    /// Median goodput relative to the baseline's median (1.0 = no loss).
    goodput_ratio: f64,
    /// Median CPU per GB relative to the baseline's median (1.0 = no extra CPU).
    cpu_ratio: f64,
    repetitions: Vec<RepetitionFigures>,
}

#[derive(Debug, Serialize)]
struct OverheadReport {
    rounds: u32,
    size_bytes: u64,
    sets: Vec<SetResult>,
}

/// Runs the comparison and prints (and optionally writes) the table.
pub fn execute(
    base: &RepetitionSpec<'_>,
    list: &str,
    backend: BackendChoice,
    needs: KernelNeeds,
    rounds: u32,
    json: Option<&Path>,
) -> Result<()> {
    let mut sets: Vec<String> = vec![String::new()];
    let items: Vec<String> = list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    sets.extend(items.iter().cloned());
    if items.len() > 1 {
        sets.push(items.join(","));
    }
    // Resolve every set up front so a bad pattern fails before any transfer.
    let plans: Vec<Option<ProbePlan>> = sets
        .iter()
        .map(|s| if s.is_empty() { Ok(None) } else { ProbePlan::new(s, base.binary).map(Some) })
        .collect::<Result<_, nesquic_engine::EngineError>>()?;
    let mut results: Vec<Vec<RepetitionFigures>> = vec![Vec::new(); sets.len()];
    for round in 0..rounds {
        for k in 0..sets.len() {
            let i = (k + round as usize) % sets.len();
            let name = if sets[i].is_empty() { "no probes" } else { &sets[i] };
            let spec = RepetitionSpec { label: format!("round {}/{rounds} {name}", round + 1), ..*base };
            let (_scratch, dir) = crate::backend::scratch_dir()?;
            let (mut session, mut user) = match &plans[i] {
                Some(plan) => {
                    let p = Probes::open(plan, backend, base.binary, &dir, needs)?;
                    if round == 0 {
                        for line in p.describe() {
                            eprintln!("nesquic: probes {name}: {line}");
                        }
                    }
                    (p.kernel, p.user)
                }
                None => (None, None),
            };
            let figures = measure(&spec, session.as_mut(), user.as_mut(), None, round + 1)
                .with_context(|| format!("{} failed", spec.label))?;
            drop((session, user));
            println!("{}: goodput {:.1} Mbit/s, CPU {:.3} s", spec.label, figures.goodput_mbps, cpu_s(&figures));
            results[i].push(figures);
        }
    }
    let size = base.workload.total_bytes();
    let per_gb = |r: &RepetitionFigures| cpu_s(r) / (size as f64 / 1e9);
    let baseline_goodput = Spread::of(results[0].iter().map(|r| r.goodput_mbps)).context("no baseline runs")?.median;
    let baseline_cpu = Spread::of(results[0].iter().map(per_gb)).context("no baseline runs")?.median;
    let mut report = OverheadReport { rounds, size_bytes: size, sets: Vec::new() };
    println!();
    println!("probe overhead, {rounds} round(s) of {size} bytes, medians; ratios against no probes:");
    println!("{:<40} {:>14} {:>8} {:>12} {:>8}", "probes", "goodput Mbit/s", "ratio", "CPU s/GB", "ratio");
    for (set, reps) in sets.iter().zip(results) {
        let goodput = Spread::of(reps.iter().map(|r| r.goodput_mbps)).context("no runs")?;
        let cpu = Spread::of(reps.iter().map(per_gb)).context("no runs")?;
        let r = SetResult {
            probes: set.clone(),
            goodput_ratio: goodput.median / baseline_goodput,
            cpu_ratio: cpu.median / baseline_cpu,
            goodput_mbps: goodput,
            cpu_s_per_gb: cpu,
            repetitions: reps,
        };
        let name = if set.is_empty() { "(none)" } else { set.as_str() };
        println!(
            "{name:<40} {:>14.1} {:>8.3} {:>12.2} {:>8.3}",
            r.goodput_mbps.median, r.goodput_ratio, r.cpu_s_per_gb.median, r.cpu_ratio
        );
        report.sets.push(r);
    }
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("write {}", path.display()))?;
        eprintln!("nesquic: JSON written to {}", path.display());
    }
    Ok(())
}

fn cpu_s(r: &RepetitionFigures) -> f64 {
    r.server.cpu_total_s + r.client.cpu_total_s
}
