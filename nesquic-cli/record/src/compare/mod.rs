//! Comparing two runs, the CI regression gate's logic. Counters (syscalls per MB, datagrams per
//! syscall, crypto calls per packet) are exact: their change is held against a tolerance, no test.
//! Noisy figures (goodput, time, CPU) are judged on head/base ratios with a confidence interval:
//! paired round by round when the runs were interleaved (`nesquic ab`), unpaired otherwise. The
//! rows that gate and those that only report are each a family, corrected with Holm's method.
//! A metric fails the gate only if it gates by default ([`MetricDef::gates_by_default`]: the
//! payload sender's sends per MB, the receiver's data receives per MB, CPU per GB, crypto calls
//! per packet) or a rule names it. Nothing is judged ([`Refused`]) when a metric one run measured is missing
//! from the other, a rule names nothing measured, or a side's probes were not all in place.
//! Where a CPU change went (each profile component's and top function's ns per datagram, with
//! intervals) is `components`; which findings changed, `findings_diff`. Rendering is the caller's.

pub mod components;
#[cfg(test)]
mod components_tests;
pub mod findings_diff;
#[cfg(test)]
mod gate_tests;
pub mod ratio_json;
mod samples;

use serde::{Deserialize, Serialize};

pub use nesquic_stats::{holm, RatioEstimate};
pub use samples::{def, from_record, load, DefaultGate, Kind, MetricDef, RunSamples, Unmeasured, METRICS};

use crate::{stats, RecordError};

/// Version of the comparison report's JSON (`nesquic compare/ab --format json`). 2: paired
/// ratios with intervals, Holm-adjusted p-values, `limit_pct`, `gates`, the `worse` verdict.
/// 3: counters gate only in the default set (`worse` otherwise), `cpu_s_per_gb` gates with a
/// default rule, per-call ratios count the calls that moved data, `eagain_recvs`.
/// 4: `sends_per_mb` and `data_recvs_per_mb`, gating on the payload's own path (server sends,
/// client data receives) in place of `syscalls_per_mb`, which reports; the gating rows are a
/// Holm family of their own.
pub const REPORT_VERSION: u32 = 4;

/// The limits a comparison applies where no rule names a metric, and its confidence.
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    /// Tolerance for counters, percent, in the worse direction.
    pub tolerance: f64,
    /// Tolerance for noisy figures, percent, in the worse direction: a noisy figure is worse
    /// only if it is worse by more than this with confidence.
    pub noisy_tolerance: f64,
    /// Family-wise error rate: the chance that an unchanged commit fails on a noisy figure
    /// (Holm-corrected); the intervals are (1 - alpha) two-sided.
    pub alpha: f64,
    /// Fewest repetitions (pairs, when paired) before noisy figures get a verdict.
    pub min_samples: usize,
}

impl Thresholds {
    /// The gate's defaults (`compare`, `ab` and `bisect` flags). A counter's tolerance of 1%
    /// lets a +2% change on a data path fail; unchanged code does not, since the change must
    /// also stand out of the round-to-round wobble (docs/ci.md's benchmark).
    pub const DEFAULT: Self = Self { tolerance: 1.0, noisy_tolerance: 3.0, alpha: 0.005, min_samples: 5 };

    /// These thresholds if every one can judge: limits finite and 0 or more, alpha in (0, 0.5).
    /// A NaN limit would make every figure pass (every comparison with it is false), a negative
    /// one every figure fail.
    pub fn checked(self) -> Result<Self, RecordError> {
        for (flag, value) in [("--tolerance", self.tolerance), ("--noisy-tolerance", self.noisy_tolerance)] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(RecordError::Invalid(format!(
                    "{flag} {value}: give a limit in percent, 0 or more (2 = 2%)"
                )));
            }
        }
        if !(self.alpha > 0.0 && self.alpha < 0.5) {
            return Err(RecordError::Invalid(format!(
                "--alpha {}: give a false-alarm rate between 0 and 0.5 (0.01 = 1%)",
                self.alpha
            )));
        }
        Ok(self)
    }
}

/// Whether samples of the two sides belong together round by round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pairing {
    /// Interleaved rounds (`nesquic ab`): sample i of base and of head ran side by side.
    Paired,
    /// Two runs taken separately: they drift apart on a shared machine.
    Unpaired,
}

/// A failure rule: fail if the relative change passes `limit_pct` in its direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// Metric name, with or without `role.`.
    pub metric: String,
    /// Signed percent: +2 fails on growth above 2%, -5 on shrinkage beyond 5%.
    pub limit_pct: f64,
}

