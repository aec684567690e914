//! Large copies against the machine's own `memcpy`: a side whose samples interrupted a
//! `rep movsb` (glibc's memcpy of large buffers), on a machine where Nesquic measured that copy
//! far slower at some placements of the destination against the source
//! (`RunRecord::copy_limit`).

use nesquic_protocol::Role;

use super::{severity, stake, Finding, Rule, Side, MEDIUM_SHARE};
use crate::run::RunRecord;

/// glibc's tunable that keeps `rep movsb` off below this many bytes: the largest value, so every
/// copy takes the vector loop. The remedy's experiment, not the stack's fix.
pub const REP_MOVSB_OFF: &str = "GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=4294967295";

/// The payload moved per second of a side's `rep movsb` at most this many times the machine's
/// slowest placement: its copies run at about that speed. A stack whose `rep movsb` copies run at
/// the fast placements moves the payload several times faster per second of them (quiche's
/// server: ~14 GB/s, where glibc's vector copy instead gained nothing).
pub const SLOW_PAYLOAD_FACTOR: f64 = 2.0;

/// The side's `rep movsb` copies, when they are at least [`MEDIUM_SHARE`] of its samples, the
/// machine has slow placements, and the payload crossed them at about the slow speed.
pub(super) fn rep_movsb(record: &RunRecord, role: Role, side: &Side) -> Option<Finding> {
    let limit = record.copy_limit.as_ref().filter(|l| l.slow_placements > 0)?;
    let (copy, all) = (side.rep_movsb_samples, side.samples);
    let share = (all > 0).then(|| copy as f64 / all as f64).filter(|&s| s >= MEDIUM_SHARE)?;
    let payload = record.size_bytes as f64 * record.repetitions.len() as f64;
    let payload_gb_s = payload / side.rep_movsb_s.max(1e-9) / 1e9;
    if payload_gb_s > SLOW_PAYLOAD_FACTOR * limit.slowest_gb_s {
        return None;
    }
    let seen = format!(
        "{:.0}% of the {role}'s samples ({copy} of {all}) interrupted a rep movsb (glibc's memcpy of large buffers), \
         {payload_gb_s:.1} GB/s of payload per second of it; on this machine a {} B memcpy runs at {:.1} GB/s with \
         the destination {} B past the source in its page ({} of {} placements tried under a quarter of the \
         speed), against {:.1} GB/s at the same page offset",
        100.0 * share,
        limit.bytes,
        limit.slowest_gb_s,
        limit.slowest_placement,
        limit.slow_placements,
        limit.placements,
        limit.same_offset_gb_s,
    );
    let why = format!(
        "glibc copies large buffers with rep movsb on CPUs that advertise fast string moves, and this CPU runs it \
         far slower at some placements of the destination against the source; a stack whose buffers keep such a \
         placement (a fresh buffer filled from a fixed offset past a record or packet header) pays it on every \
         copy. The stack's fix: avoid the copy, or place its destination at the source's page offset. {}",
        stake(Some(share), "the rep movsb copy", role)
    );
    let try_this = format!(
        "{REP_MOVSB_OFF} nesquic run --lut {} {} (glibc's vector copy instead; compare CPU per GB \
         with this run's)",
        record.lut.name,
        super::experiment_probes(record)
    );
    Some(Finding {
        rule: Rule::RepMovsbCopy,
        role,
        severity: severity(Some(share)),
        seen,
        why,
        try_this,
        cpu_share_at_stake: Some(share),
    })
}
