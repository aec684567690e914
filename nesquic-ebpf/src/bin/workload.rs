//! `nesquic-workload`: a process whose packet I/O and function calls are known exactly, for
//! checking what the probes report. It makes, over loopback:
//! - 7 `sendmsg` of one 1000-byte datagram, received by 7 `recvmsg`, then 1 `recvmsg` -> EAGAIN;
//! - 3 `sendmmsg` of 2 GSO messages x 5 segments x 1200 bytes (30 datagrams), received with
//!   GRO + `recvmmsg` (how many calls the kernel needs is counted by the I/O layer);
//! - 4 `sendto` of 500 bytes, received by 4 `recvfrom`;
//! - over one TCP connection: 3 `write` of 1000 bytes, 1 `writev` of 2 x 500, 2 `send` of 500
//!   (the `sendto` system call: bytes but no datagrams, on a stream socket), 1 `sendfile` of a
//!   4000-byte file, read with `read` (as many calls as the kernel needs) and one final `readv`
//!   that sees the end of the stream; the same calls on a file and a pipe, which are not network
//!   I/O;
//! - 50 calls of `nesquic_workload_tick` and 5 of `nesquic_workload_sleep_1ms`.
//!
//! It writes what it did (from its own counters) as JSON to the path given with `--report`.
//! `--spin MS` instead burns MS milliseconds of CPU, 50% in one function, 20% in another and 30%
//! in `memcpy` called by a third (for the sampling profile). `--spin-read MS` burns MS
//! milliseconds mostly in the kernel instead: `read` of 1 MiB from /dev/zero, over and over.
//! `--phases MS SHIFT_US OUT` spins in `nesquic_workload_phase_a` for the first 2 ms of every
//! 4 ms window of CLOCK_MONOTONIC (shifted by SHIFT_US) and in `_phase_b` for the other 2 ms
//! (the profile's fidelity against timer-driven work; `phases`).
//! `--steady MS PERIOD_US OUT` calls `nesquic_workload_tick` at a fixed rate (duty-cycle tests).
//! `--calibrate ITERATIONS CALLS OUT` calls each calibration function (`nesquic_cal_push`,
//! `_nop`, `_step`: the same busy loop behind a `push`, a 5-byte NOP or a `mov` as first
//! instruction, i.e. the three kinds of uprobe site) CALLS times and writes the mean wall time per
//! call it measured itself as JSON to OUT: with probes attached that includes their full cost.
//!
//! For the user-space agent it also calls `nesquic_workload_recurse` (5 nested calls, each busy
//! for 200 us plus its inner calls), `nesquic_workload_short` (3 bytes: too short for a jump) and
//! `nesquic_workload_jump_back` (branches back into its first bytes) once each; `--child-report
//! PATH` makes it start a shell that writes what it inherited to PATH; `--agent-calibrate CALLS
//! ROUNDS OUT` times `nesquic_agent_cal_count`/`_time` against their never-probed twin.
//! `--hammer THREADS CALLS OUT`: THREADS threads each call `nesquic_workload_args` (8 integer
//! arguments, two on the stack, 8 floats, result in rax:rdx) and `nesquic_workload_fargs`
//! (floats in, result in xmm0:xmm1, calls `_args` inside) CALLS times, check every result
//! against the same arithmetic done inline, and write the counts and mismatches to OUT (exit 1
//! on any mismatch): a probe that clobbers a register shows here.
//! `--dlopen LIB CALLS OUT`: after start-up, `dlopen(LIB)`, call its `nesquic_fixture_work`
//! CALLS times, then let it `dlopen` its plugin by bare name (found on LIB's own RUNPATH) and
//! call the plugin's `nesquic_plugin_work` CALLS times; writes what it did to OUT.
//! `--lost DEEP ESCAPES OUT`: DEEP nested calls of `nesquic_workload_deep` (deeper than the agent's
//! shadow stack: calls it cannot time) and ESCAPES calls of `nesquic_workload_escape`, which
//! leaves its frame without returning, as longjmp does.
//! `--io-hammer THREADS CALLS OUT` and `--io-calibrate CALLS ROUNDS OUT`: packet I/O from many
//! threads, and the cost of one wrapped call (`io_modes`).

#[path = "workload/io_modes.rs"]
mod io_modes;
#[path = "workload/phases.rs"]
mod phases;
#[path = "workload/rounds.rs"]
mod rounds;

use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

#[cfg(target_arch = "x86_64")]
use nesquic_ebpf::workload_report::{to_lines, AgentCalibrateRound, CalibrateLine};
use nesquic_io::{IoConfig, IoSwitches, RecvMeta, Transmit, UdpIo};

pub const TICKS: u64 = 50;
pub const SLEEPS: u64 = 5;
/// Nesting of `nesquic_workload_recurse`: calls = RECURSION + 1.
pub const RECURSION: u64 = 4;
/// Busy time of each `nesquic_workload_recurse` level, ns.
pub const RECURSE_BUSY_NS: u64 = 200_000;

