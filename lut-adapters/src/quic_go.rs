//! quic-go (Go): its own UDP path and Go's crypto/tls, in a Go executable built from
//! `lut-adapters/quic-go/` (go.mod names the version) by `just build` when Go is installed.

use crate::lut::{IoMode, Lut, LutOption, RCVBUF_NATIVE, SNDBUF_NATIVE};

/// quic-go on its own I/O (sendmsg with GSO, recvmmsg), crypto from Go's standard library.
#[derive(Debug, Default)]
pub struct QuicGoLut;

impl Lut for QuicGoLut {
    fn name(&self) -> &'static str {
        "quic-go"
    }
    fn version(&self) -> String {
        env!("NESQUIC_QUIC_GO_VERSION").to_string()
    }
    fn description(&self) -> &'static str {
        "quic-go (Go, crypto/tls) on its own UDP path (GSO, recvmmsg); function probes count only (no timing in Go)"
    }
    fn crypto_backend(&self) -> &'static str {
        "go crypto"
    }
    fn io_modes(&self) -> &'static [IoMode] {
        &[IoMode::Native]
    }
    fn multi_workload_io(&self) -> &'static [IoMode] {
        &[IoMode::Native]
    }
    fn options(&self) -> &'static [LutOption] {
        &[
            LutOption {
                key: "gso",
                values: &["on", "off"],
                meaning: "quic-go's UDP GSO (off: QUIC_GO_DISABLE_GSO=1; default on)",
                io: &[IoMode::Native],
            },
            LutOption {
                meaning: "SO_RCVBUF to request, set after quic-go's own 7 MiB (also --rcvbuf)",
                ..RCVBUF_NATIVE
            },
            LutOption {
                meaning: "SO_SNDBUF to request, set after quic-go's own 7 MiB (also --sndbuf)",
                ..SNDBUF_NATIVE
            },
            LutOption {
                key: "cc",
                values: &["cubic"],
                meaning: "congestion control: quic-go runs only Cubic, nothing else can be chosen (also --cc)",
                io: &[IoMode::Native],
            },
        ]
    }
    fn build_hint(&self) -> &'static str {
        "it is a Go program: `just build` builds it when Go (the version lut-adapters/quic-go/go.mod names, \
         https://go.dev/dl/) is installed, or run lut-adapters/quic-go/build.sh"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_comes_from_go_mod_and_cipher_is_refused() {
        let v = QuicGoLut.version();
        assert!(v.starts_with('v') && v.matches('.').count() == 2, "{v}");
        let err = QuicGoLut.check_options(IoMode::Native, &["cipher=chacha20".into()]).unwrap_err().to_string();
        assert!(err.contains("quic-go") && err.contains("cipher=chacha20"), "{err}");
        assert!(QuicGoLut.check_options(IoMode::Native, &["gso=off".into(), "rcvbuf=1000000".into()]).is_ok());
        let missing = QuicGoLut.binary_path(std::path::Path::new("/nonexistent")).unwrap_err().to_string();
        assert!(missing.contains("go.mod") && missing.contains("build.sh"), "{missing}");
    }
}