impl Rule {
    /// Parses `METRIC>+N%` / `METRIC<-N%`.
    pub fn parse(text: &str) -> Result<Self, RecordError> {
        let (metric, op, rest) = if let Some((m, r)) = text.split_once('>') {
            (m, '>', r)
        } else if let Some((m, r)) = text.split_once('<') {
            (m, '<', r)
        } else {
            return Err(RecordError::Invalid(format!("rule {text:?}: expected METRIC>+N% or METRIC<-N%")));
        };
        let trimmed = rest.trim();
        // `METRIC>-2%` asks growth to fail beyond a shrinkage: a typo, never guessed at.
        if (op == '>' && trimmed.starts_with('-')) || (op == '<' && trimmed.starts_with('+')) {
            return Err(RecordError::Invalid(format!(
                "rule {text:?}: '>' takes a growth (METRIC>+N%), '<' a shrinkage (METRIC<-N%)"
            )));
        }
        let number = trimmed.trim_end_matches('%').trim_start_matches(['+', '-']);
        let value: f64 = number
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| RecordError::Invalid(format!("rule {text:?}: {rest:?} is not a finite percentage")))?;
        let limit_pct = if op == '>' { value.abs() } else { -value.abs() };
        Self::new(metric.trim(), limit_pct)
    }

    /// A rule on `metric` (checked against the known metrics).
    pub fn new(metric: &str, limit_pct: f64) -> Result<Self, RecordError> {
        // NaN would make the metric unable to fail (every comparison with it is false).
        if !limit_pct.is_finite() {
            return Err(RecordError::Invalid(format!("rule on {metric:?}: limit {limit_pct}% is not a finite number")));
        }
        let bare = metric.rsplit('.').next().unwrap_or(metric);
        if samples::def(bare).is_none() {
            let known: Vec<String> = samples::METRICS.iter().map(|m| format!("{} ({})", m.name, m.meaning)).collect();
            return Err(RecordError::Invalid(format!("unknown metric {metric:?}; known: {}", known.join(", "))));
        }
        Ok(Self { metric: metric.to_string(), limit_pct })
    }

    /// Whether this rule names `key` (`server.send_syscalls`, by its full name or without role).
    pub fn names(&self, key: &str) -> bool {
        self.applies_to(key)
    }

    fn applies_to(&self, key: &str) -> bool {
        key == self.metric || key.rsplit('.').next() == Some(self.metric.as_str())
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let op = if self.limit_pct >= 0.0 { '>' } else { '<' };
        write!(f, "{}{op}{:+}%", self.metric, self.limit_pct)
    }
}

/// One side of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The reference run.
    Base,
    /// The run under review.
    Head,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Base => "base",
            Self::Head => "head",
        })
    }
}

/// Why a comparison cannot be judged: passing it would pass on a figure that was not measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Unjudged {
    /// One run has the metric, the other has no value of it.
    Missing {
        /// The run without it.
        side: Side,
        /// `server.send_syscalls`.
        metric: String,
        /// "its io probes measured nothing".
        why: String,
    },
    /// A run has the metric in some of its repetitions only.
    Partial {
        /// The run with gaps.
        side: Side,
        /// The metric.
        metric: String,
        /// 1-based repetitions without a value.
        missing: Vec<usize>,
        /// Repetitions in that run.
        repetitions: usize,
        /// Why (from the first gap).
        why: String,
    },
    /// A rule names a metric neither run has.
    RuleMatchesNothing {
        /// The rule.
        rule: Rule,
    },
    /// A side's probes were not all in place: an agent that did not start, a function not
    /// patched.
    ProbesNotInPlace {
        /// The run.
        side: Side,
        /// What, in which repetitions.
        problem: String,
    },
    /// A side ran with faults injected on purpose (`NESQUIC_FAULT_*` under
    /// `NESQUIC_ALLOW_FAULTS=1`): its figures describe the perturbation, not the stack.
    FaultsInjected {
        /// The run.
        side: Side,
        /// `NAME=VALUE` of each fault.
        faults: Vec<String>,
    },
    /// A side had a repetition fail: its samples are the repetitions measured before, and a
    /// run that failed is not judged (whatever failed may be what changed).
    RepetitionFailed {
        /// The run.
        side: Side,
        /// "repetition 3 failed: ...".
        failure: String,
    },
    /// A side's record is from a run that did not finish (killed, or still running).
    NotFinished {
        /// The run.
        side: Side,
        /// Repetitions measured until then.
        repetitions: usize,
    },
}

