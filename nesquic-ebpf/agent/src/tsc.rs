//! Time stamps: `rdtsc` (constant and nonstop on the machines Nesquic runs on), converted to ns
//! with a factor Nesquic calibrated against CLOCK_MONOTONIC (or the agent, if the plan has none).

use std::sync::atomic::{AtomicU64, Ordering};

/// TSC to ns factor; the timing stubs read it too.
pub(crate) static MULT: AtomicU64 = AtomicU64::new(0);

/// The time stamp counter.
#[inline(always)]
pub fn now() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86-64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Sets the TSC to ns factor (`ns = ticks * mult >> 32`).
pub fn set_mult(mult: u64) {
    MULT.store(mult, Ordering::Relaxed);
}

/// Converts a tick count to ns.
#[inline(always)]
pub fn to_ns(ticks: u64) -> u64 {
    ((ticks as u128 * MULT.load(Ordering::Relaxed) as u128) >> 32) as u64
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Measures the factor over 2 ms of spinning (only when the plan carries none).
pub fn calibrate() -> u64 {
    let (t0, c0) = (monotonic_ns(), now());
    while monotonic_ns() - t0 < 2_000_000 {
        std::hint::spin_loop();
    }
    let (t1, c1) = (monotonic_ns(), now());
    let ticks = (c1 - c0).max(1);
    (((t1 - t0) as u128) << 32).checked_div(ticks as u128).unwrap_or(0) as u64
}
