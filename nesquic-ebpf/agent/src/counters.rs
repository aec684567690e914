//! The shared counters file: mapped once in the constructor, then only added to. I/O slots and
//! the header take atomic adds (many LUT threads hit them); function slots live in per-thread
//! shards ([`crate::shard`]) that generated code adds to without `lock`.

use std::ffi::CString;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use crate::abi::{self, Counters, Stats, HIST_BUCKETS};

/// The live mapping (null before init or when inert); the timing stubs read it too.
pub(crate) static COUNTERS: AtomicPtr<Counters> = AtomicPtr::new(std::ptr::null_mut());

/// Maps the counters file Nesquic created and sized; `None` (agent stays inert) if it cannot.
/// The returned reference is only used while single-threaded, during init.
pub fn map(path: &std::ffi::OsStr) -> Option<&'static mut Counters> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = CString::new(path.as_bytes()).ok()?;
    let size = std::mem::size_of::<Counters>();
    // SAFETY: plain libc calls with a valid NUL-terminated path; the fd is closed right after
    // mmap (the mapping keeps the file).
    let ptr = unsafe {
        let fd = libc::open(c_path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let mut st: libc::stat = std::mem::zeroed();
        let big_enough = libc::fstat(fd, &mut st) == 0 && st.st_size as usize >= size;
        let p = if big_enough {
            libc::mmap(std::ptr::null_mut(), size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        } else {
            libc::MAP_FAILED
        };
        libc::close(fd);
        p
    };
    if ptr == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: the mapping is `size` bytes, page aligned, readable and writable, and lives for the
    // rest of the process (never unmapped); Counters is Pod so any content is a valid value.
    let counters = unsafe { &mut *ptr.cast::<Counters>() };
    if !counters.is_valid() {
        return None;
    }
    COUNTERS.store(counters, Ordering::Release);
    Some(counters)
}

/// The mapped counters (null before init or when inert).
#[inline(always)]
pub fn get() -> *mut Counters {
    COUNTERS.load(Ordering::Relaxed)
}

/// Marks init done (last: Nesquic reads `state` to know the header is final).
pub fn publish_ready() {
    let c = get();
    if c.is_null() {
        return;
    }
    // SAFETY: `c` is the live mapping; the field is u32-aligned.
    let state = unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*c).header.state)) };
    state.store(abi::state::READY, Ordering::Release);
}

/// Sets a slot's status code; never over `PATCHED`: in a followed command another process may
/// have hooked the function where this one has not loaded its object.
pub fn set_slot_status(slot: usize, code: u32) {
    let c = get();
    if c.is_null() || slot >= abi::MAX_SLOTS {
        return;
    }
    // SAFETY: in bounds of the live mapping, u32-aligned.
    let s = unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*c).header.slot_status[slot])) };
    let _ =
        s.fetch_update(Ordering::Release, Ordering::Relaxed, |old| (old != abi::slot_status::PATCHED).then_some(code));
}

/// Counts this process among those the agent runs in and, among the first
/// [`abi::MAX_PROCESSES`], writes its pid and name; the first process also becomes the header's
/// `pid`. During init, before any other thread.
pub fn register_process() {
    let c = get();
    if c.is_null() {
        return;
    }
    let pid = std::process::id();
    // SAFETY: a u32 field of the live mapping, aligned.
    let first = unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*c).header.pid)) };
    let _ = first.compare_exchange(0, pid, Ordering::AcqRel, Ordering::Relaxed);
    let mut comm = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes (NUL included) into the buffer.
    unsafe { libc::prctl(libc::PR_GET_NAME, comm.as_mut_ptr()) };
    add_entry(pid, comm, 0);
}

/// Takes the next entry of the processes list (counted even past [`abi::MAX_PROCESSES`]) and
/// writes it when it is among the first; the number taken (`None` when inert). Async-signal-safe
/// (a forked child calls it before exec): atomics and plain stores only.
pub fn add_entry(pid: u32, comm: [u8; 16], flags: u32) -> Option<usize> {
    let c = get();
    if c.is_null() {
        return None;
    }
    // SAFETY: a u32 field of the live mapping, aligned.
    let count = unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*c).header.processes)) };
    let index = count.fetch_add(1, Ordering::AcqRel) as usize;
    if index >= abi::MAX_PROCESSES {
        if flags & abi::entry::NO_AGENT != 0 {
            // SAFETY: a u32 field of the live mapping, aligned.
            let unmeasured = unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*c).header.unlisted_without_agent)) };
            unmeasured.fetch_add(1, Ordering::AcqRel);
        }
        return Some(index);
    }
    // SAFETY: an entry of the live mapping; name and flags first, then the pid that marks it
    // written (release), so a reader that sees the pid sees the rest.
    unsafe {
        let entry = std::ptr::addr_of_mut!((*c).processes[index]);
        std::ptr::write_volatile(std::ptr::addr_of_mut!((*entry).comm), comm);
        AtomicU32::from_ptr(std::ptr::addr_of_mut!((*entry).flags)).store(flags, Ordering::Relaxed);
        AtomicU32::from_ptr(std::ptr::addr_of_mut!((*entry).pid)).store(pid, Ordering::Release);
    }
    Some(index)
}

