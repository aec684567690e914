//! Payload harness speed: how fast the benchmark protocol's payload is produced and verified,
//! against `memcpy` and `memcmp` over the same buffers (the physical limit). Run by
//! `just bench-harness`; writes a markdown table to the path given (default: stdout only).
//!
//! The stream is ~1 GiB moved through a ~4 MiB ring of 64 KiB chunks (a receive path sees fresh
//! buffers, not one hot chunk); the ring is a whole number of pattern periods, so it holds the
//! right bytes for every pass. Rounds alternate between the harness and its memory baseline, and
//! the table reports the median of each and their ratio. Times are the thread's CPU time, not wall
//! time: on a shared machine a round that loses the core to another process is not slower.
//!
//! A second table verifies at the chunk sizes the clients really hand `Verifier::update`
//! (measured with a uprobe on it, 100 MB runs): quinn's `read_chunk` and quiche's
//! `stream_recv_buf` pieces are one packet's stream data (1,420 bytes for 87% of calls), MsQuic's
//! receive callback ~63,490 bytes, the previous quiche scratch buffer 65,536. Each size three
//! ways: streamed from the 4 MiB ring (last-level cache), from a 128 KiB ring (the core's L2),
//! and right after a copy wrote the chunk (as a stack writes what it hands over).
//!
//! A third table is why the pattern's period is short (docs/protocol.md): the same compare
//! loop, piece by piece against one period of a reference block, for periods from today's 4093
//! bytes up to the former 131,071, whose reference window streamed from L2. `REFERENCE_ONLY=1`
//! prints that table alone.

use std::hint::black_box;

use nesquic_translation::protocol::{
    bytes_equal, compare_loop, fill_pattern, pattern_window, CompareLoop, Verifier, PERIOD, WINDOW,
};

const CHUNK: usize = 64 * 1024;
/// ~4 MiB, a whole number of periods.
const RING: usize = (4 << 20) / PERIOD * PERIOD;
/// ~128 KiB, a whole number of periods.
const L2_RING: usize = (128 << 10) / PERIOD * PERIOD;
const PASSES: u64 = 256;
const STREAM: u64 = PASSES * RING as u64;
const ROUNDS: usize = 7;

/// The ring's chunks, in stream order (the last one of a pass is shorter).
fn chunks() -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..RING).step_by(CHUNK).map(|at| at..(at + CHUNK).min(RING))
}

fn gbytes_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / 1e9
}

/// This thread's CPU time in seconds.
fn cpu_now() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_THREAD_CPUTIME_ID exists on every Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// CPU seconds `f` took.
fn time(f: impl FnOnce()) -> f64 {
    let t = cpu_now();
    f();
    cpu_now() - t
}

/// Verifies `total` bytes of `ring` (a whole number of periods), `chunk` bytes per call, as a
/// client does; with `copy_to`, each chunk is first copied there (a stack writing it).
fn verify_stream(ring: &[u8], chunk: usize, total: u64, mut copy_to: Option<&mut [u8]>) {
    let mut v = Verifier::default();
    let mut at = 0usize;
    while v.received() < total {
        let n = chunk.min(ring.len() - at);
        match copy_to.as_deref_mut() {
            Some(buf) => {
                buf[..n].copy_from_slice(&ring[at..at + n]);
                v.update(black_box(&buf[..n])).expect("pattern verifies");
            }
            None => v.update(black_box(&ring[at..at + n])).expect("pattern verifies"),
        }
        at = if at + n == ring.len() { 0 } else { at + n };
    }
}

/// The same walk copying only (what [`verify_stream`] with `copy_to` costs beyond verifying).
fn copy_stream(ring: &[u8], chunk: usize, total: u64, buf: &mut [u8]) {
    let (mut at, mut done) = (0usize, 0u64);
    while done < total {
        let n = chunk.min(ring.len() - at);
        buf[..n].copy_from_slice(&ring[at..at + n]);
        black_box(&buf[..n]);
        done += n as u64;
        at = if at + n == ring.len() { 0 } else { at + n };
    }
}

/// The table at the clients' chunk sizes: GB/s of `Verifier::update` per CPU second.
fn chunk_table(ring: &[u8]) -> String {
    let l2_ring = &ring[..L2_RING];
    let total = STREAM / 4;
    let mut buf = vec![0u8; 64 * 1024];
    let mut table = String::from(
        "| chunk (bytes) | whose | 4 MiB ring (LLC) | 128 KiB ring (L2) | just written (copy, then verify) |\n|---|---|---|---|---|\n",
    );
    for (chunk, whose) in [
        (1420usize, "quinn read_chunk, quiche stream_recv_buf pieces"),
        (63_486, "MsQuic receive callback"),
        (65_536, "quiche's former stream_recv scratch"),
    ] {
        let (mut cold, mut warm, mut written, mut copied) = (vec![], vec![], vec![], vec![]);
        for _ in 0..ROUNDS {
            cold.push(time(|| verify_stream(ring, chunk, total, None)));
            warm.push(time(|| verify_stream(l2_ring, chunk, total, None)));
            written.push(time(|| verify_stream(ring, chunk, total, Some(&mut buf))));
            copied.push(time(|| copy_stream(ring, chunk, total, &mut buf)));
        }
        let gbs = |secs: f64| gbytes_per_s(total, secs);
        table.push_str(&format!(
            "| {chunk} | {whose} | {:.1} | {:.1} | {:.1} |\n",
            gbs(median(cold)),
            gbs(median(warm)),
            gbs(median(written) - median(copied)),
        ));
    }
    table
}

