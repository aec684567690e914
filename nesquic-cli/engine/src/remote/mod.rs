//! Roles on other hosts, over SSH: the local side. [`connect`] checks that the remote `nesquic`
//! is the same build, reads the host's facts and measures its clock offset; [`RemoteStage`] holds
//! that for the run and makes each repetition's plan for a role there. The repetition starts
//! `nesquic remote-role` on that host ([`crate::process::link`]), which runs the role's LUT under
//! the host's probes ([`crate::remote_role`]) and streams everything back as [`crate::wire`] lines.

pub mod facts;

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use nesquic_protocol::cli::IoMode;
use nesquic_protocol::{LutOpt, Role};
use nesquic_record::events::{ClockOffset, HostInfo};
use nesquic_testcases::Workload;

use crate::process::link::QlogDestination;
use crate::ssh;
pub use crate::ssh::SshTarget;
use crate::tool::ToolInfo;
use crate::wire::{self, Reply, Request};
use crate::EngineError;

/// Clock pings per host: the one with the shortest round trip is kept.
const CLOCK_ROUNDS: u32 = 8;
/// How long a remote host may take to answer the hello (ssh connects, nesquic starts).
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);

/// Which roles run where (`--server-host`, `--client-host`), and the address the server binds.
#[derive(Debug, Clone, Default)]
pub struct RemoteRoles {
    /// The server's host, if remote.
    pub server: Option<SshTarget>,
    /// The client's host, if remote.
    pub client: Option<SshTarget>,
    /// `--server-addr`: the address the server listens on and the client connects to.
    pub server_addr: Option<IpAddr>,
}

impl RemoteRoles {
    /// Whether any role runs elsewhere.
    pub fn any(&self) -> bool {
        self.server.is_some() || self.client.is_some()
    }

    /// The host of `role`, if remote.
    pub fn target(&self, role: Role) -> Option<&SshTarget> {
        match role {
            Role::Server => self.server.as_ref(),
            _ => self.client.as_ref(),
        }
    }
}

/// The version both sides compare: crate version and git revision.
pub fn version_of(tool: &ToolInfo) -> String {
    format!("{} ({})", tool.version, tool.git_revision)
}

