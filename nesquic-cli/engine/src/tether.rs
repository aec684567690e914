//! Helper programs a run starts before its LUT (cargo, git, go, cmake, a LUT's build script):
//! they and everything they start die with nesquic, whatever ends it (`kill -9` included).
//!
//! Builds run before the signal handler is installed, so a SIGTERM or Ctrl-C ends nesquic on the
//! spot; cargo and git used to go on as orphans, and cargo's rustc children after them.
//! `PR_SET_PDEATHSIG` reaches only the direct child, so each helper gets a process group of its
//! own and a watchdog in that group: a fork that waits on a pipe only nesquic can write to. When
//! nesquic exits (or the helper is done and the [`Tethered`] call returns) the pipe closes, and
//! the watchdog kills its whole group, itself included.
//!
//! In a group of its own a helper no longer gets the terminal's Ctrl-C directly (nesquic's death
//! brings it down instead) and cannot read the terminal: git is told not to prompt
//! (`GIT_TERMINAL_PROMPT=0`), so a fetch that needs credentials fails with git's message rather
//! than stopping on a prompt nobody can answer.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Output};

/// `output()` and `status()` of a helper that dies with nesquic (see the module doc). Call each
/// at most once per `Command`: every call adds a watchdog to the command's start.
pub trait Tethered {
    /// [`Command::output`], the helper and its descendants tied to nesquic's life.
    fn tethered_output(&mut self) -> io::Result<Output>;
    /// [`Command::status`], the helper and its descendants tied to nesquic's life.
    fn tethered_status(&mut self) -> io::Result<ExitStatus>;
}

impl Tethered for Command {
    fn tethered_output(&mut self) -> io::Result<Output> {
        let _lifeline = tether(self)?;
        self.output()
    }

    fn tethered_status(&mut self) -> io::Result<ExitStatus> {
        let _lifeline = tether(self)?;
        self.status()
    }
}

/// The pipe whose write end only nesquic holds (close-on-exec: no program it starts keeps it);
/// dropping it, or nesquic dying, tells the watchdog to kill the group.
struct Lifeline {
    _write: OwnedFd,
    _read: OwnedFd,
}

fn tether(command: &mut Command) -> io::Result<Lifeline> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let read_fd = read.as_raw_fd();
    command.env("GIT_TERMINAL_PROMPT", "0");
    // SAFETY: the closure runs between fork and exec and makes only raw system calls (setpgid,
    // prctl, clone, close_range, read, kill, _exit) on values copied into it; the watchdog is
    // made with the raw clone system call, not glibc's fork, which would take locks other
    // threads of nesquic may have held when it forked.
    unsafe {
        command.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The helper itself goes even if the watchdog below could not be made.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            let pid = libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0);
            if pid < 0 {
                return Err(io::Error::last_os_error());
            }
            if pid == 0 {
                watchdog(read_fd);
            }
            Ok(())
        });
    }
    Ok(Lifeline { _write: write, _read: read })
}

/// The watchdog's whole life: wait until nobody can write to `lifeline`, then kill the group.
///
/// # Safety
/// Only in a fresh fork: it closes every other fd and never returns.
unsafe fn watchdog(lifeline: libc::c_int) -> ! {
    // Everything but the lifeline goes: a copy of the pipes nesquic reads the helper's output
    // from would keep nesquic waiting for their end, and the build lock must stay nesquic's.
    // SAFETY: raw system calls on plain integers.
    unsafe {
        if lifeline > 0 {
            libc::syscall(libc::SYS_close_range, 0, lifeline - 1, 0);
        }
        libc::syscall(libc::SYS_close_range, lifeline + 1, libc::c_uint::MAX, 0);
        let mut byte = 0u8;
        loop {
            let n = libc::read(lifeline, (&mut byte as *mut u8).cast(), 1);
            if n >= 0 || *libc::__errno_location() != libc::EINTR {
                break;
            }
        }
        // Pid 0: the caller's process group, the helper and all it started (this watchdog too).
        libc::kill(0, libc::SIGKILL);
        libc::_exit(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn alive(pid: i32) -> bool {
        // A zombie has no more `State: S/R`; its parent (init, once the watchdog's parent is gone)
        // reaps it. Reading the state tells a dead process from a live one either way.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
    }

    fn gone_within(pid: i32, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if !alive(pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        !alive(pid)
    }

    #[test]
    fn output_is_read_to_its_end_and_what_the_helper_left_running_dies() {
        let dir = tempfile::tempdir().expect("tempdir");
        let left = dir.path().join("left");
        // The helper leaves a grandchild behind (its stdout closed, so output() can end).
        let script = format!("sleep 600 >/dev/null 2>&1 & echo $! > {}; echo done", left.display());
        let out = Command::new("sh").args(["-c", &script]).tethered_output().expect("sh");
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
        let pid: i32 = std::fs::read_to_string(&left).expect("pid").trim().parse().expect("a pid");
        // The kill is asynchronous (the watchdog sees the pipe close): a generous bound, not a
        // measured duration.
        assert!(gone_within(pid, Duration::from_secs(10)), "the helper's sleep {pid} outlived it");
    }

    #[test]
    fn the_helper_runs_in_a_process_group_of_its_own_and_git_does_not_prompt() {
        let out = Command::new("sh")
            .args(["-c", "echo $$ $(cut -d' ' -f5 /proc/$$/stat) $GIT_TERMINAL_PROMPT"])
            .tethered_output()
            .expect("sh");
        let text = String::from_utf8_lossy(&out.stdout);
        let fields: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(fields.len(), 3, "{text}");
        assert_eq!(fields[0], fields[1], "its pid is its process group: {text}");
        assert_ne!(fields[1], std::process::id().to_string());
        assert_eq!(fields[2], "0");
    }
}