/// Bytes of period `period` (arbitrary values: only the compare's speed is measured here), `len`
/// of them: byte `i` is `base[i % period]`.
fn periodic(period: usize, len: usize) -> Vec<u8> {
    let base: Vec<u8> = (0..period).map(|i| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes()[7]).collect();
    (0..len).map(|i| base[i % period]).collect()
}

/// Compares `total` bytes of `ring` (stream offset 0 at its start), `chunk` bytes per call, with
/// the reference `block` (`period + window` bytes of the same pattern), piece by piece against
/// the one window `block[phase .. phase + period]`: with a short period the reference the loop
/// reads stays in L1 however long the chunk.
fn compare_pieces(ring: &[u8], block: &[u8], period: usize, chunk: usize, total: u64, mut scratch: Option<&mut [u8]>) {
    let (mut at, mut phase, mut done) = (0usize, 0usize, 0u64);
    while done < total {
        let n = chunk.min(ring.len() - at);
        let data: &[u8] = match scratch.as_deref_mut() {
            Some(buf) => {
                buf[..n].copy_from_slice(&ring[at..at + n]);
                black_box(&buf[..n])
            }
            None => black_box(&ring[at..at + n]),
        };
        let mut pos = 0usize;
        while pos < n {
            let m = (n - pos).min(period);
            assert!(bytes_equal(&data[pos..pos + m], &block[phase..phase + m]), "pattern compares");
            pos += m;
            phase += m;
            if phase >= period {
                phase -= period;
            }
        }
        done += n as u64;
        if at + n == ring.len() {
            (at, phase) = (0, 0);
        } else {
            at += n;
        }
    }
}

/// The reference's footprint: GB/s of the compare loop, piece by piece against one period of
/// the reference, for periods from 131,071 bytes (the former one: its window streams from L2)
/// down to ones whose reference stays in L1; the received data just written to a 64 KiB buffer
/// (copy time taken off), or streamed from rings of 4 and 64 MiB (last-level cache, DRAM).
fn reference_table() -> String {
    let total = STREAM / 4;
    let periods = [131_071usize, 16_381, 8191, 4093, 2039, 1021];
    let mut table = String::from("| received bytes | chunk (bytes) |");
    for p in periods {
        table.push_str(&format!(" period {p} |"));
    }
    table.push_str("\n|---|---|");
    for _ in periods {
        table.push_str("---|");
    }
    table.push('\n');
    let mut buf = vec![0u8; 65_536];
    for (ring_len, ring_name) in
        [(4usize << 20, "just written"), (4usize << 20, "4 MiB ring"), (64usize << 20, "64 MiB ring")]
    {
        let data: Vec<(Vec<u8>, Vec<u8>)> =
            periods.iter().map(|&p| (periodic(p, ring_len), periodic(p, p + WINDOW))).collect();
        for chunk in [1420usize, 63_486, 65_536] {
            let mut secs: Vec<Vec<f64>> = vec![vec![]; periods.len()];
            for _ in 0..ROUNDS {
                for (k, &p) in periods.iter().enumerate() {
                    let (ring, block) = &data[k];
                    if ring_name == "just written" {
                        let both = time(|| compare_pieces(ring, block, p, chunk, total, Some(&mut buf)));
                        let copy = time(|| copy_stream(ring, chunk, total, &mut buf));
                        secs[k].push(both - copy);
                    } else {
                        secs[k].push(time(|| compare_pieces(ring, block, p, chunk, total, None)));
                    }
                }
            }
            table.push_str(&format!("| {ring_name} | {chunk} |"));
            for s in secs {
                table.push_str(&format!(" {:.1} |", gbytes_per_s(total, median(s))));
            }
            table.push('\n');
        }
    }
    table
}

/// The median of one measure's rounds (ROUNDS is odd and above 0: the middle round).
fn median(v: Vec<f64>) -> f64 {
    nesquic_stats::median(&v).unwrap_or(0.0)
}

