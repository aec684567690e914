//! Checks before anything is loaded, each with an actionable message: privileges, tracefs, BTF.
//! Also detects which kernel mechanisms exist, so reports can say which one ran.

use crate::sampler::PerfEventAttr;
use std::path::Path;

use crate::EbpfError;

const TRACEFS: &str = "/sys/kernel/tracing";
const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";
const BTF: &str = "/sys/kernel/btf/vmlinux";

/// Capability bits (linux/capability.h).
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Runs every check; mounts tracefs if it is missing and we may.
pub fn check() -> Result<(), EbpfError> {
    check_privileges()?;
    ensure_tracefs()?;
    if !Path::new(BTF).exists() {
        return Err(EbpfError::Unsupported(format!(
            "{BTF} is missing: the kernel was built without BTF (CONFIG_DEBUG_INFO_BTF=y), which the CO-RE probes need"
        )));
    }
    Ok(())
}

/// Root, or CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN) in the effective set.
pub fn check_privileges() -> Result<(), EbpfError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let has = |cap: u32| eff & (1u64 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    Err(EbpfError::NotPrivileged)
}

/// The directory holding trace events, mounting tracefs when it is not mounted.
pub fn ensure_tracefs() -> Result<&'static str, EbpfError> {
    for dir in [TRACEFS, DEBUGFS_TRACING] {
        if Path::new(dir).join("events").is_dir() {
            return Ok(dir);
        }
    }
    let target = std::ffi::CString::new(TRACEFS).map_err(|e| EbpfError::Unsupported(e.to_string()))?;
    let fstype = c"tracefs";
    // SAFETY: valid NUL-terminated strings; no data argument.
    let r = unsafe { libc::mount(fstype.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if r == 0 && Path::new(TRACEFS).join("events").is_dir() {
        log::info!("mounted tracefs at {TRACEFS}");
        return Ok(TRACEFS);
    }
    let err = std::io::Error::last_os_error();
    Err(EbpfError::Unsupported(format!(
        "tracefs is not mounted and mounting it failed ({err}); run: mount -t tracefs tracefs {TRACEFS}"
    )))
}

/// Whether the kernel has kprobes (the kprobe PMU or kprobe_events).
pub fn kprobes_available() -> bool {
    Path::new("/sys/bus/event_source/devices/kprobe").exists()
        || Path::new(TRACEFS).join("kprobe_events").exists()
        || Path::new(DEBUGFS_TRACING).join("kprobe_events").exists()
}

/// Whether a CPU-clock perf event opens (what `--probe profile` samples with), with
/// perf_event_paranoid either way.
pub fn cpu_clock_event() -> Result<String, String> {
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
    // The sampler's layout: type PERF_TYPE_SOFTWARE, config PERF_COUNT_SW_CPU_CLOCK, disabled.
    let attr = PerfEventAttr {
        kind: 1,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: 0,
        flags: 1,
        ..PerfEventAttr::default()
    };
    // SAFETY: valid attr pointer; pid -1 + cpu 0 = every process on CPU 0, as the profile does.
    let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, &attr as *const PerfEventAttr, -1, 0, -1, 0) };
    if fd >= 0 {
        // SAFETY: closing the fd just opened.
        unsafe { libc::close(fd as i32) };
        Ok(format!("cpu-clock event opened (perf_event_paranoid {})", paranoid.trim()))
    } else {
        Err(format!("perf_event_open: {} (perf_event_paranoid {})", std::io::Error::last_os_error(), paranoid.trim()))
    }
}

/// The kernel lockdown mode (mounting securityfs to read it if needed): `Ok` when there is none
/// (fentry and kprobes on kernel memory allowed), else `Err(mode)`.
pub fn lockdown() -> Result<String, String> {
    let file = "/sys/kernel/security/lockdown";
    if !std::path::Path::new(file).exists() {
        let _ = std::process::Command::new("mount")
            .args(["-t", "securityfs", "securityfs", "/sys/kernel/security"])
            .output();
    }
    match std::fs::read_to_string(file) {
        Ok(text) => {
            // The active mode is the bracketed one: "none [integrity] confidentiality".
            let mode = text.split_whitespace().find_map(|w| w.strip_prefix('[')?.strip_suffix(']')).unwrap_or("?");
            if mode == "none" {
                Ok("none".to_string())
            } else {
                Err(mode.to_string())
            }
        }
        Err(_) => Ok("no LSM lockdown support in this kernel".into()),
    }
}

/// RLIMIT_MEMLOCK, `Err` only where it binds: before 5.11 (BPF memory is charged to the cgroup
/// since) and below 64 MiB.
pub fn memlock() -> Result<String, String> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: writes into a live rlimit.
    let r = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) };
    let release = crate::verifier::kernel_release();
    let mut parts = release.split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse::<u32>().ok());
    let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    let cgroup_charged = version >= (5, 11);
    let value = if r != 0 {
        "unknown".to_string()
    } else if limit.rlim_cur == libc::RLIM_INFINITY {
        "unlimited".to_string()
    } else {
        format!("{} KiB", limit.rlim_cur / 1024)
    };
    let fine = cgroup_charged || limit.rlim_cur == libc::RLIM_INFINITY || limit.rlim_cur >= 64 << 20;
    let detail = format!("RLIMIT_MEMLOCK {value}{}", if cgroup_charged { " (not used: kernel >= 5.11)" } else { "" });
    if fine {
        Ok(detail)
    } else {
        Err(detail)
    }
}
