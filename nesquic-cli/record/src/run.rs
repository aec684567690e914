//! The run record: everything one `nesquic run` measured, as written to `--json` (summary.json)
//! and read back by `compare`, `report` and `matrix`. Typed both ways; `schema_version` says
//! which shape a file has, and files written before it existed (version 0) still load.

use std::path::{Path, PathBuf};

use nesquic_protocol::cli::IoMode;
use serde::{Deserialize, Serialize};

use crate::calibration::Calibration;
pub use crate::events::{LinkedComponent, LutSource};
pub use crate::figures::{AgentReport, FailedRepetition};
use crate::figures::{RepetitionFigures, Summary};
use crate::workload::TestcaseInfo;
use crate::RecordError;

/// The shape of [`RunRecord`] this build writes. 0 = files from before the field existed.
/// Bump it when a field changes meaning or goes away (adding an optional field does not).
/// 2: `link.qdisc_drops` is per qdisc (end, kind, drops) or why it was not measured; version 1
/// files hold one number summed over every qdisc (loaded as [`QdiscDropsRecord::Unattributed`]).
pub const SCHEMA_VERSION: u32 = 2;

/// Everything a run produced, as written to `--json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// The shape of this record ([`SCHEMA_VERSION`] when written by this build).
    #[serde(default)]
    pub schema_version: u32,
    /// Nesquic's version.
    pub nesquic_version: String,
    /// The LUT (the server's in a pair).
    pub lut: LutInfo,
    /// A pair (docs/pairs.md): the client's LUT and settings when it is another LUT than the
    /// server's; `lut` and `lut_options` are then the server's. Absent: one LUT on both sides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_side: Option<ClientSide>,
    /// The scenario (records from before testcases existed have none: they ran bulk, filled in
    /// by [`RunRecord::load`]).
    #[serde(default = "TestcaseInfo::unrecorded")]
    pub testcase: TestcaseInfo,
    /// LUT-specific settings used (`--lut-opt`).
    #[serde(default)]
    pub lut_options: Vec<String>,
    /// Payload bytes per repetition (all connections and streams).
    pub size_bytes: u64,
    /// One entry per measured repetition (a failed one is in `failed_repetitions` instead).
    pub repetitions: Vec<RepetitionFigures>,
    /// Median/min/max over the measured repetitions; absent when none was measured (the first
    /// repetition failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// Repetitions that failed, with their error. The run stops at the first, so the record
    /// holds every repetition measured before it; no figure above includes a failed one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_repetitions: Vec<FailedRepetition>,
    /// Steps after the repetitions that failed (merging the library's qlog, the qvis copy): the
    /// measurements stand, but the traces or files those steps make are missing or unmerged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unfinished: Vec<String>,
    /// Set in the record written after each repetition while the run goes on, cleared by the
    /// last write: a record still holding it is from a run that was killed (or still runs), and
    /// has neither findings nor link figures.
    #[serde(default, skip_serializing_if = "is_false")]
    pub in_progress: bool,
    /// The timing probes' calibration, when timed probes ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
    /// `--link veth`: the link, what was applied by which mechanism, and what was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkRecord>,
    /// With `--probe profile`: each side's folded stacks, in files beside summary.json.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profile_stacks: Vec<crate::stacks::StackFile>,
    /// Each role's host when a role ran remotely (`--server-host`, `--client-host`): kernel,
    /// CPU, NIC and offloads, the clock offset; empty for one-machine runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<(nesquic_protocol::Role, crate::events::HostInfo)>,
    /// `--pin`: the CPU each side ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_cpus: Option<PinnedCpus>,
    /// Faults the LUT executables were told to inject (`NESQUIC_FAULT_*`, allowed with
    /// `NESQUIC_ALLOW_FAULTS=1`): the run was perturbed on purpose.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<InjectedFault>,
    /// The machine's own AEAD seal speed at the stack's packet size, measured when the run timed
    /// `crypto.seal` (what the crypto findings hold the stack's crypto against).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crypto_limit: Option<crate::crypto_limit::CryptoLimit>,
    /// The machine's large `memcpy` at every page-offset placement, measured when a side's
    /// profile put time in glibc's `rep movsb` copy (what the copy finding holds it against).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_limit: Option<crate::copy_limit::CopyLimit>,
    /// What the numbers point to, rule by rule (`findings::find` over this record).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<crate::finding::Finding>,
    /// The run directory, which the files this record names (`lut_qlogs`, `profile_stacks`) are
    /// relative to and confined to: set by [`RunRecord::load`] and by the run that writes it;
    /// not part of the file.
    #[serde(skip)]
    pub run_dir: Option<PathBuf>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One `NESQUIC_FAULT_*` variable the LUT processes ran with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InjectedFault {
    /// The variable.
    pub name: String,
    /// Its value.
    pub value: String,
}

