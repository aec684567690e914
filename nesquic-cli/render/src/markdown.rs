//! `nesquic run --markdown`: the run as Markdown for a pull-request comment: what ran, the
//! summary table and, with probes, syscalls, offload and where the CPU goes.

use std::fmt::Write;

use nesquic_record::RunRecord;

/// The Markdown summary of `r`.
pub fn summary(r: &RunRecord) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### Nesquic: {} (--io {}), {} {}\n",
        r.lut_label(),
        match &r.client_side {
            Some(c) if c.lut.io != r.lut.io => format!("{} / {}", r.lut.io, c.lut.io),
            _ => r.lut.io.to_string(),
        },
        r.testcase.name,
        r.testcase.workload.describe()
    );
    if let Some(source) = &r.lut.source {
        let _ = writeln!(out, "Built from `{}`.\n\nProof: {}\n", source.describe(), source.proof);
    }
    for caveat in r.caveats() {
        let _ = writeln!(out, "**Note:** {caveat}\n");
    }
    let verified = r.repetitions.iter().all(|x| x.payload_verified);
    let _ = writeln!(out, "{} repetition(s) measured, payload verified: {verified}\n", r.repetitions.len());
    if let Some(s) = &r.summary {
        out.push_str("| | median | min | max |\n|---|---:|---:|---:|\n");
        for (label, sp, digits) in s.rows(r.testcase.workload.connections) {
            let _ = writeln!(out, "| {label} | {:.digits$} | {:.digits$} | {:.digits$} |", sp.median, sp.min, sp.max);
        }
    }
    let all: Vec<nesquic_model::Metrics> = r.repetitions.iter().filter_map(|x| x.probes.clone()).collect();
    if let Some(m) = nesquic_model::Metrics::merge(&all) {
        let io: Vec<_> = m.roles.iter().flat_map(|role| role.io.iter().map(move |x| (&role.role, x))).collect();
        if !io.is_empty() {
            out.push_str("\n| syscall (all repetitions) | calls | datagrams/call | bytes/call | p50 ns <= |\n|---|---:|---:|---:|---:|\n");
            for (role, x) in io {
                let calls = x.timing.calls.max(1) as f64;
                let _ = writeln!(
                    out,
                    "| {role} {} | {} | {:.2} | {:.0} | {} |",
                    x.syscall,
                    x.timing.calls,
                    x.datagrams as f64 / calls,
                    x.bytes as f64 / calls,
                    x.timing.p50_le_ns
                );
            }
        }
        let functions: Vec<_> =
            m.roles.iter().flat_map(|role| role.functions.iter().map(move |f| (&role.role, f))).collect();
        if !functions.is_empty() {
            out.push_str("\n| function (all repetitions) | category | calls | mean ns |\n|---|---|---:|---:|\n");
            for (role, f) in functions {
                let mean = if f.timed { format!("{:.0}", f.timing.mean_ns()) } else { "counted".into() };
                let _ = writeln!(out, "| {role} `{}` | {} | {} | {mean} |", f.name, f.category, f.timing.calls);
            }
        }
    }
    let profiles: Vec<_> = r.repetitions.iter().filter_map(|x| x.profile.as_ref()).flat_map(|p| &p.roles).collect();
    if !profiles.is_empty() {
        out.push_str("\n| where the CPU goes (first repetition) | top components, share of samples |\n|---|---|\n");
        let mut seen = Vec::new();
        for p in profiles {
            if seen.contains(&&p.role) {
                continue;
            }
            seen.push(&p.role);
            let top: Vec<String> =
                p.components.iter().take(5).map(|c| format!("{} {:.0}%", c.name, c.share * 100.0)).collect();
            let _ = writeln!(out, "| {} ({} samples) | {} |", p.role, p.samples, top.join(", "));
        }
    }
    let threads = nesquic_record::saturation::describe(&r.repetitions);
    if !threads.is_empty() {
        out.push('\n');
        for line in threads {
            let _ = writeln!(out, "- {line}");
        }
    }
    out.push_str(&crate::findings::markdown(&r.findings));
    out
}
