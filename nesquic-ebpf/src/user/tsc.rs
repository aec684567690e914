//! The TSC to ns factor handed to every agent: measured once per Nesquic process against
//! CLOCK_MONOTONIC (this VM's TSC is constant and nonstop, shared by all processes).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// `ns = ticks * mult >> 32`.
pub fn tsc_mult() -> u64 {
    static MULT: OnceLock<u64> = OnceLock::new();
    *MULT.get_or_init(|| measure(Duration::from_millis(20)))
}

fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86-64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

fn measure(over: Duration) -> u64 {
    let (t0, c0) = (Instant::now(), rdtsc());
    std::thread::sleep(over);
    let (ns, ticks) = (t0.elapsed().as_nanos(), rdtsc().wrapping_sub(c0).max(1));
    ((ns << 32) / u128::from(ticks)) as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_factor_is_plausible() {
        // 0.1 to 10 GHz.
        let ns_per_tick = super::tsc_mult() as f64 / 4_294_967_296.0;
        assert!((0.1..10.0).contains(&ns_per_tick), "{ns_per_tick} ns per tick");
    }
}
