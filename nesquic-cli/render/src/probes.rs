//! The probe tables of `run` and `trace`: packet I/O per syscall, the kernel's UDP path, timed
//! and counted functions, duty cycles, calibrated times, and the agent's warnings.

use std::collections::{BTreeMap, HashMap};

use nesquic_model::agent::ProcessSeen;
use nesquic_model::metrics::{Direction, Mechanism, Timing};
use nesquic_model::{HealthCounts, Metrics, Role, RoleMetrics};

use crate::text::{duration, ratio, share, truncate};

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
    if let Some(line) = unprobed_line(&metrics.kernel_io) {
        println!("{line}");
    }
    let agent_lost = agent_lost_lines(metrics);
    if metrics.lost.is_clean() && agent_lost.is_empty() {
        println!("lost: nothing (every call entered was matched with its return)");
    } else if !metrics.lost.is_clean() {
        println!("lost: {}", kernel_lost_line(&metrics.lost));
    }
    for line in agent_lost {
        println!("lost: {line}");
    }
}

/// The kernel side's losses in words, the non-zero ones only.
pub fn kernel_lost_line(lost: &HealthCounts) -> String {
    let counts = [
        (lost.inflight_full, "call(s) not timed (the in-flight map was full)"),
        (lost.exit_without_entry, "return(s) seen without their entry"),
        (lost.nested_overwrites, "re-entered call(s) whose outer call was lost"),
        (lost.user_read_failures, "user-memory read(s) failed"),
        (lost.truncated_batches, "mmsg batch(es) larger than the parsed maximum (the rest not counted)"),
        (lost.events_dropped, "per-message event(s) or profile sample(s) with no room left"),
        (lost.stack_collisions, "sampled stack(s) lost to a stack-map collision (their user leaf kept)"),
    ];
    let parts: Vec<String> = counts.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")).collect();
    parts.join("; ")
}

/// Per role, the calls of timed functions the user-space agents could not record (none when
/// nothing was lost).
pub fn agent_lost_lines(metrics: &Metrics) -> Vec<String> {
    let mut lines = Vec::new();
    for role in &metrics.roles {
        let Some(lost) = role.agent_lost.filter(|l| !l.is_clean()) else { continue };
        let mut parts = Vec::new();
        if lost.shadow_full > 0 {
            parts.push(format!(
                "{} call(s) neither counted nor timed (nested deeper than {} timed calls in a thread)",
                lost.shadow_full,
                nesquic_model::agent::SHADOW_DEPTH
            ));
        }
        if lost.shadow_dropped > 0 {
            parts.push(format!(
                "{} call(s) never recorded (their frame was left without returning: longjmp or unwinding)",
                lost.shadow_dropped
            ));
        }
        lines.push(format!("{} (user agent): {}", role.role, parts.join("; ")));
    }
    lines
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
    for dir in Direction::BOTH {
        for s in role.io.iter().filter(|s| s.direction == dir) {
            let t = &s.timing;
            // A byte stream's calls move no datagrams: no datagram figure, not a zero.
            let (datagrams, per_call, per_datagram) = if role.is_byte_stream() {
                ("-".to_string(), "-".to_string(), "-".to_string())
            } else if s.has_stream_calls() {
                // Calls on TCP sockets moved none of the datagrams: no per-call or per-datagram figure.
                (s.datagrams.to_string(), "-".to_string(), "-".to_string())
            } else {
                (
                    s.datagrams.to_string(),
                    format!("{:.2}", ratio(s.datagrams as f64, t.calls as f64)),
                    // No datagram (every receive found nothing): no time per datagram, not a zero.
                    if s.datagrams == 0 {
                        "-".to_string()
                    } else {
                        format!("{:.0}", t.total_ns as f64 / s.datagrams as f64)
                    },
                )
            };
            println!(
                "  {:<12} {:>8} {:>12} {:>9} {:>10} {:>9} {:>9} {:>9} {:>8.0} {:>7} {:>8} {:>6} {:>6}  {}",
                s.syscall,
                t.calls,
                s.bytes,
                datagrams,
                duration(t.total_ns as f64),
                duration(t.mean_ns()),
                duration(t.p50_le_ns as f64),
                duration(t.p99_le_ns as f64),
                ratio(s.bytes as f64, t.calls as f64),
                per_call,
                per_datagram,
                s.eagain,
                // A blocking call's time includes its wait: no share of CPU.
                if role.blocking_calls { "-".to_string() } else { share(t.total_ns as f64, cpu_ns) },
                mechanism_label(s.mechanism),
            );
        }
    }
    if role.blocking_calls {
        println!(
            "  these calls block until data can move: their time includes waiting, so it is no share of CPU \
             (the profile's packet_io.kernel is)"
        );
    }
    if let Some(line) = stream_calls_line(role) {
        println!("  {line}");
    }
    println!("  {}", offload_line(role));
    if !role.io_crosscheck.is_empty() {
        match nesquic_record::io::crosscheck_differences(role).as_slice() {
            [] => {
                println!("  I/O cross-check: the agent's libc interposition and the syscall tracepoints agree exactly")
            }
            d => println!("  I/O cross-check DIFFERS: {}", d.join("; ")),
        }
    }
}