fn main() {
    if std::env::var_os("REFERENCE_ONLY").is_some() {
        print!("{}", reference_table());
        return;
    }
    let out = std::env::args().nth(1);
    let mut ring = vec![0u8; RING];
    fill_pattern(0, &mut ring);
    let mut other = ring.clone();

    let (mut verify, mut memcmp, mut shared, mut fill, mut memcpy) = (vec![], vec![], vec![], vec![], vec![]);
    let (mut hot, mut hot_memcmp) = (vec![], vec![]);
    let hot_chunk = ring[..CHUNK].to_vec();
    let hot_copy = hot_chunk.clone();
    for _ in 0..ROUNDS {
        verify.push(time(|| {
            let mut v = Verifier::default();
            for _ in 0..PASSES {
                for c in chunks() {
                    v.update(&ring[c]).expect("pattern verifies");
                }
            }
            assert_eq!(v.received(), STREAM);
        }));
        // A chunk just written by the stack (decrypted in place) is in cache: the case the
        // clients mostly see.
        hot.push(time(|| {
            let expected = pattern_window(0, CHUNK);
            for _ in 0..STREAM / CHUNK as u64 {
                assert!(bytes_equal(black_box(&hot_chunk), expected));
            }
        }));
        hot_memcmp.push(time(|| {
            for _ in 0..STREAM / CHUNK as u64 {
                assert!(black_box(&hot_chunk[..]) == black_box(&hot_copy[..]));
            }
        }));
        memcmp.push(time(|| {
            let mut equal = true;
            for _ in 0..PASSES {
                for c in chunks() {
                    equal &= black_box(&ring[c.clone()]) == black_box(&other[c]);
                }
            }
            assert!(equal);
        }));
        // Generation as the zero-copy servers do it: borrowing windows (the stack copies later).
        shared.push(time(|| {
            let mut offset = 0u64;
            while offset < STREAM {
                offset += black_box(pattern_window(offset, CHUNK)).len() as u64;
            }
        }));
        // Generation into the stack's own buffer (copying APIs).
        fill.push(time(|| {
            let mut offset = 0u64;
            for _ in 0..PASSES {
                for c in chunks() {
                    let n = c.len() as u64;
                    fill_pattern(offset, &mut other[c]);
                    offset += n;
                }
                black_box(&other);
            }
        }));
        memcpy.push(time(|| {
            for _ in 0..PASSES {
                for c in chunks() {
                    other[c.clone()].copy_from_slice(black_box(&ring[c]));
                }
                black_box(&other);
            }
        }));
    }
    // Which loop `bytes_equal` picks on this CPU.
    let compare = match compare_loop() {
        CompareLoop::Avx512 => "AVX-512",
        CompareLoop::Avx2 => "AVX2",
        CompareLoop::Std => "slice ==",
    };
    let per_chunk_ns = median(shared) * 1e9 / (STREAM as f64 / CHUNK as f64);
    let chunks_table = chunk_table(&ring);
    let reference = reference_table();
    let rows = [
        ("verify (Verifier::update)", median(verify), Some(("memcmp", median(memcmp.clone())))),
        ("memcmp (slice ==)", median(memcmp), None),
        ("verify, one hot 64 KiB chunk (bytes_equal)", median(hot), Some(("memcmp", median(hot_memcmp.clone())))),
        ("memcmp, one hot 64 KiB chunk", median(hot_memcmp), None),
        ("generate, copied (fill_pattern)", median(fill), Some(("memcpy", median(memcpy.clone())))),
        ("memcpy (copy_from_slice)", median(memcpy), None),
    ];
    let mut table = String::from("| operation | GB/s per core | vs memory baseline |\n|---|---|---|\n");
    for (name, secs, base) in rows {
        let ratio = base.map(|(b, bs)| format!("{:.2}x {b}", bs / secs)).unwrap_or_else(|| "-".into());
        table.push_str(&format!("| {name} | {:.1} | {ratio} |\n", gbytes_per_s(STREAM, secs)));
    }
    let text = format!(
        "# Payload harness speed\n\nProduced by `just bench-harness` on {} ({} CPUs, compare loop: {}).\n\
         1.07 GB through a 4.2 MB ring of 64 KiB chunks, {ROUNDS} alternating rounds, medians. \
         \"vs memory baseline\" is the harness's speed over memcmp's or memcpy's of two such rings \
         (the harness reads one ring and one {PERIOD}-byte period of the pattern block).\n\n{table}\n\
         Generation for stacks that keep shared buffers (`pattern_window`) touches no byte: \
         {per_chunk_ns:.1} ns per 64 KiB chunk.\n\n\
         ## Verification at the clients' chunk sizes\n\n\
         GB/s of `Verifier::update` per CPU second, {:.2} GB per cell, medians of {ROUNDS} rounds; \
         \"just written\": (copy + verify) - (copy alone), in alternating rounds.\n\n{chunks_table}\n\
         ## The period: a reference that stays in L1\n\n\
         GB/s of the compare loop (`bytes_equal`) checking chunks piece by piece against one period \
         of a reference block (`period + 131071` bytes), {:.2} GB per cell, medians of {ROUNDS} \
         rounds. 131071 was the protocol's period before (its reference window streams from L2); \
         the protocol's is {PERIOD}.\n\n{reference}",
        std::process::Command::new("uname")
            .arg("-sr")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default(),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        compare,
        STREAM as f64 / 4e9,
        STREAM as f64 / 4e9,
    );
    print!("{text}");
    if let Some(path) = out {
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {path}: {e}"));
    }
}
