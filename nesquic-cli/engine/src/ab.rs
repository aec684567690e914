//! `nesquic ab`: a base and a head variant (two builds, two commands, or two option sets) in
//! interleaved rounds, so that drift on a shared machine (other jobs, CPU frequency, caches)
//! hits both alike and the rounds can be compared in pairs. Each round runs one repetition of
//! each variant through [`run::execute`], in ABBA order (AB, BA, AB, ...) or in an order drawn
//! per round from a seed. Every repetition keeps its own run directory (traces and
//! summary.json); each side's repetitions, in round order, are assembled into one run record.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use nesquic_ebpf::Metrics;
use nesquic_record::figures::{RepetitionFigures, Summary};
use nesquic_record::run::{FailedRepetition, RunRecord};
use serde::Serialize;

use crate::backend::Probes;
use crate::run::{self, RunPlan, RunReporter};
use crate::EngineError;

type Result<T> = std::result::Result<T, EngineError>;

/// One of the two variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The reference (A).
    Base,
    /// The change under review (B).
    Head,
}

impl Side {
    /// `base` or `head`: the side's directory and label.
    pub fn name(self) -> &'static str {
        match self {
            Side::Base => "base",
            Side::Head => "head",
        }
    }
}

/// In which order the two variants run within each round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Order {
    /// AB, BA, AB, ...: a trend over the job hits both sides equally every two rounds.
    Abba,
    /// Each round's order drawn from this seed (randomised blocks).
    Random {
        /// The generator's seed (recorded, so the order can be repeated).
        seed: u64,
    },
}

impl Order {
    /// The order of every round.
    pub fn rounds(self, rounds: u32) -> Vec<[Side; 2]> {
        let mut rng = match self {
            Order::Abba => None,
            Order::Random { seed } => Some(fastrand::Rng::with_seed(seed)),
        };
        (0..rounds)
            .map(|r| {
                let base_first = match rng.as_mut() {
                    None => r % 2 == 0,
                    Some(rng) => rng.bool(),
                };
                if base_first {
                    [Side::Base, Side::Head]
                } else {
                    [Side::Head, Side::Base]
                }
            })
            .collect()
    }
}

/// Two resolved runs to interleave. Each plan's `repeat`, `out` and `json` are the engine's to
/// set per round.
pub struct AbPlan {
    /// The reference.
    pub base: RunPlan,
    /// The change under review.
    pub head: RunPlan,
    /// Rounds: each runs one repetition of each side.
    pub rounds: u32,
    /// Order within rounds.
    pub order: Order,
    /// The job's directory: `base/`, `head/` (each a run directory with summary.json and one
    /// directory per round) and `ab.json`; must not hold files yet.
    pub out: PathBuf,
}

/// What the rounds measured.
pub struct AbRecord {
    /// Every base repetition, in round order.
    pub base: RunRecord,
    /// Every head repetition, in round order.
    pub head: RunRecord,
    /// Which side ran first in each round.
    pub order: Vec<[Side; 2]>,
}

/// The job's description in `ab.json`.
#[derive(Serialize)]
struct Job<'a> {
    rounds: u32,
    order: Order,
    sequence: &'a [[Side; 2]],
}

/// Runs the rounds; stops early (killing the LUT processes) once `interrupted` is set.
pub fn execute(plan: &mut AbPlan, interrupted: &AtomicBool, reporter: &mut dyn RunReporter) -> Result<AbRecord> {
    if plan.rounds < 2 {
        return Err(EngineError::msg("an A/B comparison needs at least 2 rounds (pairs)"));
    }
    nesquic_record::recorder::prepare_out_dir(&plan.out)?;
    let order = plan.order.rounds(plan.rounds);
    write_json(&plan.out.join("ab.json"), &Job { rounds: plan.rounds, order: plan.order, sequence: &order })?;
    let (mut base, mut head) = (Vec::new(), Vec::new());
    let mut failure = None;
    'rounds: for (r, sides) in order.iter().enumerate() {
        for &side in sides {
            let label = format!("round {}/{} {}", r + 1, plan.rounds, side.name());
            let run_plan = match side {
                Side::Base => &mut plan.base,
                Side::Head => &mut plan.head,
            };
            run_plan.repeat = 1;
            run_plan.json = None;
            run_plan.out = Some(plan.out.join(side.name()).join(format!("round-{:03}", r + 1)));
            let mut round = RoundReporter { inner: &mut *reporter, label: &label, first: r == 0 };
            match run::execute(run_plan, interrupted, &mut round) {
                Ok(record) if side == Side::Base => base.push(record),
                Ok(record) => head.push(record),
                Err(e) => {
                    failure = Some((side, r + 1, label, e));
                    break 'rounds;
                }
            }
        }
    }
    if let Some((side, round, label, e)) = failure {
        // The rounds measured before stay: each side's record, the failed round marked in its side's.
        let failed = FailedRepetition { repetition: round as u32, error: e.chain() };
        let mut kept = Vec::new();
        for (s, records) in [(Side::Base, base), (Side::Head, head)] {
            let dir = plan.out.join(s.name());
            if !records.is_empty() {
                assemble(records, (s == side).then(|| failed.clone()), &dir)?;
                kept.push(dir.join("summary.json").display().to_string());
            }
        }
        let kept = if kept.is_empty() {
            "no round measured before it".into()
        } else {
            format!("recorded in {}", kept.join(" and "))
        };
        return Err(EngineError::Step {
            what: format!("{label} failed (the rounds before it are {kept})"),
            source: Box::new(e),
        });
    }
    let base = assemble(base, None, &plan.out.join(Side::Base.name()))?;
    let head = assemble(head, None, &plan.out.join(Side::Head.name()))?;
    Ok(AbRecord { base, head, order })
}

