//! Site analysis before launch, on the object file's bytes: can a function's entry take a
//! 5-byte `jmp rel32` safely? Refused functions fall back to the kernel uprobe, with one short
//! reason: no symbol size, too short for the jump, a branch inside the function that lands in
//! the displaced bytes, or a displaced instruction that cannot be relocated.

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Decoder, DecoderOptions, FlowControl, Instruction, InstructionBlock, OpKind,
};

use nesquic_agent_abi::EXPECTED_LEN;

/// Bytes of the jump written at the site.
pub const JMP_LEN: usize = 5;
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
/// Where relocation is tried: trampolines land within a few MiB of the function in practice;
/// 256 MiB either side is a margin that still fails for far RIP-relative operands.
const TRIAL_DISTANCE: u64 = 256 << 20;

/// A site that can be hooked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSite {
    /// Bytes from the function's start to the site (4 after `endbr64`, else 0).
    pub skip: u64,
    /// Bytes the jump displaces (whole instructions).
    pub displaced: u32,
    /// The site's first bytes in the file (up to [`EXPECTED_LEN`]), compared before patching.
    pub expected: Vec<u8>,
    /// No displaced instruction depends on its address: the agent copies them as they are
    /// (no decoder in the LUT process, whose tables cost ~1-3 ms of its CPU to build).
    pub position_independent: bool,
}

/// Analyses a function whose code (its whole symbol, `code.len()` = symbol size) starts at
/// virtual address `address`.
pub fn analyse(code: &[u8], address: u64) -> Result<HookSite, String> {
    if code.is_empty() {
        return Err("no symbol size".into());
    }
    // Keep `endbr64` in place: indirect calls must still land on it.
    let skip = if code.starts_with(&ENDBR64) { ENDBR64.len() } else { 0 };
    let site = address + skip as u64;
    let body = &code[skip..];
    if body.len() < JMP_LEN {
        return Err(format!("too short for the 5-byte jump ({} bytes)", body.len()));
    }
    let displaced = displaced_instructions(body, site)?;
    let len: usize = displaced.iter().map(Instruction::len).sum();
    if len > body.len() {
        return Err(format!("too short for the 5-byte jump ({} bytes)", body.len()));
    }
    if let Some((from, to)) = branch_into(code, address, site, len) {
        return Err(format!("a branch at +{:#x} targets the patched bytes (+{:#x})", from - address, to - address));
    }
    for ip in [site.wrapping_sub(TRIAL_DISTANCE), site.wrapping_add(TRIAL_DISTANCE)] {
        if let Err(e) = BlockEncoder::encode(64, InstructionBlock::new(&displaced, ip), BlockEncoderOptions::NONE) {
            return Err(format!("a displaced instruction cannot be relocated ({e})"));
        }
    }
    let expected = body[..body.len().min(EXPECTED_LEN)].to_vec();
    let position_independent = displaced.iter().all(is_position_independent);
    Ok(HookSite { skip: skip as u64, displaced: len as u32, expected, position_independent })
}

/// Runs the same from any address: no RIP-relative memory operand, no relative branch target.
fn is_position_independent(i: &Instruction) -> bool {
    let relative = |k: OpKind| {
        matches!(
            k,
            OpKind::NearBranch16
                | OpKind::NearBranch32
                | OpKind::NearBranch64
                | OpKind::FarBranch16
                | OpKind::FarBranch32
        )
    };
    !i.is_ip_rel_memory_operand() && !(0..i.op_count()).any(|n| relative(i.op_kind(n)))
}

fn displaced_instructions(body: &[u8], site: u64) -> Result<Vec<Instruction>, String> {
    let mut decoder = Decoder::with_ip(64, body, site, DecoderOptions::NONE);
    let (mut out, mut len) = (Vec::new(), 0);
    while len < JMP_LEN {
        if !decoder.can_decode() {
            return Err(format!("too short for the 5-byte jump ({} bytes)", body.len()));
        }
        let i = decoder.decode();
        if i.is_invalid() {
            return Err(format!("undecodable instruction at +{:#x}", len));
        }
        len += i.len();
        out.push(i);
    }
    Ok(out)
}

/// The first direct branch in the function that lands strictly inside the displaced bytes
/// (the entry itself is fine: it runs through the hook): (branch address, target).
fn branch_into(code: &[u8], address: u64, site: u64, displaced: usize) -> Option<(u64, u64)> {
    let inside = |t: u64| t > site && t < site + displaced as u64;
    let mut decoder = Decoder::with_ip(64, code, address, DecoderOptions::NONE);
    while decoder.can_decode() {
        let i = decoder.decode();
        let direct = matches!(
            i.flow_control(),
            FlowControl::ConditionalBranch
                | FlowControl::UnconditionalBranch
                | FlowControl::Call
                | FlowControl::XbeginXabortXend
        );
        if direct && !i.is_invalid() {
            let target = i.near_branch_target();
            if target != 0 && inside(target) {
                return Some((i.ip(), target));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_prologue_is_hookable() {
        // push rbp; mov rbp, rsp; sub rsp, 0x10; ...; ret
        let code = [0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0xc9, 0xc3];
        let s = analyse(&code, 0x1000).expect("hookable");
        assert_eq!((s.skip, s.displaced), (0, 8));
        assert_eq!(s.expected, code.to_vec());
    }

    #[test]
    fn address_dependent_prologues_are_marked_for_relocation() {
        // push rbp; mov rbp, rsp; sub rsp, 0x10: copied as they are.
        let plain = [0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0xc9, 0xc3];
        assert!(analyse(&plain, 0x1000).expect("hookable").position_independent);
        // mov rax, [rip+0x100] (7 bytes): the displacement must be rewritten.
        let rip_relative = [0x48, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0xc3];
        let s = analyse(&rip_relative, 0x1000).expect("hookable");
        assert_eq!(s.displaced, 7);
        assert!(!s.position_independent);
        // test edi, edi; je +0x20 (rel32, out of the function's displaced bytes): a branch.
        let mut branch = vec![0x85, 0xff, 0x0f, 0x84, 0x20, 0x00, 0x00, 0x00];
        branch.resize(0x40, 0xc3);
        let s = analyse(&branch, 0x1000).expect("hookable");
        assert_eq!(s.displaced, 8);
        assert!(!s.position_independent);
    }

    #[test]
    fn endbr64_stays_and_the_site_follows_it() {
        let code = [0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3];
        let s = analyse(&code, 0x1000).expect("hookable");
        assert_eq!((s.skip, s.displaced), (4, 5));
        assert_eq!(s.expected[0], 0x55);
    }

    #[test]
    fn refusals_say_why() {
        assert_eq!(analyse(&[], 0x1000), Err("no symbol size".into()));
        assert!(analyse(&[0x31, 0xc0, 0xc3], 0x1000).unwrap_err().contains("too short"));
        // 0: xor eax,eax (2) ; 2: inc eax (2) ; 4: cmp eax, 9 (3) ; 7: jne 2 (2) ; 9: ret
        let loop_back = [0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x09, 0x75, 0xf9, 0xc3];
        let e = analyse(&loop_back, 0x1000).unwrap_err();
        assert!(e.contains("branch at +0x7"), "{e}");
    }
}
