//! What a finding is (`findings` holds the rules that make them): a type of its own below the
//! run record, which carries the findings, and the rules, which read the record.

use nesquic_protocol::Role;
use serde::{Deserialize, Serialize};

/// Which rule fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The bulk sender's GSO batches are far below what the socket and the 64 KB limit allow.
    GsoBatchCapped,
    /// The bulk sender does not segment at all: one kernel send path per datagram.
    GsoOff,
    /// The bulk receiver gets about one datagram per receive although its peer sends batches.
    GroIneffective,
    /// Many receive calls found nothing (EAGAIN): the stack polls an empty socket.
    BusyPolling,
    /// The receiver sends more ACK-carrying datagrams than RFC 9000's default (one per two).
    AckHeavy,
    /// The kernel dropped datagrams at the side's full receive buffer.
    RcvbufDrops,
    /// GSO is off and the kernel's packet path takes a large share of the sender's CPU: its
    /// time per datagram is what GSO would divide.
    KernelPerDatagram,
    /// On an emulated link, the stack declared packets lost (and cut its window) that reached
    /// the peer: reordering or delay taken for congestion.
    MisreadLoss,
    /// The stack's timed seal against the AEAD speed Nesquic measured on the same machine:
    /// far from it (overhead around the cipher) or at it (only fewer bytes or a faster suite help).
    CryptoVsMachine,
    /// The profile shows software AES code although the CPU has AES-NI and PCLMULQDQ.
    CryptoNoAesNi,
    /// A side's time is in glibc's `rep movsb` copy on a machine where Nesquic measured that
    /// copy far slower at some placements of the destination against the source.
    RepMovsbCopy,
    /// Why goodput is what it is: the link's rate, a side whose busiest thread never blocked
    /// (its own cost per packet, or a CPU shared with other tasks), or what evidence is missing
    /// to name one. One per run.
    BindingConstraint,
}

impl Rule {
    /// Every rule, in the order they are checked and listed.
    pub const ALL: [Rule; 12] = [
        Rule::BindingConstraint,
        Rule::GsoBatchCapped,
        Rule::GsoOff,
        Rule::GroIneffective,
        Rule::BusyPolling,
        Rule::AckHeavy,
        Rule::RcvbufDrops,
        Rule::KernelPerDatagram,
        Rule::MisreadLoss,
        Rule::CryptoVsMachine,
        Rule::CryptoNoAesNi,
        Rule::RepMovsbCopy,
    ];
}

/// How much is at stake, from the measured share of the side's CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing; little CPU at stake, or no profile to say how much.
    Low,
    /// A noticeable share of the side's CPU is in the path the finding is about.
    Medium,
    /// A large share (>= 20%) of the side's CPU is in that path.
    High,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The rule.
    pub rule: Rule,
    /// The side it is about.
    pub role: Role,
    /// How much is at stake.
    pub severity: Severity,
    /// What was seen, with the numbers.
    pub seen: String,
    /// Why it costs, and the likely cause in the stack.
    pub why: String,
    /// The command line that tests the remedy.
    pub try_this: String,
    /// The measured share of the side's CPU in the path concerned (sampling profile), if one
    /// was taken: what the severity rests on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_share_at_stake: Option<f64>,
}
