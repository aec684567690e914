//! `nesquic matrix`'s tables: one row per combination of LUT, I/O path, settings and testcase
//! (goodput, CPU, syscalls and crypto per datagram, against a reference LUT), then the CPU cost
//! per datagram by component across LUTs.

use std::path::PathBuf;

use nesquic_protocol::cli::IoMode;
use nesquic_record::figures::{Summary, VersusReference};
use nesquic_record::io::{IoFigures, IoSource};
use nesquic_record::packet_cost::{PacketCostFigures, SideCost};
use nesquic_record::workload::TestcaseInfo;
use serde::{Deserialize, Serialize};

use crate::text::print_lines;

/// What the table shows for one combination, over all rounds (`nesquic matrix --json` writes a
/// list of these; the tests read it back).
#[derive(Debug, Serialize, Deserialize)]
pub struct Row {
    /// LUT name.
    pub lut: String,
    /// LUT version.
    pub version: String,
    /// I/O path.
    pub io: IoMode,
    /// `--lut-opt` settings of the combination.
    pub options: Vec<String>,
    /// `--rcvbuf` of the combination.
    pub rcvbuf: Option<String>,
    /// The scenario.
    pub testcase: TestcaseInfo,
    /// Repetitions over all rounds.
    pub rounds: usize,
    /// Median, min and max over them.
    pub summary: Summary,
    /// Packet I/O and crypto figures (medians over rounds).
    #[serde(flatten)]
    pub figures: IoFigures,
    /// Against the baseline row of the same testcase and buffers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versus: Option<VersusReference>,
    /// CPU ns per datagram by component (`--probe profile`, with a datagram count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packet_cost: Option<PacketCostFigures>,
    /// What bound goodput in its runs (`findings::constraint`: the link's rate, a side's CPU,
    /// none named), with how many runs named each where they differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<String>,
    /// The run directories.
    pub run_dirs: Vec<PathBuf>,
}

/// `r` against the `baseline` LUT's row of the same testcase and buffers, if there is one.
pub fn versus(rows: &[Row], r: &Row, baseline: &str) -> Option<VersusReference> {
    let b = rows.iter().find(|b| b.lut == baseline && b.testcase == r.testcase && b.rcvbuf == r.rcvbuf)?;
    Some(VersusReference::of(&b.lut, &b.summary, &r.summary))
}