/// Recursive: `depth` inner calls, then busy for 200 us; every level's time includes the
/// levels below it.
#[no_mangle]
#[inline(never)]
pub extern "C" fn nesquic_workload_recurse(depth: u64) -> u64 {
    let entered = std::time::Instant::now();
    let inner = if depth > 0 { nesquic_workload_recurse(std::hint::black_box(depth - 1)) } else { 0 };
    let start = std::time::Instant::now();
    while (start.elapsed().as_nanos() as u64) < RECURSE_BUSY_NS {
        std::hint::spin_loop();
    }
    RECURSE_TOTAL_NS.fetch_add(entered.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
    std::hint::black_box(inner + 1)
}

/// Sum over every `nesquic_workload_recurse` call of its own wall time (nested time included).
static RECURSE_TOTAL_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

// Sites the user-space agent must refuse: a 3-byte function, and one whose loop branches back
// into its first 5 bytes. Their bodies are fixed in assembly so the compiler cannot change them.
#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".globl nesquic_workload_short",
    ".type nesquic_workload_short,@function",
    "nesquic_workload_short:",
    "xor eax, eax",
    "ret",
    ".size nesquic_workload_short, .-nesquic_workload_short",
    ".globl nesquic_workload_jump_back",
    ".type nesquic_workload_jump_back,@function",
    "nesquic_workload_jump_back:",
    // rdi = n >= 1: eax = n, by counting up.
    "xor eax, eax",
    "6: inc eax",
    "cmp eax, edi",
    "jb 6b",
    "ret",
    ".size nesquic_workload_jump_back, .-nesquic_workload_jump_back",
    // Starts with a RIP-relative load: the agent must rewrite its displacement in the
    // trampoline (the relocating path; plain prologues are copied as they are).
    ".globl nesquic_workload_rip_relative",
    ".type nesquic_workload_rip_relative,@function",
    "nesquic_workload_rip_relative:",
    "mov rax, qword ptr [rip + {seed}]",
    "add rax, rdi",
    "ret",
    ".size nesquic_workload_rip_relative, .-nesquic_workload_rip_relative",
    // Agent calibration: three identical bodies; only _count and _time are ever hooked.
    ".globl nesquic_agent_cal_count",
    ".type nesquic_agent_cal_count,@function",
    ".p2align 4",
    "nesquic_agent_cal_count:",
    "lea rax, [rdi + 1]",
    "imul rax, rax",
    "ret",
    ".size nesquic_agent_cal_count, .-nesquic_agent_cal_count",
    ".globl nesquic_agent_cal_time",
    ".type nesquic_agent_cal_time,@function",
    ".p2align 4",
    "nesquic_agent_cal_time:",
    "lea rax, [rdi + 1]",
    "imul rax, rax",
    "ret",
    ".size nesquic_agent_cal_time, .-nesquic_agent_cal_time",
    ".globl nesquic_agent_cal_twin",
    ".type nesquic_agent_cal_twin,@function",
    ".p2align 4",
    "nesquic_agent_cal_twin:",
    "lea rax, [rdi + 1]",
    "imul rax, rax",
    "ret",
    ".size nesquic_agent_cal_twin, .-nesquic_agent_cal_twin",
    // `--lost`: calls the agent cannot record. `_deep(n)` calls itself until n calls are nested
    // (all in flight at once); a timed hook loses those beyond its shadow stack's depth.
    ".globl nesquic_workload_deep",
    ".type nesquic_workload_deep,@function",
    ".p2align 4",
    "nesquic_workload_deep:",
    "push rbp",
    "mov rbp, rsp",
    "push rbx",
    "sub rsp, 8",
    "dec rdi",
    "jz 2f",
    "call nesquic_workload_deep",
    "2:",
    "add rsp, 8",
    "pop rbx",
    "pop rbp",
    "ret",
    ".size nesquic_workload_deep, .-nesquic_workload_deep",
    // `_escape(rsp, ip)` never returns: it resumes its caller at `ip` with the stack pointer
    // `rsp` (what longjmp does), leaving a timed hook's entry for it behind.
    ".globl nesquic_workload_escape",
    ".type nesquic_workload_escape,@function",
    ".p2align 4",
    "nesquic_workload_escape:",
    "push rbp",
    "mov rbp, rsp",
    "mov rsp, rdi",
    "jmp rsi",
    ".size nesquic_workload_escape, .-nesquic_workload_escape",
    // `_escapes(n)`: n calls of `_escape` from one frame, then a normal return (which is what
    // finds the entries the escapes left behind).
    ".globl nesquic_workload_escapes",
    ".type nesquic_workload_escapes,@function",
    ".p2align 4",
    "nesquic_workload_escapes:",
    "push rbp",
    "push rbx",
    "push r12",
    "push r13",
    "sub rsp, 8",
    "mov rbx, rdi",
    "3:",
    "test rbx, rbx",
    "jz 4f",
    "mov rdi, rsp",
    "lea rsi, [rip + 5f]",
    "call nesquic_workload_escape",
    "5:",
    "dec rbx",
    "jmp 3b",
    "4:",
    "add rsp, 8",
    "pop r13",
    "pop r12",
    "pop rbx",
    "pop rbp",
    "ret",
    ".size nesquic_workload_escapes, .-nesquic_workload_escapes",
    seed = sym WORKLOAD_SEED,
);

/// What `nesquic_workload_rip_relative` reads through its RIP-relative first instruction.
#[cfg(target_arch = "x86_64")]
#[no_mangle]
static WORKLOAD_SEED: u64 = 1000;
/// Calls of `nesquic_workload_rip_relative`: each returns `WORKLOAD_SEED + i`.
const RIP_RELATIVE_CALLS: u64 = 7;

#[cfg(target_arch = "x86_64")]
extern "C" {
    fn nesquic_workload_short() -> u64;
    fn nesquic_workload_jump_back(n: u64) -> u64;
    fn nesquic_workload_rip_relative(x: u64) -> u64;
    fn nesquic_agent_cal_count(x: u64) -> u64;
    fn nesquic_agent_cal_time(x: u64) -> u64;
    fn nesquic_agent_cal_twin(x: u64) -> u64;
    fn nesquic_workload_deep(n: u64);
    fn nesquic_workload_escapes(n: u64);
}

/// `--lost DEEP ESCAPES OUT`: DEEP nested calls of `nesquic_workload_deep`, then ESCAPES calls of
/// `nesquic_workload_escape` that never return, from one call of `nesquic_workload_escapes`;
/// writes what it did to OUT.
#[cfg(target_arch = "x86_64")]
fn lost_mode(deep: u64, escapes: u64, out: &str) -> std::io::Result<()> {
    if deep > 0 {
        // SAFETY: the assembly above recurses `deep` times (32 bytes of stack each) and preserves
        // every callee-saved register.
        unsafe { nesquic_workload_deep(std::hint::black_box(deep)) };
    }
    // SAFETY: as above; each escape resumes the loop with its own stack pointer, so the
    // function returns normally.
    unsafe { nesquic_workload_escapes(std::hint::black_box(escapes)) };
    std::fs::write(out, format!("{{\"deep\":{deep},\"escapes\":{escapes}}}\n"))
}

