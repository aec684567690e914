//! Crypto against the machine's own limit: the stack's timed seal cost per byte (`crypto.seal`
//! timed, its probe cost compensated) against the AEAD seal speed Nesquic measured on the same
//! machine at the same packet size (`RunRecord::crypto_limit`), and AES code without the CPU's
//! AES/CLMUL instructions (the profile's crypto functions against the CPU's flags).

use nesquic_protocol::Role;

use super::{severity, stake, Finding, Rule, Severity, Side, HIGH_SHARE};
use crate::crypto_limit::{aes_code, stack_seal, AesCode};
use crate::run::RunRecord;

/// Far from the limit: the stack's seal costs at least this many times the machine's per byte.
pub const CRYPTO_FAR: f64 = 2.0;
/// At the limit: within this factor of the machine's per byte (and crypto at least
/// [`HIGH_SHARE`] of the side's CPU, else it is not worth a finding).
pub const CRYPTO_NEAR: f64 = 1.25;

/// The stack's seal against the machine's, for `role`.
pub(super) fn versus_machine(record: &RunRecord, role: Role, side: &Side) -> Option<Finding> {
    let limit = record.crypto_limit.as_ref()?;
    let (stack_ns, bytes) = stack_seal(&record.repetitions, role)?;
    // Per byte means something only at the size benchmarked (the bulk sender's packets): an
    // ACK's 20 B seal is all per-call cost.
    if bytes.abs_diff(limit.packet_bytes) * 4 > limit.packet_bytes {
        return None;
    }
    // Far from every suite the run may have used, or near even the fastest: without --cipher
    // the suite negotiated is not recorded.
    let candidates = limit.candidates(&record.lut_options);
    let slowest = candidates.iter().copied().fold((0.0, ""), |a, b| if b.0 > a.0 { b } else { a });
    let fastest = candidates.iter().copied().fold((f64::INFINITY, ""), |a, b| if b.0 < a.0 { b } else { a });
    let far = slowest.0 > 0.0 && stack_ns >= CRYPTO_FAR * slowest.0;
    let share = side.crypto_share();
    // At the limit is a finding only where another suite is faster here: else nothing to try.
    let faster = faster_suite(record, limit);
    let near = fastest.0 > 0.0
        && stack_ns <= CRYPTO_NEAR * fastest.0
        && share.is_some_and(|s| s >= HIGH_SHARE)
        && faster.is_some();
    if !far && !near {
        return None;
    }
    let (machine_ns, suite) = if far { slowest } else { fastest };
    let ratio = stack_ns / machine_ns;
    let seen = format!(
        "the {role} seals {stack_ns:.3} ns per byte ({bytes} B per call, timed); this machine's {suite} seals \
         {machine_ns:.3} ns per byte at that size ({}): {ratio:.1}x",
        limit.library
    );
    let chacha_vs_aes = format!(
        "here AES-128-GCM {:.3}, AES-256-GCM {:.3}, ChaCha20-Poly1305 {:.3} ns per byte",
        limit.aes128gcm_ns_per_byte, limit.aes256gcm_ns_per_byte, limit.chacha20_ns_per_byte
    );
    let (why, try_this) = if far {
        (
            format!(
                "the seal path costs more than the cipher: per-call setup, copies, small or split buffers around the \
                 AEAD, or a build without the CPU's instructions. {}",
                stake(share, "crypto", role)
            ),
            format!(
                "{} (and compare crypto.seal ns per packet: --probe crypto.seal:time,io)",
                super::ab_of_source(record)
            ),
        )
    } else {
        (
            format!(
                "the stack already seals at this machine's speed for its suite; another suite is faster here \
                 ({chacha_vs_aes}). {}",
                stake(share, "crypto", role)
            ),
            faster.unwrap_or_default(),
        )
    };
    Some(Finding {
        rule: Rule::CryptoVsMachine,
        role,
        severity: if far { severity(share) } else { Severity::Low },
        seen,
        why,
        try_this,
        cpu_share_at_stake: share,
    })
}

/// AES code without the CPU's instructions in the side's profile.
pub(super) fn without_aes_ni(record: &RunRecord, role: Role, side: &Side) -> Option<Finding> {
    let limit = record.crypto_limit.as_ref()?;
    if !(limit.cpu_aes && limit.cpu_pclmulqdq) || aes_code(&record.repetitions, role) != Some(AesCode::Software) {
        return None;
    }
    let share = side.crypto_share();
    Some(Finding {
        rule: Rule::CryptoNoAesNi,
        role,
        severity: severity(share),
        seen: format!(
            "the profile samples software AES code (aes_nohw/vpaes/gcm_*_nohw) while this CPU has AES-NI and \
             PCLMULQDQ; this machine's AES-128-GCM with them seals {:.3} ns per byte",
            limit.aes128gcm_ns_per_byte
        ),
        why: format!(
            "the crypto library was built or configured without its hardware path (a generic target, a disabled \
             assembly build, or its CPU detection off): software AES is several times slower and not constant-time \
             friendly. {}",
            stake(share, "crypto", role)
        ),
        try_this: format!(
            "{} (build the crypto library with its assembly and CPU detection)",
            super::ab_of_source(record)
        ),
        cpu_share_at_stake: share,
    })
}

/// `nesquic ab` from the suite the run chose (`--cipher`) to this machine's fastest, when that
/// seals at least [`CRYPTO_NEAR`] times faster.
fn faster_suite(record: &RunRecord, limit: &crate::crypto_limit::CryptoLimit) -> Option<String> {
    let used = record.lut_options.iter().find_map(|o| o.strip_prefix("cipher="))?;
    let options = [
        ("aes128gcm", limit.aes128gcm_ns_per_byte),
        ("aes256gcm", limit.aes256gcm_ns_per_byte),
        ("chacha20", limit.chacha20_ns_per_byte),
    ];
    let (_, used_ns) = options.into_iter().find(|(name, _)| *name == used)?;
    let (fastest, fastest_ns) = options.into_iter().fold(("", f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
    (fastest_ns * CRYPTO_NEAR <= used_ns).then(|| {
        format!(
            "nesquic ab --lut {} --base-opt cipher={used} --head-opt cipher={fastest} {}",
            record.lut.name,
            super::experiment_probes(record)
        )
    })
}
