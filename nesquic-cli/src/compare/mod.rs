//! `nesquic compare BASE HEAD`: the CI regression gate. Counters (syscalls per MB, datagrams per
//! syscall, crypto calls per packet) are compared against a tolerance (and, given repetitions on
//! both sides, must also differ significantly); noisy figures
//! (goodput, time, CPU) need repetitions and a Mann-Whitney U test plus a minimum effect, and
//! are "inconclusive" with too few samples. Exit codes: 0 pass, 1 regression, 2 bad input.

mod input;
pub(crate) use nesquic_record::stats;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use input::{Kind, RunSamples};

/// `nesquic compare` arguments.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The reference run: a run directory, its summary.json, or one role's .sqlog.
    pub base: PathBuf,
    /// The run under review, same forms.
    pub head: PathBuf,
    /// A failure rule, repeatable: METRIC>+N% (fail if it grows by more than N%) or METRIC<-N%
    /// (fail if it shrinks by more). METRIC may carry a role: server.syscalls_per_mb. Rules
    /// replace the default tolerance for the metrics they name.
    #[arg(long = "fail-on", value_name = "RULE")]
    pub fail_on: Vec<String>,
    /// Rules from a TOML file: a fail_on table with "METRIC" = "+2%" entries.
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
    /// Default tolerance for counters, percent, in the worse direction.
    #[arg(long, default_value_t = 2.0)]
    pub tolerance: f64,
    /// Minimum change of a noisy figure that can count, percent.
    #[arg(long, default_value_t = 1.0)]
    pub min_effect: f64,
    /// Significance level of the Mann-Whitney U test, per metric. Kept low because about twenty
    /// metrics are tested at once; 5 runs per side can reach p = 0.008 at best.
    #[arg(long, default_value_t = 0.01)]
    pub alpha: f64,
    /// Fewest repetitions per side before noisy figures get a verdict.
    #[arg(long, default_value_t = 5)]
    pub min_samples: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned table for a terminal.
    Text,
    /// A table for a PR comment.
    Markdown,
    /// Machine-readable.
    Json,
}

/// How `compare` ended.
pub enum Outcome {
    /// No regression.
    Pass,
    /// At least one regression.
    Regression,
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
    pub fn parse(text: &str) -> Result<Self> {
        let (metric, op, rest) = if let Some((m, r)) = text.split_once('>') {
            (m, '>', r)
        } else if let Some((m, r)) = text.split_once('<') {
            (m, '<', r)
        } else {
            bail!("rule {text:?}: expected METRIC>+N% or METRIC<-N%");
        };
        let number = rest.trim().trim_end_matches('%').trim_start_matches('+');
        let value: f64 = number.parse().with_context(|| format!("rule {text:?}: {rest:?} is not a percentage"))?;
        let limit_pct = if op == '>' { value.abs() } else { -value.abs() };
        Self::new(metric.trim(), limit_pct)
    }

