//! Nesquic's side of the counters file: created (header written) before the LUT starts, mapped
//! shared and read-only, read live or after exit. The file is sparse (~3.1 MiB, mostly
//! function shards nobody touched); reads copy it word by word into the heap.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use nesquic_agent_abi::{self as abi, Counters, CountersHeader};

use super::UserError;

/// A mapped counters file.
pub struct CountersMap {
    ptr: *const Counters,
    path: PathBuf,
}

// SAFETY: the mapping is read-only shared memory; reading it from any thread is fine.
unsafe impl Send for CountersMap {}
// SAFETY: as above.
unsafe impl Sync for CountersMap {}

impl CountersMap {
    /// Creates `path` with a fresh header and maps it.
    pub fn create(path: &Path) -> Result<Self, UserError> {
        let io = |source| UserError::Io { what: format!("counters file {}", path.display()), source };
        let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path).map_err(io)?;
        file.write_all(abi::as_bytes(&CountersHeader::new())).map_err(io)?;
        let size = std::mem::size_of::<Counters>();
        // The rest reads as zero without taking disk or memory until the agent writes to it.
        file.set_len(size as u64).map_err(io)?;
        // SAFETY: mapping `size` bytes of a file that has exactly that size, shared, read-only.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io(std::io::Error::last_os_error()));
        }
        Ok(Self { ptr: ptr.cast(), path: path.to_path_buf() })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A copy of the counters now (fields may be from slightly different instants while the
    /// LUT runs; each is a whole 64-bit value).
    pub fn read(&self) -> Box<Counters> {
        const WORDS: usize = std::mem::size_of::<Counters>() / 8;
        let mut out = Box::<Counters>::new_uninit();
        let dst = out.as_mut_ptr().cast::<u64>();
        let src = self.ptr.cast::<u64>();
        for i in 0..WORDS {
            // SAFETY: both are 8-byte aligned (page-aligned mapping, Box of a u64 struct) and
            // hold WORDS words; volatile whole-word loads because another process writes the
            // mapping (aligned 64-bit accesses are atomic on x86-64: no torn counter).
            unsafe { dst.add(i).write(std::ptr::read_volatile(src.add(i))) };
        }
        // SAFETY: every byte was written above and Counters is Pod (any bits are valid).
        unsafe { out.assume_init() }
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
