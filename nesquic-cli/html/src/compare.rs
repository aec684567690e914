//! The page comparing two runs: the verdict table, both runs side by side, and a differential
//! flame graph per side (head's stacks coloured by how each frame's share moved from base).

use nesquic_record::compare::{Row, Verdict};

use crate::input::RunInput;
use crate::page::{num, Page};
use crate::HtmlError;

/// Two runs and what `nesquic compare` concluded.
pub struct CompareInput {
    /// The reference run.
    pub base: RunInput,
    /// The run under review.
    pub head: RunInput,
    /// The verdict per metric.
    pub rows: Vec<Row>,
}

fn verdict_cell(v: Verdict) -> String {
    match v {
        Verdict::Regression => "!regression!REGRESSION".into(),
        // Worse with confidence on a figure no rule gates: shown, not failed.
        Verdict::Worse => "!regression!worse (not gated)".into(),
        Verdict::Improvement => "!improvement!improvement".into(),
        Verdict::Unchanged => "ok".into(),
        Verdict::Inconclusive => "inconclusive".into(),
    }
}

/// The comparison page.
pub fn compare_page(input: &CompareInput) -> Result<String, HtmlError> {
    let regressions = input.rows.iter().filter(|r| r.verdict == Verdict::Regression).count();
    let title = format!("Nesquic compare: {regressions} regression(s)");
    let mut page = Page::new(&title);
    page.note(&format!("base: {} — {}", input.base.name, input.base.headline()));
    page.note(&format!("head: {} — {}", input.head.name, input.head.headline()));
    page.h2("Verdicts");
    let rows: Vec<Vec<String>> = input
        .rows
        .iter()
        .map(|r| {
            vec![
                r.metric.clone(),
                num(Some(r.base), 4),
                num(Some(r.head), 4),
                nesquic_record::compare::format_change_pct(r.change_pct, 2),
                format!("{} / {}", r.samples.0, r.samples.1),
                num(r.p_value, 4),
                verdict_cell(r.verdict),
                r.reason.clone(),
            ]
        })
        .collect();
    page.table(&["metric", "base", "head", "change", "samples", "p", "verdict", "why"], &rows);

    page.h2("Side by side");
    page.raw("<div class=\"columns\">\n");
    for (label, run) in [("base", &input.base), ("head", &input.head)] {
        page.raw("<div>\n");
        page.h3(&format!("{label}: {}", run.headline()));
        let mut column = Page::new(label);
        crate::run::summary(&mut column, &run.record);
        crate::run::repetitions(&mut column, &run.record, &format!("{label}-"))?;
        for (side, shares) in crate::profile::components(&run.record).into_iter().filter(|(_, s)| !s.is_empty()) {
            column.raw(&crate::profile::component_bars(&format!("{label}-components-{side}"), side.name(), &shares)?);
        }
        page.raw(&column.body());
        page.raw("</div>\n");
    }
    page.raw("</div>\n");

    for (role, head) in input.head.stacks.iter().filter(|(_, s)| !s.is_empty()) {
        let Some((_, base)) = input.base.stacks.iter().find(|(r, _)| r == role) else { continue };
        page.h2(&format!("Differential flame graph: {role}"));
        page.note("The head run's stacks; red frames take a larger share than in base, blue a smaller one (base scaled to head's sample count).");
        page.raw(&crate::flame::differential(&format!("diff-{role}"), &format!("{role}: base -> head"), base, head)?);
    }
    Ok(page.finish(&title))
}
