//! The one probed lifecycle every measured process goes through — a LUT's server and client
//! (`repetition`), any command (`trace`), the calibration workload (`calibrate`):
//!
//! 1. [`start`]: spawn held before `exec`, let the [`ProcessObserver`] register the pid (probes
//!    track it) and add its environment, release;
//! 2. [`Supervisor`]: wait for reports and exits, enforcing the deadline and Ctrl-C (whatever
//!    still runs is killed), ticking the observer;
//! 3. [`ProbeTracker::collect`]: snapshot the probes' totals (scaled for duty cycles), merge the
//!    agents', build the profile from the memory maps kept while the processes ran, and leave
//!    the probes clean for the next process.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use nesquic_ebpf::profile::Profile;
use nesquic_ebpf::Metrics;
use nesquic_lut_adapters::report::{ClientResult, LutEvent};
use nesquic_record::run::AgentReport;

use crate::backend::UserProbes;
use crate::duty::DutyCycle;
use crate::error::{Cause, StepExt};
use crate::kernel::KernelProbes;
use crate::process::{Exit, LutProcess, ProcessEvent, Role};
use crate::EngineError;

type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Told about each process before it runs (so probes can register its pid) and while it runs.
pub trait ProcessObserver {
    /// Variables to add to the environment of the process about to start in `role` (the
    /// user-space probe agent's); none by default.
    fn environment(&mut self, _role: Role) -> Result<Vec<(String, std::ffi::OsString)>, Cause> {
        Ok(Vec::new())
    }

    /// `pid` is forked and held before `exec`.
    fn spawned(&mut self, role: Role, pid: i32) -> Result<(), Cause>;

    /// Called at least every 50 ms while the processes run, with the client's verified bytes so
    /// far (for periodic snapshots).
    fn tick(&mut self, _progress_bytes: u64) -> Result<(), Cause> {
        Ok(())
    }

    /// Every report line a LUT process printed.
    fn lut_event(&mut self, _role: Role, _event: &LutEvent) -> Result<(), Cause> {
        Ok(())
    }

    /// When the observer next needs a `tick` (duty-cycled probes toggle on time); `None`: the
    /// default 50 ms is fine.
    fn next_tick(&self) -> Option<Duration> {
        None
    }
}

/// What to start.
pub struct Launch<'a> {
    /// Its role.
    pub role: Role,
    /// The executable.
    pub binary: &'a Path,
    /// Its arguments.
    pub args: &'a [std::ffi::OsString],
    /// Run inside this network namespace (its file under /var/run/netns).
    pub netns: Option<std::path::PathBuf>,
    /// Keep stdout/stderr on the terminal (`trace`, calibration) instead of reading the LUT
    /// protocol from them.
    pub inherit_output: bool,
    /// Run on this CPU alone (`--pin`).
    pub cpu: Option<usize>,
}

impl<'a> Launch<'a> {
    /// One command of the user's (`trace`, calibration): its output on the terminal, in this
    /// namespace, wherever the scheduler puts it.
    pub fn command(binary: &'a Path, args: &'a [std::ffi::OsString]) -> Self {
        Launch { role: Role::Process, binary, args, netns: None, inherit_output: true, cpu: None }
    }
}

/// Spawns `launch` held before `exec`, tells `observer` (which attaches the probes), releases it.
pub fn start(
    launch: &Launch<'_>,
    events: Sender<ProcessEvent>,
    observer: &mut dyn ProcessObserver,
) -> Result<LutProcess> {
    let env = observer.environment(launch.role)?;
    let mut process = if launch.inherit_output {
        LutProcess::spawn_inheriting_output(launch.role, launch.binary, launch.args, &env, events)?
    } else {
        LutProcess::spawn_in(launch.role, launch.binary, launch.args, &env, events, launch.netns.as_deref())?
    };
    if let Some(cpu) = launch.cpu {
        // Still held before exec: the LUT's first instruction already runs on its CPU.
        if let Err(e) = crate::pin::pin(process.pid, cpu) {
            process.kill();
            return Err(e);
        }
    }
    observer.spawned(launch.role, process.pid)?;
    process.release()?;
    Ok(process)
}

