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
use nesquic_protocol::Role;
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

/// One role's samples over every repetition, per component: (eBPF, perf).
struct RoleTally {
    role: Role,
    components: BTreeMap<String, (f64, f64)>,
    ebpf_samples: f64,
    perf_samples: f64,
}

/// Side by side, per role over every repetition: the eBPF profile's share and perf's share of each
/// component, their difference, and how far apart two samplers of these sizes land by chance
/// alone (95%: 1.96 standard errors of a difference of two proportions).
fn compare(perf: &BTreeMap<u32, ProcessShares>, run: &std::path::Path) -> Result<()> {
    let record = nesquic_record::RunRecord::load(run)?;
    // Per role: component -> (eBPF samples, perf samples), and each sampler's total.
    let mut roles: Vec<RoleTally> = Vec::new();
    for rep in &record.repetitions {
        anyhow::ensure!(!rep.pids.is_empty(), "{}: the run has no pids (re-run with this nesquic)", run.display());
        let profile = rep.profile.as_ref().context("the run has no profile (--probe profile)")?;
        for (role, pid) in &rep.pids {
            let Some(p) = u32::try_from(*pid).ok().and_then(|pid| perf.get(&pid)) else { continue };
            let Some(mine) = profile.roles.iter().find(|r| r.role == *role) else { continue };
            let i = roles.iter().position(|r| r.role == *role).unwrap_or_else(|| {
                roles.push(RoleTally {
                    role: *role,
                    components: BTreeMap::new(),
                    ebpf_samples: 0.0,
                    perf_samples: 0.0,
                });
                roles.len() - 1
            });
            let entry = &mut roles[i];
            entry.ebpf_samples += mine.samples as f64;
            entry.perf_samples += p.samples as f64;
            for c in &mine.components {
                entry.components.entry(c.name.clone()).or_default().0 += c.samples as f64;
            }
            for (name, share) in &p.components {
                entry.components.entry(name.clone()).or_default().1 += share * p.samples as f64;
            }
        }
    }
    anyhow::ensure!(!roles.is_empty(), "no LUT process of the run appears in the perf dump");
    println!("| role (eBPF / perf samples) | component | eBPF profile | perf record | difference (pp) | chance alone (95%, pp) |");
    println!("|---|---|---|---|---|---|");
    let (mut largest, mut beyond) = ((0.0_f64, String::new()), Vec::new());
    for RoleTally { role, components, ebpf_samples: ours_n, perf_samples: theirs_n } in &roles {
        let mut rows: Vec<_> = components.iter().collect();
        rows.sort_by(|a, b| (b.1 .0 + b.1 .1).total_cmp(&(a.1 .0 + a.1 .1)));
        for (name, (ours, theirs)) in rows {
            let (p1, p2) = (ours / ours_n.max(1.0), theirs / theirs_n.max(1.0));
            let difference = 100.0 * (p1 - p2);
            let noise =
                100.0 * nesquic_stats::two_proportion_half_width(p1, *ours_n, p2, *theirs_n, nesquic_stats::Z95);
            let beyond_chance = difference.abs() > noise;
            let mark = if beyond_chance { " beyond chance" } else { "" };
            if beyond_chance {
                beyond.push(format!("{role} {name}"));
            }
            if difference.abs() > largest.0 {
                largest = (difference.abs(), format!("{role} {name}"));
            }
            println!(
                "| {role} ({ours_n:.0} / {theirs_n:.0}) | {name} | {:.1}% | {:.1}% | {difference:+.1} | ±{noise:.1}{mark} |",
                100.0 * p1,
                100.0 * p2
            );
        }
    }
    println!("\nlargest difference: {:.1} percentage points ({})", largest.0, largest.1);
    if beyond.is_empty() {
        println!("every difference is within what two samplers of these sizes differ by chance");
    } else {
        println!("beyond chance: {}", beyond.join(", "));
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
