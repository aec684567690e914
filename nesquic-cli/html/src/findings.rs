//! The run's findings (`nesquic_record::findings`): what its numbers point to, most at stake
//! first, each with the command that tests the remedy.

use nesquic_record::findings::Severity;
use nesquic_record::RunRecord;

use crate::page::Page;

/// A table of the findings, right after the summary (nothing when there are none).
pub(crate) fn section(page: &mut Page, r: &RunRecord) {
    if r.findings.is_empty() {
        return;
    }
    page.h2("Findings");
    let rows: Vec<Vec<String>> = r
        .findings
        .iter()
        .map(|f| {
            let severity = match f.severity {
                Severity::High => "high",
                Severity::Medium => "medium",
                Severity::Low => "low",
            };
            vec![severity.to_string(), f.seen.clone(), f.why.clone(), f.try_this.clone()]
        })
        .collect();
    page.table(&["severity", "seen", "why", "try"], &rows);
    page.note("Each rule, its evidence and its threshold: docs/findings.md.");
}