/// `--agent-calibrate CALLS ROUNDS OUT`: per round, CALLS calls of each calibration function
/// in alternating batches; one JSON line per round with the mean ns per call of each.
#[cfg(target_arch = "x86_64")]
fn agent_calibrate_mode(calls: u64, rounds: u64, out: &str) -> std::io::Result<()> {
    const BATCH: u64 = 1000;
    let functions: [unsafe extern "C" fn(u64) -> u64; 3] =
        [nesquic_agent_cal_count, nesquic_agent_cal_time, nesquic_agent_cal_twin];
    let time_batch = |f: unsafe extern "C" fn(u64) -> u64| {
        let f = std::hint::black_box(f);
        let start = std::time::Instant::now();
        for i in 0..BATCH {
            // SAFETY: the assembly above reads rdi and writes rax only.
            std::hint::black_box(unsafe { f(i) });
        }
        start.elapsed().as_nanos() as f64
    };
    let lines: Vec<AgentCalibrateRound> =
        rounds::alternating_rounds::<3>(rounds, calls, BATCH, |k| time_batch(functions[k]))
            .into_iter()
            .map(|[count_ns, time_ns, twin_ns]| AgentCalibrateRound { count_ns, time_ns, twin_ns })
            .collect();
    std::fs::write(out, to_lines(&lines)?)
}

/// Two integers returned in rax:rdx.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntPair {
    pub lo: u64,
    pub hi: u64,
}

/// Two floats returned in xmm0:xmm1.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloatPair {
    pub a: f64,
    pub b: f64,
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn mix_ints(a: u64, b: u64, c: u64, d: u64, e: u64, f: u64, g: u64, h: u64, x: [f64; 8]) -> IntPair {
    let lo = a
        ^ b.rotate_left(7)
        ^ c.wrapping_mul(3)
        ^ d.rotate_left(19)
        ^ e.wrapping_mul(5)
        ^ f.rotate_left(29)
        ^ g.wrapping_mul(7)
        ^ h.rotate_left(41);
    let s: f64 = x.iter().enumerate().map(|(k, v)| v * (k + 1) as f64).sum();
    IntPair { lo, hi: s.to_bits() ^ lo }
}

/// Every argument register, two stack arguments and both integer result registers in use.
#[no_mangle]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn nesquic_workload_args(
    a: u64,
    b: u64,
    c: u64,
    d: u64,
    e: u64,
    f: u64,
    g: u64,
    h: u64,
    x0: f64,
    x1: f64,
    x2: f64,
    x3: f64,
    x4: f64,
    x5: f64,
    x6: f64,
    x7: f64,
) -> IntPair {
    std::hint::black_box(mix_ints(a, b, c, d, e, f, g, h, [x0, x1, x2, x3, x4, x5, x6, x7]))
}

type ArgsFn = extern "C" fn(u64, u64, u64, u64, u64, u64, u64, u64, f64, f64, f64, f64, f64, f64, f64, f64) -> IntPair;

#[inline(always)]
fn mix_floats(x: [f64; 8], inner: IntPair) -> FloatPair {
    FloatPair { a: x[0] * x[1] + x[2] - x[3] + (inner.lo >> 11) as f64, b: x[4] / (x[5] + 1.0) + x[6] * x[7] }
}

fn args_of(i: u64) -> ([u64; 8], [f64; 8]) {
    let ints = [i, i ^ 1, i + 2, i * 3, !i, i << 5, i, i.rotate_left(9)];
    let floats = std::array::from_fn(|k| i as f64 * 0.5 + k as f64);
    (ints, floats)
}

/// Floats in, both float result registers out, and a nested probed call.
#[no_mangle]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn nesquic_workload_fargs(
    x0: f64,
    x1: f64,
    x2: f64,
    x3: f64,
    x4: f64,
    x5: f64,
    x6: f64,
    x7: f64,
    i: u64,
) -> FloatPair {
    let (n, x) = args_of(i);
    let args: ArgsFn = std::hint::black_box(nesquic_workload_args);
    let inner = args(n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]);
    std::hint::black_box(mix_floats([x0, x1, x2, x3, x4, x5, x6, x7], inner))
}

/// `--hammer THREADS CALLS OUT`.
fn hammer_mode(threads: u64, calls: u64, out: &str) -> std::io::Result<bool> {
    let mismatches = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let args: ArgsFn = std::hint::black_box(nesquic_workload_args);
                let fargs: extern "C" fn(f64, f64, f64, f64, f64, f64, f64, f64, u64) -> FloatPair =
                    std::hint::black_box(nesquic_workload_fargs);
                let mut bad = 0;
                for i in 0..calls {
                    let (n, x) = args_of(i);
                    let want = mix_ints(n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], x);
                    let got = args(
                        n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7],
                    );
                    bad += u64::from(got != want);
                    let want = mix_floats(x, want);
                    let got = fargs(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], i);
                    bad += u64::from(got.a.to_bits() != want.a.to_bits() || got.b.to_bits() != want.b.to_bits());
                }
                mismatches.fetch_add(bad, std::sync::atomic::Ordering::Relaxed);
            });
        }
    });
    let bad = mismatches.into_inner();
    let json = format!(
        "{{\"nesquic_workload_args\":{},\"nesquic_workload_fargs\":{},\"mismatches\":{bad}}}\n",
        2 * threads * calls,
        threads * calls
    );
    std::fs::write(out, json)?;
    Ok(bad == 0)
}

