//! One repetition: start the server, wait until it listens, start the client, follow progress,
//! collect both exits. Any failure kills what still runs.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use nesquic_lut_adapters::lut::{ClientSpec, ServerSpec};
use nesquic_lut_adapters::report::{ClientResult, LutEvent};
use nesquic_lut_adapters::tls::CertFiles;
use nesquic_lut_adapters::{IoMode, Lut};

pub use crate::lifecycle::ProcessObserver;
use crate::lifecycle::{start, Launch, Supervisor, POLL};
use crate::process::{Exit, LutProcess, Role};
use crate::remote::RemoteRepetition;
use crate::EngineError;

type Result<T, E = EngineError> = std::result::Result<T, E>;

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
    pub options: &'a [nesquic_lut_adapters::LutOpt],
    /// Duty-cycle the function probes (`--duty`).
    pub duty: Option<crate::duty::DutySpec>,
    /// `--link veth`: server and client run in its hosts' network namespaces; the client may be
    /// routed through the impairment relay.
    pub topology: Option<&'a nesquic_link::Topology>,
    /// Ask the LUT for its own qlog, written to `<dir>/lut-<role>-<rep>.sqlog`.
    pub lut_qlog: Option<(&'a Path, u32)>,
    /// Roles on other hosts (`--server-host`, `--client-host`), reached over SSH.
    pub remote: Option<&'a crate::remote::RemoteStage>,
    /// `--pin`: the CPU of each local side.
    pub pin: Option<crate::pin::PinnedCpus>,
    /// A pair (docs/pairs.md): the client's LUT, executable, I/O path and settings; `lut`,
    /// `binary`, `io` and `options` are then the server's.
    pub client: Option<ClientSideSpec<'a>>,
}

/// The client side of a pair's repetition.
#[derive(Clone, Copy)]
pub struct ClientSideSpec<'a> {
    /// The client's library.
    pub lut: &'a dyn Lut,
    /// What starts it.
    pub binary: &'a Path,
    /// Its I/O path.
    pub io: IoMode,
    /// Its settings.
    pub options: &'a [nesquic_lut_adapters::LutOpt],
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
    /// What remote roles' probes measured.
    pub remote_totals: Vec<(Role, crate::wire::RoleTotals)>,
    /// The payload was checked byte for byte (adapters always check it; a perf endpoint's is
    /// only counted).
    pub payload_verified: bool,
}

/// How long the client's result line may trail its exit.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);
/// How long the server may take to exit after the client finished.
const SERVER_GRACE: Duration = Duration::from_secs(10);

