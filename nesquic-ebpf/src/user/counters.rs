//! Nesquic's side of the counters file: created (header written) before the LUT starts, mapped
//! shared and read-only, read live or after exit. The file is sparse (~3.1 MiB, mostly
//! function shards nobody touched); reads copy only the words asked for (the header, the I/O
//! rows, a planned slot across shards), word by word.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use nesquic_agent_abi::{self as abi, Counters, CountersHeader, Stats};

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