/// One side's per-round records as one run record (written to `dir/summary.json`), so that
/// `nesquic compare`, `report` and scripts read it like any run; `failed`, the round that failed
/// (numbered as a repetition), is marked in it.
fn assemble(records: Vec<RunRecord>, failed: Option<FailedRepetition>, dir: &Path) -> Result<RunRecord> {
    let unfinished: Vec<String> = records
        .iter()
        .enumerate()
        .flat_map(|(i, r)| r.unfinished.iter().map(move |u| format!("round {}: {u}", i + 1)))
        .collect();
    let mut iter = records.into_iter();
    let mut whole = iter.next().ok_or_else(|| EngineError::msg("no rounds ran"))?;
    let reps: Vec<RepetitionFigures> = iter.flat_map(|r| r.repetitions).collect();
    whole.repetitions.extend(reps);
    whole.failed_repetitions.extend(failed);
    whole.unfinished = unfinished;
    whole.summary = Summary::of(&whole.repetitions).map(|mut s| {
        s.failed_repetitions = whole.failed_repetitions.len();
        s
    });
    // The first round's findings read one round; the side's are those of all its rounds.
    whole.findings = nesquic_record::findings::find(&whole);
    // The first round's record names its own folded stacks (in its round directory): the side's
    // are every round's, summed beside summary.json, for `compare --html`'s flame graphs.
    whole.profile_stacks = nesquic_record::stacks::write(dir, &whole.repetitions)?;
    write_json(&dir.join("summary.json"), &whole)?;
    Ok(whole)
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| EngineError::msg(format!("serialise {}: {e}", path.display())))?;
    Ok(nesquic_record::files::write_atomic(path, text.as_bytes())?)
}

/// Passes one round's events on under the round's label; what every round repeats (probes,
/// link) only in the first, and no per-round summaries.
struct RoundReporter<'a> {
    inner: &'a mut dyn RunReporter,
    label: &'a str,
    first: bool,
}

impl RunReporter for RoundReporter<'_> {
    fn probes_opened(&mut self, probes: &Probes) {
        if self.first {
            self.inner.probes_opened(probes);
        }
    }

    fn link_ready(&mut self, topology: &nesquic_link::Topology) {
        if self.first {
            self.inner.link_ready(topology);
        }
    }

    fn repetition(&mut self, _label: &str, figures: &RepetitionFigures) {
        self.inner.repetition(self.label, figures);
    }

    fn finished(&mut self, _record: &RunRecord, _merged: Option<&Metrics>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abba_alternates_and_random_is_repeatable() {
        let abba = Order::Abba.rounds(4);
        assert_eq!(abba[0], [Side::Base, Side::Head]);
        assert_eq!(abba[1], [Side::Head, Side::Base]);
        assert_eq!(abba[2], abba[0]);
        let random = Order::Random { seed: 7 }.rounds(32);
        assert_eq!(random, Order::Random { seed: 7 }.rounds(32), "same seed, same order");
        let base_first = random.iter().filter(|s| s[0] == Side::Base).count();
        assert!((4..=28).contains(&base_first), "both orders occur: {base_first} of 32 base-first");
    }

    /// One round's record: one measured repetition of `goodput` Mbit/s.
    fn round(goodput: f64) -> RunRecord {
        let process = serde_json::json!({ "cpu_user_s": 0.1, "cpu_system_s": 0.0, "cpu_total_s": 0.1, "wall_s": 1.0,
                                          "cpu_utilisation_pct": 10.0, "max_rss_kib": 1 });
        let rep = serde_json::json!({ "bytes": 1, "payload_verified": true, "goodput_mbps": goodput, "transfer_s": 1.0,
                                      "handshake_ms": 1.0, "server": process, "client": process });
        let mut record: RunRecord = serde_json::from_value(serde_json::json!({
            "nesquic_version": "test", "size_bytes": 1, "repetitions": [rep],
            "lut": { "name": "quinn", "version": "0.11", "crypto_backend": "ring", "io": "native", "binary": "/lut" }
        }))
        .expect("a round's record");
        record.summary = Summary::of(&record.repetitions);
        record
    }

    /// Issue 52: a round that fails keeps the side's rounds measured before it, the failed one
    /// marked, and the figures over the measured ones only.
    #[test]
    fn a_failed_round_keeps_the_rounds_before_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let failed = FailedRepetition { repetition: 3, error: "client ended with exit code 1".into() };
        let whole = assemble(vec![round(100.0), round(300.0)], Some(failed.clone()), dir.path()).expect("assembled");
        let written = RunRecord::load(&dir.path().join("summary.json")).expect("written");
        for r in [&whole, &written] {
            assert_eq!(r.repetitions.len(), 2);
            assert_eq!(r.failed_repetitions, std::slice::from_ref(&failed));
            let summary = r.summary.as_ref().expect("a summary");
            assert_eq!((summary.repetitions, summary.failed_repetitions, summary.goodput_mbps.median), (2, 1, 200.0));
        }
    }
}
