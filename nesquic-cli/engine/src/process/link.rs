//! The local end of a remote role: its ssh session as a [`LutProcess`], so a repetition treats
//! it like a local LUT. The role's plan goes down stdin; the LUT's report lines come back as
//! [`ProcessEvent::Report`]s, the remote LUT's exit (with that host's CPU accounting) as
//! [`ProcessEvent::Exited`] once the session ends, the probes' totals as
//! [`ProcessEvent::Remote`]. A session that ends without the remote exit lost its connection.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::ChildStdin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nesquic_protocol::report::LutEvent;
use nesquic_protocol::Role;

use super::{push_tail, reap, spawn_stderr_reader, Exit, LutProcess, ProcessEvent, FORK_TIMEOUT};
use crate::ssh::SshTarget;
use crate::wire::{self, RemoteExit, Reply, Request, RolePlan};
use crate::EngineError;

/// How long after ssh ends its last lines may take to arrive.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);

/// What a [`LutProcess`] that is an ssh session knows of the remote role.
#[derive(Debug)]
pub struct RemoteLink {
    /// The SSH destination.
    pub destination: String,
    /// The remote LUT's exit, once reported.
    reported: Arc<Mutex<Option<Exit>>>,
    /// The remote role's input: closing it ends the role.
    pub(crate) stdin: Option<ChildStdin>,
}

impl RemoteLink {
    /// Whether the remote role reported its LUT's exit (false: the session ended without it).
    pub fn reported_exit(&self) -> bool {
        self.reported.lock().map(|r| r.is_some()).unwrap_or(false)
    }
}

impl From<RemoteExit> for Exit {
    fn from(e: RemoteExit) -> Self {
        Exit { status: e.status, user: e.user, system: e.system, wall: e.wall, max_rss_kib: e.max_rss_kib }
    }
}

/// Where a remote LUT's own qlog lands here, and the remote clock's offset that puts its time
/// zero on this host's clock.
#[derive(Debug, Clone)]
pub struct QlogDestination {
    /// The local file.
    pub path: std::path::PathBuf,
    /// Remote clock minus local clock, ns.
    pub clock_offset_ns: i64,
}

/// Starts `plan`'s role on `target` and sends it the plan.
pub fn spawn(
    target: &SshTarget,
    plan: &RolePlan,
    qlog: Option<QlogDestination>,
    events: Sender<ProcessEvent>,
) -> Result<LutProcess, EngineError> {
    let role = plan.role;
    let mut command = target.remote_role();
    // SAFETY: runs between fork and exec; prctl is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            // If nesquic dies, ssh dies with it, and the remote role sees its input close.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let tail = Arc::new(Mutex::new(std::collections::VecDeque::new()));
    let stdout_done = Arc::new(AtomicBool::new(false));
    let stderr_done = Arc::new(AtomicBool::new(false));
    let reported = Arc::new(Mutex::new(None::<Exit>));
    let (pipes_tx, pipes) = std::sync::mpsc::channel();
    let (done, last) = (stdout_done.clone(), reported.clone());
    let reaper_events = events.clone();
    let started = Instant::now();
    // The forking thread stays as the reaper: PR_SET_PDEATHSIG fires when it exits.
    std::thread::Builder::new()
        .name(format!("ssh-{role}"))
        .spawn(move || {
            let mut child = match command.spawn() {
                Ok(child) => child,
                Err(e) => {
                    let _ = pipes_tx.send(Err(e));
                    return;
                }
            };
            let pid = child.id() as i32;
            let _ = pipes_tx.send(Ok((pid, child.stdin.take(), child.stdout.take(), child.stderr.take())));
            drop(child);
            let ssh_exit = reap(pid, started);
            // The remote LUT's exit is the session's last line: let the reader finish first.
            let until = Instant::now() + OUTPUT_GRACE;
            while !done.load(Ordering::Acquire) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            let exit = last.lock().ok().and_then(|r| *r).unwrap_or(ssh_exit);
            let _ = reaper_events.send(ProcessEvent::Exited(role, exit));
        })
        .map_err(EngineError::os("spawn a thread to start ssh"))?;
    let (pid, stdin, stdout, stderr) = match pipes.recv_timeout(FORK_TIMEOUT) {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return Err(EngineError::msg(format!("cannot run ssh (install openssh-client): {e}"))),
        Err(_) => return Err(EngineError::msg(format!("ssh did not start within {FORK_TIMEOUT:?}"))),
    };
    let mut stdin = stdin.ok_or_else(|| EngineError::msg("ssh started without its stdin"))?;
    // A failed write means ssh already gave up: its exit and stderr say why.
    let _ = wire::send(&mut stdin, &Request::Run(Box::new(plan.clone())));
    if let Some(stdout) = stdout {
        let shared = Shared { tail: tail.clone(), done: stdout_done.clone(), reported: reported.clone() };
        spawn_reader(role, stdout, events, shared, qlog);
    }
    if let Some(stderr) = stderr {
        spawn_stderr_reader(stderr, tail.clone(), stderr_done.clone());
    }
    Ok(LutProcess {
        role,
        pid,
        gate: None,
        pending: None,
        stderr_tail: tail,
        stderr_done,
        stdout_done,
        reaped: false,
        remote: Some(RemoteLink { destination: target.destination.clone(), reported, stdin: Some(stdin) }),
    })
}

