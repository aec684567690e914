//! The findings of a run (`nesquic_record::findings`) as text: after the summary on the
//! terminal, by `nesquic findings RUN_DIR`, and as a Markdown section.

use std::fmt::Write as _;

use nesquic_record::findings::{Finding, Severity};

fn label(s: Severity) -> &'static str {
    match s {
        Severity::High => "HIGH",
        Severity::Medium => "MEDIUM",
        Severity::Low => "low",
    }
}

/// The findings for a terminal: one block each, most at stake first; a line when there are none.
pub fn text(findings: &[Finding]) -> String {
    let mut out = String::new();
    if findings.is_empty() {
        out.push_str("findings: none (docs/findings.md lists the rules and what each needs measured)\n");
        return out;
    }
    let _ = writeln!(out, "findings ({}; docs/findings.md):", findings.len());
    for (i, f) in findings.iter().enumerate() {
        let _ = writeln!(out, "{}. [{}] {}", i + 1, label(f.severity), f.seen);
        let _ = writeln!(out, "   why: {}", f.why);
        let _ = writeln!(out, "   try: {}", f.try_this);
    }
    out
}

/// The findings as a Markdown section (empty without findings).
pub fn markdown(findings: &[Finding]) -> String {
    let mut out = String::new();
    if findings.is_empty() {
        return out;
    }
    out.push_str("\n#### Findings\n\n");
    for f in findings {
        let _ = writeln!(out, "- **{}** {}  \n  {}  \n  Try: `{}`", label(f.severity), f.seen, f.why, f.try_this);
    }
    out
}
