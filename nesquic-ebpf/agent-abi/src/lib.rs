//! `nesquic-agent-abi`: the contract between Nesquic and its `LD_PRELOAD` agent
//! (`libnesquic_agent.so`). It owns two fixed binary layouts and nothing else: the **plan** (a
//! file Nesquic writes, saying which functions to hook and how) and the **counters** (a file both
//! sides `mmap(MAP_SHARED)`: the agent adds to it, Nesquic reads it live and after exit).
//!
//! It must not know how either side does its work (no decoder, no aya, no libc): only sizes,
//! codes and field order. Every struct is `#[repr(C)]` with `u32`/`u64` fields and no implicit
//! padding (sizes asserted below), so both sides can view the same bytes.
#![no_std]
#![warn(missing_docs)]

/// Env var naming the plan file (set by Nesquic, removed by the agent during init unless the plan
/// has [`PLAN_FOLLOW`]).
pub const PLAN_ENV: &str = "NESQUIC_AGENT_PLAN";
/// Env var naming the counters file (set by Nesquic, removed by the agent during init). The agent
/// maps it first, so even a missing or corrupt plan is reported there.
pub const COUNTERS_ENV: &str = "NESQUIC_AGENT_COUNTERS";
/// The agent library's file name, as Nesquic finds it and puts it in `LD_PRELOAD` (the agent
/// looks for it in the environment a followed program is started with).
pub const AGENT_LIB_NAME: &str = "libnesquic_agent.so";

/// First 8 bytes of a plan file.
pub const PLAN_MAGIC: u64 = u64::from_le_bytes(*b"NQPLAN01");
/// First 8 bytes of a counters file.
pub const COUNTERS_MAGIC: u64 = u64::from_le_bytes(*b"NQCOUNT1");
/// Layout version of both files; bumped on any change (2: per-thread function shards; 4: the
/// processes the agent ran in; 5: the programs they started that cannot load it; 6: how many of
/// the unlisted ones cannot).
pub const VERSION: u32 = 6;

/// Function slots (same limit as the kernel path's attach cookies).
pub const MAX_SLOTS: usize = 256;
/// Function-counter shards owned by one thread each: the first `SHARDS` threads that hit a hook
/// each claim one and add to it without `lock` (a single writer). Later threads share
/// [`OVERFLOW_SHARD`], updated with `lock` adds. Readers sum every shard.
pub const SHARDS: usize = 32;
/// The shard shared (with atomic adds) by threads beyond the first [`SHARDS`].
pub const OVERFLOW_SHARD: usize = SHARDS;
/// log2 latency buckets: `hist[b]` counts durations with `floor(log2(ns)) == b` (0 ns in bucket
/// 0; the last bucket also holds everything longer), as in the kernel path.
pub const HIST_BUCKETS: usize = 40;
/// Timed calls in flight per thread (the shadow stack's depth): a call nested deeper is neither
/// counted nor timed, and adds to [`AgentHealth::shadow_full`].
pub const SHADOW_DEPTH: usize = 256;
/// Bytes for a path, NUL-terminated.
pub const PATH_LEN: usize = 512;
/// Most bytes of a function's entry compared before patching.
pub const EXPECTED_LEN: usize = 32;

/// Plan flag: interpose the libc I/O wrappers.
pub const PLAN_IO: u32 = 1;
/// Plan flag: the agent stays in the environment (its `LD_PRELOAD` entry and variables), so the
/// programs the process execs or starts load it too and count into the same counters file
/// (`nesquic trace`: a command is often a script or a launcher such as `cargo run`). Without it
/// the agent removes itself during init: a LUT's helpers are not the LUT.
pub const PLAN_FOLLOW: u32 = 2;
/// Processes whose pid and name the counters file keeps ([`Counters::processes`]); more are
/// still counted ([`CountersHeader::processes`]).
pub const MAX_PROCESSES: usize = 16;