/// What the reader shares with the [`LutProcess`] and its reaper.
struct Shared {
    tail: Arc<Mutex<std::collections::VecDeque<String>>>,
    done: Arc<AtomicBool>,
    reported: Arc<Mutex<Option<Exit>>>,
}

fn spawn_reader(
    role: Role,
    stdout: impl Read + Send + 'static,
    events: Sender<ProcessEvent>,
    shared: Shared,
    qlog: Option<QlogDestination>,
) {
    let Shared { tail, done, reported } = shared;
    std::thread::spawn(move || {
        for line in crate::lines::bounded(stdout, crate::lines::REMOTE_LINE_MAX) {
            let event = match serde_json::from_str::<Reply>(&line) {
                // A path on the remote host means nothing here, and reading it would make this
                // host's root read a file the remote chose: its qlog comes as text (LutQlog).
                Ok(Reply::Lut(LutEvent::Qlog { path, .. })) => {
                    push_tail(&tail, format!("the remote role named a qlog file {}: ignored", path.display()));
                    continue;
                }
                Ok(Reply::Lut(e)) => ProcessEvent::Report(role, e),
                Ok(Reply::Totals(t)) => ProcessEvent::Remote(role, t),
                Ok(Reply::Exited(e)) => {
                    if let Ok(mut r) = reported.lock() {
                        *r = Some(e.into());
                    }
                    continue;
                }
                Ok(Reply::LutQlog { start_unix_ns, text }) => {
                    let Some(dest) = &qlog else { continue };
                    if let Err(e) = nesquic_record::files::write(&dest.path, text.as_bytes()) {
                        push_tail(&tail, format!("cannot write {}: {e}", dest.path.display()));
                        continue;
                    }
                    // The file's time zero, on this host's clock.
                    let start = (start_unix_ns as i128 - dest.clock_offset_ns as i128).max(0) as u64;
                    ProcessEvent::Report(role, LutEvent::Qlog { path: dest.path.clone(), start_unix_ns: start })
                }
                Ok(Reply::Error { message }) => {
                    push_tail(&tail, message);
                    continue;
                }
                Ok(Reply::Hello { .. } | Reply::Clock { .. }) => continue,
                Err(_) => {
                    push_tail(&tail, line);
                    continue;
                }
            };
            if events.send(event).is_err() {
                break;
            }
        }
        done.store(true, Ordering::Release);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_qlog_path_named_by_the_remote_host_is_not_read_here() {
        let (tx, rx) = std::sync::mpsc::channel();
        let shared = Shared { tail: Arc::default(), done: Arc::default(), reported: Arc::default() };
        let tail = shared.tail.clone();
        let reply = Reply::Lut(LutEvent::Qlog { path: "/etc/shadow".into(), start_unix_ns: 1 });
        let mut text = serde_json::to_string(&reply).expect("json");
        text.push('\n');
        spawn_reader(Role::Server, std::io::Cursor::new(text.into_bytes()), tx, shared, None);
        // The reader drops its sender at the end of its input.
        let events: Vec<ProcessEvent> = rx.iter().collect();
        assert!(events.is_empty(), "{events:?}");
        let tail = tail.lock().expect("tail");
        assert!(tail.iter().any(|l| l.contains("/etc/shadow: ignored")), "{tail:?}");
    }
}
