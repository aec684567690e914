//! Loss and reordering misread as congestion: on a `--link` run, the stack declared packets
//! lost (its own qlog, `--lut-qlog`) although nearly every datagram it sent reached its peer
//! (the io probes on both sides). The reordering finding of the sustained-throughput study:
//! several stacks take reordered packets for lost ones and cut their window.

use std::path::Path;

use nesquic_protocol::Role;

use super::{Finding, Rule, Severity, Side};
use crate::run::RunRecord;

/// Fewest packets a side must have declared lost for the finding.
pub const MIN_DECLARED_LOST: u64 = 10;
/// The finding holds while the datagrams that went missing on the way (sent by the side less
/// received by its peer) are at most this share of the ones declared lost.
pub const MISSING_PER_DECLARED: f64 = 0.1;

/// What a stack's own qlog says about its loss recovery.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovery {
    /// `packet_lost` events.
    pub declared_lost: u64,
    /// Times a connection's `congestion_window` went down.
    pub window_cuts: u64,
}

/// Counts a LUT qlog's `*:packet_lost` events and congestion-window cuts (per connection, the
/// `group_id`); `None` if the file cannot be read or is not JSON-SEQ. Libraries write their own
/// header (quinn: qlog 0.3's `qlog_version`, which Nesquic's strict reader refuses), so each
/// record is read on its own and one that is not JSON (a last record cut short) is skipped.
/// `file` is the name the record holds, relative to run directory `dir`: read only inside it
/// ([`crate::files::read_in`]: a record naming `/dev/zero` or `../../etc/shadow` is not read).
pub fn recovery_of(dir: &Path, file: &Path) -> Option<Recovery> {
    let bytes = crate::files::read_in(dir, file, crate::files::MAX_LUT_QLOG_BYTES).ok()?;
    if bytes.first() != Some(&0x1e) {
        return None;
    }
    let events =
        bytes.split(|b| *b == 0x1e).skip(2).filter_map(|r| serde_json::from_slice::<serde_json::Value>(r).ok());
    let mut r = Recovery::default();
    let mut windows: Vec<(String, u64)> = Vec::new();
    for e in events {
        let name = e["name"].as_str().unwrap_or("");
        if name.ends_with(":packet_lost") {
            r.declared_lost += 1;
        }
        let Some(cwnd) = e["data"]["congestion_window"].as_u64() else { continue };
        let group = e["group_id"].as_str().unwrap_or("").to_string();
        match windows.iter_mut().find(|(g, _)| *g == group) {
            Some((_, last)) => {
                if cwnd < *last {
                    r.window_cuts += 1;
                }
                *last = cwnd;
            }
            None => windows.push((group, cwnd)),
        }
    }
    Some(r)
}

/// The side's recovery over every repetition that has its LUT qlog; `None` without any, or
/// without the run directory to read them in.
fn recovery(record: &RunRecord, role: Role) -> Option<Recovery> {
    let dir = record.run_dir.as_deref()?;
    let mut total: Option<Recovery> = None;
    for (_, path, _) in record.repetitions.iter().flat_map(|r| &r.lut_qlogs).filter(|(r, _, _)| *r == role) {
        let r = recovery_of(dir, path)?;
        let t = total.get_or_insert_with(Recovery::default);
        t.declared_lost += r.declared_lost;
        t.window_cuts += r.window_cuts;
    }
    total
}

/// The finding for `role` as the sender, `peer` its receiver.
pub(super) fn misread_loss(record: &RunRecord, role: Role, side: &Side, peer: &Side) -> Option<Finding> {
    let link = record.link.as_ref()?;
    let rec = recovery(record, role)?;
    if rec.declared_lost < MIN_DECLARED_LOST || side.send.datagrams == 0 || peer.recv.datagrams == 0 {
        return None;
    }
    let missing = side.send.datagrams.saturating_sub(peer.recv.datagrams);
    if missing as f64 > MISSING_PER_DECLARED * rec.declared_lost as f64 {
        return None;
    }
    let relay = link.relay.as_ref().map(|r| if role == Role::Server { &r.down } else { &r.up });
    let reordered = relay.filter(|d| d.datagrams > 0).map_or_else(String::new, |d| {
        format!(
            "; the relay delivered {} of the {} it carried ({:.1}%) out of order",
            d.reordered,
            d.datagrams,
            100.0 * d.reordered as f64 / d.datagrams as f64
        )
    });
    let share = rec.declared_lost as f64 / side.send.datagrams as f64;
    Some(Finding {
        rule: Rule::MisreadLoss,
        role,
        severity: if share >= 0.01 { Severity::High } else { Severity::Medium },
        seen: format!(
            "the {role} declared {} packets lost ({:.1}% of the {} datagrams it sent) and cut its congestion window {} \
             times, but {} of them reached the {} ({missing} missing){reordered}",
            rec.declared_lost,
            100.0 * share,
            side.send.datagrams,
            rec.window_cuts,
            peer.recv.datagrams,
            if role == Role::Server { Role::Client } else { Role::Server },
        ),
        why: "a packet acknowledged after later ones is taken for lost (RFC 9002's packet threshold of 3, or 9/8 of \
              an RTT): the stack retransmits what arrived and cuts its window for a congestion that was not there. \
              Raising the reordering threshold (RFC 9002 section 6.1, as TCP's RACK adapts it) or undoing a cut when \
              the 'lost' packet is acknowledged after all (spurious loss detection) keeps the rate"
            .into(),
        try_this: format!(
            "nesquic ab --lut {} --lut-path YOUR_CHECKOUT --base-rev HEAD --head-rev YOUR_CHANGE --link {}{} --lut-qlog \
             --probe io (compare the declared losses in the lut-*.sqlog files)",
            record.lut.name,
            link.kind,
            conditions(&link.conditions)
        ),
        cpu_share_at_stake: None,
    })
}

/// ` --delay 2 --reorder 5` of the run's conditions.
pub(super) fn conditions(c: &nesquic_link::Conditions) -> String {
    let mut flags = c.rate.as_ref().map_or_else(String::new, |r| format!(" --rate {r}"));
    for (flag, value) in
        [("loss", c.loss_pct), ("delay", c.delay_ms), ("jitter", c.jitter_ms), ("reorder", c.reorder_pct)]
    {
        if let Some(v) = value {
            flags += &format!(" --{flag} {v}");
        }
    }
    flags
}
