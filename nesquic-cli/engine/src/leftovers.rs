//! What a nesquic that died without its cleanup (`kill -9`, a crash) left on this machine, found
//! and removed by the next one; what a run still going holds is reported and left alone. A pid
//! alive again in a process that started after the object was made is not its owner.
//!
//! Every object a run makes carries its pid in its name: the `--link veth` namespaces and veth
//! ends (`nq-<pid>-s`, `nq<pid>s`; tbf, netem, clsact and the tc-bpf filters live on the veth
//! ends and go with them) and the scratch directories (`nesquic-run-<pid>-…` with the run's
//! certificate and key, `nesquic-agent-<pid>-…`, `nesquic-remote-<pid>-…`). What dies with the
//! process needs nothing: its BPF programs, links and maps, its uprobes (perf-event based since
//! Linux 4.17: none in `uprobe_events`), its LUT processes (`PR_SET_PDEATHSIG`), its build helpers
//! ([`crate::tether`]) and its build locks (`flock`, released with the file).

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nesquic_link::OwnedObject;

/// Scratch directories nesquic makes, `nesquic-<kind>-<pid>-<random>` in the temporary directory.
const SCRATCH_KINDS: [&str; 3] = ["run", "agent", "remote"];

/// A fresh scratch directory `nesquic-<kind>-<pid>-<random>`, removed when dropped; should
/// nesquic die first, the next one removes it.
pub fn scratch_dir(kind: &str) -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix(&format!("nesquic-{kind}-{}-", std::process::id()))
        // Mode 0700: it holds the run's TLS private key (tempfile's default is 0777 less the umask).
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
}

/// One thing a nesquic made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    /// A namespace or veth end.
    Link(OwnedObject),
    /// A scratch directory.
    Scratch {
        /// Its path.
        path: PathBuf,
        /// The pid in its name.
        owner: u32,
    },
}

impl Object {
    fn owner(&self) -> u32 {
        match self {
            Object::Link(o) => o.owner,
            Object::Scratch { owner, .. } => *owner,
        }
    }

    /// Where it is in the file system.
    fn path(&self) -> PathBuf {
        match self {
            Object::Link(o) => o.path(),
            Object::Scratch { path, .. } => path.clone(),
        }
    }

    /// When it was last changed (its inode's ctime): its owner was alive then.
    fn changed(&self) -> Option<SystemTime> {
        let meta = std::fs::symlink_metadata(self.path()).ok()?;
        let (secs, nanos) =
            (std::os::unix::fs::MetadataExt::ctime(&meta), std::os::unix::fs::MetadataExt::ctime_nsec(&meta));
        Some(UNIX_EPOCH + Duration::new(u64::try_from(secs).ok()?, u32::try_from(nanos).ok()?))
    }

    fn remove(&self) -> Result<(), String> {
        match self {
            Object::Link(o) => {
                o.remove().map_err(|e| format!("{}; remove it by hand: {}", e.chain(), o.removal_command()))
            }
            // remove_dir_all does not follow links inside the directory.
            Object::Scratch { path, .. } => std::fs::remove_dir_all(path).map_err(|e| e.to_string()),
        }
    }
}

impl fmt::Display for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Object::Link(o) => write!(f, "{} {}", o.kind, o.name),
            Object::Scratch { path, .. } => write!(f, "scratch directory {}", path.display()),
        }
    }
}

/// What became of one object found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Its run had died: removed.
    Removed(Object),
    /// Its run had died, and removing it failed (why).
    NotRemoved(Object, String),
    /// Its run is still going (the owner's command name): left alone.
    InUse(Object, String),
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Removed(o) => write!(f, "removed {o} left by a run that died (pid {})", o.owner()),
            Found::NotRemoved(o, why) => {
                write!(f, "cannot remove {o} left by a run that died (pid {}): {why}", o.owner())
            }
            Found::InUse(o, command) => {
                write!(f, "{o} belongs to a run still going (pid {}, {command}): left alone", o.owner())
            }
        }
    }
}

/// Finds every object some nesquic made; removes those whose nesquic is gone, reports those
/// whose nesquic is alive. This process's own are not touched nor listed.
pub fn sweep() -> Vec<Found> {
    let me = std::process::id();
    let objects = nesquic_link::owned_objects().into_iter().map(Object::Link).chain(scratch_dirs());
    let mut found = Vec::new();
    for object in objects.filter(|o| o.owner() != me) {
        found.push(match owner_command(object.owner(), object.changed()) {
            Some(command) => Found::InUse(object, command),
            None => match object.remove() {
                Ok(()) => Found::Removed(object),
                Err(why) => Found::NotRemoved(object, why),
            },
        });
    }
    found
}

/// The command name of `pid`, when it is alive and may have made an object last changed at
/// `changed`. A process that started after that is a later program given a dead run's pid again
/// (the pid space wrapped): the object is not its.
fn owner_command(pid: u32, changed: Option<SystemTime>) -> Option<String> {
    let proc = Path::new("/proc").join(pid.to_string());
    let started = process_start(&proc)?;
    // The margin covers the start time's 10 ms ticks and the clocks read apart; a pid comes back
    // only after the whole pid space has been used, far later than this.
    if changed.is_some_and(|changed| started > changed + Duration::from_secs(1)) {
        return None;
    }
    let comm = std::fs::read_to_string(proc.join("comm")).unwrap_or_default();
    Some(comm.trim().to_string()).filter(|c| !c.is_empty()).or(Some("?".into()))
}

