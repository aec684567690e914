//! Time mode: an entry stub stamps the call and substitutes the return address with
//! `nq_time_return`; when the function returns there, the duration is recorded and the real
//! return address restored. Each thread keeps its calls in flight on a shadow stack, so
//! recursion and nesting keep every call.
//!
//! Both hot paths are assembly with no call into Rust: one `rdtsc` each, the shadow stack in
//! static (initial-exec) TLS addressed through `fs` with one GOT load, and at return the three
//! counter updates (`calls`, `total_ns`, the histogram bucket) as plain adds into the thread's
//! own shard ([`crate::shard`]; `lock` adds only on the shared overflow shard). Measured on the
//! development VM (bench/agent-probe-cost.md): `rdtsc` ~15 ns and a `lock add` ~7 ns, so the
//! two `rdtsc` are most of what a timed call costs; everything else was cut (no
//! `__tls_get_addr`, no xmm saves, no mispredicted `ret`: the stub is entered with a `call` and
//! left with a predicted `ret`, and the return stub leaves with `jmp` so the caller's return
//! stack buffer stays in step). Only the rare cases (full shadow stack, a frame that is not on
//! top) go to Rust, with every live register saved.
//!
//! A frame left without returning (longjmp, or a panic unwinding past it) leaves its shadow entry
//! behind; the next return of a shallower frame on the same stack drops it (counted in
//! `health.shadow_dropped`). A panic cannot unwind *through* a timed frame: the unwinder finds
//! the return stub, which has no unwind information, and the process aborts. Count mode changes no
//! return address and has neither limitation.
//!
//! The shadow stack lives in the static TLS block, so the agent must be loaded at start-up
//! (`LD_PRELOAD`, as Nesquic does); a late `dlopen` of the agent itself fails cleanly ("cannot
//! allocate memory in static TLS block") rather than run slowly.

use std::mem::offset_of;

use crate::abi::{self, Counters, HIST_BUCKETS};
use crate::{counters, shard, tsc};

/// Calls in flight per thread (deeper recursion is not timed: `health.shadow_full`).
pub const DEPTH: usize = abi::SHADOW_DEPTH;

/// One call in flight. The assembly below uses these offsets (checked at compile time).
#[repr(C)]
#[derive(Clone, Copy)]
struct Entry {
    /// The caller's return address.
    return_to: u64,
    /// Where it was on the stack (the function's entry `rsp`): identifies the frame.
    frame: u64,
    /// `rdtsc` at entry.
    start: u64,
    /// The slot's `Stats` in the thread's shard (bit 0 set: the shared overflow shard).
    stats: u64,
}

/// The per-thread shadow stack, as laid out in TLS: `depth` in the first 32 bytes, then entry
/// `i` at `32 * (i + 1)` (so `(depth + 1) << 5` is the offset of the entry being pushed).
#[repr(C)]
struct Shadow {
    depth: u64,
    _pad: [u64; 3],
    entries: [Entry; DEPTH],
}

const _: () = assert!(std::mem::size_of::<Entry>() == 32);
const _: () = assert!(offset_of!(Shadow, entries) == 32);
const _: () = assert!(offset_of!(Entry, return_to) == 0 && offset_of!(Entry, frame) == 8);
const _: () = assert!(offset_of!(Entry, start) == 16 && offset_of!(Entry, stats) == 24);

extern "C" {
    fn nq_time_enter();
    /// This thread's shadow stack (a normal pointer to its TLS block).
    fn nq_shadow_base() -> *mut Shadow;
}

/// Address of the entry stub (trampolines `call` it with the slot's offset in a shard in r11).
pub fn enter_stub() -> u64 {
    nq_time_enter as *const () as usize as u64
}

/// The return slow path: the top shadow entry is not this frame's (a longjmp or an unwind left
/// entries behind, or the stack is empty). Called by `nq_time_return` with the address where the
/// return address was (entry `rsp`) and the duration's end stamp; records the call and returns
/// the real return address.
///
/// # Safety
/// Only called by the stub, on the thread whose shadow stack it reads.
unsafe extern "C" fn nq_time_return_slow(frame: u64, end: u64) -> u64 {
    // SAFETY: this thread's own shadow stack; nothing else on this thread holds a reference to
    // it while this runs (a signal handler nesting a timed call works above `depth`).
    let s = unsafe { &mut *nq_shadow_base() };
    let depth = (s.depth as usize).min(DEPTH);
    // The newest entry for this frame; entries above it that are deeper on the same stack
    // belong to frames that were left without returning (longjmp, unwinding).
    let Some(i) = (0..depth).rev().find(|&i| s.entries[i].frame == frame) else {
        lost_return_address();
    };
    let e = s.entries[i];
    let mut kept = i;
    for j in i + 1..depth {
        if s.entries[j].frame < frame {
            counters::health(|h| &mut h.shadow_dropped);
        } else {
            s.entries[kept] = s.entries[j];
            kept += 1;
        }
    }
    s.depth = kept as u64;
    let stats = e.stats & !shard::SHARED;
    if stats != 0 {
        // SAFETY: `stats` was put there by the entry stub: a slot of the live mapping. Atomic
        // adds are right for an owned shard too (one writer either way).
        unsafe { counters::record_call(stats as *mut abi::Stats, tsc::to_ns(end.wrapping_sub(e.start)), 0) };
    }
    e.return_to
}

