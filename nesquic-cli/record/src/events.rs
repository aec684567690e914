//! Nesquic's qlog events, one variant per event name, typed both ways: the engine writes them,
//! `report` and `compare` read them back. docs/qlog.md documents every field; a test checks the
//! documentation against these types (every event name and every top-level field).

use std::path::PathBuf;

use nesquic_model::metrics::{FunctionMetrics, Mechanism, SyscallMetrics};
use nesquic_model::profile::RoleProfile;
use nesquic_model::HealthCounts;
use nesquic_model::Metrics;
use nesquic_protocol::cli::IoMode;
use nesquic_protocol::report::IoSettings;
use nesquic_protocol::Role;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::figures::{FailedRepetition, Spread, WorkloadSummary};
use crate::workload::{TestcaseInfo, WorkloadFigures};

/// One of Nesquic's events: the qlog record's `name` and `data`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "name", content = "data")]
pub enum Event {
    /// What runs, how it is measured, on which machine (once per trace, first).
    #[serde(rename = "nesquic:run_started")]
    RunStarted(Box<RunStarted>),
    /// `--link veth`: the two hosts and what was applied (before `run_started`).
    #[serde(rename = "nesquic:link_configured")]
    LinkConfigured(LinkConfigured),
    /// How the LUT's socket ended up configured (once per repetition).
    #[serde(rename = "nesquic:io_configured")]
    IoConfigured(IoConfigured),
    /// The I/O layer's own counters at the LUT's exit (LUTs on Nesquic's I/O layer).
    #[serde(rename = "nesquic:io_layer_counters")]
    IoLayerCounters(IoLayerCounters),
    /// Totals so far (periodic, and once after each repetition).
    #[serde(rename = "nesquic:metrics_updated")]
    MetricsUpdated(Box<MetricsUpdated>),
    /// What the terminal printed, for this role (once per trace, last).
    #[serde(rename = "nesquic:run_summary")]
    RunSummary(Box<RunSummary>),
    /// One send syscall's message, from the kernel (`--qlog-datagrams`).
    #[serde(rename = "quic:udp_datagrams_sent")]
    UdpDatagramsSent(UdpDatagrams),
    /// One receive syscall's message, from the kernel (`--qlog-datagrams`).
    #[serde(rename = "quic:udp_datagrams_received")]
    UdpDatagramsReceived(UdpDatagrams),
}

impl Event {
    /// Every name an [`Event`] serialises as.
    pub const NAMES: [&'static str; 8] = [
        "nesquic:run_started",
        "nesquic:link_configured",
        "nesquic:io_configured",
        "nesquic:io_layer_counters",
        "nesquic:metrics_updated",
        "nesquic:run_summary",
        "quic:udp_datagrams_sent",
        "quic:udp_datagrams_received",
    ];

    /// The qlog name of this event.
    pub fn name(&self) -> &'static str {
        match self {
            Event::RunStarted(_) => Self::NAMES[0],
            Event::LinkConfigured(_) => Self::NAMES[1],
            Event::IoConfigured(_) => Self::NAMES[2],
            Event::IoLayerCounters(_) => Self::NAMES[3],
            Event::MetricsUpdated(_) => Self::NAMES[4],
            Event::RunSummary(_) => Self::NAMES[5],
            Event::UdpDatagramsSent(_) => Self::NAMES[6],
            Event::UdpDatagramsReceived(_) => Self::NAMES[7],
        }
    }

    /// Parses one record of a trace. `None` for events that are not Nesquic's (a library's own,
    /// merged with `--lut-qlog`); an error for a Nesquic event whose data does not match.
    pub fn from_record(record: &Value) -> Option<Result<Self, serde_json::Error>> {
        let name = record.get("name")?.as_str()?;
        if !Self::NAMES.contains(&name) || record.get("original_name").is_some() {
            return None;
        }
        let tagged = serde_json::json!({"name": name, "data": record.get("data").cloned().unwrap_or(Value::Null)});
        Some(serde_json::from_value(tagged))
    }
}

/// `nesquic:run_started`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunStarted {
    /// This trace's role.
    pub role: Role,
    /// The library under test.
    pub lut: LutStarted,
    /// `--lut-opt` settings.
    #[serde(default)]
    pub lut_options: Vec<String>,
    /// The scenario.
    pub testcase: TestcaseStarted,
    /// The I/O path.
    pub io: IoPath,
    /// What is probed, and how.
    pub probes: ProbesStarted,
    /// The tool.
    pub nesquic: ToolInfo,
    /// The machine.
    pub host: HostInfo,
    /// Period of `metrics_updated`.
    pub snapshot_interval_ms: f64,
}

