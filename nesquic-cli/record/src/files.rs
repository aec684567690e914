//! Files of a run directory, written and read as root. Nesquic runs as root, and run directories
//! travel (CI artifacts, another user's `./nesquic-runs`): a file name recorded in summary.json,
//! or a link placed in a run directory, must never make root read or write a file elsewhere.
//! Every writer of a run's files goes through [`write()`]; every reader of a file a record names
//! goes through [`read_in`].

use std::fs::{Metadata, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use crate::RecordError;

type Result<T> = std::result::Result<T, RecordError>;

/// Largest qlog trace read back (a LUT's, or ours with per-datagram events). The merge holds every event as a JSON value (about ten times the
/// file), so a larger file would need tens of GB of memory anyway; a 3 GB quinn run's qlog is a
/// few hundred MB.
pub const MAX_LUT_QLOG_BYTES: u64 = 2 << 30;
/// Largest folded-stacks file read back: one line per distinct stack, a few MB at most for the
/// longest runs (a larger one is not ours).
pub const MAX_FOLDED_BYTES: u64 = 256 << 20;
/// Largest summary.json read: a few MB for thousands of repetitions.
pub const MAX_RECORD_BYTES: u64 = 256 << 20;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RecordError + '_ {
    move |source| RecordError::Io { path: path.to_path_buf(), source }
}

/// Checks that `dir` (a run root such as `./nesquic-runs`, or a run directory given with `--out`)
/// cannot be changed under us by another user: owned by us or root, and not writable by group or
/// others unless sticky (like /tmp, where nobody may rename what another user made). A link
/// counts as its target, but the link itself must be ours or root's.
pub fn check_trusted_dir(dir: &Path) -> Result<()> {
    check_dir(dir, 0o022, true)
}

/// [`check_trusted_dir`] for the directory `--out` is made in (the working directory, as a
/// rule), which only must not be writable by others (unless sticky): its owner may be another
/// user (`sudo nesquic run --out DIR` in one's own checkout) and its group may write to it (a
/// umask of 002 leaves every directory a user makes so, for their own group).
pub fn check_parent_dir(dir: &Path) -> Result<()> {
    check_dir(dir, 0o002, false)
}

fn check_dir(dir: &Path, not_writable: u32, owner_matters: bool) -> Result<()> {
    let link = std::fs::symlink_metadata(dir).map_err(io(dir))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if owner_matters && link.file_type().is_symlink() && link.uid() != me && link.uid() != 0 {
        return Err(RecordError::Unsafe(format!(
            "{} is a symbolic link owned by uid {}: another user could point it elsewhere and make nesquic \
             (as uid {me}) write there; remove it or give --out a directory you own",
            dir.display(),
            link.uid()
        )));
    }
    let meta = std::fs::metadata(dir).map_err(io(dir))?;
    if !meta.is_dir() {
        return Err(RecordError::Unsafe(format!("{} is not a directory", dir.display())));
    }
    let mode = meta.mode() & 0o7777;
    let foreign = owner_matters && meta.uid() != me && meta.uid() != 0;
    let open_to_others = mode & not_writable != 0 && mode & libc::S_ISVTX == 0;
    if foreign || open_to_others {
        let why = if foreign {
            format!("owned by uid {}, not by you (uid {me})", meta.uid())
        } else if not_writable & 0o020 != 0 {
            "writable by group or others (and not sticky)".to_string()
        } else {
            "writable by others (and not sticky)".to_string()
        };
        return Err(RecordError::Unsafe(format!(
            "{} is {why}, mode {mode:04o}: another user could swap a run directory in it for a link and make \
             nesquic overwrite any file; remove it (or `chown $(id -u) {0}; chmod go-w {0}`), or give --out \
             a directory you own",
            dir.display()
        )));
    }
    Ok(())
}

/// Creates directory `path` (its parent must exist), mode 0755: only we can add to it.
pub fn create_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o755).create(path)
}

/// Writes `bytes` to `path`, created (mode 0644) or replaced. Never through a link (O_NOFOLLOW),
/// never into a FIFO or device, never into a file with another hard link (one placed in a run
/// directory to make root overwrite its other name).
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    // No O_TRUNC: the file is checked before anything in it changes.
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| refused_link(path, e, "write"))?;
    let meta = file.metadata().map_err(io(path))?;
    regular(path, &meta, "write")?;
    if meta.nlink() > 1 {
        return Err(RecordError::Unsafe(format!(
            "{} has {} hard links: nesquic does not overwrite a file that has another name; remove it first",
            path.display(),
            meta.nlink()
        )));
    }
    file.set_len(0).map_err(io(path))?;
    file.write_all(bytes).map_err(io(path))
}