impl std::fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.name, self.value)
    }
}

/// The CPU each side was pinned to (`--pin SERVER,CLIENT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedCpus {
    /// The server's CPU.
    pub server: usize,
    /// The client's CPU.
    pub client: usize,
}

impl std::fmt::Display for PinnedCpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "server on CPU {}, client on CPU {}", self.server, self.client)
    }
}

impl RunRecord {
    /// Reads a summary.json (any schema version up to this build's).
    pub fn load(path: &Path) -> Result<Self, RecordError> {
        // Bounded, a regular file: a run directory may come from anywhere (a CI artifact).
        let bytes = crate::files::read_bounded(path, crate::files::MAX_RECORD_BYTES)?;
        let mut record: Self = serde_json::from_slice(&bytes)
            .map_err(|source| RecordError::Json { what: path.display().to_string(), source })?;
        if record.testcase.is_unrecorded() {
            record.testcase = TestcaseInfo::bulk_before_testcases(record.size_bytes);
        }
        if record.schema_version > SCHEMA_VERSION {
            return Err(RecordError::Report(format!(
                "{} has schema_version {}; this nesquic reads up to {SCHEMA_VERSION}: use a newer nesquic",
                path.display(),
                record.schema_version
            )));
        }
        record.run_dir = Some(path.parent().map(Path::to_path_buf).unwrap_or_default());
        Ok(record)
    }
}

/// The client of a pair: its LUT and settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientSide {
    /// The client's LUT.
    pub lut: LutInfo,
    /// Its settings (`--lut-opt`, `--client-lut-opt`).
    #[serde(default)]
    pub lut_options: Vec<String>,
}

impl RunRecord {
    /// What a reader must say before it uses this record's figures, one line each: a failed
    /// repetition (its figures are not in the record), a run that did not finish, a step after
    /// the repetitions that failed. Empty for a complete run.
    pub fn caveats(&self) -> Vec<String> {
        let measured = self.repetitions.len();
        let mut lines: Vec<String> = self
            .failed_repetitions
            .iter()
            .map(|f| format!("{f} (not in the figures, which are over the {measured} measured repetition(s))"))
            .collect();
        if self.in_progress {
            lines.push(format!(
                "the run did not finish (nesquic was stopped, or still runs): this record holds the {measured} \
                 repetition(s) measured until then, without findings"
            ));
        }
        lines.extend(self.unfinished.iter().map(|u| format!("not done after the repetitions: {u}")));
        lines
    }

    /// The client's LUT: the server's unless the run was a pair.
    pub fn client_lut(&self) -> &LutInfo {
        self.client_side.as_ref().map_or(&self.lut, |c| &c.lut)
    }

    /// "quinn 0.11.12", or "server quinn 0.11.12 x client msquic 2.5.1" for a pair.
    pub fn lut_label(&self) -> String {
        match &self.client_side {
            Some(c) => {
                format!("server {} {} x client {} {}", self.lut.name, self.lut.version, c.lut.name, c.lut.version)
            }
            None => format!("{} {}", self.lut.name, self.lut.version),
        }
    }
}

/// What was run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LutInfo {
    /// Adapter name.
    pub name: String,
    /// Library version.
    pub version: String,
    /// Crypto backend.
    pub crypto_backend: String,
    /// I/O path.
    pub io: IoMode,
    /// Executable that ran (and that probes attach to).
    pub binary: PathBuf,
    /// With --lut-path: the checkout it was built from, its git revision and the proof.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<LutSource>,
    /// Through Nesquic's adapter or the stack's own endpoint (records before it: an adapter).
    #[serde(default)]
    pub driven_by: DrivenBy,
}

/// How a stack was driven.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum DrivenBy {
    /// Nesquic's adapter, speaking docs/protocol.md.
    #[default]
    Adapter,
    /// The stack's own interop endpoint, started by a recipe (`lut-adapters/endpoints/`); the
    /// commit is the source's.
    Endpoint {
        /// The recipe's name.
        recipe: String,
    },
}

impl DrivenBy {
    /// How `lut` is driven.
    pub fn of(endpoint_recipe: Option<&str>) -> Self {
        endpoint_recipe.map_or(Self::Adapter, |r| Self::Endpoint { recipe: r.to_string() })
    }
}

