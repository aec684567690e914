//! Findings: from a run's numbers to what to change. Each rule reads the typed record (the
//! probes' packet I/O per side, the I/O settings each LUT reported, the sampling profile) and,
//! when its evidence holds, says what was seen with the numbers, why it costs and where the cause
//! likely is, the command that tests the remedy, and a severity from the measured share of CPU at
//! stake. A rule without the measurement it needs says nothing: no finding rests on a guess.
//! docs/findings.md lists every rule, its evidence and its threshold; keep both in step.

use nesquic_model::metrics::{Direction as Dir, SyscallMetrics};
use nesquic_protocol::report::Transport;
use nesquic_protocol::Role;

use crate::figures::RepetitionFigures;
pub use crate::finding::{Finding, Rule, Severity};
use crate::run::RunRecord;
pub use binding::{constraint, Constraint, CONTENDED, LINK_BINDS};
pub use congestion::{recovery_of, Recovery, MIN_DECLARED_LOST, MISSING_PER_DECLARED};
pub use copy::{REP_MOVSB_OFF, SLOW_PAYLOAD_FACTOR};
pub use crypto::{CRYPTO_FAR, CRYPTO_NEAR};

/// Least datagrams a side must have sent (received) over the run for its ratios to mean
/// something: a handshake alone moves a dozen.
pub const MIN_DATAGRAMS: u64 = 1000;
/// GSO batch: fires when the allowed batch is at least this many times the batch used.
pub const GSO_HEADROOM: f64 = 2.0;
/// The kernel's cap on one UDP GSO send: a 64 KiB IP packet less the IPv4 and UDP headers.
pub const GSO_MAX_BYTES: u64 = 65_535 - 20 - 8;
/// GRO: fires below this many datagrams per receive message while the peer batches at least
/// [`GRO_PEER_BATCH`] per send message.
pub const GRO_MIN_PER_RECV: f64 = 1.5;
/// See [`GRO_MIN_PER_RECV`].
pub const GRO_PEER_BATCH: f64 = 4.0;
/// Busy polling: fires when more than this share of a side's receive calls returned EAGAIN. A
/// reader that waits for readiness and drains the socket until EAGAIN makes at most one empty
/// call per wake-up, and each wake-up brings at least one datagram: at most half its calls are
/// empty. More empty than full calls means it polls without waiting.
pub const EAGAIN_SHARE: f64 = 0.5;
/// ACK traffic: fires when the bulk receiver sends a datagram per fewer than this many received.
pub const ACK_RATIO: f64 = 2.0;
/// A profile share at or above this makes a finding high; at or above [`MEDIUM_SHARE`], medium.
pub const HIGH_SHARE: f64 = 0.20;
/// See [`HIGH_SHARE`].
pub const MEDIUM_SHARE: f64 = 0.05;
/// Receive-buffer drops: a side that dropped at least this share of the datagrams that reached
/// its sockets is high (each drop is a retransmission and, to most controllers, congestion).
pub const DROPS_HIGH: f64 = 0.01;
/// See [`DROPS_HIGH`]: medium at or above this share, low below (any drop fires).
pub const DROPS_MEDIUM: f64 = 0.001;
/// Receive-buffer drops: the remedy tried is this many times the buffer the run had (the 10G
/// QUIC study: the 208 KiB default drops, 16x does not).
pub const RCVBUF_FACTOR: u64 = 16;
/// Kernel time per datagram: with GSO off, a bulk sender whose kernel packet path
/// (`packet_io.kernel`) holds at least this share of its samples gets the kernel-time finding
/// (with its time per datagram) instead of the plain GSO-off one.
pub const KERNEL_SHARE: f64 = 0.30;
/// Fewest profile samples of a side for [`KERNEL_SHARE`] to be read at all (at 49 Hz, 0.4 s
/// of CPU): below, one sample moves the share by more than 5 points.
pub const MIN_PROFILE_SAMPLES: u64 = 20;

/// One direction of one side over every repetition, from the probes' syscall rows.
#[derive(Debug, Default, Clone, Copy)]
struct Direction {
    calls: u64,
    eagain: u64,
    errors: u64,
    messages: u64,
    datagrams: u64,
    bytes: u64,
}

