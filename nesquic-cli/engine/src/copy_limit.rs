//! The machine's large `memcpy` at every page-offset placement (`nesquic_record::copy_limit`):
//! libc's `memcpy` of [`BYTES`] from a page-aligned source to a destination 0..4095 bytes into
//! its page, best of [`ROUNDS`] rounds of [`COPIES`] copies each. Run after the transfer, and only
//! when a side's profile put at least the finding's [`MEDIUM_SHARE`] of its samples in glibc's
//! `rep movsb` copy: ~0.1 s that no other run pays.

use std::time::Instant;

use nesquic_protocol::Role;
use nesquic_record::copy_limit::{rep_movsb_samples, CopyLimit};
use nesquic_record::figures::RepetitionFigures;
use nesquic_record::findings::MEDIUM_SHARE;

/// A TLS record's plaintext: the size of the copies that made the finding (tcp-tls, rustls).
pub const BYTES: usize = 16_384;
/// Copies per round.
pub const COPIES: u32 = 100;
/// Rounds per placement; the best is kept (the least disturbed by other work on the machine).
pub const ROUNDS: usize = 3;
/// Placements are tried this many bytes apart, from 0 to 4095: enough to land in a window of
/// slow placements ~15 bytes wide several times.
pub const STEP: usize = 3;
/// A placement is slow below this fraction of the same-offset speed.
pub const SLOW: f64 = 0.25;

/// The benchmark, when a side's profile spent at least [`MEDIUM_SHARE`] in `rep movsb` copies
/// (below it the `rep_movsb_copy` finding cannot fire, so nothing is measured).
pub fn measure(repetitions: &[RepetitionFigures]) -> Option<CopyLimit> {
    let copying = [Role::Server, Role::Client]
        .into_iter()
        .filter_map(|role| rep_movsb_samples(repetitions, role))
        .any(|(copy, all)| all > 0 && copy as f64 >= MEDIUM_SHARE * all as f64);
    if !copying {
        return None;
    }
    const PAGE: usize = 4096;
    // A page-aligned source, and a destination whose page offset is chosen per placement.
    let mut source = vec![0x5au8; BYTES + 2 * PAGE];
    let mut destination = vec![0u8; BYTES + 2 * PAGE];
    let from = source.as_mut_ptr().align_offset(PAGE);
    let to = destination.as_mut_ptr().align_offset(PAGE);
    // (placement, GB/s), placement 0 first: the same page offset as the source.
    let speeds: Vec<(usize, f64)> = (0..PAGE)
        .step_by(STEP)
        .map(|p| (p, best_gb_s(&source[from..from + BYTES], &mut destination[to + p..to + p + BYTES])))
        .collect();
    let same_offset = speeds.first().map_or(0.0, |&(_, gb_s)| gb_s);
    let (slowest_placement, slowest) =
        speeds.iter().copied().fold((0, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
    Some(CopyLimit {
        bytes: BYTES as u64,
        library: "libc memcpy (glibc's pick for this CPU)".into(),
        same_offset_gb_s: same_offset,
        slowest_gb_s: slowest,
        slowest_placement: slowest_placement as u64,
        placements: speeds.len() as u64,
        slow_placements: speeds.iter().filter(|&&(_, gb_s)| gb_s < SLOW * same_offset).count() as u64,
    })
}

/// Best GB/s over the rounds, copying `source` into `destination` (equal lengths).
fn best_gb_s(source: &[u8], destination: &mut [u8]) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for _ in 0..COPIES {
            // SAFETY: both slices hold `source.len()` bytes and belong to different buffers.
            unsafe {
                libc::memcpy(
                    destination.as_mut_ptr().cast(),
                    source.as_ptr().cast(),
                    std::hint::black_box(source.len()),
                )
            };
            std::hint::black_box(&mut *destination);
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    (source.len() as f64 * f64::from(COPIES)) / best.max(1e-9) / 1e9
}