/// Undoes [`add_entry`]'s number `index` for a program without the agent that never ran (its
/// exec failed): a listed entry is flagged [`abi::entry::EXEC_FAILED`]; an unlisted number is
/// given back to both counts (the total stays at least [`abi::MAX_PROCESSES`], so no later
/// process takes a listed entry).
pub fn exec_failed(index: usize) {
    let c = get();
    if c.is_null() {
        return;
    }
    if index >= abi::MAX_PROCESSES {
        // SAFETY: u32 fields of the live mapping, aligned.
        unsafe {
            for count in [
                std::ptr::addr_of_mut!((*c).header.processes),
                std::ptr::addr_of_mut!((*c).header.unlisted_without_agent),
            ] {
                AtomicU32::from_ptr(count).fetch_sub(1, Ordering::AcqRel);
            }
        }
        return;
    }
    // SAFETY: a u32 field of an entry of the live mapping, aligned.
    unsafe {
        AtomicU32::from_ptr(std::ptr::addr_of_mut!((*c).processes[index].flags))
            .fetch_or(abi::entry::EXEC_FAILED, Ordering::AcqRel)
    };
}

/// Adds this process's agent start-up CPU time to the header's sum.
pub fn add_init_cpu(ns: u64) {
    let c = get();
    if c.is_null() {
        return;
    }
    // SAFETY: a u64 field of the live mapping, 8-byte aligned.
    unsafe { AtomicU64::from_ptr(std::ptr::addr_of_mut!((*c).header.init_cpu_ns)).fetch_add(ns, Ordering::Relaxed) };
}

/// Address of an I/O slot's stats; null when inert.
#[inline(always)]
pub fn io_slot(kind: usize) -> *mut Stats {
    let c = get();
    if c.is_null() || kind >= abi::IO_KINDS {
        return std::ptr::null_mut();
    }
    // SAFETY: in bounds of the live mapping.
    unsafe { std::ptr::addr_of_mut!((*c).io[kind]) }
}

/// Adds to a health counter, chosen by `field`.
pub fn health(field: impl FnOnce(&mut abi::AgentHealth) -> &mut u64) {
    let c = get();
    if c.is_null() {
        return;
    }
    // SAFETY: the live mapping; the field is a u64 inside it, 8-byte aligned (asserted in abi).
    unsafe {
        let f: *mut u64 = field(&mut (*c).header.health);
        AtomicU64::from_ptr(f).fetch_add(1, Ordering::Relaxed);
    }
}

/// `floor(log2(ns))`, 0 for 0, capped at the last bucket: the kernel path's buckets.
#[inline(always)]
pub fn bucket(ns: u64) -> usize {
    if ns == 0 {
        0
    } else {
        ((63 - ns.leading_zeros()) as usize).min(HIST_BUCKETS - 1)
    }
}

/// Atomically adds `v` to the u64 at `p`.
///
/// # Safety
/// `p` must point into the live counters mapping, 8-byte aligned.
#[inline(always)]
pub unsafe fn add(p: *mut u64, v: u64) {
    if v != 0 {
        // SAFETY: guaranteed by the caller.
        unsafe { AtomicU64::from_ptr(p).fetch_add(v, Ordering::Relaxed) };
    }
}

/// Records one timed call into `s`: calls, total, histogram, bytes.
///
/// # Safety
/// `s` must be a slot of the live counters mapping.
#[inline(always)]
pub unsafe fn record_call(s: *mut Stats, ns: u64, bytes: u64) {
    // SAFETY: fields of a live slot, 8-byte aligned.
    unsafe {
        add(std::ptr::addr_of_mut!((*s).calls), 1);
        add(std::ptr::addr_of_mut!((*s).total_ns), ns);
        add(std::ptr::addr_of_mut!((*s).hist[bucket(ns)]), 1);
        add(std::ptr::addr_of_mut!((*s).bytes), bytes);
    }
}
