//! The TCP+TLS baseline's descriptor: what QUIC replaces, run through the same protocol.

use crate::lut::{IoMode, Lut, LutOption, BYTES};

/// Kernel TCP with TLS 1.3 from rustls (ring), the TLS configuration quinn uses; the executable
/// is `nesquic-lut-tcp-tls` (`nesquic-lut-bins`).
#[derive(Debug, Default)]
pub struct TcpTlsLut;

impl Lut for TcpTlsLut {
    fn name(&self) -> &'static str {
        "tcp-tls"
    }
    fn version(&self) -> String {
        format!("rustls {}", env!("NESQUIC_RUSTLS_VERSION"))
    }
    fn description(&self) -> &'static str {
        "baseline: kernel TCP + TLS 1.3 (rustls + ring, blocking threads); one connection = one TCP+TLS connection, and M streams = M TCP+TLS connections"
    }
    fn crypto_backend(&self) -> &'static str {
        "ring"
    }
    /// `native` here means kernel TCP: there is no UDP path to swap.
    fn io_modes(&self) -> &'static [IoMode] {
        &[IoMode::Native]
    }
    fn multi_workload_io(&self) -> &'static [IoMode] {
        &[IoMode::Native]
    }
    fn options(&self) -> &'static [LutOption] {
        const NATIVE: &[IoMode] = &[IoMode::Native];
        &[
            LutOption { key: "rcvbuf", values: &[BYTES], meaning: "SO_RCVBUF to request (also --rcvbuf)", io: NATIVE },
            LutOption { key: "sndbuf", values: &[BYTES], meaning: "SO_SNDBUF to request (also --sndbuf)", io: NATIVE },
            LutOption {
                key: "cc",
                values: &["cubic", "newreno", "bbr"],
                meaning: "the kernel's TCP_CONGESTION (newreno = reno; refused if the kernel lacks it; default: the kernel's; also --cc)",
                io: NATIVE,
            },
            LutOption {
                key: "cipher",
                values: &["aes128gcm", "aes256gcm", "chacha20"],
                meaning: "the only TLS 1.3 cipher suite offered; also --cipher",
                io: NATIVE,
            },
            LutOption {
                key: "ktls",
                values: &["on", "off"],
                meaning: "kernel TLS offload: on is refused with the kernel's answer (needs the tls ULP; not implemented)",
                io: NATIVE,
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_tls_is_listed_and_its_version_comes_from_the_lockfile() {
        let lut = crate::find_lut("tcp-tls").expect("listed");
        assert!(lut.version().starts_with("rustls 0.23."), "{}", lut.version());
        assert_eq!(lut.executable_name(), "nesquic-lut-tcp-tls");
        assert!(lut.check_options(IoMode::Native, &["cc=bbr".into(), "rcvbuf=100".into()]).is_ok());
        assert!(lut.check_options(IoMode::Native, &["gso=on".into()]).is_err());
        assert!(lut.check_io(IoMode::Nesquic).is_err());
    }
}
