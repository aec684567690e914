//! What the probes measured, summed over repetitions: syscall latency (log2 histograms and
//! their CDFs), crypto calls, and offload (datagrams per syscall).

use nesquic_model::metrics::{Metrics, Timing};
use nesquic_record::RunRecord;

use crate::page::{num, Page};
use crate::plot::{self, Bar, Series};
use crate::HtmlError;

/// `ns` as a short duration.
fn duration(ns: f64) -> String {
    match ns {
        n if n >= 1e9 => format!("{:.0}s", n / 1e9),
        n if n >= 1e6 => format!("{:.0}ms", n / 1e6),
        n if n >= 1e3 => format!("{:.0}us", n / 1e3),
        n => format!("{n:.0}ns"),
    }
}

/// The occupied range of a log2 histogram as bars (`<2us`: calls that took 1-2 us).
fn histogram(t: &Timing) -> Vec<Bar> {
    let first = t.hist.iter().position(|&n| n > 0);
    let last = t.hist.iter().rposition(|&n| n > 0);
    let (Some(first), Some(last)) = (first, last) else { return Vec::new() };
    (first..=last)
        .map(|b| Bar {
            label: format!("<{}", duration(2f64.powi(b as i32 + 1))),
            value: t.hist[b] as f64,
            interval: None,
        })
        .collect()
}

/// Fraction of calls at or below each bucket's upper bound (us), over the occupied range.
fn cdf(t: &Timing) -> Vec<(f64, f64)> {
    let total: u64 = t.hist.iter().sum();
    if total == 0 {
        return Vec::new();
    }
    let mut seen = 0;
    let mut out = Vec::new();
    for (b, &n) in t.hist.iter().enumerate() {
        seen += n;
        if seen > 0 {
            out.push((2f64.powi(b as i32 + 1) / 1e3, seen as f64 / total as f64));
        }
        if seen == total {
            break;
        }
    }
    out
}

/// Syscalls, crypto and offload, when probes ran.
pub fn section(page: &mut Page, r: &RunRecord) -> Result<(), HtmlError> {
    let all: Vec<Metrics> = r.repetitions.iter().filter_map(|x| x.probes.clone()).collect();
    let Some(m) = Metrics::merge(&all) else { return Ok(()) };
    syscalls(page, &m)?;
    crypto(page, &m)?;
    offload(page, &m)?;
    Ok(())
}

fn syscalls(page: &mut Page, m: &Metrics) -> Result<(), HtmlError> {
    if m.roles.iter().all(|x| x.io.is_empty()) {
        return Ok(());
    }
    page.h2("Syscall latency (--probe io)");
    page.note(&format!(
        "Time inside each packet syscall, in log2 buckets, over every repetition; measured by {}.",
        m.io_mechanism.as_deref().unwrap_or("the io probes")
    ));
    for role in &m.roles {
        let mut curves = Vec::new();
        for s in &role.io {
            let id = format!("syscall-{}-{}", role.role, s.syscall);
            let title = format!(
                "{} {}: {} calls, p50 <= {}",
                role.role,
                s.syscall,
                s.timing.calls,
                duration(s.timing.p50_le_ns as f64)
            );
            page.raw(&plot::vbars(&id, &title, "time inside", "calls", &histogram(&s.timing))?);
            curves.push(Series { name: s.syscall.to_string(), points: cdf(&s.timing) });
        }
        page.raw(&plot::lines(
            &format!("syscall-cdf-{}", role.role),
            &format!("{}: syscall latency CDF", role.role),
            "us (log scale)",
            "fraction of calls",
            &curves,
            true,
        )?);
    }
    Ok(())
}

