//! `nesquic doctor`: what this kernel supports, tried rather than assumed (a probe is attached, a
//! qdisc is added in a throwaway namespace), which mechanism each probe kind will use, and what
//! to do about what is missing.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nesquic_ebpf::kernel_io::{self, Mechanism};
use serde::Serialize;

/// `nesquic doctor` arguments.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Also write the findings as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// One capability.
#[derive(Debug, Serialize)]
struct Check {
    name: &'static str,
    ok: bool,
    /// What was found, in the kernel's words where it answered.
    detail: String,
    /// What to do when it is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<&'static str>,
}

fn check(name: &'static str, result: std::result::Result<String, String>, fix: &'static str) -> Check {
    match result {
        Ok(detail) => Check { name, ok: true, detail, fix: None },
        Err(detail) => Check { name, ok: false, detail, fix: Some(fix) },
    }
}

fn exists(path: &str) -> std::result::Result<String, String> {
    if Path::new(path).exists() {
        Ok(path.to_string())
    } else {
        Err(format!("{path} missing"))
    }
}

/// Runs `nesquic doctor`.
pub fn execute(args: &DoctorArgs) -> Result<()> {
    let root = nesquic_ebpf::preflight::check_privileges().is_ok();
    let mut checks = vec![
        check(
            "privileges",
            if root { Ok("root or CAP_BPF + CAP_PERFMON".into()) } else { Err("not root".into()) },
            "run as root (sudo): every probe and --link veth need it; the rest of this list needs it to be tried",
        ),
        check("btf", exists("/sys/kernel/btf/vmlinux"), "use a kernel built with CONFIG_DEBUG_INFO_BTF=y (every probe needs it)"),
        check(
            "tracefs",
            nesquic_ebpf::preflight::ensure_tracefs().map(str::to_string).map_err(|e| e.to_string()),
            "mount -t tracefs tracefs /sys/kernel/tracing (--probe io needs the syscall tracepoints)",
        ),
        check(
            "uprobes",
            exists("/sys/bus/event_source/devices/uprobe"),
            "use a kernel with CONFIG_UPROBE_EVENTS=y (--probe crypto/uprobe:); or the user-space agent",
        ),
        check(
            "kprobes",
            kernel_io::probe(Mechanism::Kprobe).map(|()| "kprobe + kretprobe attached to udp_sendmsg".into()),
            "a kernel with CONFIG_KPROBES=y adds the kernel UDP path rows to --probe io",
        ),
        check(
            "fentry",
            kernel_io::probe(Mechanism::Fentry).map(|()| "fentry + fexit attached to udp_sendmsg".into()),
            "fentry needs BTF, a JIT with trampolines and no lockdown (lockdown=none at boot); kprobes do the same job slower",
        ),
        lockdown(),
        leftovers(),
    ];
    for (name, result) in nesquic_link::qdisc_support() {
        let (name, fix) = match name {
            "netem" => ("netem", "install the kernel's extra modules (sch_netem); without it loss uses tc-bpf and delay/jitter/reorder a userspace relay"),
            "tbf" => ("tbf", "a kernel with CONFIG_NET_SCH_TBF (--rate needs it unless netem is there)"),
            _ => ("clsact", "a kernel with CONFIG_NET_SCH_INGRESS (the tc-bpf loss filter needs it when netem is missing)"),
        };
        checks.push(check(name, result.map(|()| "qdisc added in a scratch namespace".into()), fix));
    }
    checks.push(memlock());
    checks.push(perf_events());
    checks.push(tick());
    let ok = |name: &str| checks.iter().any(|c| c.name == name && c.ok);
    let kernel_path = if ok("fentry") {
        "fentry/fexit on the kernel's UDP path".to_string()
    } else if ok("kprobes") {
        "kprobe/kretprobe on the kernel's UDP path (no fentry here)".to_string()
    } else {
        "none: no fentry, no kprobes here (the syscall rows stay)".to_string()
    };
    // The user-space agent needs nothing from the kernel; it is the default (--probe-backend auto).
    let agent = match nesquic_ebpf::user::agent_library() {
        Ok(_) => "user-space agent (default, no root)",
        Err(_) => "user-space agent MISSING (just build)",
    };
    let mechanisms = [
        (
            "io",
            format!(
                "{agent}: libc interposition; --probe-backend kernel: syscall tracepoints{}",
                if ok("tracefs") { "" } else { " (UNAVAILABLE: tracefs)" }
            ),
        ),
        ("io (kernel path)", kernel_path),
        (
            "crypto, uprobe:",
            format!(
                "{agent}: inline hooks; refused entries and --probe-backend kernel: {}",
                if ok("uprobes") { "uprobe (+ uretprobe with :time)" } else { "UNAVAILABLE: no uprobes" }
            ),
        ),
        (
            "profile",
            match (ok("perf_events"), ok("tick") && ok("btf")) {
                (true, true) => format!(
                    "perf_event cpu-clock at {} Hz (a prime rate: no phase in common with the tick); \
                     profile:HZ another rate; profile:tick the scheduler tick (tp_btf/hrtimer_expire_entry, \
                     can alias with timer-driven work)",
                    nesquic_ebpf::catalog::DEFAULT_PROFILE_HZ
                ),
                (true, false) => format!(
                    "perf_event cpu-clock at {} Hz; profile:HZ another rate (profile:tick UNAVAILABLE here)",
                    nesquic_ebpf::catalog::DEFAULT_PROFILE_HZ
                ),
                (false, _) => "UNAVAILABLE: perf events".to_string(),
            },
        ),
        ("--loss", if ok("netem") { "netem" } else { "tc-bpf filter (clsact)" }.into()),
        ("--delay/--jitter/--reorder", if ok("netem") { "netem" } else { "userspace relay" }.into()),
        ("--rate", if ok("netem") { "netem rate (with other conditions), else tbf" } else { "tbf" }.into()),
    ];
    print(&checks, &mechanisms);
    if let Some(path) = &args.json {
        let capabilities: serde_json::Map<String, serde_json::Value> =
            checks.iter().map(|c| (c.name.to_string(), c.ok.into())).collect();
        let report = serde_json::json!({
            "kernel": nesquic_ebpf::verifier::kernel_release(),
            "capabilities": capabilities,
            "checks": checks,
            "mechanisms": mechanisms.iter().map(|(k, v)| (k.to_string(), serde_json::Value::from(v.clone()))).collect::<serde_json::Map<_, _>>(),
        });
        nesquic_record::files::write(path, &serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

fn print(checks: &[Check], mechanisms: &[(&str, String)]) {
    println!("kernel {}", nesquic_ebpf::verifier::kernel_release());
    for c in checks {
        println!("  {:<12} {:<4} {}", c.name, if c.ok { "yes" } else { "no" }, c.detail);
    }
    println!("probe kinds, mechanism used here:");
    for (kind, how) in mechanisms {
        println!("  {kind:<27} {how}");
    }
    let missing: Vec<&Check> = checks.iter().filter(|c| !c.ok).collect();
    if !missing.is_empty() {
        println!("what to do:");
        for c in missing {
            println!("  {:<12} {}", c.name, c.fix.unwrap_or(""));
        }
    }
}

/// What runs that died without their cleanup left (removed, one line each on stderr) and what
/// runs still going hold.
fn leftovers() -> Check {
    use nesquic_engine::leftovers::Found;
    let found = nesquic_engine::leftovers::sweep();
    for f in &found {
        eprintln!("nesquic: {f}");
    }
    let count = |want: fn(&Found) -> bool| found.iter().filter(|f| want(f)).count();
    let (removed, failed, in_use) = (
        count(|f| matches!(f, Found::Removed(_))),
        count(|f| matches!(f, Found::NotRemoved(..))),
        count(|f| matches!(f, Found::InUse(..))),
    );
    let said = format!(
        "left by runs that died: {removed} removed, {failed} not removable; {in_use} held by runs still going{}",
        if found.is_empty() { "" } else { " (listed above)" }
    );
    check(
        "leftovers",
        if failed == 0 { Ok(said) } else { Err(said) },
        "run nesquic doctor as root, or the commands named above",
    )
}

/// The lockdown mode: "ok" = none (fentry and kprobes on kernel memory allowed).
fn lockdown() -> Check {
    check(
        "no_lockdown",
        nesquic_ebpf::preflight::lockdown(),
        "boot with lockdown=none (lockdown blocks fentry and, in confidentiality mode, kprobe reads)",
    )
}

/// RLIMIT_MEMLOCK: only binding before 5.11 (BPF memory is charged to the cgroup since).
fn memlock() -> Check {
    check(
        "memlock",
        nesquic_ebpf::preflight::memlock(),
        "ulimit -l unlimited (kernels before 5.11 charge BPF maps to it)",
    )
}

/// Whether the scheduler tick can be sampled (what `--probe profile:tick` samples on): its hrtimer
/// callback in /proc/kallsyms, and HZ. (`nesquic run` also checks at start that the callback runs.)
fn tick() -> Check {
    let found = nesquic_ebpf::tick::TickSymbols::read()
        .and_then(|s| Ok((s, nesquic_ebpf::tick::scheduler_hz()?)))
        .map(|(s, hz)| format!("tick callback at {:#x}, HZ {hz}, {} interrupt entries", s.callback, s.entries.len()))
        .map_err(|e| e.to_string());
    check("tick", found, "only profile:tick needs it; the default profile samples on a perf event: nothing to do")
}

/// Whether a CPU-clock perf event opens (what `--probe profile` and `profile:HZ` sample with).
fn perf_events() -> Check {
    check(
        "perf_events",
        nesquic_ebpf::preflight::cpu_clock_event(),
        "run as root, or lower /proc/sys/kernel/perf_event_paranoid (--probe profile needs it)",
    )
}