/// `--dlopen LIB CALLS OUT`.
fn dlopen_mode(lib: &str, calls: u64, out: &str) -> Result<(), String> {
    let sym = |handle: *mut libc::c_void, name: &std::ffi::CStr| {
        // SAFETY: a handle from dlopen and a NUL-terminated name.
        let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
        if p.is_null() {
            Err(format!("{lib}: no {name:?}"))
        } else {
            Ok(p)
        }
    };
    let c_lib = std::ffi::CString::new(lib).map_err(|e| e.to_string())?;
    // SAFETY: dlopen of a NUL-terminated path.
    let handle = unsafe { libc::dlopen(c_lib.as_ptr(), libc::RTLD_NOW) };
    if handle.is_null() {
        return Err(format!("dlopen {lib} failed"));
    }
    // SAFETY: the fixture defines these with exactly these signatures.
    let (work, load_plugin) = unsafe {
        (
            std::mem::transmute::<*mut libc::c_void, extern "C" fn(u64) -> u64>(sym(handle, c"nesquic_fixture_work")?),
            std::mem::transmute::<*mut libc::c_void, extern "C" fn(*const libc::c_char) -> *mut libc::c_void>(sym(
                handle,
                c"nesquic_fixture_load_plugin",
            )?),
        )
    };
    let mut bad = 0u64;
    for i in 0..calls {
        bad += u64::from(work(i) != (i + 1).wrapping_mul(i + 1));
    }
    // A bare name: glibc searches the *calling* object's RUNPATH ($ORIGIN/plugins of the fixture).
    let plugin = load_plugin(c"libnesquic_plugin.so".as_ptr());
    let mut plugin_calls = 0;
    if !plugin.is_null() {
        // SAFETY: the plugin defines it with this signature.
        let plugin_work = unsafe {
            std::mem::transmute::<*mut libc::c_void, extern "C" fn(u64) -> u64>(sym(plugin, c"nesquic_plugin_work")?)
        };
        for i in 0..calls {
            bad += u64::from(plugin_work(i) != (i ^ 0x55).wrapping_mul(7));
            plugin_calls += 1;
        }
    }
    let json = format!(
        "{{\"nesquic_fixture_work\":{calls},\"nesquic_plugin_work\":{plugin_calls},\"plugin_loaded\":{},\"mismatches\":{bad}}}\n",
        !plugin.is_null()
    );
    std::fs::write(out, json).map_err(|e| format!("{out}: {e}"))?;
    if bad != 0 {
        return Err(format!("{bad} wrong results"));
    }
    Ok(())
}

/// A function the uprobe tests count.
#[no_mangle]
#[inline(never)]
pub extern "C" fn nesquic_workload_tick(i: u64) -> u64 {
    std::hint::black_box(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// A function the uprobe tests time (~1 ms).
#[no_mangle]
#[inline(never)]
pub extern "C" fn nesquic_workload_sleep_1ms() {
    std::thread::sleep(Duration::from_millis(1));
}

// The profile tests' two busy functions: the same multiply-add chain of `rdi` iterations (at
// least 1), in assembly and aligned alike (one macro writes all three), so an iteration of either
// costs exactly the same on any CPU or emulator. Their shares of the samples are then the ratio
// of their iteration counts, which no clock read decides (under QEMU a clock read is a trap to
// the emulated HPET, and checking the time between coarse batches let one function overshoot
// its time). Each has its own multiplier, so no two bodies are byte-identical.
macro_rules! busy_loop {
    ($name:literal, $multiplier:literal) => {
        #[cfg(target_arch = "x86_64")]
        std::arch::global_asm!(
            concat!(".globl ", $name),
            concat!(".type ", $name, ",@function"),
            ".p2align 6",
            concat!($name, ":"),
            "mov rcx, rdi",
            "mov eax, 1",
            concat!("movabs rdx, ", $multiplier),
            ".p2align 6",
            "2: imul rax, rdx",
            "add rax, 1",
            "dec rcx",
            "jnz 2b",
            "ret",
            concat!(".size ", $name, ", .-", $name),
        );
    };
}
busy_loop!("nesquic_workload_hot", 6364136223846793005);
busy_loop!("nesquic_workload_cold", 2862933555777941757);
busy_loop!("nesquic_workload_calibrate", 1442695040888963407);
busy_loop!("nesquic_workload_phase_a", 3935559000370003845);
busy_loop!("nesquic_workload_phase_b", 2685821657736338717);

#[cfg(target_arch = "x86_64")]
extern "C" {
    /// Busy for `iterations` (at least 1); the profile tests give it 50% of the time.
    fn nesquic_workload_hot(iterations: u64) -> u64;
    /// Like `nesquic_workload_hot`; the profile tests give it 20% of the time.
    fn nesquic_workload_cold(iterations: u64) -> u64;
    /// The same loop again, timed to size the other two (its samples are nobody's share).
    fn nesquic_workload_calibrate(iterations: u64) -> u64;
}

/// Iterations of the busy loop per millisecond: the fastest of three timed runs, since a run
/// can only be slowed (preempted, or an emulator's translation), never sped up.
#[cfg(target_arch = "x86_64")]
fn busy_iterations_per_ms() -> u64 {
    const PROBE: u64 = 1_000_000;
    let fastest = (0..3)
        .map(|_| {
            let start = std::time::Instant::now();
            // SAFETY: an assembly leaf with the C ABI above; any iteration count >= 1.
            std::hint::black_box(unsafe { nesquic_workload_calibrate(PROBE) });
            start.elapsed()
        })
        .min()
        .unwrap_or(Duration::from_millis(1)); // invariant: three runs, never empty
    (PROBE as f64 / fastest.as_secs_f64().max(1e-9) / 1e3).max(1.0) as u64
}

/// Copies 64 KiB with libc's `memcpy` (a frameless assembly leaf, as in a seal that copies its
/// plaintext) until this thread has spent `cpu_ns` of CPU time in it. Named so the catalog's
/// `*_aead_*` rule claims it: the profile must put the copies in this function's component, not
/// in memory.
#[no_mangle]
#[inline(never)]
pub extern "C" fn nesquic_workload_aead_copy(cpu_ns: u64) -> u64 {
    const LEN: usize = 64 * 1024;
    extern "C" {
        fn memcpy(dest: *mut u8, src: *const u8, n: usize) -> *mut u8;
    }
    let (src, mut dst) = (vec![7u8; LEN], vec![0u8; LEN]);
    let start = thread_cpu_ns();
    let mut copies = 0u64;
    // A clock read (a system call: the thread's CPU clock has no vDSO path) per 16 copies,
    // ~40 us of them: under 1% of the phase.
    while thread_cpu_ns().saturating_sub(start) < cpu_ns {
        for _ in 0..16 {
            // SAFETY: both buffers hold LEN bytes and do not overlap.
            unsafe { memcpy(dst.as_mut_ptr(), src.as_ptr(), std::hint::black_box(LEN)) };
            copies += 1;
        }
    }
    std::hint::black_box(&dst);
    copies
}

/// This thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec to write; the clock always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

/// `--spin MS`: at least MS milliseconds of wall time, in rounds of 5-15 ms of CPU: 50% in
/// `nesquic_workload_hot`, 20% in `_cold` (by iteration count: exactly 5 to 2 in every round),
/// 30% in `memcpy` called by `nesquic_workload_aead_copy` (by the thread's CPU clock, however
/// the process is preempted: a copy phase of wall time lost its share to a busy process beside
/// it, 0.19 of the samples for 0.3, and one of a count of copies timed once varied as much).
///
/// Each round's length is drawn at random: rounds of a fixed length are periodic, and the
/// scheduler tick, which samples at fixed intervals too, can lock onto their phase and see one
/// function far more often than its share (measured on 6.1 under QEMU: hot/cold 4.3 for 2.5).
#[cfg(target_arch = "x86_64")]
fn spin_mode(ms: u64) {
    let per_ms = busy_iterations_per_ms();
    let start = std::time::Instant::now();
    // xorshift64, seeded from the clock: any sequence will do, it only has to be aperiodic.
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.subsec_nanos());
    let mut state = u64::from(seed) | 1 << 32;
    while start.elapsed() < Duration::from_millis(ms) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        // 0.5 .. 1.5 of the nominal 10 ms round, in 1/1024 steps.
        let scale = 512 + state % 1024;
        // SAFETY: assembly leaves with the C ABI declared above; the counts are >= 1.
        unsafe {
            std::hint::black_box(nesquic_workload_hot((5 * per_ms * scale / 1024).max(1)));
            std::hint::black_box(nesquic_workload_cold((2 * per_ms * scale / 1024).max(1)));
        }
        std::hint::black_box(nesquic_workload_aead_copy(3_000_000 * scale / 1024));
    }
}

