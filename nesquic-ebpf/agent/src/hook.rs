//! Inline hooks: check the bytes, move the instructions a 5-byte `jmp rel32` displaces into a
//! trampoline near the function, then patch the entry. Nesquic marks the sites whose displaced
//! instructions run the same anywhere; those are copied as they are around code from
//! [`crate::emit`]. Only the others (RIP-relative operands, branches) wake iced-x86, whose
//! encoder rewrites them, at a cost of ~1-3 ms of the process's CPU to build its tables. All
//! patching happens with no other thread running the target: in the constructor, or right after
//! `dlopen` mapped the object.
//!
//! Count-mode trampolines add to the slot of the thread's own shard ([`crate::shard`]) with a
//! plain `inc`/`add` inline (no call, no stack switch; `lock` only on the shared overflow shard);
//! time-mode ones call [`crate::timing`]'s entry stub with the slot's offset in a shard.

use std::sync::Mutex;

use iced_x86::code_asm::{al, qword_ptr, r11, r8, r9, rax, rcx, rdi, rdx, rsi, rsp, AsmRegister64, CodeAssembler};
use iced_x86::{BlockEncoderOptions, Decoder, DecoderOptions, IcedError, Instruction};

use crate::abi::{self, slot_status, PlanTarget, MODE_COUNT, MODE_TIME};
use crate::emit::{self, Cond, Emitter};
use crate::near::Pools;
use crate::objects::{self, Loaded};
use crate::{counters, shard, timing};

pub mod dlopen;

/// Bytes of the `jmp rel32` written at the site.
const JMP_LEN: usize = 5;
/// Room left for the trampoline to grow between sizing and placement (relocated branches may
/// need a longer form at the final address).
const SLACK: usize = 64;
/// SysV integer argument registers, in order.
const ARG_REGS: [AsmRegister64; 6] = [rdi, rsi, rdx, rcx, r8, r9];
/// The same registers for [`emit`].
const EMIT_ARG_REGS: [emit::Reg; 6] = [emit::RDI, emit::RSI, emit::RDX, emit::RCX, emit::R8, emit::R9];

struct HookState {
    pools: Pools,
    /// Targets whose object is not loaded yet (hooked when a `dlopen` maps it).
    pending: Vec<PlanTarget>,
}

static STATE: Mutex<HookState> = Mutex::new(HookState { pools: Pools::new(), pending: Vec::new() });

fn state() -> std::sync::MutexGuard<'static, HookState> {
    // A panic while patching is impossible to recover from sensibly; keep using the state.
    STATE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Hooks every target whose object is loaded; remembers the others for `dlopen`.
pub fn apply_plan(targets: Vec<PlanTarget>) {
    let mut st = state();
    let objects = objects::loaded();
    for t in targets {
        if !is_valid(&t) {
            counters::set_slot_status(t.slot as usize, slot_status::BAD_TARGET);
            continue;
        }
        match objects.iter().find(|o| o.path == abi::path_bytes(&t.object)) {
            Some(o) => counters::set_slot_status(t.slot as usize, hook_one(&mut st.pools, &t, o)),
            None => {
                counters::set_slot_status(t.slot as usize, slot_status::OBJECT_NOT_LOADED);
                st.pending.push(t);
            }
        }
    }
    st.pools.seal();
    dlopen::set_pending(!st.pending.is_empty());
}

/// After a `dlopen`: hooks the pending targets whose object is now loaded. Returns how many.
pub fn apply_pending() -> usize {
    let mut st = state();
    if st.pending.is_empty() {
        return 0;
    }
    let objects = objects::loaded();
    let (ready, waiting): (Vec<PlanTarget>, Vec<PlanTarget>) = std::mem::take(&mut st.pending)
        .into_iter()
        .partition(|t| objects.iter().any(|o| o.path == abi::path_bytes(&t.object)));
    st.pending = waiting;
    if !ready.is_empty() {
        for t in &ready {
            if let Some(o) = objects.iter().find(|o| o.path == abi::path_bytes(&t.object)) {
                counters::set_slot_status(t.slot as usize, hook_one(&mut st.pools, t, o));
            }
        }
        st.pools.seal();
        counters::health(|h| &mut h.dlopen_hooked);
    }
    dlopen::set_pending(!st.pending.is_empty());
    ready.len()
}

