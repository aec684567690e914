//! Samples that interrupted a `rep movsb`: glibc's memcpy and memmove copy large buffers with it
//! on CPUs that advertise fast string moves, and some CPUs run it many times slower at a few
//! placements of the destination against the source (docs/findings.md, `rep_movsb_copy`). The
//! function name cannot tell: `__memmove_avx512_unaligned_erms` also holds the vector loops it
//! uses below glibc's threshold. The instruction can: a string instruction is interrupted
//! between iterations with the instruction pointer still on it, so the sample's user leaf is the
//! `rep movsb` itself.

use iced_x86::{Code, Decoder, DecoderOptions};

use super::{blaze::BlazeSymbolizer, ProcessMaps};

impl BlazeSymbolizer {
    /// Whether the instruction at user address `ip` (a sample's user leaf) is a `rep movsb`.
    pub(super) fn is_rep_movsb(&mut self, maps: &ProcessMaps, ip: u64) -> bool {
        let Some((path, offset)) = maps.find(ip) else { return false };
        self.code(path, offset).is_some_and(|bytes| starts_with_rep_movsb(&bytes))
    }
}

/// Whether `bytes` open with a `rep movsb` (with or without other prefixes).
fn starts_with_rep_movsb(bytes: &[u8]) -> bool {
    let instruction = Decoder::new(64, bytes, DecoderOptions::NONE).decode();
    instruction.code() == Code::Movsb_m8_m8 && instruction.has_rep_prefix()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rep_movsb_is_told_from_other_string_moves_and_vector_copies() {
        assert!(starts_with_rep_movsb(&[0xf3, 0xa4, 0xc3]), "rep movsb; ret");
        assert!(!starts_with_rep_movsb(&[0xa4, 0xc3]), "movsb without rep");
        assert!(!starts_with_rep_movsb(&[0xf3, 0x48, 0xa5]), "rep movsq");
        // vmovdqu64 zmm16, [rsi]: the vector loop of the same glibc function.
        assert!(!starts_with_rep_movsb(&[0x62, 0xe1, 0xfe, 0x48, 0x6f, 0x06]));
    }
}