/// The library under test, as `run_started` names it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LutStarted {
    /// Adapter name.
    pub name: String,
    /// Library version.
    pub version: String,
    /// Crypto library.
    pub crypto_backend: String,
    /// The executable probes attach to.
    pub binary: PathBuf,
    /// `--lut-path`: the checkout and its revision.
    #[serde(default)]
    pub source: Option<LutSource>,
}

/// The scenario, as `run_started` names it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestcaseStarted {
    /// Name, origin and workload.
    #[serde(flatten)]
    pub info: TestcaseInfo,
    /// Payload bytes per repetition.
    pub size_bytes: u64,
    /// Repetitions asked for.
    pub repetitions: u32,
    /// Time limit per repetition.
    pub timeout_s: f64,
}

/// The I/O path.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IoPath {
    /// `native`, `nesquic` or `plain`.
    pub mode: IoMode,
    /// What implements it.
    pub stack: String,
}

/// What is probed, and by which mechanism.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbesStarted {
    /// The `--probe` list.
    pub requested: Option<String>,
    /// `--probe-backend`.
    #[serde(default)]
    pub backend: String,
    /// How syscalls are counted.
    pub io_mechanism: Option<String>,
    /// How kernel-probed functions are timed.
    pub function_mechanism: Option<String>,
    /// Every probed function.
    pub functions: Vec<ProbedFunction>,
    /// Whether this kernel has kprobes (context).
    pub kprobes_available: bool,
}

/// One probed function.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbedFunction {
    /// Catalog category (`crypto.seal`, ...).
    pub category: String,
    /// Demangled name.
    pub name: String,
    /// The object file it lives in.
    pub object: PathBuf,
    /// Its address in that file.
    pub address: u64,
    /// `user (inline hook)` (the agent) or `uprobe`.
    pub mechanism: Mechanism,
}

/// The tool.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolInfo {
    /// Version.
    pub version: String,
    /// Git revision it was built from (`-dirty` from a modified tree).
    pub git_revision: String,
}

/// The machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostInfo {
    /// Kernel release.
    pub kernel: Option<String>,
    /// CPU model.
    pub cpu_model: Option<String>,
    /// Logical CPUs.
    pub cores: Option<usize>,
    /// How the host was reached: `local`, or the SSH destination of a remote role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The `nesquic` version that ran there (remote roles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nesquic_version: Option<String>,
    /// The interface on the route to the other host (`ip route get`), when one was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<String>,
    /// Its offloads (`ethtool -k`: GSO, GRO, TSO, UDP segmentation), `on`/`off` as ethtool says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offloads: Vec<(String, String)>,
    /// Why the NIC or its offloads are missing (no route, ethtool not installed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_note: Option<String>,
    /// Remote hosts: its clock's offset from the local one, measured over SSH.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockOffset>,
}

/// A remote host's clock against the local one: NTP-style pings over the SSH channel, the sample
/// with the shortest round trip kept.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// Remote clock minus local clock, ns (remote time − offset = local time).
    pub offset_ns: i64,
    /// Round trip of the sample kept, ns: the offset is exact within half of it.
    pub rtt_ns: u64,
    /// Pings exchanged.
    pub rounds: u32,
}

impl ClockOffset {
    /// `+0.412 ms from this host's (± 0.061 ms, best of 8 pings)`: the offset is exact within
    /// half the round trip of the sample kept.
    pub fn describe(&self) -> String {
        format!(
            "{:+.3} ms from this host's (± {:.3} ms, best of {} pings)",
            self.offset_ns as f64 / 1e6,
            self.rtt_ns as f64 / 2e6,
            self.rounds
        )
    }
}

impl HostInfo {
    /// `NIC: offload on, offload off, ...`, when the NIC is known.
    pub fn nic_description(&self) -> Option<String> {
        let offloads: Vec<String> = self.offloads.iter().map(|(k, v)| format!("{k} {v}")).collect();
        Some(format!("{}: {}", self.nic.as_ref()?, offloads.join(", ")))
    }

    /// This machine.
    pub fn here() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string());
        Self {
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).ok(),
            cpu_model,
            cores: std::thread::available_parallelism().map(|n| n.get()).ok(),
            name: None,
            nesquic_version: None,
            nic: None,
            offloads: Vec::new(),
            nic_note: None,
            clock: None,
        }
    }
}

