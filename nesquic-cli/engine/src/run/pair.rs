//! Client × server pairs (docs/pairs.md): one LUT's server against another LUT's client. Every
//! adapter speaks the same benchmark protocol (docs/protocol.md: ALPN `nesquic`, the run's
//! certificate, the payload pattern, the report lines), so a pair is two executables with one
//! certificate. Each side keeps its own executable, I/O path and settings; [`check`] refuses a
//! pair that cannot talk, with the reason, before anything starts.

use std::path::PathBuf;

use nesquic_lut_adapters::{IoMode, Lut, LutOpt};
use nesquic_protocol::Role;

use nesquic_record::events::{IoPath, LutStarted, RunStarted};
use nesquic_record::run::{AgentReport, DrivenBy, LutInfo};

use super::RunPlan;
use crate::plan::ProbePlan;
use crate::EngineError;

/// The client side of a run whose client is another LUT than its server (`RunPlan::client`).
pub struct ClientSide {
    /// The client's library.
    pub lut: Box<dyn Lut>,
    /// With a build from a local checkout: where from.
    pub lut_source: Option<nesquic_record::run::LutSource>,
    /// The client's executable (probes attach to it).
    pub binary: PathBuf,
    /// The client's I/O path.
    pub io: IoMode,
    /// The client's settings, checked against its descriptor.
    pub lut_options: Vec<LutOpt>,
}

/// LUTs whose transport is TCP, not QUIC (the descriptors have no transport field): they talk
/// only to themselves.
const TCP_LUTS: &[&str] = &["tcp-tls"];

/// Why `server` and `client` cannot talk, if they cannot: a TCP baseline speaks only to itself,
/// `exec` runs the user's two commands. Settings each side lacks are refused by its own
/// descriptor's checks (they name the side).
pub fn check(server: &dyn Lut, client: &dyn Lut) -> Result<(), EngineError> {
    let (s, c) = (server.name(), client.name());
    if s == c {
        return Ok(());
    }
    if server.runs_user_commands() || client.runs_user_commands() {
        return Err(EngineError::msg(format!(
            "server {s} x client {c}: --lut exec runs --server-cmd and --client-cmd, a pair of its own; it cannot be one side of another pair"
        )));
    }
    for (side, name, other) in [("server", s, c), ("client", c, s)] {
        if TCP_LUTS.contains(&name) {
            return Err(EngineError::msg(format!(
                "server {s} x client {c}: the {side} {name} speaks TLS over kernel TCP, the {} {other} QUIC; {name} pairs only with itself",
                if side == "server" { "client" } else { "server" }
            )));
        }
    }
    Ok(())
}

impl RunPlan {
    /// The client's library (the server's unless the run is a pair).
    pub fn client_lut(&self) -> &dyn Lut {
        self.client.as_ref().map_or(self.lut.as_ref(), |c| c.lut.as_ref())
    }

    /// The client's executable.
    pub fn client_binary(&self) -> &std::path::Path {
        self.client.as_ref().map_or(&self.binary, |c| &c.binary)
    }

    /// The library, executable, I/O path and settings of `role`'s side.
    pub fn side(&self, role: Role) -> (&dyn Lut, &std::path::Path, IoMode, &[LutOpt]) {
        match (&self.client, role) {
            (Some(c), Role::Client) => (c.lut.as_ref(), &c.binary, c.io, &c.lut_options),
            _ => (self.lut.as_ref(), &self.binary, self.io, &self.lut_options),
        }
    }

    /// Whether the client is another LUT than the server.
    pub fn is_pair(&self) -> bool {
        self.client.is_some()
    }

    /// "quinn", or "server quinn x client msquic" for a pair (directory names, titles, errors).
    pub fn label(&self) -> String {
        match &self.client {
            Some(c) => format!("server {} x client {}", self.lut.name(), c.lut.name()),
            None => self.lut.name().to_string(),
        }
    }

    /// "quinn", or "quinn-x-msquic" (server first): a run directory's name.
    pub fn dir_name(&self) -> String {
        match &self.client {
            Some(c) => format!("{}-x-{}", self.lut.name(), c.lut.name()),
            None => self.lut.name().to_string(),
        }
    }
}

/// The LUT a remote role runs (`--server-host`/`--client-host`): the remote host runs one LUT
/// per run, so a pair may put one side there, not both.
pub(crate) fn remote_lut(plan: &RunPlan) -> Result<&'static str, EngineError> {
    let Some(c) = &plan.client else { return Ok(plan.lut.name()) };
    match (plan.remote.target(Role::Server).is_some(), plan.remote.target(Role::Client).is_some()) {
        (true, true) => Err(EngineError::msg(format!(
            "{}: --server-host with --client-host runs one LUT on both remote hosts; run one side of a pair here (not supported per side yet)",
            plan.label()
        ))),
        (false, true) => Ok(c.lut.name()),
        _ => Ok(plan.lut.name()),
    }
}

