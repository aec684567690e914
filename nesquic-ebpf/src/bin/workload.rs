//! `nesquic-workload`: a process whose packet I/O and function calls are known exactly, for
//! checking what the probes report. It makes, over loopback:
//! - 7 `sendmsg` of one 1000-byte datagram, received by 7 `recvmsg`, then 1 `recvmsg` -> EAGAIN;
//! - 3 `sendmmsg` of 2 GSO messages x 5 segments x 1200 bytes (30 datagrams), received with
//!   GRO + `recvmmsg` (how many calls the kernel needs is counted by the I/O layer);
//! - 4 `sendto` of 500 bytes, received by 4 `recvfrom`;
//! - 50 calls of `nesquic_workload_tick` and 5 of `nesquic_workload_sleep_1ms`.
//!
//! It writes what it did (from its own counters) as JSON to the path given with `--report`.
//! `--spin MS` instead burns MS milliseconds of CPU, 70% in one function and 30% in another (for
//! the sampling profile).
//! `--steady MS PERIOD_US OUT` calls `nesquic_workload_tick` at a fixed rate (duty-cycle tests).
//! `--calibrate ITERATIONS CALLS OUT` calls each calibration function (`nesquic_cal_push`,
//! `_nop`, `_step`: the same busy loop behind a `push`, a 5-byte NOP or a `mov` as first
//! instruction, i.e. the three kinds of uprobe site) CALLS times and writes the mean wall time per
//! call it measured itself as JSON to OUT: with probes attached that includes their full cost.

use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use nesquic_io::{IoConfig, IoSwitches, RecvMeta, Transmit, UdpIo};

pub const TICKS: u64 = 50;
pub const SLEEPS: u64 = 5;

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

/// Busy for `until`, checking the clock rarely so samples land in this function.
#[no_mangle]
#[inline(never)]
pub extern "C" fn nesquic_workload_hot(until_ns: u64) -> u64 {
    // A different constant than _cold: identical bodies would be folded into one symbol.
    spin(until_ns, 6_364_136_223_846_793_005)
}

/// Like [`nesquic_workload_hot`]; the profile test gives it 30% of the time.
#[no_mangle]
#[inline(never)]
pub extern "C" fn nesquic_workload_cold(until_ns: u64) -> u64 {
    spin(until_ns, 2_862_933_555_777_941_757)
}

#[inline(always)]
fn spin(until_ns: u64, multiplier: u64) -> u64 {
    let start = std::time::Instant::now();
    let mut x = 1u64;
    while (start.elapsed().as_nanos() as u64) < until_ns {
        for _ in 0..20_000 {
            x = std::hint::black_box(x.wrapping_mul(multiplier).wrapping_add(1));
        }
    }
    x
}

/// `--spin MS`: MS milliseconds of CPU, 70% in `nesquic_workload_hot`, 30% in `_cold`.
fn spin_mode(ms: u64) {
    let rounds = ms / 10;
    for _ in 0..rounds {
        std::hint::black_box(nesquic_workload_hot(7_000_000));
        std::hint::black_box(nesquic_workload_cold(3_000_000));
    }
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
        lines.push(format!(
            "{{\"function\":\"{name}\",\"calls\":{n},\"ns_per_call\":{},\"twin_ns_per_call\":{}}}",
            probed_ns / n as f64,
            twin_ns / n as f64
        ));
    }
    std::fs::write(out, lines.join("\n") + "\n")
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
    if let Some(i) = args.iter().position(|a| a == "--spin") {
        let ms = args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or(1000);
        spin_mode(ms);
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

    let mut acc = 0u64;
    for i in 0..TICKS {
        acc = acc.wrapping_add(nesquic_workload_tick(i));
    }
    for _ in 0..SLEEPS {
        nesquic_workload_sleep_1ms();
    }
    std::hint::black_box(acc);

    let (p, f) = (tx.counters().send, ftx.counters().send);
    let (pr, fr) = (rx.counters().recv, frx.counters().recv);
    let json = serde_json::json!({
        "sendmsg": { "calls": p.syscalls, "bytes": p.bytes, "datagrams": p.datagrams, "eagain": p.would_block },
        "sendmmsg": { "calls": f.syscalls, "bytes": f.bytes, "datagrams": f.datagrams, "eagain": f.would_block },
        "sendto": { "calls": 4, "bytes": 2000, "datagrams": 4, "eagain": 0 },
        "recvmsg": { "calls": pr.syscalls, "bytes": pr.bytes, "datagrams": pr.datagrams, "eagain": pr.would_block },
        "recvmmsg": { "calls": fr.syscalls, "bytes": fr.bytes, "datagrams": fr.datagrams, "eagain": fr.would_block },
        "recvfrom": { "calls": 4, "bytes": std_bytes, "datagrams": 4, "eagain": 0 },
        "nesquic_workload_tick": TICKS,
        "nesquic_workload_sleep_1ms": SLEEPS,
    });
    std::fs::write(&report, serde_json::to_string_pretty(&json)?)?;
    Ok(())
}