/// When the process of `/proc/PID` started, on the wall clock; none when it is gone.
fn process_start(proc: &Path) -> Option<SystemTime> {
    let stat = std::fs::read_to_string(proc.join("stat")).ok()?;
    // Field 22: the start time, in clock ticks since boot.
    let ticks: u64 = nesquic_record::recorder::stat_fields(&stat)?.get(19)?.parse().ok()?;
    let since_boot = Duration::from_millis(ticks * 1000 / nesquic_record::recorder::clock_ticks_per_s()?);
    Some(boot_time()? + since_boot)
}

/// The wall-clock time the machine booted: now, less the time since boot (CLOCK_BOOTTIME, the
/// clock a process's start time counts on).
fn boot_time() -> Option<SystemTime> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec for the kernel to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        return None;
    }
    let up = Duration::new(u64::try_from(ts.tv_sec).ok()?, u32::try_from(ts.tv_nsec).ok()?);
    SystemTime::now().checked_sub(up)
}

/// This user's scratch directories in the temporary directory (another user's are theirs).
fn scratch_dirs() -> Vec<Object> {
    let tmp = std::env::temp_dir();
    let Ok(entries) = std::fs::read_dir(&tmp) else { return Vec::new() };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    entries
        .flatten()
        .filter_map(|e| {
            let owner = scratch_owner(&e.file_name().to_string_lossy())?;
            // Not followed: a link named like ours is nobody's directory to remove.
            let meta = std::fs::symlink_metadata(e.path()).ok()?;
            (meta.is_dir() && std::os::unix::fs::MetadataExt::uid(&meta) == me)
                .then(|| Object::Scratch { path: e.path(), owner })
        })
        .collect()
}

/// The pid in `nesquic-<kind>-<pid>-<random>`.
fn scratch_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("nesquic-")?;
    let (kind, rest) = rest.split_once('-')?;
    if !SCRATCH_KINDS.contains(&kind) {
        return None;
    }
    let (pid, random) = rest.split_once('-')?;
    if random.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_owners_are_read_from_our_names_only() {
        assert_eq!(scratch_owner("nesquic-run-1234-AbC9xy"), Some(1234));
        assert_eq!(scratch_owner("nesquic-agent-7-x"), Some(7));
        assert_eq!(scratch_owner("nesquic-run-AbC9xy"), None, "an older nesquic's: no owner to judge by");
        assert_eq!(scratch_owner("nesquic-verifier-1234-x"), None);
        assert_eq!(scratch_owner("nesquic-run-12a4-x"), None);
        assert_eq!(scratch_owner("nesquic-run-1234-"), None);
    }

    #[test]
    fn a_scratch_directory_is_named_after_this_process() {
        let dir = scratch_dir("run").expect("scratch");
        let name = dir.path().file_name().expect("name").to_string_lossy().into_owned();
        assert_eq!(scratch_owner(&name), Some(std::process::id()), "{name}");
        // It holds the run's private key: nobody else may read it.
        let mode = std::os::unix::fs::PermissionsExt::mode(&dir.path().metadata().expect("stat").permissions());
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    }

    #[test]
    fn the_dead_runs_directories_go_and_the_live_ones_stay() {
        // A pid that is no process: past the kernel's pid_max.
        let max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max").expect("pid_max").trim().parse().expect("n");
        let dead = max + 1;
        let me = std::process::id();
        let tmp = std::env::temp_dir();
        let dead_dir = tmp.join(format!("nesquic-run-{dead}-unittest{me}"));
        // A live owner that is not this process: our parent (cargo or the shell).
        // SAFETY: getppid has no preconditions.
        let live = unsafe { libc::getppid() } as u32;
        let live_dir = tmp.join(format!("nesquic-agent-{live}-unittest{me}"));
        for d in [&dead_dir, &live_dir] {
            std::fs::create_dir_all(d.join("inner")).expect("mkdir");
        }
        let found = sweep();
        let line =
            |d: &Path| found.iter().find(|f| f.to_string().contains(&*d.to_string_lossy())).map(|f| f.to_string());
        assert_eq!(
            line(&dead_dir),
            Some(format!("removed scratch directory {} left by a run that died (pid {dead})", dead_dir.display()))
        );
        assert!(!dead_dir.exists());
        let kept = line(&live_dir).expect("the live one is reported");
        assert!(kept.ends_with("left alone") && kept.contains(&format!("pid {live}")), "{kept}");
        assert!(live_dir.exists());
        std::fs::remove_dir_all(&live_dir).expect("cleanup");
    }

    #[test]
    fn a_pid_given_again_to_a_later_program_does_not_keep_a_dead_runs_directory() {
        // A live process that started after the directory was made: the dead run's pid, reused.
        // Not named like a scratch directory: the sweep in the test beside this one must not take it.
        let dir = tempfile::tempdir().expect("tempdir");
        let made = Object::Scratch { path: dir.path().to_path_buf(), owner: 0 }.changed().expect("ctime");
        std::thread::sleep(Duration::from_millis(1100));
        let mut later = std::process::Command::new("sleep").arg("30").spawn().expect("sleep");
        let pid = later.id();
        assert_eq!(owner_command(pid, Some(made)), None, "started after the directory was made");
        // The same process made nothing before it started: an object changed after its start is its.
        assert_eq!(owner_command(pid, Some(SystemTime::now())).as_deref(), Some("sleep"));
        // This process started before the directory: it may own it.
        assert!(owner_command(std::process::id(), Some(made)).is_some());
        let _ = later.kill();
        let _ = later.wait();
    }
}