/// Which rows of a role that moved datagrams also hold calls on stream sockets (`nesquic trace`
/// of a program using UDP and TCP), which move bytes and no datagram; `None` when no row does.
fn stream_calls_line(role: &RoleMetrics) -> Option<String> {
    if role.is_byte_stream() {
        return None;
    }
    // In the table's order: sends, then receives.
    let rows: Vec<String> = Direction::BOTH
        .iter()
        .flat_map(|&dir| role.io.iter().filter(move |s| s.direction == dir && s.has_stream_calls()))
        .map(|s| format!("{} {} of {} calls", s.syscall, s.stream_calls().unwrap_or_default(), s.timing.calls))
        .collect();
    (!rows.is_empty()).then(|| {
        format!(
            "on stream sockets (TCP), moving bytes and no datagram: {}; no dg/call or ns/dg for these rows",
            rows.join(", ")
        )
    })
}

/// Short name of what measured a row, for the terminal.
pub(crate) fn mechanism_label(mechanism: Mechanism) -> &'static str {
    match mechanism {
        Mechanism::InlineHook => "user hook",
        Mechanism::Interposition => "user libc",
        Mechanism::Unrecorded => "-",
        other => other.as_str(),
    }
}

/// What went wrong with the user-space agents, one line each: an agent that did not start
/// measured nothing in its process, an unpatched function was not measured there. Without these
/// lines a missing figure would read as "not called".
pub fn agent_problems(agents: &[nesquic_record::run::AgentReport]) -> Vec<String> {
    let mut lines = Vec::new();
    for a in agents {
        if !a.ready {
            lines.push(format!(
                "the user-space agent did not start in the {} (nothing it would measure was measured there)",
                a.role
            ));
            continue;
        }
        for f in a.functions.iter().filter(|f| !f.patched) {
            lines.push(format!("{}: {} not hooked by the agent (not measured): {}", a.role, f.name, f.reason));
        }
        let without: Vec<&ProcessSeen> = a.processes.iter().filter(|p| p.without_agent.is_some()).collect();
        let mut unmeasured = runs_of_a_program(&without, |pids, p| {
            format!("{} ({pids}): {}", p.name, p.without_agent.as_deref().unwrap_or_default())
        });
        let count = without.len() + a.processes_unlisted_without_agent as usize;
        if a.processes_unlisted_without_agent > 0 {
            unmeasured.push(format!("{} more, not listed", a.processes_unlisted_without_agent));
        }
        if count > 0 {
            lines.push(format!(
                "the command started {count} program{} the user-space agent cannot load into, so nothing {} did is in \
                 these counts: {}; --probe-backend kernel (root) measures every process",
                if count == 1 { "" } else { "s" },
                if count == 1 { "it" } else { "they" },
                unmeasured.join(", ")
            ));
        }
    }
    lines
}

