//! The run's qlog traces: `run_started`, periodic `metrics_updated` snapshots while a repetition
//! runs, and `run_summary` at the end (field by field in docs/qlog.md).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use super::process::Role;
use crate::qlog::writer::QlogWriter;

/// The two traces of a run (one per role), on one clock.
pub struct Recorder {
    server: QlogWriter,
    client: QlogWriter,
    /// Snapshot period.
    pub interval: Duration,
}

impl Recorder {
    /// Creates `server.sqlog` and `client.sqlog` in `dir`.
    pub fn create(dir: &Path, title: &str, interval: Duration) -> Result<Self> {
        let (reference, wall) = (Instant::now(), SystemTime::now());
        Ok(Self {
            server: QlogWriter::create(&dir.join("server.sqlog"), "server", title, reference, wall)?,
            client: QlogWriter::create(&dir.join("client.sqlog"), "client", title, reference, wall)?,
            interval,
        })
    }

    /// The trace of `role` (a `Process` role has none here; it maps to the client's).
    pub fn trace(&mut self, role: Role) -> &mut QlogWriter {
        match role {
            Role::Server => &mut self.server,
            Role::Client | Role::Process => &mut self.client,
        }
    }

    /// Writes one event to both traces, built per role.
    pub fn both(&mut self, name: &str, data: impl Fn(Role) -> Value) -> Result<()> {
        self.server.event(name, &data(Role::Server))?;
        self.client.event(name, &data(Role::Client))
    }

    /// Flushes both files.
    pub fn finish(self) -> Result<Vec<PathBuf>> {
        Ok(vec![self.server.finish()?, self.client.finish()?])
    }
}

/// One periodic (or final) snapshot for one role: totals since the repetition started.
pub fn snapshot_event(
    role: Role,
    repetition: u32,
    started: Instant,
    pid: Option<i32>,
    progress_bytes: Option<u64>,
    metrics: Option<&nesquic_ebpf::Metrics>,
    last: bool,
) -> Value {
    let role_metrics = metrics.and_then(|m| m.roles.iter().find(|r| r.role == role.to_string()));
    json!({
        "repetition": repetition,
        "values": "totals since the repetition started",
        "final": last,
        "elapsed_ms": started.elapsed().as_secs_f64() * 1e3,
        "progress_bytes": progress_bytes,
        "cpu_s": pid.and_then(process_cpu_s),
        "io": role_metrics.map(|r| &r.io),
        "functions": role_metrics.map(|r| &r.functions),
        "lost": metrics.map(|m| m.lost),
    })
}

/// User + system CPU seconds of a live process, from /proc/PID/stat (None once it is gone).
pub fn process_cpu_s(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks as f64 / hz as f64)
}

/// Facts about the machine for `run_started`.
pub fn host() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model =
        cpuinfo.lines().find_map(|l| l.strip_prefix("model name")).map(|v| v.trim_start_matches([' ', '\t', ':']));
    json!({
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).ok(),
        "cpu_model": model,
        "cores": std::thread::available_parallelism().map(|n| n.get()).ok(),
    })
}

/// `./nesquic-runs/<YYYYmmdd-HHMMSS>-<lut>`, with `-2`, `-3`, ... if that exists.
pub fn default_out_dir(lut: &str) -> PathBuf {
    let stamp = crate::qlog::time_stamp(SystemTime::now());
    let base = PathBuf::from("nesquic-runs").join(format!("{stamp}-{lut}"));
    let mut candidate = base.clone();
    let mut n = 2;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{}-{n}", base.display()));
        n += 1;
    }
    candidate
}

/// Creates the output directory; refuses one that already holds files (runs are never overwritten).
pub fn prepare_out_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))?;
        anyhow::ensure!(
            entries.next().is_none(),
            "{} already holds files: choose another --out (nesquic never overwrites a run)",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))
}
