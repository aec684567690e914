//! Comparing two runs, the CI regression gate's logic: counters (syscalls per MB, datagrams per
//! syscall, crypto calls per packet) against a tolerance (and, given repetitions on both sides,
//! a significant difference); noisy figures (goodput, time, CPU) by a Mann-Whitney U test plus a
//! minimum effect, "inconclusive" with too few samples. Rendering is the caller's.

mod samples;

use serde::Serialize;

pub use samples::{def, load, Kind, MetricDef, RunSamples, METRICS};

use crate::{stats, RecordError};

/// The limits a comparison applies where no rule names a metric.
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    /// Tolerance for counters, percent, in the worse direction.
    pub tolerance: f64,
    /// Minimum change of a noisy figure that can count, percent.
    pub min_effect: f64,
    /// Significance level of the Mann-Whitney U test, per metric.
    pub alpha: f64,
    /// Fewest repetitions per side before noisy figures get a verdict.
    pub min_samples: usize,
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

    fn triggered(&self, rel_pct: f64) -> bool {
        if self.limit_pct >= 0.0 {
            rel_pct > self.limit_pct
        } else {
            rel_pct < self.limit_pct
        }
    }
}

/// Verdict for one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Worse beyond the rule or tolerance (and significant, for noisy figures).
    Regression,
    /// Better beyond the tolerance.
    Improvement,
    /// Within tolerance, or not significant.
    Unchanged,
    /// Too few samples to tell.
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
    /// head - base.
    pub change: f64,
    /// Relative change, percent.
    pub change_pct: f64,
    /// Samples per side.
    pub samples: (usize, usize),
    /// Mann-Whitney p-value (noisy figures).
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

/// One row per metric both runs have: medians, change, and a verdict under `rules` (else the
/// thresholds' tolerance).
pub fn compare(base: &RunSamples, head: &RunSamples, rules: &[Rule], args: &Thresholds) -> Vec<Row> {
    let mut rows = Vec::new();
    for def in samples::METRICS {
        for (key, b) in base.metrics.iter().filter(|(k, _)| k.rsplit('.').next() == Some(def.name)) {
            let Some(h) = head.metrics.get(key) else { continue };
            let (Some(bm), Some(hm)) = (stats::median(b), stats::median(h)) else { continue };
            let change_pct = if bm != 0.0 { 100.0 * (hm - bm) / bm.abs() } else { 0.0 };
            let worse_pct = if def.higher_is_better { -change_pct } else { change_pct };
            let rule = rules.iter().find(|r| r.applies_to(key));
            let (regressed, limit_text) = match rule {
                Some(r) => (r.triggered(change_pct), format!("rule {}{:+}%", r.metric, r.limit_pct)),
                None => {
                    let limit = if def.kind == Kind::Counter { args.tolerance } else { args.min_effect };
                    (worse_pct > limit, format!("tolerance {limit}%"))
                }
            };
            let improved = -worse_pct > if def.kind == Kind::Counter { args.tolerance } else { args.min_effect };
            let (verdict, p_value, reason) = match def.kind {
                // Counters are compared by tolerance. With enough repetitions on both sides they
                // must also differ significantly: a LUT's syscall counts wobble run to run (ACK
                // timing), and that wobble is not a regression.
                Kind::Counter => {
                    let tested = b.len() >= args.min_samples && h.len() >= args.min_samples;
                    let p = tested.then(|| stats::mann_whitney_p(b, h));
                    let significant = p.is_none_or(|p| p < args.alpha);
                    let v = match (significant, regressed, improved) {
                        (true, true, _) => Verdict::Regression,
                        (true, false, true) => Verdict::Improvement,
                        _ => Verdict::Unchanged,
                    };
                    let why = match p {
                        Some(p) => format!("{limit_text}, Mann-Whitney p={p:.3}"),
                        None => format!("{limit_text} ({} vs {} samples: no test)", b.len(), h.len()),
                    };
                    (v, p, why)
                }
                Kind::Noisy if b.len() < args.min_samples || h.len() < args.min_samples => (
                    Verdict::Inconclusive,
                    None,
                    format!("{} vs {} samples, need {} each (--repeat)", b.len(), h.len(), args.min_samples),
                ),
                Kind::Noisy => {
                    let p = stats::mann_whitney_p(b, h);
                    let significant = p < args.alpha;
                    let v = match (significant, regressed, improved) {
                        (true, true, _) => Verdict::Regression,
                        (true, false, true) => Verdict::Improvement,
                        _ => Verdict::Unchanged,
                    };
                    (v, Some(p), format!("{limit_text}, Mann-Whitney p={p:.3} (alpha {})", args.alpha))
                }
            };
            rows.push(Row {
                metric: key.clone(),
                kind: def.kind,
                base: bm,
                head: hm,
                change: hm - bm,
                change_pct,
                samples: (b.len(), h.len()),
                p_value,
                verdict,
                reason,
            });
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse() {
        assert_eq!(Rule::parse("syscalls_per_mb>+2%").expect("rule").limit_pct, 2.0);
        assert_eq!(Rule::parse("server.goodput_mbps<-5%").expect("rule").limit_pct, -5.0);
        assert!(Rule::parse("nonsense>+2%").is_err());
        assert!(Rule::parse("goodput_mbps=5").is_err());
        let r = Rule::parse("syscalls_per_mb>+2%").expect("rule");
        assert!(r.applies_to("server.syscalls_per_mb") && r.triggered(2.5) && !r.triggered(1.5));
        let g = Rule::parse("goodput_mbps<-5%").expect("rule");
        assert!(g.triggered(-6.0) && !g.triggered(-4.0) && !g.triggered(10.0));
    }
}