fn is_valid(t: &PlanTarget) -> bool {
    (t.slot as usize) < abi::MAX_SLOTS
        && (t.mode == MODE_COUNT || t.mode == MODE_TIME)
        && t.bytes_arg <= 8
        && (JMP_LEN as u32..=abi::EXPECTED_LEN as u32).contains(&t.displaced)
        && (t.displaced..=abi::EXPECTED_LEN as u32).contains(&t.expected_len)
        && u64::from(t.displaced) <= t.size
}

/// Hooks one target in a loaded object; returns its slot status.
fn hook_one(pools: &mut Pools, t: &PlanTarget, o: &Loaded) -> u32 {
    if !o.holds_code(t.site_vaddr, u64::from(t.expected_len)) {
        return slot_status::BAD_TARGET;
    }
    let site = o.bias.wrapping_add(t.site_vaddr);
    // SAFETY: the range lies inside an executable PT_LOAD segment of a loaded object, so it is
    // mapped and readable.
    let mem = unsafe { std::slice::from_raw_parts(site as *const u8, t.expected_len as usize) };
    if mem != &t.expected[..t.expected_len as usize] {
        return slot_status::BYTES_MISMATCH;
    }
    if counters::get().is_null() {
        return slot_status::BAD_TARGET;
    }
    let back = site + u64::from(t.displaced);
    let tls = shard::tls_offset();
    let placed = if t.flags & abi::target_flags::POSITION_INDEPENDENT != 0 {
        place_verbatim(pools, t, &mem[..t.displaced as usize], back, tls, site)
    } else {
        place_relocated(pools, t, mem, back, tls, site)
    };
    let at = match placed {
        Ok(at) => at,
        Err(status) => return status,
    };
    match patch_site(site, at, t.displaced as usize) {
        true => slot_status::PATCHED,
        false => slot_status::MPROTECT_FAILED,
    }
}

/// The common case: the displaced instructions run the same anywhere (Nesquic checked), so the
/// trampoline is emitted around a verbatim copy of them, without iced-x86. Returns its address.
fn place_verbatim(
    pools: &mut Pools,
    t: &PlanTarget,
    displaced: &[u8],
    back: u64,
    tls: i64,
    site: u64,
) -> Result<u64, u32> {
    let tls = i32::try_from(tls).map_err(|_| slot_status::RELOCATION_FAILED)?;
    let e = emit_trampoline(t, displaced, back, tls);
    let at = pools.reserve_near(site, e.len()).ok_or(slot_status::NO_NEAR_MEMORY)?;
    let code = e.finish(at).ok_or(slot_status::RELOCATION_FAILED)?;
    // SAFETY: [at, at + code.len()) was reserved in a writable pool for this trampoline alone.
    unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), at as *mut u8, code.len()) };
    Ok(at)
}

/// Displaced instructions that depend on their address (RIP-relative operands, branches):
/// iced-x86 decodes them and its block encoder rewrites them for the trampoline's address.
fn place_relocated(pools: &mut Pools, t: &PlanTarget, mem: &[u8], back: u64, tls: i64, site: u64) -> Result<u64, u32> {
    let displaced = decode_displaced(mem, site).ok_or(slot_status::RELOCATION_FAILED)?;
    if displaced.iter().map(Instruction::len).sum::<usize>() != t.displaced as usize {
        return Err(slot_status::RELOCATION_FAILED);
    }
    let sized = trampoline(t, &displaced, back, tls, site).map_err(|_| slot_status::RELOCATION_FAILED)?;
    let room = sized.len() + SLACK;
    let at = pools.reserve_near(site, room).ok_or(slot_status::NO_NEAR_MEMORY)?;
    let code = trampoline(t, &displaced, back, tls, at).map_err(|_| slot_status::RELOCATION_FAILED)?;
    if code.len() > room {
        return Err(slot_status::RELOCATION_FAILED);
    }
    // SAFETY: [at, at + room) was reserved in a writable pool for this trampoline alone.
    unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), at as *mut u8, code.len()) };
    Ok(at)
}