/// [`ProcessEntry::flags`] bits. An entry without [`entry::NO_AGENT`] is a program the agent
/// ran in; with it, a program a followed process exec'd or spawned that cannot load the agent,
/// so nothing it does is counted (the reason bits say why).
pub mod entry {
    /// A program that cannot load the agent: not measured.
    pub const NO_AGENT: u32 = 1;
    /// ...because it is statically linked (no `PT_INTERP`: nothing reads `LD_PRELOAD`).
    pub const STATIC: u32 = 2;
    /// ...because it is set-user-ID or set-group-ID (the loader ignores `LD_PRELOAD` paths).
    pub const SETUID: u32 = 4;
    /// ...because it is no 64-bit ELF executable (another architecture's loader cannot load it).
    pub const NOT_ELF64: u32 = 8;
    /// The exec that was to start it failed: the entry counts nothing, readers skip it.
    pub const EXEC_FAILED: u32 = 16;
    /// ...because the environment it was started with no longer carries the agent (`env -i`,
    /// an explicit environment without `LD_PRELOAD`).
    pub const ENV_DROPPED: u32 = 32;
}

/// `PlanTarget::mode`: count calls and bytes only.
pub const MODE_COUNT: u32 = 0;
/// `PlanTarget::mode`: also time every call (entry and return).
pub const MODE_TIME: u32 = 1;

/// I/O wrappers the agent interposes, in slot order. The first five send, the rest receive;
/// `write`/`read` are counted only on IPv4/IPv6 sockets (TCP or UDP).
pub const IO_CALLS: [&str; IO_KINDS] =
    ["sendmsg", "sendmmsg", "sendto", "send", "write", "recvmsg", "recvmmsg", "recvfrom", "recv", "read"];
/// Number of I/O slots.
pub const IO_KINDS: usize = 10;
/// I/O slots `0..IO_SENDS` are sends.
pub const IO_SENDS: usize = 5;

/// Start of a plan file; `targets` [`PlanTarget`]s follow it directly.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PlanHeader {
    /// [`PLAN_MAGIC`].
    pub magic: u64,
    /// [`VERSION`].
    pub version: u32,
    /// Number of targets following.
    pub targets: u32,
    /// [`PLAN_IO`], [`PLAN_FOLLOW`].
    pub flags: u32,
    /// Reserved, 0.
    pub reserved: u32,
    /// TSC to ns: `ns = ticks * tsc_mult >> 32`; 0 lets the agent calibrate itself.
    pub tsc_mult: u64,
    /// Counters file (used when [`COUNTERS_ENV`] is unset), NUL-terminated.
    pub counters_path: [u8; PATH_LEN],
}

/// One function to hook.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PlanTarget {
    /// The object file as it is mapped (canonical path; empty never matches), NUL-terminated.
    pub object: [u8; PATH_LEN],
    /// ELF virtual address of the patch site (the function's entry, or just after its
    /// `endbr64`); the agent adds the object's load bias.
    pub site_vaddr: u64,
    /// Bytes from the patch site to the end of the function (from the symbol size).
    pub size: u64,
    /// Bytes the jump displaces (whole instructions, >= 5), as Nesquic's analysis found.
    pub displaced: u32,
    /// Valid bytes in `expected`.
    pub expected_len: u32,
    /// The bytes expected at the patch site (from the file).
    pub expected: [u8; EXPECTED_LEN],
    /// Counter slot (< [`MAX_SLOTS`]).
    pub slot: u32,
    /// [`MODE_COUNT`] or [`MODE_TIME`].
    pub mode: u32,
    /// Argument holding a byte count: 0 none, 1-6 SysV registers (rdi, rsi, rdx, rcx, r8,
    /// r9), 7-8 stack arguments (at entry `[rsp+8]`, `[rsp+16]`).
    pub bytes_arg: u32,
    /// [`target_flags`] bits.
    pub flags: u32,
}

