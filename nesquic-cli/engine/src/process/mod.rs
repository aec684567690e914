//! One LUT process: spawned held at a gate (so probes can be told its pid before it runs a single
//! instruction of the LUT), watched by reader threads, reaped with `wait4` for the kernel's CPU
//! accounting, and always killed if the run ends early. A role on another host is a LutProcess too:
//! its ssh session ([`link`]).

pub mod faults;
pub mod link;

use std::collections::VecDeque;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{ChildStderr, ChildStdout, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nesquic_protocol::report::LutEvent;

use crate::EngineError;

type Result<T> = std::result::Result<T, EngineError>;

/// Which side of the connection a process plays: the protocol crate's one `Role`, shared with the
/// LUT command line and the report lines.
pub use nesquic_protocol::role::{Role, LUT_ROLES};

/// What the watcher threads report.
#[derive(Debug)]
pub enum ProcessEvent {
    /// A protocol line from the process's stdout.
    Report(Role, LutEvent),
    /// The process exited and was reaped.
    Exited(Role, Exit),
    /// A remote role's probe totals (after its exit).
    Remote(Role, Box<crate::wire::RoleTotals>),
}

/// How a process ended, with the kernel's accounting of it.
#[derive(Debug, Clone, Copy)]
pub struct Exit {
    /// Raw wait status.
    pub status: i32,
    /// User CPU time of all its threads.
    pub user: Duration,
    /// System CPU time of all its threads.
    pub system: Duration,
    /// From spawn to reaping.
    pub wall: Duration,
    /// Peak resident set, KiB.
    pub max_rss_kib: u64,
}

impl Exit {
    /// Exited with status 0.
    pub fn success(&self) -> bool {
        libc::WIFEXITED(self.status) && libc::WEXITSTATUS(self.status) == 0
    }

    /// "exit code 1", "killed by signal 6 (SIGABRT)".
    pub fn describe(&self) -> String {
        if libc::WIFEXITED(self.status) {
            format!("exit code {}", libc::WEXITSTATUS(self.status))
        } else if libc::WIFSIGNALED(self.status) {
            let sig = libc::WTERMSIG(self.status);
            format!("killed by signal {sig} ({})", signal_name(sig))
        } else {
            format!("wait status {:#x}", self.status)
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        libc::SIGQUIT => "SIGQUIT",
        _ => "signal",
    }
}

/// A spawned LUT process.
#[derive(Debug)]
pub struct LutProcess {
    /// Its role.
    pub role: Role,
    /// Its pid.
    pub pid: i32,
    pub(crate) gate: Option<OwnedFd>,
    pub(crate) pending: Option<PendingSpawn>,
    pub(crate) stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// Set when the stderr reader reached end of file (the process closed it).
    pub(crate) stderr_done: Arc<std::sync::atomic::AtomicBool>,
    /// Set when the stdout reader reached end of file: every report line has been queued.
    pub(crate) stdout_done: Arc<std::sync::atomic::AtomicBool>,
    pub(crate) reaped: bool,
    /// A role on another host: this process is its ssh session.
    pub remote: Option<link::RemoteLink>,
}

/// A fork held at the gate. `Command::spawn` only returns once the child has exec'd, so it runs
/// on its own thread, which then stays as the child's reaper: `PR_SET_PDEATHSIG` fires when the
/// *thread* that forked exits, so that thread must outlive the child.
#[derive(Debug)]
pub(crate) struct PendingSpawn {
    pipes: Receiver<std::io::Result<(Option<ChildStdout>, Option<ChildStderr>)>>,
    events: Sender<ProcessEvent>,
}

const STDERR_LINES_KEPT: usize = 20;
/// How long a fork may take to report its pid.
pub(crate) const FORK_TIMEOUT: Duration = Duration::from_secs(10);

impl LutProcess {
    /// Forks `binary args…` and holds the child before `exec` until [`LutProcess::release`], so
    /// an observer can register its pid before it runs one instruction of the LUT.
    /// With `netns` (a /var/run/netns file) the child enters that network namespace first; `env`
    /// is added to its environment (the user-space probe agent's variables).
    pub fn spawn_in(
        role: Role,
        binary: &Path,
        args: &[std::ffi::OsString],
        env: &[(String, std::ffi::OsString)],
        events: Sender<ProcessEvent>,
        netns: Option<&Path>,
    ) -> Result<Self> {
        Self::spawn_with(role, binary, args, env, events, true, netns)
    }

    /// Like [`LutProcess::spawn_in`], but the process writes to nesquic's own stdout and stderr.
    pub fn spawn_inheriting_output(
        role: Role,
        binary: &Path,
        args: &[std::ffi::OsString],
        env: &[(String, std::ffi::OsString)],
        events: Sender<ProcessEvent>,
    ) -> Result<Self> {
        Self::spawn_with(role, binary, args, env, events, false, None)
    }

    fn spawn_with(
        role: Role,
        binary: &Path,
        args: &[std::ffi::OsString],
        env: &[(String, std::ffi::OsString)],
        events: Sender<ProcessEvent>,
        capture: bool,
        netns: Option<&Path>,
    ) -> Result<Self> {
        // No LUT starts with fault variables it would obey, unless they are meant (faults.rs).
        faults::injected()?;
        // Opened here, entered in the child between fork and exec; kept open until exec.
        let netns_file = match netns {
            Some(p) => Some(
                std::fs::File::open(p).map_err(EngineError::os(format!("open network namespace {}", p.display())))?,
            ),
            None => None,
        };
        let netns_fd = netns_file.as_ref().map_or(-1, |f| f.as_raw_fd());
        let (gate_read, gate_write) = pipe().map_err(EngineError::os("create start gate pipe"))?;
        let (pid_read, pid_write) = pipe().map_err(EngineError::os("create pid pipe"))?;
        let gate_fd = gate_read.as_raw_fd();
        let pid_fd = pid_write.as_raw_fd();
        let mut command = Command::new(binary);
        command.args(args).envs(env.iter().map(|(k, v)| (k, v))).stdin(Stdio::null());
        if capture {
            command.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        // SAFETY: the closure runs between fork and exec and only calls async-signal-safe
        // functions (prctl, getpid, write, read, close) on values copied into it.
        unsafe {
            command.pre_exec(move || {
                // If nesquic dies for any reason, its LUT processes die with it: no orphans.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if netns_fd >= 0 && libc::setns(netns_fd, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let pid = libc::getpid().to_ne_bytes();
                libc::write(pid_fd, pid.as_ptr().cast(), pid.len());
                libc::close(pid_fd);
                // Held here until release() writes a byte (or nesquic closes the gate by dying).
                let mut byte = 0u8;
                let n = libc::read(gate_fd, (&mut byte as *mut u8).cast(), 1);
                libc::close(gate_fd);
                if n != 1 {
                    // The gate closed without a release: nesquic gave up on this process.
                    libc::_exit(127);
                }
                Ok(())
            });
        }
        let started = Instant::now();
        let (pipes_tx, pipes) = std::sync::mpsc::channel();
        let reaper_events = events.clone();
        std::thread::Builder::new()
            .name(format!("spawn-reap-{role}"))
            .spawn(move || {
                let spawned = command.spawn();
                // The child has exec'd (or failed); our copies of its pipe ends can go.
                drop((gate_read, pid_write, netns_file));
                let mut child = match spawned {
                    Ok(child) => child,
                    Err(e) => {
                        let _ = pipes_tx.send(Err(e));
                        return;
                    }
                };
                let pid = child.id() as i32;
                let _ = pipes_tx.send(Ok((child.stdout.take(), child.stderr.take())));
                // We reap with wait4 ourselves (for rusage); the Child handle is dropped unwaited.
                drop(child);
                let exit = reap(pid, started);
                let _ = reaper_events.send(ProcessEvent::Exited(role, exit));
            })
            .map_err(EngineError::os("spawn a thread to start the LUT"))?;
        let pid = match read_pid(&pid_read) {
            Ok(pid) => pid,
            Err(wait_err) => {
                drop(gate_write);
                let why = match pipes.recv_timeout(FORK_TIMEOUT) {
                    Ok(Err(e)) => EngineError::Os { what: "exec".into(), source: e },
                    _ => wait_err,
                };
                return Err(EngineError::Start { binary: binary.display().to_string(), source: Box::new(why) });
            }
        };
        Ok(Self {
            role,
            pid,
            gate: Some(gate_write),
            pending: Some(PendingSpawn { pipes, events }),
            stderr_tail: Arc::new(Mutex::new(VecDeque::new())),
            stderr_done: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            stdout_done: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            reaped: false,
            remote: None,
        })
    }

    /// Lets the process proceed to `exec`, then watches its output and reaps it.
    pub fn release(&mut self) -> Result<()> {
        if let Some(gate) = self.gate.take() {
            let byte = [1u8];
            // SAFETY: writes one byte from a live buffer to an fd we own.
            let r = unsafe { libc::write(gate.as_raw_fd(), byte.as_ptr().cast(), 1) };
            if r != 1 {
                return Err(EngineError::os("release start gate")(std::io::Error::last_os_error()));
            }
        }
        let Some(pending) = self.pending.take() else { return Ok(()) };
        let (stdout, stderr) = match pending.pipes.recv_timeout(FORK_TIMEOUT) {
            Ok(Ok(pipes)) => pipes,
            Ok(Err(e)) => return Err(EngineError::os("exec of the LUT failed")(e)),
            Err(_) => return Err(EngineError::Process(format!("the LUT did not start within {FORK_TIMEOUT:?}"))),
        };
        if let Some(stdout) = stdout {
            spawn_stdout_reader(self.role, stdout, pending.events, self.stderr_tail.clone(), self.stdout_done.clone());
        }
        if let Some(stderr) = stderr {
            spawn_stderr_reader(stderr, self.stderr_tail.clone(), self.stderr_done.clone());
        }
        Ok(())
    }

    /// Whether every line the process wrote on stdout has been queued as an event (its stdout
    /// reached end of file).
    pub fn stdout_finished(&self) -> bool {
        self.stdout_done.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Whether it exited and was reaped.
    pub fn is_reaped(&self) -> bool {
        self.reaped
    }

    /// Marks the process as reaped (its pid may be reused from now on: never signal it again).
    pub fn mark_reaped(&mut self) {
        self.reaped = true;
    }

    /// SIGKILLs the process unless it was already reaped.
    pub fn kill(&mut self) {
        if !self.reaped {
            // SAFETY: plain syscall; the pid is still ours because we have not reaped it.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
        self.gate = None;
        // A remote role ends when its input closes (and ssh, killed above, closes it anyway).
        if let Some(remote) = self.remote.as_mut() {
            remote.stdin = None;
        }
        // Never released: its spawner thread reaps it; we must not signal that pid again.
        if self.pending.take().is_some() {
            self.reaped = true;
        }
    }

    /// Last lines the process wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        // The last lines travel through a reader thread: give it a moment to reach end of file
        // (the process has exited or been killed when this is asked).
        let until = Instant::now() + Duration::from_millis(500);
        while !self.stderr_done.load(std::sync::atomic::Ordering::Acquire) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        let tail = self.stderr_tail.lock().map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"));
        tail.unwrap_or_default()
    }
}

impl Drop for LutProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Reads the 4-byte pid the forked child writes before it waits at the gate.
fn read_pid(pipe: &OwnedFd) -> Result<i32> {
    let mut pfd = libc::pollfd { fd: pipe.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: polls one live pollfd.
    let ready = unsafe { libc::poll(&mut pfd, 1, FORK_TIMEOUT.as_millis() as i32) };
    if ready != 1 {
        return Err(EngineError::Process("the forked child did not report its pid".into()));
    }
    let mut buf = [0u8; 4];
    // SAFETY: reads at most 4 bytes into a live buffer.
    let n = unsafe { libc::read(pipe.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n != 4 {
        return Err(EngineError::Process("the forked child exited before reporting its pid".into()));
    }
    Ok(i32::from_ne_bytes(buf))
}

pub(crate) fn reap(pid: i32, started: Instant) -> Exit {
    let mut status = 0;
    // SAFETY: rusage is plain old data.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waits for our own child and writes into live locals.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Exit {
        status,
        user: tv(usage.ru_utime),
        system: tv(usage.ru_stime),
        wall: started.elapsed(),
        max_rss_kib: usage.ru_maxrss.max(0) as u64,
    }
}

fn spawn_stdout_reader(
    role: Role,
    stdout: impl Read + Send + 'static,
    events: Sender<ProcessEvent>,
    tail: Arc<Mutex<VecDeque<String>>>,
    done: Arc<std::sync::atomic::AtomicBool>,
) {
    std::thread::spawn(move || {
        // Set last, after every report was queued, so `stdout_finished` means "nothing more".
        struct SetOnDrop(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for SetOnDrop {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Release);
            }
        }
        let _done = SetOnDrop(done);
        for line in crate::lines::bounded(stdout, crate::lines::LINE_MAX) {
            match serde_json::from_str::<LutEvent>(&line) {
                Ok(event) => {
                    if events.send(ProcessEvent::Report(role, event)).is_err() {
                        break;
                    }
                }
                // Anything else the LUT prints is kept for error messages, not interpreted.
                Err(_) => push_tail(&tail, line),
            }
        }
    });
}

pub(crate) fn spawn_stderr_reader(
    stderr: impl Read + Send + 'static,
    tail: Arc<Mutex<VecDeque<String>>>,
    done: Arc<std::sync::atomic::AtomicBool>,
) {
    std::thread::spawn(move || {
        for line in crate::lines::bounded(stderr, crate::lines::LINE_MAX) {
            push_tail(&tail, line);
        }
        done.store(true, std::sync::atomic::Ordering::Release);
    });
}

pub(crate) fn push_tail(tail: &Mutex<VecDeque<String>>, line: String) {
    if let Ok(mut t) = tail.lock() {
        if t.len() == STDERR_LINES_KEPT {
            t.pop_front();
        }
        t.push_back(line);
    }
}

/// Where the LUT executables are: `--lut-dir`, else the directory of the running `nesquic`.
pub fn lut_dir(explicit: Option<&std::path::Path>) -> Result<std::path::PathBuf> {
    if let Some(dir) = explicit {
        return Ok(dir.to_path_buf());
    }
    let exe = std::env::current_exe().map_err(EngineError::os("locate the nesquic executable"))?;
    Ok(exe.parent().map(std::path::PathBuf::from).unwrap_or_default())
}

/// The signals that end a run with its cleanup: Ctrl-C, `kill`, a closed terminal (SIGHUP) and
/// Ctrl-\ (SIGQUIT). Left at their default, the last two would end nesquic on the spot and
/// leave its namespaces behind.
pub const STOP_SIGNALS: [i32; 4] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGQUIT,
];

/// Each of [`STOP_SIGNALS`] sets a flag; the run loop sees it, kills the LUT processes and
/// unwinds, so everything attached is dropped (and detached) on the way out.
pub fn install_signal_flag() -> Result<Arc<std::sync::atomic::AtomicBool>> {
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in STOP_SIGNALS {
        signal_hook::flag::register(signal, flag.clone()).map_err(EngineError::os("install signal handler"))?;
    }
    Ok(flag)
}
