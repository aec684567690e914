//! `profile:~HZ`: a CPU-clock perf event on every CPU whose interval is drawn at
//! random, so that no periodic work can run in step with it (docs/probes.md, "Why not the tick";
//! its residual bias: bench/sampler-phase.md).
//!
//! The kernel gives a sampling perf event one fixed period, and a BPF program cannot change it
//! (`bpf_perf_event_data.sample_period` is read-only). `PERF_EVENT_IOC_PERIOD` can, from user
//! space: it stops the event's hrtimer and starts it again at *now* + the new period. So one
//! thread wakes at random times (every 10-30 ms, timer slack 1 ns so its wake-ups are not
//! coalesced onto the tick) and gives each CPU's event a new period, 1/(mean x U(0.5, 1.5)). Each
//! re-arm starts the series at a random phase, and the series' step changes with it: over a run
//! the samples fall at every phase of any periodic work, while their mean rate stays the one
//! asked for (the rate, not the period, is drawn uniformly). Between re-arms the period is fixed
//! and runs on the perf event's own hrtimer, like `perf record -F`.
//!
//! The events are opened here (not through aya, whose BPF link keeps no perf fd to re-arm) and
//! the program is attached to each with `PERF_EVENT_IOC_SET_BPF`, which every kernel since 4.9
//! has. Closing the fds detaches it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::EbpfError;