impl std::fmt::Display for Unjudged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing { side, metric, why } => write!(f, "{side} has no {metric}: {why}"),
            Self::Partial { side, metric, missing, repetitions, why } => write!(
                f,
                "{side} has no {metric} in {} of {repetitions}: {why}",
                samples::repetitions_text(missing, *repetitions)
            ),
            Self::RuleMatchesNothing { rule } => {
                write!(f, "rule {rule}: no such metric in these runs (neither measured it)")
            }
            Self::ProbesNotInPlace { side, problem } => write!(f, "{side}: {problem}"),
            Self::FaultsInjected { side, faults } => {
                write!(f, "{side} ran with faults injected on purpose ({})", faults.join(", "))
            }
            Self::RepetitionFailed { side, failure } => {
                write!(f, "{side}: {failure}; a run with a failed repetition is not judged (run it again)")
            }
            Self::NotFinished { side, repetitions } => write!(
                f,
                "{side} did not finish (nesquic was stopped, or still runs; {repetitions} repetition(s) recorded): \
                 compare finished runs"
            ),
        }
    }
}

/// A comparison that judged nothing, and every reason why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("nothing judged: {}", self.lines().join("\n  "))]
pub struct Refused {
    /// Each reason.
    pub reasons: Vec<Unjudged>,
}

impl Refused {
    /// The reasons as printed, one a line: metrics a run lacks for one reason share a line
    /// (a side whose io probes saw nothing lacks ten).
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<(Option<(Side, &str)>, String)> = Vec::new();
        for reason in &self.reasons {
            if let Unjudged::Missing { side, metric, why } = reason {
                let key = Some((*side, why.as_str()));
                if let Some((_, metrics)) = lines.iter_mut().find(|(k, _)| *k == key) {
                    metrics.push_str(&format!(", {metric}"));
                    continue;
                }
                lines.push((key, metric.clone()));
            } else {
                lines.push((None, reason.to_string()));
            }
        }
        lines
            .into_iter()
            .map(|(key, text)| match key {
                Some((side, why)) => format!("{side} has no {text}: {why}"),
                None => text,
            })
            .collect()
    }
}

/// Verdict for one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Worse beyond the limit (with confidence, for noisy figures) on a metric that gates.
    Regression,
    /// Worse beyond the limit (with confidence, for noisy figures) on a metric that does not
    /// gate (no rule names it, and it does not gate by default): reported only.
    Worse,
    /// Better beyond the limit (with confidence, for noisy figures).
    Improvement,
    /// Within the limit (for noisy figures: the whole interval).
    Unchanged,
    /// Too few samples, or an interval that straddles the limit.
    Inconclusive,
}

/// One row of the comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// `goodput_mbps`, `server.syscalls_per_mb`, ...
    pub metric: String,
    /// Counter or noisy.
    pub kind: Kind,
    /// Median of the base samples.
    pub base: f64,
    /// Median of the head samples.
    pub head: f64,
    /// head - base (medians).
    pub change: f64,
    /// Relative change, percent: the median of the paired ratios for counters, the interval's
    /// point estimate for noisy figures, else the ratio of medians. A figure that appeared from a
    /// base of 0 is an unbounded change: infinite here, `null` in JSON (which has no infinity).
    #[serde(deserialize_with = "null_is_from_zero")]
    pub change_pct: f64,
    /// The limit applied, signed percent in the direction that fails (+2: growth beyond 2%).
    pub limit_pct: f64,
    /// Whether this metric can fail the gate (it gates by default, or a rule names it).
    pub gates: bool,
    /// Samples per side.
    pub samples: (usize, usize),
    /// Paired or not, for this metric (paired runs with missing samples fall back).
    pub pairing: Pairing,
    /// Noisy figures: head/base with its (1 - alpha) interval.
    #[serde(default, with = "ratio_json")]
    pub interval: Option<RatioEstimate>,
    /// Noisy figures: Holm-adjusted one-sided p-value that the change is worse than the limit.
    pub p_value: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why.
    pub reason: String,
}

/// Rules from a TOML file: a `[fail_on]` table of `METRIC = "+N%"` entries.
pub fn rules_from_file(path: &std::path::Path) -> Result<Vec<Rule>, RecordError> {
    #[derive(serde::Deserialize)]
    struct File {
        fail_on: std::collections::BTreeMap<String, String>,
    }
    let text = std::fs::read_to_string(path).map_err(|source| RecordError::Io { path: path.to_path_buf(), source })?;
    let file: File = toml::from_str(&text)
        .map_err(|e| RecordError::Invalid(format!("{}: expected [fail_on] METRIC = \"+N%\" ({e})", path.display())))?;
    file.fail_on
        .iter()
        .map(|(metric, limit)| {
            let v: f64 = limit.trim().trim_end_matches('%').trim_start_matches('+').parse().map_err(|_| {
                RecordError::Invalid(format!("{}: {metric} = {limit:?} is not a signed percentage", path.display()))
            })?;
            Rule::new(metric, v)
        })
        .collect()
}