/// Busy for `ms` milliseconds of wall time, nearly all of it in the kernel: clearing 1 MiB of
/// user memory per `read` of /dev/zero (the sampling profile must walk these kernel stacks).
fn spin_read_mode(ms: u64) -> std::io::Result<()> {
    use std::io::Read;
    let mut zero = std::fs::File::open("/dev/zero")?;
    let mut buf = vec![1u8; 1 << 20];
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_millis(ms) {
        zero.read_exact(&mut buf)?;
    }
    std::hint::black_box(&buf);
    Ok(())
}

// The calibration functions: a fixed busy loop of `rdi` iterations (at least 1) behind a chosen
// first instruction, written in assembly so the compiler cannot change what the probe sits on.
// Every loop starts on a 64-byte boundary: a two-instruction loop's speed depends on its
// alignment (measured: up to 2x), and the twins must run at exactly the same speed.
#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".globl nesquic_cal_push",
    ".type nesquic_cal_push,@function",
    "nesquic_cal_push:",
    "push rbp",
    "mov rcx, rdi",
    ".p2align 6",
    "2: dec rcx",
    "jnz 2b",
    "pop rbp",
    "ret",
    ".size nesquic_cal_push, .-nesquic_cal_push",
    ".globl nesquic_cal_nop",
    ".type nesquic_cal_nop,@function",
    "nesquic_cal_nop:",
    ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00",
    "mov rcx, rdi",
    ".p2align 6",
    "3: dec rcx",
    "jnz 3b",
    "ret",
    ".size nesquic_cal_nop, .-nesquic_cal_nop",
    ".globl nesquic_cal_step",
    ".type nesquic_cal_step,@function",
    "nesquic_cal_step:",
    "mov rcx, rdi",
    ".p2align 6",
    "4: dec rcx",
    "jnz 4b",
    "ret",
    ".size nesquic_cal_step, .-nesquic_cal_step",
    // The same loop under a name no calibration glob matches: never probed, it times the true
    // cost in the same run, under the same conditions, as its probed twins.
    ".globl nesquic_twin_loop",
    ".type nesquic_twin_loop,@function",
    "nesquic_twin_loop:",
    "mov rcx, rdi",
    ".p2align 6",
    "5: dec rcx",
    "jnz 5b",
    "ret",
    ".size nesquic_twin_loop, .-nesquic_twin_loop",
);

#[cfg(target_arch = "x86_64")]
extern "C" {
    fn nesquic_cal_push(iterations: u64);
    fn nesquic_cal_nop(iterations: u64);
    fn nesquic_cal_step(iterations: u64);
    fn nesquic_twin_loop(iterations: u64);
}

