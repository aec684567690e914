//! Per-thread function shards: the first [`abi::SHARDS`] threads that hit a hook each claim a
//! shard of the counters file and are its only writer, so the hot paths add to it with plain
//! `inc`/`add` (no `lock`: an aligned 64-bit store is atomic on x86-64, so Nesquic's live reader
//! never sees a torn value). Later threads share [`abi::OVERFLOW_SHARD`] with `lock` adds: every
//! call is still counted.
//!
//! Each thread keeps its shard in initial-exec TLS (`nq_shard`, one word): the shard's address,
//! with bit 0 set when it is the shared overflow shard. It starts at [`UNCLAIMED`] (1, odd too),
//! so one `test` of bit 0 keeps the hot path to the owned-shard case; the rare odd cases claim a
//! shard (once per thread) or take the `lock` path. A signal handler that runs a hook on the same
//! thread writes the same shard between two whole instructions of the interrupted code: still one
//! writer. A `fork` child starts unclaimed (its thread then claims a fresh shard: the counters
//! file and its claim counter are shared with the parent).

use std::sync::atomic::{AtomicU32, Ordering};

use crate::abi::{self, Stats};
use crate::counters;

/// `nq_shard` before the thread's first hit.
pub const UNCLAIMED: u64 = 1;
/// Bit 0 of `nq_shard`: the shard is shared, add with `lock`.
pub const SHARED: u64 = 1;

extern "C" {
    /// Claims this thread's shard, preserving every register a function entry may read
    /// (arguments, rax aside, xmm0-7); returns the new `nq_shard` value in rax.
    fn nq_claim_stub();
    /// This thread's `nq_shard` (a normal pointer into its TLS block).
    fn nq_shard_tls() -> *mut u64;
}

/// Address of the claim stub (generated code `call`s it).
pub fn claim_stub() -> u64 {
    nq_claim_stub as *const () as usize as u64
}

/// `nq_shard`'s offset from the thread pointer: the same in every thread (static TLS), so
/// generated code reads it as `fs:[offset]`.
pub fn tls_offset() -> i64 {
    let tp: u64;
    // SAFETY: on x86-64 Linux `fs:[0]` holds the thread pointer itself (TCB self-pointer).
    unsafe { std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags)) };
    // SAFETY: plain function returning an address.
    (unsafe { nq_shard_tls() } as u64).wrapping_sub(tp) as i64
}

/// Byte offset of a slot's stats inside a shard.
pub const fn slot_offset(slot: usize) -> i32 {
    (slot * std::mem::size_of::<Stats>()) as i32
}

/// The cold path of the first hit of a thread: takes the next shard (or the overflow shard),
/// stores it in `nq_shard` and returns it.
///
/// # Safety
/// Only called through `nq_claim_stub`, from a hook: hooks exist only once the counters file is
/// mapped (it is never unmapped).
unsafe extern "C" fn nq_claim_shard() -> u64 {
    let c = counters::get();
    if c.is_null() {
        no_counters();
    }
    // SAFETY: `c` is the live mapping; the field is u32-aligned.
    let threads = unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*c).header.threads)) };
    // Saturating: the count never wraps back onto an owned shard.
    let i = match threads.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n.saturating_add(1))) {
        Ok(n) | Err(n) => n as usize,
    };
    let value = if i < abi::SHARDS {
        // SAFETY: in bounds of the live mapping.
        (unsafe { std::ptr::addr_of_mut!((*c).shards[i]) }) as u64
    } else {
        // SAFETY: as above.
        (unsafe { std::ptr::addr_of_mut!((*c).shards[abi::OVERFLOW_SHARD]) }) as u64 | SHARED
    };
    // SAFETY: this thread's own TLS word.
    unsafe { *nq_shard_tls() = value };
    value
}

/// In a `fork` child: its thread claims a shard of its own on its next hit.
extern "C" fn at_fork_child() {
    // SAFETY: this thread's own TLS word.
    unsafe { *nq_shard_tls() = UNCLAIMED };
}

/// Registers the fork handler (once, during init).
pub fn init() {
    // SAFETY: registering a handler that only writes this thread's TLS word.
    unsafe { libc::pthread_atfork(None, None, Some(at_fork_child)) };
}

fn no_counters() -> ! {
    let msg = b"nesquic agent: a hook ran without the counters file mapped; aborting\n";
    // SAFETY: write(2) of a static buffer; abort never returns.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::abort();
    }
}

std::arch::global_asm!(
    ".section .tdata,\"awT\",@progbits",
    ".p2align 3",
    ".globl nq_shard",
    ".hidden nq_shard",
    ".type nq_shard,@tls_object",
    "nq_shard:",
    ".quad {unclaimed}",
    ".size nq_shard, 8",
    ".text",
    ".p2align 4",
    ".globl nq_shard_tls",
    ".hidden nq_shard_tls",
    ".type nq_shard_tls,@function",
    "nq_shard_tls:",
    "mov rax, qword ptr [rip + nq_shard@GOTTPOFF]",
    "add rax, qword ptr fs:[0]",
    "ret",
    ".size nq_shard_tls, .-nq_shard_tls",
    //
    ".p2align 4",
    ".globl nq_claim_stub",
    ".hidden nq_claim_stub",
    ".type nq_claim_stub,@function",
    "nq_claim_stub:",
    "push rbp",
    "mov rbp, rsp",
    "push rcx",
    "push rdx",
    "push rsi",
    "push rdi",
    "push r8",
    "push r9",
    "push r10",
    "push r11",
    "sub rsp, 128",
    "and rsp, -16",
    "movups xmmword ptr [rsp], xmm0",
    "movups xmmword ptr [rsp + 16], xmm1",
    "movups xmmword ptr [rsp + 32], xmm2",
    "movups xmmword ptr [rsp + 48], xmm3",
    "movups xmmword ptr [rsp + 64], xmm4",
    "movups xmmword ptr [rsp + 80], xmm5",
    "movups xmmword ptr [rsp + 96], xmm6",
    "movups xmmword ptr [rsp + 112], xmm7",
    "call {claim}",
    "movups xmm0, xmmword ptr [rsp]",
    "movups xmm1, xmmword ptr [rsp + 16]",
    "movups xmm2, xmmword ptr [rsp + 32]",
    "movups xmm3, xmmword ptr [rsp + 48]",
    "movups xmm4, xmmword ptr [rsp + 64]",
    "movups xmm5, xmmword ptr [rsp + 80]",
    "movups xmm6, xmmword ptr [rsp + 96]",
    "movups xmm7, xmmword ptr [rsp + 112]",
    "lea rsp, [rbp - 64]",
    "pop r11",
    "pop r10",
    "pop r9",
    "pop r8",
    "pop rdi",
    "pop rsi",
    "pop rdx",
    "pop rcx",
    "pop rbp",
    "ret",
    ".size nq_claim_stub, .-nq_claim_stub",
    unclaimed = const UNCLAIMED,
    claim = sym nq_claim_shard,
);
