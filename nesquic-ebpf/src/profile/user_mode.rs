//! The sampling profile without root (issue 52): a CPU-clock perf event per CPU on each LUT
//! process (and the threads and children it starts: `inherit`), user mode only, read by nesquic
//! from the events' ring buffers. Linux lets any user sample their own processes this way at
//! `perf_event_paranoid` <= 2 (the default): `exclude_kernel` is what makes it unprivileged, so
//! time in the kernel is not sampled at all and the shares are of the user-mode CPU.
//!
//! No eBPF is involved: the kernel writes one record per sample (the user stack the frame-pointer
//! walk found, as `perf record -g` gets it) and a thread here drains the buffers every few ms and
//! counts each distinct stack. At 251 Hz on 2 CPUs that is ~500 records a second, a few hundred
//! bytes each; the buffers stay small (the per-user locked-memory allowance is ~0.5 MB a CPU).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sampler::PerfEventAttr;
use crate::EbpfError;

use super::RawSample;

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const PERF_SAMPLE_IP: u64 = 1 << 0;
const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_CALLCHAIN: u64 = 1 << 5;
/// `inherit`: the threads and processes the tracked one starts are sampled into its buffers.
const ATTR_INHERIT: u64 = 1 << 1;
const ATTR_EXCLUDE_KERNEL: u64 = 1 << 5;
const ATTR_EXCLUDE_HV: u64 = 1 << 6;
/// `freq`: `sample_period` is a rate in Hz.
const ATTR_FREQ: u64 = 1 << 10;
const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_SAMPLE: u32 = 9;
/// Call-chain entries at or above this are context markers (`PERF_CONTEXT_USER`, ...), not code.
const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
/// Data pages per ring (a power of two): 64 KiB, ~100-200 samples, drained every [`DRAIN_EVERY`].
const DATA_PAGES: usize = 16;
const DRAIN_EVERY: Duration = Duration::from_millis(10);
/// `struct perf_event_mmap_page`: where `data_head` and `data_tail` are.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;

/// Whether this machine lets a user sample their own processes in user mode: why not, if not.
pub fn allowed() -> Result<(), String> {
    let path = "/proc/sys/kernel/perf_event_paranoid";
    let level = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    match level.trim().parse::<i32>() {
        Ok(n) if n <= 2 => Ok(()),
        Ok(n) => Err(format!("{path} is {n}: it forbids sampling without privileges (2 allows user mode)")),
        Err(_) => Err(format!("{path} holds {:?}", level.trim())),
    }
}

/// How often each (process, role index, user stack) was sampled.
type StackCounts = HashMap<(u32, u32, Vec<u64>), u64>;

/// The user-mode sampler of a run's LUT processes.
pub struct UserModeSampler {
    hz: u64,
    cpus: Vec<u32>,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What the draining thread and the caller share.
struct Shared {
    rings: Mutex<Vec<Ring>>,
    counts: Mutex<StackCounts>,
    lost: AtomicU64,
    drain_ns: AtomicU64,
    stop: AtomicBool,
}

/// One event's ring buffer.
struct Ring {
    role: u32,
    /// The event: closing it stops the sampling (after the mapping is gone, see `Drop`).
    _fd: OwnedFd,
    base: *mut u8,
    len: usize,
    page: usize,
}

// SAFETY: the mapping is owned by the ring and only touched under the rings' mutex.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are the mapping made in `Ring::open`, unmapped once here.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

impl Ring {
    fn open(pid: u32, cpu: u32, role: u32, hz: u64) -> Result<Self, EbpfError> {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_CPU_CLOCK,
            sample_period: hz,
            sample_type: PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_CALLCHAIN,
            flags: ATTR_INHERIT | ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV | ATTR_FREQ,
            ..PerfEventAttr::default()
        };
        let error = |call: &str| EbpfError::Attach {
            what: format!("user-mode cpu-clock sampling of pid {pid} on cpu {cpu}"),
            reason: format!("{call}: {}", std::io::Error::last_os_error()),
        };
        // A pid with a CPU number samples that process (and, inherit, its descendants) there.
        let fd =
            crate::sampler::perf_event_open(&attr, pid as libc::pid_t, cpu).ok_or_else(|| error("perf_event_open"))?;
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = page * (1 + DATA_PAGES);
        // SAFETY: maps the event's metadata page and ring, as perf_event_open(2) describes;
        // read-write so that the data tail can be advanced.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(error("mmap of its ring buffer"));
        }
        Ok(Self { role, _fd: fd, base: base.cast(), len, page })
    }

    /// Reads every record the kernel wrote since the last call.
    fn drain(&mut self, counts: &mut StackCounts, lost: &AtomicU64) {
        let size = (self.len - self.page) as u64;
        // SAFETY: `data_head` and `data_tail` are u64 fields of the mapped metadata page.
        let (head_ptr, tail_ptr) =
            unsafe { (self.base.add(DATA_HEAD).cast::<AtomicU64>(), self.base.add(DATA_TAIL).cast::<AtomicU64>()) };
        // SAFETY: as above; the kernel writes head, we write tail.
        let head = unsafe { &*head_ptr }.load(Ordering::Acquire);
        let mut tail = unsafe { &*tail_ptr }.load(Ordering::Relaxed);
        let mut record = Vec::new();
        while tail < head {
            let header = self.copy(tail, 8, size, &mut record);
            let kind = u32::from_ne_bytes([header[0], header[1], header[2], header[3]]);
            let len = u64::from(u16::from_ne_bytes([header[6], header[7]]));
            if len < 8 {
                break; // a malformed header would loop forever; the rest of this buffer is skipped
            }
            let body = self.copy(tail + 8, (len - 8) as usize, size, &mut record);
            let word =
                |i: usize| body.get(i * 8..i * 8 + 8).map(|b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])));
            match kind {
                PERF_RECORD_SAMPLE => {
                    // ip, pid|tid, nr, ips[nr].
                    if let (Some(pid_tid), Some(nr)) = (word(1), word(2)) {
                        let tgid = pid_tid as u32;
                        let stack: Vec<u64> =
                            (0..nr as usize).filter_map(|i| word(3 + i)).filter(|&ip| ip < PERF_CONTEXT_MAX).collect();
                        *counts.entry((tgid, self.role, stack)).or_default() += 1;
                    }
                }
                PERF_RECORD_LOST => {
                    if let Some(n) = word(1) {
                        lost.fetch_add(n, Ordering::Relaxed);
                    }
                }
                _ => {}
            }
            tail += len;
        }
        fence(Ordering::Release);
        // SAFETY: as above.
        unsafe { &*tail_ptr }.store(tail, Ordering::Release);
    }

    /// `n` bytes of the ring from position `at`, copied out when they wrap around its end.
    fn copy<'a>(&self, at: u64, n: usize, size: u64, scratch: &'a mut Vec<u8>) -> &'a [u8] {
        scratch.clear();
        let start = (at % size) as usize;
        // SAFETY: the data area starts one page into the mapping and is `size` bytes long;
        // both slices stay inside it.
        let data = unsafe { std::slice::from_raw_parts(self.base.add(self.page), size as usize) };
        let first = n.min(data.len() - start);
        scratch.extend_from_slice(&data[start..start + first]);
        scratch.extend_from_slice(&data[..(n - first).min(data.len())]);
        scratch
    }
}

