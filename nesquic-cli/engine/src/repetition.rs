//! One repetition: start the server, wait until it listens, start the client, follow progress,
//! collect both exits. Any failure kills what still runs.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use nesquic_lut_adapters::lut::{ClientSpec, ServerSpec};
use nesquic_lut_adapters::report::{ClientResult, LutEvent};
use nesquic_lut_adapters::tls::CertFiles;
use nesquic_lut_adapters::{IoMode, Lut};

use crate::error::Cause;
use crate::process::{Exit, LutProcess, ProcessEvent, Role};
use crate::EngineError;

type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Told about each LUT process before it runs (so probes can register its pid) and after it
/// was reaped.
pub trait ProcessObserver {
    /// Variables to add to the environment of the process about to start in `role` (the
    /// user-space probe agent's); none by default.
    fn environment(&mut self, _role: Role) -> Result<Vec<(String, std::ffi::OsString)>, Cause> {
        Ok(Vec::new())
    }

    /// `pid` is forked and held before `exec`.
    fn spawned(&mut self, role: Role, pid: i32) -> Result<(), Cause>;

    /// Called at least every 50 ms while the transfer runs, with the client's verified bytes so
    /// far (for periodic snapshots).
    fn tick(&mut self, _progress_bytes: u64) -> Result<(), Cause> {
        Ok(())
    }

    /// Every report line a LUT process printed.
    fn lut_event(&mut self, _role: Role, _event: &LutEvent) -> Result<(), Cause> {
        Ok(())
    }

    /// When the observer next needs a `tick` (duty-cycled probes toggle on time); `None`: the
    /// default 50 ms is fine.
    fn next_tick(&self) -> Option<Duration> {
        None
    }
}

/// Everything one repetition needs.
pub struct RepetitionSpec<'a> {
    /// The library.
    pub lut: &'a dyn Lut,
    /// Its executable.
    pub binary: &'a Path,
    /// I/O path.
    pub io: IoMode,
    /// Connections, streams and bytes per stream.
    pub workload: nesquic_testcases::Workload,
    /// TLS material.
    pub certs: &'a CertFiles,
    /// Whole-repetition limit.
    pub timeout: Duration,
    /// Set by SIGINT/SIGTERM.
    pub interrupted: &'a AtomicBool,
    /// Draw a progress bar once a repetition has run this long.
    pub progress_after: Duration,
    /// Label for the progress bar ("rep 2/5").
    pub label: String,
    /// LUT-specific settings (`--lut-opt`).
    pub options: &'a [String],
    /// Duty-cycle the function probes (`--duty`).
    pub duty: Option<crate::duty::DutySpec>,
    /// `--link veth`: server and client run in its hosts' network namespaces; the client may be
    /// routed through the impairment relay.
    pub topology: Option<&'a nesquic_link::Topology>,
    /// Ask the LUT for its own qlog, written to `<dir>/lut-<role>-<rep>.sqlog`.
    pub lut_qlog: Option<(&'a Path, u32)>,
}

/// What one repetition measured.
#[derive(Debug, Clone)]
pub struct RepetitionOutcome {
    /// The client's own measurements.
    pub client_result: ClientResult,
    /// The server's exit and accounting.
    pub server: Exit,
    /// The client's exit and accounting.
    pub client: Exit,
    /// qlog files the LUT wrote, with the wall clock of their time zero (ns since the epoch).
    pub lut_qlogs: Vec<(Role, std::path::PathBuf, u64)>,
}

const POLL: Duration = Duration::from_millis(50);
/// How long the client's result line may trail its exit.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);
/// How long the server may take to exit after the client finished.
const SERVER_GRACE: Duration = Duration::from_secs(10);

