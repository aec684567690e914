//! Comparing two runs, the CI regression gate's logic. Counters (syscalls per MB, datagrams per
//! syscall, crypto calls per packet) are exact: their change is held against a tolerance, no test.
//! Noisy figures (goodput, time, CPU) are judged on head/base ratios with a confidence interval:
//! paired round by round when the runs were interleaved (`nesquic ab`), unpaired otherwise. The
//! family of noisy figures is corrected with Holm's method; a noisy figure fails the gate only
//! when a rule names it and the data say it is worse than the rule's limit. Rendering is the
//! caller's.

mod family;
mod ratio;
mod samples;

use serde::Serialize;

pub use family::holm;
pub use ratio::RatioEstimate;
pub use samples::{def, from_record, load, Kind, MetricDef, RunSamples, METRICS};

use crate::{stats, RecordError};

/// Version of the comparison report's JSON (`nesquic compare/ab --format json`). 2: paired
/// ratios with intervals, Holm-adjusted p-values, `limit_pct`, `gates`, the `worse` verdict.
pub const REPORT_VERSION: u32 = 2;

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

/// Whether samples of the two sides belong together round by round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pairing {
    /// Interleaved rounds (`nesquic ab`): sample i of base and of head ran side by side.
    Paired,
    /// Two runs taken separately: they drift apart on a shared machine.
    Unpaired,
}

/// A failure rule: fail if the relative change passes `limit_pct` in its direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
        let number = rest.trim().trim_end_matches('%').trim_start_matches('+');
        let value: f64 =
            number.parse().map_err(|_| RecordError::Invalid(format!("rule {text:?}: {rest:?} is not a percentage")))?;
        let limit_pct = if op == '>' { value.abs() } else { -value.abs() };
        Self::new(metric.trim(), limit_pct)
    }

    /// A rule on `metric` (checked against the known metrics).
    pub fn new(metric: &str, limit_pct: f64) -> Result<Self, RecordError> {
        let bare = metric.rsplit('.').next().unwrap_or(metric);
        if samples::def(bare).is_none() {
            let known: Vec<String> = samples::METRICS.iter().map(|m| format!("{} ({})", m.name, m.meaning)).collect();
            return Err(RecordError::Invalid(format!("unknown metric {metric:?}; known: {}", known.join(", "))));
        }
        Ok(Self { metric: metric.to_string(), limit_pct })
    }

    fn applies_to(&self, key: &str) -> bool {
        key == self.metric || key.rsplit('.').next() == Some(self.metric.as_str())
    }
}

/// Verdict for one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Worse beyond the limit (with confidence, for noisy figures) on a metric that gates.
    Regression,
    /// Worse beyond the limit with confidence, on a noisy figure no rule names: reported only.
    Worse,
    /// Better beyond the limit (with confidence, for noisy figures).
    Improvement,
    /// Within the limit (for noisy figures: the whole interval).
    Unchanged,
    /// Too few samples, or an interval that straddles the limit.
    Inconclusive,
}

/// One row of the comparison.
#[derive(Debug, Clone, Serialize)]
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
    /// point estimate for noisy figures, else the ratio of medians.
    pub change_pct: f64,
    /// The limit applied, signed percent in the direction that fails (+2: growth beyond 2%).
    pub limit_pct: f64,
    /// Whether this metric can fail the gate (counters, and noisy figures a rule names).
    pub gates: bool,
    /// Samples per side.
    pub samples: (usize, usize),
    /// Paired or not, for this metric (paired runs with missing samples fall back).
    pub pairing: Pairing,
    /// Noisy figures: head/base with its (1 - alpha) interval.
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

/// One row per metric both runs have, with a verdict under `rules` (else the thresholds). With
/// `Pairing::Paired`, sample i of each side belongs to round i.
pub fn compare(
    base: &RunSamples,
    head: &RunSamples,
    rules: &[Rule],
    thresholds: &Thresholds,
    pairing: Pairing,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for def in samples::METRICS {
        for (key, b) in base.metrics.iter().filter(|(k, _)| k.rsplit('.').next() == Some(def.name)) {
            let Some(h) = head.metrics.get(key) else { continue };
            let (Some(bm), Some(hm)) = (stats::median(b), stats::median(h)) else { continue };
            let rule = rules.iter().find(|r| r.applies_to(key));
            let default = if def.kind == Kind::Counter { thresholds.tolerance } else { thresholds.noisy_tolerance };
            let limit_pct = rule.map_or(if def.higher_is_better { -default } else { default }, |r| r.limit_pct);
            let pairing = if pairing == Pairing::Paired && b.len() == h.len() { pairing } else { Pairing::Unpaired };
            let mut row = Row {
                metric: key.clone(),
                kind: def.kind,
                base: bm,
                head: hm,
                change: hm - bm,
                change_pct: relative_pct(bm, hm),
                limit_pct,
                gates: def.kind == Kind::Counter || rule.is_some(),
                samples: (b.len(), h.len()),
                pairing,
                interval: None,
                p_value: None,
                verdict: Verdict::Inconclusive,
                reason: String::new(),
            };
            row.reason = match rule {
                Some(r) => format!("rule {}{:+}%", r.metric, r.limit_pct),
                None => format!("limit {limit_pct:+}%"),
            };
            estimate(&mut row, b, h, thresholds);
            rows.push(row);
        }
    }
    judge(&mut rows, thresholds);
    rows
}

