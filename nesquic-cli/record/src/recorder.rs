//! The run's qlog traces: `run_started`, periodic `metrics_updated` snapshots while a repetition
//! runs, and `run_summary` at the end (field by field in docs/qlog.md); the run's output
//! directory; merging a library's own qlog into them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use nesquic_protocol::role::{Role, LUT_ROLES};
use serde_json::{json, Value};

use crate::events::{Event, RawInfo, UdpDatagrams};
use crate::qlog::writer::QlogWriter;
use crate::RecordError;

type Result<T> = std::result::Result<T, RecordError>;

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> RecordError + '_ {
    move |source| RecordError::Io { path: path.to_path_buf(), source }
}

/// The two traces of a run (one per role), on one clock.
pub struct Recorder {
    server: QlogWriter,
    client: QlogWriter,
    epoch: SystemTime,
    /// CLOCK_MONOTONIC (what eBPF's bpf_ktime_get_ns reads) at the traces' time zero, ns.
    monotonic_zero_ns: u64,
    /// Events written out of time order (per-message events): the files need sorting.
    pub unsorted: bool,
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
            epoch: wall,
            monotonic_zero_ns: monotonic_ns(),
            unsorted: false,
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
    pub fn both(&mut self, event: impl Fn(Role) -> Event) -> Result<()> {
        self.server.event(&event(Role::Server))?;
        self.client.event(&event(Role::Client))
    }

    /// Writes per-message kernel events as `quic:udp_datagrams_sent` / `_received` (only the LUT
    /// roles have a trace).
    pub fn datagram_events(&mut self, events: &[nesquic_model::DatagramEvent]) -> Result<()> {
        for e in events {
            let Some(role) = LUT_ROLES.into_iter().find(|r| *r == e.role) else { continue };
            let syscall = e.syscall;
            let segment = u64::from(e.segment.max(1));
            let n = u64::from(e.datagrams.max(1));
            let raw = (0..n)
                .map(|i| RawInfo { length: if i + 1 < n { segment } else { e.bytes - segment * (n - 1) } })
                .collect();
            let data = UdpDatagrams { count: n, raw, syscall: syscall.to_string() };
            let event = if syscall.direction() == nesquic_model::Direction::Send {
                Event::UdpDatagramsSent(data)
            } else {
                Event::UdpDatagramsReceived(data)
            };
            let ms = (e.ts_ns as f64 - self.monotonic_zero_ns as f64) / 1e6;
            self.trace(role).event_at(ms, &event)?;
            self.unsorted = true;
        }
        Ok(())
    }

    /// Writes out both traces' buffers (after each repetition: a run that ends early leaves
    /// traces that end with whole records).
    pub fn flush(&mut self) -> Result<()> {
        self.server.flush()?;
        self.client.flush()
    }

    /// Wall-clock time zero of both traces.
    pub fn epoch(&self) -> SystemTime {
        self.epoch
    }

    /// Flushes both files.
    pub fn finish(self) -> Result<Vec<PathBuf>> {
        Ok(vec![self.server.finish()?, self.client.finish()?])
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes into a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// User + system CPU seconds of a live process, from /proc/PID/stat (None once it is gone).
pub fn process_cpu_s(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields = stat_fields(&stat)?;
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / clock_ticks_per_s()? as f64)
}

/// The fields of a /proc/PID/stat line after the command name (which may hold spaces and
/// parentheses: it ends at the last ')'); field N of the line is index N - 3.
pub fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    Some(stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect())
}

/// The clock ticks a second that /proc/PID/stat counts times in (`_SC_CLK_TCK`).
pub fn clock_ticks_per_s() -> Option<u64> {
    // SAFETY: sysconf has no preconditions.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok().filter(|hz| *hz > 0)
}

/// Creates and returns `./nesquic-runs/<YYYYmmdd-HHMMSS>-<lut>`, with `-2`, `-3`, ... if that
/// exists. Created here, atomically (`create_dir` fails if another run took the name in the same
/// second), so concurrent runs never share a directory.
pub fn default_out_dir(lut: &str) -> Result<PathBuf> {
    out_dir_under(Path::new("nesquic-runs"), lut)
}

/// [`default_out_dir`] under `root`: refuses a root another user could change (as root, a run
/// directory swapped for a link would make nesquic overwrite any file).
pub(crate) fn out_dir_under(root: &Path, lut: &str) -> Result<PathBuf> {
    let stamp = crate::qlog::time_stamp(SystemTime::now());
    match crate::files::create_dir(root) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_error(root)(e)),
    }
    crate::files::check_trusted_dir(root)?;
    let base = root.join(format!("{stamp}-{lut}"));
    let mut candidate = base.clone();
    let mut n = 2;
    loop {
        match crate::files::create_dir(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                candidate = PathBuf::from(format!("{}-{n}", base.display()));
                n += 1;
            }
            Err(e) => return Err(io_error(&candidate)(e)),
        }
    }
}

