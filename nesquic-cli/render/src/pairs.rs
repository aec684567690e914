//! `nesquic matrix --servers ... --clients ...`'s tables (docs/pairs.md): goodput with clients
//! as rows and servers as columns, each side's CPU per gigabyte, why a pair did not run, and
//! each pair's CPU per datagram by component.

use std::fmt::Write as _;
use std::path::PathBuf;

use nesquic_record::figures::Summary;
use nesquic_record::packet_cost::PacketCostFigures;
use serde::{Deserialize, Serialize};

use crate::text::table;

/// One client × server pair over its rounds (`nesquic matrix --servers/--clients --json` writes a
/// list of these; the tests read it back).
#[derive(Debug, Serialize, Deserialize)]
pub struct PairCell {
    /// The server's LUT.
    pub server: String,
    /// The client's LUT.
    pub client: String,
    /// Library versions (server, client), once a round ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<(String, String)>,
    /// Repetitions that ran, over all rounds.
    pub rounds: usize,
    /// Median, min and max over them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// The server's median CPU seconds per payload gigabyte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_s_per_gb: Option<f64>,
    /// The client's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_s_per_gb: Option<f64>,
    /// CPU ns per datagram by component (`--probe profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packet_cost: Option<PacketCostFigures>,
    /// What bound the pair's goodput in its rounds (the binding-constraint finding's label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<String>,
    /// Why the pair did not run, or why some rounds failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_not: Option<String>,
    /// The run directories.
    pub run_dirs: Vec<PathBuf>,
}

/// The tables, as text (aligned, or Markdown).
pub fn text(cells: &[PairCell], servers: &[String], clients: &[String], rounds: u32, markdown: bool) -> String {
    let find = |s: &str, c: &str| cells.iter().find(|x| x.server == s && x.client == c);
    let mut notes: Vec<String> = Vec::new();
    let mut header = vec!["client \\ server".to_string()];
    header.extend(servers.iter().cloned());
    let grid = |f: &dyn Fn(&PairCell) -> Option<String>, notes: &mut Vec<String>| -> Vec<Vec<String>> {
        clients
            .iter()
            .map(|c| {
                let mut line = vec![c.clone()];
                for s in servers {
                    let cell = find(s, c);
                    let figure = cell.and_then(f);
                    let why = cell.and_then(|x| x.why_not.clone());
                    let mark = why.map(|w| {
                        let pair = format!("server {s} x client {c}");
                        // Reasons from `nesquic run` already name the pair.
                        let text = if w.starts_with(&pair) { w } else { format!("{pair}: {w}") };
                        let n = notes.iter().position(|n| *n == text).unwrap_or_else(|| {
                            notes.push(text);
                            notes.len() - 1
                        });
                        format!(" [{}]", n + 1)
                    });
                    line.push(format!("{}{}", figure.unwrap_or_else(|| "-".into()), mark.unwrap_or_default()));
                }
                line
            })
            .collect()
    };
    let mut out = String::new();
    let _ = writeln!(out, "\ngoodput, Mbit/s (median over {rounds} round(s); rows: clients, columns: servers)");
    let goodput = grid(&|x| x.summary.as_ref().map(|s| format!("{:.0}", s.goodput_mbps.median)), &mut notes);
    out.push_str(&table(&header, &goodput, markdown));
    let _ = writeln!(out, "\nCPU s per GB, server / client (medians)");
    let cpu =
        grid(&|x| Some(format!("{:.2} / {:.2}", x.server_cpu_s_per_gb?, x.client_cpu_s_per_gb?)), &mut Vec::new());
    out.push_str(&table(&header, &cpu, markdown));
    let _ =
        writeln!(out, "\nbinding constraint (docs/findings.md: what bound goodput, runs per label where they differ)");
    let binding = grid(&|x| x.binding.clone(), &mut Vec::new());
    out.push_str(&table(&header, &binding, markdown));
    if !notes.is_empty() {
        out.push('\n');
        for (i, n) in notes.iter().enumerate() {
            let _ = writeln!(out, "[{}] {n}", i + 1);
        }
    }
    out.push_str(&components(cells, markdown));
    out
}

/// Each pair's CPU ns per datagram by component, one line a side.
fn components(cells: &[PairCell], markdown: bool) -> String {
    let sides: Vec<(&PairCell, &str, &nesquic_record::packet_cost::SideCost)> = cells
        .iter()
        .filter_map(|c| c.packet_cost.as_ref().map(|p| (c, p)))
        .flat_map(|(c, p)| [("server", &p.server), ("client", &p.client)].map(|(n, s)| (c, n, s)))
        .filter_map(|(c, n, s)| s.as_ref().map(|s| (c, n, s)))
        .collect();
    if sides.is_empty() {
        return String::new();
    }
    let mut names: Vec<(&str, f64)> = Vec::new();
    for (_, _, s) in &sides {
        for (name, ns) in &s.components {
            match names.iter_mut().find(|(n, _)| n == name) {
                Some((_, max)) => *max = max.max(*ns),
                None => names.push((name, *ns)),
            }
        }
    }
    names.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut header = vec!["server x client".to_string(), "side".into(), "ns/datagram".into()];
    header.extend(names.iter().map(|(n, _)| n.to_string()));
    let lines: Vec<Vec<String>> = sides
        .iter()
        .map(|(c, side, s)| {
            let lut = if *side == "server" { &c.server } else { &c.client };
            let mut l = vec![
                format!("{} x {}", c.server, c.client),
                format!("{side} {lut} ({})", s.direction),
                format!("{:.0}", s.ns_per_datagram),
            ];
            l.extend(names.iter().map(|(n, _)| s.components.get(*n).map_or("-".into(), |v| format!("{v:.0}"))));
            l
        })
        .collect();
    format!(
        "\nCPU ns per datagram by component, per pair and side (sampling profile x CPU time / datagrams; medians)\n{}",
        table(&header, &lines, markdown)
    )
}