/// [`PlanTarget::flags`] bits.
pub mod target_flags {
    /// Nesquic decoded the displaced instructions and none depends on its address (no
    /// RIP-relative operand, no relative branch): the agent may copy `expected`'s first
    /// `displaced` bytes into the trampoline as they are, without decoding them itself.
    pub const POSITION_INDEPENDENT: u32 = 1;
}

/// One aggregate; field order and size equal the kernel path's `struct nq_stats`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Calls completed.
    pub calls: u64,
    /// Failed calls other than EAGAIN (I/O).
    pub errors: u64,
    /// Calls that failed with EAGAIN (I/O).
    pub eagain: u64,
    /// I/O: bytes moved (return values, `msg_len`); functions: the byte argument's sum.
    pub bytes: u64,
    /// Datagrams (I/O; GSO `UDP_SEGMENT` and GRO stride split).
    pub datagrams: u64,
    /// Messages (msghdrs) moved (I/O).
    pub messages: u64,
    /// Messages carrying more than one datagram (I/O).
    pub segmented: u64,
    /// Sum of durations, ns (timed functions and I/O).
    pub total_ns: u64,
    /// log2 histogram of durations.
    pub hist: [u64; HIST_BUCKETS],
}

impl Stats {
    /// All zero.
    pub const ZERO: Stats = Stats {
        calls: 0,
        errors: 0,
        eagain: 0,
        bytes: 0,
        datagrams: 0,
        messages: 0,
        segmented: 0,
        total_ns: 0,
        hist: [0; HIST_BUCKETS],
    };

    /// Adds every field of `other` (wrapping, as the counters do).
    pub fn add(&mut self, other: &Stats) {
        self.calls = self.calls.wrapping_add(other.calls);
        self.errors = self.errors.wrapping_add(other.errors);
        self.eagain = self.eagain.wrapping_add(other.eagain);
        self.bytes = self.bytes.wrapping_add(other.bytes);
        self.datagrams = self.datagrams.wrapping_add(other.datagrams);
        self.messages = self.messages.wrapping_add(other.messages);
        self.segmented = self.segmented.wrapping_add(other.segmented);
        self.total_ns = self.total_ns.wrapping_add(other.total_ns);
        for (a, b) in self.hist.iter_mut().zip(other.hist.iter()) {
            *a = a.wrapping_add(*b);
        }
    }
}

/// Byte offsets inside [`Stats`], for generated code that adds to a slot.
pub mod stats_offset {
    /// `calls`.
    pub const CALLS: i32 = 0;
    /// `bytes`.
    pub const BYTES: i32 = 24;
    /// `total_ns`.
    pub const TOTAL_NS: i32 = 56;
    /// `hist[0]`.
    pub const HIST: i32 = 64;
}

/// What the agent could not measure.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentHealth {
    /// Calls of timed functions neither counted nor timed because the thread already had
    /// [`SHADOW_DEPTH`] timed calls in flight (deep recursion).
    pub shadow_full: u64,
    /// Calls of timed functions never recorded because their frame was left without a return
    /// (longjmp, or a panic unwinding past it): found when a shallower frame returned.
    pub shadow_dropped: u64,
    /// Reserved, 0. (Was `reentered`: no path of the agent calls a function it hooks, so nothing
    /// ever added to it.)
    pub reserved: u64,
    /// Objects hooked after a `dlopen`.
    pub dlopen_hooked: u64,
}

/// `CountersHeader::state`.
pub mod state {
    /// The agent has not run (not loaded, or the process has not started yet).
    pub const UNTOUCHED: u32 = 0;
    /// Initialisation finished; counters are live.
    pub const READY: u32 = 1;
}