impl Direction {
    fn add(&mut self, s: &SyscallMetrics) {
        self.calls += s.timing.calls;
        self.eagain += s.eagain;
        self.errors += s.errors;
        // Records from before `messages` was counted: one message a call that moved data.
        self.messages += if s.messages > 0 { s.messages } else { s.timing.calls.saturating_sub(s.eagain + s.errors) };
        self.datagrams += s.datagrams;
        self.bytes += s.bytes;
    }

    fn per_message(&self) -> f64 {
        self.datagrams as f64 / self.messages.max(1) as f64
    }
}

/// What the rules read of one side.
#[derive(Debug, Default, Clone)]
struct Side {
    send: Direction,
    recv: Direction,
    /// Most datagrams per GSO send the LUT's socket allows (its own report), 1 = no GSO.
    gso_max_segments: Option<u64>,
    /// Most datagrams per GRO receive, 1 = no GRO.
    gro_segments: Option<u64>,
    /// The profile's samples per component of this side, summed over repetitions.
    samples: u64,
    packet_io_samples: u64,
    packet_io_kernel_samples: u64,
    crypto_samples: u64,
    /// CPU seconds in the kernel's packet path: each repetition's CPU time times its share.
    packet_io_kernel_s: f64,
    /// Samples that interrupted a `rep movsb` in user code, and the CPU seconds that share of
    /// each repetition's CPU time stands for.
    rep_movsb_samples: u64,
    rep_movsb_s: f64,
    /// Datagrams the kernel dropped at its sockets, over the repetitions that measured it.
    rcvbuf_drops: Option<u64>,
    /// The receive buffer its socket was granted (SO_RCVBUF as the LUT reported it).
    recv_buffer: Option<u64>,
    /// What its socket carries, as the LUT reported it (UDP where it did not).
    transport: Transport,
}

impl Side {
    fn of(record: &RunRecord, role: Role) -> Self {
        let mut side = Side::default();
        for rep in &record.repetitions {
            side.add_repetition(rep, role);
        }
        side
    }

    fn add_repetition(&mut self, rep: &RepetitionFigures, role: Role) {
        for m in rep.probes.iter().flat_map(|p| &p.roles).filter(|r| r.role == role) {
            for s in &m.io {
                match s.direction {
                    Dir::Send => self.send.add(s),
                    Dir::Recv => self.recv.add(s),
                }
            }
        }
        if let Some((_, io)) = rep.io_settings.iter().find(|(r, _)| *r == role) {
            self.gso_max_segments = Some(io.gso_max_segments);
            self.gro_segments = Some(io.gro_segments);
            self.recv_buffer = Some(io.recv_buffer);
            self.transport = io.transport;
        }
        if let Some((_, n)) = rep.rcvbuf_drops.iter().find(|(r, _)| *r == role) {
            self.rcvbuf_drops = Some(self.rcvbuf_drops.unwrap_or(0) + n);
        }
        // A user-mode profile (no root) samples no kernel time: its shares are not of the side's
        // CPU, and the rules weigh packet I/O and crypto against that. They go without one.
        let whole = rep.profile.iter().filter(|p| p.clock != nesquic_model::profile::SampleClock::UserModeCpuClock);
        for p in whole.flat_map(|p| &p.roles).filter(|p| p.role == role) {
            self.samples += p.samples;
            let named = |name: &str| p.split.iter().filter(|s| s.name == name).map(|s| s.samples).sum::<u64>();
            self.packet_io_samples +=
                p.components.iter().filter(|s| s.name == "packet_io").map(|s| s.samples).sum::<u64>();
            self.packet_io_kernel_samples += named("packet_io.kernel");
            self.rep_movsb_samples += p.rep_movsb_leaves;
            self.crypto_samples += p.components.iter().filter(|s| s.name == "crypto").map(|s| s.samples).sum::<u64>();
            if p.samples > 0 {
                let cpu = if role == Role::Client { rep.client.cpu_total_s } else { rep.server.cpu_total_s };
                self.packet_io_kernel_s += cpu * named("packet_io.kernel") as f64 / p.samples as f64;
                self.rep_movsb_s += cpu * p.rep_movsb_leaves as f64 / p.samples as f64;
            }
        }
    }