/// Runs one repetition.
pub fn run_repetition(spec: &RepetitionSpec<'_>, observer: &mut dyn ProcessObserver) -> Result<RepetitionOutcome> {
    let (tx, rx) = channel();
    let mut watch = Supervisor::new(rx, spec.timeout, spec.interrupted, "the LUT processes");
    let listen = match (spec.topology, spec.remote) {
        (Some(t), _) => std::net::SocketAddr::new(t.server.ip, 0),
        (None, Some(r)) => std::net::SocketAddr::new(r.server_ip, 0),
        (None, None) => std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    // A stack's own endpoint prints no report lines: the engine watches its port and checks
    // its download (endpoint.rs).
    let endpoint = spec.lut.endpoint();
    let listen = match endpoint {
        Some(e) => crate::endpoint::listen_addr(e, spec.lut.name(), listen)?,
        None => listen,
    };
    let mut server = spawn_role(spec, Role::Server, listen, tx.clone(), observer)?;

    let addr = loop {
        let event = watch.next(&mut [&mut server])?;
        if let Some((role, e)) = &event {
            observer.lut_event(*role, e)?;
        }
        match event {
            Some((Role::Server, LutEvent::Listening { addr })) => break addr,
            _ if watch.exit(Role::Server).is_some() => {
                return Err(EngineError::msg(crashed(
                    &spec.name_of(Role::Server),
                    &server,
                    watch.exit(Role::Server),
                    "before it listened",
                )))
            }
            _ => {}
        }
        if endpoint.is_some() && crate::endpoint::udp_port_bound(&server.pid.to_string(), listen.port()) {
            let listening = LutEvent::Listening { addr: listen };
            observer.lut_event(Role::Server, &listening)?;
            break listen;
        }
    };

    let connect = spec.topology.map_or(addr, |t| t.route(addr));
    let mut client = spawn_role(spec, Role::Client, connect, tx, observer)?;
    let started = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    let mut client_exited_at: Option<Instant> = None;
    let mut progress = 0;
    let mut payload_verified = true;
    // An endpoint server that never exits is stopped once the client is done.
    let mut server_stopped = false;

    while watch.exit(Role::Client).is_none() || watch.exit(Role::Server).is_none() || watch.done.is_none() {
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
        if let (Some(e), Some(exit)) = (endpoint, watch.exit(Role::Client)) {
            if exit.success() && watch.done.is_none() {
                let lifetime = client_exited_at.get_or_insert_with(Instant::now).duration_since(started);
                let (result, verified) =
                    match crate::endpoint::client_result(e, spec.certs, spec.workload.size, lifetime) {
                        Ok(r) => r,
                        Err(err) => {
                            server.kill();
                            return Err(err);
                        }
                    };
                payload_verified = verified;
                observer.lut_event(Role::Client, &LutEvent::Done(result.clone()))?;
                watch.done = Some(result);
                if !e.server_exits() && watch.exit(Role::Server).is_none() {
                    // SAFETY: plain syscall; the server has not been reaped, so the pid is still its.
                    unsafe { libc::kill(server.pid, libc::SIGTERM) };
                    server_stopped = true;
                }
            }
        }
        if let Some(exit) = watch.exit(Role::Client) {
            // The result line travels through a reader thread and may trail the exit a little.
            let output_late = exit.success() && watch.done.is_none();
            let waited_enough = client_exited_at.get_or_insert_with(Instant::now).elapsed() > OUTPUT_GRACE;
            if !exit.success() {
                return Err(failed_with_peer(spec, &mut watch, Role::Client, &mut client, &mut server, ""));
            }
            if output_late && waited_enough {
                server.kill();
                return Err(EngineError::msg(crashed(
                    &spec.name_of(Role::Client),
                    &client,
                    Some(exit),
                    "without reporting a result",
                )));
            }
            // The server should follow promptly once the client has closed the connection.
            watch.shorten(Instant::now() + SERVER_GRACE, || {
                format!(
                    "the {} was still running {} s after the client finished; a server must exit once its \
                     client has closed the connection (a lost CONNECTION_CLOSE leaves one waiting out its \
                     idle timeout)",
                    spec.name_of(Role::Server),
                    SERVER_GRACE.as_secs()
                )
            });
        }
        if let Some(exit) = watch.exit(Role::Server) {
            if !exit.success() && !server_stopped {
                return Err(failed_with_peer(
                    spec,
                    &mut watch,
                    Role::Server,
                    &mut server,
                    &mut client,
                    "during the transfer",
                ));
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
        client_result: watch.done.take().ok_or_else(|| EngineError::msg("client reported no result"))?,
        server: watch.exit(Role::Server).ok_or_else(|| EngineError::msg("server exit missing"))?,
        client: watch.exit(Role::Client).ok_or_else(|| EngineError::msg("client exit missing"))?,
        lut_qlogs: watch.lut_qlogs,
        remote_totals: watch.remote_totals,
        payload_verified,
    })
}

impl RepetitionSpec<'_> {
    /// How `role` starts: this LUT's executable, in its host's namespace with `--link`.
    fn launch<'s>(&'s self, role: Role, args: &'s [std::ffi::OsString]) -> Launch<'s> {
        let netns = self.topology.map(|t| match role {
            Role::Server => t.server.netns_path(),
            _ => t.client.netns_path(),
        });
        let cpu = self.pin.as_ref().and_then(|p| crate::pin::cpu_of(p, role));
        let (_, binary, _, _) = self.side(role);
        Launch { role, binary, args, netns, inherit_output: false, cpu }
    }

    /// `role`'s library, what starts it, its I/O path and settings (a pair's client has its own).
    fn side(&self, role: Role) -> (&dyn Lut, &Path, IoMode, &[nesquic_lut_adapters::LutOpt]) {
        match (&self.client, role) {
            (Some(c), Role::Client) => (c.lut, c.binary, c.io, c.options),
            _ => (self.lut, self.binary, self.io, self.options),
        }
    }

    /// "server" or "client", with the LUT's name in a pair ("client (msquic)"): which side
    /// failed must say which library it was.
    fn name_of(&self, role: Role) -> String {
        match &self.client {
            Some(_) => format!("{} ({})", role.name(), self.side(role).0.name()),
            None => role.name().to_string(),
        }
    }
}

/// Starts `role`'s LUT: over SSH when its host is remote, else here. `addr` is where a server
/// listens, or what a client connects to.
fn spawn_role(
    spec: &RepetitionSpec<'_>,
    role: Role,
    addr: std::net::SocketAddr,
    tx: std::sync::mpsc::Sender<crate::process::ProcessEvent>,
    observer: &mut dyn ProcessObserver,
) -> Result<LutProcess> {
    let qlog = lut_qlog_path(spec, role);
    if let Some((stage, target)) = spec.remote.and_then(|r| r.roles.target(role).map(|t| (r, t))) {
        let destination = stage.qlog_destination(role, qlog);
        let (_, _, io, options) = spec.side(role);
        let repetition = RemoteRepetition {
            io,
            workload: spec.workload,
            options,
            timeout: spec.timeout,
            lut_qlog: spec.lut_qlog.is_some(),
        };
        return crate::process::link::spawn(target, &stage.plan(role, addr, repetition), destination, tx);
    }
    let (lut, _, io, options) = spec.side(role);
    let (certs, workload, qlog) = (spec.certs, spec.workload, qlog.as_deref());
    let args = match role {
        Role::Server => lut.server_args(&ServerSpec { listen: addr, workload, certs, io, qlog, options }),
        _ => lut.client_args(&ClientSpec { connect: addr, certs, workload, io, qlog, options }),
    };
    start(&spec.launch(role, &args), tx, observer)
}

fn lut_qlog_path(spec: &RepetitionSpec<'_>, role: Role) -> Option<std::path::PathBuf> {
    spec.lut_qlog.map(|(dir, rep)| dir.join(format!("lut-{role}-{rep}.sqlog")))
}

/// How long the other side may take to fail on its own after one side failed.
const PEER_GRACE: Duration = Duration::from_secs(1);

/// The error for a repetition in which `failed` ended badly. One side's failure usually ends
/// the other's connection: a client that finds corrupted payload closes it, and the server
/// then fails with "closed by peer", sometimes first. Which side exits first is a race, so the
/// other side gets [`PEER_GRACE`] to end on its own, and a failure of its own is reported too:
/// the root cause is in one of the two outputs, whichever exited first.
fn failed_with_peer(
    spec: &RepetitionSpec<'_>,
    watch: &mut Supervisor<'_>,
    role: Role,
    failed: &mut LutProcess,
    peer: &mut LutProcess,
    when: &str,
) -> EngineError {
    let peer_role = if role == Role::Server { Role::Client } else { Role::Server };
    let until = Instant::now() + PEER_GRACE;
    watch.poll = Duration::from_millis(20);
    while watch.exit(peer_role).is_none() && Instant::now() < until {
        // Interrupted or past the deadline: the supervisor has killed both; report `failed`.
        if watch.next(&mut [&mut *failed, &mut *peer]).is_err() {
            break;
        }
    }
    peer.kill();
    let mut msg = crashed(&spec.name_of(role), failed, watch.exit(role), when);
    if let Some(exit) = watch.exit(peer_role).filter(|e| !e.success()) {
        msg.push_str(&format!("\nand the {}", crashed(&spec.name_of(peer_role), peer, Some(exit), "too")));
    }
    EngineError::msg(msg)
}

fn crashed(what: &str, process: &LutProcess, exit: Option<Exit>, when: &str) -> String {
    let how = exit.map(|e| e.describe()).unwrap_or_else(|| "unknown status".into());
    let tail = process.stderr_tail();
    let when = if when.is_empty() { String::new() } else { format!(" {when}") };
    let mut msg = match &process.remote {
        Some(r) if !r.reported_exit() => format!(
            "lost the SSH session to {} (the {what}'s host){when}: ssh ended with {how} before the remote role reported its LUT's exit",
            r.destination
        ),
        Some(r) => format!("{what} on {} ended with {how}{when}", r.destination),
        None => format!("{what} (pid {}) ended with {how}{when}", process.pid),
    };
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