    fn new(metric: &str, limit_pct: f64) -> Result<Self> {
        let bare = metric.rsplit('.').next().unwrap_or(metric);
        if input::def(bare).is_none() {
            let known: Vec<String> = input::METRICS.iter().map(|m| format!("{} ({})", m.name, m.meaning)).collect();
            bail!("unknown metric {metric:?}; known: {}", known.join(", "));
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

#[derive(Serialize)]
struct Report<'a> {
    base: String,
    head: String,
    lut_base: &'a str,
    lut_head: &'a str,
    testcase: &'a str,
    rules: &'a [Rule],
    rows: &'a [Row],
    regressions: usize,
}

/// Runs `nesquic compare`; bad input is an `Err` (exit 2 in main).
pub fn execute(args: &CompareArgs) -> Result<Outcome> {
    let base = input::load(&args.base)?;
    let head = input::load(&args.head)?;
    if base.testcase != head.testcase {
        bail!(
            "refusing to compare different test cases:\n  base {}: {}\n  head {}: {}",
            args.base.display(),
            base.testcase,
            args.head.display(),
            head.testcase
        );
    }
    let mut rules = Vec::new();
    for r in &args.fail_on {
        rules.push(Rule::parse(r)?);
    }
    if let Some(path) = &args.thresholds {
        rules.extend(rules_from_file(path)?);
    }
    let rows = compare(&base, &head, &rules, args);
    if rows.is_empty() {
        bail!("the two runs share no metric to compare");
    }
    let regressions = rows.iter().filter(|r| r.verdict == Verdict::Regression).count();
    let report = Report {
        base: args.base.display().to_string(),
        head: args.head.display().to_string(),
        lut_base: &base.lut,
        lut_head: &head.lut,
        testcase: &base.testcase,
        rules: &rules,
        rows: &rows,
        regressions,
    };
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => print_text(&report),
        Format::Markdown => print_markdown(&report),
    }
    Ok(if regressions > 0 { Outcome::Regression } else { Outcome::Pass })
}

fn rules_from_file(path: &std::path::Path) -> Result<Vec<Rule>> {
    #[derive(serde::Deserialize)]
    struct File {
        fail_on: std::collections::BTreeMap<String, String>,
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let file: File =
        toml::from_str(&text).with_context(|| format!("{}: expected [fail_on] METRIC = \"+N%\"", path.display()))?;
    file.fail_on
        .iter()
        .map(|(metric, limit)| {
            let v: f64 = limit
                .trim()
                .trim_end_matches('%')
                .trim_start_matches('+')
                .parse()
                .with_context(|| format!("{}: {metric} = {limit:?} is not a signed percentage", path.display()))?;
            Rule::new(metric, v)
        })
        .collect()
}

fn compare(base: &RunSamples, head: &RunSamples, rules: &[Rule], args: &CompareArgs) -> Vec<Row> {
    let mut rows = Vec::new();
    for def in input::METRICS {
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

fn verdict_text(v: Verdict) -> &'static str {
    match v {
        Verdict::Regression => "REGRESSION",
        Verdict::Improvement => "improvement",
        Verdict::Unchanged => "ok",
        Verdict::Inconclusive => "inconclusive",
    }
}

fn print_text(r: &Report<'_>) {
    println!("base {} ({})\nhead {} ({})\ntest case: {}", r.base, r.lut_base, r.head, r.lut_head, r.testcase);
    println!("{:<32} {:>14} {:>14} {:>14} {:>9}  {:<13} why", "metric", "base", "head", "change", "%", "verdict");
    for row in r.rows {
        println!(
            "{:<32} {:>14.4} {:>14.4} {:>+14.4} {:>+8.2}%  {:<13} {}",
            row.metric,
            row.base,
            row.head,
            row.change,
            row.change_pct,
            verdict_text(row.verdict),
            row.reason
        );
    }
    println!("{}", headline(r));
}

fn print_markdown(r: &Report<'_>) {
    println!("### Nesquic: {}", headline(r));
    println!();
    println!("base `{}` ({}), head `{}` ({}); test case: {}", r.base, r.lut_base, r.head, r.lut_head, r.testcase);
    println!();
    println!("| metric | base | head | change | verdict | why |");
    println!("|---|---:|---:|---:|---|---|");
    for row in r.rows {
        let verdict = match row.verdict {
            Verdict::Regression => "**regression**",
            other => verdict_text(other),
        };
        println!(
            "| `{}` | {:.4} | {:.4} | {:+.2}% | {} | {} |",
            row.metric, row.base, row.head, row.change_pct, verdict, row.reason
        );
    }
}

fn headline(r: &Report<'_>) -> String {
    let names: Vec<String> = r
        .rows
        .iter()
        .filter(|x| x.verdict == Verdict::Regression)
        .map(|x| format!("{} {:+.1}%", x.metric, x.change_pct))
        .collect();
    let inconclusive = r.rows.iter().filter(|x| x.verdict == Verdict::Inconclusive).count();
    let tail = if inconclusive > 0 {
        format!(" ({inconclusive} inconclusive: more repetitions needed)")
    } else {
        String::new()
    };
    if names.is_empty() {
        format!("no regression{tail}")
    } else {
        format!("{} regression(s): {}{tail}", names.len(), names.join(", "))
    }
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