/// Replaces `path` with `bytes` all at once: written to a new file beside it (O_EXCL, no link
/// followed), synced, then renamed over it. A reader, or a crash or a full disk half-way, sees
/// the old file or the new one, never a mix; on failure the old file stays as it was and the
/// temporary one is removed. The error names `path`. A rename replaces the name only: a link or
/// another hard link at `path` is not written through.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.file_name().ok_or_else(|| RecordError::Invalid(format!("{} names no file", path.display())))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let written = (|| {
        let mut file =
            OpenOptions::new().write(true).create_new(true).mode(0o644).custom_flags(libc::O_NOFOLLOW).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_data()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|source| {
        // Nothing to keep of a half-written copy (and on a full disk its blocks are needed).
        let _ = std::fs::remove_file(&tmp);
        if source.raw_os_error() == Some(libc::ELOOP) {
            return refused_link(&tmp, source, "write");
        }
        RecordError::Io { path: path.to_path_buf(), source }
    })
}

/// ELOOP from O_NOFOLLOW means the last component is a link: say so.
fn refused_link(path: &Path, e: std::io::Error, what: &str) -> RecordError {
    if e.raw_os_error() == Some(libc::ELOOP) {
        return RecordError::Unsafe(format!(
            "{} is a symbolic link: nesquic, often root, does not {what} through links (remove it, or name the file it points to)",
            path.display()
        ));
    }
    RecordError::Io { path: path.to_path_buf(), source: e }
}

fn regular(path: &Path, meta: &Metadata, what: &str) -> Result<()> {
    if meta.is_file() {
        return Ok(());
    }
    Err(RecordError::Unsafe(format!("{} is not a regular file: nesquic does not {what} it", path.display())))
}

/// The file `rel`, a path summary.json recorded relative to run directory `dir`: only plain
/// names (no absolute path, no `..`, no `.`), and none of them a link.
pub fn confine(dir: &Path, rel: &Path) -> Result<PathBuf> {
    let plain = rel.components().all(|c| matches!(c, Component::Normal(_)));
    if !plain || rel.as_os_str().is_empty() {
        return Err(RecordError::Unsafe(format!(
            "the record names file {:?}: a record's files must be relative paths inside the run directory {} \
             (no absolute path, no `..`); the record was not written by nesquic or was altered",
            rel,
            dir.display()
        )));
    }
    let mut path = dir.to_path_buf();
    for part in rel.components() {
        path.push(part);
        let meta = std::fs::symlink_metadata(&path).map_err(io(&path))?;
        if meta.file_type().is_symlink() {
            return Err(RecordError::Unsafe(format!(
                "{} is a symbolic link: a run directory's files are never links (nesquic writes none); \
                 the run directory was altered",
                path.display()
            )));
        }
    }
    Ok(path)
}

/// Reads file `rel` of run directory `dir` ([`confine`]d), at most `max` bytes.
pub fn read_in(dir: &Path, rel: &Path, max: u64) -> Result<Vec<u8>> {
    let path = confine(dir, rel)?;
    read_file(&path, libc::O_NOFOLLOW, max)
}

/// Reads `path` (a path the user gave: a link is followed), a regular file of at most `max`
/// bytes.
pub fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>> {
    read_file(path, 0, max)
}

fn read_file(path: &Path, flags: i32, max: u64) -> Result<Vec<u8>> {
    // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| refused_link(path, e, "read"))?;
    let meta = file.metadata().map_err(io(path))?;
    regular(path, &meta, "read")?;
    let too_large = || {
        RecordError::Unsafe(format!(
            "{} is larger than {max} bytes, more than nesquic ever writes there: refused",
            path.display()
        ))
    };
    if meta.len() > max {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // Bounded again while reading: the file may grow after the check.
    file.take(max + 1).read_to_end(&mut bytes).map_err(io(path))?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

/// `path`, a file the LUT reported writing, as a name relative to run directory `dir`; refused
/// when it lies outside it (a LUT, or a remote host, naming a file of this host).
pub fn relative_to(dir: &Path, path: &Path) -> Result<PathBuf> {
    // A LUT may report the path in another spelling (absolute, resolved): compare resolved too.
    let canonical =
        || Some(std::fs::canonicalize(path).ok()?.strip_prefix(std::fs::canonicalize(dir).ok()?).ok()?.to_path_buf());
    let rel = path.strip_prefix(dir).map(Path::to_path_buf).ok().or_else(canonical).ok_or_else(|| {
        RecordError::Unsafe(format!(
            "the LUT reported its qlog at {}, outside the run directory {}: refused (nesquic reads no other file)",
            path.display(),
            dir.display()
        ))
    })?;
    confine(dir, &rel)?;
    Ok(rel)
}