/// `CountersHeader::plan_status`.
pub mod plan_status {
    /// No plan given (no function hooks requested).
    pub const NONE: u32 = 0;
    /// Read and valid.
    pub const OK: u32 = 1;
    /// Could not be opened or read.
    pub const UNREADABLE: u32 = 2;
    /// Wrong magic or version.
    pub const BAD_HEADER: u32 = 3;
    /// Shorter than its header says, or a target field out of range.
    pub const CORRUPT: u32 = 4;
}

/// `CountersHeader::slot_status[slot]`: what happened to that slot's target.
pub mod slot_status {
    /// Not in the plan.
    pub const UNUSED: u32 = 0;
    /// Hooked: counts are live.
    pub const PATCHED: u32 = 1;
    /// Its object is not mapped (yet: it is hooked when a `dlopen` maps it).
    pub const OBJECT_NOT_LOADED: u32 = 2;
    /// The bytes in memory differ from the plan's (another build, or already patched).
    pub const BYTES_MISMATCH: u32 = 3;
    /// No free memory within +-2 GiB of the function for its trampoline.
    pub const NO_NEAR_MEMORY: u32 = 4;
    /// `mprotect` of the function's page failed.
    pub const MPROTECT_FAILED: u32 = 5;
    /// The displaced instructions could not be decoded or relocated here.
    pub const RELOCATION_FAILED: u32 = 6;
    /// The plan's entry for it is invalid (bad slot, mode, argument or length).
    pub const BAD_TARGET: u32 = 7;
    /// Not hooked because the plan as a whole was missing or corrupt.
    pub const PLAN_REJECTED: u32 = 8;

    /// One short reason per code.
    pub fn describe(code: u32) -> &'static str {
        match code {
            UNUSED => "not in the plan",
            PATCHED => "patched",
            OBJECT_NOT_LOADED => "object never mapped in the process",
            BYTES_MISMATCH => "bytes in memory differ from the file's (not patched)",
            NO_NEAR_MEMORY => "no memory within +-2 GiB for a trampoline",
            MPROTECT_FAILED => "mprotect failed (not patched)",
            RELOCATION_FAILED => "displaced instructions not relocatable in the process",
            BAD_TARGET => "invalid plan entry",
            PLAN_REJECTED => "plan missing or corrupt",
            _ => "unknown status",
        }
    }
}

/// Start of the counters file.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CountersHeader {
    /// [`COUNTERS_MAGIC`] (written by Nesquic when it creates the file).
    pub magic: u64,
    /// [`VERSION`].
    pub version: u32,
    /// `size_of::<Counters>()`, a second check of the layout.
    pub size: u32,
    /// [`state`] code, written by the agent last during init.
    pub state: u32,
    /// [`plan_status`] code.
    pub plan_status: u32,
    /// The instrumented process (the first to initialise).
    pub pid: u32,
    /// 1 when the libc I/O wrappers are interposed.
    pub io_interposed: u32,
    /// The TSC to ns factor in use (`ns = ticks * tsc_mult >> 32`).
    pub tsc_mult: u64,
    /// Losses.
    pub health: AgentHealth,
    /// [`slot_status`] per function slot.
    pub slot_status: [u32; MAX_SLOTS],
    /// Threads that claimed a function shard so far (atomic; those numbered [`SHARDS`] and
    /// above share [`OVERFLOW_SHARD`]).
    pub threads: u32,
    /// Entries taken in [`Counters::processes`] (atomic): the programs the agent initialised in
    /// (1, unless the plan has [`PLAN_FOLLOW`] and the process exec'd or started others), and,
    /// with [`PLAN_FOLLOW`], the programs they exec'd or spawned that cannot load it.
    pub processes: u32,
    /// Of the [`processes`](Self::processes) past [`MAX_PROCESSES`] (not listed), those that
    /// cannot load the agent (atomic).
    pub unlisted_without_agent: u32,
    /// Reserved, 0.
    pub reserved: u32,
    /// CPU time the agent's constructor took, summed over those processes (its start-up cost), ns.
    pub init_cpu_ns: u64,
    /// Reserved, 0: pads the header to a whole number of cache lines.
    pub pad: [u64; 4],
}

