//! The caller of a frameless leaf. The kernel walks user stacks by frame pointer: from the
//! sampled `rbp` it reads (saved `rbp`, return address) pairs. A leaf that never pushes a frame
//! (glibc's memcpy variants, syscall wrappers: hand-written assembly) leaves `rbp` pointing at
//! its caller's frame, so the walk's second entry is the caller's *caller*: a memcpy called by a
//! seal lands under the seal's caller. Such a leaf keeps its own return address at `[rsp]`,
//! which the sampler records; it is inserted when the leaf's code says it has no frame and the
//! word is a return address (it follows a call instruction).

use std::os::unix::fs::FileExt;
use std::path::Path;

use iced_x86::{Code, Decoder, DecoderOptions, FlowControl, Mnemonic, Register};

use super::{blaze::BlazeSymbolizer, ProcessMaps};

/// Bytes read at a function's start (enough for `endbr64; push rbp`) and before a return
/// address (the longest call encoding, `ff 94 24 disp32` with a prefix, is 8).
pub(super) const CODE_BYTES: usize = 8;

impl BlazeSymbolizer {
    /// The return address to insert after the leaf of `user` (innermost first), if the leaf
    /// had no frame when sampled and `sp_word` (the word at its stack pointer) is a return
    /// address the walk does not already hold.
    pub(super) fn frameless_caller(&mut self, maps: &ProcessMaps, user: &[u64], sp_word: u64) -> Option<u64> {
        let (&leaf, rest) = user.split_first()?;
        if sp_word == 0 || rest.first() == Some(&sp_word) {
            return None;
        }
        let function = self.function_at(maps, leaf).ok()?;
        let path = function.path?;
        let start = self.code(&path, function.start_offset)?;
        if !has_no_frame_at(&start, function.ip_offset - function.start_offset) {
            return None;
        }
        let ret = self.function_at(maps, sp_word).ok()?;
        let ret_path = ret.path?;
        let before = self.code(&ret_path, ret.ip_offset.checked_sub(CODE_BYTES as u64)?)?;
        ends_with_call(&before).then_some(sp_word)
    }

    /// `CODE_BYTES` bytes of `path` at `offset`, cached.
    pub(super) fn code(&mut self, path: &Path, offset: u64) -> Option<[u8; CODE_BYTES]> {
        *self.code.entry((path.to_path_buf(), offset)).or_insert_with(|| {
            let mut buf = [0u8; CODE_BYTES];
            std::fs::File::open(path).ok()?.read_exact_at(&mut buf, offset).ok()?;
            Some(buf)
        })
    }
}

/// Whether a function whose code starts with `start`, sampled `ip_offset` bytes in, had not set
/// up a frame: it does not open with `[endbr64;] push rbp`, or the sample is before that push.
fn has_no_frame_at(start: &[u8; CODE_BYTES], ip_offset: u64) -> bool {
    let mut decoder = Decoder::new(64, start, DecoderOptions::NONE);
    let mut first = decoder.decode();
    if first.code() == Code::Endbr64 {
        if ip_offset <= decoder.position() as u64 {
            return true;
        }
        first = decoder.decode();
    }
    let pushes_rbp = first.mnemonic() == Mnemonic::Push && first.op0_register() == Register::RBP;
    let push_offset = (decoder.position() - first.len()) as u64;
    !pushes_rbp || ip_offset <= push_offset
}

/// Whether `before` (the bytes just before an address) ends with a call instruction, i.e. the
/// address is a return address.
fn ends_with_call(before: &[u8; CODE_BYTES]) -> bool {
    (2..=CODE_BYTES).any(|len| {
        let tail = &before[CODE_BYTES - len..];
        let mut decoder = Decoder::new(64, tail, DecoderOptions::NONE);
        let instruction = decoder.decode();
        !instruction.is_invalid()
            && instruction.len() == len
            && matches!(instruction.flow_control(), FlowControl::Call | FlowControl::IndirectCall)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(b: &[u8]) -> [u8; CODE_BYTES] {
        let mut out = [0x90; CODE_BYTES];
        out[..b.len()].copy_from_slice(b);
        out
    }

    #[test]
    fn a_function_that_pushes_rbp_has_a_frame_after_the_push() {
        // endbr64; push rbp; mov rbp, rsp
        let framed = bytes(&[0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5]);
        assert!(has_no_frame_at(&framed, 0), "at entry the frame is not there yet");
        assert!(has_no_frame_at(&framed, 4), "nor before the push");
        assert!(!has_no_frame_at(&framed, 5));
        assert!(!has_no_frame_at(&framed, 200));
        let plain = bytes(&[0x55, 0x48, 0x89, 0xe5]);
        assert!(has_no_frame_at(&plain, 0));
        assert!(!has_no_frame_at(&plain, 1));
    }

    #[test]
    fn glibc_style_assembly_has_no_frame() {
        // __memmove_avx_unaligned_erms: endbr64; mov rax, rdi; cmp rdx, 0x20
        let memmove = bytes(&[0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x89, 0xf8, 0x48]);
        assert!(has_no_frame_at(&memmove, 40));
        // A syscall wrapper: mov eax, 0x2e; syscall
        assert!(has_no_frame_at(&bytes(&[0xb8, 0x2e, 0, 0, 0, 0x0f, 0x05]), 7));
    }

    #[test]
    fn return_addresses_follow_a_call() {
        let tail = |t: &[u8]| {
            let mut out = [0x90; CODE_BYTES];
            out[CODE_BYTES - t.len()..].copy_from_slice(t);
            out
        };
        assert!(ends_with_call(&tail(&[0xe8, 1, 2, 3, 4])), "call rel32");
        assert!(ends_with_call(&tail(&[0xff, 0x15, 1, 2, 3, 4])), "call [rip+disp32] (through the GOT)");
        assert!(ends_with_call(&tail(&[0x41, 0xff, 0xd3])), "call r11");
        assert!(ends_with_call(&tail(&[0xff, 0x50, 0x18])), "call [rax+0x18] (a vtable)");
        assert!(!ends_with_call(&tail(&[0x48, 0x89, 0xe5])), "mov rbp, rsp");
        assert!(!ends_with_call(&[0x90; CODE_BYTES]));
        // Stack data is rarely code, but a saved value that lands after an ordinary
        // instruction is refused.
        assert!(!ends_with_call(&tail(&[0x48, 0x83, 0xc4, 0x08])), "add rsp, 8");
    }
}
