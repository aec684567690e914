//! `nesquic-agent` (`libnesquic_agent.so`): Nesquic's user-space probes, injected into a LUT
//! process with `LD_PRELOAD`. An ELF constructor runs before `main` and before any LUT thread:
//! it maps the counters file, reads the plan, inline-hooks the planned functions (a `jmp rel32`
//! to a generated trampoline that counts, or times with a per-thread shadow stack) and turns on
//! the interposed libc I/O wrappers. Counts go straight into shared memory: the LUT makes no
//! system call to report anything.
//!
//! It must not know about QUIC, roles or eBPF: the plan says what to hook, the counters layout
//! (`nesquic-agent-abi`) is all it shares with Nesquic. It must never change the LUT's behaviour:
//! any problem leaves the function unpatched and is recorded in the counters header.

/// libc's next definition (`dlsym(RTLD_NEXT)`) of slot `$i` of a module's `$real`/`$names`
/// tables, as type `$t`; a missing libc symbol is unrecoverable. Defined before the modules
/// that use it.
macro_rules! next_libc_fn {
    ($real:ident, $names:ident, $i:expr, $t:ty) => {{
        let p = $crate::io::resolve(&$real[$i], $names[$i]);
        if p == 0 {
            $crate::io::missing_symbol();
        }
        // SAFETY: dlsym returned libc's definition of this name, whose C type is `$t`.
        unsafe { std::mem::transmute::<usize, $t>(p) }
    }};
}

mod counters;
mod emit;
mod env;
mod exec;
mod hook;
mod io;
mod near;
mod objects;
mod plan;
mod shard;
mod timing;
mod tsc;

use nesquic_agent_abi as abi;

/// Runs before `main` (and before the LUT's own constructors in the executable).
extern "C" fn agent_init() {
    let started = thread_cpu_ns();
    let paths = env::agent_vars();
    let Some(counters) = paths.counters.as_deref().and_then(counters::map) else {
        // Nowhere to count: stay inert (the I/O wrappers pass straight through).
        env::remove_agent_vars();
        return;
    };
    shard::init();
    let plan = paths.plan.as_deref().map(plan::read);
    if matches!(&plan, Some(Ok(p)) if p.header.flags & abi::PLAN_FOLLOW != 0) {
        exec::follow();
    } else {
        env::remove_agent_vars();
    }
    counters::register_process();
    let tsc_mult = match &plan {
        Some(Ok(p)) if p.header.tsc_mult != 0 => p.header.tsc_mult,
        _ => tsc::calibrate(),
    };
    tsc::set_mult(tsc_mult);
    // Every process of a followed command writes the same values here.
    counters.header.tsc_mult = tsc_mult;
    match plan {
        None => counters.header.plan_status = abi::plan_status::NONE,
        Some(Err(status)) => counters.header.plan_status = status,
        Some(Ok(plan)) => {
            counters.header.plan_status = abi::plan_status::OK;
            if plan.header.flags & abi::PLAN_IO != 0 {
                io::enable();
                counters.header.io_interposed = 1;
            }
            hook::apply_plan(plan.targets);
        }
    }
    // The constructor runs on the main thread before any other: its CPU time is the agent's
    // start-up cost to the process (the dynamic loader's mapping of the agent comes before).
    counters::add_init_cpu(thread_cpu_ns().saturating_sub(started));
    counters::publish_ready();
}

/// CPU time of the calling thread, ns (0 if the clock cannot be read).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

// The constructor: the dynamic loader calls every `.init_array` entry of the object once it and
// its dependencies are relocated, before the executable's `main`.
#[used]
#[link_section = ".init_array"]
static AGENT_INIT: extern "C" fn() = agent_init;
