//! `nesquic compare BASE HEAD` and the verdict `nesquic ab` shares: the CI regression gate.
//! Counters are exact and held against a tolerance; noisy figures (goodput, time, CPU) get a
//! head/base ratio with a confidence interval (paired when the runs were interleaved), Holm-
//! corrected over the family. What gates without a rule is the default set (the payload
//! sender's sends per MB, the receiver's data receives per MB, CPU per GB, crypto calls per
//! packet); a comparison with a figure one side did not measure
//! judges nothing. The statistics are
//! `nesquic_record::compare`'s; this module parses the flags; `nesquic_render::compare` renders.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use nesquic_render::compare::{self as render, Report};

use nesquic_record::compare::{
    compare, components, load, rules_from_file, Pairing, Rule, RunSamples, Thresholds, Verdict, REPORT_VERSION,
};

/// Exit status of the gate commands, for their `--help`.
pub const GATE_EXIT_STATUS: &str = "Exit status: 0 no regression; 1 at least one regression; 2 bad input, a failed \
run, a figure one run measured and the other did not, a rule naming nothing measured, an agent not in place, or a \
usage error (nothing judged). Like other Unix tools it ends quietly when the reader of its output goes away \
(`nesquic compare A B | head -1`).";

/// The gate's flags, shared by `compare` and `ab`.
#[derive(Debug, Clone, clap::Args)]
pub struct GateArgs {
    /// A failure rule, repeatable: METRIC>+N% (fail if it grows by more than N%) or METRIC<-N%
    /// (fail if it shrinks by more). METRIC may carry a role: server.syscalls_per_mb. A rule
    /// replaces the default limit of the metric it names and makes it gate. Without rules only
    /// the default set gates, each side's own data path: server.sends_per_mb (the payload
    /// sender's sends), client.data_recvs_per_mb (the receiver's receives that carried data),
    /// seal/open_calls_per_packet (--tolerance), cpu_s_per_gb (+5%); every other metric is
    /// reported, never failed. A rule naming no metric of either run is an error.
    #[arg(long = "fail-on", value_name = "RULE")]
    pub fail_on: Vec<String>,
    /// Rules from a TOML file: a fail_on table with "METRIC" = "+2%" entries.
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
    /// Limit for counters (sends per MB, datagrams per syscall, crypto calls per packet),
    /// percent, in the worse direction. Counters are exact: the change itself is held to it,
    /// and must stand out of the round-to-round wobble (tested against no change).
    #[arg(long, default_value_t = Thresholds::DEFAULT.tolerance)]
    pub tolerance: f64,
    /// Limit for noisy figures without a rule, percent: they are "worse" only when the data
    /// say so beyond this limit with confidence 1 - alpha.
    #[arg(long, default_value_t = Thresholds::DEFAULT.noisy_tolerance)]
    pub noisy_tolerance: f64,
    /// Family-wise false-alarm rate: the Holm-corrected chance that an unchanged commit fails
    /// on any gating figure. The intervals are (1 - alpha).
    #[arg(long, default_value_t = Thresholds::DEFAULT.alpha)]
    pub alpha: f64,
    /// Fewest repetitions (pairs, with `ab`) before noisy figures get a verdict.
    #[arg(long, default_value_t = Thresholds::DEFAULT.min_samples)]
    pub min_samples: usize,
    /// Output format: text (a table), markdown (for a PR comment; its first line is the
    /// verdict), json (versioned: report_version).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `nesquic compare` arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = GATE_EXIT_STATUS)]
pub struct CompareArgs {
    /// The reference run: a run directory, its summary.json, or one role's .sqlog.
    pub base: PathBuf,
    /// The run under review, same forms.
    pub head: PathBuf,
    /// Also write one self-contained HTML page: verdicts, both runs side by side, differential
    /// flame graphs (with --probe profile) to FILE, default ./compare.html. Needs run
    /// directories (or their summary.json).
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    pub html: Option<Option<PathBuf>>,
    /// The gate.
    #[command(flatten)]
    pub gate: GateArgs,
}

/// The gate's flags checked: its rules and thresholds, before anything runs.
pub(crate) struct Gate {
    rules: Vec<Rule>,
    thresholds: Thresholds,
}

impl GateArgs {
    /// The rules (`--fail-on`, `--thresholds`) and limits, or what is wrong with them: `ab`
    /// checks them before its rounds, not after.
    pub(crate) fn resolve(&self) -> Result<Gate> {
        let mut rules = Vec::new();
        for r in &self.fail_on {
            rules.push(Rule::parse(r)?);
        }
        if let Some(path) = &self.thresholds {
            rules.extend(rules_from_file(path)?);
        }
        let thresholds = Thresholds {
            tolerance: self.tolerance,
            noisy_tolerance: self.noisy_tolerance,
            alpha: self.alpha,
            min_samples: self.min_samples,
        }
        .checked()?;
        Ok(Gate { rules, thresholds })
    }
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned table for a terminal.
    Text,
    /// A table for a PR comment, after a one-line verdict.
    Markdown,
    /// Machine-readable, versioned.
    Json,
}

/// How a gate command ended.
pub enum Outcome {
    /// No regression.
    Pass,
    /// At least one regression.
    Regression,
}

/// Warning shown (and recorded) when the two sides were not interleaved.
const DRIFT_WARNING: &str = "the two runs were taken separately: on a shared machine separate runs drift apart \
(CPU time by 10-20% between batches), so noisy figures are compared unpaired and rarely conclusive; \
`nesquic ab` interleaves the variants and pairs the rounds";

/// Runs `nesquic compare`; bad input is an `Err` (exit 2 in main).
pub fn execute(args: &CompareArgs) -> Result<Outcome> {
    let gate = args.gate.resolve()?;
    let base = load(&args.base)?;
    let head = load(&args.head)?;
    let pairing = if interleaved(&args.base, &args.head) { Pairing::Paired } else { Pairing::Unpaired };
    let (base_name, head_name) = (args.base.display().to_string(), args.head.display().to_string());
    let html = args.html.as_ref().map(|file| HtmlRequest { base: &args.base, head: &args.head, file: file.as_deref() });
    judge(&base, &head, (&base_name, &head_name), pairing, (&args.gate, &gate), html)
}

/// Whether BASE and HEAD are the two sides of one `nesquic ab` job (`DIR/base`, `DIR/head`
/// next to `DIR/ab.json`): then their repetitions pair round by round.
fn interleaved(base: &Path, head: &Path) -> bool {
    let job = |p: &Path, side: &str| {
        let dir = if p.is_dir() { p } else { p.parent().unwrap_or(p) };
        (dir.file_name().is_some_and(|n| n == side)).then(|| dir.parent().map(Path::to_path_buf)).flatten()
    };
    match (job(base, "base"), job(head, "head")) {
        (Some(a), Some(b)) => a == b && a.join("ab.json").is_file(),
        _ => false,
    }
}

/// `compare --html`: the two run directories and where the page goes.
pub(crate) struct HtmlRequest<'a> {
    base: &'a std::path::Path,
    head: &'a std::path::Path,
    file: Option<&'a std::path::Path>,
}

