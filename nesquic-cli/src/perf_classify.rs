//! `nesquic perf-classify FILE`: classifies the stacks of a `perf script` dump into Nesquic's
//! profile components (the same catalog rules as `--probe profile`), per process, so the eBPF
//! sampling profile can be checked against `perf record` on the same run
//! (`scripts/perf-agreement.sh`).
//!
//! Input: `perf script -F comm,pid,ip,sym,dso` output: a header line per sample
//! (`comm pid`), then one frame per line (`addr symbol+off (dso)`), innermost first, and a blank
//! line between samples.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Serialize;

/// `nesquic perf-classify` arguments.
#[derive(Debug, clap::Args)]
pub struct PerfClassifyArgs {
    /// `perf script -F comm,pid,ip,sym,dso` output.
    pub file: PathBuf,
    /// A `nesquic run --probe profile` summary.json (or --json file) of the same run: print each
    /// LUT process's component shares from both side by side instead of JSON.
    #[arg(long)]
    pub run: Option<PathBuf>,
}

#[derive(Debug, Default, Serialize)]
struct ProcessShares {
    comm: String,
    samples: u64,
    components: BTreeMap<String, f64>,
}

/// Prints one JSON object: pid -> {comm, samples, components: {name: share}}.
pub fn execute(args: &PerfClassifyArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.file).with_context(|| format!("read {}", args.file.display()))?;
    let out = classify(&text)?;
    match &args.run {
        None => println!("{}", serde_json::to_string_pretty(&out)?),
        Some(run) => compare(&out, run)?,
    }
    Ok(())
}

/// Component shares per pid of a `perf script` dump.
fn classify(text: &str) -> Result<BTreeMap<u32, ProcessShares>> {
    let classifier = crate::probes::classifier()?;
    let mut counts: BTreeMap<u32, (String, BTreeMap<String, u64>)> = BTreeMap::new();
    for block in text.split("\n\n") {
        let mut lines = block.lines().filter(|l| !l.trim().is_empty());
        let Some(header) = lines.next() else { continue };
        let mut words = header.split_whitespace();
        let (Some(comm), Some(pid)) = (words.next(), words.next().and_then(|p| p.parse::<u32>().ok())) else {
            continue;
        };
        let (mut user, mut kernel) = (Vec::new(), Vec::new());
        for frame in lines {
            let mut parts = frame.split_whitespace();
            let _addr = parts.next();
            let rest: Vec<&str> = parts.collect();
            let Some(dso) = rest.last() else { continue };
            let symbol = rest[..rest.len().saturating_sub(1)].join(" ");
            let symbol = symbol.rsplit_once('+').map_or(symbol.as_str(), |(s, _)| s).to_string();
            if dso.contains("kernel.kallsyms") {
                kernel.push(symbol);
            } else {
                user.push(nesquic_ebpf::symbols::demangle(&symbol));
            }
        }
        // Top-level components, as the eBPF profile's `components` are.
        let component = nesquic_ebpf::stack_rules::family(classifier.classify(&user, &kernel)).to_string();
        let entry = counts.entry(pid).or_insert_with(|| (comm.to_string(), BTreeMap::new()));
        *entry.1.entry(component).or_default() += 1;
    }
    let out: BTreeMap<u32, ProcessShares> = counts
        .into_iter()
        .map(|(pid, (comm, by_component))| {
            let samples: u64 = by_component.values().sum();
            let components = by_component.into_iter().map(|(k, v)| (k, v as f64 / samples.max(1) as f64)).collect();
            (pid, ProcessShares { comm, samples, components })
        })
        .collect();
    Ok(out)
}

/// Side by side: the eBPF profile's share and perf's share per LUT process and component.
fn compare(perf: &BTreeMap<u32, ProcessShares>, run: &std::path::Path) -> Result<()> {
    let text = std::fs::read_to_string(run).with_context(|| format!("read {}", run.display()))?;
    let report: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("parse {}", run.display()))?;
    println!("| repetition | role | component | eBPF profile | perf record | difference (pp) |");
    println!("|---|---|---|---|---|---|");
    let reps = report["repetitions"].as_array().context("no repetitions in the run")?;
    for (i, rep) in reps.iter().enumerate() {
        for pair in rep["pids"].as_array().context("the run has no pids (re-run with this nesquic)")? {
            let (Some(role), Some(pid)) = (pair[0].as_str(), pair[1].as_u64()) else { continue };
            let Some(p) = perf.get(&(pid as u32)) else { continue };
            let roles = rep["profile"]["roles"].as_array().context("the run has no profile (--probe profile)")?;
            let Some(mine) = roles.iter().find(|r| r["role"] == role) else { continue };
            for c in mine["components"].as_array().into_iter().flatten() {
                let name = c["name"].as_str().unwrap_or("?");
                let ours = c["share"].as_f64().unwrap_or(0.0) * 100.0;
                let theirs = p.components.get(name).copied().unwrap_or(0.0) * 100.0;
                println!(
                    "| {} | {role} ({} / {} samples) | {name} | {ours:.1}% | {theirs:.1}% | {:+.1} |",
                    i + 1,
                    mine["samples"],
                    p.samples,
                    ours - theirs
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_script_stacks_are_classified_per_process() {
        let text = "nesquic-lut-qui 4242\n\
            \tffffffff81234567 udp_sendmsg+0x10 ([kernel.kallsyms])\n\
            \tffffffff81234000 __sys_sendmsg+0x20 ([kernel.kallsyms])\n\
            \t7f0000001000 sendmsg+0x5 (/usr/lib/libc.so.6)\n\
            \n\
            nesquic-lut-qui 4242\n\
            \t55550000a000 _ZN5rustls6crypto4ring4quic9PacketKey17encrypt_in_place17h0123456789abcdefE+0x40 (/bin/lut)\n\
            \n\
            nesquic-lut-qui 4243\n\
            \t55550000b000 main+0x1 (/bin/lut)\n";
        let out = classify(text).expect("classified");
        let server = &out[&4242];
        assert_eq!(server.samples, 2);
        assert_eq!(server.components.get("packet_io"), Some(&0.5), "{:?}", server.components);
        assert_eq!(server.components.get("crypto"), Some(&0.5), "{:?}", server.components);
        assert_eq!(out[&4243].components.get("other"), Some(&1.0));
    }
}
