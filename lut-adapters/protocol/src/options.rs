//! The LUT settings (`--opt KEY=VALUE` on a LUT's command line, `--lut-opt` on nesquic's), typed:
//! one [`LutOpt`] a setting. On the wire each stays `KEY=VALUE` ([`LutOpt`]'s `Display` and
//! `FromStr` are the two directions), so adapters in other languages read the same text
//! (docs/protocol.md). Which LUT accepts which setting is the LUT's descriptor's business, not
//! this module's.

use std::fmt;
use std::str::FromStr;

/// A value from a fixed list of names (what follows `=`).
pub trait Choice: Copy + PartialEq + 'static {
    /// Every value with its name, in the order help lists them.
    const ALL: &'static [(Self, &'static str)];

    /// The name on the command line.
    fn name(self) -> &'static str {
        Self::ALL.iter().find(|(v, _)| *v == self).map_or("?", |(_, n)| n)
    }

    /// All names, `a|b|c`.
    fn names() -> String {
        Self::ALL.iter().map(|(_, n)| *n).collect::<Vec<_>>().join("|")
    }

    /// The value of `name`, if it is one.
    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(v, _)| *v)
    }
}

/// Congestion controllers some LUT offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CongestionControl {
    /// CUBIC (RFC 9438).
    Cubic,
    /// NewReno / Reno (RFC 9002's).
    NewReno,
    /// BBR (the library's version of it).
    Bbr,
    /// BBRv3 (tquic).
    Bbr3,
    /// Copa (tquic).
    Copa,
}

impl Choice for CongestionControl {
    const ALL: &'static [(Self, &'static str)] = &[
        (Self::Cubic, "cubic"),
        (Self::NewReno, "newreno"),
        (Self::Bbr, "bbr"),
        (Self::Bbr3, "bbr3"),
        (Self::Copa, "copa"),
    ];
}

/// The TLS 1.3 cipher suite a LUT offers alone (Initial packets stay AES-128-GCM, RFC 9001).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cipher {
    /// TLS_AES_128_GCM_SHA256.
    Aes128Gcm,
    /// TLS_AES_256_GCM_SHA384.
    Aes256Gcm,
    /// TLS_CHACHA20_POLY1305_SHA256.
    Chacha20,
}

impl Choice for Cipher {
    const ALL: &'static [(Self, &'static str)] =
        &[(Self::Aes128Gcm, "aes128gcm"), (Self::Aes256Gcm, "aes256gcm"), (Self::Chacha20, "chacha20")];
}

/// MsQuic's execution profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    /// `QUIC_EXECUTION_PROFILE_TYPE_MAX_THROUGHPUT` (the default here).
    MaxThroughput,
    /// `QUIC_EXECUTION_PROFILE_LOW_LATENCY`.
    LowLatency,
}

impl Choice for Profile {
    const ALL: &'static [(Self, &'static str)] =
        &[(Self::MaxThroughput, "max-throughput"), (Self::LowLatency, "low-latency")];
}

/// One LUT setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LutOpt {
    /// UDP segmentation offload (`gso=on|off`).
    Gso(bool),
    /// UDP receive offload (`gro=on|off`).
    Gro(bool),
    /// sendmmsg/recvmmsg batching (`mmsg=on|off`).
    Mmsg(bool),
    /// Pacing (`pacing=on|off`).
    Pacing(bool),
    /// Kernel TLS offload (`ktls=on|off`).
    Ktls(bool),
    /// SO_RCVBUF to request, bytes (`rcvbuf=BYTES`).
    RcvBuf(u64),
    /// SO_SNDBUF to request, bytes (`sndbuf=BYTES`).
    SndBuf(u64),
    /// Congestion control (`cc=...`).
    Cc(CongestionControl),
    /// The only TLS 1.3 cipher suite offered (`cipher=...`).
    Cipher(Cipher),
    /// MsQuic's execution profile (`profile=...`).
    Profile(Profile),
}

/// Which setting a [`LutOpt`] is, without its value: its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OptionKind {
    /// `gso`.
    Gso,
    /// `gro`.
    Gro,
    /// `mmsg`.
    Mmsg,
    /// `pacing`.
    Pacing,
    /// `ktls`.
    Ktls,
    /// `rcvbuf`.
    RcvBuf,
    /// `sndbuf`.
    SndBuf,
    /// `cc`.
    Cc,
    /// `cipher`.
    Cipher,
    /// `profile`.
    Profile,
}

impl Choice for OptionKind {
    const ALL: &'static [(Self, &'static str)] = &[
        (Self::Gso, "gso"),
        (Self::Gro, "gro"),
        (Self::Mmsg, "mmsg"),
        (Self::Pacing, "pacing"),
        (Self::Ktls, "ktls"),
        (Self::RcvBuf, "rcvbuf"),
        (Self::SndBuf, "sndbuf"),
        (Self::Cc, "cc"),
        (Self::Cipher, "cipher"),
        (Self::Profile, "profile"),
    ];
}