/// Which processes a command's agent measured (`nesquic trace`: it follows the command into the
/// programs it execs and starts), and which it cannot: one line, `None` without an agent.
pub fn agent_processes(agents: &[nesquic_record::run::AgentReport]) -> Option<String> {
    let a = agents.iter().find(|a| a.ready)?;
    let all: Vec<&ProcessSeen> = a.processes.iter().collect();
    let listed = runs_of_a_program(&all, |pids, p| match &p.without_agent {
        None => format!("{} ({pids})", p.name),
        Some(_) => format!("{} ({pids}, NOT measured)", p.name),
    });
    let count = a.processes.iter().filter(|p| p.without_agent.is_none()).count();
    let measured_unlisted = a.processes_unlisted.saturating_sub(a.processes_unlisted_without_agent);
    let more = match (measured_unlisted, a.processes_unlisted_without_agent) {
        (0, 0) => String::new(),
        (m, 0) => format!(", and {m} more measured, not listed"),
        (0, n) => format!(", and {n} more NOT measured, not listed"),
        (m, n) => format!(", and {m} more measured and {n} NOT measured, not listed"),
    };
    // An exec starts a new program in the same process: the agent counts programs, and the
    // pids say which shared a process.
    Some(format!(
        "user-space agent: measured {count} listed program{} (an exec keeps the pid): {}{more}; programs that cannot \
         load it (statically linked ones, such as Go's) are not measured and are named when the command starts \
         them with execve/execv/execvp/posix_spawn: --probe-backend kernel follows every process",
        if count == 1 { "" } else { "s" },
        listed.join(", "),
    ))
}

/// `processes` described by `describe(pids, process)`, one item per run of consecutive entries
/// of one program in one state (a script that starts a program 14 times reads as one item, with
/// "14 runs, pids first..last" as its pids).
fn runs_of_a_program(processes: &[&ProcessSeen], describe: impl Fn(&str, &ProcessSeen) -> String) -> Vec<String> {
    processes
        .chunk_by(|a, b| a.name == b.name && a.without_agent == b.without_agent)
        .filter_map(|run| {
            let (first, last) = (run.first()?, run.last()?);
            let pids = match run.len() {
                1 => format!("pid {}", first.pid),
                n => format!("{n} runs, pids {}..{}", first.pid, last.pid),
            };
            Some(describe(&pids, first))
        })
        .collect()
}

/// Warns about agents that did not start or functions they could not patch (those functions
/// were then not measured in that process).
pub fn print_agent_problems(agents: &[nesquic_record::run::AgentReport]) {
    for line in agent_problems(agents) {
        eprintln!("nesquic: warning: {line}");
    }
}

/// The syscalls' time per direction split into exclusive parts of the kernel's path. A stage
/// whose function is not probed says so, and the part that holds its time says it includes it.
fn print_packet_io_split(kernel: &nesquic_model::kernel_io::KernelIo, role: &RoleMetrics) {
    for line in packet_io_split(kernel, role) {
        println!("  {line}");
    }
}

/// The lines of [`print_packet_io_split`].
fn packet_io_split(kernel: &nesquic_model::kernel_io::KernelIo, role: &RoleMetrics) -> Vec<String> {
    let mut lines = Vec::new();
    for direction in Direction::BOTH {
        let syscall_ns: u64 = role.io.iter().filter(|s| s.direction == direction).map(|s| s.timing.total_ns).sum();
        let Some(b) = kernel.breakdown(role.role, direction, syscall_ns) else { break };
        if syscall_ns == 0 {
            continue;
        }
        let parts: Vec<String> = b
            .parts
            .iter()
            .map(|p| match p.ns {
                Some(ns) if p.includes.is_empty() => {
                    format!("{} {:.1}%", p.stage, 100.0 * ns as f64 / syscall_ns as f64)
                }
                Some(ns) => format!(
                    "{} {:.1}% (includes {}, not measured apart)",
                    p.stage,
                    100.0 * ns as f64 / syscall_ns as f64,
                    p.includes.join(", ")
                ),
                None => format!("{} not measured ({})", p.stage, p.not_measured.as_deref().unwrap_or("not probed")),
            })
            .collect();
        let outside = match &b.coalescing_outside {
            Some(p) if p.ns.is_none() => {
                format!(
                    "; GRO coalescing outside the syscalls not measured ({})",
                    p.not_measured.as_deref().unwrap_or("not probed")
                )
            }
            Some(p) if p.ns.is_some_and(|ns| ns > 0) => {
                format!("; GRO coalescing outside the syscalls {}", duration(p.ns.unwrap_or_default() as f64))
            }
            _ => String::new(),
        };
        lines.push(format!(
            "packet I/O split ({direction}, {} in syscalls): {}{outside}",
            duration(syscall_ns as f64),
            parts.join(", ")
        ));
    }
    lines
}