/// `struct perf_event_attr` up to `config2` (`PERF_ATTR_SIZE_VER1`, 72 bytes): the kernel takes
/// the fields a program knows and zeroes the rest.
#[repr(C)]
#[derive(Default)]
pub(crate) struct PerfEventAttr {
    pub(crate) kind: u32,
    pub(crate) size: u32,
    pub(crate) config: u64,
    pub(crate) sample_period: u64,
    pub(crate) sample_type: u64,
    pub(crate) read_format: u64,
    /// Bit 0 `disabled`, ... (include/uapi/linux/perf_event.h).
    pub(crate) flags: u64,
    pub(crate) wakeup_events: u32,
    pub(crate) bp_type: u32,
    pub(crate) config1: u64,
    pub(crate) config2: u64,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const PERF_ATTR_DISABLED: u64 = 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// `_IO('$', 0)`.
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
/// `_IOW('$', 4, __u64)`.
const PERF_EVENT_IOC_PERIOD: libc::c_ulong = 0x4008_2404;
/// `_IOW('$', 8, __u32)`.
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;

/// `perf_event_open(attr, pid, cpu)`, close-on-exec, no group; `None` with errno set on failure.
pub(crate) fn perf_event_open(attr: &PerfEventAttr, pid: libc::pid_t, cpu: u32) -> Option<OwnedFd> {
    // SAFETY: `attr` is a valid perf_event_attr of the size it declares; the kernel returns a new
    // fd or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            pid,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    // SAFETY: a fresh fd the kernel just returned, owned by nothing else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// How far a drawn rate strays from the mean: uniform in [1 - SPREAD, 1 + SPREAD] x mean. Wide,
/// so that consecutive samples between two re-arms step through a periodic workload's phases
/// too (a simulation of the two-phase workload, 5 s at 250 Hz: the share's spread is the
/// binomial one at 0.5, 1.5 points; at 0.25 it is 2.0 and at 0.1 2.9, since a period near the
/// work's own repeats one phase until the next re-arm).
pub const SPREAD: f64 = 0.5;
/// Re-arm every MIN..MAX ms (uniform).
pub const REARM_MS: (u64, u64) = (10, 30);

/// The random-interval sampler: per-CPU events, and the thread that re-arms them.
pub struct RandomClock {
    events: Arc<Vec<OwnedFd>>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
    rearms: Arc<AtomicU64>,
    failure: Arc<Mutex<Option<String>>>,
}

impl RandomClock {
    /// Opens a CPU-clock event on every CPU in `cpus`, attaches `program` (a loaded
    /// `perf_event` program's fd) to each, enables them and starts the re-arming thread.
    pub fn start(program: RawFd, cpus: &[u32], mean_hz: u64) -> Result<Self, EbpfError> {
        let mean_hz = mean_hz.max(1);
        let mut rng = Rng::seeded();
        let first = rng.stretch();
        let mut events = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            let attr = PerfEventAttr {
                kind: PERF_TYPE_SOFTWARE,
                size: std::mem::size_of::<PerfEventAttr>() as u32,
                config: PERF_COUNT_SW_CPU_CLOCK,
                sample_period: rng.period_ns(mean_hz, first),
                flags: PERF_ATTR_DISABLED,
                wakeup_events: 1,
                ..PerfEventAttr::default()
            };
            let attach_error = |call: &str| EbpfError::Attach {
                what: format!("random-interval cpu-clock sampling on cpu {cpu}"),
                reason: format!("{call}: {}", std::io::Error::last_os_error()),
            };
            // pid -1 with a CPU number: a per-CPU event.
            let fd = perf_event_open(&attr, -1, cpu).ok_or_else(|| attach_error("perf_event_open"))?;
            // SAFETY: ioctls on our own perf event fd; SET_BPF takes the program fd by value.
            if unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_SET_BPF, program) } != 0 {
                return Err(attach_error("PERF_EVENT_IOC_SET_BPF"));
            }
            // SAFETY: as above; ENABLE takes no argument.
            if unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_ENABLE, 0) } != 0 {
                return Err(attach_error("PERF_EVENT_IOC_ENABLE"));
            }
            events.push(fd);
        }
        let events = Arc::new(events);
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let rearms = Arc::new(AtomicU64::new(0));
        let failure = Arc::new(Mutex::new(None));
        let thread = {
            let (events, stop, rearms, failure) = (events.clone(), stop.clone(), rearms.clone(), failure.clone());
            std::thread::Builder::new()
                .name("nesquic-sampler".into())
                .spawn(move || rearm_loop(&events, &stop, &rearms, &failure, mean_hz, first, rng))
                .map_err(|e| EbpfError::Io { what: "starting the sampler's re-arming thread".into(), source: e })?
        };
        Ok(Self { events, stop, thread: Some(thread), rearms, failure })
    }

    /// Re-arms so far (each gives every CPU's event a new period and phase).
    pub fn rearms(&self) -> u64 {
        self.rearms.load(Ordering::Relaxed)
    }

    /// Why re-arming stopped (the events then keep their last period) or runs at normal priority.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|f| f.clone())
    }

    /// The number of per-CPU events.
    pub fn cpus(&self) -> usize {
        self.events.len()
    }
}

impl Drop for RandomClock {
    fn drop(&mut self) {
        if let Ok(mut stop) = self.stop.0.lock() {
            *stop = true;
        }
        self.stop.1.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // The events (and with them the program's attachment) close with the last Arc.
    }
}