/// The trampoline of [`trampoline`], instruction for instruction, around displaced bytes copied
/// as they are (long forms throughout: its length is final before it is placed).
fn emit_trampoline(t: &PlanTarget, displaced: &[u8], back: u64, tls: i32) -> Emitter {
    let mut e = Emitter::new();
    let (claim_stub, enter_stub, slow, owned, done, locked) =
        (e.label(), e.label(), e.label(), e.label(), e.label(), e.label());
    let slot = shard::slot_offset(t.slot as usize);
    let count_calls = t.mode != MODE_TIME;
    let counting = count_calls || t.bytes_arg != 0;
    let adds = |e: &mut Emitter, locked: bool| {
        let at = if locked { slot - 1 } else { slot };
        if count_calls {
            e.inc_at_rax(at + abi::stats_offset::CALLS, locked);
        }
        let bytes = at + abi::stats_offset::BYTES;
        match t.bytes_arg {
            n @ 1..=6 => e.add_at_rax(bytes, EMIT_ARG_REGS[n as usize - 1], locked),
            n @ 7..=8 => {
                e.push(emit::RCX);
                e.mov_rcx_from_stack(16 + 8 * (n as i32 - 6));
                e.add_at_rax(bytes, emit::RCX, locked);
                e.pop(emit::RCX);
            }
            _ => {}
        }
    };
    if counting {
        e.push(emit::RAX);
        e.mov_rax_fs(tls);
        e.test_al(1);
        e.jcc(Cond::Nz, slow);
        e.bind(owned);
        adds(&mut e, false);
        e.bind(done);
        e.pop(emit::RAX);
    }
    if t.mode == MODE_TIME {
        e.push(emit::R11);
        e.mov_r11(slot);
        e.call_through(enter_stub);
        e.pop(emit::R11);
    }
    e.bytes(displaced);
    e.jmp_to(back);
    if counting {
        e.bind(slow);
        e.cmp_rax(shard::UNCLAIMED as i8);
        e.jcc(Cond::Nz, locked);
        e.call_through(claim_stub);
        e.test_al(1);
        e.jcc(Cond::Z, owned);
        e.bind(locked);
        adds(&mut e, true);
        e.jmp(done);
        e.bind(claim_stub);
        e.dq(shard::claim_stub());
    }
    if t.mode == MODE_TIME {
        e.bind(enter_stub);
        e.dq(timing::enter_stub());
    }
    e
}

/// The whole instructions covering the first [`JMP_LEN`] bytes.
fn decode_displaced(mem: &[u8], site: u64) -> Option<Vec<Instruction>> {
    let mut decoder = Decoder::with_ip(64, mem, site, DecoderOptions::NONE);
    let (mut out, mut len) = (Vec::new(), 0);
    while len < JMP_LEN {
        if !decoder.can_decode() {
            return None;
        }
        let i = decoder.decode();
        if i.is_invalid() {
            return None;
        }
        len += i.len();
        out.push(i);
    }
    Some(out)
}