    /// Whether its send and receive calls move datagrams: a TCP byte stream's do not, so the
    /// datagram rules (GSO, GRO, ACK ratio, receive-buffer drops) say nothing of it.
    fn moves_datagrams(&self) -> bool {
        self.transport == Transport::Udp
    }

    /// Share of the side's samples in packet I/O, when a profile was taken.
    fn packet_io_share(&self) -> Option<f64> {
        (self.samples > 0).then(|| self.packet_io_samples as f64 / self.samples as f64)
    }

    fn crypto_share(&self) -> Option<f64> {
        (self.samples > 0).then(|| self.crypto_samples as f64 / self.samples as f64)
    }

    fn packet_io_kernel_share(&self) -> Option<f64> {
        (self.samples > 0).then(|| self.packet_io_kernel_samples as f64 / self.samples as f64)
    }
}

/// Severity from a measured share; without a profile, low (and the finding says so).
fn severity(share: Option<f64>) -> Severity {
    match share {
        Some(s) if s >= HIGH_SHARE => Severity::High,
        Some(s) if s >= MEDIUM_SHARE => Severity::Medium,
        _ => Severity::Low,
    }
}

/// "packet I/O is 31% of the server's CPU (profile)", or how to learn it.
fn stake(share: Option<f64>, what: &str, role: Role) -> String {
    match share {
        Some(s) => format!("{what} is {:.0}% of the {role}'s CPU (sampling profile)", 100.0 * s),
        None => {
            "no profile in this run to say how much CPU is at stake: add --probe profile,io (eBPF: root)".to_string()
        }
    }
}

/// Where a stack sets what a rule is about, for the stacks Nesquic knows; others get the
/// general advice. Kept as data, by LUT name: the rules themselves know no stack.
fn where_in(lut: &str, rule: Rule) -> Option<&'static str> {
    match (lut, rule) {
        ("quinn", Rule::GsoBatchCapped) => {
            Some("quinn caps a batch at MAX_TRANSMIT_SEGMENTS (quinn/src/connection.rs)")
        }
        _ => None,
    }
}

/// The probes of the experiment a finding proposes after `record`: the profile for the CPU at
/// stake and packet I/O for the counts; packet I/O alone after a run that had no profile, which
/// could not load eBPF (most often: no root), where the user-space agent still measures it.
fn experiment_probes(record: &RunRecord) -> &'static str {
    if record.repetitions.iter().any(|r| r.profile.is_some()) {
        "--probe profile,io"
    } else {
        "--probe io"
    }
}

/// The command that tests a change of the stack's source, between two commits.
fn ab_of_source(record: &RunRecord) -> String {
    format!(
        "nesquic ab --lut {} --lut-path YOUR_CHECKOUT --base-rev HEAD --head-rev YOUR_CHANGE {}",
        record.lut.name,
        experiment_probes(record)
    )
}

/// Every finding the record supports, most at stake first.
pub fn find(record: &RunRecord) -> Vec<Finding> {
    let size = record.size_bytes.max(1) * record.repetitions.len().max(1) as u64;
    let server = Side::of(record, Role::Server);
    let client = Side::of(record, Role::Client);
    // The binding constraint first: it stays first among the high findings (a stable sort).
    let mut findings: Vec<Finding> = binding::binding(record).into_iter().collect();
    for (role, side, peer) in [(Role::Server, &server, &client), (Role::Client, &client, &server)] {
        // The bulk sender and receiver: the side that moved at least half the payload.
        let datagrams = side.moves_datagrams();
        let sends_bulk = datagrams && side.send.datagrams >= MIN_DATAGRAMS && side.send.bytes * 2 >= size;
        let receives_bulk = datagrams && side.recv.datagrams >= MIN_DATAGRAMS && side.recv.bytes * 2 >= size;
        if sends_bulk {
            findings.extend(gso_batch(record, role, side));
            findings.extend(gso_off(record, role, side));
        }
        if receives_bulk {
            // Through the impairment relay the receiver's peer is the relay, which forwards one
            // datagram per message whatever the sender batched: no GRO evidence there.
            if record.link.as_ref().is_none_or(|l| l.relay.is_none()) {
                findings.extend(gro(record, role, side, peer));
            }
            findings.extend(ack_heavy(role, side));
        }
        findings.extend(busy_polling(record, role, side));
        if datagrams {
            findings.extend(rcvbuf_drops(record, role, side));
        }
        findings.extend(congestion::misread_loss(record, role, side, peer));
        findings.extend(crypto::versus_machine(record, role, side));
        findings.extend(crypto::without_aes_ni(record, role, side));
        findings.extend(copy::rep_movsb(record, role, side));
    }
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    findings
}

