//! A run for the terminal: each repetition's line, the summary table (median, min, max), the
//! I/O settings and hosts, the I/O layer's own counters checked against the probes, the link,
//! the calibration, and the probe tables and profile over all repetitions.

use nesquic_protocol::report::Transport;
use nesquic_protocol::Role;
use nesquic_record::calibration::Calibration;
use nesquic_record::events::HostInfo;
use nesquic_record::figures::{RepetitionFigures, Spread};
use nesquic_record::RunRecord as RunReport;

/// Everything `nesquic run` prints once the repetitions are over: the summary, then with probes
/// the probe tables over all repetitions (`merged`), the calibrated times and each profile.
pub fn print_run(report: &RunReport, merged: Option<&nesquic_model::Metrics>) {
    print_summary(report);
    if let Some(m) = merged {
        print_probe_summary(report, m);
        if let Some(c) = &report.calibration {
            crate::probes::print_compensated(m, c);
        }
    }
    for (i, rep) in report.repetitions.iter().enumerate() {
        if let Some(p) = &rep.profile {
            crate::profile::print_profile(
                p,
                &format!("repetition {}", i + 1),
                rep.server.cpu_total_s + rep.client.cpu_total_s,
            );
        }
    }
}

/// Prints the probe tables (totals over repetitions).
pub fn print_probe_summary(report: &RunReport, merged: &nesquic_model::Metrics) {
    let mut cpu = std::collections::HashMap::new();
    cpu.insert(nesquic_model::Role::Server, report.repetitions.iter().map(|r| r.server.cpu_total_s).sum());
    cpu.insert(nesquic_model::Role::Client, report.repetitions.iter().map(|r| r.client.cpu_total_s).sum());
    let n = report.repetitions.iter().filter(|r| r.probes.is_some()).count();
    let window = format!("totals over {n} repetition(s); %CPU = time inside / the process's CPU time");
    crate::probes::print_summary(merged, &cpu, &window);
    crate::probes::print_duty(merged);
    if let Some(cost) = agent_startup(&report.repetitions) {
        println!("user-space agent start-up (its CPU before main, median): {cost}");
    }
}