/// `--calibrate ITERATIONS CALLS OUT`: per calibration function, batches of its calls alternate
/// with batches of the never-probed twin; both are timed by this process's own clock.
#[cfg(target_arch = "x86_64")]
fn calibrate_mode(iterations: u64, calls: u64, out: &str) -> std::io::Result<()> {
    const BATCH: u64 = 10; // amortises the clock reads over several calls
    let iterations = iterations.max(1);
    let functions: [(&str, unsafe extern "C" fn(u64)); 3] = [
        ("nesquic_cal_push", nesquic_cal_push),
        ("nesquic_cal_nop", nesquic_cal_nop),
        ("nesquic_cal_step", nesquic_cal_step),
    ];
    let time_batch = |f: unsafe extern "C" fn(u64)| {
        let start = std::time::Instant::now();
        for _ in 0..BATCH {
            // SAFETY: the assembly above reads only rdi (>= 1) and clobbers rcx, caller-saved.
            unsafe { f(iterations) };
        }
        start.elapsed().as_nanos() as f64
    };
    let mut lines = Vec::new();
    for (name, f) in functions {
        // Warm up caches and the frequency governor, then measure.
        for _ in 0..(calls / BATCH).clamp(1, 10) {
            time_batch(f);
            time_batch(nesquic_twin_loop);
        }
        let (mut probed_ns, mut twin_ns, mut n) = (0.0, 0.0, 0);
        while n < calls {
            probed_ns += time_batch(f);
            twin_ns += time_batch(nesquic_twin_loop);
            n += BATCH;
        }
        lines.push(CalibrateLine {
            function: name.into(),
            calls: n,
            ns_per_call: probed_ns / n as f64,
            twin_ns_per_call: twin_ns / n as f64,
        });
    }
    std::fs::write(out, to_lines(&lines)?)
}

/// `--steady MS PERIOD_US OUT`: calls `nesquic_workload_tick` once every PERIOD_US for MS
/// milliseconds, paced by the clock (so the rate does not depend on what a probe costs, as long
/// as it costs less than the period), and writes the number of calls to OUT.
fn steady_mode(ms: u64, period_us: u64, out: &str) -> std::io::Result<()> {
    let start = std::time::Instant::now();
    let period = Duration::from_micros(period_us.max(1));
    let end = start + Duration::from_millis(ms);
    let mut next = start;
    let mut calls = 0u64;
    while next < end {
        while std::time::Instant::now() < next {
            std::hint::spin_loop();
        }
        std::hint::black_box(nesquic_workload_tick(calls));
        calls += 1;
        next += period;
    }
    std::fs::write(out, format!("{{\"calls\":{calls}}}\n"))
}

/// `FLAG A B OUT` (two numbers, then the file the mode writes); `None` without FLAG; exits 2
/// with `usage` when FLAG's arguments are malformed.
fn numbers_and_file<'a>(args: &'a [String], flag: &str, usage: &str) -> Option<(u64, u64, &'a str)> {
    let i = args.iter().position(|a| a == flag)?;
    let num = |k: usize| args.get(i + k).and_then(|v| v.parse::<u64>().ok());
    let (Some(a), Some(b), Some(out)) = (num(1), num(2), args.get(i + 3)) else {
        eprintln!("usage: nesquic-workload {flag} {usage}");
        std::process::exit(2);
    };
    Some((a, b, out))
}