fn gso_batch(record: &RunRecord, role: Role, side: &Side) -> Option<Finding> {
    let segments = side.gso_max_segments.filter(|&s| s > 1)?;
    let datagram = side.send.bytes / side.send.datagrams.max(1);
    let by_size = GSO_MAX_BYTES / datagram.max(1);
    let allowed = segments.min(by_size).max(1);
    let used = side.send.per_message();
    // One datagram a message is no batch at all: `GsoOff`'s case.
    if used < 1.5 || (allowed as f64) < GSO_HEADROOM * used {
        return None;
    }
    let share = side.packet_io_share();
    let cause =
        where_in(&record.lut.name, Rule::GsoBatchCapped).unwrap_or("the stack caps the datagrams it hands one send");
    Some(Finding {
        rule: Rule::GsoBatchCapped,
        role,
        severity: severity(share),
        seen: format!(
            "the {role} sends {used:.1} datagrams per send message ({} datagrams in {} messages); its socket allows {allowed} \
             (GSO up to {segments} segments, {by_size} datagrams of {datagram} B fit in 64 KB): {:.1}x fewer sends are possible",
            side.send.datagrams,
            side.send.messages,
            allowed as f64 / used
        ),
        why: format!(
            "each send message costs a trip through the kernel's UDP path and its per-call overhead; {cause}. {}",
            stake(share, "packet I/O", role)
        ),
        try_this: ab_of_source(record),
        cpu_share_at_stake: share,
    })
}

fn gso_off(record: &RunRecord, role: Role, side: &Side) -> Option<Finding> {
    let used = side.send.per_message();
    if side.gso_max_segments.is_none() || used >= 1.5 {
        return None;
    }
    let share = side.packet_io_kernel_share();
    let kernel_heavy = side.samples >= MIN_PROFILE_SAMPLES && share.is_some_and(|s| s >= KERNEL_SHARE);
    let turned_off = record.lut_options.iter().any(|o| o == "gso=off");
    let setting = match side.gso_max_segments {
        _ if turned_off => "GSO is off (--lut-opt gso=off)".to_string(),
        Some(1) => "GSO is off on its socket".to_string(),
        Some(n) => format!("it does not batch although its socket allows GSO up to {n} segments"),
        None => "it does not batch".to_string(),
    };
    let datagrams = side.send.datagrams + side.recv.datagrams;
    let (rule, seen) = if kernel_heavy {
        // The same cause, with the kernel's time per datagram it costs as the evidence.
        let per_datagram_us = side.packet_io_kernel_s * 1e6 / datagrams.max(1) as f64;
        let seen = format!(
            "the {role}'s kernel packet path takes {:.0}% of its CPU, {per_datagram_us:.2} us per datagram ({} sent, {} \
             received), while it sends {used:.2} datagrams per send message: {setting}",
            100.0 * share.unwrap_or(0.0),
            side.send.datagrams,
            side.recv.datagrams
        );
        (Rule::KernelPerDatagram, seen)
    } else {
        let seen = format!(
            "the {role} sends {used:.2} datagrams per send message ({} datagrams): {setting}",
            side.send.datagrams
        );
        (Rule::GsoOff, seen)
    };
    Some(Finding {
        rule,
        role,
        severity: severity(share),
        seen,
        why: format!(
            "without UDP GSO every datagram takes the kernel's send path on its own (routing, the UDP and IP headers, \
             the device queue): one GSO send pays it once per batch. {}",
            stake(share, "the kernel's packet path", role)
        ),
        try_this: if turned_off {
            // The run turned it off: the same run with it on is the experiment.
            format!(
                "nesquic ab --lut {} --io {} --base-opt gso=off --head-opt gso=on {}",
                record.lut.name,
                record.lut.io,
                experiment_probes(record)
            )
        } else {
            format!("{} (after setting UDP_SEGMENT on the stack's socket)", ab_of_source(record))
        },
        cpu_share_at_stake: share,
    })
}

