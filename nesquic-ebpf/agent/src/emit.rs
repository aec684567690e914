//! A minimal x86-64 emitter for the trampolines' own instructions. It knows only the handful of
//! instructions a trampoline uses, always in their long forms (disp32, rel32), so a trampoline's
//! length does not depend on where it lands. Hooks whose displaced instructions must be
//! relocated still go through iced-x86 ([`crate::hook`]); keeping iced-x86 out of the common
//! path spares each LUT process the ~1-3 ms of CPU its decoder and encoder tables take to build.

/// A general-purpose register, by its hardware number (rax 0 ... r15 15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reg(pub u8);

pub const RAX: Reg = Reg(0);
pub const RCX: Reg = Reg(1);
pub const RDX: Reg = Reg(2);
pub const RSI: Reg = Reg(6);
pub const RDI: Reg = Reg(7);
pub const R8: Reg = Reg(8);
pub const R9: Reg = Reg(9);
pub const R11: Reg = Reg(11);

/// A position in the code, bound once with [`Emitter::bind`].
#[derive(Debug, Clone, Copy)]
pub struct Label(usize);

/// Condition codes of `jcc rel32` (`0f 80+cc`).
#[derive(Debug, Clone, Copy)]
pub enum Cond {
    /// Equal / zero.
    Z = 0x4,
    /// Not equal / not zero.
    Nz = 0x5,
}

#[derive(Debug, Clone, Copy)]
enum Target {
    Label(Label),
    Absolute(u64),
}

/// A rel32 field to fill in once the code's address is known.
#[derive(Debug)]
struct Fixup {
    /// Offset of the rel32 field.
    field: usize,
    /// Offset just past the instruction (what the CPU adds the rel32 to).
    next: usize,
    target: Target,
}

/// Collects code with labels; [`Emitter::finish`] places it at an address.
#[derive(Debug, Default)]
pub struct Emitter {
    code: Vec<u8>,
    labels: Vec<Option<usize>>,
    fixups: Vec<Fixup>,
}

impl Emitter {
    pub fn new() -> Emitter {
        Emitter::default()
    }

    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    pub fn bind(&mut self, l: Label) {
        self.labels[l.0] = Some(self.code.len());
    }

    /// Appends bytes as they are (instructions Nesquic found position-independent).
    pub fn bytes(&mut self, b: &[u8]) {
        self.code.extend_from_slice(b);
    }

    fn rex_b(&mut self, r: Reg) {
        if r.0 >= 8 {
            self.code.push(0x41);
        }
    }

    pub fn push(&mut self, r: Reg) {
        self.rex_b(r);
        self.code.push(0x50 + (r.0 & 7));
    }

    pub fn pop(&mut self, r: Reg) {
        self.rex_b(r);
        self.code.push(0x58 + (r.0 & 7));
    }

    /// `mov rax, qword ptr fs:[disp32]`.
    pub fn mov_rax_fs(&mut self, disp: i32) {
        self.code.extend_from_slice(&[0x64, 0x48, 0x8b, 0x04, 0x25]);
        self.code.extend_from_slice(&disp.to_le_bytes());
    }

    /// `test al, imm8`.
    pub fn test_al(&mut self, imm: u8) {
        self.code.extend_from_slice(&[0xa8, imm]);
    }

    /// `cmp rax, imm8` (sign-extended).
    pub fn cmp_rax(&mut self, imm: i8) {
        self.code.extend_from_slice(&[0x48, 0x83, 0xf8, imm as u8]);
    }

    /// `mov r11, imm32` (sign-extended).
    pub fn mov_r11(&mut self, imm: i32) {
        self.code.extend_from_slice(&[0x49, 0xc7, 0xc3]);
        self.code.extend_from_slice(&imm.to_le_bytes());
    }

    /// `mov rcx, qword ptr [rsp + disp32]`.
    pub fn mov_rcx_from_stack(&mut self, disp: i32) {
        self.code.extend_from_slice(&[0x48, 0x8b, 0x8c, 0x24]);
        self.code.extend_from_slice(&disp.to_le_bytes());
    }

    /// `[lock] inc qword ptr [rax + disp32]`.
    pub fn inc_at_rax(&mut self, disp: i32, locked: bool) {
        if locked {
            self.code.push(0xf0);
        }
        self.code.extend_from_slice(&[0x48, 0xff, 0x80]);
        self.code.extend_from_slice(&disp.to_le_bytes());
    }

    /// `[lock] add qword ptr [rax + disp32], r`.
    pub fn add_at_rax(&mut self, disp: i32, r: Reg, locked: bool) {
        if locked {
            self.code.push(0xf0);
        }
        let rex_r = if r.0 >= 8 { 0x04 } else { 0 };
        self.code.extend_from_slice(&[0x48 | rex_r, 0x01, 0x80 | ((r.0 & 7) << 3)]);
        self.code.extend_from_slice(&disp.to_le_bytes());
    }

    fn rel32(&mut self, opcode: &[u8], target: Target) {
        self.code.extend_from_slice(opcode);
        let field = self.code.len();
        self.code.extend_from_slice(&[0; 4]);
        self.fixups.push(Fixup { field, next: self.code.len(), target });
    }

    /// `jcc rel32` to a label.
    pub fn jcc(&mut self, cond: Cond, to: Label) {
        self.rel32(&[0x0f, 0x80 | cond as u8], Target::Label(to));
    }