/// The user-space agent's start-up cost per role (its constructor's CPU time before `main`,
/// median over repetitions) and its share of the process's CPU; `None` without an agent.
pub fn agent_startup(repetitions: &[RepetitionFigures]) -> Option<String> {
    let parts: Vec<String> = [Role::Server, Role::Client]
        .into_iter()
        .filter_map(|role| {
            let cost = |r: &RepetitionFigures| {
                let ns = r.agents.iter().find(|a| a.role == role)?.startup_cpu_ns?;
                let cpu_s = if role == Role::Server { r.server.cpu_total_s } else { r.client.cpu_total_s };
                if cpu_s <= 0.0 {
                    return None;
                }
                Some((ns as f64, ns as f64 / 1e9 / cpu_s))
            };
            let costs: Vec<(f64, f64)> = repetitions.iter().filter_map(cost).collect();
            let ns = Spread::of(costs.iter().map(|c| c.0))?.median;
            let share = Spread::of(costs.iter().map(|c| c.1))?.median;
            Some(format!("{role} {:.2} ms ({:.2}% of its CPU)", ns / 1e6, 100.0 * share))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

pub fn repetition_line(label: &str, r: &RepetitionFigures) -> String {
    let mut line = repetition_figures(label, r);
    for extra in r.workload.iter().flat_map(|w| w.describe()) {
        line.push_str(&format!("\n  {extra}"));
    }
    line
}

fn repetition_figures(label: &str, r: &RepetitionFigures) -> String {
    format!(
        "{label}: goodput {:.1} Mbit/s, transfer {:.3} s, handshake {:.2} ms, server CPU {:.3} s ({:.0}%), client CPU {:.3} s ({:.0}%)",
        r.goodput_mbps,
        r.transfer_s,
        r.handshake_ms,
        r.server.cpu_total_s,
        r.server.cpu_utilisation_pct,
        r.client.cpu_total_s,
        r.client.cpu_utilisation_pct
    )
}

pub fn print_summary(report: &RunReport) {
    println!();
    for caveat in report.caveats() {
        println!("NOTE: {caveat}");
    }
    let Some(s) = &report.summary else {
        println!("{} — testcase {}: no repetition measured", report.lut_label(), report.testcase.name);
        return;
    };
    println!(
        "{} — testcase {}: {} repetition(s) of {}, payload verified{}",
        report.lut_label(),
        report.testcase.name,
        s.repetitions,
        report.testcase.workload.describe(),
        match s.failed_repetitions {
            0 => String::new(),
            n => format!("; {n} failed (not in these figures)"),
        }
    );
    if let Some(source) = &report.lut.source {
        println!("built from {}", source.describe());
        println!("proof: {}", source.proof);
    }
    println!("{:<22} {:>12} {:>12} {:>12}", "", "median", "min", "max");
    for (name, sp, digits) in s.rows(report.testcase.workload.connections) {
        println!("{name:<22} {:>12.digits$} {:>12.digits$} {:>12.digits$}", sp.median, sp.min, sp.max);
    }
    println!("CPU % is user+sys over each process's lifetime, per core (100% = one core busy).");
    if let Some(first) = report.repetitions.first() {
        for (role, io) in &first.io_settings {
            if io.transport == Transport::Tcp {
                // UDP's GSO/GRO segment counts and mmsg batching do not apply to a byte stream.
                println!(
                    "{role} I/O: {}; TCP, congestion control {}; SO_RCVBUF {} B, SO_SNDBUF {} B (granted)",
                    io.stack,
                    io.congestion_control.as_deref().unwrap_or("not reported"),
                    io.recv_buffer,
                    io.send_buffer
                );
                continue;
            }
            println!(
                "{role} I/O: {}; GSO up to {} segments, GRO up to {}, sendmmsg {}, recvmmsg {}; SO_RCVBUF {} B, SO_SNDBUF {} B (granted)",
                io.stack,
                io.gso_max_segments,
                io.gro_segments,
                if io.send_mmsg { "yes" } else { "no" },
                if io.recv_mmsg { "yes" } else { "no" },
                io.recv_buffer,
                io.send_buffer
            );
        }
    }
    if let Some(line) = nesquic_record::findings::describe_rcvbuf_drops(&report.repetitions) {
        println!("{line}");
    }
    for line in nesquic_record::saturation::describe(&report.repetitions) {
        println!("{line}");
    }
    for line in describe_hosts(&report.hosts) {
        println!("{line}");
    }
    if let Some(p) = &report.pinned_cpus {
        println!("pinned (--pin): {p}");
    }
    if !report.faults.is_empty() {
        let list: Vec<String> = report.faults.iter().map(ToString::to_string).collect();
        println!("FAULTS INJECTED (NESQUIC_ALLOW_FAULTS=1): {}: these figures are of a perturbed run", list.join(", "));
    }
    print_io_layer_counters(report);
    if let Some(link) = &report.link {
        println!("link: {}", link.mechanisms.join("; "));
        if let Some(l) = &link.observed_loss {
            println!(
                "link loss measured by the tc-bpf filters: {} of {} datagrams dropped ({:.2}%)",
                l.dropped, l.seen, l.pct
            );
        }
        println!("qdisc drops: {}", link.qdisc_drops.describe());
        if let Some(stats) = &link.relay {
            for (name, d) in [("client->server", &stats.up), ("server->client", &stats.down)] {
                println!(
                    "relay {name}: {} datagrams held {:.2} ms on average (min {:.2}, max {:.2}; drawn {:.2}-{:.2}, relay late {:.3} ms on average, {:.2} at worst); {} ({:.2}%) left out of order, {} sent undelayed, {} send errors",
                    d.datagrams,
                    d.mean_held_ms(),
                    d.held_ns_min as f64 / 1e6,
                    d.held_ns_max as f64 / 1e6,
                    d.drawn_ns_min as f64 / 1e6,
                    d.drawn_ns_max as f64 / 1e6,
                    d.late_ns_sum as f64 / d.datagrams.max(1) as f64 / 1e6,
                    d.late_ns_max as f64 / 1e6,
                    d.reordered,
                    d.reordered_pct(),
                    d.undelayed,
                    d.send_errors
                );
            }
        }
    }
}

/// The I/O layer's own counts (median over repetitions) and, with `--probe io`, whether the
/// probes saw the same syscalls and datagrams in every repetition.
fn print_io_layer_counters(report: &RunReport) {
    for role in nesquic_protocol::role::LUT_ROLES {
        let per_rep: Vec<(&nesquic_io::Counters, Option<&nesquic_model::Metrics>)> = report
            .repetitions
            .iter()
            .filter_map(|r| r.io_layer_counters.iter().find(|(x, _)| *x == role).map(|(_, c)| (c, r.probes.as_ref())))
            .collect();
        if per_rep.is_empty() {
            continue;
        }
        let median = |f: &dyn Fn(&nesquic_io::Counters) -> u64| {
            let v: Vec<f64> = per_rep.iter().map(|(c, _)| f(c) as f64).collect();
            Spread::of(v).map_or(0.0, |s| s.median)
        };
        println!(
            "{role} I/O layer counters (median): send {:.0} syscalls / {:.0} datagrams, recv {:.0} syscalls / {:.0} datagrams",
            median(&|c| c.send.syscalls),
            median(&|c| c.send.datagrams),
            median(&|c| c.recv.syscalls),
            median(&|c| c.recv.datagrams)
        );
        let checked: Vec<Vec<String>> = per_rep
            .iter()
            // Only where I/O was probed: a profile-only session has no I/O figures to compare.
            .filter_map(|(c, m)| {
                m.filter(|m| m.io_mechanism.is_some()).map(|m| nesquic_record::io::disagreements(role, c, m))
            })
            .collect();
        if checked.is_empty() {
            continue;
        }
        let by = per_rep.iter().find_map(|(_, m)| m.and_then(|m| m.io_mechanism.clone())).unwrap_or_default();
        match checked.iter().find(|d| !d.is_empty()) {
            None => println!("  I/O probes ({by}) agree exactly in all {} repetition(s)", checked.len()),
            Some(d) => println!("  I/O probes ({by}) DISAGREE: {}", d.join("; ")),
        }
    }
}

/// One line per role's host: where it ran, kernel, CPU, the NIC towards the other host and its
/// offloads, the clock offset.
pub fn describe_hosts(hosts: &[(Role, HostInfo)]) -> Vec<String> {
    hosts
        .iter()
        .map(|(role, h)| {
            let unknown = || "unknown".to_string();
            let mut line = format!(
                "{role} host {}: kernel {}, {} ({} CPUs)",
                h.name.clone().unwrap_or_else(unknown),
                h.kernel.clone().unwrap_or_else(unknown),
                h.cpu_model.clone().unwrap_or_else(unknown),
                h.cores.map_or_else(unknown, |n| n.to_string())
            );
            if let Some(nic) = h.nic_description() {
                line.push_str(&format!("; NIC {nic}"));
            }
            if let Some(note) = &h.nic_note {
                line.push_str(&format!("; {note}"));
            }
            if let Some(c) = &h.clock {
                line.push_str(&format!("; clock {}", c.describe()));
            }
            line
        })
        .collect()
}

/// One line per probe kind the calibration measured, for the terminal.
pub fn calibration_lines(c: &Calibration) -> Vec<String> {
    let agent = c.agent.iter().map(|a| {
        format!(
            "user (inline hook): a counted call costs {:.1} ± {:.1} ns, a timed call {:.1} ± {:.1} ns, of which {:.1} ± {:.1} ns fall inside the measured duration ({} rounds)",
            a.count_ns, a.count_sd_ns, a.time_ns, a.time_sd_ns, a.window_ns, a.window_sd_ns, a.rounds
        )
    });
    c.kinds
        .iter()
        .map(|k| {
            format!(
                "{:<16} adds {:>6.0} ± {:>4.0} ns to each measured call (a probed call costs the program {:.0} ns more; true {:.0} ns, measured {:.0} ns)",
                k.kind.label(),
                k.overhead_ns,
                k.uncertainty_ns,
                k.pair_cost_ns,
                k.true_ns,
                k.measured_ns
            )
        })
        .chain(agent)
        .collect()
}

/// Prints a calibration on stderr.
pub fn print_calibration(c: &Calibration) {
    eprintln!("nesquic: probe calibration ({} rounds, busy-loop workload):", c.rounds_used());
    for line in calibration_lines(c) {
        eprintln!("  {line}");
    }
}
