//! Nesquic's side of the counters: created (header written) before the LUT starts, mapped
//! shared and read-only, read live or after exit. They live in a `memfd` (anonymous shared
//! memory) that the agent opens as `/proc/<nesquic>/fd/<n>`, so no filesystem has to share a
//! mapping: 9p (the /tmp of a virtme-ng guest) refuses `mmap(MAP_SHARED)` of its files with
//! EINVAL. A file in the run directory is the fallback where `memfd_create` or `/proc` is
//! missing. The counters are sparse (~3.1 MiB, mostly function shards nobody touched); reads
//! copy only the words asked for (the header, the I/O rows, a planned slot across shards), word
//! by word.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nesquic_agent_abi::{self as abi, Counters, CountersHeader, Stats};

use super::UserError;

/// Anonymous shared memory another process of the same user can open by `path`
/// (`/proc/<pid>/fd/<fd>`, which reopens the memfd itself): the file keeps it alive.
pub(crate) struct SharedFile {
    /// The memfd, or the fallback file.
    pub file: File,
    /// Where another process opens it.
    pub path: PathBuf,
}

/// A `memfd` named `name` (close-on-exec: LUTs reach it by path, nothing inherits it), or why
/// not (no `memfd_create` in this kernel or sandbox, no `/proc`).
pub(crate) fn memfd(name: &std::ffi::CStr) -> Result<SharedFile, std::io::Error> {
    // SAFETY: memfd_create with a NUL-terminated name; the fd it returns is owned below.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by memfd_create and is owned by nothing else.
    let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let path = PathBuf::from(format!("/proc/{}/fd/{fd}", std::process::id()));
    // The agent opens this path: check that it leads back here (a mounted /proc).
    File::open(&path)?;
    Ok(SharedFile { file, path })
}

/// A memfd named `name`, else the file `fallback` (created or truncated); with the fallback,
/// why there is no memfd.
pub(crate) fn shared_file(name: &std::ffi::CStr, fallback: &Path) -> Result<(SharedFile, Option<String>), UserError> {
    match memfd(name) {
        Ok(f) => Ok((f, None)),
        Err(why) => {
            let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(fallback).map_err(
                |source| UserError::Io {
                    what: format!("{} (memfd_create unavailable: {why})", fallback.display()),
                    source,
                },
            )?;
            Ok((SharedFile { file, path: fallback.to_path_buf() }, Some(why.to_string())))
        }
    }
}

/// A mapped counters file.
pub struct CountersMap {
    ptr: *const Counters,
    path: PathBuf,
    /// Keeps the memfd (and so the path the agent opens) alive until the process is read.
    _file: File,
}

// SAFETY: the mapping is read-only shared memory; reading it from any thread is fine.
unsafe impl Send for CountersMap {}
// SAFETY: as above.
unsafe impl Sync for CountersMap {}

impl CountersMap {
    /// Creates the counters (a memfd; `fallback` where there is none) with a fresh header and
    /// maps them.
    pub fn create(fallback: &Path) -> Result<Self, UserError> {
        let (shared, no_memfd) = shared_file(c"nesquic-agent-counters", fallback)?;
        let SharedFile { mut file, path } = shared;
        let io = |source| UserError::Io { what: format!("counters file {}", path.display()), source };
        file.write_all(abi::as_bytes(&CountersHeader::new())).map_err(io)?;
        let size = std::mem::size_of::<Counters>();
        // The rest reads as zero without taking memory until the agent writes to it.
        file.set_len(size as u64).map_err(io)?;
        // SAFETY: mapping `size` bytes of a file that has exactly that size, shared, read-only.
        let ptr =
            unsafe { libc::mmap(std::ptr::null_mut(), size, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0) };
        if ptr == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            return Err(match no_memfd {
                Some(why) => UserError::Io {
                    what: format!(
                        "counters file {}: its filesystem cannot share a mapping (mmap MAP_SHARED), and \
                         memfd_create is unavailable ({why}): put TMPDIR on a tmpfs",
                        path.display()
                    ),
                    source: e,
                },
                None => io(e),
            });
        }
        Ok(Self { ptr: ptr.cast(), path, _file: file })
    }

    /// Where the agent opens the counters (`/proc/<pid>/fd/<n>` for a memfd).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The I/O wrappers' rows now.
    pub fn io(&self) -> [Stats; abi::IO_KINDS] {
        // SAFETY: a field of the live mapping, 8-byte aligned, made of u64s.
        unsafe { copy_words(std::ptr::addr_of!((*self.ptr).io)) }
    }

    /// Function slot `slot` summed over every shard, now. Only the slot's words are read: a
    /// snapshot every 100 ms must not stream the whole ~3.1 MiB file through the caches the LUT
    /// shares (nor fault in its untouched pages).
    pub fn function(&self, slot: usize) -> Stats {
        assert!(slot < abi::MAX_SLOTS, "slot {slot} out of range");
        let mut sum = Stats::ZERO;
        for shard in 0..=abi::SHARDS {
            // SAFETY: an element of the live mapping (both indexes in range), aligned, u64s.
            let s = unsafe { copy_words(std::ptr::addr_of!((*self.ptr).shards[shard].functions[slot])) };
            sum.add(&s);
        }
        sum
    }

    /// The processes table (entries not yet written are zero).
    pub fn processes(&self) -> [abi::ProcessEntry; abi::MAX_PROCESSES] {
        // SAFETY: a field of the live mapping, aligned, plain integers; volatile as above.
        unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*self.ptr).processes)) }
    }

    /// A copy of the header alone (state, statuses, health), without reading the counters.
    pub fn header(&self) -> CountersHeader {
        // SAFETY: the header starts the live mapping; volatile as above.
        unsafe { std::ptr::read_volatile(self.ptr.cast::<CountersHeader>()) }
    }
}

impl Drop for CountersMap {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping of this size.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, std::mem::size_of::<Counters>()) };
    }
}

const _: () = assert!(std::mem::size_of::<Counters>().is_multiple_of(8));
const _: () = assert!(std::mem::size_of::<Stats>().is_multiple_of(8));

/// Copies `*src` with one volatile load per 64-bit word: another process writes the mapping, and
/// aligned 64-bit loads are atomic on x86-64, so no counter is torn (fields may be from slightly
/// different instants while the LUT runs).
///
/// # Safety
/// `src` points into the live mapping, 8-byte aligned, and `T` is plain data made of u64 words.
unsafe fn copy_words<T: Copy>(src: *const T) -> T {
    let mut out = std::mem::MaybeUninit::<T>::uninit();
    let (dst, src) = (out.as_mut_ptr().cast::<u64>(), src.cast::<u64>());
    for i in 0..std::mem::size_of::<T>() / 8 {
        // SAFETY: both hold size_of::<T>() bytes, 8-byte aligned (the caller's contract).
        unsafe { dst.add(i).write(std::ptr::read_volatile(src.add(i))) };
    }
    // SAFETY: every word was written above, and any bits are a valid T (plain u64s).
    unsafe { out.assume_init() }
}