/// `nesquic:link_configured`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkConfigured {
    /// `veth`.
    pub link: String,
    /// The server's namespace, interface and address.
    pub server: nesquic_link::Host,
    /// The client's.
    pub client: nesquic_link::Host,
    /// What was applied, by which mechanism.
    pub mechanisms: Vec<String>,
}

/// `nesquic:io_configured`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IoConfigured {
    /// 1-based.
    pub repetition: u32,
    /// What the LUT reported.
    pub settings: IoSettings,
}

/// `nesquic:io_layer_counters`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IoLayerCounters {
    /// 1-based.
    pub repetition: u32,
    /// Sends as the I/O layer counted them.
    pub send: nesquic_io::DirectionCounters,
    /// Receives.
    pub recv: nesquic_io::DirectionCounters,
}

/// What `metrics_updated` values are: always this text.
pub const TOTALS_SINCE_START: &str = "totals since the repetition started";

/// `nesquic:metrics_updated`: totals since the repetition started.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MetricsUpdated {
    /// 1-based.
    pub repetition: u32,
    /// Always [`TOTALS_SINCE_START`].
    pub values: String,
    /// The snapshot taken after the repetition ended.
    #[serde(rename = "final")]
    pub last: bool,
    /// Since the repetition started.
    pub elapsed_ms: f64,
    /// Client: payload bytes verified so far.
    pub progress_bytes: Option<u64>,
    /// CPU seconds of this role's process so far (None once it is gone).
    pub cpu_s: Option<f64>,
    /// Per syscall (`--probe io`).
    pub io: Option<Vec<SyscallMetrics>>,
    /// Per probed function.
    pub functions: Option<Vec<FunctionMetrics>>,
    /// `--probe-backend both`: the agent's I/O rows beside the tracepoints'.
    pub io_crosscheck: Option<Vec<SyscallMetrics>>,
    /// What the kernel side could not measure.
    pub lost: Option<HealthCounts>,
}

impl MetricsUpdated {
    /// One snapshot of `role` from `metrics` (the probes' totals, if any).
    pub fn of(
        role: Role,
        repetition: u32,
        elapsed_ms: f64,
        cpu_s: Option<f64>,
        progress_bytes: Option<u64>,
        metrics: Option<&Metrics>,
        last: bool,
    ) -> Self {
        let mine = metrics.and_then(|m| m.roles.iter().find(|r| r.role == role));
        Self {
            repetition,
            values: TOTALS_SINCE_START.into(),
            last,
            elapsed_ms,
            progress_bytes,
            cpu_s,
            io: mine.map(|r| r.io.clone()),
            functions: mine.map(|r| r.functions.clone()),
            io_crosscheck: mine.filter(|r| !r.io_crosscheck.is_empty()).map(|r| r.io_crosscheck.clone()),
            lost: metrics.map(|m| m.lost),
        }
    }
}

/// `nesquic:run_summary`: the run's figures for one role.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSummary {
    /// This trace's role.
    pub role: Role,
    /// Repetitions measured (the figures are over these).
    pub repetitions: usize,
    /// Repetitions that failed, with their error (not in the figures).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_repetitions: Vec<FailedRepetition>,
    /// Payload bytes per repetition.
    pub size_bytes: u64,
    /// Every repetition's payload verified.
    pub payload_verified: bool,
    /// Mbit/s over repetitions.
    pub goodput_mbps: Spread,
    /// Seconds.
    pub transfer_s: Spread,
    /// Milliseconds.
    pub handshake_ms: Spread,
    /// The scenario (traces from before testcases: see [`RunSummary::testcase_or_bulk`]).
    #[serde(default = "TestcaseInfo::unrecorded")]
    pub testcase: TestcaseInfo,
    /// Multi-connection figures over repetitions.
    #[serde(default)]
    pub workload: Option<WorkloadSummary>,
    /// This role's CPU seconds.
    pub cpu_s: Spread,
    /// This role's CPU utilisation (100 = one core).
    pub cpu_pct: Spread,
    /// Each repetition.
    pub per_repetition: Vec<RepetitionSummary>,
    /// Probe totals over all repetitions, this role only.
    #[serde(default)]
    pub probes: Option<Metrics>,
    /// The sampling profile of each repetition, this role only.
    #[serde(default)]
    pub profile: Vec<Option<RoleProfile>>,
}

impl RunSummary {
    /// The scenario; traces written before testcases existed ran bulk of `size_bytes`.
    pub fn testcase_or_bulk(&self) -> TestcaseInfo {
        if self.testcase.is_unrecorded() {
            TestcaseInfo::bulk_before_testcases(self.size_bytes)
        } else {
            self.testcase.clone()
        }
    }
}