    /// `jmp rel32` to a label.
    pub fn jmp(&mut self, to: Label) {
        self.rel32(&[0xe9], Target::Label(to));
    }

    /// `jmp rel32` to an absolute address (within ±2 GiB of the code).
    pub fn jmp_to(&mut self, address: u64) {
        self.rel32(&[0xe9], Target::Absolute(address));
    }

    /// `call qword ptr [rip + rel32]`: through the 8-byte address stored at a label.
    pub fn call_through(&mut self, slot: Label) {
        self.rel32(&[0xff, 0x15], Target::Label(slot));
    }

    /// An 8-byte data word.
    pub fn dq(&mut self, value: u64) {
        self.code.extend_from_slice(&value.to_le_bytes());
    }

    /// Bytes emitted so far (the final length: every form is fixed-size).
    pub fn len(&self) -> usize {
        self.code.len()
    }

    /// The code placed at `ip`; `None` when a label was never bound or a target is out of
    /// rel32 reach.
    pub fn finish(mut self, ip: u64) -> Option<Vec<u8>> {
        for f in &self.fixups {
            let target = match f.target {
                Target::Label(l) => ip.wrapping_add(self.labels[l.0]? as u64),
                Target::Absolute(a) => a,
            };
            let rel = i32::try_from(target.wrapping_sub(ip.wrapping_add(f.next as u64)) as i64).ok()?;
            self.code[f.field..f.field + 4].copy_from_slice(&rel.to_le_bytes());
        }
        Some(self.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind, Register};

    fn one(code: &[u8]) -> iced_x86::Instruction {
        let mut d = Decoder::with_ip(64, code, 0x1000, DecoderOptions::NONE);
        let i = d.decode();
        assert_eq!(i.len(), code.len(), "one instruction, all bytes: {code:02x?}");
        i
    }

    #[test]
    fn each_form_decodes_to_the_instruction_it_names() {
        let mut e = Emitter::new();
        e.add_at_rax(0x1234, R9, true);
        let i = one(&e.finish(0x1000).expect("code"));
        assert_eq!((i.mnemonic(), i.has_lock_prefix(), i.op1_register()), (Mnemonic::Add, true, Register::R9));
        assert_eq!((i.memory_base(), i.memory_displacement64()), (Register::RAX, 0x1234));

        let mut e = Emitter::new();
        e.add_at_rax(-8, RDI, false);
        let i = one(&e.finish(0x1000).expect("code"));
        assert_eq!((i.op1_register(), i.memory_displacement64() as i64), (Register::RDI, -8));

        let mut e = Emitter::new();
        e.inc_at_rax(48, false);
        let i = one(&e.finish(0x1000).expect("code"));
        assert_eq!((i.mnemonic(), i.memory_base(), i.memory_displacement64()), (Mnemonic::Inc, Register::RAX, 48));

        let mut e = Emitter::new();
        e.mov_rax_fs(-0x40);
        let i = one(&e.finish(0x1000).expect("code"));
        assert_eq!(
            (i.segment_prefix(), i.memory_base(), i.memory_displacement64() as i64),
            (Register::FS, Register::None, -0x40)
        );

        let mut e = Emitter::new();
        e.mov_rcx_from_stack(24);
        let i = one(&e.finish(0x1000).expect("code"));
        assert_eq!((i.op0_register(), i.memory_base(), i.memory_displacement64()), (Register::RCX, Register::RSP, 24));

        let mut e = Emitter::new();
        e.mov_r11(0x2a0);
        let i = one(&e.finish(0x1000).expect("code"));
        assert_eq!((i.op0_register(), i.immediate64()), (Register::R11, 0x2a0));

        for (r, name) in [(R11, Register::R11), (RCX, Register::RCX), (RAX, Register::RAX)] {
            let mut e = Emitter::new();
            e.push(r);
            let i = one(&e.finish(0x1000).expect("code"));
            assert_eq!((i.mnemonic(), i.op0_register()), (Mnemonic::Push, name));
        }
    }

    #[test]
    fn branches_resolve_to_their_labels_and_addresses() {
        let mut e = Emitter::new();
        let (ahead, data) = (e.label(), e.label());
        e.jcc(Cond::Nz, ahead); // 0x1000, 6 bytes
        e.jmp_to(0x5000); // 0x1006, 5 bytes
        e.bind(ahead); // 0x100b
        e.call_through(data); // 0x100b, 6 bytes
        e.bind(data); // 0x1011
        e.dq(0xdead_beef);
        let code = e.finish(0x1000).expect("code");
        let mut d = Decoder::with_ip(64, &code, 0x1000, DecoderOptions::NONE);
        let jnz = d.decode();
        assert_eq!((jnz.mnemonic(), jnz.near_branch_target()), (Mnemonic::Jne, 0x100b));
        let jmp = d.decode();
        assert_eq!((jmp.mnemonic(), jmp.near_branch_target()), (Mnemonic::Jmp, 0x5000));
        let call = d.decode();
        assert_eq!(
            (call.mnemonic(), call.op0_kind(), call.ip_rel_memory_address()),
            (Mnemonic::Call, OpKind::Memory, 0x1011)
        );
    }

    #[test]
    fn unbound_labels_and_far_targets_are_refused() {
        let mut e = Emitter::new();
        let never = e.label();
        e.jmp(never);
        assert!(e.finish(0x1000).is_none());
        let mut e = Emitter::new();
        e.jmp_to(0x1000 + (3 << 30));
        assert!(e.finish(0x1000).is_none());
    }
}