impl OptionKind {
    /// The key on the command line.
    pub fn key(self) -> &'static str {
        self.name()
    }

    /// Every value the key can take, as help shows it (`on|off`, `BYTES`, `cubic|bbr|...`).
    pub fn values(self) -> String {
        match self {
            Self::Gso | Self::Gro | Self::Mmsg | Self::Pacing | Self::Ktls => "on|off".into(),
            Self::RcvBuf | Self::SndBuf => "BYTES".into(),
            Self::Cc => CongestionControl::names(),
            Self::Cipher => Cipher::names(),
            Self::Profile => Profile::names(),
        }
    }

    /// The setting `key=value`.
    pub fn with_value(self, value: &str) -> Result<LutOpt, OptionError> {
        let bad = || OptionError::BadValue { kind: self, value: value.to_string() };
        let switch = || match value {
            "on" => Ok(true),
            "off" => Ok(false),
            _ => Err(bad()),
        };
        let bytes = || value.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(bad);
        Ok(match self {
            Self::Gso => LutOpt::Gso(switch()?),
            Self::Gro => LutOpt::Gro(switch()?),
            Self::Mmsg => LutOpt::Mmsg(switch()?),
            Self::Pacing => LutOpt::Pacing(switch()?),
            Self::Ktls => LutOpt::Ktls(switch()?),
            Self::RcvBuf => LutOpt::RcvBuf(bytes()?),
            Self::SndBuf => LutOpt::SndBuf(bytes()?),
            Self::Cc => LutOpt::Cc(CongestionControl::from_name(value).ok_or_else(bad)?),
            Self::Cipher => LutOpt::Cipher(Cipher::from_name(value).ok_or_else(bad)?),
            Self::Profile => LutOpt::Profile(Profile::from_name(value).ok_or_else(bad)?),
        })
    }
}

impl LutOpt {
    /// Which setting this is.
    pub fn kind(self) -> OptionKind {
        match self {
            Self::Gso(_) => OptionKind::Gso,
            Self::Gro(_) => OptionKind::Gro,
            Self::Mmsg(_) => OptionKind::Mmsg,
            Self::Pacing(_) => OptionKind::Pacing,
            Self::Ktls(_) => OptionKind::Ktls,
            Self::RcvBuf(_) => OptionKind::RcvBuf,
            Self::SndBuf(_) => OptionKind::SndBuf,
            Self::Cc(_) => OptionKind::Cc,
            Self::Cipher(_) => OptionKind::Cipher,
            Self::Profile(_) => OptionKind::Profile,
        }
    }

    /// The value as written after `=`.
    pub fn value(self) -> String {
        let switch = |on: bool| if on { "on" } else { "off" }.to_string();
        match self {
            Self::Gso(on) | Self::Gro(on) | Self::Mmsg(on) | Self::Pacing(on) | Self::Ktls(on) => switch(on),
            Self::RcvBuf(n) | Self::SndBuf(n) => n.to_string(),
            Self::Cc(cc) => cc.name().into(),
            Self::Cipher(c) => c.name().into(),
            Self::Profile(p) => p.name().into(),
        }
    }

    /// Parses every `KEY=VALUE` of `texts` (an adapter's `--opt` list).
    pub fn parse_all(texts: &[String]) -> Result<Vec<LutOpt>, OptionError> {
        texts.iter().map(|t| t.parse()).collect()
    }
}

impl fmt::Display for LutOpt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.kind().key(), self.value())
    }
}

impl FromStr for LutOpt {
    type Err = OptionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (key, value) = text.split_once('=').ok_or_else(|| OptionError::NotKeyValue(text.to_string()))?;
        OptionKind::from_name(key).ok_or_else(|| OptionError::UnknownKey(text.to_string()))?.with_value(value)
    }
}

// summary.json and the record keep the text form (`"cc=bbr"`), so files written before the
// settings were typed load as they are.
impl serde::Serialize for LutOpt {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for LutOpt {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Text that is not a setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    /// No `=`.
    #[error("{0:?} is not KEY=VALUE")]
    NotKeyValue(String),
    /// A key no LUT has.
    #[error("unknown option {0:?}")]
    UnknownKey(String),
    /// A value the key cannot take.
    #[error("{}={value}: expected {}", kind.key(), kind.values())]
    BadValue {
        /// The key.
        kind: OptionKind,
        /// What was given.
        value: String,
    },
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_value_of_every_kind_round_trips_through_its_text() {
        let mut seen = 0;
        for (kind, key) in OptionKind::ALL {
            let values = kind.values();
            let samples: Vec<&str> = if values == "BYTES" { vec!["1", "4194304"] } else { values.split('|').collect() };
            for value in samples {
                let text = format!("{key}={value}");
                let opt: LutOpt = text.parse().unwrap();
                assert_eq!((opt.kind(), opt.to_string()), (*kind, text.clone()));
                let json = serde_json::to_string(&opt).unwrap();
                assert_eq!(json, format!("\"{text}\""));
                assert_eq!(serde_json::from_str::<LutOpt>(&json).unwrap(), opt);
                seen += 1;
            }
        }
        // 5 switches x 2, 2 buffers x 2 samples, 5 + 3 + 2 names.
        assert_eq!(seen, 24);
    }

    #[test]
    fn bad_text_says_what_is_wrong() {
        let err = |t: &str| t.parse::<LutOpt>().unwrap_err().to_string();
        assert_eq!(err("gso"), "\"gso\" is not KEY=VALUE");
        assert_eq!(err("foo=1"), "unknown option \"foo=1\"");
        assert_eq!(err("cc=vegas"), "cc=vegas: expected cubic|newreno|bbr|bbr3|copa");
        assert_eq!(err("gso=yes"), "gso=yes: expected on|off");
        assert_eq!(err("rcvbuf=0"), "rcvbuf=0: expected BYTES");
        assert!(serde_json::from_str::<LutOpt>("\"cipher=rot13\"").is_err());
    }
}