/// An instant thousands of years ahead, or as far ahead as the clock can hold (`d` halves until
/// `now + d` fits).
fn far_future(now: Instant) -> Instant {
    let mut d = Duration::from_secs(u64::MAX >> 26);
    loop {
        if let Some(t) = now.checked_add(d) {
            return t;
        }
        d /= 2;
    }
}

/// The default longest wait for an event.
pub const POLL: Duration = Duration::from_millis(50);

/// Longest wait for killed processes to be reaped before nesquic goes on (SIGKILL cannot be
/// ignored: a process only takes this long when the machine is overloaded).
const REAP_WAIT: Duration = Duration::from_secs(5);

/// Collects the reports and exits of a set of processes, enforcing a deadline and interruption.
pub struct Supervisor<'a> {
    rx: Receiver<ProcessEvent>,
    /// Whatever still runs is killed at this instant.
    deadline: Instant,
    /// Why the deadline is earlier than the time limit, when [`Supervisor::shorten`] made it so:
    /// the timeout error then says that, not "raise --timeout", which would not help.
    shortened_because: Option<String>,
    interrupted: &'a AtomicBool,
    /// What the processes are called in errors ("the LUT processes", "command").
    what: &'static str,
    server_exit: Option<Exit>,
    client_exit: Option<Exit>,
    /// The client's result, once reported.
    pub done: Option<ClientResult>,
    /// qlog files the LUT wrote, with the wall clock of their time zero (ns since the epoch).
    pub lut_qlogs: Vec<(Role, std::path::PathBuf, u64)>,
    /// Longest wait for an event.
    pub poll: Duration,
    /// What remote roles' probes measured, as they reported it.
    pub remote_totals: Vec<(Role, crate::wire::RoleTotals)>,
}

impl<'a> Supervisor<'a> {
    /// Watches what reports on `rx` for at most `limit` (a limit past what the clock can hold
    /// never expires).
    pub fn new(rx: Receiver<ProcessEvent>, limit: Duration, interrupted: &'a AtomicBool, what: &'static str) -> Self {
        let now = Instant::now();
        Self {
            rx,
            deadline: now.checked_add(limit).unwrap_or_else(|| far_future(now)),
            shortened_because: None,
            interrupted,
            what,
            server_exit: None,
            client_exit: None,
            done: None,
            lut_qlogs: Vec::new(),
            poll: POLL,
            remote_totals: Vec::new(),
        }
    }

    /// Whatever still runs is killed at this instant.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Brings the deadline forward to `at` (never back), saying `why` in the timeout error.
    pub fn shorten(&mut self, at: Instant, why: impl FnOnce() -> String) {
        if at < self.deadline {
            self.deadline = at;
            self.shortened_because = Some(why());
        }
    }

    /// How the process in `role` exited, once it has.
    pub fn exit(&self, role: Role) -> Option<Exit> {
        match role {
            Role::Server => self.server_exit,
            Role::Client | Role::Process => self.client_exit,
        }
    }

    /// A report already queued, without waiting (exits are recorded, not returned).
    pub fn try_next(&mut self) -> Option<(Role, LutEvent)> {
        loop {
            match self.rx.try_recv().ok()? {
                ProcessEvent::Report(role, event) => return Some((role, event)),
                ProcessEvent::Exited(..) => continue,
                ProcessEvent::Remote(role, totals) => self.remote_totals.push((role, *totals)),
            }
        }
    }

