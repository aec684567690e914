//! The machine's AEAD seal speed at the stack's packet size (`nesquic_record::crypto_limit`):
//! ring's AES-128-GCM, AES-256-GCM and ChaCha20-Poly1305, sealing a buffer of the stack's mean sealed bytes
//! in place, best of [`ROUNDS`] rounds of [`ROUND`] each. Run after the transfer, when a run
//! timed `crypto.seal`, so it competes with nothing of the run's own.

use std::time::{Duration, Instant};

use nesquic_protocol::Role;
use nesquic_record::crypto_limit::{stack_seal, CryptoLimit};
use nesquic_record::figures::RepetitionFigures;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305};

/// Rounds per cipher; the best is kept (the least disturbed by other work on the machine).
pub const ROUNDS: usize = 5;
/// Length of one round.
pub const ROUND: Duration = Duration::from_millis(20);

/// The benchmark at the size the run's stack sealed (the larger of its sides' mean sealed bytes
/// per call); `None` when the run timed no seal with bytes.
pub fn measure(repetitions: &[RepetitionFigures]) -> Option<CryptoLimit> {
    // The bulk sender's size: the other side seals ACKs of a few dozen bytes.
    let sides = [stack_seal(repetitions, Role::Server), stack_seal(repetitions, Role::Client)];
    let packet_bytes = sides.into_iter().flatten().map(|(_, bytes)| bytes).max()?;
    let size = usize::try_from(packet_bytes).ok()?.clamp(16, 65_536);
    Some(CryptoLimit {
        packet_bytes: size as u64,
        library: "ring 0.17 (AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305; seal in place)".into(),
        aes128gcm_ns_per_byte: ns_per_byte(&AES_128_GCM, 16, size)?,
        aes256gcm_ns_per_byte: ns_per_byte(&AES_256_GCM, 32, size)?,
        chacha20_ns_per_byte: ns_per_byte(&CHACHA20_POLY1305, 32, size)?,
        cpu_aes: cpu_has("aes"),
        cpu_pclmulqdq: cpu_has("pclmulqdq"),
    })
}

fn cpu_has(feature: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        match feature {
            "aes" => std::arch::is_x86_feature_detected!("aes"),
            "pclmulqdq" => std::arch::is_x86_feature_detected!("pclmulqdq"),
            _ => false,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = feature;
        false
    }
}

/// Best ns per byte over the rounds, sealing `size` bytes in place with a fresh nonce each time
/// (a counter, as QUIC's packet number makes it).
fn ns_per_byte(algorithm: &'static ring::aead::Algorithm, key_len: usize, size: usize) -> Option<f64> {
    let key = LessSafeKey::new(UnboundKey::new(algorithm, &vec![7u8; key_len]).ok()?);
    let mut buffer = vec![0x5au8; size];
    let mut counter: u64 = 0;
    let mut best = f64::INFINITY;
    for _ in 0..ROUNDS {
        let (start, mut seals) = (Instant::now(), 0u64);
        while start.elapsed() < ROUND {
            for _ in 0..64 {
                counter += 1;
                let mut nonce = [0u8; 12];
                nonce[4..].copy_from_slice(&counter.to_be_bytes());
                let tag =
                    key.seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut buffer);
                let _tag = std::hint::black_box(tag.ok()?);
            }
            seals += 64;
        }
        let per_byte = start.elapsed().as_nanos() as f64 / (seals as f64 * size as f64);
        best = best.min(per_byte);
    }
    best.is_finite().then_some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_measure_a_plausible_speed_for_each_cipher() {
        for (alg, key) in [(&AES_128_GCM, 16), (&AES_256_GCM, 32), (&CHACHA20_POLY1305, 32)] {
            let ns = ns_per_byte(alg, key, 1400).expect("seals");
            // Any machine seals 1,400 B in more than 0.01 ns/B and less than 100 ns/B.
            assert!((0.01..100.0).contains(&ns), "{ns}");
        }
    }
}
