//! The wire protocol between `nesquic` and the `nesquic remote-role` it starts over SSH: one JSON
//! object per line each way. The local side writes [`Request`]s on the remote's stdin, the remote
//! side answers with [`Reply`]s on its stdout. Its stderr is the remote's diagnostics, relayed by
//! ssh. Closing stdin ends the remote role (killing its LUT).

use std::net::SocketAddr;
use std::time::Duration;

use nesquic_ebpf::profile::Profile;
use nesquic_ebpf::Metrics;
use nesquic_protocol::cli::IoMode;
use nesquic_protocol::report::LutEvent;
use nesquic_protocol::Role;
use nesquic_record::events::HostInfo;
use nesquic_record::run::AgentReport;
use nesquic_testcases::Workload;
use serde::{Deserialize, Serialize};

use crate::backend::BackendChoice;

/// Bumped whenever a message changes shape; both sides must agree (the nesquic versions do too).
pub const WIRE_VERSION: u32 = 1;

/// Local → remote.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// First line of every session: who asks, and which peer the facts' route is for.
    Hello {
        /// [`WIRE_VERSION`] of the local side.
        wire: u32,
        /// The local `nesquic`'s version (crate version and git revision).
        version: String,
        /// The address of the other host, for the NIC on the route to it (`ip route get`).
        peer: Option<std::net::IpAddr>,
    },
    /// One clock ping: the local wall clock when sent (ns since the Unix epoch).
    Clock {
        /// Local send time.
        sent_ns: u64,
    },
    /// Run one repetition of one role.
    Run(Box<RolePlan>),
}

/// Remote → local.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    /// Answer to [`Request::Hello`].
    Hello {
        /// The remote side's [`WIRE_VERSION`].
        wire: u32,
        /// The remote `nesquic`'s version.
        version: String,
        /// Kernel, CPU, NIC and its offloads.
        host: HostInfo,
    },
    /// Answer to [`Request::Clock`].
    Clock {
        /// Echoed local send time.
        sent_ns: u64,
        /// The remote wall clock when it answered.
        remote_ns: u64,
    },
    /// A report line the role's LUT printed, relayed as it came.
    Lut(LutEvent),
    /// The LUT exited; the kernel's accounting of it on the remote host.
    Exited(RemoteExit),
    /// The LUT's own qlog (`--lut-qlog`), after [`Reply::Exited`].
    LutQlog {
        /// The remote wall clock at the file's time zero (ns since the Unix epoch).
        start_unix_ns: u64,
        /// The file.
        text: String,
    },
    /// What the role's probes measured (after [`Reply::Exited`]).
    Totals(Box<RoleTotals>),
    /// The remote role failed; the text says how.
    Error {
        /// What went wrong.
        message: String,
    },
}

/// One role's repetition, resolved on the local side.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RolePlan {
    /// Which role.
    pub role: Role,
    /// The LUT's name: its descriptor on the remote host finds the executable next to the
    /// remote `nesquic`.
    pub lut: String,
    /// I/O path.
    pub io: IoMode,
    /// The workload.
    pub workload: Workload,
    /// `--lut-opt` settings (`KEY=VALUE` on the wire).
    pub options: Vec<nesquic_protocol::LutOpt>,
    /// Server: the address to bind; client: the server's address.
    pub addr: SocketAddr,
    /// The run's certificate (DER).
    pub cert: Vec<u8>,
    /// Its key (DER; only sent to a server).
    pub key: Vec<u8>,
    /// `--probe` list, if any.
    pub probe: Option<String>,
    /// Who measures the probes.
    pub probe_backend: BackendChoice,
    /// The repetition's time limit.
    pub timeout: Duration,
    /// Ask the LUT for its own qlog and send it back (`--lut-qlog`).
    #[serde(default)]
    pub lut_qlog: bool,
}

/// How a remote LUT exited (the engine's `Exit`, on the other host).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct RemoteExit {
    /// Raw wait status.
    pub status: i32,
    /// User CPU time.
    pub user: Duration,
    /// System CPU time.
    pub system: Duration,
    /// Wall time from spawn to reaping.
    pub wall: Duration,
    /// Peak resident set, KiB.
    pub max_rss_kib: u64,
}

/// What the remote role's probes measured in one repetition.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RoleTotals {
    /// Probe totals (this role's rows only).
    pub metrics: Option<Metrics>,
    /// The agents' reports.
    pub agents: Vec<AgentReport>,
    /// The sampling profile.
    pub profile: Option<Profile>,
    /// With timed probes: this host's calibration, already applied to `metrics`.
    #[serde(default)]
    pub calibration: Option<nesquic_record::calibration::Calibration>,
}

/// Writes one message as a line.
pub fn send<W: std::io::Write, T: Serialize>(out: &mut W, message: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_string(message).map_err(std::io::Error::other)?;
    line.push('\n');
    out.write_all(line.as_bytes())?;
    out.flush()
}

/// The wall clock, ns since the Unix epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}