/// The kernel functions of the UDP path that are not probed while others are (their stages
/// are not measured), with the kernel's answer.
pub fn unprobed_line(kernel: &nesquic_model::kernel_io::KernelIo) -> Option<String> {
    let mechanism = kernel.mechanism?;
    if kernel.unprobed.is_empty() {
        return None;
    }
    let each: Vec<String> = kernel.unprobed.iter().map(|u| format!("{} ({})", u.function, u.why)).collect();
    Some(format!("kernel UDP path: not probed by {}, not measured: {}", mechanism.label(), each.join("; ")))
}

fn print_kernel_io(kernel: &nesquic_model::kernel_io::KernelIo, role: Role, cpu_ns: f64) {
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
pub fn print_compensated(metrics: &Metrics, calibration: &nesquic_record::calibration::Calibration) {
    let mut lines = Vec::new();
    for role in &metrics.roles {
        for f in role.functions.iter().filter(|f| f.timed && f.timing.calls > 0) {
            let (Some(mean), Some(err)) = (f.compensated_mean_ns, f.compensation_uncertainty_ns) else { continue };
            let site = match f.site {
                Some(k) => format!("{} site", k.label()),
                None => mechanism_label(f.mechanism).to_string(),
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
pub fn offload_line(role: &RoleMetrics) -> String {
    if role.is_byte_stream() {
        return "offload: a TCP byte stream, segmented and coalesced by the kernel (TSO/GSO, GRO) below the calls"
            .to_string();
    }
    let seen = |dir: Direction, name: &str| -> String {
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
    format!("offload seen: {}; {}", seen(Direction::Send, "GSO"), seen(Direction::Recv, "GRO"))
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
        let by = mechanism_label(f.mechanism).to_string();
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

#[cfg(test)]
mod kernel_path_tests {
    use nesquic_model::kernel_io::{KernelFunctionMetrics, KernelIo, Mechanism as KernelMechanism, Stage, Unprobed};

    use super::*;

    #[test]
    fn an_unprobed_stage_prints_not_measured_and_the_part_holding_its_time_says_so() {
        let sendmsg = nesquic_model::SyscallMetrics {
            syscall: nesquic_model::Syscall::Sendmsg,
            direction: Direction::Send,
            timing: Timing { calls: 1, total_ns: 1000, ..Timing::empty() },
            errors: 0,
            eagain: 0,
            bytes: 0,
            datagrams: 0,
            messages: 0,
            segmented_messages: 0,
            mechanism: Mechanism::Tracepoint,
        };
        let role = RoleMetrics {
            role: Role::Server,
            io: vec![sendmsg],
            functions: Vec::new(),
            io_crosscheck: Vec::new(),
            agent_lost: None,
            byte_stream: false,
            blocking_calls: false,
        };
        let row = |function: &str, stage, total_ns| KernelFunctionMetrics {
            role: Role::Server,
            function: function.into(),
            stage,
            mechanism: "fentry/fexit".into(),
            timing: Timing { calls: 1, total_ns, p50_le_ns: 0, p99_le_ns: 0, hist: Vec::new() },
        };
        let kernel = KernelIo {
            mechanism: Some(KernelMechanism::Fentry),
            notes: Vec::new(),
            rows: vec![row("udp_sendmsg", Stage::Udp, 800), row("ip_output", Stage::Ip, 500)],
            unprobed: vec![Unprobed {
                function: "ip_generic_getfrag".into(),
                why: "load: Invalid argument (os error 22)".into(),
            }],
        };
        assert_eq!(
            packet_io_split(&kernel, &role),
            ["packet I/O split (send, 1.0us in syscalls): syscall entry/exit 20.0%, udp 30.0% (includes copy, not \
              measured apart), ip 50.0%, device 0.0%, segmentation 0.0%, copy not measured (ip_generic_getfrag: load: \
              Invalid argument (os error 22))"]
        );
        assert_eq!(
            unprobed_line(&kernel).as_deref(),
            Some("kernel UDP path: not probed by fentry/fexit, not measured: ip_generic_getfrag (load: Invalid argument (os error 22))")
        );
    }
}

#[cfg(test)]
mod lost_tests {
    use super::*;

    #[test]
    fn the_kernel_lost_line_names_each_non_zero_count_in_words() {
        let lost = HealthCounts { stack_collisions: 31, truncated_batches: 2, ..HealthCounts::default() };
        assert_eq!(
            kernel_lost_line(&lost),
            "2 mmsg batch(es) larger than the parsed maximum (the rest not counted); \
             31 sampled stack(s) lost to a stack-map collision (their user leaf kept)"
        );
    }
}

#[cfg(test)]
mod agent_processes_tests {
    use nesquic_record::run::AgentReport;

    use super::*;

    fn report(unlisted: u32, unlisted_without_agent: u32) -> AgentReport {
        let seen = |name: &str, pid, why: Option<&str>| ProcessSeen {
            pid,
            name: name.into(),
            without_agent: why.map(String::from),
        };
        AgentReport {
            role: Role::Process,
            ready: true,
            functions: Vec::new(),
            startup_cpu_ns: None,
            processes: vec![seen("sh", 7, None), seen("busybox", 8, Some("statically linked"))],
            processes_unlisted: unlisted,
            processes_unlisted_without_agent: unlisted_without_agent,
        }
    }

    #[test]
    fn unlisted_programs_say_whether_they_were_measured() {
        let more = |unlisted, without| {
            let line = agent_processes(&[report(unlisted, without)]).expect("a ready agent");
            let listed = "measured 1 listed program (an exec keeps the pid): sh (pid 7), busybox (pid 8, NOT measured)";
            assert!(line.contains(listed), "{line}");
            line[line.find(listed).map_or(0, |i| i + listed.len())..].split(';').next().unwrap_or_default().to_string()
        };
        assert_eq!(more(0, 0), "");
        assert_eq!(more(3, 0), ", and 3 more measured, not listed");
        assert_eq!(more(3, 3), ", and 3 more NOT measured, not listed");
        assert_eq!(more(5, 2), ", and 3 more measured and 2 NOT measured, not listed");
        let warning = agent_problems(&[report(5, 2)]);
        assert_eq!(
            warning,
            ["the command started 3 programs the user-space agent cannot load into, so nothing they did is in these \
              counts: busybox (pid 8): statically linked, 2 more, not listed; --probe-backend kernel (root) \
              measures every process"]
        );
    }

    #[test]
    fn a_program_started_again_and_again_is_one_item_with_its_runs() {
        let mut r = report(0, 0);
        let busybox = r.processes[1].clone();
        r.processes.extend([9, 11].map(|pid| ProcessSeen { pid, ..busybox.clone() }));
        r.processes.push(ProcessSeen { pid: 12, name: "env".into(), without_agent: None });
        let line = agent_processes(std::slice::from_ref(&r)).expect("a ready agent");
        assert!(
            line.contains("measured 2 listed programs (an exec keeps the pid): sh (pid 7), busybox (3 runs, pids 8..11, NOT measured), env (pid 12);"),
            "{line}"
        );
        assert_eq!(
            agent_problems(&[r]),
            ["the command started 3 programs the user-space agent cannot load into, so nothing they did is in these \
              counts: busybox (3 runs, pids 8..11): statically linked; --probe-backend kernel (root) measures every \
              process"]
        );
    }
}
