//! s2n-quic (AWS, Rust): its own tokio platform I/O and s2n-tls over aws-lc, in an executable
//! built from `lut-adapters/s2n-quic/` (its own cargo workspace, Cargo.lock names the version).

use crate::lut::{IoMode, Lut, LutOption, RCVBUF_NATIVE, SNDBUF_NATIVE};

/// s2n-quic on its own I/O (sendmmsg with GSO, recvmmsg with GRO), crypto from aws-lc.
#[derive(Debug, Default)]
pub struct S2nQuicLut;

const NATIVE: &[IoMode] = &[IoMode::Native];

impl Lut for S2nQuicLut {
    fn name(&self) -> &'static str {
        "s2n-quic"
    }
    fn version(&self) -> String {
        env!("NESQUIC_S2N_QUIC_VERSION").to_string()
    }
    fn description(&self) -> &'static str {
        "s2n-quic (Rust, s2n-tls + aws-lc) on its own tokio I/O (GSO, GRO, sendmmsg/recvmmsg); no qlog"
    }
    fn crypto_backend(&self) -> &'static str {
        "aws-lc (s2n-quic-crypto, s2n-tls)"
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
                meaning: "s2n-quic's UDP GSO (default on, up to 10 datagrams per send)",
                io: NATIVE,
            },
            LutOption {
                key: "gro",
                values: &["on", "off"],
                meaning: "s2n-quic's UDP GRO (default on where the kernel has it)",
                io: NATIVE,
            },
            LutOption { io: NATIVE, ..RCVBUF_NATIVE },
            LutOption { io: NATIVE, ..SNDBUF_NATIVE },
            LutOption {
                key: "cc",
                values: &["cubic", "bbr"],
                meaning: "congestion control (default cubic; s2n-quic has no NewReno; also --cc)",
                io: NATIVE,
            },
        ]
    }
    fn build_hint(&self) -> &'static str {
        "it is its own cargo workspace (aws-lc and s2n-tls built from source, Rust >= 1.95): `just build` builds it, \
         or `cargo build --release --manifest-path lut-adapters/s2n-quic/Cargo.toml --target-dir target`"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_comes_from_its_lock_file_and_unsupported_options_are_refused() {
        let v = S2nQuicLut.version();
        assert!(v.starts_with("1.") && v.matches('.').count() == 2, "{v}");
        for refused in ["cipher=chacha20", "cc=newreno", "mmsg=off"] {
            let err = S2nQuicLut.check_options(IoMode::Native, &[refused.into()]).unwrap_err().to_string();
            assert!(err.contains("s2n-quic") && err.contains(refused), "{err}");
        }
        assert!(S2nQuicLut
            .check_options(IoMode::Native, &["gso=off".into(), "gro=off".into(), "cc=bbr".into()])
            .is_ok());
        let missing = S2nQuicLut.binary_path(std::path::Path::new("/nonexistent")).unwrap_err().to_string();
        assert!(missing.contains("lut-adapters/s2n-quic/Cargo.toml"), "{missing}");
    }
}
