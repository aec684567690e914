//! Why goodput is what it is: one finding naming the binding constraint, with its evidence and
//! the experiment that lifts it. In order: the link's rate (goodput at [`LINK_BINDS`] of it or
//! more), then a side whose busiest thread never blocked ([`SATURATED`] of the transfer on a CPU
//! or waiting for one): capped by the CPU it was given when it waited for a CPU at least
//! [`CONTENDED`] of the transfer, else by its own cost per packet; else a side whose threads
//! together waited for a CPU [`CONTENDED`] of the transfer and longer than they ran (another
//! task on its CPU, an oversubscribed machine: capped by the CPU it was given, the side that
//! waited longest named). When none holds, the
//! finding says what was measured and which evidence would be needed to name one (none at all for
//! a record without per-thread times or a link rate).

pub use nesquic_model::threads::CONTENDED;
use nesquic_model::threads::SATURATED;
use nesquic_protocol::Role;

use super::{ab_of_source, experiment_probes, link_flags, Finding, Rule, Severity};
use crate::figures::RepetitionFigures;
use crate::run::RunRecord;
use crate::saturation::SideSaturation;

/// The link binds when goodput reaches this share of its rate: QUIC, UDP and IP headers take
/// ~3-4% of a 1,500-byte packet, and a window that just fills the link loses a few more.
pub const LINK_BINDS: f64 = 0.85;

/// What binds a run's goodput, as the matrix's column names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Constraint {
    /// Goodput reached [`LINK_BINDS`] of the link's rate.
    Link,
    /// A side's busiest thread never blocked; `shared` when it waited for a CPU at least
    /// [`CONTENDED`] of the transfer.
    Cpu {
        /// The side.
        role: Role,
        /// Held back by other tasks on its CPU rather than by its own cost.
        shared: bool,
    },
    /// Measured, but none of the above held.
    Unnamed,
}

impl Constraint {
    /// "link rate", "client CPU (shared)", "server CPU (cost per packet)", "none named".
    pub fn label(&self) -> String {
        match self {
            Constraint::Link => "link rate".into(),
            Constraint::Cpu { role, shared: true } => format!("{role} CPU (shared)"),
            Constraint::Cpu { role, shared: false } => format!("{role} CPU (cost per packet)"),
            Constraint::Unnamed => "none named".into(),
        }
    }
}

/// What binds `record`'s goodput; `None` without a summary, or with neither per-thread times nor
/// a link rate to read.
pub fn constraint(record: &RunRecord) -> Option<Constraint> {
    let goodput = record.summary.as_ref()?.goodput_mbps.median;
    let rate = link_rate(record);
    if rate.is_some_and(|r| goodput * 1e6 / r as f64 >= LINK_BINDS) {
        return Some(Constraint::Link);
    }
    let sides = sides(record);
    if let Some(side) = bound_side(&sides) {
        return Some(Constraint::Cpu { role: side.median.role, shared: shared(side) });
    }
    (!sides.is_empty() || rate.is_some()).then_some(Constraint::Unnamed)
}

/// The binding-constraint finding of `record` (see [`constraint`] for when there is none).
pub(super) fn binding(record: &RunRecord) -> Option<Finding> {
    let goodput = record.summary.as_ref()?.goodput_mbps.median;
    let rate = link_rate(record);
    let sides = sides(record);
    Some(match constraint(record)? {
        Constraint::Link => {
            let rate = rate?;
            link_binds(record, goodput, rate, goodput * 1e6 / rate as f64)
        }
        Constraint::Cpu { .. } => cpu_bound(record, bound_side(&sides)?, goodput),
        Constraint::Unnamed => unnamed(record, &sides, goodput, rate.map(|r| (r, goodput * 1e6 / r as f64))),
    })
}

/// The link's rate, bits per second.
fn link_rate(record: &RunRecord) -> Option<u64> {
    record.link.as_ref().and_then(|l| l.conditions.rate_bits_per_s()).filter(|&r| r > 0)
}

/// Each local side's threads over the repetitions.
fn sides(record: &RunRecord) -> Vec<SideSaturation> {
    [Role::Server, Role::Client].into_iter().filter_map(|r| SideSaturation::of(&record.repetitions, r)).collect()
}