impl UserModeSampler {
    /// A sampler at `hz` per CPU; it samples nothing until [`UserModeSampler::track`].
    pub fn start(hz: u64) -> Result<Self, EbpfError> {
        let cpus = aya::util::online_cpus().map_err(|(what, e)| EbpfError::Io { what: what.into(), source: e })?;
        let shared = Arc::new(Shared {
            rings: Mutex::new(Vec::new()),
            counts: Mutex::new(HashMap::new()),
            lost: AtomicU64::new(0),
            drain_ns: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("nesquic-user-sampler".into())
                .spawn(move || {
                    while !shared.stop.load(Ordering::Relaxed) {
                        std::thread::sleep(DRAIN_EVERY);
                        let before = thread_cpu_ns();
                        shared.drain();
                        shared.drain_ns.fetch_add(thread_cpu_ns().saturating_sub(before), Ordering::Relaxed);
                    }
                })
                .map_err(|e| EbpfError::Io { what: "starting the user-mode sampler's thread".into(), source: e })?
        };
        Ok(Self { hz: hz.max(1), cpus, shared, thread: Some(thread) })
    }

    /// Samples `pid` (its threads and the processes it starts from now on) as `role`.
    pub fn track(&mut self, pid: u32, role: u32) -> Result<(), EbpfError> {
        let rings: Vec<Ring> =
            self.cpus.iter().map(|&cpu| Ring::open(pid, cpu, role, self.hz)).collect::<Result<_, _>>()?;
        lock(&self.shared.rings).extend(rings);
        Ok(())
    }

    /// The rate asked for, per CPU.
    pub fn hz(&self) -> u64 {
        self.hz
    }

    /// Every stack sampled since the last call, with how often (drains the buffers first).
    pub fn samples(&mut self) -> Vec<RawSample> {
        self.shared.drain();
        std::mem::take(&mut *lock(&self.shared.counts))
            .into_iter()
            .map(|((tgid, role, user), count)| RawSample {
                tgid,
                role,
                user,
                kernel: Vec::new(),
                sp_word: 0,
                stack_lost: false,
                count,
            })
            .collect()
    }

    /// Samples the kernel could not write because a buffer was full, so far.
    pub fn lost(&self) -> u64 {
        self.shared.lost.load(Ordering::Relaxed)
    }

    /// nesquic's own CPU time spent draining the buffers so far, ns (the kernel's share of each
    /// sample, its interrupt and stack walk, is the LUT's CPU time: `--overhead` measures it).
    pub fn drain_ns(&self) -> u64 {
        self.shared.drain_ns.load(Ordering::Relaxed)
    }

    /// Stops sampling every process tracked (their events are closed) and forgets their samples.
    pub fn clear(&mut self) {
        lock(&self.shared.rings).clear();
        lock(&self.shared.counts).clear();
        self.shared.lost.store(0, Ordering::Relaxed);
        self.shared.drain_ns.store(0, Ordering::Relaxed);
    }
}

impl Drop for UserModeSampler {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Shared {
    fn drain(&self) {
        let mut rings = lock(&self.rings);
        let mut counts = lock(&self.counts);
        for ring in rings.iter_mut() {
            ring.drain(&mut counts, &self.lost);
        }
    }
}

/// A poisoned lock still holds consistent data here (every writer completes its update).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// This thread's CPU time so far, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec for the kernel to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}