/// Assembles a trampoline at `ip`: the probe's work, then the relocated instructions and a jump
/// back behind the patch. `tls` is `nq_shard`'s offset from the thread pointer
/// ([`shard::tls_offset`]).
fn trampoline(t: &PlanTarget, displaced: &[Instruction], back: u64, tls: i64, ip: u64) -> Result<Vec<u8>, IcedError> {
    let mut a = CodeAssembler::new(64)?;
    let mut enter_stub = a.create_label();
    let mut claim_stub = a.create_label();
    let mut slow = a.create_label();
    let mut owned = a.create_label();
    let mut done = a.create_label();
    let slot = shard::slot_offset(t.slot as usize);
    // Flags are dead at a function's entry; rax is saved (no argument lives in it except
    // the vector count of varargs calls).
    let count_calls = t.mode != MODE_TIME;
    let counting = count_calls || t.bytes_arg != 0;
    // The adds into the slot at `rax + slot` (`rax + slot - 1` on the shared overflow shard,
    // whose TLS value carries bit 0).
    let adds = |a: &mut CodeAssembler, locked: bool| -> Result<(), IcedError> {
        let at = if locked { slot - 1 } else { slot };
        if count_calls {
            let calls = qword_ptr(rax + (at + abi::stats_offset::CALLS));
            if locked {
                a.lock().inc(calls)?;
            } else {
                a.inc(calls)?;
            }
        }
        let bytes = qword_ptr(rax + (at + abi::stats_offset::BYTES));
        match t.bytes_arg {
            n @ 1..=6 => {
                let r = ARG_REGS[n as usize - 1];
                if locked {
                    a.lock().add(bytes, r)?;
                } else {
                    a.add(bytes, r)?;
                }
            }
            n @ 7..=8 => {
                // At entry [rsp+8] is argument 7; two pushes later it is [rsp+24].
                a.push(rcx)?;
                a.mov(rcx, qword_ptr(rsp + (16 + 8 * (n as i32 - 6))))?;
                if locked {
                    a.lock().add(bytes, rcx)?;
                } else {
                    a.add(bytes, rcx)?;
                }
                a.pop(rcx)?;
            }
            _ => {}
        }
        Ok(())
    };
    if counting {
        // This thread's shard: plain adds when it owns it (bit 0 clear), the common case.
        a.push(rax)?;
        a.mov(rax, qword_ptr(tls).fs())?;
        a.test(al, 1)?;
        a.jnz(slow)?;
        a.set_label(&mut owned)?;
        adds(&mut a, false)?;
        a.set_label(&mut done)?;
        a.pop(rax)?;
    }
    if t.mode == MODE_TIME {
        // Time mode counts bytes at entry (above) and the call at return (in the stub). The stub
        // is entered with a `call` so its `ret` back here is predicted; r11 (free at a SysV entry,
        // preserved anyway) carries the slot's offset inside a shard.
        a.push(r11)?;
        a.mov(r11, i64::from(slot))?;
        a.call(qword_ptr(enter_stub))?;
        a.pop(r11)?;
    }
    for i in displaced {
        a.add_instruction(*i)?;
    }
    a.jmp(back)?;
    if counting {
        // Unclaimed (1): claim a shard, then go on; shared overflow shard: `lock` adds.
        let mut locked = a.create_label();
        a.set_label(&mut slow)?;
        a.cmp(rax, shard::UNCLAIMED as i32)?;
        a.jne(locked)?;
        a.call(qword_ptr(claim_stub))?;
        a.test(al, 1)?;
        a.jz(owned)?;
        a.set_label(&mut locked)?;
        adds(&mut a, true)?;
        a.jmp(done)?;
        a.set_label(&mut claim_stub)?;
        a.dq(&[shard::claim_stub()])?;
    }
    if t.mode == MODE_TIME {
        a.set_label(&mut enter_stub)?;
        a.dq(&[timing::enter_stub()])?;
    }
    Ok(a.assemble_options(ip, BlockEncoderOptions::NONE)?.inner.code_buffer)
}

