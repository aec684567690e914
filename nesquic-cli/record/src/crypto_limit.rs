//! The machine's own AEAD speed, to hold a stack's timed crypto against: AES-128-GCM,
//! AES-256-GCM and ChaCha20-Poly1305 seals of the stack's mean packet size, measured by Nesquic on the same
//! machine (the engine runs it when a run timed `crypto.seal`), and which CPU instructions the
//! machine has. Also what the run's profile says about the crypto code the LUT ran: hardware
//! (AES-NI/VAES, CLMUL) or software (`aes_nohw`, `vpaes`) entry points.

use serde::{Deserialize, Serialize};

use crate::figures::RepetitionFigures;

/// The machine's seal speed at one size, and its CPU's crypto instructions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CryptoLimit {
    /// Plaintext bytes per seal benchmarked (the stack's mean sealed bytes per call).
    pub packet_bytes: u64,
    /// What sealed: `ring 0.17 (...)`.
    pub library: String,
    /// Best of the rounds, ns per plaintext byte.
    pub aes128gcm_ns_per_byte: f64,
    /// Best of the rounds, ns per plaintext byte.
    pub aes256gcm_ns_per_byte: f64,
    /// Best of the rounds, ns per plaintext byte.
    pub chacha20_ns_per_byte: f64,
    /// The CPU has AES-NI (`aes`).
    pub cpu_aes: bool,
    /// The CPU has carry-less multiplication (`pclmulqdq`), GHASH's instruction.
    pub cpu_pclmulqdq: bool,
}

/// The stack's seal cost of a side over the repetitions: compensated ns per sealed byte and the
/// mean bytes per call; `None` when no timed `crypto.seal` row with bytes was recorded.
pub fn stack_seal(repetitions: &[RepetitionFigures], role: nesquic_protocol::Role) -> Option<(f64, u64)> {
    let (mut ns, mut bytes, mut calls) = (0.0, 0u64, 0u64);
    let rows = repetitions.iter().flat_map(|r| r.probes.iter()).flat_map(|m| &m.roles).filter(|r| r.role == role);
    for f in rows.flat_map(|r| &r.functions).filter(|f| f.category == "crypto.seal" && f.timed && f.bytes > 0) {
        // The probe's own cost taken out where it was calibrated; else the raw time (an upper bound).
        let mean = f.compensated_mean_ns.unwrap_or(f.timing.total_ns as f64 / f.timing.calls.max(1) as f64);
        ns += mean.max(0.0) * f.timing.calls as f64;
        bytes += f.bytes;
        calls += f.timing.calls;
    }
    (bytes > 0 && calls > 0).then(|| (ns / bytes as f64, bytes / calls))
}

/// Which AES code the LUT ran, from the names of its profiled functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AesCode {
    /// Entry points of the hardware instructions only (`aes_hw_`, `aesni_`, `vaes`, `clmul`).
    Hardware,
    /// A software entry point (`aes_nohw_`, `vpaes_`, `gcm_*_nohw`) was sampled.
    Software,
}

/// The AES code seen in a side's sampled functions; `None` when no AES function was sampled.
pub fn aes_code(repetitions: &[RepetitionFigures], role: nesquic_protocol::Role) -> Option<AesCode> {
    let names = repetitions
        .iter()
        .filter_map(|r| r.profile.as_ref())
        .flat_map(|p| &p.roles)
        .filter(|r| r.role == role)
        .flat_map(|r| r.top_functions.iter().chain(&r.unknown_leaves).chain(&r.unclassified_leaves))
        .map(|s| s.name.to_ascii_lowercase());
    let mut seen = None;
    for name in names {
        if ["aes_nohw", "vpaes_", "gcm_init_nohw", "gcm_gmult_nohw", "gcm_ghash_nohw"].iter().any(|p| name.contains(p))
        {
            return Some(AesCode::Software);
        }
        if ["aes_hw_", "aesni_", "_vaes_", "gcm_init_clmul", "gcm_ghash_clmul", "gcm_ghash_avx"]
            .iter()
            .any(|p| name.contains(p))
        {
            seen = Some(AesCode::Hardware);
        }
    }
    seen
}

impl CryptoLimit {
    /// The machine's ns per byte of the suite the run chose (`--cipher`), or of all three when it
    /// chose none (the suite negotiated is not recorded), each with its name.
    pub fn candidates(&self, lut_options: &[String]) -> Vec<(f64, &'static str)> {
        let all = [
            (self.aes128gcm_ns_per_byte, "AES-128-GCM"),
            (self.aes256gcm_ns_per_byte, "AES-256-GCM"),
            (self.chacha20_ns_per_byte, "ChaCha20-Poly1305"),
        ];
        match lut_options.iter().find_map(|o| o.strip_prefix("cipher=")) {
            Some("aes128gcm") => vec![all[0]],
            Some("aes256gcm") => vec![all[1]],
            Some("chacha20") => vec![all[2]],
            _ => all.to_vec(),
        }
    }
}