/// One row per metric the runs have, with a verdict under `rules` (else the metric's default
/// gate and the thresholds). With `Pairing::Paired`, sample i of each side belongs to round i.
/// Refused, with every reason, when a metric one run has is missing (wholly or in some
/// repetitions) from the other, a rule names no metric of either run, or a side's probes were
/// not all in place.
pub fn compare(
    base: &RunSamples,
    head: &RunSamples,
    rules: &[Rule],
    thresholds: &Thresholds,
    pairing: Pairing,
) -> Result<Vec<Row>, Refused> {
    let mut reasons = Vec::new();
    for (side, run) in [(Side::Base, base), (Side::Head, head)] {
        reasons.extend(run.probe_failures.iter().map(|p| Unjudged::ProbesNotInPlace { side, problem: p.clone() }));
        if !run.faults.is_empty() {
            reasons.push(Unjudged::FaultsInjected { side, faults: run.faults.clone() });
        }
        reasons.extend(run.failed_repetitions.iter().map(|f| Unjudged::RepetitionFailed { side, failure: f.clone() }));
        if run.in_progress {
            reasons.push(Unjudged::NotFinished { side, repetitions: run.repetitions });
        }
    }
    let mut rows = Vec::new();
    for def in samples::METRICS {
        let mut keys: Vec<&String> = base.metrics.keys().chain(head.metrics.keys()).collect();
        keys.retain(|k| k.rsplit('.').next() == Some(def.name));
        keys.sort();
        keys.dedup();
        for key in keys {
            let (b, h) = match (base.metrics.get(key), head.metrics.get(key)) {
                (Some(b), Some(h)) => (b, h),
                (b, _) => {
                    let (side, run) = if b.is_some() { (Side::Head, head) } else { (Side::Base, base) };
                    let why = run.unmeasured.get(key).map_or("not in the record".into(), |u| u.why.clone());
                    reasons.push(Unjudged::Missing { side, metric: key.clone(), why });
                    continue;
                }
            };
            let mut gaps = false;
            for (side, run) in [(Side::Base, base), (Side::Head, head)] {
                if let Some(u) = run.unmeasured.get(key) {
                    gaps = true;
                    reasons.push(Unjudged::Partial {
                        side,
                        metric: key.clone(),
                        missing: u.repetitions.clone(),
                        repetitions: run.repetitions,
                        why: u.why.clone(),
                    });
                }
            }
            if gaps {
                continue;
            }
            let (Some(bm), Some(hm)) = (stats::median(b), stats::median(h)) else { continue };
            rows.push(row(def, key, (b, h), (bm, hm), rules, thresholds, pairing));
        }
    }
    for rule in rules {
        if !base.metrics.keys().chain(head.metrics.keys()).any(|k| rule.applies_to(k)) {
            reasons.push(Unjudged::RuleMatchesNothing { rule: rule.clone() });
        }
    }
    if !reasons.is_empty() {
        return Err(Refused { reasons });
    }
    judge(&mut rows, thresholds);
    Ok(rows)
}

/// The row of `key` (metric `def`) before the verdict: its limit, whether it gates, the change
/// and its interval.
fn row(
    def: &MetricDef,
    key: &str,
    (b, h): (&[f64], &[f64]),
    (bm, hm): (f64, f64),
    rules: &[Rule],
    thresholds: &Thresholds,
    pairing: Pairing,
) -> Row {
    let rule = rules.iter().find(|r| r.applies_to(key));
    let tolerance = if def.kind == Kind::Counter { thresholds.tolerance } else { thresholds.noisy_tolerance };
    let worse = |pct: f64| if def.higher_is_better { -pct } else { pct };
    let (limit_pct, gates, reason) = match (rule, def.gates_by_default) {
        (Some(r), _) => (r.limit_pct, true, format!("rule {r}")),
        (None, DefaultGate::Limit(pct)) => {
            let r = Rule { metric: def.name.into(), limit_pct: worse(pct) };
            (r.limit_pct, true, format!("default rule {r}"))
        }
        (None, DefaultGate::Tolerance) => (worse(tolerance), true, format!("limit {:+}%", worse(tolerance))),
        (None, DefaultGate::DataPath(role)) => {
            let own = key.split_once('.').is_some_and(|(r, _)| r == role.name());
            (worse(tolerance), own, format!("limit {:+}%", worse(tolerance)))
        }
        (None, DefaultGate::Report) => (worse(tolerance), false, format!("limit {:+}%", worse(tolerance))),
    };
    let pairing = if pairing == Pairing::Paired && b.len() == h.len() { pairing } else { Pairing::Unpaired };
    let mut row = Row {
        metric: key.to_string(),
        kind: def.kind,
        base: bm,
        head: hm,
        change: hm - bm,
        change_pct: relative_pct(bm, hm),
        limit_pct,
        gates,
        samples: (b.len(), h.len()),
        pairing,
        interval: None,
        p_value: None,
        verdict: Verdict::Inconclusive,
        reason,
    };
    estimate(&mut row, b, h, thresholds);
    row
}

