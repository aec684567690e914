//! aioquic (Python): pure-Python QUIC on asyncio's datagram transport, its crypto in the
//! `cryptography` wheel's library (bundled OpenSSL), run from a venv that
//! `lut-adapters/aioquic/build.sh` creates (requirements.txt pins the versions).

use crate::lut::{IoMode, Lut, LutOption, RCVBUF_NATIVE, SNDBUF_NATIVE};

/// aioquic on asyncio (one `sendto`/`recvfrom` per datagram), crypto from `cryptography`.
#[derive(Debug, Default)]
pub struct AioquicLut;

const NATIVE: &[IoMode] = &[IoMode::Native];

impl Lut for AioquicLut {
    fn name(&self) -> &'static str {
        "aioquic"
    }
    fn version(&self) -> String {
        env!("NESQUIC_AIOQUIC_VERSION").to_string()
    }
    fn description(&self) -> &'static str {
        "aioquic (Python, asyncio: one sendto/recvfrom per datagram, no GSO/GRO); crypto: the cryptography wheel's OpenSSL"
    }
    fn crypto_backend(&self) -> &'static str {
        "openssl (cryptography wheel)"
    }
    fn io_modes(&self) -> &'static [IoMode] {
        NATIVE
    }
    fn multi_workload_io(&self) -> &'static [IoMode] {
        NATIVE
    }
    fn options(&self) -> &'static [LutOption] {
        &[
            LutOption { io: NATIVE, ..RCVBUF_NATIVE },
            LutOption { io: NATIVE, ..SNDBUF_NATIVE },
            LutOption {
                key: "cc",
                values: &["newreno", "cubic"],
                meaning: "congestion control: aioquic's Reno (its default) or Cubic; it has no BBR (also --cc)",
                io: NATIVE,
            },
            LutOption {
                key: "cipher",
                values: &["aes128gcm", "aes256gcm", "chacha20"],
                meaning: "the only TLS 1.3 cipher suite offered (Initial packets stay AES-128-GCM); also --cipher",
                io: NATIVE,
            },
        ]
    }
    fn build_hint(&self) -> &'static str {
        "it is a Python program: `just build` creates its venv from PyPI when python3 (>= 3.10, with venv) is \
         installed (scripts/setup.sh installs python3-venv), or run lut-adapters/aioquic/build.sh"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_comes_from_requirements_and_gso_is_refused() {
        let v = AioquicLut.version();
        assert!(v.starts_with("1.") && v.matches('.').count() == 2, "{v}");
        let err = AioquicLut.check_options(IoMode::Native, &["gso=off".into()]).unwrap_err().to_string();
        assert!(err.contains("aioquic") && err.contains("gso=off"), "{err}");
        assert!(AioquicLut.check_options(IoMode::Native, &["cc=cubic".into(), "cipher=chacha20".into()]).is_ok());
        assert!(AioquicLut.check_options(IoMode::Native, &["cc=bbr".into()]).is_err());
        let missing = AioquicLut.binary_path(std::path::Path::new("/nonexistent")).unwrap_err().to_string();
        assert!(missing.contains("python3") && missing.contains("build.sh"), "{missing}");
    }
}
