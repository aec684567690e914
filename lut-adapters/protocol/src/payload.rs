//! The benchmark protocol (docs/protocol.md): one connection, one bidirectional stream, ALPN
//! `nesquic`. The client sends the payload size as 8 bytes big-endian and finishes its side; the
//! server answers with that many bytes of the payload pattern and finishes the stream. The client
//! checks length and content.
//!
//! The pattern repeats with a period of [`PERIOD`] bytes (a prime, so no packet, GSO or buffer
//! size divides it): stream byte `o` is `pattern[o % PERIOD]`. It is built once as a block of
//! `PERIOD + WINDOW` bytes, so producing up to [`WINDOW`] bytes is one slice of it
//! ([`pattern_window`], no copy at all), and checking a chunk is a `memcmp`-class comparison,
//! piece by piece against one period of the block: that reference stays in L1 (docs/protocol.md
//! has the measured speed-up), so the harness runs at the speed the received bytes arrive
//! instead of being what Nesquic measures.

use std::sync::OnceLock;

/// ALPN every LUT negotiates.
pub const ALPN: &[u8] = b"nesquic";
/// TLS server name the certificate is issued for and clients verify.
pub const SERVER_NAME: &str = "localhost";
/// Request length: a big-endian u64.
pub const REQUEST_LEN: usize = 8;

/// The pattern's period in bytes: 4093, a prime, so it is a multiple of no packet, segment or
/// buffer size, and a chunk that is lost, repeated or moved changes the bytes at its position
/// unless it moves by a whole multiple of 4093 (then only the length check catches it). Short
/// so that the verifier's reference (one period) stays in L1: against a 2^17 - 1 period, whose
/// reference window streamed from L2, the compare runs 1.3-2.0x as fast with the received bytes
/// outside L1 (`harness_bench`, bench/harness.md).
pub const PERIOD: usize = 4093;

/// The longest payload slice [`pattern_window`] hands out: 2^17 - 1 bytes, more than any stack
/// takes per call (the block is `PERIOD + WINDOW` bytes so a window at any phase is contiguous).
pub const WINDOW: usize = 131_071;

const SEED: u64 = 0x6e65_7371_7569_6321; // "nesquic!"

/// Encodes a request for `size` bytes.
pub fn encode_request(size: u64) -> [u8; REQUEST_LEN] {
    size.to_be_bytes()
}

/// Decodes a request; `None` unless exactly [`REQUEST_LEN`] bytes.
pub fn decode_request(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.try_into().ok()?))
}

/// splitmix64 of a word index: only used once, to build the pattern block.
fn splitmix64(index: u64) -> u64 {
    let mut z = index.wrapping_add(SEED).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The pattern repeated to `PERIOD + WINDOW` bytes, so a window of up to [`WINDOW`] bytes
/// starting at any phase is one contiguous slice. Byte `i` is byte `j % 8` (little-endian) of
/// `splitmix64(j / 8)`, where `j = i % PERIOD`.
fn block() -> &'static [u8] {
    static BLOCK: OnceLock<Box<[u8]>> = OnceLock::new();
    BLOCK.get_or_init(|| {
        let one: Vec<u8> = (0..PERIOD).map(|i| splitmix64((i / 8) as u64).to_le_bytes()[i % 8]).collect();
        // Whole periods copied at a time (`repeat`), not byte by byte (`cycle()`, about twice
        // the time): each LUT process builds it once, at its first payload byte.
        let mut block = one.repeat((PERIOD + WINDOW).div_ceil(PERIOD));
        block.truncate(PERIOD + WINDOW);
        block.into_boxed_slice()
    })
}

/// The payload bytes from stream offset `offset` on: `min(max_len, WINDOW)` bytes, borrowed from
/// the pattern block (servers hand this slice to stacks whose API takes shared buffers).
pub fn pattern_window(offset: u64, max_len: usize) -> &'static [u8] {
    let phase = (offset % PERIOD as u64) as usize;
    &block()[phase..phase + max_len.min(WINDOW)]
}