/// Runs one repetition.
pub fn run_repetition(spec: &RepetitionSpec<'_>, observer: &mut dyn ProcessObserver) -> Result<RepetitionOutcome> {
    let (tx, rx) = channel();
    let deadline = Instant::now() + spec.timeout;
    let server_args = spec.lut.server_args(&ServerSpec {
        listen: match spec.topology {
            Some(t) => std::net::SocketAddr::new(t.server.ip, 0),
            None => std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        },
        workload: spec.workload,
        certs: spec.certs,
        io: spec.io,
        qlog: lut_qlog_path(spec, Role::Server).as_deref(),
        options: spec.options,
    });
    let server_ns = spec.topology.map(|t| t.server.netns_path());
    let server_env = observer.environment(Role::Server)?;
    let mut server =
        LutProcess::spawn_in(Role::Server, spec.binary, &server_args, &server_env, tx.clone(), server_ns.as_deref())?;
    observer.spawned(Role::Server, server.pid)?;
    server.release()?;

    let mut watch = Watch {
        rx,
        deadline,
        interrupted: spec.interrupted,
        server_exit: None,
        client_exit: None,
        done: None,
        lut_qlogs: Vec::new(),
        poll: POLL,
    };
    let addr = loop {
        let event = watch.next(&mut [&mut server])?;
        if let Some((role, e)) = &event {
            observer.lut_event(*role, e)?;
        }
        match event {
            Some((Role::Server, LutEvent::Listening { addr })) => break addr,
            _ if watch.server_exit.is_some() => {
                return Err(EngineError::msg(crashed("server", &server, watch.server_exit, "before it listened")))
            }
            _ => {}
        }
    };

    let client_args = spec.lut.client_args(&ClientSpec {
        connect: spec.topology.map_or(addr, |t| t.route(addr)),
        certs: spec.certs,
        workload: spec.workload,
        io: spec.io,
        qlog: lut_qlog_path(spec, Role::Client).as_deref(),
        options: spec.options,
    });
    let client_ns = spec.topology.map(|t| t.client.netns_path());
    let client_env = observer.environment(Role::Client)?;
    let mut client =
        LutProcess::spawn_in(Role::Client, spec.binary, &client_args, &client_env, tx, client_ns.as_deref())?;
    observer.spawned(Role::Client, client.pid)?;
    client.release()?;
    let started = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    let mut client_exited_at: Option<Instant> = None;
    let mut progress = 0;

    while watch.client_exit.is_none() || watch.server_exit.is_none() || watch.done.is_none() {
        watch.poll = observer.next_tick().map_or(POLL, |t| t.clamp(Duration::from_millis(1), POLL));
        let event = watch.next(&mut [&mut server, &mut client])?;
        if let Some((_, LutEvent::Done(result))) = &event {
            progress = result.bytes;
        }
        if let Some((role, e)) = &event {
            observer.lut_event(*role, e)?;
        }
        observer.tick(progress)?;
        if let Some((Role::Client, LutEvent::Progress { bytes })) = event {
            progress = bytes;
            if bar.is_none() && started.elapsed() >= spec.progress_after {
                bar = Some(progress_bar(spec.workload.total_bytes(), &spec.label));
            }
            if let Some(bar) = &bar {
                bar.set_position(bytes);
            }
        }
        if let Some(exit) = watch.client_exit {
            // The result line travels through a reader thread and may trail the exit a little.
            let output_late = exit.success() && watch.done.is_none();
            let waited_enough = client_exited_at.get_or_insert_with(Instant::now).elapsed() > OUTPUT_GRACE;
            if !exit.success() || (output_late && waited_enough) {
                server.kill();
                let why = if exit.success() { "without reporting a result" } else { "" };
                return Err(EngineError::msg(crashed("client", &client, Some(exit), why)));
            }
            // The server should follow promptly once the client has closed the connection.
            watch.deadline = watch.deadline.min(Instant::now() + SERVER_GRACE);
        }
        if let Some(exit) = watch.server_exit {
            if !exit.success() {
                client.kill();
                return Err(EngineError::msg(crashed("server", &server, Some(exit), "during the transfer")));
            }
        }
    }
    // Lines a process wrote just before exiting (the I/O layer's counters) may still be on
    // their way through the reader threads: take them, waiting a little for the pipes to close.
    let until = Instant::now() + OUTPUT_GRACE;
    loop {
        let finished = server.stdout_finished() && client.stdout_finished();
        while let Some((role, e)) = watch.try_next() {
            observer.lut_event(role, &e)?;
        }
        if finished || Instant::now() >= until {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(RepetitionOutcome {
        // Invariant: the loop above only ends with a successful client exit after Done.
        client_result: watch.done.ok_or_else(|| EngineError::msg("client reported no result"))?,
        server: watch.server_exit.ok_or_else(|| EngineError::msg("server exit missing"))?,
        client: watch.client_exit.ok_or_else(|| EngineError::msg("client exit missing"))?,
        lut_qlogs: watch.lut_qlogs,
    })
}

fn lut_qlog_path(spec: &RepetitionSpec<'_>, role: Role) -> Option<std::path::PathBuf> {
    spec.lut_qlog.map(|(dir, rep)| dir.join(format!("lut-{role}-{rep}.sqlog")))
}

/// Collects events and enforces the deadline and interruption for a set of processes.
struct Watch<'a> {
    rx: Receiver<ProcessEvent>,
    deadline: Instant,
    interrupted: &'a AtomicBool,
    server_exit: Option<Exit>,
    client_exit: Option<Exit>,
    done: Option<ClientResult>,
    lut_qlogs: Vec<(Role, std::path::PathBuf, u64)>,
    /// Longest wait for an event.
    poll: Duration,
}

impl Watch<'_> {
    /// A report already queued, without waiting (exits are recorded, not returned).
    fn try_next(&mut self) -> Option<(Role, LutEvent)> {
        loop {
            match self.rx.try_recv().ok()? {
                ProcessEvent::Report(role, event) => return Some((role, event)),
                ProcessEvent::Exited(..) => continue,
            }
        }
    }

    /// Waits for the next report; records exits and results. Kills `procs` on timeout or signal.
    fn next(&mut self, procs: &mut [&mut LutProcess]) -> Result<Option<(Role, LutEvent)>> {
        if self.interrupted.load(Ordering::Relaxed) {
            procs.iter_mut().for_each(|p| p.kill());
            return Err(EngineError::msg("interrupted: LUT processes killed"));
        }
        let now = Instant::now();
        if now >= self.deadline {
            procs.iter_mut().for_each(|p| p.kill());
            return Err(EngineError::msg(
                "timed out: the repetition did not finish within the time limit (raise it with --timeout)",
            ));
        }
        match self.rx.recv_timeout(self.poll.min(self.deadline - now)) {
            Ok(ProcessEvent::Exited(role, exit)) => {
                if let Some(p) = procs.iter_mut().find(|p| p.role == role) {
                    p.mark_reaped();
                }
                match role {
                    Role::Server => self.server_exit = Some(exit),
                    Role::Client | Role::Process => self.client_exit = Some(exit),
                }
                Ok(None)
            }
            Ok(ProcessEvent::Report(role, event)) => {
                match &event {
                    LutEvent::Done(result) => self.done = Some(result.clone()),
                    LutEvent::Qlog { path, start_unix_ns } => self.lut_qlogs.push((role, path.clone(), *start_unix_ns)),
                    _ => {}
                }
                Ok(Some((role, event)))
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(EngineError::msg("lost contact with the LUT processes")),
        }
    }
}

fn crashed(what: &str, process: &LutProcess, exit: Option<Exit>, when: &str) -> String {
    let how = exit.map(|e| e.describe()).unwrap_or_else(|| "unknown status".into());
    let tail = process.stderr_tail();
    let mut msg = format!("{what} (pid {}) ended with {how} {when}", process.pid);
    if !tail.is_empty() {
        msg.push_str(&format!("; its last output:\n{tail}"));
    }
    msg
}

fn progress_bar(total: u64, label: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    // The template is a constant known to be valid; fall back to the default style otherwise.
    if let Ok(style) =
        ProgressStyle::with_template("{prefix} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(label.to_string());
    bar
}
