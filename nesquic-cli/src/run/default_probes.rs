//! Which probes `nesquic run` turns on when `--probe` is not given: the ones measured within 2%
//! of goodput end to end (docs/probe-overhead.md), so the main command says where the CPU goes:
//! the sampling profile and packet I/O. Counted crypto is not among them: 0.6 ns a call in a
//! tight loop, but 3-4.5% of quinn's CPU per GB in two of three 100-150-pair runs
//! (bench/default-probes-pinned.md). `nesquic run --overhead` measures the set as one.
//! `--probe none` turns every probe off.

/// What `--probe none` says.
pub const NONE: &str = "none";

/// The probes `nesquic run` turns on by default.
pub const DEFAULT: &str = "profile,io";

/// The probe list when `--probe` was not given, or `None` (with the reason on stderr) when
/// probes cannot run: the sampling profile (49 Hz) and packet I/O.
pub fn choose(plan: &nesquic_engine::run::RunPlan) -> Option<String> {
    // Privileges and the agent are this host's: a role elsewhere is probed only on request.
    if plan.remote.any() {
        eprintln!("nesquic: running without probes: a role runs on another host (--probe LIST asks for them there)");
        return None;
    }
    if let Err(why) = nesquic_ebpf::preflight::check_privileges() {
        eprintln!("nesquic: running without probes: {why} (--probe none skips this note)");
        return None;
    }
    eprintln!(
        "nesquic: probes: {DEFAULT} (the default, the cheap ones: docs/probe-overhead.md; --probe none for none, --probe {DEFAULT},crypto to count crypto calls too)"
    );
    Some(DEFAULT.to_string())
}
