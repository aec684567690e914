//! `--phases MS SHIFT_US OUT`: the sampling profile's fidelity test (issue 53). For MS
//! milliseconds of wall time the thread spins in `nesquic_workload_phase_a` during the first 2 ms
//! of every 4 ms window of CLOCK_MONOTONIC and in `nesquic_workload_phase_b` during the other
//! 2 ms, the windows shifted by SHIFT_US. The scheduler tick (HZ=250) fires at fixed 4 ms
//! boundaries of that clock, so it sees one function only; a sampler with no fixed phase sees
//! each at its share of the CPU.
//!
//! The thread reads the clock, then runs ~50 us of the phase's busy loop (a fixed iteration
//! count), and again. Both functions are the same assembly loop, so the iterations each ran are
//! its CPU time, however the thread was preempted: a process beside it that takes the CPU for a
//! while shifts wall-clock phases, but not this count. OUT gets the counts as JSON:
//! `{"chunks_a":..,"chunks_b":..,"cpu_ns_a":..,"cpu_ns_b":..,"chunk_iterations":..,"shift_us":..}`;
//! the profile's share of phase_a in the two functions' samples estimates
//! `cpu_ns_a / (cpu_ns_a + cpu_ns_b)`, the thread's CPU time in each (natively about the chunk
//! share; under QEMU TCG with the host busy, 40% of the chunks took 55% of the CPU time).

use std::time::{Duration, Instant};

/// The window and its first half, ns.
const WINDOW_NS: u64 = 4_000_000;
const HALF_NS: u64 = 2_000_000;

#[cfg(target_arch = "x86_64")]
extern "C" {
    /// Busy for `iterations` (at least 1): the first half of each window.
    fn nesquic_workload_phase_a(iterations: u64) -> u64;
    /// The same loop: the second half.
    fn nesquic_workload_phase_b(iterations: u64) -> u64;
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec to write; both clocks used here always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut t) };
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Whether `now` lies in the first half of its window, the windows starting `shift_ns` after
/// each multiple of 4 ms.
pub fn in_phase_a(now: u64, shift_ns: u64) -> bool {
    (now + WINDOW_NS - shift_ns % WINDOW_NS) % WINDOW_NS < HALF_NS
}

#[cfg(target_arch = "x86_64")]
pub fn phases_mode(ms: u64, shift_us: u64, out: &str, per_ms: u64) -> std::io::Result<()> {
    let chunk = (per_ms / 20).max(1);
    let shift_ns = shift_us * 1000;
    let (mut a, mut b) = (0u64, 0u64);
    // The thread's CPU time in each function, as the kernel accounts it (what a CPU-clock
    // sampler samples): under a VM whose vCPU the host preempts, the chunk count (work done)
    // and CPU time part ways, and the profile estimates the latter.
    let (mut cpu_a, mut cpu_b) = (0u64, 0u64);
    let mut cpu = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(ms) {
        let phase_a = in_phase_a(monotonic_ns(), shift_ns);
        // SAFETY: assembly leaves with the C ABI declared above; the count is >= 1.
        if phase_a {
            std::hint::black_box(unsafe { nesquic_workload_phase_a(chunk) });
            a += 1;
        } else {
            std::hint::black_box(unsafe { nesquic_workload_phase_b(chunk) });
            b += 1;
        }
        let now = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
        *if phase_a { &mut cpu_a } else { &mut cpu_b } += now.saturating_sub(cpu);
        cpu = now;
    }
    std::fs::write(
        out,
        format!(
            r#"{{"chunks_a":{a},"chunks_b":{b},"cpu_ns_a":{cpu_a},"cpu_ns_b":{cpu_b},"chunk_iterations":{chunk},"shift_us":{shift_us}}}"#
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_of_shifted_windows() {
        assert!(in_phase_a(0, 0) && in_phase_a(1_999_999, 0) && !in_phase_a(2_000_000, 0));
        assert!(!in_phase_a(3_999_999, 0) && in_phase_a(4_000_000, 0));
        assert!(!in_phase_a(0, 2_000_000) && in_phase_a(2_000_000, 2_000_000) && !in_phase_a(4_000_000, 2_000_000));
        // Shifted by 2 ms the windows start at 2, 6, 10 ms: 3.999999 ms is the end of one's first
        // half, 5.999999 ms the end of its second.
        assert!(in_phase_a(3_999_999, 2_000_000) && !in_phase_a(5_999_999, 2_000_000));
        assert!(in_phase_a(10_000, 5_000) && !in_phase_a(4_000, 5_000));
    }
}
