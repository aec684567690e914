//! `--opt KEY=VALUE` settings of the TCP+TLS LUT, checked against what this kernel offers.

use anyhow::{bail, Context, Result};
use nesquic_protocol::options::{Choice, Cipher, CongestionControl, LutOpt};

/// Where the kernel lists the congestion controls a socket may ask for.
const AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
/// Where the kernel lists its upper-layer protocols (kTLS is the `tls` one).
const AVAILABLE_ULP: &str = "/proc/sys/net/ipv4/tcp_available_ulp";

/// The settings, parsed and checked.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// SO_RCVBUF to request.
    pub rcvbuf: Option<usize>,
    /// SO_SNDBUF to request.
    pub sndbuf: Option<usize>,
    /// The kernel's name of the congestion control to set (TCP_CONGESTION).
    pub cc: Option<String>,
    /// The only TLS 1.3 cipher suite offered.
    pub cipher: Option<Cipher>,
}

impl Options {
    /// Parses `opts` (typed by `nesquic-protocol`); the last value of a key wins.
    pub fn parse(opts: &[String]) -> Result<Self> {
        let mut o = Options::default();
        for opt in LutOpt::parse_all(opts)? {
            let bytes = |n: u64| usize::try_from(n).with_context(|| format!("{opt}: too large"));
            match opt {
                LutOpt::RcvBuf(n) => o.rcvbuf = Some(bytes(n)?),
                LutOpt::SndBuf(n) => o.sndbuf = Some(bytes(n)?),
                LutOpt::Cc(cc) => o.cc = Some(kernel_cc(cc)?),
                LutOpt::Cipher(c) => o.cipher = Some(c),
                LutOpt::Ktls(false) => {}
                LutOpt::Ktls(true) => bail!("ktls=on: {}", ktls_unavailable()),
                _ => bail!(
                    "unknown option {opt}; supported: rcvbuf=BYTES, sndbuf=BYTES, cc=cubic|newreno|bbr, cipher=aes128gcm|aes256gcm|chacha20, ktls=on|off"
                ),
            }
        }
        Ok(o)
    }
}

/// The kernel's module name for a congestion control, refused when this kernel does not offer it.
fn kernel_cc(cc: CongestionControl) -> Result<String> {
    let name = match cc {
        CongestionControl::Cubic => "cubic",
        CongestionControl::NewReno => "reno",
        CongestionControl::Bbr => "bbr",
        other => bail!("cc={}: cubic, newreno (the kernel's reno) or bbr", other.name()),
    };
    let available = std::fs::read_to_string(AVAILABLE_CC).with_context(|| format!("read {AVAILABLE_CC}"))?;
    if !available.split_whitespace().any(|k| k == name) {
        bail!(
            "cc={}: this kernel offers no {name} congestion control ({AVAILABLE_CC}: {})",
            cc.name(),
            available.trim()
        );
    }
    Ok(name.to_string())
}

/// Why kTLS cannot be used here, as measured: the `tls` upper-layer protocol is asked for on a
/// fresh TCP socket (the kernel looks it up, loading its module if it can, before checking the
/// socket's state).
fn ktls_unavailable() -> String {
    let listed = std::fs::read_to_string(AVAILABLE_ULP).map(|s| s.trim().to_string()).unwrap_or_default();
    match socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, Some(socket2::Protocol::TCP)) {
        Err(e) => format!("cannot open a TCP socket to ask for the tls ULP: {e}"),
        Ok(s) => match crate::socket::set_ulp(&s, "tls") {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                format!("kernel has no tls ULP: setsockopt(TCP_ULP, \"tls\") -> ENOENT ({AVAILABLE_ULP}: {listed})")
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
                "the kernel has the tls ULP, but this LUT does not hand rustls' keys to it (kTLS is not implemented)"
                    .into()
            }
            Err(e) => format!("setsockopt(TCP_ULP, \"tls\") -> {e}"),
            Ok(()) => {
                "the kernel accepted the tls ULP on an unconnected socket (unexpected); kTLS is not implemented".into()
            }
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn options_parse_and_bad_ones_are_refused() {
        let o = Options::parse(&["rcvbuf=1000".into(), "cc=newreno".into(), "cipher=chacha20".into()]).unwrap();
        assert_eq!((o.rcvbuf, o.cc.as_deref(), o.cipher), (Some(1000), Some("reno"), Some(Cipher::Chacha20)));
        assert!(Options::parse(&["gso=on".into()]).unwrap_err().to_string().contains("unknown option gso=on"));
        assert!(Options::parse(&["cc=copa".into()]).unwrap_err().to_string().contains("cubic, newreno"));
        assert!(Options::parse(&["cc=vegas".into()]).is_err());
        assert!(Options::parse(&["rcvbuf=x".into()]).is_err());
    }

    #[test]
    fn ktls_is_refused_with_the_kernels_answer() {
        let err = Options::parse(&["ktls=on".into()]).unwrap_err().to_string();
        assert!(err.starts_with("ktls=on: ") && err.contains("tls ULP"), "{err}");
    }
}