impl CountersHeader {
    /// A fresh file's header (the rest of the file is zero).
    pub const fn new() -> CountersHeader {
        CountersHeader {
            magic: COUNTERS_MAGIC,
            version: VERSION,
            size: core::mem::size_of::<Counters>() as u32,
            state: state::UNTOUCHED,
            plan_status: plan_status::NONE,
            pid: 0,
            io_interposed: 0,
            tsc_mult: 0,
            health: AgentHealth { shadow_full: 0, shadow_dropped: 0, reserved: 0, dlopen_hooked: 0 },
            slot_status: [slot_status::UNUSED; MAX_SLOTS],
            threads: 0,
            processes: 0,
            unlisted_without_agent: 0,
            reserved: 0,
            init_cpu_ns: 0,
            pad: [0; 4],
        }
    }

    /// The fields that must match before anything else is read.
    pub fn is_valid(&self) -> bool {
        self.magic == COUNTERS_MAGIC
            && self.version == VERSION
            && self.size as usize == core::mem::size_of::<Counters>()
    }
}

impl Default for CountersHeader {
    fn default() -> Self {
        Self::new()
    }
}

/// One thread's function counters (or, for [`OVERFLOW_SHARD`], those of every later thread).
/// `Stats` is 6 cache lines, so no two shards (or slots) ever share a line.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Shard {
    /// Per function slot.
    pub functions: [Stats; MAX_SLOTS],
}

/// The whole counters file (~3.1 MiB: [`SHARDS`] + 1 shards of [`MAX_SLOTS`] slots; the file is
/// sparse, only the pages threads touch take memory). Too big for a stack: read it into a `Box`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Counters {
    /// Header.
    pub header: CountersHeader,
    /// Per I/O wrapper, in [`IO_CALLS`] order (atomic adds: each call is a system call anyway).
    pub io: [Stats; IO_KINDS],
    /// The first [`MAX_PROCESSES`] processes the agent initialised in, in that order (entry `i`
    /// is written by the process that took number `i` of [`CountersHeader::processes`]).
    pub processes: [ProcessEntry; MAX_PROCESSES],
    /// Function counters: shard `i < SHARDS` has one writer (plain adds), [`OVERFLOW_SHARD`] many
    /// (`lock` adds). A slot's value is the sum over all shards.
    pub shards: [Shard; SHARDS + 1],
}

/// A program the agent ran in, or (flag [`entry::NO_AGENT`]) one that a process it ran in exec'd
/// or spawned and that cannot load it. An exec keeps the pid: a script that execs its program
/// is two entries with one pid.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessEntry {
    /// Its pid (0: not written yet).
    pub pid: u32,
    /// [`entry`] bits; 0 for a program the agent ran in.
    pub flags: u32,
    /// Its name as the kernel keeps it (`comm`: the executable's file name, up to 15 bytes),
    /// NUL-padded.
    pub comm: [u8; 16],
}

impl Counters {
    /// The header fields that must match before anything else is read.
    pub fn is_valid(&self) -> bool {
        self.header.is_valid()
    }
}

impl PlanHeader {
    /// A header for `targets` targets; `flags`: [`PLAN_IO`], [`PLAN_FOLLOW`].
    pub fn new(targets: u32, flags: u32, tsc_mult: u64, counters_path: &[u8]) -> Option<PlanHeader> {
        Some(PlanHeader {
            magic: PLAN_MAGIC,
            version: VERSION,
            targets,
            flags,
            reserved: 0,
            tsc_mult,
            counters_path: c_path(counters_path)?,
        })
    }
}

/// `bytes` as a NUL-terminated fixed field; `None` if too long or containing NUL.
pub fn c_path(bytes: &[u8]) -> Option<[u8; PATH_LEN]> {
    if bytes.len() >= PATH_LEN || bytes.contains(&0) {
        return None;
    }
    let mut out = [0u8; PATH_LEN];
    out[..bytes.len()].copy_from_slice(bytes);
    Some(out)
}

