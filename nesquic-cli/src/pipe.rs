//! A closed stdout (`nesquic luts | head -1`) ends nesquic quietly, as it ends other Unix tools:
//! by SIGPIPE, with no message. Commands that only print get the signal's default action back
//! (Rust ignores SIGPIPE, so `println!` would panic instead). Commands that own LUT processes,
//! probes or namespaces keep ignoring it: there the failed write unwinds through their cleanup
//! (processes killed, probes detached, namespaces removed), silently, and nesquic then dies of
//! SIGPIPE all the same.

use std::panic;
use std::process::ExitCode;

/// For commands that only print: the signal's default action, ending the process at once.
pub fn end_quietly() {
    // SAFETY: restoring the default disposition of a signal has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// For commands that hold resources: a write to a closed stdout panics (SIGPIPE stays
/// ignored) without a message, so that [`catch_closed_stdout`] can finish the job after cleanup.
pub fn end_quietly_after_cleanup() {
    let default = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if !closed_stdout(&info.to_string()) {
            default(info);
        }
    }));
}

/// Whether a panic message is `println!`'s (or `eprintln!`'s) on a closed output: a pipe whose
/// reader is gone (EPIPE), or a terminal that was closed (EIO after SIGHUP), which also ends the
/// run through its cleanup and must not then end it with a panic (exit 101).
fn closed_stdout(message: &str) -> bool {
    let printing = message.contains("failed printing to stdout") || message.contains("failed printing to stderr");
    printing && (message.contains("Broken pipe") || message.contains("Input/output error"))
}

/// The command's stdout was closed while it ran.
#[derive(Debug)]
pub struct StdoutClosed;

/// Runs `f`; a panic from writing to a closed stdout becomes `Err(StdoutClosed)` once it has
/// unwound through `f`'s cleanup. Any other panic goes on.
pub fn catch_closed_stdout<T>(f: impl FnOnce() -> T) -> Result<T, StdoutClosed> {
    panic::catch_unwind(panic::AssertUnwindSafe(f)).map_err(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if closed_stdout(message) {
            StdoutClosed
        } else {
            panic::resume_unwind(payload)
        }
    })
}

/// Ends the process as a closed pipe ends any Unix tool (status 141 in a shell).
pub fn die_of_sigpipe() -> ExitCode {
    // SAFETY: restoring a signal's default disposition and raising it have no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // Not reached: SIGPIPE's default action ends the process.
    ExitCode::from(141)
}

#[cfg(test)]
mod tests {
    use super::closed_stdout;

    #[test]
    fn a_closed_pipe_or_terminal_is_a_closed_output() {
        assert!(closed_stdout("failed printing to stdout: Broken pipe (os error 32)"));
        assert!(closed_stdout("failed printing to stdout: Input/output error (os error 5)"));
        assert!(closed_stdout("failed printing to stderr: Input/output error (os error 5)"));
        assert!(!closed_stdout("failed printing to stdout: No space left on device (os error 28)"));
        assert!(!closed_stdout("index out of bounds"));
    }
}