/// The emulated link of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkRecord {
    /// "veth".
    pub kind: String,
    /// What was applied, by which mechanism.
    pub mechanisms: Vec<String>,
    /// What was asked for.
    pub conditions: nesquic_link::Conditions,
    /// Loss measured by the tc-bpf filters, when loss was applied.
    #[serde(default)]
    pub observed_loss: Option<ObservedLoss>,
    /// Drops counted by the qdiscs on the veth ends.
    #[serde(default = "QdiscDropsRecord::not_recorded")]
    pub qdisc_drops: QdiscDropsRecord,
    /// What the userspace relay did, when it applied delay.
    #[serde(default)]
    pub relay: Option<nesquic_link::relay::RelayStats>,
}

/// What the qdiscs on the veth ends dropped, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum QdiscDropsRecord {
    /// Per end and qdisc, as `tc -s` counted them.
    PerQdisc(Vec<nesquic_link::QdiscDrops>),
    /// `tc` could not say: its message (never 0 drops).
    NotMeasured {
        /// Why.
        not_measured: String,
    },
    /// Records of schema 1 and before: one sum over every qdisc, whatever its kind (printed
    /// then as tbf queue overflow, also where netem dropped for its random loss).
    Unattributed(u64),
}

impl QdiscDropsRecord {
    fn not_recorded() -> Self {
        Self::NotMeasured { not_measured: "not in this record".into() }
    }

    /// One line: each qdisc's drops and why it drops, or why they are unknown.
    pub fn describe(&self) -> String {
        match self {
            Self::PerQdisc(qdiscs) => {
                let each: Vec<String> = qdiscs
                    .iter()
                    .filter(|q| q.kind != "noqueue")
                    .map(|q| format!("{} {} {} ({})", q.end, q.kind, q.dropped, q.cause()))
                    .collect();
                if each.is_empty() {
                    "none (no qdisc on the veth ends)".into()
                } else {
                    each.join(", ")
                }
            }
            Self::NotMeasured { not_measured } => format!("not measured ({not_measured})"),
            Self::Unattributed(n) => format!("{n} (summed over every qdisc; kinds not recorded)"),
        }
    }
}

/// Datagrams the link dropped, both ways.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct ObservedLoss {
    /// Dropped.
    pub dropped: u64,
    /// Offered.
    pub seen: u64,
    /// dropped / seen, percent.
    pub pct: f64,
    /// The same in packets (skbs; a GSO batch is one): (dropped, offered). The loss is drawn
    /// per packet, so this is the share that follows the configured rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packets: Option<(u64, u64)>,
}

impl ObservedLoss {
    /// From the filters' counts.
    pub fn new(dropped: u64, seen: u64) -> Self {
        Self { dropped, seen, pct: if seen > 0 { dropped as f64 * 100.0 / seen as f64 } else { 0.0 }, packets: None }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A summary.json as nesquic wrote it before `schema_version` and testcases existed
    /// (trimmed to the fields every version wrote).
    const VERSION_0: &str = r#"{
        "nesquic_version": "0.1.0",
        "lut": {"name": "quinn", "version": "0.11.9", "crypto_backend": "ring", "io": "native", "binary": "/x/nesquic-lut-quinn"},
        "lut_options": [],
        "size_bytes": 1000000,
        "repetitions": [{
            "bytes": 1000000, "payload_verified": true, "goodput_mbps": 800.0, "transfer_s": 0.01, "handshake_ms": 1.5,
            "server": {"cpu_user_s": 0.01, "cpu_system_s": 0.01, "cpu_total_s": 0.02, "wall_s": 0.1, "cpu_utilisation_pct": 20.0, "max_rss_kib": 9000},
            "client": {"cpu_user_s": 0.01, "cpu_system_s": 0.01, "cpu_total_s": 0.02, "wall_s": 0.1, "cpu_utilisation_pct": 20.0, "max_rss_kib": 9000}
        }],
        "summary": {
            "repetitions": 1,
            "goodput_mbps": {"median": 800.0, "min": 800.0, "max": 800.0},
            "transfer_s": {"median": 0.01, "min": 0.01, "max": 0.01},
            "handshake_ms": {"median": 1.5, "min": 1.5, "max": 1.5},
            "server_cpu_s": {"median": 0.02, "min": 0.02, "max": 0.02},
            "server_cpu_pct": {"median": 20.0, "min": 20.0, "max": 20.0},
            "client_cpu_s": {"median": 0.02, "min": 0.02, "max": 0.02},
            "client_cpu_pct": {"median": 20.0, "min": 20.0, "max": 20.0}
        }
    }"#;