/// Fills `buf` with the payload bytes that start at stream offset `offset` (a copy of pattern
/// windows: for stacks whose API needs the bytes in their own buffer).
pub fn fill_pattern(offset: u64, buf: &mut [u8]) {
    let mut pos = 0usize;
    while pos < buf.len() {
        let window = pattern_window(offset + pos as u64, buf.len() - pos);
        buf[pos..pos + window.len()].copy_from_slice(window);
        pos += window.len();
    }
}

/// Checks a received stream chunk by chunk.
#[derive(Debug, Default)]
pub struct Verifier {
    received: u64,
    /// `received % PERIOD`, kept up to date instead of divided out per chunk (stacks that
    /// deliver one packet's worth at a time call `update` ~100k times a second).
    phase: usize,
}

/// Why a payload failed verification.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    /// A byte differs from the pattern.
    #[error("payload mismatch at byte offset {offset}")]
    Mismatch {
        /// Stream offset of the first wrong byte.
        offset: u64,
    },
    /// More or fewer bytes than requested.
    #[error("payload length {received} != requested {expected}")]
    Length {
        /// Bytes received.
        received: u64,
        /// Bytes requested.
        expected: u64,
    },
}

impl Verifier {
    /// Checks the next chunk of the stream; on a mismatch reports the first wrong byte's offset.
    /// A chunk is compared a period at a time against the same reference, the one period of the
    /// block that starts at the chunk's phase: whatever the chunk's length, the loop reads
    /// at most `2 * PERIOD` bytes of reference over a stream (8 KiB, L1) besides the chunk.
    pub fn update(&mut self, chunk: &[u8]) -> Result<(), VerifyError> {
        let reference = &block()[self.phase..self.phase + PERIOD];
        let (mut pos, mut last) = (0usize, 0usize);
        while pos < chunk.len() {
            last = (chunk.len() - pos).min(PERIOD);
            let (got, expected) = (&chunk[pos..pos + last], &reference[..last]);
            if !bytes_equal(got, expected) {
                // Rare path: find the exact byte only once we know there is one.
                let i = got.iter().zip(expected).position(|(a, b)| a != b).unwrap_or(0);
                return Err(VerifyError::Mismatch { offset: self.received + (pos + i) as u64 });
            }
            pos += last;
        }
        self.received += chunk.len() as u64;
        // Every piece but the last was a whole period: only the last one moves the phase.
        self.phase += last;
        if self.phase >= PERIOD {
            self.phase -= PERIOD;
        }
        Ok(())
    }

    /// Bytes verified so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Checks the total length once the stream has finished.
    pub fn finish(&self, expected: u64) -> Result<(), VerifyError> {
        if self.received == expected {
            Ok(())
        } else {
            Err(VerifyError::Length { received: self.received, expected })
        }
    }
}

/// `a == b` for equal-length slices at memory speed. On x86-64 with AVX-512 or AVX2 the loop is
/// ours (so a sampling profile attributes it to the harness, `nesquic_protocol::payload::*`,
/// rather than to libc's `memcmp`, which the stacks use too); elsewhere it is the standard
/// library's.
pub fn bytes_equal(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    match compare_loop() {
        // SAFETY: `compare_loop` picked this loop only after detecting AVX-512F and -BW.
        CompareLoop::Avx512 => return unsafe { equal_avx512(a, b) },
        // SAFETY: `compare_loop` picked this loop only after detecting AVX2.
        CompareLoop::Avx2 => return unsafe { equal_avx2(a, b) },
        CompareLoop::Std => {}
    }
    a == b
}

/// Which compare loop [`bytes_equal`] runs on this CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareLoop {
    /// 512-bit loads (AVX-512F and AVX-512BW: the BW masked loads check the tail).
    Avx512,
    /// 256-bit loads.
    Avx2,
    /// The standard library's slice comparison.
    Std,
}

/// The compare loop [`bytes_equal`] uses here, detected once: a client calls it ~350,000 times
/// a second with packet-sized chunks, so the choice is one load of a cached byte, not a fresh
/// feature test per call.
pub fn compare_loop() -> CompareLoop {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: not yet detected; otherwise 1 + the loop's index in `LOOPS`.
    static CHOSEN: AtomicU8 = AtomicU8::new(0);
    const LOOPS: [CompareLoop; 3] = [CompareLoop::Avx512, CompareLoop::Avx2, CompareLoop::Std];
    match CHOSEN.load(Ordering::Relaxed) {
        1 => CompareLoop::Avx512,
        2 => CompareLoop::Avx2,
        3 => CompareLoop::Std,
        _ => {
            let chosen = detect_compare_loop();
            let index = LOOPS.iter().position(|l| *l == chosen).unwrap_or(2);
            // Racing threads detect the same CPU: storing twice is harmless.
            CHOSEN.store(index as u8 + 1, Ordering::Relaxed);
            chosen
        }
    }
}