fn crypto(page: &mut Page, m: &Metrics) -> Result<(), HtmlError> {
    let crypto = |c: &str| c.starts_with("crypto");
    if !m.roles.iter().any(|x| x.functions.iter().any(|f| crypto(&f.category))) {
        return Ok(());
    }
    page.h2("Crypto calls (--probe crypto)");
    page.note(&format!("Measured by {}.", m.function_mechanism.as_deref().unwrap_or("the function probes")));
    for role in &m.roles {
        let functions: Vec<_> = role.functions.iter().filter(|f| crypto(&f.category)).collect();
        if functions.is_empty() {
            continue;
        }
        let bars: Vec<Bar> = functions
            .iter()
            .map(|f| Bar {
                label: format!("{} {}", f.category, short(&f.name)),
                value: f.timing.calls as f64,
                interval: None,
            })
            .collect();
        page.raw(&plot::hbars(
            &format!("crypto-calls-{}", role.role),
            &format!("{}: crypto calls", role.role),
            "calls",
            &bars,
        )?);
        let timed: Vec<Series> = functions
            .iter()
            .filter(|f| f.timed)
            .map(|f| Series { name: format!("{} {}", f.category, short(&f.name)), points: cdf(&f.timing) })
            .collect();
        if !timed.is_empty() {
            page.raw(&plot::lines(
                &format!("crypto-cdf-{}", role.role),
                &format!("{}: crypto call duration CDF", role.role),
                "us (log scale)",
                "fraction of calls",
                &timed,
                true,
            )?);
        }
        let rows: Vec<Vec<String>> = functions
            .iter()
            .map(|f| {
                vec![
                    f.category.clone(),
                    f.name.clone(),
                    f.timing.calls.to_string(),
                    f.bytes.to_string(),
                    if f.timed { num(Some(f.timing.mean_ns()), 0) } else { "counted only".into() },
                    num(f.compensated_mean_ns, 0),
                    f.mechanism.to_string(),
                ]
            })
            .collect();
        page.table(
            &["category", "function", "calls", "bytes", "mean ns", "mean ns, probe cost subtracted", "mechanism"],
            &rows,
        );
    }
    Ok(())
}

/// The last path segment of a long demangled name, for a plot label.
fn short(name: &str) -> String {
    let tail = name.rsplit("::").next().unwrap_or(name);
    if tail.len() > 40 {
        format!("{}...", &tail[..tail.char_indices().nth(37).map_or(tail.len(), |(i, _)| i)])
    } else {
        tail.to_string()
    }
}

fn offload(page: &mut Page, m: &Metrics) -> Result<(), HtmlError> {
    // A byte stream's calls move no datagrams: its roles have no row here, not a row of zeros.
    let rows: Vec<(nesquic_model::Role, &nesquic_model::metrics::SyscallMetrics)> = m
        .roles
        .iter()
        .filter(|r| !r.is_byte_stream())
        .flat_map(|r| r.io.iter().map(move |s| (r.role, s)))
        // A row with calls on TCP sockets would divide datagrams by calls that moved none.
        .filter(|(_, s)| s.timing.calls > 0 && !s.has_stream_calls())
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    page.h2("Offload: datagrams per syscall");
    page.note("More than one datagram per call means batching (sendmmsg/recvmmsg) or segmentation offload (GSO on send, GRO on receive).");
    let per_call = |s: &nesquic_model::metrics::SyscallMetrics| s.datagrams as f64 / s.timing.calls as f64;
    let bars: Vec<Bar> = rows
        .iter()
        .map(|(role, s)| Bar { label: format!("{role} {}", s.syscall), value: per_call(s), interval: None })
        .collect();
    page.raw(&plot::hbars("offload", "Datagrams per syscall", "datagrams per call", &bars)?);
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|(role, s)| {
            vec![
                format!("{role} {}", s.syscall),
                s.timing.calls.to_string(),
                s.messages.to_string(),
                s.datagrams.to_string(),
                s.segmented_messages.to_string(),
                num(Some(per_call(s)), 2),
                num(Some(s.bytes as f64 / s.timing.calls as f64), 0),
                s.eagain.to_string(),
                s.errors.to_string(),
            ]
        })
        .collect();
    page.table(
        &[
            "syscall",
            "calls",
            "messages",
            "datagrams",
            "segmented messages",
            "datagrams/call",
            "bytes/call",
            "EAGAIN",
            "errors",
        ],
        &table,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_and_cdf_cover_the_occupied_buckets() {
        let mut hist = vec![0; 8];
        hist[3] = 2;
        hist[5] = 6;
        let t = Timing { calls: 8, total_ns: 0, p50_le_ns: 0, p99_le_ns: 0, hist };
        let h = histogram(&t);
        assert_eq!(h.len(), 3);
        assert_eq!(h[0].label, "<16ns");
        assert_eq!(h.iter().map(|b| b.value).sum::<f64>(), 8.0);
        let c = cdf(&t);
        assert_eq!(c.last(), Some(&(64.0 / 1e3, 1.0)));
        assert_eq!(c[0], (16.0 / 1e3, 0.25));
    }
}