/// 100 * (head - base) / |base|; 0 when base is 0.
/// A figure that appears from 0 (drops, EAGAIN) is an unbounded change, not +0%: it passes any
/// limit in its direction (shown as "from 0").
fn relative_pct(base: f64, head: f64) -> f64 {
    if base != 0.0 {
        100.0 * (head - base) / base.abs()
    } else if head == 0.0 {
        0.0
    } else {
        f64::INFINITY.copysign(head)
    }
}

/// `change_pct` from JSON: `null` is what serde_json writes for the infinite change of a figure
/// that appeared from 0 (counts only grow from 0, so it is +infinity).
fn null_is_from_zero<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(deserializer)?.unwrap_or(f64::INFINITY))
}

/// A confidence as a percentage, to a tenth where it has one: 99, 99.5.
pub fn percent(confidence: f64) -> f64 {
    (1000.0 * confidence).round() / 10.0
}

/// A relative change as the reports print it: `+2.50%`, or `from 0` where the base was 0.
pub fn format_change_pct(pct: f64, decimals: usize) -> String {
    if pct.is_finite() {
        format!("{pct:+.decimals$}%")
    } else {
        "from 0".to_string()
    }
}

/// Whether a change of `change_pct` passes the signed `limit_pct` in its direction.
fn beyond(change_pct: f64, limit_pct: f64) -> bool {
    if limit_pct >= 0.0 {
        change_pct > limit_pct
    } else {
        change_pct < limit_pct
    }
}

/// Fewest samples a side for an interval: two for counters (their change is exact, the
/// interval only tells wobble from change), `min_samples` for noisy figures.
fn needed(kind: Kind, t: &Thresholds) -> usize {
    match kind {
        Kind::Counter => 2,
        Kind::Noisy => t.min_samples.max(2),
    }
}

/// First pass: the change, the interval and the raw one-sided p-value (adjusted in [`judge`]).
/// Counters: the change is the median of the paired ratios (else the ratio of the medians),
/// tested against no change at all; noisy figures: the interval's point estimate, tested
/// against the limit.
fn estimate(row: &mut Row, b: &[f64], h: &[f64], t: &Thresholds) {
    let paired = row.pairing == Pairing::Paired;
    if row.kind == Kind::Counter && paired && b.iter().all(|&x| x > 0.0) {
        let ratios: Vec<f64> = b.iter().zip(h).map(|(b, h)| h / b).collect();
        if let Some(m) = stats::median(&ratios) {
            row.change_pct = 100.0 * (m - 1.0);
        }
    }
    if b.len().min(h.len()) < needed(row.kind, t) {
        return;
    }
    let confidence = 1.0 - t.alpha;
    let estimate =
        if paired { RatioEstimate::paired(b, h, confidence) } else { RatioEstimate::unpaired(b, h, confidence) };
    let Some(e) = estimate else { return };
    let null = match row.kind {
        Kind::Counter => 1.0,
        Kind::Noisy => 1.0 + row.limit_pct / 100.0,
    };
    row.p_value = Some(if row.limit_pct >= 0.0 { e.p_above(null) } else { e.p_below(null) });
    if row.kind == Kind::Noisy {
        row.change_pct = 100.0 * (e.ratio - 1.0);
    }
    row.interval = Some(e);
}