/// One repetition in `run_summary`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepetitionSummary {
    /// Mbit/s.
    pub goodput_mbps: f64,
    /// Seconds.
    pub transfer_s: f64,
    /// Milliseconds.
    pub handshake_ms: f64,
    /// Multi-connection figures.
    #[serde(default)]
    pub workload: Option<WorkloadFigures>,
    /// This role's CPU seconds.
    pub cpu_s: f64,
}

/// `quic:udp_datagrams_sent` / `_received`: one message of a send/receive syscall.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UdpDatagrams {
    /// Datagrams in the message (GSO segments, GRO-coalesced datagrams).
    pub count: u64,
    /// Each datagram's length.
    pub raw: Vec<RawInfo>,
    /// Nesquic's addition: which syscall.
    pub syscall: String,
}

/// qlog's `RawInfo`, as much as the kernel sees.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct RawInfo {
    /// Bytes.
    pub length: u64,
}

/// Where a `--lut-path` build came from, and the proof that it is what ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LutSource {
    /// The checkout (with `--lut-rev`: the repository the revision was taken from).
    pub path: PathBuf,
    /// Its git revision (a full commit hash), or why there is none.
    pub revision: String,
    /// `git status --porcelain` listed changes: the build holds code no commit names.
    #[serde(default)]
    pub dirty: bool,
    /// `--lut-rev` as given (a branch, tag or hash), built from [`LutSource::worktree`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_rev: Option<String>,
    /// With `--lut-rev`: the git worktree Nesquic checked the revision out into and built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<PathBuf>,
    /// The library's components linked from the checkout, as the build tool resolved them
    /// (cargo: each patched crate).
    #[serde(default)]
    pub linked: Vec<LinkedComponent>,
    /// What was verified to prove the build linked the checkout (one line).
    #[serde(default)]
    pub proof: String,
    /// With `--lut-version`: the published release the checkout-shaped tree was fetched as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<LutRelease>,
}

/// A published release of a LUT's library, fetched from its registry (`--lut-version`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LutRelease {
    /// Which registry served it (`crates.io`, `proxy.golang.org`, `pypi.org`).
    pub registry: String,
    /// The version asked for, as the registry names it.
    pub version: String,
    /// The registry's checksum of what was fetched (crates.io's and PyPI's `sha256:...`, the Go
    /// checksum database's `h1:...`).
    pub checksum: String,
    /// What the release was made of (the crates and versions its graph resolved; the module;
    /// the sdist's file name).
    pub contents: String,
}

/// One component of a library, linked from a checkout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkedComponent {
    /// Crate, module or package name.
    pub name: String,
    /// Its version as the build resolved it.
    pub version: String,
    /// Where in the checkout it was built from.
    pub path: PathBuf,
}

impl LutSource {
    /// Whether [`LutSource::revision`] is a commit hash (not why there is none).
    pub fn is_commit(&self) -> bool {
        self.revision.len() == 40 && self.revision.bytes().all(|b| b.is_ascii_hexdigit())
    }

    /// One line for reports: `PATH at REV plus uncommitted changes (--lut-rev R); linked from
    /// it: quinn 0.11.11, ...`.
    pub fn describe(&self) -> String {
        if let Some(r) = &self.release {
            return format!("release {} from {} ({}): {}", r.version, r.registry, r.checksum, r.contents);
        }
        let mut text = if self.is_commit() {
            format!("{} at {}", self.path.display(), self.revision)
        } else {
            format!("{} ({})", self.path.display(), self.revision)
        };
        if self.dirty {
            text.push_str(" plus uncommitted changes");
        }
        if let Some(rev) = &self.requested_rev {
            text.push_str(&format!(" (--lut-rev {rev})"));
        }
        if !self.linked.is_empty() {
            let linked: Vec<String> = self.linked.iter().map(|c| format!("{} {}", c.name, c.version)).collect();
            text.push_str(&format!("; linked from it: {}", linked.join(", ")));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn names_match_serialisation() {
        let e =
            Event::UdpDatagramsSent(UdpDatagrams { count: 1, raw: vec![RawInfo { length: 3 }], syscall: "x".into() });
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["name"], e.name());
        let back = Event::from_record(&serde_json::json!({"time": 1.0, "name": e.name(), "data": v["data"]}));
        assert!(matches!(back, Some(Ok(Event::UdpDatagramsSent(d))) if d.raw[0].length == 3));
        assert!(Event::from_record(&serde_json::json!({"name": "quic:packet_sent", "data": {}})).is_none());
        let bad = Event::from_record(&serde_json::json!({"name": "nesquic:io_configured", "data": {"x": 1}}));
        assert!(matches!(bad, Some(Err(_))));
    }

    /// docs/qlog.md documents every event and every field of each (and nothing that is gone).
    #[test]
    fn docs_describe_every_event_and_field() {
        let doc = include_str!("../../../docs/qlog.md");
        let sections = crate::events::tests::doc_sections(doc);
        for name in Event::NAMES {
            assert!(
                sections.iter().any(|(title, _)| title.contains(&format!("`{name}`"))),
                "docs/qlog.md lacks {name}"
            );
        }
        for (event, fields) in documented_fields() {
            let (_, body) = sections
                .iter()
                .find(|(title, _)| title.contains(&format!("`{event}`")))
                .unwrap_or_else(|| panic!("no section for {event}"));
            for field in fields {
                assert!(body.contains(&format!("`{field}")), "docs/qlog.md, {event}: field `{field}` undocumented");
            }
        }
    }

    /// `## ...` sections of a markdown text: (title, body).
    pub(super) fn doc_sections(doc: &str) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for line in doc.lines() {
            if let Some(title) = line.strip_prefix("## ") {
                out.push((title.to_string(), String::new()));
            } else if let Some((_, body)) = out.last_mut() {
                body.push_str(line);
                body.push('\n');
            }
        }
        out
    }