/// Exits 1 with the error if a mode writing `out` failed.
fn exit_on_error(out: &str, result: std::io::Result<()>) {
    if let Err(e) = result {
        eprintln!("nesquic-workload: {out}: {e}");
        std::process::exit(1);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some((ms, period_us, out)) = numbers_and_file(&args, "--steady", "MS PERIOD_US OUT") {
        exit_on_error(out, steady_mode(ms, period_us, out));
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if let Some((iterations, calls, out)) = numbers_and_file(&args, "--calibrate", "ITERATIONS CALLS OUT") {
        exit_on_error(out, calibrate_mode(iterations, calls, out));
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if let Some((calls, rounds, out)) = numbers_and_file(&args, "--agent-calibrate", "CALLS ROUNDS OUT") {
        exit_on_error(out, agent_calibrate_mode(calls, rounds, out));
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if let Some((deep, escapes, out)) = numbers_and_file(&args, "--lost", "DEEP ESCAPES OUT") {
        exit_on_error(out, lost_mode(deep, escapes, out));
        return;
    }
    if let Some((threads, calls, out)) = numbers_and_file(&args, "--hammer", "THREADS CALLS OUT") {
        match hammer_mode(threads, calls, out) {
            Ok(true) => return,
            Ok(false) => {
                eprintln!("nesquic-workload: wrong results under probes (see {out})");
                std::process::exit(1);
            }
            Err(e) => exit_on_error(out, Err(e)),
        }
        return;
    }
    if let Some((threads, calls, out)) = numbers_and_file(&args, "--io-hammer", "THREADS CALLS OUT") {
        exit_on_error(out, io_modes::io_hammer_mode(threads, calls, out));
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--fd-reuse") {
        let (Some(calls), Some(out)) = (args.get(i + 1).and_then(|v| v.parse::<u64>().ok()), args.get(i + 2)) else {
            eprintln!("usage: nesquic-workload --fd-reuse CALLS OUT");
            std::process::exit(2);
        };
        exit_on_error(out, io_modes::fd_reuse_mode(calls, out));
        return;
    }
    if let Some((calls, rounds, out)) = numbers_and_file(&args, "--io-calibrate", "CALLS ROUNDS OUT") {
        exit_on_error(out, io_modes::io_calibrate_mode(calls, rounds, out));
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--dlopen") {
        let (Some(lib), Some(calls), Some(out)) =
            (args.get(i + 1), args.get(i + 2).and_then(|v| v.parse::<u64>().ok()), args.get(i + 3))
        else {
            eprintln!("usage: nesquic-workload --dlopen LIB CALLS OUT");
            std::process::exit(2);
        };
        if let Err(e) = dlopen_mode(lib, calls, out) {
            eprintln!("nesquic-workload: {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Some((ms, shift_us, out)) = numbers_and_file(&args, "--phases", "MS SHIFT_US OUT") {
        #[cfg(target_arch = "x86_64")]
        exit_on_error(out, phases::phases_mode(ms, shift_us, out, busy_iterations_per_ms()));
        #[cfg(not(target_arch = "x86_64"))]
        {
            eprintln!("nesquic-workload: --phases {ms} {shift_us} {out}: its busy loops are x86-64 assembly");
            std::process::exit(2);
        }
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--spin-read") {
        let ms = args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or(1000);
        if let Err(e) = spin_read_mode(ms) {
            eprintln!("nesquic-workload: /dev/zero: {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--spin") {
        let ms = args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or(1000);
        #[cfg(target_arch = "x86_64")]
        spin_mode(ms);
        #[cfg(not(target_arch = "x86_64"))]
        {
            eprintln!("nesquic-workload: --spin {ms}: its busy loops are x86-64 assembly");
            std::process::exit(2);
        }
        return;
    }
    if let Err(e) = run() {
        eprintln!("nesquic-workload: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let report = match args.iter().position(|a| a == "--report") {
        Some(i) => args.get(i + 1).cloned().ok_or("--report needs a path")?,
        None => return Err("usage: nesquic-workload --report PATH".into()),
    };
    let local: SocketAddr = "127.0.0.1:0".parse()?;
    let plain =
        IoConfig { switches: IoSwitches { gso: false, gro: false, mmsg: false, plain: false }, ..IoConfig::default() };
    let fast = IoConfig::default();

    // 7 x sendmsg -> 7 x recvmsg, then one EAGAIN.
    let (tx, rx) = (UdpIo::bind(local, &plain)?, UdpIo::bind(local, &plain)?);
    rx.set_read_timeout(Some(Duration::from_secs(5)))?;
    let payload = [7u8; 1000];
    for _ in 0..7 {
        tx.send(&[Transmit { destination: rx.local_addr()?, contents: &payload, segment_size: None }])?;
    }
    let mut buf = vec![0u8; 65536];
    let mut meta = [RecvMeta::default(); 1];
    for _ in 0..7 {
        rx.recv(&mut [IoSliceMut::new(&mut buf)], &mut meta)?;
    }
    rx.set_nonblocking(true)?;
    let would_block = rx.recv(&mut [IoSliceMut::new(&mut buf)], &mut meta);
    if !matches!(&would_block, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock) {
        return Err(format!("expected EAGAIN, got {would_block:?}").into());
    }

    // 3 x sendmmsg of two GSO messages -> GRO + recvmmsg.
    let (ftx, frx) = (UdpIo::bind(local, &fast)?, UdpIo::bind(local, &fast)?);
    frx.set_read_timeout(Some(Duration::from_secs(5)))?;
    let gso = vec![9u8; 5 * 1200];
    for _ in 0..3 {
        let t = Transmit { destination: frx.local_addr()?, contents: &gso, segment_size: Some(1200) };
        ftx.send(&[t, t])?;
    }
    let mut storage = vec![vec![0u8; 65536]; 32];
    let mut metas = [RecvMeta::default(); 32];
    while frx.counters().recv.bytes < 36_000 {
        let mut bufs: Vec<IoSliceMut<'_>> = storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        frx.recv(&mut bufs, &mut metas)?;
    }

    // 4 x sendto -> 4 x recvfrom (std uses exactly these syscalls).
    let (stx, srx) = (UdpSocket::bind(local)?, UdpSocket::bind(local)?);
    srx.set_read_timeout(Some(Duration::from_secs(5)))?;
    for _ in 0..4 {
        stx.send_to(&[5u8; 500], srx.local_addr()?)?;
    }
    let mut std_bytes = 0;
    for _ in 0..4 {
        std_bytes += srx.recv_from(&mut buf)?.0;
    }

    let tcp = tcp_file_calls()?;

    let mut acc = 0u64;
    for i in 0..TICKS {
        acc = acc.wrapping_add(nesquic_workload_tick(i));
    }
    let mut sleep_ns = 0u128;
    for _ in 0..SLEEPS {
        let start = std::time::Instant::now();
        nesquic_workload_sleep_1ms();
        sleep_ns += start.elapsed().as_nanos();
    }
    std::hint::black_box(acc);
    std::hint::black_box(nesquic_workload_recurse(std::hint::black_box(RECURSION)));
    let mut rip_relative_sum = 0u64;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the assembly functions above read rdi (and a static) and write rax only.
    unsafe {
        std::hint::black_box(nesquic_workload_short());
        std::hint::black_box(nesquic_workload_jump_back(std::hint::black_box(3)));
        for i in 0..RIP_RELATIVE_CALLS {
            rip_relative_sum += nesquic_workload_rip_relative(std::hint::black_box(i));
        }
    }
    if let Some(i) = args.iter().position(|a| a == "--child-report") {
        let path = args.get(i + 1).ok_or("--child-report needs a path")?;
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg("echo \"preload=$LD_PRELOAD\"; echo \"plan=$NESQUIC_AGENT_PLAN\"; echo \"maps=$(grep -c libnesquic_agent /proc/$$/maps)\"")
            .stdout(std::fs::File::create(path)?)
            .status()?;
        if !status.success() && status.code() != Some(1) {
            return Err(format!("child shell: {status}").into());
        }
    }

    let (p, f) = (tx.counters().send, ftx.counters().send);
    let (pr, fr) = (rx.counters().recv, frx.counters().recv);
    let json = serde_json::json!({
        "sendmsg": { "calls": p.syscalls, "bytes": p.bytes, "datagrams": p.datagrams, "eagain": p.would_block },
        "sendmmsg": { "calls": f.syscalls, "bytes": f.bytes, "datagrams": f.datagrams, "eagain": f.would_block },
        // 4 datagrams of 500 bytes, then 2 sends of 500 on the TCP connection (no datagram).
        "sendto": { "calls": 6, "bytes": 3000, "datagrams": 4, "eagain": 0 },
        "recvmsg": { "calls": pr.syscalls, "bytes": pr.bytes, "datagrams": pr.datagrams, "eagain": pr.would_block },
        "recvmmsg": { "calls": fr.syscalls, "bytes": fr.bytes, "datagrams": fr.datagrams, "eagain": fr.would_block },
        "recvfrom": { "calls": 4, "bytes": std_bytes, "datagrams": 4, "eagain": 0 },
        // A stream socket's calls move bytes, not datagrams.
        "write": { "calls": 3, "bytes": 3000, "datagrams": 0, "eagain": 0 },
        "writev": { "calls": 1, "bytes": 1000, "datagrams": 0, "eagain": 0 },
        "sendfile": { "calls": 1, "bytes": TCP_FILE_BYTES, "datagrams": 0, "eagain": 0 },
        "read": { "calls": tcp.reads, "bytes": tcp.read_bytes, "datagrams": 0, "eagain": 0 },
        "readv": { "calls": 1, "bytes": 0, "datagrams": 0, "eagain": 0 },
        "nesquic_workload_tick": TICKS,
        "nesquic_workload_sleep_1ms": SLEEPS,
        "nesquic_workload_recurse": RECURSION + 1,
        "nesquic_workload_rip_relative": RIP_RELATIVE_CALLS,
        "rip_relative_sum": rip_relative_sum,
        "sleep_ns": sleep_ns as u64,
        "recurse_ns": RECURSE_TOTAL_NS.load(std::sync::atomic::Ordering::Relaxed),
    });
    std::fs::write(&report, serde_json::to_string_pretty(&json)?)?;
    Ok(())
}

/// Bytes of the file `tcp_file_calls` sends with `sendfile`.
const TCP_FILE_BYTES: u64 = 4000;

/// What the TCP receiver's `read`s got (the kernel decides how many calls it takes).
struct TcpReads {
    reads: u64,
    read_bytes: u64,
}

/// The return value of a libc call that returns a byte count, as a Result.
fn check(r: isize, what: &str) -> Result<u64, Box<dyn std::error::Error>> {
    if r < 0 {
        return Err(format!("{what}: {}", std::io::Error::last_os_error()).into());
    }
    Ok(r as u64)
}

/// The file calls on a TCP socket (counted) and on a file and a pipe (not counted), all through
/// libc so each is exactly the system call named.
fn tcp_file_calls() -> Result<TcpReads, Box<dyn std::error::Error>> {
    use std::io::{Seek, Write};
    use std::os::fd::AsRawFd;

    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let tx = std::net::TcpStream::connect(listener.local_addr()?)?;
    let (rx, _) = listener.accept()?;
    rx.set_read_timeout(Some(Duration::from_secs(5)))?;
    let (txfd, rxfd) = (tx.as_raw_fd(), rx.as_raw_fd());

    let chunk = [3u8; 1000];
    for _ in 0..3 {
        // SAFETY: a live fd and a live 1000-byte buffer.
        check(unsafe { libc::write(txfd, chunk.as_ptr().cast(), chunk.len()) }, "write")?;
    }
    let half = [4u8; 500];
    let iov = [libc::iovec { iov_base: half.as_ptr() as *mut _, iov_len: 500 }; 2];
    // SAFETY: two iovecs over a live 500-byte buffer (only read from).
    check(unsafe { libc::writev(txfd, iov.as_ptr(), 2) }, "writev")?;
    for _ in 0..2 {
        // SAFETY: a live fd and a live 500-byte buffer.
        check(unsafe { libc::send(txfd, half.as_ptr().cast(), half.len(), 0) }, "send")?;
    }
    let path = std::env::temp_dir().join(format!("nesquic-workload-{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
    // Unlinked at once: the open fd keeps it while it is needed.
    std::fs::remove_file(&path)?;
    // Regular-file and pipe calls: the probes must not count these.
    for _ in 0..4 {
        // SAFETY: a live fd and a live 1000-byte buffer.
        check(unsafe { libc::write(file.as_raw_fd(), chunk.as_ptr().cast(), chunk.len()) }, "write file")?;
    }
    file.flush()?;
    file.rewind()?;
    let mut buf = vec![0u8; 65536];
    // SAFETY: a live fd and a live buffer of that length.
    check(unsafe { libc::read(file.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) }, "read file")?;
    let mut pipe = [0i32; 2];
    // SAFETY: a live two-int array.
    if unsafe { libc::pipe(pipe.as_mut_ptr()) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()).into());
    }
    // SAFETY: the pipe's fds, live buffers.
    check(unsafe { libc::write(pipe[1], chunk.as_ptr().cast(), 10) }, "write pipe")?;
    // SAFETY: as above.
    check(unsafe { libc::read(pipe[0], buf.as_mut_ptr().cast(), 10) }, "read pipe")?;
    // SAFETY: closing the two fds just opened, once.
    unsafe {
        libc::close(pipe[0]);
        libc::close(pipe[1]);
    }
    file.rewind()?;
    let mut offset: libc::off_t = 0;
    // SAFETY: live fds and a live offset.
    let sent =
        check(unsafe { libc::sendfile(txfd, file.as_raw_fd(), &mut offset, TCP_FILE_BYTES as usize) }, "sendfile")?;
    if sent != TCP_FILE_BYTES {
        return Err(format!("sendfile sent {sent} of {TCP_FILE_BYTES} bytes").into());
    }
    tx.shutdown(std::net::Shutdown::Write)?;

    let total = 3000 + 1000 + 1000 + TCP_FILE_BYTES;
    let mut got = TcpReads { reads: 0, read_bytes: 0 };
    while got.read_bytes < total {
        let want = (total - got.read_bytes) as usize;
        // SAFETY: a live fd and at most the buffer's length.
        let n = check(unsafe { libc::read(rxfd, buf.as_mut_ptr().cast(), want.min(buf.len())) }, "read")?;
        got.reads += 1;
        got.read_bytes += n;
        if n == 0 {
            return Err(format!("TCP stream ended after {} of {total} bytes", got.read_bytes).into());
        }
    }
    let end = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: one iovec over the live buffer.
    let eof = check(unsafe { libc::readv(rxfd, &end, 1) }, "readv")?;
    if eof != 0 {
        return Err(format!("readv after the whole stream got {eof} bytes").into());
    }
    Ok(got)
}
