//! Payload harness speed: how fast the benchmark protocol's payload is produced and verified,
//! against `memcpy` and `memcmp` over the same buffers (the physical limit). Run by
//! `just bench-harness`; writes a markdown table to the path given (default: stdout only).
//!
//! The stream is ~1 GiB moved through a ~4 MiB ring of 64 KiB chunks (a receive path sees fresh
//! buffers, not one hot chunk); the ring is a whole number of pattern periods, so it holds the
//! right bytes for every pass. Rounds alternate between the harness and its memory baseline, and
//! the table reports the median of each and their ratio.

use std::hint::black_box;
use std::time::Instant;

use nesquic_translation::protocol::{bytes_equal, fill_pattern, pattern_window, Verifier, PERIOD};

const CHUNK: usize = 64 * 1024;
const RING: usize = 32 * PERIOD;
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

fn time(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

/// The median of one measure's rounds (ROUNDS is odd and above 0: the middle round).
fn median(v: Vec<f64>) -> f64 {
    nesquic_stats::median(&v).unwrap_or(0.0)
}

fn main() {
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
    // Which loop `bytes_equal` picks on this CPU (the same order it tries them in).
    let compare = if std::arch::is_x86_feature_detected!("avx512f") {
        "AVX-512"
    } else if std::arch::is_x86_feature_detected!("avx2") {
        "AVX2"
    } else {
        "slice =="
    };
    let per_chunk_ns = median(shared) * 1e9 / (STREAM as f64 / CHUNK as f64);
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
         (the harness reads one ring and the 256 KiB pattern block).\n\n{table}\n\
         Generation for stacks that keep shared buffers (`pattern_window`) touches no byte: \
         {per_chunk_ns:.1} ns per 64 KiB chunk.\n",
        std::process::Command::new("uname")
            .arg("-sr")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default(),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        compare,
    );
    print!("{text}");
    if let Some(path) = out {
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {path}: {e}"));
    }
}
