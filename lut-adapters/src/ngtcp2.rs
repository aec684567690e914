//! ngtcp2 (C, sans-IO) with GnuTLS, from Debian's packages, driven by a C adapter with its own
//! event loop (`lut-adapters/ngtcp2/`, built with the system compiler by `build.sh`).

use crate::lut::{IoMode, Lut, LutOption, RCVBUF_NATIVE, SNDBUF_NATIVE};

/// ngtcp2 + GnuTLS over the adapter's own `sendmsg` (UDP GSO) / `recvmsg` (UDP GRO) loop.
#[derive(Debug, Default)]
pub struct Ngtcp2Lut;

const NATIVE: &[IoMode] = &[IoMode::Native];

impl Lut for Ngtcp2Lut {
    fn name(&self) -> &'static str {
        "ngtcp2"
    }
    fn version(&self) -> String {
        env!("NESQUIC_NGTCP2_VERSION").to_string()
    }
    fn description(&self) -> &'static str {
        "ngtcp2 (C, GnuTLS; Debian packages) on the adapter's own poll loop: sendmsg with UDP GSO, recvmsg with UDP GRO"
    }
    fn crypto_backend(&self) -> &'static str {
        "gnutls (nettle)"
    }
    fn io_modes(&self) -> &'static [IoMode] {
        NATIVE
    }
    fn multi_workload_io(&self) -> &'static [IoMode] {
        NATIVE
    }
    fn options(&self) -> &'static [LutOption] {
        &[
            LutOption {
                key: "gso",
                values: &["on", "off"],
                meaning: "UDP GSO in the adapter's send loop (ngtcp2 writes packets of one size back to back; default on)",
                io: NATIVE,
            },
            LutOption {
                key: "gro",
                values: &["on", "off"],
                meaning: "UDP GRO in the adapter's receive loop (several datagrams per recvmsg; default on)",
                io: NATIVE,
            },
            LutOption { io: NATIVE, ..RCVBUF_NATIVE },
            LutOption { io: NATIVE, ..SNDBUF_NATIVE },
            LutOption {
                key: "cc",
                values: &["newreno", "cubic", "bbr"],
                meaning: "congestion control: ngtcp2's Reno, Cubic (default) or BBR (also --cc)",
                io: NATIVE,
            },
            LutOption {
                key: "cipher",
                values: &["aes128gcm", "aes256gcm", "chacha20"],
                meaning: "the only TLS 1.3 cipher suite offered, as a GnuTLS priority (Initial packets stay AES-128-GCM); also --cipher",
                io: NATIVE,
            },
        ]
    }
    fn build_hint(&self) -> &'static str {
        "it is a C program: `just build` builds it when Debian's libngtcp2-dev, libngtcp2-crypto-gnutls-dev and \
         libgnutls28-dev are installed (scripts/setup.sh installs them), or run lut-adapters/ngtcp2/build.sh"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked_and_a_missing_build_names_the_packages() {
        let err = Ngtcp2Lut.check_options(IoMode::Native, &["pacing=off".into()]).unwrap_err().to_string();
        assert!(err.contains("ngtcp2") && err.contains("pacing=off"), "{err}");
        assert!(Ngtcp2Lut
            .check_options(IoMode::Native, &["gso=off".into(), "gro=off".into(), "cc=bbr".into()])
            .is_ok());
        let missing = Ngtcp2Lut.binary_path(std::path::Path::new("/nonexistent")).unwrap_err().to_string();
        assert!(missing.contains("libngtcp2-dev") && missing.contains("build.sh"), "{missing}");
    }
}
