//! Which probes `nesquic run` turns on when `--probe` is not given: the sampling profile at 251 Hz
//! (a prime rate, no phase in common with the tick's), packet I/O and counted crypto, each measured
//! near its cost floor. The profile pays a timer interrupt of its own per sample (~17 us here, perf's too:
//! bench/sampler-floor.md), ~0.4% of a busy CPU at 250 Hz; the scheduler tick would not, but its
//! fixed phase aliases with timer-driven work (docs/probes.md, bench/sampler-phase.md). Counted
//! crypto is 0.1-0.3% of a LUT's CPU by its own samples, 1.007x CPU per GB on quinn over 60 pairs
//! (bench/counted-crypto.md). `nesquic run --overhead` measures the set as one.
//! Without root the sampling profile samples the LUT's own processes in user mode only (no eBPF:
//! perf events `perf_event_paranoid` 2 allows), and packet I/O and counted crypto are the
//! user-space agent's, where it can count both sides. `--probe none` turns every probe off.

/// What `--probe none` says.
pub const NONE: &str = "none";

/// The probes `nesquic run` turns on by default.
pub const DEFAULT: &str = "profile,io,crypto";

/// The default where the user-space agent cannot count crypto: kernel uprobes would, at ~1.2 us
/// a call (0.47x quinn's goodput, docs/probe-overhead.md), far from free.
pub const WITHOUT_AGENT: &str = "profile,io";

/// The default without the privileges eBPF needs: the user-mode profile and what the user-space
/// agent counts.
pub const WITHOUT_ROOT: &str = "profile,io,crypto";

/// Without root, where the machine forbids even user-mode sampling: what the agent counts.
pub const WITHOUT_ROOT_OR_PERF: &str = "io,crypto";

/// The probe list when `--probe` was not given, or `None` (with the reason on stderr) when
/// probes cannot run: the sampling profile, packet I/O and counted crypto; without root, the
/// last two where the agent can count them.
pub fn choose(plan: &nesquic_engine::run::RunPlan) -> Option<String> {
    // Privileges and the agent are this host's: a role elsewhere is probed only on request.
    if plan.remote.any() {
        eprintln!("nesquic: running without probes: a role runs on another host (--probe LIST asks for them there)");
        return None;
    }
    if let Err(why) = nesquic_ebpf::preflight::check_privileges() {
        let sampling = nesquic_ebpf::profile::user_mode::allowed();
        return match (why_the_agent_cannot_count(plan), sampling) {
            (Some(agent), Err(no_perf)) => {
                eprintln!(
                    "nesquic: running without probes: {why}; the user-space agent cannot count here: {agent}; and \
                     user-mode sampling is off: {no_perf} (--probe none skips this note)"
                );
                None
            }
            (Some(agent), Ok(())) => {
                eprintln!(
                    "nesquic: probes: profile (the default without eBPF: user-mode samples of the LUT's own \
                     processes, time in the kernel not sampled; no io or crypto counts: {why}, and the user-space \
                     agent cannot count here: {agent}; --probe none for none)"
                );
                Some("profile".to_string())
            }
            (None, Err(no_perf)) => {
                eprintln!(
                    "nesquic: probes: {WITHOUT_ROOT_OR_PERF} (the default without eBPF, counted in user space by the \
                     agent; no sampling profile: {why}, and user-mode sampling is off: {no_perf}; --probe none for none)"
                );
                Some(WITHOUT_ROOT_OR_PERF.to_string())
            }
            (None, Ok(())) => {
                eprintln!(
                    "nesquic: probes: {WITHOUT_ROOT} (the default without eBPF: io and crypto counted in user space \
                     by the agent, the profile from user-mode samples of the LUT's own processes, time in the kernel \
                     not sampled; root adds it: {why}; --probe none for none)"
                );
                Some(WITHOUT_ROOT.to_string())
            }
        };
    }
    let set = match why_the_agent_cannot_count(plan) {
        None => DEFAULT,
        Some(why) => {
            eprintln!("nesquic: crypto is not counted by default here: {why} (--probe {DEFAULT} asks for it)");
            WITHOUT_AGENT
        }
    };
    eprintln!(
        "nesquic: probes: {set} (the default, near their cost floor: docs/probe-overhead.md; --probe none for none)"
    );
    Some(set.to_string())
}

/// Why the user-space agent cannot count a side's crypto calls, if it cannot (the backend's own
/// reasons, per side).
fn why_the_agent_cannot_count(plan: &nesquic_engine::run::RunPlan) -> Option<String> {
    use nesquic_engine::backend::{why_not_user_space, BackendChoice, KernelNeeds};
    if plan.probe_backend == BackendChoice::Kernel {
        return Some("--probe-backend kernel".into());
    }
    [(plan.lut.as_ref(), plan.binary.as_path()), (plan.client_lut(), plan.client_binary())].into_iter().find_map(
        |(lut, binary)| {
            let needs = KernelNeeds {
                duty: false,
                datagram_events: plan.qlog_datagrams,
                launched_by_shell: lut.launcher(binary) != binary,
                ..KernelNeeds::default()
            };
            why_not_user_space(binary, needs)
        },
    )
}