    /// Waits for the next report; records exits and results. Kills `procs` on timeout or signal.
    pub fn next(&mut self, procs: &mut [&mut LutProcess]) -> Result<Option<(Role, LutEvent)>> {
        if self.interrupted.load(Ordering::Relaxed) {
            self.kill_and_reap(procs);
            return Err(EngineError::msg(format!("interrupted: {} killed, probes detached", self.what)));
        }
        let now = Instant::now();
        if now >= self.deadline {
            self.kill_and_reap(procs);
            return Err(EngineError::msg(match &self.shortened_because {
                Some(why) => format!("timed out: {why}"),
                None => {
                    format!("timed out: {} did not finish within the time limit (raise it with --timeout)", self.what)
                }
            }));
        }
        match self.rx.recv_timeout(self.poll.min(self.deadline - now)) {
            Ok(ProcessEvent::Exited(role, exit)) => {
                self.record_exit(procs, role, exit);
                Ok(None)
            }
            Ok(ProcessEvent::Remote(role, totals)) => {
                self.remote_totals.push((role, *totals));
                Ok(None)
            }
            Ok(ProcessEvent::Report(role, event)) => {
                match &event {
                    LutEvent::Done(result) => self.done = Some(result.clone()),
                    LutEvent::Qlog { path, start_unix_ns } => self.lut_qlogs.push((role, path.clone(), *start_unix_ns)),
                    _ => {}
                }
                Ok(Some((role, event)))
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            // Every process exited and its reader threads are done: the caller judges the exits.
            Err(RecvTimeoutError::Disconnected) if procs.iter().all(|p| p.is_reaped()) => {
                std::thread::sleep(self.poll.min(self.deadline - now));
                Ok(None)
            }
            Err(RecvTimeoutError::Disconnected) => Err(EngineError::msg(format!("lost contact with {}", self.what))),
        }
    }

    /// A process's exit: it is reaped (never signalled again) and its exit kept for its role.
    fn record_exit(&mut self, procs: &mut [&mut LutProcess], role: Role, exit: Exit) {
        if let Some(p) = procs.iter_mut().find(|p| p.role == role) {
            p.mark_reaped();
        }
        match role {
            Role::Server => self.server_exit = Some(exit),
            Role::Client | Role::Process => self.client_exit = Some(exit),
        }
    }

    /// SIGKILLs `procs` and waits (up to [`REAP_WAIT`]) until each is reaped, so that no LUT
    /// process outlives nesquic: a killed process takes a moment to die (the kernel frees its
    /// memory and socket buffers first), and what runs after nesquic must not meet it. A test saw
    /// a killed LUT still alive when `nesquic run --timeout` had already exited.
    fn kill_and_reap(&mut self, procs: &mut [&mut LutProcess]) {
        procs.iter_mut().for_each(|p| p.kill());
        let until = Instant::now() + REAP_WAIT;
        while procs.iter().any(|p| !p.is_reaped()) {
            let now = Instant::now();
            if now >= until {
                break;
            }
            match self.rx.recv_timeout(until - now) {
                Ok(ProcessEvent::Exited(role, exit)) => self.record_exit(procs, role, exit),
                Ok(ProcessEvent::Remote(role, totals)) => self.remote_totals.push((role, *totals)),
                Ok(ProcessEvent::Report(..)) => {}
                Err(_) => break,
            }
        }
    }

    /// Runs one process until it exits, ticking `observer` (duty cycles, memory maps).
    pub fn until_exit(&mut self, process: &mut LutProcess, observer: &mut dyn ProcessObserver) -> Result<Exit> {
        loop {
            // Ticked before each wait, so even a process that ends within the first poll had its
            // memory maps read while it ran.
            observer.tick(0)?;
            self.poll = observer.next_tick().map_or(POLL, |t| t.clamp(Duration::from_millis(1), POLL));
            if let Some((role, event)) = self.next(&mut [&mut *process])? {
                observer.lut_event(role, &event)?;
            }
            if let Some(exit) = self.exit(process.role) {
                return Ok(exit);
            }
        }
    }
}

/// Set in a LUT's environment while the sampling profile runs, so a LUT that can name its
/// run-time code for the profile (CPython's perf trampolines, ~8% of aioquic's CPU) turns that
/// on only then (docs/protocol.md).
pub const PROFILING_ENV: &str = "NESQUIC_PROFILING";

/// The probes' side of observing processes: registers each pid with the kernel session, gives
/// each process the agent's environment, toggles duty-cycled probes, keeps the memory maps the
/// profile symbolises with; afterwards collects what they measured.
pub struct ProbeTracker<'a> {
    /// The eBPF session (or a fake, in tests), if the kernel measures anything.
    pub session: Option<&'a mut dyn KernelProbes>,
    /// The user-space agent, if it measures anything.
    pub user: Option<&'a mut UserProbes>,
    duty: Option<DutyCycle>,
    /// Every process started, in order.
    pub pids: Vec<(Role, i32)>,
    /// Memory maps of the processes, for symbolising profile samples after they exit.
    maps: nesquic_ebpf::profile::MapsCache,
}

/// What the probes measured of the processes a [`ProbeTracker`] followed.
pub struct Probed {
    /// Totals (the agents' merged in), scaled up for duty cycles; None when the processes failed.
    pub metrics: Option<Metrics>,
    /// Each agent's report.
    pub agents: Vec<AgentReport>,
    /// The sampling profile, when it ran and the processes succeeded.
    pub profile: Option<Profile>,
}

