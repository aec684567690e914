//! Where exactly a uprobe goes, and what it will cost.
//!
//! A uprobe replaces the probed instruction with a breakpoint; on a hit the kernel must then
//! execute the original instruction. A few it emulates (NOPs, `push`), the rest it single-steps
//! out of line, which costs an extra trap: ~10 us per hit on this project's VM against ~1 us when
//! emulated. Functions built with CET start with `endbr64`, a marker with no effect on registers
//! or the stack: probing the instruction after it keeps entry semantics (arguments, return
//! address) and often lands on an emulated `push`.

use serde::{Deserialize, Serialize};

pub use nesquic_model::sites::SiteKind;

/// The chosen probe site of one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeSite {
    /// Bytes after the function's first instruction (4 when skipping `endbr64`, else 0).
    pub skip: u64,
    /// What the kernel does with the instruction there.
    pub kind: SiteKind,
}

const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];

/// Chooses the site for a function whose code starts with `code` (at least a few bytes).
pub fn choose(code: &[u8]) -> ProbeSite {
    if code.starts_with(&ENDBR64) {
        let after = classify(&code[ENDBR64.len()..]);
        // Skipping the marker never changes what the function sees; do it whenever the next
        // instruction is at least as cheap (endbr64 itself is single-stepped).
        return ProbeSite { skip: ENDBR64.len() as u64, kind: after };
    }
    ProbeSite { skip: 0, kind: classify(code) }
}

/// Classifies the instruction at the start of `code` (x86-64).
pub fn classify(code: &[u8]) -> SiteKind {
    match code {
        // push r64 (50+r), with a REX.B prefix for r8-r15.
        [0x50..=0x57, ..] | [0x41, 0x50..=0x57, ..] => SiteKind::Push,
        // nop (90), and the multi-byte NOP family 0f 1f /0.
        [0x90, ..] | [0x66, 0x90, ..] | [0x0f, 0x1f, ..] | [0x66, 0x0f, 0x1f, ..] => SiteKind::Nop,
        _ => SiteKind::SingleStep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endbr64_is_skipped_and_the_next_instruction_decides() {
        assert_eq!(choose(&[0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48]), ProbeSite { skip: 4, kind: SiteKind::Push });
        assert_eq!(choose(&[0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 0x08]).kind, SiteKind::SingleStep);
    }

    #[test]
    fn pushes_nops_and_the_rest() {
        assert_eq!(choose(&[0x55]), ProbeSite { skip: 0, kind: SiteKind::Push });
        assert_eq!(classify(&[0x41, 0x57]), SiteKind::Push);
        assert_eq!(classify(&[0x0f, 0x1f, 0x44, 0x00, 0x00]), SiteKind::Nop);
        assert_eq!(classify(&[0x48, 0x83, 0xec, 0x28]), SiteKind::SingleStep); // sub rsp, 0x28
        assert_eq!(classify(&[0x48, 0x89, 0xf8]), SiteKind::SingleStep); // mov rax, rdi
        assert_eq!(classify(&[]), SiteKind::SingleStep);
    }
}