/// The bytes before the first NUL of a fixed path field.
pub fn path_bytes(field: &[u8; PATH_LEN]) -> &[u8] {
    let end = field.iter().position(|b| *b == 0).unwrap_or(PATH_LEN);
    &field[..end]
}

/// Plain-old-data layouts of this crate: any bit pattern is a valid value, no padding.
///
/// # Safety
/// Implement only for `#[repr(C)]` structs of integers (or arrays of them) without padding.
pub unsafe trait Pod: Copy {}

// SAFETY: repr(C) integer structs without padding (sizes asserted below).
unsafe impl Pod for PlanHeader {}
// SAFETY: as above.
unsafe impl Pod for PlanTarget {}
// SAFETY: as above.
unsafe impl Pod for Stats {}
// SAFETY: as above.
unsafe impl Pod for CountersHeader {}
// SAFETY: as above.
unsafe impl Pod for Shard {}
// SAFETY: as above.
unsafe impl Pod for Counters {}

/// The bytes of a [`Pod`] value.
pub fn as_bytes<T: Pod>(value: &T) -> &[u8] {
    // SAFETY: `T: Pod` has no padding, so all its size_of bytes are initialised.
    unsafe { core::slice::from_raw_parts((value as *const T).cast::<u8>(), core::mem::size_of::<T>()) }
}

/// Reads a [`Pod`] value at `offset` of `bytes`; `None` if it does not fit.
pub fn read<T: Pod>(bytes: &[u8], offset: usize) -> Option<T> {
    let end = offset.checked_add(core::mem::size_of::<T>())?;
    let src = bytes.get(offset..end)?;
    // SAFETY: `src` holds size_of::<T>() bytes and every bit pattern is a valid `T` (Pod);
    // read_unaligned has no alignment requirement.
    Some(unsafe { core::ptr::read_unaligned(src.as_ptr().cast::<T>()) })
}

const _: () = assert!(core::mem::size_of::<Stats>() == 384);
const _: () = assert!(core::mem::size_of::<PlanHeader>() == 32 + PATH_LEN);
const _: () = assert!(core::mem::size_of::<PlanTarget>() == PATH_LEN + 24 + EXPECTED_LEN + 16);
const _: () = assert!(core::mem::size_of::<AgentHealth>() == 32);
const _: () = assert!(core::mem::size_of::<CountersHeader>() == 40 + 32 + 4 * MAX_SLOTS + 56);
const _: () = assert!(
    core::mem::size_of::<Counters>()
        == core::mem::size_of::<CountersHeader>()
            + 384 * (IO_KINDS + MAX_SLOTS * (SHARDS + 1))
            + core::mem::size_of::<ProcessEntry>() * MAX_PROCESSES
);
const _: () = assert!(core::mem::size_of::<ProcessEntry>() == 24);
// Shards and slots start on cache lines (relative to the page-aligned mapping), so a shard's
// single writer never shares a line with another thread.
const _: () = assert!(core::mem::size_of::<CountersHeader>().is_multiple_of(64));
const _: () = assert!(core::mem::offset_of!(Counters, shards) % 64 == 0);
const _: () = assert!(core::mem::size_of::<Stats>().is_multiple_of(64));
const _: () = assert!(core::mem::offset_of!(Stats, bytes) == stats_offset::BYTES as usize);
const _: () = assert!(core::mem::offset_of!(Stats, total_ns) == stats_offset::TOTAL_NS as usize);
const _: () = assert!(core::mem::offset_of!(Stats, hist) == stats_offset::HIST as usize);
// Stats start on 8-byte boundaries inside Counters (atomics need it).
const _: () = assert!(core::mem::offset_of!(Counters, io) % 8 == 0);