/// Opens a session to `target`, checks its `nesquic` is ours, reads its facts (the NIC towards
/// `peer`) and measures its clock offset; the session ends when this returns.
pub fn connect(target: &SshTarget, peer: Option<IpAddr>, tool: &ToolInfo) -> Result<HostInfo, EngineError> {
    let mut child = target
        .remote_role()
        .spawn()
        .map_err(|e| EngineError::msg(format!("cannot run ssh (install openssh-client): {e}")))?;
    let (Some(mut stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(EngineError::msg("ssh started without its pipes"));
    };
    let lines = ssh::Lines::spawn(stdout);
    let errors = ssh::Lines::spawn(stderr);
    let ours = version_of(tool);
    let result = (|| {
        let hello = Request::Hello { wire: wire::WIRE_VERSION, version: ours.clone(), peer };
        // A failed write means ssh already gave up: its exit status and stderr say why.
        let _ = wire::send(&mut stdin, &hello);
        let Some(line) = lines.next(HELLO_TIMEOUT) else { return Ok(None) };
        let reply: Reply = serde_json::from_str(&line).map_err(|e| {
            EngineError::msg(format!(
                "{} on {} answered with something that is not nesquic's remote protocol ({e}): {line}",
                target.remote_nesquic, target.destination
            ))
        })?;
        let Reply::Hello { wire: theirs, version, mut host } = reply else {
            return Err(EngineError::msg(format!("{} answered the hello with {line}", target.destination)));
        };
        if version != ours || theirs != wire::WIRE_VERSION {
            return Err(EngineError::msg(format!(
                "nesquic version mismatch: this host ({}) runs {ours} (wire {}), {} runs {version} (wire {theirs}): \
                 install the same build on both hosts (or point --remote-nesquic at it)",
                local_name(),
                wire::WIRE_VERSION,
                target.destination
            )));
        }
        host.clock = Some(clock_offset(&mut stdin, &lines, target)?);
        host.name = Some(target.destination.clone());
        host.nesquic_version = Some(version);
        Ok(Some(host))
    })();
    drop(stdin);
    // The remote role exits at end of input; ssh follows.
    let status = wait_with_timeout(&mut child, Duration::from_secs(5));
    match result {
        Ok(Some(host)) => Ok(host),
        Err(e) => Err(e),
        Ok(None) => {
            let said: Vec<String> = std::iter::from_fn(|| errors.next(Duration::from_millis(500))).collect();
            Err(target.failure(status, &said.join("\n")))
        }
    }
}

/// NTP-style: each ping's offset assumes the two legs took as long; the shortest round trip
/// bounds that error best.
fn clock_offset(stdin: &mut impl Write, lines: &ssh::Lines, target: &SshTarget) -> Result<ClockOffset, EngineError> {
    let mut best: Option<ClockOffset> = None;
    for _ in 0..CLOCK_ROUNDS {
        let sent_ns = wire::now_ns();
        wire::send(stdin, &Request::Clock { sent_ns })
            .map_err(|e| EngineError::msg(format!("SSH session to {} closed: {e}", target.destination)))?;
        let line = lines
            .next(HELLO_TIMEOUT)
            .ok_or_else(|| EngineError::msg(format!("{} stopped answering clock pings", target.destination)))?;
        let received_ns = wire::now_ns();
        let Ok(Reply::Clock { sent_ns: echoed, remote_ns }) = serde_json::from_str(&line) else {
            return Err(EngineError::msg(format!("{} answered a clock ping with {line}", target.destination)));
        };
        if echoed != sent_ns {
            continue;
        }
        let rtt_ns = received_ns.saturating_sub(sent_ns);
        let midpoint = sent_ns as i128 + rtt_ns as i128 / 2;
        let offset_ns = (remote_ns as i128 - midpoint) as i64;
        if best.is_none_or(|b| rtt_ns < b.rtt_ns) {
            best = Some(ClockOffset { offset_ns, rtt_ns, rounds: CLOCK_ROUNDS });
        }
    }
    best.ok_or_else(|| EngineError::msg(format!("no clock ping to {} came back", target.destination)))
}

fn wait_with_timeout(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
    let until = std::time::Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.code(),
            Ok(None) if std::time::Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// This machine's name, for messages.
fn local_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map_or_else(|_| "local".into(), |s| s.trim().to_string())
}

/// What every repetition of a run with remote roles shares: the hosts (checked, their facts and
/// clocks), the address the server binds, and what each remote role's plan carries.
pub struct RemoteStage {
    /// Which roles run where.
    pub roles: RemoteRoles,
    /// The address the server binds and the client connects to.
    pub server_ip: IpAddr,
    /// Each role's host: kernel, CPU, NIC, offloads, clock offset (remote roles).
    pub hosts: Vec<(Role, HostInfo)>,
    lut: String,
    cert: Vec<u8>,
    key: Vec<u8>,
    probe: Option<String>,
    probe_backend: crate::backend::BackendChoice,
}

/// What one repetition tells a remote role, besides what the stage holds for the whole run.
pub(crate) struct RemoteRepetition<'a> {
    /// I/O path.
    pub io: IoMode,
    /// The workload.
    pub workload: Workload,
    /// `--lut-opt` settings.
    pub options: &'a [LutOpt],
    /// The repetition's time limit.
    pub timeout: Duration,
    /// Ask the LUT for its own qlog and send it back (`--lut-qlog`).
    pub lut_qlog: bool,
}

/// What a run tells its remote roles, besides the repetition.
pub struct StageInputs<'a> {
    /// The LUT's name.
    pub lut: &'a str,
    /// The run's certificate and key.
    pub certs: &'a nesquic_lut_adapters::tls::CertFiles,
    /// `--probe`.
    pub probe: Option<String>,
    /// `--probe-backend`.
    pub probe_backend: crate::backend::BackendChoice,
    /// The tool (its version is checked on every host).
    pub tool: &'a ToolInfo,
}