/// The CPU-bound side: a saturated thread first (the busier of two), else the side whose
/// threads waited longest for a CPU while contended.
fn bound_side(sides: &[SideSaturation]) -> Option<&SideSaturation> {
    let saturated = sides
        .iter()
        .filter(|s| s.saturated())
        .max_by(|a, b| a.median.busiest_share().total_cmp(&b.median.busiest_share()));
    saturated.or_else(|| {
        sides
            .iter()
            .filter(|s| s.median.contended())
            .max_by(|a, b| a.median.share(a.median.runqueue_ns()).total_cmp(&b.median.share(b.median.runqueue_ns())))
    })
}

/// Whether `side` was held back by other tasks: its busiest thread waited for a CPU
/// [`CONTENDED`] of the transfer, or no thread saturated (then it is named for being contended).
fn shared(side: &SideSaturation) -> bool {
    let waiting = side.median.busiest().map_or(0.0, |t| side.median.share(t.runqueue_ns));
    waiting >= CONTENDED || !side.saturated()
}

fn link_binds(record: &RunRecord, goodput: f64, rate: u64, share: f64) -> Finding {
    let faster = format!("{}bit", human_rate(rate.saturating_mul(10)));
    Finding {
        rule: Rule::BindingConstraint,
        role: Role::Server,
        severity: Severity::High,
        seen: format!(
            "goodput is {goodput:.1} Mbit/s, {:.0}% of the link's {} Mbit/s rate (--rate {}): the link binds",
            100.0 * share,
            rate as f64 / 1e6,
            record.link.as_ref().and_then(|l| l.conditions.rate.as_deref()).unwrap_or("?")
        ),
        why: "the emulated link's token bucket passes no more than its rate; the rest of each packet is QUIC, UDP \
              and IP headers, so no change to the stack moves goodput while the link is this slow"
            .into(),
        try_this: run_with_rate(record, &faster),
        cpu_share_at_stake: None,
    }
}

fn cpu_bound(record: &RunRecord, side: &SideSaturation, goodput: f64) -> Finding {
    let role = side.median.role;
    let Some(thread) = side.median.busiest() else {
        // Invariant: a saturated side has a busiest thread (`saturated` is false without one).
        return unnamed(record, std::slice::from_ref(side), goodput, None);
    };
    let on_cpu = side.median.share(thread.on_cpu_ns);
    let waiting = side.median.share(thread.runqueue_ns);
    let mut evidence = format!(
        "the {role}'s busiest thread {:?} was on a CPU {:.0}% of the transfer and waiting for one {:.0}% ({:.0}% \
         busy, {} of the run's {} repetitions saturated)",
        thread.name,
        100.0 * on_cpu,
        100.0 * waiting,
        100.0 * (on_cpu + waiting),
        side.saturated,
        side.repetitions
    );
    if !side.saturated() {
        // Contended: the side's threads together, which is what binds.
        evidence += &format!(
            ", and its {} threads together were on a CPU {:.0}% and waiting for one {:.0}% of it",
            side.median.threads.len(),
            100.0 * side.median.share(side.median.on_cpu_ns()),
            100.0 * side.median.share(side.median.runqueue_ns())
        );
    }
    let components = top_components(&record.repetitions, role);
    if shared(side) {
        let pinned = record
            .pinned_cpus
            .as_ref()
            .map_or_else(String::new, |p| format!(" (--pin {},{}: another task ran on its CPU)", p.server, p.client));
        return Finding {
            rule: Rule::BindingConstraint,
            role,
            severity: Severity::High,
            seen: format!(
                "{evidence}: goodput ({goodput:.1} Mbit/s) is capped by the CPU time the {role} was given{pinned}"
            ),
            why: "its threads spent longer runnable, waiting for a CPU another task held, than running: every \
                  wake-up (a datagram, a timer) waited behind other tasks before the stack could act on it. It \
                  shares its CPU (or the machine is oversubscribed); the stack's own cost is not what binds"
                .into(),
            try_this: format!(
                "{} (on CPUs nothing else runs on: --pin SERVER_CPU,CLIENT_CPU)",
                run_again_plain(record)
            ),
            cpu_share_at_stake: None,
        };
    }
    let profile = components.as_deref().map_or_else(
        || " (add --probe profile for where its time goes)".to_string(),
        |c| format!("; the {role}'s profile: {c}"),
    );
    Finding {
        rule: Rule::BindingConstraint,
        role,
        severity: Severity::High,
        seen: format!("{evidence}{profile}: goodput ({goodput:.1} Mbit/s) is capped by the {role}'s cost per packet"),
        why: format!(
            "the {role}'s busiest thread never blocked on the network, a timer or a lock: it had work the whole \
             transfer and no CPU time to spare, so every ns it spends per packet is goodput lost; cutting its \
             largest component moves goodput, more CPUs do not unless the stack spreads the work over threads"
        ),
        try_this: ab_of_source(record),
        cpu_share_at_stake: None,
    }
}