    #[test]
    fn qdisc_drops_say_which_qdisc_dropped_and_why_and_never_turn_an_error_into_zero() {
        let drops =
            |end: &str, kind: &str, dropped| nesquic_link::QdiscDrops { end: end.into(), kind: kind.into(), dropped };
        let netem = QdiscDropsRecord::PerQdisc(vec![drops("server", "netem", 151), drops("client", "netem", 149)]);
        assert_eq!(
            netem.describe(),
            "server netem 151 (netem: its random loss and its queue limit), client netem 149 (netem: its random loss and its queue limit)"
        );
        let tbf = QdiscDropsRecord::PerQdisc(vec![drops("server", "tbf", 12), drops("client", "tbf", 0)]);
        assert_eq!(
            tbf.describe(),
            "server tbf 12 (tbf queue overflow at the rate), client tbf 0 (tbf queue overflow at the rate)"
        );
        let bare = QdiscDropsRecord::PerQdisc(vec![drops("server", "noqueue", 0), drops("client", "noqueue", 0)]);
        assert_eq!(bare.describe(), "none (no qdisc on the veth ends)");
        let failed =
            QdiscDropsRecord::NotMeasured { not_measured: "tc -s -j qdisc show dev nq1s: Cannot find device".into() };
        assert_eq!(failed.describe(), "not measured (tc -s -j qdisc show dev nq1s: Cannot find device)");
        // Each shape reads back as itself.
        for r in [netem, tbf, bare, failed] {
            let back: QdiscDropsRecord = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
            assert_eq!(back, r);
        }
    }

    /// Issue 52: a record whose first repetition failed has no summary and loads; readers are
    /// told what failed, and older records (no such fields) have nothing to say.
    #[test]
    fn a_record_of_a_failed_run_loads_and_says_what_failed() {
        let mut failed: serde_json::Value = serde_json::from_str(VERSION_0).unwrap();
        failed["repetitions"] = serde_json::json!([]);
        failed.as_object_mut().unwrap().remove("summary");
        failed["failed_repetitions"] = serde_json::json!([{"repetition": 1, "error": "server ended\nits output"}]);
        failed["unfinished"] = serde_json::json!(["--lut-qlog: exec wrote no qlog"]);
        let r: RunRecord = serde_json::from_value(failed).unwrap();
        assert!(r.summary.is_none() && r.repetitions.is_empty() && !r.in_progress);
        assert_eq!(
            r.caveats(),
            [
                "repetition 1 failed: server ended its output (not in the figures, which are over the 0 measured \
                 repetition(s))",
                "not done after the repetitions: --lut-qlog: exec wrote no qlog"
            ]
        );
        let old: RunRecord = serde_json::from_str(VERSION_0).unwrap();
        assert!(old.caveats().is_empty() && old.summary.is_some());
    }

    #[test]
    fn files_from_before_the_schema_version_load_as_bulk() {
        let dir = std::env::temp_dir().join(format!("nesquic-record-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("summary.json");
        std::fs::write(&path, VERSION_0).unwrap();
        let r = RunRecord::load(&path).unwrap();
        assert_eq!(r.schema_version, 0);
        assert_eq!(r.testcase.name, "bulk");
        assert_eq!(r.testcase.workload.size, 1_000_000);
        assert_eq!(r.repetitions[0].goodput_mbps, 800.0);

        // What this build writes reads back the same, with its version.
        let mut current = r.clone();
        current.schema_version = SCHEMA_VERSION;
        std::fs::write(&path, serde_json::to_vec(&current).unwrap()).unwrap();
        let again = RunRecord::load(&path).unwrap();
        assert_eq!(again.schema_version, SCHEMA_VERSION);
        assert_eq!(serde_json::to_value(&again).unwrap(), serde_json::to_value(&current).unwrap());

        // A version 1 link's one number loads as what it was: a sum of unknown kinds.
        let mut with_link: serde_json::Value = serde_json::from_str(VERSION_0).unwrap();
        with_link["schema_version"] = 1.into();
        with_link["link"] = serde_json::json!({"kind": "veth", "mechanisms": [], "conditions": {}, "qdisc_drops": 57});
        std::fs::write(&path, serde_json::to_vec(&with_link).unwrap()).unwrap();
        let link = RunRecord::load(&path).unwrap().link.unwrap();
        assert_eq!(link.qdisc_drops, QdiscDropsRecord::Unattributed(57));
        assert_eq!(link.qdisc_drops.describe(), "57 (summed over every qdisc; kinds not recorded)");

        // A record from a newer nesquic is refused with what to do.
        current.schema_version = SCHEMA_VERSION + 1;
        std::fs::write(&path, serde_json::to_vec(&current).unwrap()).unwrap();
        let err = RunRecord::load(&path).unwrap_err().to_string();
        assert!(err.contains("use a newer nesquic"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