/// 100 * (head - base) / |base|; 0 when base is 0.
fn relative_pct(base: f64, head: f64) -> f64 {
    if base != 0.0 {
        100.0 * (head - base) / base.abs()
    } else {
        0.0
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

/// Second pass: Holm over every metric tested (the family tested at once), then the verdicts.
fn judge(rows: &mut [Row], t: &Thresholds) {
    let tested: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].p_value.is_some()).collect();
    let raw: Vec<f64> = tested.iter().filter_map(|&i| rows[i].p_value).collect();
    for (&i, adjusted) in tested.iter().zip(holm(&raw)) {
        rows[i].p_value = Some(adjusted);
    }
    for row in rows.iter_mut() {
        row.verdict = match row.kind {
            Kind::Counter => counter_verdict(row, t.alpha),
            Kind::Noisy => noisy_verdict(row, t.alpha),
        };
        let detail = detail(row, t, raw.len());
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
        format!("ratio {:.3} [{:.3}, {:.3}] at {:.0}% ({pairing})", e.ratio, e.low, e.high, e.confidence * 100.0);
    match row.kind {
        Kind::Counter => {
            let wobble = if row.verdict == Verdict::Inconclusive {
                "; beyond the limit, but so is run-to-run wobble"
            } else {
                ""
            };
            format!("exact counter, {interval}, p={p:.3} against no change (Holm, {family} tested){wobble}")
        }
        Kind::Noisy => {
            let gate = if row.gates { "" } else { "; report only (no rule names it)" };
            format!("{interval}, p={p:.3} against the limit (Holm, {family} tested){gate}")
        }
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

    /// `rounds` interleaved rounds of one noisy figure (CPU seconds) and one counter (send
    /// syscalls): head's figure is `shift` times base's; every round shares a drift factor
    /// (the machine's state), each side adds its own `noise`.
    fn rounds(noise: &mut Noise, rounds: usize, shift: f64, sd: f64, drift: f64) -> (RunSamples, RunSamples) {
        let side = || RunSamples { lut: "quinn".into(), testcase: "bulk".into(), metrics: Default::default() };
        let (mut base, mut head) = (side(), side());
        for _ in 0..rounds {
            let machine = noise.factor(drift);
            let cpu = |n: &mut Noise| 0.1 * machine * n.factor(sd);
            base.metrics.entry("server.cpu_s".into()).or_default().push(cpu(noise));
            head.metrics.entry("server.cpu_s".into()).or_default().push(shift * cpu(noise));
            base.metrics.entry("server.send_syscalls".into()).or_default().push(400.0);
            head.metrics.entry("server.send_syscalls".into()).or_default().push(400.0);
        }
        (base, head)
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
            let rows = compare(&base, &head, &cpu_rule(), &GATE, Pairing::Paired);
            assert_eq!(verdict(&rows, "server.cpu_s"), ruled, "{what}: {rows:#?}");
            assert_eq!(verdict(&rows, "server.send_syscalls"), Verdict::Unchanged, "{what}");
            let rows = compare(&base, &head, &[], &GATE, Pairing::Paired);
            assert_eq!(verdict(&rows, "server.cpu_s"), reported, "{what}, report only: {rows:#?}");
        }
    }

    #[test]
    fn pairing_removes_the_drift_that_unpaired_runs_suffer() {
        // 30% drift shared by both sides of a round, 0.5% noise of their own: paired, a +5%
        // shift is certain; unpaired, the drift hides it.
        let mut noise = Noise::new(4);
        let (base, head) = rounds(&mut noise, 10, 1.05, 0.005, 0.3);
        let paired = compare(&base, &head, &cpu_rule(), &GATE, Pairing::Paired);
        let unpaired = compare(&base, &head, &cpu_rule(), &GATE, Pairing::Unpaired);
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
                    let rows = compare(&base, &head, &cpu_rule(), &GATE, Pairing::Paired);
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
        for v in head.metrics.get_mut("server.send_syscalls").expect("counter") {
            *v *= 1.03;
        }
        let rows = compare(&base, &head, &[], &GATE, Pairing::Paired);
        assert_eq!(verdict(&rows, "server.send_syscalls"), Verdict::Regression, "+3% beyond the 2% tolerance");
        // Three rounds are too few for a noisy verdict, not for a counter.
        assert_eq!(verdict(&rows, "server.cpu_s"), Verdict::Inconclusive);
        // A counter that wobbles by 10% a round (ACK-driven syscalls) on unchanged code: its
        // median change passes 2% most of the time, yet it must not fail the gate.
        let (mut beyond_tolerance, mut failed) = (0, 0);
        for _ in 0..200 {
            let (base10, mut wobbly) = rounds(&mut noise, 10, 1.0, 0.01, 0.0);
            for h in wobbly.metrics.get_mut("server.send_syscalls").expect("counter") {
                *h *= noise.factor(0.1);
            }
            let rows = compare(&base10, &wobbly, &[], &GATE, Pairing::Paired);
            let row = rows.iter().find(|r| r.metric == "server.send_syscalls").expect("row");
            beyond_tolerance += usize::from(row.change_pct.abs() > 2.0);
            failed += usize::from(row.verdict == Verdict::Regression);
        }
        assert!(beyond_tolerance > 100 && failed <= 2, "{beyond_tolerance} beyond 2%, {failed} failed of 200");
        let loose = Thresholds { tolerance: 5.0, ..GATE };
        assert_eq!(
            verdict(&compare(&base, &head, &[], &loose, Pairing::Paired), "server.send_syscalls"),
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
}
