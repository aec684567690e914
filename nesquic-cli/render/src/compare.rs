//! The gate's report as a terminal table (verdicts coloured when stdout is a terminal and
//! NO_COLOR is unset) or as Markdown for a PR comment, whose first line is the verdict.

use std::borrow::Cow;
use std::io::Write;

use anstyle::{AnsiColor, Style};
use nesquic_record::compare::components::{ComponentDelta, CostOf};
use nesquic_record::compare::findings_diff::FindingChange;
use nesquic_record::compare::{percent, Kind, Pairing, Refused, Row, Rule, Unjudged, Verdict};
use serde::{Deserialize, Serialize};

/// What the gate judged, as printed (and the JSON of `--format json`, versioned by
/// `report_version`). Borrowed when written, owned when read back (`Deserialize`, the tests).
#[derive(Debug, Serialize, Deserialize)]
pub struct Report<'a> {
    /// `nesquic_record::compare::REPORT_VERSION`.
    pub report_version: u32,
    /// "pass" or "fail".
    pub verdict: Cow<'static, str>,
    /// Whether the rounds were paired (interleaved runs).
    pub pairing: Pairing,
    /// Warnings shown and recorded (separate runs drift).
    pub warnings: Vec<Cow<'static, str>>,
    /// What the base run was given as.
    pub base: String,
    /// What the head run was given as.
    pub head: String,
    /// The base run's LUT.
    pub lut_base: Cow<'a, str>,
    /// The head run's LUT.
    pub lut_head: Cow<'a, str>,
    /// The test case both ran.
    pub testcase: Cow<'a, str>,
    /// Family-wise false-alarm rate for noisy figures.
    pub alpha: f64,
    /// The failure rules in force.
    pub rules: Cow<'a, [Rule]>,
    /// One row per metric.
    pub rows: Cow<'a, [Row]>,
    /// How many rows are regressions.
    pub regressions: usize,
    /// Findings that appeared, went away or changed severity from base to head.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings_changed: Vec<FindingChange>,
    /// With `--probe profile`: each side's CPU ns per datagram by component and top function,
    /// base to head, with intervals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub component_deltas: Vec<ComponentDelta>,
    /// The CPU verdicts with the components that moved most
    /// (`server cpu_s_per_gb +6.1% [+3.2, +9.0]: connection.recovery +140 ns/dgram [+90, +190]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_verdicts: Vec<String>,
    /// Where the differential flame graphs are: the HTML page written, or the command that
    /// writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flame_graphs: Option<String>,
}

/// A comparison that judged nothing (exit 2), as `--format json` prints it: the reasons typed
/// and as printed.
#[derive(Debug, Serialize, Deserialize)]
pub struct RefusedReport<'a> {
    /// `nesquic_record::compare::REPORT_VERSION`.
    pub report_version: u32,
    /// "refused".
    pub verdict: Cow<'static, str>,
    /// What the base run was given as.
    pub base: String,
    /// What the head run was given as.
    pub head: String,
    /// Each reason, typed.
    pub reasons: Cow<'a, [Unjudged]>,
    /// The reasons as printed.
    pub lines: Vec<String>,
}

/// The PR comment of a comparison that judged nothing: why, first.
pub fn refused_markdown(refused: &Refused, base: &str, head: &str) -> String {
    let mut md = "⚠️ **nesquic: nothing judged**: a figure one run measured is missing from the other, a rule \
        names nothing measured, or a side's probes were not in place\n\n"
        .to_string();
    md.push_str(&format!("base `{base}`, head `{head}`\n\n"));
    for line in refused.lines() {
        md.push_str(&format!("- {line}\n"));
    }
    md
}

fn verdict_text(v: Verdict) -> &'static str {
    match v {
        Verdict::Regression => "REGRESSION",
        Verdict::Worse => "worse",
        Verdict::Improvement => "improvement",
        Verdict::Unchanged => "ok",
        Verdict::Inconclusive => "inconclusive",
    }
}

fn verdict_style(v: Verdict) -> Style {
    let colour = match v {
        Verdict::Regression => AnsiColor::Red,
        Verdict::Worse => AnsiColor::Yellow,
        Verdict::Improvement | Verdict::Unchanged => AnsiColor::Green,
        Verdict::Inconclusive => return Style::new().dimmed(),
    };
    Style::new().fg_color(Some(colour.into())).bold()
}

/// A row's figures, formatted once for both renderings: base, head, change, interval (`exact`
/// for counters without one), limit.
fn cells(row: &Row) -> [String; 5] {
    let interval = match (&row.interval, row.kind) {
        (Some(e), _) => format!("{:.3}-{:.3}", e.low, e.high),
        (None, Kind::Counter) => "exact".into(),
        (None, Kind::Noisy) => "-".into(),
    };
    [
        format!("{:.4}", row.base),
        format!("{:.4}", row.head),
        nesquic_record::compare::format_change_pct(row.change_pct, 2),
        interval,
        format!("{:+}%", row.limit_pct),
    ]
}

/// The one-line verdict: PASS or FAIL, the regressions, and what else needs a look.
pub fn headline(r: &Report<'_>) -> String {
    let list = |v: Verdict| -> Vec<String> {
        r.rows
            .iter()
            .filter(|x| x.verdict == v)
            .map(|x| format!("{} {}", x.metric, nesquic_record::compare::format_change_pct(x.change_pct, 1)))
            .collect()
    };
    let regressions = list(Verdict::Regression);
    let worse = list(Verdict::Worse);
    let inconclusive = r.rows.iter().filter(|x| x.verdict == Verdict::Inconclusive).count();
    let mut line = if regressions.is_empty() {
        "PASS: no regression".to_string()
    } else {
        format!("FAIL: {} regression(s): {}", regressions.len(), regressions.join(", "))
    };
    if !worse.is_empty() {
        line.push_str(&format!("; worse, report only: {}", worse.join(", ")));
    }
    if inconclusive > 0 {
        line.push_str(&format!("; {inconclusive} inconclusive"));
    }
    if r.pairing == Pairing::Unpaired {
        line.push_str(" (unpaired runs)");
    }
    line
}