/// Writes `jmp trampoline` over the site (the rest of the displaced bytes become `int3`: nothing
/// jumps there, Nesquic checked every branch in the function).
fn patch_site(site: u64, trampoline: u64, displaced: usize) -> bool {
    let Ok(rel) = i32::try_from(trampoline as i64 - (site as i64 + JMP_LEN as i64)) else { return false };
    let mut bytes = [0xccu8; abi::EXPECTED_LEN];
    bytes[0] = 0xe9;
    bytes[1..JMP_LEN].copy_from_slice(&rel.to_le_bytes());
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    let start = site & !(page - 1);
    let len = (site + displaced as u64).div_ceil(page) * page - start;
    // SAFETY: [start, start + len) covers the site's pages, which are mapped code of a loaded
    // object; the write stays inside the displaced bytes; protection goes back to r-x.
    unsafe {
        let prot = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
        if libc::mprotect(start as *mut libc::c_void, len as usize, prot) != 0 {
            return false;
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), site as *mut u8, displaced);
        libc::mprotect(start as *mut libc::c_void, len as usize, libc::PROT_READ | libc::PROT_EXEC);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::OpKind;

    const SITE: u64 = 0x40_1000;
    const AT: u64 = 0x40_9000;
    /// push rbp; mov rbp, rsp; sub rsp, 0x10 (8 position-independent bytes).
    const PROLOGUE: [u8; 8] = [0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10];

    fn target(mode: u32, bytes_arg: u32) -> PlanTarget {
        let mut expected = [0u8; abi::EXPECTED_LEN];
        expected[..PROLOGUE.len()].copy_from_slice(&PROLOGUE);
        PlanTarget {
            object: [0; abi::PATH_LEN],
            site_vaddr: SITE,
            size: 64,
            displaced: PROLOGUE.len() as u32,
            expected_len: PROLOGUE.len() as u32,
            expected,
            slot: 3,
            mode,
            bytes_arg,
            flags: abi::target_flags::POSITION_INDEPENDENT,
        }
    }

    /// The trampoline's instructions up to its data words, with branch targets as instruction
    /// indices ("back" for the jump behind the patch) and RIP-relative operands as offsets into
    /// the data: equal for two trampolines that do the same thing with different encodings.
    fn normalised(code: &[u8], back: u64) -> Vec<String> {
        let mut d = Decoder::with_ip(64, code, AT, DecoderOptions::NONE);
        let mut listing = Vec::new();
        let mut data = u64::MAX;
        while d.can_decode() && d.ip() < data {
            let i = d.decode();
            assert!(!i.is_invalid(), "invalid instruction at {:#x}", i.ip());
            if i.is_ip_rel_memory_operand() {
                data = data.min(i.ip_rel_memory_address());
            }
            listing.push(i);
        }
        let index = |ip: u64| listing.iter().position(|i| i.ip() == ip);
        listing
            .iter()
            .map(|i| {
                let ops: Vec<String> = (0..i.op_count())
                    .map(|n| match i.op_kind(n) {
                        OpKind::Register => format!("{:?}", i.op_register(n)),
                        OpKind::NearBranch64 if i.near_branch_target() == back => "back".into(),
                        OpKind::NearBranch64 => format!("->{:?}", index(i.near_branch_target())),
                        OpKind::Memory if i.is_ip_rel_memory_operand() => {
                            format!("data+{}", i.ip_rel_memory_address() - data)
                        }
                        OpKind::Memory => format!(
                            "{:?}:[{:?}+{:?}+{}]",
                            i.segment_prefix(),
                            i.memory_base(),
                            i.memory_index(),
                            i.memory_displacement64() as i64
                        ),
                        _ => format!("imm {}", i.immediate(n) as i64),
                    })
                    .collect();
                format!("{}{:?} {}", if i.has_lock_prefix() { "lock " } else { "" }, i.mnemonic(), ops.join(", "))
            })
            .collect()
    }

    #[test]
    fn the_emitted_trampoline_does_what_the_assembled_one_does() {
        let tls = -0x48;
        let back = SITE + PROLOGUE.len() as u64;
        let displaced = decode_displaced(&PROLOGUE, SITE).expect("decodes");
        for (mode, bytes_arg) in
            [(MODE_COUNT, 0), (MODE_COUNT, 3), (MODE_COUNT, 6), (MODE_COUNT, 8), (MODE_TIME, 0), (MODE_TIME, 2)]
        {
            let t = target(mode, bytes_arg);
            let assembled = trampoline(&t, &displaced, back, tls, AT).expect("assembles");
            let emitted = emit_trampoline(&t, &PROLOGUE, back, tls as i32).finish(AT).expect("emits");
            let (a, e) = (normalised(&assembled, back), normalised(&emitted, back));
            assert_eq!(a, e, "mode {mode}, bytes argument {bytes_arg}");
            assert!(e.iter().any(|i| i == "Push RBP"), "the displaced bytes are in: {e:?}");
            // The data words themselves: the stubs' addresses, in the same order.
            let words = |code: &[u8]| -> Vec<u64> {
                let counting = mode == MODE_COUNT || bytes_arg != 0;
                let n = usize::from(counting) + usize::from(mode == MODE_TIME);
                code[code.len() - 8 * n..]
                    .chunks(8)
                    .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect()
            };
            assert_eq!(words(&assembled), words(&emitted));
        }
    }
}
