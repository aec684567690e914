//! `nesquic run --probe LIST --overhead`: what the probes cost. Each round runs the transfer
//! without probes, with each probe item alone, and with the whole list (or, with
//! [`SetChoice::Together`], only without and with the whole list), in an order that rotates
//! every round (so drift on a noisy machine hits every set alike). Ratios are of medians over
//! rounds, against the unprobed runs of the same invocation, and paired round by round (each
//! round's probed run against the same round's unprobed one: the geometric mean of those ratios
//! with a 95% interval), which resolves a cost of a few percent where single runs scatter by ten.

use std::sync::atomic::AtomicBool;

use nesquic_record::compare::RatioEstimate;
use nesquic_record::figures::{RepetitionFigures, Spread};
use serde::{Deserialize, Serialize};

use crate::backend::Probes;
use crate::error::StepExt;
use crate::measure::measure;
use crate::plan::ProbePlan;
use crate::repetition::RepetitionSpec;
use crate::run::{RunPlan, RunReporter, Stage};
use crate::EngineError;

type Result<T> = std::result::Result<T, EngineError>;

/// One probe set's figures.
#[derive(Debug, Serialize, Deserialize)]
pub struct SetResult {
    /// The `--probe` list of this set; empty for the unprobed baseline.
    pub probes: String,
    /// Goodput over rounds, Mbit/s.
    pub goodput_mbps: Spread,
    /// Client + server CPU seconds per payload gigabyte (10^9 bytes).
    pub cpu_s_per_gb: Spread,
    /// Median goodput relative to the baseline's median (1.0 = no loss).
    pub goodput_ratio: f64,
    /// Median CPU per GB relative to the baseline's median (1.0 = no extra CPU).
    pub cpu_ratio: f64,
    /// Goodput against the same round's unprobed run, over rounds (95%); none below two rounds.
    #[serde(default, with = "nesquic_record::compare::ratio_json")]
    pub goodput_paired: Option<RatioEstimate>,
    /// CPU per GB against the same round's unprobed run, over rounds (95%).
    #[serde(default, with = "nesquic_record::compare::ratio_json")]
    pub cpu_paired: Option<RatioEstimate>,
    /// Every round of this set.
    pub repetitions: Vec<RepetitionFigures>,
}

/// A round that did not complete: none of its sets counts (each ratio pairs a set with the same
/// round's unprobed run), the rounds before and after it do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailedRound {
    /// 1-based, as in "round 3/100".
    pub round: u32,
    /// The probe set whose run failed; empty for the unprobed one.
    pub probes: String,
    /// The error, with its causes.
    pub error: String,
}

/// What `--overhead` measured.
#[derive(Debug, Serialize, Deserialize)]
pub struct OverheadReport {
    /// Complete rounds (each ran every set once); failed ones are in `failed_rounds`.
    pub rounds: u32,
    /// Rounds that failed, and why (a long benchmark keeps the others).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_rounds: Vec<FailedRound>,
    /// Stopped by a signal: the rounds after the one it interrupted did not run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// Payload per repetition.
    pub size_bytes: u64,
    /// The baseline first, then each item, then all items together.
    pub sets: Vec<SetResult>,
}

/// Which probe sets a comparison runs besides the unprobed baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetChoice {
    /// Each item of the list alone, then the whole list: what each part costs.
    EachAndAll,
    /// Only the whole list: half the runs per round of a three-item list's five, so the same
    /// time buys more than twice the pairs.
    Together,
}

