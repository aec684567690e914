//! How the kernel executes the instruction under a uprobe, which decides the probe's cost: a few
//! instructions it emulates, the rest it single-steps out of line (an extra trap per hit).
//! Choosing the site from a function's code is `nesquic-ebpf`'s (`sites::choose`).

use serde::{Deserialize, Serialize};

/// How the kernel executes the instruction under the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SiteKind {
    /// `push reg`: emulated.
    Push,
    /// A multi-byte NOP: emulated.
    Nop,
    /// Anything else: single-stepped out of line (an extra trap per hit).
    SingleStep,
}

impl SiteKind {
    /// Short label for listings.
    pub fn label(self) -> &'static str {
        match self {
            SiteKind::Push => "push (emulated)",
            SiteKind::Nop => "nop (emulated)",
            SiteKind::SingleStep => "single-stepped",
        }
    }
}