fn rearm_loop(
    events: &[OwnedFd],
    stop: &(Mutex<bool>, Condvar),
    rearms: &AtomicU64,
    failure: &Mutex<Option<String>>,
    mean_hz: u64,
    first: Duration,
    mut rng: Rng,
) {
    // The default slack (50 us) lets the kernel fire this thread's timer with any other in that
    // window, the tick's included: its wake-ups, and so the phases it starts, would lean towards
    // the tick's.
    // SAFETY: prctl with an integer argument, on this thread only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    // A woken thread of normal priority on busy CPUs often waits for the next tick to run: its
    // re-arms then start right after a tick, and the first sample of each series falls at
    // (period mod 4 ms) after it, whose distribution is not flat. Measured: the 2 ms before each
    // tick got 54-55% of the two-phase workload's samples for 52% of its CPU. The lowest real-time
    // priority runs it when its timer fires, at a random instant (a few us every 10-30 ms).
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: this thread's own handle and a valid sched_param.
    let rt = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if rt != 0 {
        if let Ok(mut f) = failure.lock() {
            *f = Some(format!(
                "SCHED_FIFO for the re-arming thread: {} (its re-arms may follow the tick)",
                std::io::Error::from_raw_os_error(rt)
            ));
        }
    }
    let (lock, wake) = stop;
    let Ok(mut stopped) = lock.lock() else { return };
    let mut wait = first;
    loop {
        let Ok((guard, _)) = wake.wait_timeout(stopped, wait) else { return };
        stopped = guard;
        if *stopped {
            return;
        }
        wait = rng.stretch();
        for fd in events {
            let period = rng.period_ns(mean_hz, wait);
            // SAFETY: PERIOD reads a u64 through the pointer, valid for the call.
            if unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_PERIOD, &period as *const u64) } != 0 {
                if let Ok(mut f) = failure.lock() {
                    *f = Some(format!("PERF_EVENT_IOC_PERIOD: {}", std::io::Error::last_os_error()));
                }
                return;
            }
        }
        rearms.fetch_add(1, Ordering::Relaxed);
    }
}

/// xorshift64*: any well-mixed sequence will do; it only has to be unrelated to the clock's phase.
struct Rng(u64);

impl Rng {
    fn seeded() -> Self {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        Self((now ^ u64::from(std::process::id()).rotate_left(32)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [low, high).
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + (self.unit() * high.saturating_sub(low) as f64) as u64
    }

    /// How long until the next re-arm.
    fn stretch(&mut self) -> Duration {
        Duration::from_micros(self.between(REARM_MS.0 * 1000, REARM_MS.1 * 1000))
    }

    /// A period, in ns, for a rate drawn uniformly in [1 - SPREAD, 1 + SPREAD] x `mean_hz`, to run
    /// for `until` (the next re-arm). A re-arm drops the interval in progress: the first sample
    /// comes a whole period after it, so a stretch of length L at period P holds L/P - 1/2
    /// samples on average, not L/P (9% fewer at 250 Hz and 20 ms). Half a sample per stretch
    /// is added to the rate to keep the mean rate the one asked for.
    fn period_ns(&mut self, mean_hz: u64, until: Duration) -> u64 {
        let rate = mean_hz as f64 * (1.0 - SPREAD + 2.0 * SPREAD * self.unit());
        let rate = rate + 0.5 / until.as_secs_f64().max(1e-3);
        (1e9 / rate) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawn_rates_average_the_mean_and_stay_in_the_spread() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        // A stretch of 1000 s adds nothing to speak of (0.0005 Hz).
        let rates: Vec<f64> =
            (0..100_000).map(|_| 1e9 / rng.period_ns(250, Duration::from_secs(1000)) as f64).collect();
        let mean = rates.iter().sum::<f64>() / rates.len() as f64;
        assert!((mean - 250.0).abs() < 1.0, "{mean}");
        assert!(rates.iter().all(|&r| (124.9..=375.1).contains(&r)), "out of spread");
        let low = rates.iter().filter(|&&r| r < 250.0).count() as f64 / rates.len() as f64;
        assert!((low - 0.5).abs() < 0.01, "{low}");
    }

    /// The samples the schedule gives (a stretch of L at period P: floor(L/P) samples, the first
    /// a period after the re-arm) average the mean rate over a long run.
    #[test]
    fn the_schedule_keeps_the_mean_rate() {
        let mut rng = Rng(0x0dd_5eed);
        let (mut samples, mut ns) = (0u64, 0u64);
        for _ in 0..20_000 {
            let until = rng.stretch();
            let period = rng.period_ns(250, until);
            samples += until.as_nanos() as u64 / period;
            ns += until.as_nanos() as u64;
        }
        let rate = samples as f64 / (ns as f64 / 1e9);
        assert!((rate - 250.0).abs() < 2.5, "{rate} Hz");
    }

    #[test]
    fn attr_is_the_kernels_first_extended_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 72);
    }
}