/// Runs the comparison: `plan.probe` as `choice` says; `plan.repeat` rounds. A round whose run
/// fails is recorded in `failed_rounds` and the next round runs; a signal ends the rounds there.
/// Fails only when no round completed.
pub fn execute(
    plan: &RunPlan,
    choice: SetChoice,
    interrupted: &AtomicBool,
    reporter: &mut dyn RunReporter,
) -> Result<OverheadReport> {
    let list = plan
        .probe
        .as_deref()
        .ok_or_else(|| EngineError::msg("--overhead compares probe sets: give them with --probe"))?;
    let rounds = plan.repeat;
    let mut sets: Vec<String> = vec![String::new()];
    let items: Vec<String> = list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    if choice == SetChoice::EachAndAll {
        sets.extend(items.iter().cloned());
    }
    if items.len() > 1 || choice == SetChoice::Together {
        sets.push(items.join(","));
    }
    // Resolve every set up front so a bad pattern fails before any transfer.
    let plans: Vec<Option<ProbePlan>> = sets
        .iter()
        .map(|s| if s.is_empty() { Ok(None) } else { ProbePlan::new(s, &plan.binary).map(Some) })
        .collect::<Result<_>>()?;
    let stage = Stage::new(plan, reporter)?;
    let base: RepetitionSpec<'_> = stage.spec(plan, interrupted);
    let mut results: Vec<Vec<RepetitionFigures>> = vec![Vec::new(); sets.len()];
    let mut failed_rounds = Vec::new();
    let mut stopped = false;
    for round in 0..rounds {
        let mut this_round: Vec<Option<RepetitionFigures>> = vec![None; sets.len()];
        for k in 0..sets.len() {
            let i = (k + round as usize) % sets.len();
            let name = if sets[i].is_empty() { "no probes" } else { &sets[i] };
            let spec = RepetitionSpec { label: format!("round {}/{rounds} {name}", round + 1), ..base };
            let (_scratch, dir) = crate::backend::scratch_dir()?;
            let (mut session, mut user, mut user_profile) = match &plans[i] {
                Some(probe_plan) => {
                    let p = Probes::open(probe_plan, plan.probe_backend, &plan.binary, &dir, stage.needs)?;
                    if round == 0 {
                        reporter.probes_opened(&p);
                    }
                    (p.kernel, p.user, p.user_profile)
                }
                None => (None, None, None),
            };
            let sampling = crate::kernel::as_probes(session.as_mut(), user_profile.as_mut());
            let measured =
                measure(&spec, sampling, user.as_mut(), None, round + 1).with_step(|| format!("{} failed", spec.label));
            drop((session, user, user_profile));
            match measured {
                Ok(figures) => {
                    reporter.repetition(&spec.label, &figures);
                    this_round[i] = Some(figures);
                }
                Err(e) => {
                    stopped = interrupted.load(std::sync::atomic::Ordering::Relaxed);
                    if !stopped {
                        let error = e.chain();
                        reporter.repetition_failed(&spec.label, &error);
                        failed_rounds.push(FailedRound { round: round + 1, probes: sets[i].clone(), error });
                    }
                    break;
                }
            }
        }
        if stopped {
            break;
        }
        // Only a complete round keeps its runs: every ratio pairs a set with the same round's baseline.
        if this_round.iter().all(Option::is_some) {
            for (set, figures) in results.iter_mut().zip(this_round.into_iter().flatten()) {
                set.push(figures);
            }
        }
    }
    if results[0].is_empty() {
        return Err(match failed_rounds.first() {
            Some(f) => {
                EngineError::msg(format!("no round of --overhead completed; round {} failed: {}", f.round, f.error))
            }
            None => EngineError::msg("interrupted before any round of --overhead completed"),
        });
    }
    let size = plan.testcase.workload.total_bytes();
    let per_gb = |r: &RepetitionFigures| cpu_s(r) / (size as f64 / 1e9);
    let no_runs = || EngineError::msg("no baseline runs");
    // Per set, goodput and CPU per GB by round: every set ran once per round, so index i of
    // each series is round i (what the paired ratios need).
    let series: Vec<(Vec<f64>, Vec<f64>)> = results
        .iter()
        .map(|reps| (reps.iter().map(|r| r.goodput_mbps).collect(), reps.iter().map(per_gb).collect()))
        .collect();
    let (baseline_goodputs, baseline_cpus) = &series[0];
    let baseline_goodput = Spread::of(baseline_goodputs.iter().copied()).ok_or_else(no_runs)?.median;
    let baseline_cpu = Spread::of(baseline_cpus.iter().copied()).ok_or_else(no_runs)?.median;
    let complete = results[0].len() as u32;
    let mut report =
        OverheadReport { rounds: complete, failed_rounds, interrupted: stopped, size_bytes: size, sets: Vec::new() };
    for ((set, reps), (goodputs, cpus)) in sets.iter().zip(results).zip(&series) {
        let goodput = Spread::of(goodputs.iter().copied()).ok_or_else(no_runs)?;
        let cpu = Spread::of(cpus.iter().copied()).ok_or_else(no_runs)?;
        report.sets.push(SetResult {
            probes: set.clone(),
            goodput_ratio: goodput.median / baseline_goodput,
            cpu_ratio: cpu.median / baseline_cpu,
            goodput_paired: RatioEstimate::paired(baseline_goodputs, goodputs, 0.95),
            cpu_paired: RatioEstimate::paired(baseline_cpus, cpus, 0.95),
            goodput_mbps: goodput,
            cpu_s_per_gb: cpu,
            repetitions: reps,
        });
    }
    Ok(report)
}

/// Client + server CPU seconds of one repetition.
pub fn cpu_s(r: &RepetitionFigures) -> f64 {
    r.server.cpu_total_s + r.client.cpu_total_s
}