fn unnamed(record: &RunRecord, sides: &[SideSaturation], goodput: f64, link: Option<(u64, f64)>) -> Finding {
    let mut seen: Vec<String> = sides
        .iter()
        .map(|s| {
            format!(
                "the {}'s busiest thread was busy {:.0}% of the transfer",
                s.median.role,
                100.0 * s.median.busiest_share()
            )
        })
        .collect();
    if sides.is_empty() {
        seen.push("no per-thread times in this record (remote sides, or a record from before they were read)".into());
    }
    if let Some((rate, share)) = link {
        seen.push(format!("goodput is {:.0}% of the link's {} Mbit/s", 100.0 * share, rate as f64 / 1e6));
    }
    Finding {
        rule: Rule::BindingConstraint,
        role: Role::Client,
        severity: Severity::Low,
        seen: format!("no binding constraint named at {goodput:.1} Mbit/s: {}", seen.join("; ")),
        why: format!(
            "no side's busiest thread was busy {:.0}% of the transfer, no side waited for a CPU {:.0}% of it and \
             longer than it ran, and the link (if any) was not full: each side blocked part of the time, and why it waited (the socket, the congestion or flow-control window, pacing \
             timers, locks) is not measured here yet: the off-CPU reasons and the stack's windows from its qlog \
             would tell them apart",
            100.0 * SATURATED,
            100.0 * CONTENDED
        ),
        try_this: format!("{} --lut-qlog (the stack's windows and blocked frames)", run_again_plain(record)),
        cpu_share_at_stake: None,
    }
}

/// "crypto 41%, packet_io 30%, connection 12%": the side's top components over its profiled
/// repetitions (the side's, not the thread's: the profile is per process).
fn top_components(repetitions: &[RepetitionFigures], role: Role) -> Option<String> {
    let mut by_name: Vec<(String, u64)> = Vec::new();
    let mut total = 0;
    for p in repetitions.iter().filter_map(|r| r.profile.as_ref()).flat_map(|p| &p.roles).filter(|p| p.role == role) {
        total += p.samples;
        for c in &p.components {
            match by_name.iter_mut().find(|(n, _)| *n == c.name) {
                Some((_, n)) => *n += c.samples,
                None => by_name.push((c.name.clone(), c.samples)),
            }
        }
    }
    if total == 0 {
        return None;
    }
    by_name.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let top: Vec<String> =
        by_name.iter().take(3).map(|(name, n)| format!("{name} {:.0}%", 100.0 * *n as f64 / total as f64)).collect();
    Some(top.join(", "))
}

/// `nesquic run` again with the same LUT, I/O path, size, settings and link.
fn run_again_plain(record: &RunRecord) -> String {
    let options: String = record.lut_options.iter().map(|o| format!(" --lut-opt {o}")).collect();
    format!(
        "nesquic run --lut {} --io {} --size {}{}{options} {}",
        record.lut.name,
        record.lut.io,
        record.size_bytes,
        link_flags(record),
        experiment_probes(record)
    )
}

/// The run again on a link of rate `rate` (the other conditions kept).
fn run_with_rate(record: &RunRecord, rate: &str) -> String {
    let Some(link) = &record.link else { return run_again_plain(record) };
    let conditions = nesquic_link::Conditions { rate: Some(rate.to_string()), ..link.conditions.clone() };
    let options: String = record.lut_options.iter().map(|o| format!(" --lut-opt {o}")).collect();
    format!(
        "nesquic run --lut {} --io {} --size {} --link {}{}{options} {}",
        record.lut.name,
        record.lut.io,
        record.size_bytes,
        link.kind,
        super::congestion::conditions(&conditions),
        experiment_probes(record)
    )
}

/// `2g` for 2e9, `500m` for 5e8, `64k`: tc's units, the largest that divides evenly.
fn human_rate(bits: u64) -> String {
    for (unit, scale) in [("g", 1_000_000_000), ("m", 1_000_000), ("k", 1_000)] {
        if bits >= scale && bits.is_multiple_of(scale) {
            return format!("{}{unit}", bits / scale);
        }
    }
    bits.to_string()
}