/// The terminal table; colour goes through anstream, which strips it where it does not belong.
pub fn text(r: &Report<'_>) -> std::io::Result<()> {
    let mut out = anstream::stdout().lock();
    writeln!(out, "base {} ({})\nhead {} ({})\ntest case: {}", r.base, r.lut_base, r.head, r.lut_head, r.testcase)?;
    writeln!(
        out,
        "{:<30} {:>13} {:>13} {:>9} {:>13} {:>7}  {:<12} why",
        "metric",
        "base",
        "head",
        "change",
        format!("{}% CI", percent(1.0 - r.alpha)),
        "limit",
        "verdict"
    )?;
    for row in r.rows.iter() {
        let style = verdict_style(row.verdict);
        let [base, head, change, interval, limit] = cells(row);
        let verdict = verdict_text(row.verdict);
        writeln!(
            out,
            "{:<30} {base:>13} {head:>13} {change:>9} {interval:>13} {limit:>7}  {style}{verdict:<12}{style:#} {}",
            row.metric, row.reason
        )?;
    }
    for change in &r.findings_changed {
        writeln!(out, "finding {change}")?;
    }
    if !r.component_deltas.is_empty() {
        writeln!(out, "CPU ns per datagram by component and top function (base -> head, change [interval]):")?;
        for d in &r.component_deltas {
            let [side, what, base, head, change] = delta_cells(d);
            writeln!(out, "  {side:<7} {what:<9} {:<44} {base:>9} {head:>9}  {change}", d.name)?;
        }
    }
    for line in &r.cpu_verdicts {
        writeln!(out, "{line}")?;
    }
    if let Some(where_) = &r.flame_graphs {
        writeln!(out, "differential flame graphs: {where_}")?;
    }
    let verdict = if r.regressions > 0 { Verdict::Regression } else { Verdict::Unchanged };
    let style = verdict_style(verdict);
    writeln!(out, "{style}{}{style:#}", headline(r))
}

/// The PR comment: the verdict on the first line, then what was compared and the table.
pub fn markdown(r: &Report<'_>) -> String {
    let mark = if r.regressions > 0 { "❌" } else { "✅" };
    let mut md = format!("{mark} **nesquic {}**\n\n", headline(r));
    md.push_str(&format!(
        "base `{}` ({}), head `{}` ({}); test case: {}; {} (intervals {}%, Holm-corrected)\n\n",
        r.base,
        r.lut_base,
        r.head,
        r.lut_head,
        r.testcase,
        match r.pairing {
            Pairing::Paired => "interleaved rounds, paired",
            Pairing::Unpaired => "separate runs, unpaired",
        },
        percent(1.0 - r.alpha)
    ));
    for w in &r.warnings {
        md.push_str(&format!("> **Warning:** {w}\n\n"));
    }
    for line in &r.cpu_verdicts {
        md.push_str(&format!("- {line}\n"));
    }
    if !r.cpu_verdicts.is_empty() {
        md.push('\n');
    }
    md.push_str("| metric | base | head | change | interval | limit | verdict | why |\n");
    md.push_str("|---|---:|---:|---:|---:|---:|---|---|\n");
    for row in r.rows.iter() {
        let verdict = match row.verdict {
            Verdict::Regression => "**regression**".to_string(),
            other => verdict_text(other).to_string(),
        };
        let [base, head, change, interval, limit] = cells(row);
        md.push_str(&format!(
            "| `{}` | {base} | {head} | {change} | {interval} | {limit} | {verdict} | {} |\n",
            row.metric, row.reason
        ));
    }
    if !r.component_deltas.is_empty() {
        md.push_str(&format!(
            "\nCPU ns per datagram by component and top function ({}% intervals, explanatory: no limit, no Holm):\n\n",
            percent(1.0 - r.alpha)
        ));
        md.push_str("| side | of | name | base | head | change |\n|---|---|---|---:|---:|---|\n");
        for d in &r.component_deltas {
            let [side, what, base, head, change] = delta_cells(d);
            md.push_str(&format!("| {side} | {what} | `{}` | {base} | {head} | {change} |\n", d.name));
        }
    }
    if let Some(where_) = &r.flame_graphs {
        md.push_str(&format!("\nDifferential flame graphs: {where_}\n"));
    }
    if !r.findings_changed.is_empty() {
        md.push_str("\nFindings that changed (each run's report has their numbers):\n\n");
        for change in &r.findings_changed {
            md.push_str(&format!("- {change}\n"));
        }
    }
    md
}

/// A component delta's cells: side, kind, base and head ns per datagram, the change with its
/// interval.
fn delta_cells(d: &ComponentDelta) -> [String; 5] {
    let of = match d.of {
        CostOf::Component => "component",
        CostOf::Function => "function",
    };
    [d.role.to_string(), of.to_string(), format!("{:.1}", d.base_ns), format!("{:.1}", d.head_ns), {
        let interval = d.interval_ns.map_or(" (no interval)".to_string(), |(l, h)| format!(" [{l:+.1}, {h:+.1}]"));
        format!("{:+.1} ns/dgram {}{interval}", d.delta_ns, d.per)
    }]
}