/// The matrix table (medians over `rounds` rounds), its notes, and the cost per packet.
/// `syscall_backend` names `--probe-backend` for the note on the syscall columns; `skipped` are the
/// combinations that could not run, `failed` the rounds that failed (a row's `n` counts the others).
pub fn print_table(
    rows: &[Row],
    rounds: u32,
    syscall_backend: &str,
    markdown: bool,
    skipped: &[String],
    failed: &[String],
) {
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |x| format!("{x:.digits$}"));
    let header = [
        "LUT",
        "io",
        "testcase",
        "options",
        "n",
        "goodput Mbit/s (min-max)",
        "handshake ms",
        "conn/s",
        "server CPU s",
        "client CPU s",
        "server syscalls/MB",
        "client syscalls/MB",
        "server KB/send",
        "server dgrams/send",
        "client dgrams/recv",
        "seals/dgram (server)",
        "opens/dgram (client)",
        "seal ns (server)",
        "open ns (client)",
        "goodput / ref",
        "CPU per byte / ref",
        "binding constraint",
    ];
    let lines: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let g = &r.summary.goodput_mbps;
            vec![
                format!("{} {}", r.lut, r.version),
                r.io.to_string(),
                format!("{} {}", r.testcase.name, r.testcase.workload.shape()),
                {
                    let mut o = r.options.clone();
                    o.extend(r.rcvbuf.iter().map(|b| format!("rcvbuf {b}")));
                    if o.is_empty() {
                        "-".into()
                    } else {
                        o.join(" ")
                    }
                },
                r.rounds.to_string(),
                format!("{:.0} ({:.0}-{:.0})", g.median, g.min, g.max),
                format!("{:.2}", r.summary.handshake_ms.median),
                // Connections per second mean something only with several connections.
                opt(
                    r.summary
                        .workload
                        .as_ref()
                        .filter(|_| r.testcase.workload.connections > 1)
                        .map(|w| w.handshakes_per_s.median),
                    1,
                ),
                format!("{:.3}", r.summary.server_cpu_s.median),
                format!("{:.3}", r.summary.client_cpu_s.median),
                opt(r.figures.server_syscalls_per_mb, 1),
                opt(r.figures.client_syscalls_per_mb, 1),
                opt(r.figures.server_bytes_per_send.map(|b| b / 1e3), 1),
                opt(r.figures.server_datagrams_per_send, 1),
                opt(r.figures.client_datagrams_per_recv, 1),
                opt(r.figures.server_seals_per_datagram, 2),
                opt(r.figures.client_opens_per_datagram, 2),
                opt(r.figures.server_seal_ns, 0),
                opt(r.figures.client_open_ns, 0),
                opt(r.versus.as_ref().map(|v| v.goodput_ratio), 2),
                opt(r.versus.as_ref().map(|v| v.cpu_per_byte_ratio), 2),
                r.binding.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    println!();
    println!("{} round(s), medians over rounds; testcase: name connections x streams x bytes per stream", rounds);
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    print_lines(&header, &lines, markdown);
    let sources: Vec<&str> = rows.iter().filter_map(|r| r.figures.syscall_source.map(IoSource::label)).collect();
    if sources.is_empty() {
        println!("syscall columns need --probe io (or a LUT on Nesquic I/O, which counts its own)");
    } else if sources.contains(&"io-layer") {
        println!("syscall columns: the I/O probes where --probe io ran, else the I/O layer's own counters");
    } else {
        println!("syscall columns: the I/O probes (--probe-backend {syscall_backend})");
    }
    print_packet_cost(rows, markdown);
    for s in skipped {
        println!("skipped: {s}");
    }
    for f in failed {
        println!("failed: {f}");
    }
}

/// The cross-LUT cost per packet: one line per configuration and side, one column per component
/// (those with the largest cost anywhere first).
fn print_packet_cost(rows: &[Row], markdown: bool) {
    let sides: Vec<(&Row, &str, &SideCost)> = rows
        .iter()
        .filter_map(|r| r.packet_cost.as_ref().map(|c| (r, c)))
        .flat_map(|(r, c)| [("server", &c.server), ("client", &c.client)].map(|(n, s)| (r, n, s)))
        .filter_map(|(r, n, s)| s.as_ref().map(|s| (r, n, s)))
        .collect();
    if sides.is_empty() {
        return;
    }
    let mut components: Vec<(&str, f64)> = Vec::new();
    for (_, _, s) in &sides {
        for (name, ns) in &s.components {
            match components.iter_mut().find(|(n, _)| n == name) {
                Some((_, max)) => *max = max.max(*ns),
                None => components.push((name, *ns)),
            }
        }
    }
    components.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut header = vec!["LUT".to_string(), "io".into(), "testcase".into(), "side".into(), "ns/datagram".into()];
    header.extend(components.iter().map(|(n, _)| n.to_string()));
    let lines: Vec<Vec<String>> = sides
        .iter()
        .map(|(r, side, s)| {
            let mut l = vec![
                format!("{} {}", r.lut, r.version),
                r.io.to_string(),
                r.testcase.name.clone(),
                format!("{side} ({})", s.direction),
                format!("{:.0}", s.ns_per_datagram),
            ];
            l.extend(components.iter().map(|(n, _)| s.components.get(*n).map_or("-".into(), |v| format!("{v:.0}"))));
            l
        })
        .collect();
    println!();
    println!("CPU ns per datagram by component (sampling profile x CPU time / datagrams; medians over rounds)");
    print_lines(&header, &lines, markdown);
}