fn detect_compare_loop() -> CompareLoop {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bw") {
            return CompareLoop::Avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return CompareLoop::Avx2;
        }
    }
    CompareLoop::Std
}

/// The first 64 bytes with unaligned loads, then `a` read at 64-byte-aligned addresses (a load
/// that straddles two cache lines costs two; `b`, the pattern, stays unaligned: its phase is the
/// stream's), four lanes per iteration XORed and ORed into one accumulator (`vpternlog`) with one
/// test per 256 bytes, and the tail as one last 64-byte block overlapping what was checked. Below
/// 64 bytes, one masked load of each. No byte-wise loop and no libc call for any length.
/// Against the previous loop (unaligned, a slice compare below 64 bytes): +4% on LLC-resident
/// data, +5-9% on L2-resident, and no change inside the LUTs, where the loop runs at the rate
/// the cache delivers the payload (bench/profile-coverage-luts.md).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn equal_avx512(a: &[u8], b: &[u8]) -> bool {
    use std::arch::x86_64::{
        __m512i, _mm512_loadu_si512, _mm512_maskz_loadu_epi8, _mm512_or_si512, _mm512_ternarylogic_epi64,
        _mm512_test_epi64_mask, _mm512_xor_si512,
    };
    const LANE: usize = 64;
    const STEP: usize = 4 * LANE;
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    if n < LANE {
        // Masked loads touch only the first n bytes of each slice (no fault past the end).
        let mask = if n == 0 { 0 } else { u64::MAX >> (LANE - n) };
        // SAFETY: the mask covers bytes 0..n, all inside both slices.
        let d = unsafe {
            _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, pa.cast()), _mm512_maskz_loadu_epi8(mask, pb.cast()))
        };
        return _mm512_test_epi64_mask(d, d) == 0;
    }
    // XOR of the 64 bytes at `at` in both slices. SAFETY (of every call): at + 64 <= n.
    let diff = |at: usize| unsafe {
        _mm512_xor_si512(
            _mm512_loadu_si512(pa.add(at).cast::<__m512i>()),
            _mm512_loadu_si512(pb.add(at).cast::<__m512i>()),
        )
    };
    let mut acc = diff(0);
    // From here `a`'s loads are aligned: 1..=64 bytes on, all already covered by block 0.
    let mut i = LANE - (pa as usize % LANE);
    while i + STEP <= n {
        // acc | x ^ y in one instruction per lane (truth table 0xF6).
        let fold = |acc: __m512i, at: usize| {
            // SAFETY: at + 64 <= i + 256 <= n.
            unsafe {
                _mm512_ternarylogic_epi64::<0xF6>(
                    acc,
                    _mm512_loadu_si512(pa.add(at).cast::<__m512i>()),
                    _mm512_loadu_si512(pb.add(at).cast::<__m512i>()),
                )
            }
        };
        acc = fold(fold(fold(fold(acc, i), i + LANE), i + 2 * LANE), i + 3 * LANE);
        if _mm512_test_epi64_mask(acc, acc) != 0 {
            return false;
        }
        i += STEP;
    }
    while i + LANE <= n {
        acc = _mm512_or_si512(acc, diff(i));
        i += LANE;
    }
    acc = _mm512_or_si512(acc, diff(n - LANE));
    _mm512_test_epi64_mask(acc, acc) == 0
}

