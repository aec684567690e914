//! The sampling profile: components with 95% intervals and CPU per datagram, the hottest
//! functions, and (NESQUIC_PROFILE_OTHER=N) the hottest frames no rule named.

use crate::text::truncate;

/// Below this many samples on a side, the profile says how to get more.
const FEW_SAMPLES: u64 = 100;

/// Prints a sampling profile (components with 95% intervals, then the hottest functions); `cpu_s` is the profiled processes' CPU time, to put the sampler's cost in
/// proportion.
pub fn print_profile(profile: &nesquic_model::profile::Profile, window: &str, cpu_s: f64) {
    println!();
    println!("sampling profile ({} Hz {}), {window}:", profile.frequency_hz, profile.clock.label());
    let user_mode = profile.clock == nesquic_model::profile::SampleClock::UserModeCpuClock;
    if let Some(c) = profile.sampler.filter(|_| user_mode) {
        // No BPF program runs: the kernel writes each sample to a buffer nesquic reads.
        println!(
            "  sampler cost: {} samples read from the perf buffers in {:.1} ms of Nesquic's own CPU; each sample's interrupt and user-stack walk are the LUT's CPU time (measure them with --overhead)",
            c.samples,
            c.run_ns as f64 / 1e6
        );
    } else if let Some(c) = profile.sampler.filter(|c| c.samples + c.inserts > 0) {
        // Steady samples apart from first inserts: a cold map's inserts dominate a short profile.
        let share = if cpu_s > 0.0 { c.run_ns as f64 / 1e9 / cpu_s * 100.0 } else { 0.0 };
        let each = |ns: Option<f64>| ns.map_or("-".to_string(), |ns| format!("{:.1}", ns / 1e3));
        println!(
            "  sampler cost (the program's own clock): {} steady samples x {} us + {} first inserts x {} us = {:.1} ms, {share:.2}% of the profiled processes' CPU time ({} ticks on all CPUs; {})",
            c.samples,
            each(c.steady_ns()),
            c.inserts,
            each(c.insert_ns_each()),
            c.run_ns as f64 / 1e6,
            c.runs,
            profile.clock.interrupt()
        );
        if let (Some(walks), nesquic_model::profile::SampleClock::SchedulerTick) = (c.kernel_walks, profile.clock) {
            println!(
                "  kernel stacks walked: {walks} of {} samples (a tick that interrupted user code has only its own frames there, and skips the walk)",
                c.samples + c.inserts
            );
        }
        // The program's time is a floor: a LUT whose threads hand work to each other pays more
        // for a held thread (msquic: 0.3% by this clock, 2.6% of CPU per GB end to end).
        println!("  end to end a sample can cost a LUT more than this (a thread held); measure it with --overhead");
    } else if let Some(c) = profile.sampler.filter(|c| c.runs > 0) {
        println!(
            "  sampler cost (kernel BPF stats): {} runs x {:.1} us = {:.1} ms, {:.2}% of the profiled processes' CPU time (the timer interrupt around it not included)",
            c.runs,
            c.run_ns as f64 / c.runs as f64 / 1e3,
            c.run_ns as f64 / 1e6,
            if cpu_s > 0.0 { c.run_ns as f64 / 1e9 / cpu_s * 100.0 } else { 0.0 }
        );
    }
    if let Some(m) = profile.maps_reads.filter(|m| m.reads > 0) {
        println!(
            "  memory-map reads (to name the samples): {} x {:.0} us = {:.1} ms of Nesquic's CPU; after start-up only when code was mapped or unmapped ({} times) and every 5 s",
            m.reads,
            m.read_ns as f64 / m.reads as f64 / 1e3,
            m.read_ns as f64 / 1e6,
            m.code_changes
        );
    }
    // Shares from a few dozen samples are rough: say how to get more, and what that costs.
    // (No role at all: no sample landed in either side.)
    let fewest = profile.roles.iter().map(|r| r.samples).min().unwrap_or(0);
    if fewest < FEW_SAMPLES {
        let faster = match profile.clock {
            nesquic_model::profile::SampleClock::SchedulerTick if profile.frequency_hz < 999 => format!(
                "; --probe profile:~999 samples {:.1}x as often, at the cost of a timer interrupt per sample (bench/sampler-floor.md)",
                999.0 / profile.frequency_hz.max(1) as f64
            ),
            nesquic_model::profile::SampleClock::RandomCpuClock if profile.frequency_hz < 999 => format!(
                "; --probe profile:~999 samples {:.1}x as often, at ~17 us of timer interrupt per sample (bench/sampler-floor.md)",
                999.0 / profile.frequency_hz.max(1) as f64
            ),
            _ => String::new(),
        };
        println!(
            "  few samples ({fewest} on one side): the intervals are wide; --repeat N or a larger --size gives more at the same cost{faster}"
        );
    }
    // NESQUIC_PROFILE_OTHER=N: the N (at most 20) hottest leaf frames no rule named, per role.
    let other: usize = std::env::var("NESQUIC_PROFILE_OTHER").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    for role in &profile.roles {
        let unknown = role.unknown_leaf_samples() as f64 / role.samples.max(1) as f64 * 100.0;
        let frameless = role.frameless_callers as f64 / role.samples.max(1) as f64 * 100.0;
        let lost = role.lost_stacks as f64 / role.samples.max(1) as f64 * 100.0;
        println!(
            "{}: {} samples ({unknown:.1}% with an unsymbolised leaf frame, {frameless:.1}% in a frameless leaf whose caller the stack pointer gave, {lost:.1}% lost a stack to a stack-map collision)",
            role.role, role.samples
        );
        let cost = role.cost.as_ref();
        if let Some(c) = cost {
            println!(
                "  {:.0} ns {}CPU per datagram {} ({} datagrams from {}; {:.3} s {}CPU)",
                c.ns_per_datagram,
                if user_mode { "user-mode " } else { "" },
                c.direction,
                c.datagrams,
                c.datagram_source,
                c.cpu_s,
                if user_mode { "user-mode " } else { "" }
            );
        } else {
            println!("  no per-datagram cost: no datagram count (add --probe io)");
        }
        println!("  {:<26} {:>6}  {:>13}  {:>8}  {:>8}", "component", "share", "95% interval", "ns/dgram", "ns/byte");
        let line =
            |name: &str, s: &nesquic_model::profile::Share, c: Option<&nesquic_model::packet_cost::ComponentCost>| {
                let (per_dgram, per_byte) = c.map_or((String::new(), String::new()), |c| {
                    (format!("{:.0}", c.ns_per_datagram), format!("{:.3}", c.ns_per_byte))
                });
                println!(
                    "  {:<26} {:>5.1}%  [{:>5.1}-{:>5.1}]  {:>8}  {:>8}",
                    name,
                    100.0 * s.share,
                    100.0 * s.ci95_low,
                    100.0 * s.ci95_high,
                    per_dgram,
                    per_byte
                );
            };
        for g in &role.components {
            line(&g.name, g, cost.and_then(|c| c.components.iter().find(|x| x.name == g.name)));
            let prefix = format!("{}.", g.name);
            let parts: Vec<_> = role.split.iter().filter(|s| s.name.starts_with(&prefix)).collect();
            // The split only where there is one: `app` alone needs no `app.harness` line.
            if parts.len() > 1 || parts.iter().any(|p| p.samples != g.samples) {
                for p in parts {
                    line(&format!("  {}", p.name), p, cost.and_then(|c| c.split.iter().find(|x| x.name == p.name)));
                }
                // What the family's top-level rule kept (no finer rule named a frame above it).
                if let Some(rest) = role.split.iter().find(|s| s.name == g.name) {
                    let c = cost.and_then(|c| c.split.iter().find(|x| x.name == g.name));
                    line(&format!("  {} (rest)", g.name), rest, c);
                }
            }
        }
        for f in role.top_functions.iter().take(5) {
            println!("    {:>5.1}%  {}", 100.0 * f.share, truncate(&f.name, 100));
        }
        if other > 0 {
            println!("  hottest leaf frames no rule named (NESQUIC_PROFILE_OTHER):");
            for f in role.unclassified_leaves.iter().take(other) {
                println!("    {:>5.1}%  {}", 100.0 * f.share, truncate(&f.name, 100));
            }
        }
    }
}