/// Creates the output directory; refuses one that already holds files (runs are never
/// overwritten), and one (or a parent) that another user could change under us.
pub fn prepare_out_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).map_err(io_error(dir))?;
        if entries.next().is_some() {
            return Err(RecordError::Report(format!(
                "{} already holds files: choose another --out (nesquic never overwrites a run)",
                dir.display()
            )));
        }
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io_error(parent))?;
    match crate::files::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_error(dir)(e)),
    }
    crate::files::check_parent_dir(parent)?;
    crate::files::check_trusted_dir(dir)
}

/// Merges a library's own qlog files into one of our traces: their events are moved onto our
/// clock, renamed into the `quic:` namespace (older drafts used `transport:`, `recovery:`, ...;
/// the original name is kept in `original_name`), and the whole trace is rewritten sorted by
/// time. `lut_files` are names relative to run directory `dir` (read confined to it, bounded).
/// Returns how many library events were merged.
pub fn merge_lut_qlog(trace: &Path, epoch: SystemTime, dir: &Path, lut_files: &[(PathBuf, u64)]) -> Result<usize> {
    let ours = crate::qlog::reader::read_unordered(trace)?;
    let epoch_ns = epoch.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as f64).unwrap_or(0.0);
    let mut events = ours.events;
    let mut merged = 0;
    for (path, start_unix_ns) in lut_files {
        let shift_ms = (*start_unix_ns as f64 - epoch_ns) / 1e6;
        let bytes = crate::files::read_in(dir, path, crate::files::MAX_LUT_QLOG_BYTES)?;
        for (n, record) in bytes.split(|b| *b == 0x1e).filter(|r| !r.iter().all(u8::is_ascii_whitespace)).enumerate() {
            let mut event: Value = serde_json::from_slice(record).map_err(|source| RecordError::Json {
                what: format!("the LUT's qlog {} record {}", path.display(), n + 1),
                source,
            })?;
            // The first record is the library's header; events carry a time and a name.
            let (Some(time), Some(name)) = (event["time"].as_f64(), event["name"].as_str().map(String::from)) else {
                continue;
            };
            event["time"] = json!(time + shift_ms);
            event["name"] = json!(quic_namespace(&name));
            event["original_name"] = json!(name);
            events.push(event);
            merged += 1;
        }
    }
    events.sort_by(|a, b| a["time"].as_f64().unwrap_or(0.0).total_cmp(&b["time"].as_f64().unwrap_or(0.0)));
    let tmp = trace.with_extension("sqlog.tmp");
    let mut out = String::new();
    out.push('\x1e');
    let json = |v: &Value| {
        serde_json::to_string(v).map_err(|source| RecordError::Json { what: format!("{}", trace.display()), source })
    };
    out.push_str(&json(&ours.header)?);
    out.push('\n');
    for e in &events {
        out.push('\x1e');
        out.push_str(&json(e)?);
        out.push('\n');
    }
    crate::files::write(&tmp, out.as_bytes())?;
    std::fs::rename(&tmp, trace).map_err(io_error(trace))?;
    Ok(merged)
}

/// `transport:packet_sent` -> `quic:packet_sent`, `recovery:metrics_updated` ->
/// `quic:recovery_metrics_updated` (qlog QUIC events draft 13 names).
fn quic_namespace(name: &str) -> String {
    match name.split_once(':') {
        Some(("recovery", "metrics_updated")) => "quic:recovery_metrics_updated".into(),
        Some(("transport", "datagrams_sent")) => "quic:udp_datagrams_sent".into(),
        Some(("transport", "datagrams_received")) => "quic:udp_datagrams_received".into(),
        Some(("transport" | "recovery" | "connectivity" | "security", event)) => format!("quic:{event}"),
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_order_events_are_sorted_in_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.sqlog");
        let text = "\x1e{\"file_schema\":\"x\",\"serialization_format\":\"y\",\"trace\":{}}\n\
                    \x1e{\"time\":5.0,\"name\":\"nesquic:b\",\"data\":{}}\n\
                    \x1e{\"time\":2.0,\"name\":\"quic:udp_datagrams_sent\",\"data\":{}}\n";
        std::fs::write(&path, text).expect("write");
        assert!(crate::qlog::reader::read(&path).is_err(), "unsorted input is not a valid trace");
        assert_eq!(merge_lut_qlog(&path, SystemTime::now(), dir.path(), &[]).expect("sorted"), 0);
        let trace = crate::qlog::reader::read(&path).expect("valid after sorting");
        let names: Vec<&str> = trace.events.iter().filter_map(|e| e["name"].as_str()).collect();
        assert_eq!(names, ["quic:udp_datagrams_sent", "nesquic:b"]);
    }
}