    /// Each event's top-level data fields, from serialising an example of its type.
    fn documented_fields() -> Vec<(&'static str, Vec<String>)> {
        fn keys<T: Serialize>(v: &T) -> Vec<String> {
            match serde_json::to_value(v).unwrap() {
                Value::Object(m) => m.keys().cloned().collect(),
                _ => Vec::new(),
            }
        }
        let spread = Spread { median: 1.0, min: 1.0, max: 1.0 };
        let workload = nesquic_testcases::Workload::bulk(1);
        let testcase = TestcaseInfo { name: "bulk".into(), origin: "built-in".into(), workload };
        let started = RunStarted {
            role: Role::Server,
            lut: LutStarted {
                name: "x".into(),
                version: "1".into(),
                crypto_backend: "y".into(),
                binary: "/b".into(),
                source: None,
            },
            lut_options: Vec::new(),
            testcase: TestcaseStarted { info: testcase.clone(), size_bytes: 1, repetitions: 1, timeout_s: 1.0 },
            io: IoPath { mode: IoMode::Native, stack: "s".into() },
            probes: ProbesStarted {
                requested: None,
                backend: "auto".into(),
                io_mechanism: None,
                function_mechanism: None,
                functions: Vec::new(),
                kprobes_available: false,
            },
            nesquic: ToolInfo { version: "0".into(), git_revision: "r".into() },
            host: HostInfo::here(),
            snapshot_interval_ms: 100.0,
        };
        let summary = RunSummary {
            role: Role::Server,
            repetitions: 1,
            failed_repetitions: Vec::new(),
            size_bytes: 1,
            payload_verified: true,
            goodput_mbps: spread,
            transfer_s: spread,
            handshake_ms: spread,
            testcase,
            workload: None,
            cpu_s: spread,
            cpu_pct: spread,
            per_repetition: Vec::new(),
            probes: None,
            profile: Vec::new(),
        };
        let host = nesquic_link::Host { netns: "n".into(), iface: "i".into(), ip: [10, 0, 0, 1].into() };
        let link = LinkConfigured { link: "veth".into(), server: host.clone(), client: host, mechanisms: Vec::new() };
        let settings = IoSettings {
            stack: "s".into(),
            transport: nesquic_protocol::report::Transport::Udp,
            blocking: false,
            gso_max_segments: 1,
            gro_segments: 1,
            send_mmsg: false,
            recv_mmsg: false,
            recv_buffer: 1,
            send_buffer: 1,
            congestion_control: None,
        };
        let counters = nesquic_io::Counters::default();
        vec![
            ("nesquic:run_started", keys(&started)),
            ("nesquic:link_configured", keys(&link)),
            ("nesquic:io_configured", keys(&IoConfigured { repetition: 1, settings })),
            (
                "nesquic:io_layer_counters",
                keys(&IoLayerCounters { repetition: 1, send: counters.send, recv: counters.recv }),
            ),
            ("nesquic:metrics_updated", keys(&MetricsUpdated::of(Role::Server, 1, 0.0, None, None, None, false))),
            ("nesquic:run_summary", keys(&summary)),
            ("quic:udp_datagrams_sent", keys(&UdpDatagrams { count: 1, raw: Vec::new(), syscall: "s".into() })),
        ]
    }
}