/// No shadow entry for a return: the real return address is unknown, nothing can continue.
fn lost_return_address() -> ! {
    let msg = b"nesquic agent: a timed function returned without its shadow entry (stack switched?); aborting\n";
    // SAFETY: write(2) of a static buffer; abort never returns.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::abort();
    }
}

// Register discipline. Entry (`nq_time_enter`, called by the trampoline, which saved r11 and put
// the slot's offset in a shard in it): every register a SysV function may read on entry is
// preserved (arguments, rax for varargs, r10 static chain, xmm0-7; the stub uses only rax, rdx,
// r11, and saves the first two). Flags are not: at a call boundary they carry nothing.
// Return (`nq_time_return`): rax, rdx (integer results), every xmm/ymm register and x87 (float
// results) are preserved; the fast path uses only caller-saved registers that carry no result
// (rcx, rsi, rdi, r8-r11), which the caller cannot expect to survive a call anyway.
std::arch::global_asm!(
    // The shadow stack: static TLS, reached by initial-exec (GOTTPOFF) addressing: one load
    // from the GOT, then `fs:`-relative accesses. No `__tls_get_addr` call.
    ".section .tbss,\"awT\",@nobits",
    ".p2align 6",
    ".type nq_shadow,@tls_object",
    "nq_shadow:",
    ".zero {shadow_size}",
    ".size nq_shadow, {shadow_size}",
    ".text",
    ".p2align 4",
    ".globl nq_shadow_base",
    ".hidden nq_shadow_base",
    ".type nq_shadow_base,@function",
    "nq_shadow_base:",
    "mov rax, qword ptr [rip + nq_shadow@GOTTPOFF]",
    "add rax, qword ptr fs:[0]",
    "ret",
    ".size nq_shadow_base, .-nq_shadow_base",
    //
    ".p2align 4",
    ".globl nq_time_enter",
    ".hidden nq_time_enter",
    ".type nq_time_enter,@function",
    "nq_time_enter:",
    // [rsp] = back into the trampoline, [rsp+8] = saved r11, [rsp+16] = the caller's return
    // address (the frame); r11 = the slot's offset in a shard.
    "push rax",
    "push rdx",
    // r11 += this thread's shard (claimed on its first hit; bit 0 marks the shared one).
    "mov rax, qword ptr [rip + nq_shard@GOTTPOFF]",
    "mov rdx, qword ptr fs:[rax]",
    "cmp rdx, {unclaimed}",
    "je 6f",
    "7:",
    "add r11, rdx",
    "mov rax, qword ptr [rip + nq_shadow@GOTTPOFF]",
    "mov rdx, qword ptr fs:[rax]",
    "cmp rdx, {depth}",
    "jae 3f",
    // Claim the entry before filling it, so a signal handler's timed call lands above it.
    "inc rdx",
    "mov qword ptr fs:[rax], rdx",
    "shl rdx, 5",
    "add rax, rdx",
    "mov qword ptr fs:[rax + 24], r11",
    "lea rdx, [rsp + 32]",
    "mov qword ptr fs:[rax + 8], rdx",
    "mov r11, qword ptr [rdx]",
    "mov qword ptr fs:[rax], r11",
    "lea r11, [rip + nq_time_return]",
    "mov qword ptr [rdx], r11",
    // Stamp last, so the agent's own entry work is outside the measured time.
    "mov r11, rax",
    "rdtsc",
    "shl rdx, 32",
    "or rax, rdx",
    "mov qword ptr fs:[r11 + 16], rax",
    "pop rdx",
    "pop rax",
    "ret",
    // Shadow stack full: the call runs untimed (its return address is left alone).
    "3:",
    "mov rax, qword ptr [rip + {counters}]",
    "test rax, rax",
    "jz 4f",
    "lock inc qword ptr [rax + {shadow_full}]",
    "4:",
    "pop rdx",
    "pop rax",
    "ret",
    // First hit of the thread: claim a shard (every other register preserved).
    "6:",
    "call nq_claim_stub",
    "mov rdx, rax",
    "jmp 7b",
    ".size nq_time_enter, .-nq_time_enter",
    //
    ".p2align 4",
    ".globl nq_time_return",
    ".hidden nq_time_return",
    ".type nq_time_return,@function",
    "nq_time_return:",
    // The timed function returned here; rsp = its entry rsp + 8. rax, rdx are its results.
    "mov r8, rax",
    "mov r9, rdx",
    "rdtsc",
    "shl rdx, 32",
    "or rax, rdx",
    "mov r11, qword ptr [rip + nq_shadow@GOTTPOFF]",
    "mov rcx, qword ptr fs:[r11]",
    "lea rsi, [rsp - 8]",
    // Common case: the top entry is this frame's.
    "lea rdi, [rcx - 1]",
    "cmp rdi, {depth}",
    "jae 5f",
    "shl rcx, 5",
    "add rcx, r11",
    "cmp qword ptr fs:[rcx + 8], rsi",
    "jne 5f",
    "sub rax, qword ptr fs:[rcx + 16]",
    "mov r10, qword ptr fs:[rcx + 24]",
    "mov rsi, qword ptr fs:[rcx]",
    // Pop after reading the entry: a signal landing later pushes above it harmlessly.
    "mov qword ptr fs:[r11], rdi",
    // ns = ticks * mult >> 32
    "mul qword ptr [rip + {mult}]",
    "shrd rax, rdx, 32",
    // Bucket floor(log2(ns)), 0 for 0, capped at the last one.
    "xor ecx, ecx",
    "bsr rdx, rax",
    "cmovnz rcx, rdx",
    "mov edx, {last_bucket}",
    "cmp rcx, rdx",
    "cmova rcx, rdx",
    // The thread's own shard: plain adds (it is the only writer).
    "test r10b, 1",
    "jnz 8f",
    "inc qword ptr [r10 + {calls}]",
    "add qword ptr [r10 + {total_ns}], rax",
    "inc qword ptr [r10 + rcx * 8 + {hist}]",
    "9:",
    "mov rax, r8",
    "mov rdx, r9",
    // `jmp`, not `ret`: the function's own `ret` already consumed the caller's return stack
    // buffer entry; another `ret` would mispredict here and in every caller up the stack.
    "jmp rsi",
    // The shared overflow shard (r10 has bit 0 set): `lock` adds.
    "8:",
    "lock inc qword ptr [r10 + {calls_shared}]",
    "lock add qword ptr [r10 + {total_ns_shared}], rax",
    "lock inc qword ptr [r10 + rcx * 8 + {hist_shared}]",
    "jmp 9b",
    // Slow path: save the results (rax, rdx, xmm0-1, all that SysV returns in registers),
    // align the stack and let Rust search the shadow stack.
    "5:",
    "push rbp",
    "mov rbp, rsp",
    "push r8",
    "push r9",
    "sub rsp, 32",
    "and rsp, -16",
    "movups xmmword ptr [rsp], xmm0",
    "movups xmmword ptr [rsp + 16], xmm1",
    // rbp = entry rsp - 8 = the frame (where the return address was).
    "mov rdi, rbp",
    "mov rsi, rax",
    "call {return_slow}",
    "mov r11, rax",
    "movups xmm0, xmmword ptr [rsp]",
    "movups xmm1, xmmword ptr [rsp + 16]",
    "lea rsp, [rbp - 16]",
    "pop rdx",
    "pop rax",
    "pop rbp",
    "jmp r11",
    ".size nq_time_return, .-nq_time_return",
    shadow_size = const std::mem::size_of::<Shadow>(),
    depth = const DEPTH,
    counters = sym counters::COUNTERS,
    shadow_full = const offset_of!(Counters, header) + offset_of!(abi::CountersHeader, health)
        + offset_of!(abi::AgentHealth, shadow_full),
    mult = sym tsc::MULT,
    calls = const abi::stats_offset::CALLS,
    total_ns = const abi::stats_offset::TOTAL_NS,
    hist = const abi::stats_offset::HIST,
    calls_shared = const abi::stats_offset::CALLS - 1,
    total_ns_shared = const abi::stats_offset::TOTAL_NS - 1,
    hist_shared = const abi::stats_offset::HIST - 1,
    unclaimed = const shard::UNCLAIMED,
    last_bucket = const HIST_BUCKETS - 1,
    return_slow = sym nq_time_return_slow,
);