fn gro(record: &RunRecord, role: Role, side: &Side, peer: &Side) -> Option<Finding> {
    let per_recv = side.recv.per_message();
    let peer_batch = peer.send.per_message();
    if per_recv >= GRO_MIN_PER_RECV || peer_batch < GRO_PEER_BATCH {
        return None;
    }
    let share = side.packet_io_share();
    let state = match side.gro_segments {
        Some(1) => "GRO is off on its socket".to_string(),
        Some(n) => format!("GRO is on (up to {n}) but does not coalesce"),
        None => "its GRO setting was not reported".to_string(),
    };
    Some(Finding {
        rule: Rule::GroIneffective,
        role,
        severity: severity(share),
        seen: format!(
            "the {role} receives {per_recv:.2} datagrams per receive message ({} datagrams in {} messages) while the peer \
             sends {peer_batch:.1} per send message: {state}",
            side.recv.datagrams, side.recv.messages
        ),
        why: format!(
            "with UDP_GRO the kernel hands a batch of the peer's datagrams up in one receive; without it each datagram \
             is a receive of its own (GRO on the client cut packet-I/O CPU by 58% in the kernel-bypass study). {}",
            stake(share, "packet I/O", role)
        ),
        try_this: format!(
            "nesquic ab --base-opt gro=off --head-opt gro=on {} (if the LUT has the setting; else set UDP_GRO in \
             the stack)",
            experiment_probes(record)
        ),
        cpu_share_at_stake: share,
    })
}

fn busy_polling(record: &RunRecord, role: Role, side: &Side) -> Option<Finding> {
    let r = &side.recv;
    if r.calls < MIN_DATAGRAMS || (r.eagain as f64) <= EAGAIN_SHARE * r.calls as f64 {
        return None;
    }
    let share = side.packet_io_share();
    Some(Finding {
        rule: Rule::BusyPolling,
        role,
        // The empty receives are a part of packet I/O only: never more than low-medium on
        // their own evidence.
        severity: severity(share).min(Severity::Medium),
        seen: format!(
            "{} of the {role}'s {} receive calls ({:.0}%) returned EAGAIN, more than carried data: it polls an empty socket",
            r.eagain,
            r.calls,
            100.0 * r.eagain as f64 / r.calls as f64
        ),
        why: format!(
            "each empty receive is a system call that moves nothing; a reader that waits for readiness (epoll) and \
             drains until EAGAIN makes at most one per wake-up. {}",
            stake(share, "packet I/O", role)
        ),
        try_this: format!(
            "nesquic run {} --size 1GB (and compare the {role}'s recv EAGAIN count after the change)",
            experiment_probes(record)
        ),
        cpu_share_at_stake: share,
    })
}

fn ack_heavy(role: Role, side: &Side) -> Option<Finding> {
    let ratio = side.recv.datagrams as f64 / side.send.datagrams.max(1) as f64;
    if ratio >= ACK_RATIO || side.send.datagrams == 0 {
        return None;
    }
    Some(Finding {
        rule: Rule::AckHeavy,
        role,
        severity: Severity::Low,
        seen: format!(
            "the {role} received {} datagrams and sent {} ({ratio:.2} received per datagram sent)",
            side.recv.datagrams, side.send.datagrams
        ),
        why: "RFC 9000 acknowledges every second ack-eliciting packet by default; more ACKs cost both sides a send \
              and a receive each (the ACK frequency extension, RFC 9000's max_ack_delay, lets a stack send fewer)"
            .into(),
        try_this: "nesquic run --probe io --lut-qlog (the library's qlog shows which frames those datagrams carried)"
            .into(),
        cpu_share_at_stake: None,
    })
}