/// Second pass: Holm over each family tested at once, then the verdicts. The rows that gate are
/// one family (the chance that unchanged code fails the gate is theirs alone), the rows that
/// only report another: a report-only row cannot fail the gate, so it need not dilute the test
/// of those that can.
fn judge(rows: &mut [Row], t: &Thresholds) {
    let mut family_size = vec![0; rows.len()];
    for gates in [true, false] {
        let tested: Vec<usize> =
            (0..rows.len()).filter(|&i| rows[i].gates == gates && rows[i].p_value.is_some()).collect();
        let raw: Vec<f64> = tested.iter().filter_map(|&i| rows[i].p_value).collect();
        for (&i, adjusted) in tested.iter().zip(holm(&raw)) {
            rows[i].p_value = Some(adjusted);
            family_size[i] = raw.len();
        }
    }
    for (row, &family) in rows.iter_mut().zip(&family_size) {
        row.verdict = match row.kind {
            Kind::Counter => counter_verdict(row, t.alpha),
            Kind::Noisy => noisy_verdict(row, t.alpha),
        };
        if row.verdict == Verdict::Regression && !row.gates {
            row.verdict = Verdict::Worse;
        }
        let detail = detail(row, t, family);
        row.reason = format!("{}, {detail}", row.reason);
    }
}

/// Counters: the tolerance applies to the change itself; repetitions only have to show that
/// the change is not run-to-run wobble (ACK timing moves syscall counts by several percent).
fn counter_verdict(row: &Row, alpha: f64) -> Verdict {
    // Without repetitions the counts are all there is.
    let significant = row.p_value.is_none_or(|p| p < alpha);
    let better_for_sure = row.interval.is_none_or(|e| if row.limit_pct >= 0.0 { e.high < 1.0 } else { e.low > 1.0 });
    if beyond(row.change_pct, row.limit_pct) {
        if significant {
            Verdict::Regression
        } else {
            Verdict::Inconclusive
        }
    } else if beyond(row.change_pct, -row.limit_pct) && better_for_sure {
        Verdict::Improvement
    } else {
        Verdict::Unchanged
    }
}

/// Noisy figures: worse only when the data say worse than the limit with confidence; fine when
/// the whole interval is within it; inconclusive in between.
fn noisy_verdict(row: &Row, alpha: f64) -> Verdict {
    let Some(e) = row.interval else { return Verdict::Inconclusive };
    // The interval's bound on the failing side, as a relative change, percent.
    let worst = 100.0 * if row.limit_pct >= 0.0 { e.high - 1.0 } else { e.low - 1.0 };
    if row.p_value.is_some_and(|p| p < alpha) {
        if row.gates {
            Verdict::Regression
        } else {
            Verdict::Worse
        }
    } else if beyond(worst, -row.limit_pct) {
        Verdict::Improvement
    } else if !beyond(worst, row.limit_pct) {
        Verdict::Unchanged
    } else {
        Verdict::Inconclusive
    }
}

/// What the verdict rests on, after the limit.
fn detail(row: &Row, t: &Thresholds, family: usize) -> String {
    let gate = if row.gates { "" } else { "; report only (no rule names it)" };
    format!("{}{gate}", evidence(row, t, family))
}