/// Compares `base` with `head` under the gate's flags and prints the report (and the HTML page,
/// when asked).
pub(crate) fn judge(
    base: &RunSamples,
    head: &RunSamples,
    names: (&str, &str),
    pairing: Pairing,
    (args, gate): (&GateArgs, &Gate),
    html: Option<HtmlRequest<'_>>,
) -> Result<Outcome> {
    if base.testcase != head.testcase {
        bail!(
            "refusing to compare different test cases:\n  base {}: {}\n  head {}: {}",
            names.0,
            base.testcase,
            names.1,
            head.testcase
        );
    }
    let (rules, thresholds) = (&gate.rules, &gate.thresholds);
    // Refused (a metric one run lost, a rule naming nothing, probes not in place): exit 2, and
    // the reasons where the report would have gone (a PR comment says why).
    let rows = match compare(base, head, rules, thresholds, pairing) {
        Ok(rows) => rows,
        Err(refused) => {
            match args.format {
                Format::Json => {
                    let report = render::RefusedReport {
                        report_version: REPORT_VERSION,
                        verdict: "refused".into(),
                        base: names.0.to_string(),
                        head: names.1.to_string(),
                        reasons: (&refused.reasons).into(),
                        lines: refused.lines(),
                    };
                    println!("{}", serde_json::to_string_pretty(&report)?);
                }
                Format::Markdown => print!("{}", render::refused_markdown(&refused, names.0, names.1)),
                Format::Text => {}
            }
            return Err(refused.into());
        }
    };
    if rows.is_empty() {
        bail!("the two runs share no metric to compare");
    }
    let regressions = rows.iter().filter(|r| r.verdict == Verdict::Regression).count();
    let mut warnings = Vec::new();
    if pairing == Pairing::Unpaired {
        warnings.push(DRIFT_WARNING.into());
        eprintln!("nesquic: warning: {DRIFT_WARNING}");
    }
    let page = match html {
        Some(h) => {
            let input = nesquic_html::CompareInput {
                base: crate::html::load_run(h.base)?,
                head: crate::html::load_run(h.head)?,
                rows: rows.clone(),
            };
            let page = nesquic_html::compare_page(&input)?;
            let target = crate::html::target(&h.file.map(PathBuf::from), || PathBuf::from("compare.html"));
            crate::html::write(&target, &page, "HTML comparison")?;
            Some(target)
        }
        None => None,
    };
    let component_deltas = components::component_deltas(base, head, pairing, 1.0 - args.alpha);
    let flame_graphs = match (&page, component_deltas.is_empty()) {
        (Some(page), _) => Some(format!("[{}]({})", page.display(), page.display())),
        (None, false) => Some(format!("`nesquic compare {} {} --html` writes them", names.0, names.1)),
        (None, true) => None,
    };
    let report = Report {
        report_version: REPORT_VERSION,
        verdict: if regressions > 0 { "fail" } else { "pass" }.into(),
        pairing,
        warnings,
        base: names.0.to_string(),
        head: names.1.to_string(),
        lut_base: (&base.lut).into(),
        lut_head: (&head.lut).into(),
        testcase: (&base.testcase).into(),
        alpha: args.alpha,
        rules: rules.into(),
        rows: (&rows).into(),
        regressions,
        findings_changed: match (&base.findings, &head.findings) {
            (Some(b), Some(h)) => nesquic_record::compare::findings_diff::findings_changed(b, h),
            _ => Vec::new(),
        },
        cpu_verdicts: components::cpu_verdicts(&rows, &component_deltas),
        component_deltas,
        flame_graphs,
    };
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => render::text(&report)?,
        Format::Markdown => print!("{}", render::markdown(&report)),
    }
    Ok(if regressions > 0 { Outcome::Regression } else { Outcome::Pass })
}