/// 128 bytes per iteration: four XORed 32-byte lanes ORed together, one test per iteration.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn equal_avx2(a: &[u8], b: &[u8]) -> bool {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_or_si256, _mm256_testz_si256, _mm256_xor_si256};
    const STEP: usize = 128;
    let n = a.len().min(b.len());
    let mut i = 0usize;
    while i + STEP <= n {
        // SAFETY: i + 128 <= n, so every 32-byte load below is inside both slices; loadu has no
        // alignment requirement.
        let diff = unsafe {
            let lane = |k: usize| {
                let x = _mm256_loadu_si256(a.as_ptr().add(i + 32 * k) as *const __m256i);
                let y = _mm256_loadu_si256(b.as_ptr().add(i + 32 * k) as *const __m256i);
                _mm256_xor_si256(x, y)
            };
            _mm256_or_si256(_mm256_or_si256(lane(0), lane(1)), _mm256_or_si256(lane(2), lane(3)))
        };
        if _mm256_testz_si256(diff, diff) == 0 {
            return false;
        }
        i += STEP;
    }
    a[i..n] == b[i..n]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn stream(len: usize) -> Vec<u8> {
        let mut data = vec![0u8; len];
        fill_pattern(0, &mut data);
        data
    }

    /// Feeds `data` in chunks of `size` bytes; the first error, else the length check.
    fn verify_chunked(data: &[u8], size: usize, expected: u64) -> Result<(), VerifyError> {
        let mut v = Verifier::default();
        for chunk in data.chunks(size.max(1)) {
            v.update(chunk)?;
        }
        v.finish(expected)
    }

    /// Stream byte `o` as docs/protocol.md defines it, written out with its literal period
    /// (independent of this module's constants and block).
    fn spec_byte(o: u64) -> u8 {
        let i = o % 4093;
        splitmix64(i / 8).to_le_bytes()[(i % 8) as usize]
    }

    /// `len` stream bytes from `offset` on, from the definition alone.
    fn spec_stream(offset: u64, len: usize) -> Vec<u8> {
        (offset..offset + len as u64).map(spec_byte).collect()
    }

    #[test]
    fn windows_follow_the_definition_and_are_up_to_131071_bytes_at_every_phase() {
        for offset in [0u64, 1, 4092, 4093, 4094, 8000, 131_071, 1_000_000_007, 10_000_000_000_000] {
            let window = pattern_window(offset, usize::MAX);
            assert_eq!(window.len(), 131_071, "offset {offset}");
            let first_wrong = window.iter().zip(spec_stream(offset, 131_071)).position(|(a, b)| *a != b);
            assert_eq!(first_wrong, None, "offset {offset}");
            assert_eq!(pattern_window(offset, 1452), &window[..1452], "offset {offset}");
        }
        let mut filled = vec![0u8; 300_000];
        fill_pattern(123_456_789, &mut filled);
        assert!(filled == spec_stream(123_456_789, 300_000), "fill_pattern differs from the definition");
        assert_eq!(verify_chunked(&spec_stream(0, 300_000), 65_536, 300_000), Ok(()));
    }

    /// One `update` of a chunk spanning many periods, starting at a phase other than 0: a wrong
    /// byte anywhere (first piece, either side of each period boundary inside the chunk, the last
    /// piece, the last byte) is reported at its exact stream offset.
    #[test]
    fn a_chunk_spanning_many_periods_is_checked_against_one_period_with_exact_offsets() {
        let (head, len) = (1000usize, 300_000usize);
        let data = spec_stream(0, head + len);
        let mut flips = vec![0usize, 1, len / 2, len - 2, len - 1];
        // Period boundaries inside the chunk: stream offsets that are multiples of 4093.
        let mut boundary = 4093 - head;
        while boundary < len {
            flips.extend([boundary - 1, boundary, boundary + 1]);
            boundary += 4093 * 7;
        }
        flips.extend([len - (len + head) % 4093 - 1, len - (len + head) % 4093]);
        for f in flips {
            let mut v = Verifier::default();
            assert_eq!(v.update(&data[..head]), Ok(()));
            let mut chunk = data[head..].to_vec();
            chunk[f] ^= 0x04;
            assert_eq!(
                v.update(&chunk),
                Err(VerifyError::Mismatch { offset: (head + f) as u64 }),
                "flip {f} bytes into the chunk"
            );
        }
        // Unaltered, it verifies, and the phase it leaves is right for the next chunk.
        let mut v = Verifier::default();
        assert_eq!(v.update(&data[..head]), Ok(()));
        assert_eq!(v.update(&data[head..]), Ok(()));
        assert_eq!(v.update(&spec_stream((head + len) as u64, 5000)), Ok(()));
        assert_eq!(v.finish((head + len + 5000) as u64), Ok(()));
        // A chunk shifted by one byte inside: caught where it starts.
        let shifted = [&data[head..head + 50_000], &data[head + 50_001..]].concat();
        let mut v = Verifier::default();
        assert_eq!(v.update(&data[..head]), Ok(()));
        assert!(
            matches!(v.update(&shifted), Err(VerifyError::Mismatch { offset }) if (head as u64 + 50_000..head as u64 + 50_016).contains(&offset))
        );
    }

    #[test]
    fn pattern_is_independent_of_chunking_and_follows_its_definition() {
        let whole = stream(3 * PERIOD + 1000);
        let mut pieces = vec![0u8; whole.len()];
        for (start, end) in [(0, 3), (3, 17), (17, 500), (500, PERIOD + 9), (PERIOD + 9, whole.len())] {
            fill_pattern(start as u64, &mut pieces[start..end]);
        }
        assert_eq!(whole, pieces);
        for i in [0usize, 7, 8, 1234, PERIOD - 1] {
            assert_eq!(whole[i], splitmix64((i / 8) as u64).to_le_bytes()[i % 8], "byte {i}");
            assert_eq!(whole[i + PERIOD], whole[i], "period at {i}");
        }
        assert!(whole.iter().filter(|b| **b == whole[0]).count() < whole.len() / 100, "pattern looks constant");
    }

    #[test]
    fn every_chunking_from_1_byte_to_64_kib_gives_the_same_verdict() {
        let good = stream(2 * PERIOD + 4321);
        let mut flipped = good.clone();
        flipped[PERIOD + 77] ^= 0x40;
        let sizes: Vec<usize> =
            (1..=64).chain((65..=65_536).step_by(997)).chain([1200, 1452, 65_535, 65_536]).collect();
        for size in sizes {
            assert_eq!(verify_chunked(&good, size, good.len() as u64), Ok(()), "chunk {size}");
            assert_eq!(
                verify_chunked(&flipped, size, good.len() as u64),
                Err(VerifyError::Mismatch { offset: PERIOD as u64 + 77 }),
                "chunk {size}"
            );
        }
    }

    #[test]
    fn flipped_byte_reports_its_offset() {
        for at in [0usize, 1, 127, 128, 4095, PERIOD - 1, PERIOD, 200_000] {
            let mut data = stream(210_000);
            data[at] ^= 1;
            assert_eq!(verify_chunked(&data, 65_536, 210_000), Err(VerifyError::Mismatch { offset: at as u64 }));
        }
    }

    #[test]
    fn truncated_and_extra_bytes_fail_the_length_check() {
        let data = stream(100_000);
        assert_eq!(
            verify_chunked(&data[..99_999], 1452, 100_000),
            Err(VerifyError::Length { received: 99_999, expected: 100_000 })
        );
        let extra = stream(100_001);
        assert_eq!(
            verify_chunked(&extra, 1452, 100_000),
            Err(VerifyError::Length { received: 100_001, expected: 100_000 })
        );
        // A whole period lost looks like the pattern again: only the length can tell.
        let long = stream(3 * PERIOD);
        let missing_period = [&long[..1000], &long[1000 + PERIOD..]].concat();
        assert_eq!(
            verify_chunked(&missing_period, 1452, long.len() as u64),
            Err(VerifyError::Length { received: 2 * PERIOD as u64, expected: 3 * PERIOD as u64 })
        );
    }

    /// The verdict is a mismatch within 16 bytes after `start` (a random byte matches the
    /// expected one by chance 1 time in 256, so the first wrong offset may be a few bytes on).
    fn assert_mismatch_near(result: Result<(), VerifyError>, start: usize, what: &str) {
        match result {
            Err(VerifyError::Mismatch { offset }) if (start as u64..start as u64 + 16).contains(&offset) => {}
            other => panic!("{what}: expected a mismatch at or just after {start}, got {other:?}"),
        }
    }

    #[test]
    fn missing_duplicated_and_moved_chunks_are_caught_where_they_start() {
        let data = stream(400_000);
        let at = 10_000usize;
        for len in [1usize, 7, 8, 1200, 1452, 4096, 14_520, 65_536] {
            let missing = [&data[..at], &data[at + len..]].concat();
            assert_mismatch_near(verify_chunked(&missing, 4096, 400_000), at, &format!("missing {len}"));
            let duplicated = [&data[..at + len], &data[at..at + len], &data[at + len..]].concat();
            assert_mismatch_near(verify_chunked(&duplicated, 4096, 400_000), at + len, &format!("duplicated {len}"));
            let next = at + len;
            let swapped = [&data[..at], &data[next..next + len], &data[at..next], &data[next + len..]].concat();
            assert_mismatch_near(verify_chunked(&swapped, 4096, 400_000), at, &format!("swapped {len}"));
        }
    }

    #[test]
    fn bytes_equal_finds_a_difference_in_every_position_of_a_lane() {
        let a = stream(1000);
        for i in 0..a.len() {
            let mut b = a.clone();
            b[i] ^= 0x80;
            assert!(!bytes_equal(&a, &b), "difference at {i} missed");
        }
        assert!(bytes_equal(&a, &a.clone()));
        // Every length up to a few blocks, a flip at the first, a middle and the last byte
        // (each length ends in a different tail case).
        for len in 1..=600 {
            for at in [0, len / 2, len - 1] {
                let mut b = a[..len].to_vec();
                b[at] ^= 1;
                assert!(!bytes_equal(&a[..len], &b), "length {len}, flip at {at}");
            }
            assert!(bytes_equal(&a[..len], &a[..len]), "length {len}");
        }
        assert!(!bytes_equal(&a[..10], &a[..11]));
    }

    /// The AVX-512 loop switches from unaligned to aligned loads at the first 64-byte boundary of
    /// `a`, folds 256-byte blocks, then 64-byte lanes, then an overlapping last lane, and masks
    /// below 64 bytes: each start alignment, lengths around every switch, and a wrong byte at each
    /// of those boundaries must all be caught, with the exact offset through the verifier.
    #[test]
    fn a_wrong_byte_is_caught_at_every_alignment_block_boundary_and_tail() {
        let pattern = stream(65_536);
        let mut lens: Vec<usize> = (1..=130).collect();
        lens.extend([255, 256, 257, 319, 320, 321, 383, 384, 385, 511, 512, 513, 1419, 1420, 4103, 63_486, 65_536]);
        for start in 0..64usize {
            // A copy placed `start` bytes past a 64-byte boundary.
            let mut buf = vec![0u8; 64 + start + 65_536];
            let aligned = (64 - buf.as_ptr() as usize % 64) % 64;
            for &len in &lens {
                let at = aligned + start;
                buf[at..at + len].copy_from_slice(&pattern[..len]);
                let got = &mut buf[at..at + len];
                assert!(bytes_equal(got, &pattern[..len]), "start {start}, length {len}: equal slices");
                let first_aligned = (64 - (got.as_ptr() as usize % 64)) % 64;
                let mut flips = vec![0, len / 2, len - 1, first_aligned, first_aligned + 1];
                for boundary in [63, 64, 65, 255, 256, 257, 320, 384] {
                    flips.push(first_aligned + boundary);
                    flips.push(boundary);
                }
                flips.extend([len.saturating_sub(65), len.saturating_sub(64), len.saturating_sub(63)]);
                flips.retain(|&f| f < len);
                for f in flips {
                    got[f] ^= 0x10;
                    assert!(!bytes_equal(got, &pattern[..len]), "start {start}, length {len}: flip at {f} missed");
                    let mut v = Verifier::default();
                    assert_eq!(
                        v.update(got),
                        Err(VerifyError::Mismatch { offset: f as u64 }),
                        "start {start}, length {len}"
                    );
                    got[f] ^= 0x10;
                }
            }
        }
    }

    #[test]
    fn the_compare_loop_is_detected_once_and_is_the_widest_this_cpu_has() {
        let expected = detect_compare_loop();
        assert_eq!(compare_loop(), expected);
        assert_eq!(compare_loop(), expected, "the cached choice");
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512bw") {
            assert_eq!(expected, CompareLoop::Avx512);
        }
    }

    #[test]
    fn request_round_trips() {
        assert_eq!(decode_request(&encode_request(25_000_000)), Some(25_000_000));
        assert_eq!(decode_request(&[1, 2, 3]), None);
    }
}
