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
    let header = format!("# {program} rejected by the verifier of Linux {}\n", kernel_release());
    let path = write_log(program, &(header + &log));
    EbpfError::Verifier { program: program.to_string(), kernel: kernel_release(), reason, log: path }
}

/// Writes `text` to `verifier-<program>.log` in a directory no other user can change: the one
/// set, if it is ours (or root's) and writable by nobody else; otherwise a new private (0700)
/// directory in the temp dir. A fixed name in a shared directory (/tmp) could be a link another
/// user placed there, and root would overwrite its target.
fn write_log(program: &str, text: &str) -> PathBuf {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let set = LOG_DIR.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let set = set.map(|d| if d.as_os_str().is_empty() { PathBuf::from(".") } else { d });
    let dir = match set.filter(|d| std::fs::create_dir_all(d).is_ok() && private(d)) {
        Some(dir) => dir,
        None => match private_temp_dir() {
            Ok(dir) => dir,
            Err(e) => {
                log::warn!("could not create a directory for the verifier log: {e}");
                return PathBuf::from(format!("verifier-{program}.log (not written)"));
            }
        },
    };
    let path = dir.join(format!("verifier-{program}.log"));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = written {
        log::warn!("could not write the verifier log to {}: {e}", path.display());
    }
    path
}

/// Whether `dir` is ours or root's and writable by no one else.
fn private(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    std::fs::metadata(dir).is_ok_and(|m| m.is_dir() && (m.uid() == me || m.uid() == 0) && m.mode() & 0o022 == 0)
}

/// A new directory `nesquic-verifier-XXXXXX` in the temp dir, mode 0700, kept (the error names it).
fn private_temp_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let template = std::env::temp_dir().join("nesquic-verifier-XXXXXX").into_os_string().into_vec();
    let mut template = std::ffi::CString::new(template).map_err(std::io::Error::other)?.into_bytes_with_nul();
    // SAFETY: a writable NUL-terminated template ending in XXXXXX, as mkdtemp requires.
    if unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) }.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    template.pop();
    Ok(PathBuf::from(std::ffi::OsString::from_vec(template)))
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

    #[test]
    fn the_log_never_goes_to_a_name_another_user_can_take() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        // Without a set directory: a new private one, not the shared temp dir.
        let path = write_log("nesquic_test_prog", "log text");
        let dir = path.parent().expect("a directory");
        assert_ne!(dir, std::env::temp_dir());
        assert_eq!(std::fs::metadata(dir).expect("stat").mode() & 0o777, 0o700);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "log text");
        std::fs::remove_dir_all(dir).expect("clean up");
        // A set directory others can write to is not used; a private one is.
        let shared = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
        set_log_dir(shared.path());
        let path = write_log("nesquic_test_prog", "log text");
        assert_ne!(path.parent(), Some(shared.path()));
        std::fs::remove_dir_all(path.parent().expect("a directory")).expect("clean up");
        std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let path = write_log("nesquic_test_prog", "log text");
        assert_eq!(path.parent(), Some(shared.path()));
        // Never through a link.
        std::fs::remove_file(&path).expect("remove");
        let victim = shared.path().join("victim");
        std::fs::write(&victim, "precious").expect("write");
        std::os::unix::fs::symlink(&victim, &path).expect("symlink");
        write_log("nesquic_test_prog", "log text");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
        *LOG_DIR.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}
