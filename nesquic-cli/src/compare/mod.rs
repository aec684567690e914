//! `nesquic compare BASE HEAD`: the CI regression gate. Counters (syscalls per MB, datagrams per
//! syscall, crypto calls per packet) are compared against a tolerance (and, given repetitions on
//! both sides, must also differ significantly); noisy figures
//! (goodput, time, CPU) need repetitions and a Mann-Whitney U test plus a minimum effect, and
//! are "inconclusive" with too few samples. Exit codes: 0 pass, 1 regression, 2 bad input.

use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::Serialize;

use nesquic_record::compare::{compare, load, rules_from_file, Row, Rule, Thresholds, Verdict};

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
    /// Also write one self-contained HTML page: verdicts, both runs side by side, differential
    /// flame graphs (with --probe profile) to FILE, default ./compare.html. Needs run
    /// directories (or their summary.json).
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    pub html: Option<Option<PathBuf>>,
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
    let base = load(&args.base)?;
    let head = load(&args.head)?;
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
    let thresholds = Thresholds {
        tolerance: args.tolerance,
        min_effect: args.min_effect,
        alpha: args.alpha,
        min_samples: args.min_samples,
    };
    let rows = compare(&base, &head, &rules, &thresholds);
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
    if let Some(file) = &args.html {
        let input = nesquic_html::CompareInput {
            base: crate::html::load_run(&args.base)?,
            head: crate::html::load_run(&args.head)?,
            rows: rows.clone(),
        };
        let page = nesquic_html::compare_page(&input)?;
        crate::html::write(&crate::html::target(file, || PathBuf::from("compare.html")), &page, "HTML comparison")?;
    }
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => print_text(&report),
        Format::Markdown => print_markdown(&report),
    }
    Ok(if regressions > 0 { Outcome::Regression } else { Outcome::Pass })
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
