//! Verifier rejections as one line for the user, the full log in a file: a verifier log runs to
//! thousands of lines that mean something to an eBPF developer, not to the person running a test.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use aya::programs::ProgramError;

use crate::EbpfError;

/// Where verifier logs go (the run directory, once the caller knows it).
static LOG_DIR: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Verifier logs of later failures go to `dir` (where the run directories are); by default the
/// temp dir.
pub fn set_log_dir(dir: &Path) {
    *LOG_DIR.lock().unwrap_or_else(|p| p.into_inner()) = Some(dir.to_path_buf());
}

/// The kernel release (`uname -r`).
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_else(|_| "?".into())
}

/// Turns a failed program load into an error; a verifier rejection writes its log to a file.
pub fn load_failed(program: &str, error: ProgramError) -> EbpfError {
    let ProgramError::LoadError { io_error, verifier_log } = &error else {
        return EbpfError::Load(format!("{program}: {error:#}"));
    };
    let log = verifier_log.to_string();
    let reason = last_complaint(&log).map_or_else(|| io_error.to_string(), |l| format!("{l} ({io_error})"));
    let mut dir = LOG_DIR.lock().unwrap_or_else(|p| p.into_inner()).clone().unwrap_or_else(std::env::temp_dir);
    if dir.as_os_str().is_empty() {
        dir = PathBuf::from(".");
    }
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("verifier-{program}.log"));
    let header = format!("# {program} rejected by the verifier of Linux {}\n", kernel_release());
    if let Err(e) = std::fs::write(&path, header + &log) {
        log::warn!("could not write the verifier log to {}: {e}", path.display());
    }
    EbpfError::Verifier { program: program.to_string(), kernel: kernel_release(), reason, log: path }
}

/// The verifier's own verdict: the last line before its statistics.
fn last_complaint(log: &str) -> Option<&str> {
    log.lines().map(str::trim).rfind(|l| {
        !l.is_empty()
            && !l.starts_with("processed ")
            && !l.starts_with("verification time")
            && !l.starts_with("stack depth")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_complaint_is_the_line_before_the_statistics() {
        let log =
            "0: (bf) r6 = r1\n86: (79) r8 = *(u64 *)(r2 +0)\ninvalid unbounded variable-offset read from stack R2\n\
                   processed 123 insns (limit 1000000) max_states_per_insn 1\n";
        assert_eq!(last_complaint(log), Some("invalid unbounded variable-offset read from stack R2"));
        assert_eq!(last_complaint("\n"), None);
    }
}
