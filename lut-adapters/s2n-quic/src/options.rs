//! The `--opt KEY=VALUE` settings s2n-quic honours (docs/luts.md), parsed once.

use anyhow::{bail, Context, Result};

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
    pub fn parse(opts: &[String]) -> Result<Self> {
        let mut o = Options::default();
        for opt in opts {
            let (key, value) = opt.split_once('=').with_context(|| format!("option {opt:?} is not KEY=VALUE"))?;
            let on_off = || match value {
                "on" => Ok(true),
                "off" => Ok(false),
                _ => bail!("{opt}: on or off expected"),
            };
            let bytes = || value.parse::<usize>().with_context(|| format!("{opt}: bytes expected"));
            match key {
                "gso" => o.gso = Some(on_off()?),
                "gro" => o.gro = Some(on_off()?),
                "rcvbuf" => o.rcvbuf = Some(bytes()?),
                "sndbuf" => o.sndbuf = Some(bytes()?),
                "cc" => {
                    o.cc = Some(match value {
                        "cubic" => Cc::Cubic,
                        "bbr" => Cc::Bbr,
                        _ => bail!("{opt}: s2n-quic ships cubic and bbr (no NewReno)"),
                    })
                }
                "cipher" => bail!(
                    "{opt}: s2n-tls picks TLS 1.3 suites through named security policies, and none offers a single suite"
                ),
                _ => bail!("unknown option {opt:?}; supported: {SUPPORTED}"),
            }
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn known_options_parse_and_others_say_why_not() {
        let o = Options::parse(&["gso=off".into(), "rcvbuf=4000000".into(), "cc=bbr".into()]).unwrap();
        assert_eq!((o.gso, o.gro, o.rcvbuf, o.cc), (Some(false), None, Some(4_000_000), Some(Cc::Bbr)));
        for (bad, why) in [("cc=newreno", "no NewReno"), ("cipher=chacha20", "security policies"), ("x=1", "supported")]
        {
            let err = Options::parse(&[bad.into()]).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