/// The samples, interval and test behind a verdict.
fn evidence(row: &Row, t: &Thresholds, family: usize) -> String {
    let pairing = match row.pairing {
        Pairing::Paired => "paired",
        Pairing::Unpaired => "unpaired",
    };
    let (Some(e), Some(p)) = (row.interval, row.p_value) else {
        let (b, h) = row.samples;
        return match row.kind {
            Kind::Counter if b.min(h) < 2 => "exact counter (one sample a side: no test)".into(),
            Kind::Counter => "exact counter (a zero count: no test)".into(),
            Kind::Noisy if b.min(h) < needed(row.kind, t) => {
                format!("{b} vs {h} samples, need {} each (more rounds)", needed(row.kind, t))
            }
            Kind::Noisy => "a sample is zero or negative: no ratio".into(),
        };
    };
    let interval =
        format!("ratio {:.3} [{:.3}, {:.3}] at {}% ({pairing})", e.ratio, e.low, e.high, percent(e.confidence));
    let tested = if row.gates { "gating rows tested" } else { "report-only rows tested" };
    match row.kind {
        Kind::Counter => {
            let wobble = if row.verdict == Verdict::Inconclusive {
                "; beyond the limit, but so is run-to-run wobble"
            } else {
                ""
            };
            format!("exact counter, {interval}, p={p:.3} against no change (Holm, {family} {tested}){wobble}")
        }
        Kind::Noisy => format!("{interval}, p={p:.3} against the limit (Holm, {family} {tested})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use statrs::distribution::{ContinuousCDF, Normal};

    const GATE: Thresholds = Thresholds { tolerance: 2.0, noisy_tolerance: 3.0, alpha: 0.01, min_samples: 5 };

    /// Draws normal noise from a seeded generator, so the tests are repeatable.
    struct Noise(fastrand::Rng);

    impl Noise {
        fn new(seed: u64) -> Self {
            Self(fastrand::Rng::with_seed(seed))
        }

        /// A factor around 1 with relative standard deviation `sd`.
        fn factor(&mut self, sd: f64) -> f64 {
            let unit = Normal::new(0.0, 1.0).expect("standard normal");
            // Keep u away from 0 and 1, where the quantile is infinite.
            let u = self.0.f64().clamp(1e-12, 1.0 - 1e-12);
            (1.0 + sd * unit.inverse_cdf(u)).max(0.05)
        }
    }

    /// `rounds` interleaved rounds of one noisy figure (CPU seconds) and one counter (syscalls
    /// per MB): head's figure is `shift` times base's; every round shares a drift factor
    /// (the machine's state), each side adds its own `noise`.
    fn rounds(noise: &mut Noise, rounds: usize, shift: f64, sd: f64, drift: f64) -> (RunSamples, RunSamples) {
        let side = || RunSamples::new("quinn", "bulk", rounds);
        let (mut base, mut head) = (side(), side());
        for _ in 0..rounds {
            let machine = noise.factor(drift);
            let cpu = |n: &mut Noise| 0.1 * machine * n.factor(sd);
            base.metrics.entry("server.cpu_s".into()).or_default().push(cpu(noise));
            head.metrics.entry("server.cpu_s".into()).or_default().push(shift * cpu(noise));
            base.metrics.entry("server.sends_per_mb".into()).or_default().push(400.0);
            head.metrics.entry("server.sends_per_mb".into()).or_default().push(400.0);
        }
        (base, head)
    }

    /// `compare` under the GATE thresholds, which must judge.
    fn judged(base: &RunSamples, head: &RunSamples, rules: &[Rule], pairing: Pairing) -> Vec<Row> {
        compare(base, head, rules, &GATE, pairing).expect("judged")
    }

    fn verdict(rows: &[Row], metric: &str) -> Verdict {
        rows.iter().find(|r| r.metric == metric).map(|r| r.verdict).expect("metric compared")
    }

    fn cpu_rule() -> Vec<Rule> {
        vec![Rule::parse("cpu_s>+3%").expect("rule")]
    }

    #[test]
    fn verdicts_on_synthetic_rounds() {
        // (what, seed, head/base, noise of each side, drift shared by a round, CPU's verdict
        // under the rule cpu_s>+3%, and without a rule)
        let cases = [
            ("equal distributions pass", 1, 1.0, 0.005, 0.1, Verdict::Unchanged, Verdict::Unchanged),
            ("+5% with low noise fails", 2, 1.05, 0.005, 0.1, Verdict::Regression, Verdict::Worse),
            ("+5% with 20% noise is inconclusive", 3, 1.05, 0.2, 0.1, Verdict::Inconclusive, Verdict::Inconclusive),
        ];
        for (what, seed, shift, sd, drift, ruled, reported) in cases {
            let (base, head) = rounds(&mut Noise::new(seed), 10, shift, sd, drift);
            let rows = judged(&base, &head, &cpu_rule(), Pairing::Paired);
            assert_eq!(verdict(&rows, "server.cpu_s"), ruled, "{what}: {rows:#?}");
            assert_eq!(verdict(&rows, "server.sends_per_mb"), Verdict::Unchanged, "{what}");
            let rows = judged(&base, &head, &[], Pairing::Paired);
            assert_eq!(verdict(&rows, "server.cpu_s"), reported, "{what}, report only: {rows:#?}");
        }
    }

    #[test]
    fn pairing_removes_the_drift_that_unpaired_runs_suffer() {
        // 30% drift shared by both sides of a round, 0.5% noise of their own: paired, a +5%
        // shift is certain; unpaired, the drift hides it.
        let mut noise = Noise::new(4);
        let (base, head) = rounds(&mut noise, 10, 1.05, 0.005, 0.3);
        let paired = judged(&base, &head, &cpu_rule(), Pairing::Paired);
        let unpaired = judged(&base, &head, &cpu_rule(), Pairing::Unpaired);
        assert_eq!(verdict(&paired, "server.cpu_s"), Verdict::Regression);
        assert_eq!(verdict(&unpaired, "server.cpu_s"), Verdict::Inconclusive, "{unpaired:#?}");
    }

    #[test]
    fn false_alarms_on_unchanged_code_stay_below_one_percent() {
        // 2,000 A/A comparisons, every noisy figure gated by a rule, noise of 5% and drift of
        // 10%: the defaults (Holm at alpha 0.01 against a 3% limit) must fail at most 1%.
        let mut noise = Noise::new(5);
        let mut failures_at = |shift: f64| {
            (0..2000)
                .filter(|_| {
                    let (base, head) = rounds(&mut noise, 10, shift, 0.05, 0.1);
                    let rows = judged(&base, &head, &cpu_rule(), Pairing::Paired);
                    rows.iter().any(|r| r.verdict == Verdict::Regression)
                })
                .count()
        };
        let failures = failures_at(1.0);
        eprintln!("{failures} of 2000 synthetic A/A comparisons failed");
        assert!(failures <= 20, "{failures} of 2000 A/A comparisons failed");
        // The test is calibrated, not merely timid: a change of exactly the limit (+3%) fails
        // about alpha / 2 of the time (Holm over the two metrics tested: 10 of 2,000 expected).
        let at_limit = failures_at(1.03);
        eprintln!("{at_limit} of 2000 comparisons at the limit failed");
        assert!((4..=20).contains(&at_limit), "{at_limit} of 2000 at the limit failed; alpha is 1%");
    }

    #[test]
    fn counters_are_exact() {
        let mut noise = Noise::new(6);
        let (base, mut head) = rounds(&mut noise, 3, 1.0, 0.01, 0.0);
        for v in head.metrics.get_mut("server.sends_per_mb").expect("counter") {
            *v *= 1.03;
        }
        let rows = judged(&base, &head, &[], Pairing::Paired);
        assert_eq!(verdict(&rows, "server.sends_per_mb"), Verdict::Regression, "+3% beyond the 2% tolerance");
        // Three rounds are too few for a noisy verdict, not for a counter.
        assert_eq!(verdict(&rows, "server.cpu_s"), Verdict::Inconclusive);
        // A counter that wobbles by 10% a round (ACK-driven syscalls) on unchanged code: its
        // median change passes 2% most of the time, yet it must not fail the gate.
        let (mut beyond_tolerance, mut failed) = (0, 0);
        for _ in 0..200 {
            let (base10, mut wobbly) = rounds(&mut noise, 10, 1.0, 0.01, 0.0);
            for h in wobbly.metrics.get_mut("server.sends_per_mb").expect("counter") {
                *h *= noise.factor(0.1);
            }
            let rows = judged(&base10, &wobbly, &[], Pairing::Paired);
            let row = rows.iter().find(|r| r.metric == "server.sends_per_mb").expect("row");
            beyond_tolerance += usize::from(row.change_pct.abs() > 2.0);
            failed += usize::from(row.verdict == Verdict::Regression);
        }
        assert!(beyond_tolerance > 100 && failed <= 2, "{beyond_tolerance} beyond 2%, {failed} failed of 200");
        let loose = Thresholds { tolerance: 5.0, ..GATE };
        assert_eq!(
            verdict(&compare(&base, &head, &[], &loose, Pairing::Paired).expect("judged"), "server.sends_per_mb"),
            Verdict::Unchanged
        );
    }

    #[test]
    fn rules_parse() {
        assert_eq!(Rule::parse("syscalls_per_mb>+2%").expect("rule").limit_pct, 2.0);
        assert_eq!(Rule::parse("server.goodput_mbps<-5%").expect("rule").limit_pct, -5.0);
        assert!(Rule::parse("nonsense>+2%").is_err());
        assert!(Rule::parse("goodput_mbps=5").is_err());
        let r = Rule::parse("syscalls_per_mb>+2%").expect("rule");
        assert!(r.applies_to("server.syscalls_per_mb") && beyond(2.5, r.limit_pct) && !beyond(1.5, r.limit_pct));
        let g = Rule::parse("goodput_mbps<-5%").expect("rule");
        assert!(beyond(-6.0, g.limit_pct) && !beyond(-4.0, g.limit_pct) && !beyond(10.0, g.limit_pct));
    }

    /// A limit that is not a finite number, or of the sign the other way round, is refused:
    /// `cpu_s>nan%` made cpu_s unable to fail.
    #[test]
    fn rules_with_limits_that_cannot_judge_are_refused() {
        for bad in ["cpu_s>nan%", "cpu_s>+inf%", "cpu_s<-infinity%", "cpu_s>-2%", "cpu_s<+2%", "cpu_s>NaN"] {
            let err = Rule::parse(bad).expect_err(bad).to_string();
            assert!(err.contains(bad), "{bad}: {err}");
        }
        assert!(Rule::new("cpu_s", f64::NAN).is_err() && Rule::new("cpu_s", f64::INFINITY).is_err());
        assert_eq!(Rule::parse("cpu_s<5%").expect("a bare number with <").limit_pct, -5.0);
    }
}
