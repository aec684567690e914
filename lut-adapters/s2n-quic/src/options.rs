//! The `--opt KEY=VALUE` settings s2n-quic honours (docs/luts.md), parsed once.

use anyhow::{bail, Context, Result};
use nesquic_protocol::options::{CongestionControl, LutOpt};

/// Congestion controllers s2n-quic ships.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cc {
    Cubic,
    Bbr,
}

/// What the options ask for; `None`: s2n-quic's default.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub gso: Option<bool>,
    pub gro: Option<bool>,
    pub rcvbuf: Option<usize>,
    pub sndbuf: Option<usize>,
    pub cc: Option<Cc>,
}

const SUPPORTED: &str = "gso=on|off, gro=on|off, rcvbuf=BYTES, sndbuf=BYTES, cc=cubic|bbr";

impl Options {
    /// Reads `opts` (typed by `nesquic-protocol`); the last value of a key wins.
    pub fn parse(opts: &[LutOpt]) -> Result<Self> {
        let mut o = Options::default();
        for &opt in opts {
            let bytes = |n: u64| usize::try_from(n).with_context(|| format!("{opt}: too large"));
            match opt {
                LutOpt::Gso(on) => o.gso = Some(on),
                LutOpt::Gro(on) => o.gro = Some(on),
                LutOpt::RcvBuf(n) => o.rcvbuf = Some(bytes(n)?),
                LutOpt::SndBuf(n) => o.sndbuf = Some(bytes(n)?),
                LutOpt::Cc(CongestionControl::Cubic) => o.cc = Some(Cc::Cubic),
                LutOpt::Cc(CongestionControl::Bbr) => o.cc = Some(Cc::Bbr),
                LutOpt::Cc(_) => bail!("{opt}: s2n-quic ships cubic and bbr only (no NewReno, BBRv3 or Copa)"),
                LutOpt::Cipher(_) => bail!(
                    "{opt}: s2n-tls picks TLS 1.3 suites through named security policies, and none offers a single suite"
                ),
                _ => bail!("unknown option {opt}; supported: {SUPPORTED}"),
            }
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(texts: &[&str]) -> Result<Options> {
        let texts: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        Options::parse(&LutOpt::parse_all(&texts)?)
    }

    #[test]
    fn known_options_parse_and_others_say_why_not() {
        let o = parse(&["gso=off", "rcvbuf=4000000", "cc=bbr"]).unwrap();
        assert_eq!((o.gso, o.gro, o.rcvbuf, o.cc), (Some(false), None, Some(4_000_000), Some(Cc::Bbr)));
        for (bad, why) in
            [("cc=newreno", "no NewReno"), ("cipher=chacha20", "security policies"), ("ktls=on", "supported")]
        {
            let err = parse(&[bad]).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
        // Unknown keys and bad values are the parser's errors.
        assert!(parse(&["x=1"]).is_err() && parse(&["gso=maybe"]).is_err() && parse(&["rcvbuf=x"]).is_err());
    }
}
