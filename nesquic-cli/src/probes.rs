//! Printing what the probes measured, for `run`, `trace` and `probes`; `nesquic probes` itself.
//! Resolving a request and opening the session is the engine's (`nesquic_engine::plan`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::Result;
use nesquic_ebpf::metrics::Timing;
use nesquic_ebpf::{Catalog, Metrics, ObjectSymbols, Role, RoleMetrics};
pub use nesquic_engine::plan::{classifier, ProbePlan};

/// Prints a sampling profile (components with 95% intervals, then the hottest functions); `cpu_s` is the profiled processes' CPU time, to put the sampler's cost in
/// proportion.
pub fn print_profile(profile: &nesquic_ebpf::profile::Profile, window: &str, cpu_s: f64) {
    println!();
    println!("sampling profile ({} Hz per CPU, CPU-clock), {window}:", profile.frequency_hz);
    if let Some(c) = profile.sampler.filter(|c| c.runs > 0) {
        println!(
            "  sampler cost (kernel BPF stats): {} runs x {:.1} us = {:.1} ms, {:.2}% of the profiled processes' CPU time (the timer interrupt around it not included)",
            c.runs,
            c.run_ns as f64 / c.runs as f64 / 1e3,
            c.run_ns as f64 / 1e6,
            if cpu_s > 0.0 { c.run_ns as f64 / 1e9 / cpu_s * 100.0 } else { 0.0 }
        );
    }
    // NESQUIC_PROFILE_OTHER=N: the N (at most 20) hottest leaf frames no rule named, per role.
    let other: usize = std::env::var("NESQUIC_PROFILE_OTHER").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    for role in &profile.roles {
        let unknown = role.unknown_leaf_samples() as f64 / role.samples.max(1) as f64 * 100.0;
        let frameless = role.frameless_callers as f64 / role.samples.max(1) as f64 * 100.0;
        println!(
            "{}: {} samples ({unknown:.1}% with an unsymbolised leaf frame, {frameless:.1}% in a frameless leaf whose caller the stack pointer gave)",
            role.role, role.samples
        );
        let cost = role.cost.as_ref();
        if let Some(c) = cost {
            println!(
                "  {:.0} ns CPU per datagram {} ({} datagrams from {}; {:.3} s CPU)",
                c.ns_per_datagram, c.direction, c.datagrams, c.datagram_source, c.cpu_s
            );
        } else {
            println!("  no per-datagram cost: no datagram count (add --probe io)");
        }
        println!("  {:<26} {:>6}  {:>13}  {:>8}  {:>8}", "component", "share", "95% interval", "ns/dgram", "ns/byte");
        let line =
            |name: &str, s: &nesquic_ebpf::profile::Share, c: Option<&nesquic_ebpf::packet_cost::ComponentCost>| {
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

/// Prints the profile rules that apply to `binary` (`nesquic probes --probe profile`).
fn list_profile_rules(binary: &Path) -> Result<()> {
    let catalog = Catalog::builtin()?;
    let classifier = nesquic_ebpf::profile::Classifier::new(&catalog.components)?;
    let mut objects = Vec::new();
    for path in nesquic_ebpf::objects::objects_of(binary)? {
        objects.push(ObjectSymbols::load(&path)?);
    }
    println!("profile: component rules for {}, in the order a frame is tried:", binary.display());
    for u in classifier.uses(&objects, &catalog.components) {
        let weak = if u.weak { " (weak)" } else { "" };
        println!(
            "  {:<26}{weak} {} functions here, {} kernel patterns{}",
            u.name,
            u.user_functions,
            u.kernel_patterns,
            if u.examples.is_empty() { String::new() } else { format!("; e.g. {}", u.examples.join(", ")) }
        );
    }
    Ok(())
}

/// Prints the probe figures. `cpu_s` gives each role's CPU seconds over the same window.
pub fn print_summary(metrics: &Metrics, cpu_s: &HashMap<Role, f64>, window: &str) {
    let mut how = Vec::new();
    how.extend(metrics.io_mechanism.as_deref());
    how.extend(metrics.function_mechanism.as_deref());
    if how.is_empty() {
        return; // only the sampling profile ran; it prints itself
    }
    println!();
    println!("probes ({}), {window}:", how.join("; "));
    for role in &metrics.roles {
        let cpu_ns = cpu_s.get(&role.role).copied().unwrap_or(0.0) * 1e9;
        println!("{}", role.role);
        print_io(role, cpu_ns);
        print_kernel_io(&metrics.kernel_io, role.role, cpu_ns);
        print_packet_io_split(&metrics.kernel_io, role);
        print_functions(role, cpu_ns);
    }
    if metrics.io_mechanism.is_some() && metrics.kernel_io.mechanism.is_none() && !metrics.kernel_io.notes.is_empty() {
        println!("kernel UDP path: not measured here ({}); see `nesquic doctor`", metrics.kernel_io.notes.join("; "));
    }
    if metrics.lost.is_clean() {
        println!("lost: nothing (every call entered was matched with its return)");
    } else {
        println!("lost: {:?}", metrics.lost);
    }
}

fn print_io(role: &RoleMetrics, cpu_ns: f64) {
    if role.io.is_empty() {
        return;
    }
    println!(
        "  {:<12} {:>8} {:>12} {:>9} {:>10} {:>9} {:>9} {:>9} {:>8} {:>7} {:>8} {:>6} {:>6}  by",
        "I/O",
        "calls",
        "bytes",
        "dgrams",
        "time",
        "mean",
        "p50<=",
        "p99<=",
        "B/call",
        "dg/call",
        "ns/dg",
        "EAGAIN",
        "%CPU"
    );
    for dir in ["send", "recv"] {
        for s in role.io.iter().filter(|s| s.direction == dir) {
            let t = &s.timing;
            println!(
                "  {:<12} {:>8} {:>12} {:>9} {:>10} {:>9} {:>9} {:>9} {:>8.0} {:>7.2} {:>8.0} {:>6} {:>6}  {}",
                s.syscall,
                t.calls,
                s.bytes,
                s.datagrams,
                duration(t.total_ns as f64),
                duration(t.mean_ns()),
                duration(t.p50_le_ns as f64),
                duration(t.p99_le_ns as f64),
                ratio(s.bytes as f64, t.calls as f64),
                ratio(s.datagrams as f64, t.calls as f64),
                ratio(t.total_ns as f64, s.datagrams as f64),
                s.eagain,
                share(t.total_ns as f64, cpu_ns),
                mechanism_label(&s.mechanism),
            );
        }
    }
    println!("  {}", offload_line(role));
    if !role.io_crosscheck.is_empty() {
        match crate::backend::crosscheck_differences(role).as_slice() {
            [] => {
                println!("  I/O cross-check: the agent's libc interposition and the syscall tracepoints agree exactly")
            }
            d => println!("  I/O cross-check DIFFERS: {}", d.join("; ")),
        }
    }
}

/// Short name of what measured a row, for the terminal.
fn mechanism_label(mechanism: &str) -> &str {
    match mechanism {
        nesquic_ebpf::metrics::MECHANISM_INLINE_HOOK => "user hook",
        nesquic_ebpf::metrics::MECHANISM_INTERPOSITION => "user libc",
        "" => "-",
        other => other,
    }
}

/// Warns about agents that did not start or functions they could not patch (those functions
/// were then not measured in that process).
pub fn print_agent_problems(agents: &[crate::backend::AgentReport]) {
    for a in agents {
        if !a.ready {
            eprintln!("nesquic: warning: the user-space agent did not start in the {} (nothing it would measure was measured there)", a.role);
            continue;
        }
        for f in a.functions.iter().filter(|f| !f.patched) {
            eprintln!("nesquic: warning: {}: {} not hooked by the agent: {}", a.role, f.name, f.reason);
        }
    }
}

/// The kernel's UDP path per function (inclusive times: udp_sendmsg contains ip_output ...).
/// The syscalls' time per direction split into exclusive parts of the kernel's path.
fn print_packet_io_split(kernel: &nesquic_ebpf::kernel_io::KernelIo, role: &RoleMetrics) {
    for direction in ["send", "recv"] {
        let syscall_ns: u64 = role.io.iter().filter(|s| s.direction == direction).map(|s| s.timing.total_ns).sum();
        let Some(b) = kernel.breakdown(role.role, direction, syscall_ns) else { return };
        if syscall_ns == 0 {
            continue;
        }
        let parts: Vec<String> = b
            .parts
            .iter()
            .map(|(stage, ns)| format!("{stage} {:.1}%", 100.0 * *ns as f64 / syscall_ns as f64))
            .collect();
        let outside = if b.coalescing_outside_ns > 0 {
            format!("; GRO coalescing outside the syscalls {}", duration(b.coalescing_outside_ns as f64))
        } else {
            String::new()
        };
        println!(
            "  packet I/O split ({direction}, {} in syscalls): {}{outside}",
            duration(syscall_ns as f64),
            parts.join(", ")
        );
    }
}

fn print_kernel_io(kernel: &nesquic_ebpf::kernel_io::KernelIo, role: Role, cpu_ns: f64) {
    let rows: Vec<_> = kernel.rows.iter().filter(|r| r.role == role).collect();
    if rows.is_empty() {
        return;
    }
    println!(
        "  {:<24} {:<13} {:>8} {:>10} {:>9} {:>9} {:>6}  by",
        "kernel path", "stage", "calls", "time", "mean", "p99<=", "%CPU"
    );
    for r in rows {
        let t = &r.timing;
        println!(
            "  {:<24} {:<13} {:>8} {:>10} {:>9} {:>9} {:>6}  {}",
            r.function,
            format!("{:?}", r.stage).to_lowercase(),
            t.calls,
            duration(t.total_ns as f64),
            duration(t.mean_ns()),
            duration(t.p99_le_ns as f64),
            share(t.total_ns as f64, cpu_ns),
            r.mechanism,
        );
    }
}

/// Duty-cycled functions: raw counts and counts extrapolated to the whole run.
pub fn print_duty(metrics: &Metrics) {
    let mut lines = Vec::new();
    for role in &metrics.roles {
        for f in &role.functions {
            let Some(d) = f.duty else { continue };
            lines.push(format!(
                "  {:<7} {:<26} {:>10} calls seen, {:>12.0} extrapolated (probes attached {:.1}% of the time) {}",
                role.role,
                f.category,
                f.timing.calls,
                d.calls,
                d.fraction * 100.0,
                f.name
            ));
        }
    }
    if !lines.is_empty() {
        println!("duty-cycled function probes:");
        for l in lines {
            println!("{l}");
        }
    }
}

/// Timed functions with the calibrated probe overhead subtracted, per role.
pub fn print_compensated(metrics: &Metrics, calibration: &crate::calibrate::Calibration) {
    let mut lines = Vec::new();
    for role in &metrics.roles {
        for f in role.functions.iter().filter(|f| f.timed && f.timing.calls > 0) {
            let (Some(mean), Some(err)) = (f.compensated_mean_ns, f.compensation_uncertainty_ns) else { continue };
            let site = match f.site {
                Some(k) => format!("{} site", k.label()),
                None => mechanism_label(&f.mechanism).to_string(),
            };
            lines.push(format!(
                "  {:<7} {:<26} {:>10} ± {:<8} per call (raw {}; {}) {}",
                role.role,
                f.category,
                duration(mean),
                duration(err),
                duration(f.timing.mean_ns()),
                site,
                f.name
            ));
        }
    }
    if !lines.is_empty() {
        println!("timed functions, calibrated probe overhead subtracted ({} rounds):", calibration.rounds_used());
        for l in lines {
            println!("{l}");
        }
    }
}

/// Whether GSO/GRO were in use, from what the probes saw: messages carrying several datagrams.
pub(crate) fn offload_line(role: &RoleMetrics) -> String {
    let seen = |dir: &str, name: &str| -> String {
        let (messages, segmented, datagrams) = role
            .io
            .iter()
            .filter(|s| s.direction == dir)
            .fold((0u64, 0u64, 0u64), |a, s| (a.0 + s.messages, a.1 + s.segmented_messages, a.2 + s.datagrams));
        if messages == 0 {
            return format!("{name} -");
        }
        let verdict = if segmented > 0 { "yes" } else { "no" };
        format!(
            "{name} {verdict} ({segmented} of {messages} messages carried several datagrams; {:.1} datagrams/message)",
            datagrams as f64 / messages as f64
        )
    };
    format!("offload seen: {}; {}", seen("send", "GSO"), seen("recv", "GRO"))
}

fn print_functions(role: &RoleMetrics, cpu_ns: f64) {
    if role.functions.is_empty() {
        return;
    }
    let io = nesquic_record::io::IoTotals::of(role);
    let (sent, received) = (io.send.datagrams, io.recv.datagrams);
    // Catalog categories are summed over their functions; custom globs list each function.
    let mut by_category: BTreeMap<String, (Timing, u64, bool, Vec<String>)> = BTreeMap::new();
    for f in &role.functions {
        let key = if f.category.starts_with("uprobe:") { f.name.clone() } else { f.category.clone() };
        let e = by_category.entry(key).or_insert_with(|| (Timing::empty(), 0, f.timed, Vec::new()));
        e.0.absorb(&f.timing);
        e.1 += f.bytes;
        e.2 &= f.timed;
        let by = mechanism_label(&f.mechanism).to_string();
        if !e.3.contains(&by) {
            e.3.push(by);
        }
    }
    println!(
        "  {:<26} {:>8} {:>10} {:>9} {:>9} {:>9} {:>12} {:>8} {:>8} {:>6}  by",
        "function", "calls", "time", "mean", "p50<=", "p99<=", "bytes", "call/dg", "ns/dg", "%CPU"
    );
    for (category, (t, bytes, timed, by)) in by_category {
        let time = |ns: f64| if timed { duration(ns) } else { "-".to_string() };
        // Seal runs per packet sent, open per packet received; the rest against both.
        let datagrams = match category.as_str() {
            "crypto.seal" => sent,
            "crypto.open" => received,
            _ => sent + received,
        } as f64;
        println!(
            "  {:<26} {:>8} {:>10} {:>9} {:>9} {:>9} {:>12} {:>8} {:>8} {:>6}  {}",
            truncate(&category, 26),
            t.calls,
            time(t.total_ns as f64),
            time(t.mean_ns()),
            time(t.p50_le_ns as f64),
            time(t.p99_le_ns as f64),
            bytes,
            if datagrams > 0.0 { format!("{:.2}", t.calls as f64 / datagrams) } else { "-".into() },
            if datagrams > 0.0 && timed { format!("{:.0}", t.total_ns as f64 / datagrams) } else { "-".into() },
            if timed { share(t.total_ns as f64, cpu_ns) } else { "-".into() },
            by.join("+"),
        );
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

fn share(ns: f64, cpu_ns: f64) -> String {
    if cpu_ns > 0.0 {
        format!("{:.1}", 100.0 * ns / cpu_ns)
    } else {
        "-".into()
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

/// 1.23s, 4.5ms, 12.3us, 870ns.
pub fn duration(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2}s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2}ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1}us", ns / 1e3)
    } else {
        format!("{ns:.0}ns")
    }
}

/// `nesquic probes`: what a probe list resolves to for a binary, without running anything.
pub fn list(text: &str, binary: &Path, choice: crate::backend::BackendChoice) -> Result<()> {
    use crate::backend::BackendChoice;
    let plan = ProbePlan::new(text, binary)?;
    if plan.request.profile {
        list_profile_rules(binary)?;
    }
    let crate::backend::WhoMeasures { user, why_kernel, refused } =
        crate::backend::who_measures(&plan, binary, choice)?;
    if plan.request.io {
        let kprobes = if nesquic_ebpf::preflight::kprobes_available() { "available" } else { "not available" };
        if user {
            println!("io: user (libc interposition) of sendmsg, sendmmsg, sendto, send, recvmsg, recvmmsg, recvfrom, recv (and write/read on UDP sockets) in the LUT; no root");
        }
        if !user || choice == BackendChoice::Both {
            println!(
                "io: syscall tracepoints sys_enter_/sys_exit_{{sendmsg,sendmmsg,sendto,recvmsg,recvmmsg,recvfrom}} (root; kprobes on this kernel: {kprobes})"
            );
            if !user {
                println!("    why the kernel: {why_kernel}");
            }
        }
    }
    for f in &plan.resolution.functions {
        let measured_by = match refused.iter().find(|(name, _)| *name == f.name) {
            _ if !user => format!("uprobe (root; {why_kernel})"),
            Some((_, why)) => format!("uprobe (root; the agent cannot hook it: {why})"),
            None => "user (inline hook)".to_string(),
        };
        let bytes = if f.bytes_arg > 0 { format!(" bytes=arg{}", f.bytes_arg) } else { String::new() };
        let site = if f.site.skip > 0 {
            format!("{} after endbr64", f.site.kind.label())
        } else {
            f.site.kind.label().to_string()
        };
        println!(
            "{:<26} {:<18} {:#014x} {}  [{}]{bytes}\n{:<46}{}  probe site: {site}\n{:<46}measured by: {measured_by}",
            f.category,
            f.backend,
            f.address,
            f.name,
            f.object.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            "",
            f.object.display(),
            ""
        );
    }
    let matched: std::collections::HashSet<&str> =
        plan.resolution.functions.iter().map(|f| f.category.as_str()).collect();
    let mut shown_header = false;
    for u in &plan.resolution.unmatched {
        if !shown_header {
            println!("\nmatched nothing (expected for backends this LUT does not use):");
            shown_header = true;
        }
        let note = if matched.contains(u.category.as_str()) { "" } else { "   <- category has no function" };
        println!("  {:<26} {:<38} {}{note}", u.category, u.backend, u.patterns.join(" | "));
    }
    Ok(plan.require_matches()?)
}