/// The `--probe` list resolved against both sides' executables (each must match what it asks
/// for: an error names the side), as one plan.
pub(crate) fn probe_plan(plan: &RunPlan, list: &str) -> Result<ProbePlan, EngineError> {
    let server = ProbePlan::new(list, &plan.binary)?;
    let Some(c) = plan.client.as_ref().filter(|c| c.binary != plan.binary) else { return Ok(server) };
    let client = ProbePlan::new(list, &c.binary)?;
    for (side, name, p) in [("server", plan.lut.name(), &server), ("client", c.lut.name(), &client)] {
        p.require_matches().map_err(|e| EngineError::msg(format!("the {side} {name}: {e}")))?;
    }
    Ok(server.merge(client))
}

/// The executable the user-space agent's choice is made on: a side that cannot load it (a
/// static binary) decides for both, as one run has one backend.
pub(crate) fn agent_binary(plan: &RunPlan) -> &std::path::Path {
    match &plan.client {
        Some(c) if !nesquic_ebpf::objects::is_dynamic(&c.binary) => &c.binary,
        _ => &plan.binary,
    }
}

/// `role`'s `nesquic:run_started`: in a pair, the client's trace names the client's LUT, I/O
/// path and settings.
pub(crate) fn run_started_for(plan: &RunPlan, mut started: RunStarted) -> RunStarted {
    if let (Some(c), Role::Client) = (&plan.client, started.role) {
        started.lut = LutStarted {
            name: c.lut.name().into(),
            version: c.lut.version(),
            crypto_backend: c.lut.descriptor().crypto_backend.into(),
            binary: c.binary.clone(),
            source: c.lut_source.clone(),
        };
        started.lut_options = c.lut_options.iter().map(ToString::to_string).collect();
        started.io = IoPath { mode: c.io, stack: super::io_stack(c.io).into() };
    }
    started
}

/// The record's client side of a pair.
pub(crate) fn client_record(plan: &RunPlan) -> Option<nesquic_record::run::ClientSide> {
    let c = plan.client.as_ref()?;
    Some(nesquic_record::run::ClientSide {
        lut: LutInfo {
            name: c.lut.name().into(),
            version: c.lut.version(),
            crypto_backend: c.lut.descriptor().crypto_backend.into(),
            io: c.io,
            binary: c.binary.clone(),
            source: c.lut_source.clone(),
            driven_by: DrivenBy::of(c.lut.endpoint().map(|e| e.recipe())),
        },
        lut_options: c.lut_options.iter().map(ToString::to_string).collect(),
    })
}

/// Each side's objects (executable and libraries) in a pair: one agent plan hooks both sides'
/// functions, and each process maps only its own side's objects, so the other side's functions
/// are not a problem of that process's agent.
pub(crate) struct SideObjects {
    server: Vec<PathBuf>,
    client: Vec<PathBuf>,
}

impl SideObjects {
    /// For a pair whose probes include the user-space agent (`agent`); `None` otherwise.
    pub(crate) fn of(plan: &RunPlan, agent: bool) -> Result<Option<Self>, EngineError> {
        let Some(c) = plan.client.as_ref().filter(|_| agent) else { return Ok(None) };
        let server = nesquic_ebpf::objects::objects_of(&plan.binary)?;
        let client = nesquic_ebpf::objects::objects_of(&c.binary)?;
        Ok(Some(Self { server, client }))
    }

    /// Drops from each agent's report the functions of objects its side does not map.
    pub(crate) fn keep_own(&self, agents: &mut [AgentReport]) {
        for a in agents {
            let own = match a.role {
                Role::Server => &self.server,
                Role::Client => &self.client,
                Role::Process => continue,
            };
            a.functions.retain(|f| own.iter().any(|o| o.as_os_str() == f.object.as_str()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nesquic_lut_adapters::find_lut;

    fn lut(name: &str) -> Box<dyn Lut> {
        find_lut(name).unwrap()
    }

    #[test]
    fn quic_luts_pair_and_tcp_pairs_only_with_itself() {
        check(lut("quinn").as_ref(), lut("msquic").as_ref()).unwrap();
        check(lut("quic-go").as_ref(), lut("quiche").as_ref()).unwrap();
        check(lut("tcp-tls").as_ref(), lut("tcp-tls").as_ref()).unwrap();
        let e = check(lut("tcp-tls").as_ref(), lut("quinn").as_ref()).unwrap_err().to_string();
        assert!(e.contains("the server tcp-tls speaks TLS over kernel TCP, the client quinn QUIC"), "{e}");
        let e = check(lut("msquic").as_ref(), lut("tcp-tls").as_ref()).unwrap_err().to_string();
        assert!(e.contains("the client tcp-tls speaks TLS over kernel TCP, the server msquic QUIC"), "{e}");
    }
}