/// The summary line of the receive-buffer drops each side's sockets had, summed over the
/// repetitions; `None` when no repetition measured them.
pub fn describe_rcvbuf_drops(repetitions: &[RepetitionFigures]) -> Option<String> {
    let mut per_role: Vec<(Role, u64)> = Vec::new();
    for (role, n) in repetitions.iter().flat_map(|r| &r.rcvbuf_drops) {
        match per_role.iter_mut().find(|(r, _)| r == role) {
            Some((_, sum)) => *sum += n,
            None => per_role.push((*role, *n)),
        }
    }
    if per_role.is_empty() {
        return None;
    }
    let each: Vec<String> = per_role.iter().map(|(r, n)| format!("{r} {n}")).collect();
    let over = if repetitions.len() > 1 { format!(", over {} repetitions", repetitions.len()) } else { String::new() };
    let (reads, cpu_ns) = repetitions
        .iter()
        .filter_map(|r| r.rcvbuf_drops_cost)
        .fold((0, 0), |(reads, ns), c| (reads + c.reads, ns + c.cpu_ns));
    let cost = if reads > 0 {
        format!(" ({reads} looks for them, {:.2} ms of nesquic's CPU)", cpu_ns as f64 / 1e6)
    } else {
        String::new()
    };
    Some(format!(
        "receive-buffer drops (kernel's count at the LUT's UDP sockets{over}): {} datagrams{cost}",
        each.join(", ")
    ))
}

/// `--link veth --rate 100mbit ...`: the run's link as `nesquic run` takes it.
fn link_flags(record: &RunRecord) -> String {
    record
        .link
        .as_ref()
        .map_or_else(String::new, |l| format!(" --link {}{}", l.kind, congestion::conditions(&l.conditions)))
}

/// The run again, with `extra` instead of any option of the same key.
fn run_again(record: &RunRecord, replaced_key: &str, extra: &str) -> String {
    let options: String = record
        .lut_options
        .iter()
        .filter(|o| o.split_once('=').is_none_or(|(k, _)| k != replaced_key))
        .map(|o| format!(" --lut-opt {o}"))
        .collect();
    format!(
        "nesquic run --lut {} --io {} --size {}{}{options} {extra} {}",
        record.lut.name,
        record.lut.io,
        record.size_bytes,
        link_flags(record),
        experiment_probes(record)
    )
}

fn rcvbuf_drops(record: &RunRecord, role: Role, side: &Side) -> Option<Finding> {
    let drops = side.rcvbuf_drops.filter(|&n| n > 0)?;
    // What reached the sockets: what the stack received plus what the kernel dropped.
    let received = side.recv.datagrams;
    let share = (received > 0).then(|| drops as f64 / (received + drops) as f64);
    let severity = match share {
        Some(s) if s >= DROPS_HIGH => Severity::High,
        Some(s) if s >= DROPS_MEDIUM => Severity::Medium,
        _ => Severity::Low,
    };
    let of = share.map_or_else(
        || " (no io probes to say of how many)".to_string(),
        |s| format!(" ({:.2}% of the {} that reached its sockets)", 100.0 * s, received + drops),
    );
    let buffer = side.recv_buffer.map_or_else(
        || "its receive buffer".to_string(),
        |b| format!("a full receive buffer of {} KiB (SO_RCVBUF {b} B granted)", b / 1024),
    );
    // The run asked for a buffer: 16x that; else 16x the kernel default it had.
    let asked = record.lut_options.iter().find_map(|o| o.strip_prefix("rcvbuf=")?.parse::<u64>().ok());
    let remedy =
        asked.map_or_else(|| format!("--rcvbuf {RCVBUF_FACTOR}x"), |b| format!("--rcvbuf {}", b * RCVBUF_FACTOR));
    Some(Finding {
        rule: Rule::RcvbufDrops,
        role,
        severity,
        seen: format!(
            "the {role} dropped {drops} datagram{}{of} at {buffer}; try {remedy}",
            if drops == 1 { "" } else { "s" }
        ),
        why: "the kernel drops a datagram that arrives while the socket's receive buffer is full: the stack reads \
              too slowly for the peer's bursts, and the loss costs a retransmission and, to most congestion \
              controllers, a cut of the window (the 10G QUIC study: the 208 KiB default drops, 16x does not)"
            .into(),
        try_this: run_again(record, "rcvbuf", &remedy),
        cpu_share_at_stake: None,
    })
}

mod binding;
mod congestion;
mod copy;
mod crypto;
#[cfg(test)]
mod tests;