impl<'a> ProbeTracker<'a> {
    /// Follows processes with these probes; `duty` cycles the kernel's function probes.
    pub fn new(
        session: Option<&'a mut dyn KernelProbes>,
        user: Option<&'a mut UserProbes>,
        duty: Option<crate::duty::DutySpec>,
    ) -> Self {
        Self { session, user, duty: duty.map(DutyCycle::new), pids: Vec::new(), maps: Default::default() }
    }

    /// Reads the totals, agents and profile of `roles` (when `succeeded`), then detaches from the
    /// processes and zeroes the probes for the next ones.
    pub fn collect(&mut self, succeeded: bool, roles: &[Role]) -> Result<Probed> {
        let duty_fraction = self.duty.as_mut().and_then(|d| d.finish());
        let kernel = match self.session.as_deref() {
            Some(session) if succeeded && session.counts_totals() => {
                let mut m = session.snapshot(roles)?;
                if let Some(fraction) = duty_fraction {
                    m.apply_duty(fraction);
                }
                Some(m)
            }
            _ => None,
        };
        let metrics = match self.user.as_deref() {
            Some(user) if succeeded => Some(user.merge_into(kernel)),
            _ => kernel,
        };
        let agents = self.user.as_deref_mut().map(|u| u.finish_repetition()).unwrap_or_default();
        let maps = std::mem::take(&mut self.maps.maps);
        let mut profile = None;
        if let Some(session) = self.session.as_deref_mut() {
            // Taken every repetition, so a failed one's reads are not the next one's.
            let maps_reads = self.maps.take_reads();
            if succeeded && session.is_profiling() {
                let mut built = session.profile(&maps, roles)?;
                built.maps_reads = Some(maps_reads);
                profile = Some(built);
            }
            session.clear()?;
        }
        // The perf maps our LUT processes wrote (CPython's trampolines) are read: without this
        // they pile up in /tmp, ~250 KB per process.
        for pid in self.pids.iter().filter_map(|(_, pid)| u32::try_from(*pid).ok()) {
            nesquic_ebpf::symbols::remove_perf_map(pid);
        }
        Ok(Probed { metrics, agents, profile })
    }

    /// The duty-cycle period's next toggle, if cycling.
    fn next_toggle(&self) -> Option<Duration> {
        self.duty.as_ref().map(|d| d.next_toggle())
    }
}

impl ProcessObserver for ProbeTracker<'_> {
    fn environment(&mut self, role: Role) -> Result<Vec<(String, std::ffi::OsString)>, Cause> {
        let mut env = match self.user.as_deref_mut() {
            Some(user) => user.environment(role)?,
            None => Vec::new(),
        };
        if self.session.as_deref().is_some_and(|s| s.is_profiling()) {
            env.push((PROFILING_ENV.to_string(), "1".into()));
        }
        Ok(env)
    }

    fn spawned(&mut self, role: Role, pid: i32) -> Result<(), Cause> {
        self.pids.push((role, pid));
        let Some(session) = self.session.as_deref_mut() else { return Ok(()) };
        // Invariant: a pid from fork is positive.
        let pid = u32::try_from(pid).unwrap_or_default();
        session.track(pid, role).with_step(|| format!("attach probes to the {role} (pid {pid})"))?;
        if let Some(duty) = self.duty.as_mut() {
            duty.begin(Instant::now());
        }
        Ok(())
    }

    fn tick(&mut self, _progress_bytes: u64) -> Result<(), Cause> {
        if let (Some(duty), Some(session)) = (self.duty.as_mut(), self.session.as_deref_mut()) {
            duty.tick(session).step("duty-cycle the function probes")?;
        }
        if self.session.as_deref().is_some_and(|s| s.is_profiling()) {
            self.maps.refresh(self.pids.iter().filter_map(|&(_, pid)| u32::try_from(pid).ok()));
        }
        Ok(())
    }

    fn next_tick(&self) -> Option<Duration> {
        // The maps of a process just started are read every few ms (MapsCache::refresh).
        let maps = self.session.as_deref().filter(|s| s.is_profiling()).and_then(|_| self.maps.next_read());
        self.next_toggle().into_iter().chain(maps).min()
    }
}