impl RemoteStage {
    /// Reaches every remote host (version checked, facts read, clock measured) and picks the
    /// server's address: `--server-addr`, else the address ssh reaches the server's host at,
    /// else (a local server) this host's address on the route to the client's host.
    pub fn connect(roles: &RemoteRoles, inputs: StageInputs<'_>) -> Result<Self, EngineError> {
        let server_host = roles.server.as_ref().map(SshTarget::address).transpose()?;
        let client_host = roles.client.as_ref().map(SshTarget::address).transpose()?;
        let source_towards = |peer: IpAddr| -> Result<IpAddr, EngineError> {
            let (dev, src) = facts::route_to(peer).map_err(EngineError::msg)?;
            src.ok_or_else(|| EngineError::msg(format!("the route to {peer} (via {dev}) names no source address")))
        };
        let server_ip = match (roles.server_addr, server_host, client_host) {
            (Some(a), _, _) => a,
            (None, Some(ip), _) => ip,
            (None, None, Some(client)) => source_towards(client)?,
            (None, None, None) => return Err(EngineError::msg("no role runs on another host")),
        };
        let client_ip = match client_host {
            Some(ip) => ip,
            None => source_towards(server_ip)?,
        };
        let mut hosts = Vec::new();
        for (role, peer) in [(Role::Server, client_ip), (Role::Client, server_ip)] {
            let host = match roles.target(role) {
                Some(target) => connect(target, Some(peer), inputs.tool)?,
                None => {
                    let mut here = facts::here(Some(peer));
                    here.name = Some("local".into());
                    here
                }
            };
            hosts.push((role, host));
        }
        let read = |p: &std::path::Path| nesquic_lut_adapters::tls::read(p);
        Ok(Self {
            roles: roles.clone(),
            server_ip,
            hosts,
            lut: inputs.lut.to_string(),
            cert: read(&inputs.certs.cert)?,
            key: read(&inputs.certs.key)?,
            probe: inputs.probe,
            probe_backend: inputs.probe_backend,
        })
    }

    /// The facts of `role`'s host.
    pub fn host(&self, role: Role) -> Option<&HostInfo> {
        self.hosts.iter().find(|(r, _)| *r == role).map(|(_, h)| h)
    }

    /// The plan `role` runs on its host in one repetition; `addr` is what it binds (server) or
    /// connects to (client).
    pub(crate) fn plan(&self, role: Role, addr: SocketAddr, repetition: RemoteRepetition<'_>) -> wire::RolePlan {
        wire::RolePlan {
            role,
            lut: self.lut.clone(),
            io: repetition.io,
            workload: repetition.workload,
            options: repetition.options.to_vec(),
            addr,
            cert: self.cert.clone(),
            key: if role == Role::Server { self.key.clone() } else { Vec::new() },
            probe: self.probe.clone(),
            probe_backend: self.probe_backend,
            timeout: repetition.timeout,
            lut_qlog: repetition.lut_qlog,
        }
    }

    /// Where `role`'s own qlog goes here (`--lut-qlog`), shifted by its host's clock offset.
    pub(crate) fn qlog_destination(&self, role: Role, path: Option<std::path::PathBuf>) -> Option<QlogDestination> {
        let clock_offset_ns = self.host(role).and_then(|h| h.clock).map_or(0, |c| c.offset_ns);
        path.map(|path| QlogDestination { path, clock_offset_ns })
    }
}

/// Adds a remote role's totals to what the local probes measured of the other role.
pub fn merge_totals(
    totals: &wire::RoleTotals,
    metrics: &mut Option<nesquic_ebpf::Metrics>,
    agents: &mut Vec<nesquic_record::run::AgentReport>,
    profile: &mut Option<nesquic_ebpf::profile::Profile>,
) {
    if let Some(theirs) = &totals.metrics {
        *metrics = match metrics.take() {
            Some(ours) => nesquic_ebpf::Metrics::merge(&[ours, theirs.clone()]),
            None => Some(theirs.clone()),
        };
    }
    agents.extend(totals.agents.iter().cloned());
    if let Some(theirs) = &totals.profile {
        match profile.as_mut() {
            Some(ours) => ours.roles.extend(theirs.roles.iter().cloned()),
            None => *profile = Some(theirs.clone()),
        }
    }
}
