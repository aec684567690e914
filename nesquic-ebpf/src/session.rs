//! A probe session: the loaded eBPF object, its attachments and maps. Dropping it detaches every
//! probe and unloads the programs; nothing is pinned, so even a killed nesquic leaves nothing
//! behind (the kernel releases the links with the file descriptors).

use std::collections::HashMap;
use std::num::NonZeroU32;

use aya::maps::{Array, HashMap as BpfHashMap, MapData, PerCpuArray, PerCpuValues, RingBuf, StackTraceMap};
use aya::programs::perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent};
use aya::programs::uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeLink, UProbeLinkId, UProbeScope};
use aya::programs::{BtfTracePoint, PerfEvent};
use aya::programs::{TracePoint, UProbe};
use aya::Btf;
use aya::Ebpf;

use crate::catalog::{ProfileClock, ResolvedFunction};
use crate::kernel_io::KernelIo;
use crate::layout::{
    NqDatagramEvent, NqFuncConfig, NqHealth, NqSampleKey, NqSettings, NqStats, KFUNCS, MAX_FUNCS, MAX_ROLES, SYSCALLS,
};
use crate::metrics::{FunctionLabel, Metrics};
use crate::Role;
use crate::{preflight, EbpfError};

pub use crate::profile::SamplerCost;
use crate::profile::SamplerCounters;

const FUNC_ENTER: &str = "nq_func_enter";
const FUNC_EXIT: &str = "nq_func_exit";
/// `tick_function` indices (bpf/nesquic.bpf.c: NQ_TICK_CALLBACK, NQ_TICK_WALK_ALWAYS).
const TICK_CALLBACK: u32 = 0;
const TICK_WALK_ALWAYS: u32 = 1;

/// Loaded probes, ready to follow processes.
pub struct ProbeSession {
    ebpf: Ebpf,
    targets: BpfHashMap<MapData, u32, u32>,
    io_stats: PerCpuArray<MapData, NqStats>,
    kfunc_stats: PerCpuArray<MapData, NqStats>,
    /// Which mechanism probes the kernel's UDP path (rows filled at snapshot).
    kernel_io: KernelIo,
    func_stats: PerCpuArray<MapData, NqStats>,
    health: PerCpuArray<MapData, NqHealth>,
    settings: Array<MapData, NqSettings>,
    /// What `settings` holds (written whole).
    settings_value: NqSettings,
    datagram_events: RingBuf<MapData>,
    io: bool,
    functions: Vec<ResolvedFunction>,
    /// uprobe links per tracked pid: (enter, exit if timed) per function.
    links: HashMap<u32, Vec<(UProbeLinkId, Option<UProbeLinkId>)>>,
    /// Tracked pids whose function probes are attached or (duty cycle) waiting for the next window.
    tracked: Vec<u32>,
    /// Whether function probes are attached now (false between duty-cycle windows).
    functions_attached: bool,
    /// Closing a uprobe link takes the kernel ~0.2 s (it removes the breakpoint at once, then
    /// waits for hits in flight); links are closed on this thread so the caller does not wait.
    /// Joined when the session drops, so everything is detached by then.
    closer: Option<(std::sync::mpsc::Sender<UProbeLink>, std::thread::JoinHandle<()>)>,
    /// Links handed to the closer and not yet closed.
    closing: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    nr_cpus: usize,
    profiling: bool,
    /// The sampling frequency per CPU, once profiling (HZ on the tick).
    profile_hz: u64,
    /// On the tick: the symbols that strip its own frames from kernel stacks.
    tick: Option<crate::tick::TickSymbols>,
    /// Why the profile is not on the clock it was asked for, or what it should say about it.
    profile_note: Option<String>,
    /// The random-interval sampler's events and re-arming thread (`profile`, `profile:~HZ`).
    random_clock: Option<crate::sampler::RandomClock>,
}

impl ProbeSession {
    /// Checks the machine, loads the programs, attaches the I/O tracepoints (if `io`) and
    /// prepares the function probes (attached per process by [`ProbeSession::track`]).
    pub fn open(io: bool, functions: Vec<ResolvedFunction>) -> Result<Self, EbpfError> {
        preflight::check()?;
        crate::catalog::refuse_timed_go(&functions)?;
        if functions.len() > MAX_FUNCS as usize {
            return Err(EbpfError::TooManyFunctions { found: functions.len(), max: MAX_FUNCS as usize });
        }
        let mut ebpf = Ebpf::load(crate::object::OBJECT).map_err(|e| EbpfError::Load(format!("{e:#}")))?;
        let nr_cpus = aya::util::nr_cpus().map_err(|(what, e)| EbpfError::Io { what: what.into(), source: e })?;
        let targets = take_map(&mut ebpf, "targets", BpfHashMap::try_from)?;
        let io_stats = take_map(&mut ebpf, "io_stats", PerCpuArray::try_from)?;
        let kfunc_stats = take_map(&mut ebpf, "kfunc_stats", PerCpuArray::try_from)?;
        let func_stats = take_map(&mut ebpf, "func_stats", PerCpuArray::try_from)?;
        let health = take_map(&mut ebpf, "health", PerCpuArray::try_from)?;
        let settings = take_map(&mut ebpf, "settings", Array::try_from)?;
        let datagram_events = take_map(&mut ebpf, "datagram_events", RingBuf::try_from)?;
        let mut func_config: Array<MapData, NqFuncConfig> = take_map(&mut ebpf, "func_config", Array::try_from)?;
        for (cookie, f) in functions.iter().enumerate() {
            let cfg = NqFuncConfig { bytes_arg: f.bytes_arg, count_only: u32::from(!f.timed) };
            func_config.set(cookie as u32, cfg, 0).map_err(|e| EbpfError::Map(format!("func_config: {e}")))?;
        }
        let mut session = Self {
            ebpf,
            targets,
            io_stats,
            kfunc_stats,
            kernel_io: KernelIo::default(),
            func_stats,
            health,
            settings,
            settings_value: NqSettings { datagram_events: 0, functions_paused: 0, window_start_ns: 0 },
            datagram_events,
            io,
            functions,
            links: HashMap::new(),
            tracked: Vec::new(),
            functions_attached: true,
            closer: None,
            closing: Default::default(),
            nr_cpus,
            profiling: false,
            profile_hz: 0,
            tick: None,
            profile_note: None,
            random_clock: None,
        };
        session.closer = spawn_closer(session.closing.clone());
        session.attach_tracepoint("nq_fork", "sched", "sched_process_fork")?;
        if io {
            for name in SYSCALLS {
                let tracepoint = crate::layout::tracepoint_name(name);
                session.attach_tracepoint(
                    &format!("nq_enter_{name}"),
                    "syscalls",
                    &format!("sys_enter_{tracepoint}"),
                )?;
                session.attach_tracepoint(&format!("nq_exit_{name}"), "syscalls", &format!("sys_exit_{tracepoint}"))?;
            }
            session.kernel_io = crate::kernel_io::attach(&mut session.ebpf);
        }
        if !session.functions.is_empty() {
            for name in [FUNC_ENTER, FUNC_EXIT] {
                session.uprobe(name)?.load().map_err(|e| crate::verifier::load_failed(name, e))?;
            }
        }
        Ok(session)
    }

    /// Turns per-message events on or off (off by default: figures are aggregated in the kernel;
    /// events cost a ring-buffer record per message). Read them with [`Self::drain_datagram_events`].
    pub fn set_datagram_events(&mut self, on: bool) -> Result<(), EbpfError> {
        self.settings_value.datagram_events = u32::from(on);
        self.write_settings()
    }

    /// Duty cycle: whether function probes count calls (they may stay attached either way).
    /// The switch is one map write, effective at once; attaching and detaching are not.
    pub fn set_functions_counting(&mut self, on: bool) -> Result<(), EbpfError> {
        self.settings_value.functions_paused = u32::from(!on);
        if on {
            self.settings_value.window_start_ns = monotonic_ns();
        }
        self.write_settings()
    }

    fn write_settings(&mut self) -> Result<(), EbpfError> {
        self.settings.set(0, self.settings_value, 0).map_err(|e| EbpfError::Map(format!("settings: {e}")))
    }

    /// Takes every per-message event the kernel has queued (oldest first per CPU). Events it
    /// had no room for are counted in `lost.events_dropped`.
    pub fn drain_datagram_events(&mut self) -> Vec<NqDatagramEvent> {
        let mut out = Vec::new();
        while let Some(item) = self.datagram_events.next() {
            if item.len() >= std::mem::size_of::<NqDatagramEvent>() {
                // SAFETY: the kernel wrote a struct nq_datagram_event (size asserted on both sides);
                // read_unaligned copes with any alignment of the ring-buffer record.
                out.push(unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<NqDatagramEvent>()) });
            }
        }
        out
    }

    /// Starts the sampling profile: on a CPU-clock perf event on every CPU, at a fixed rate
    /// (`profile`, `profile:HZ`) or at random intervals around a mean (`profile:~HZ`), or on the
    /// scheduler tick (`profile:tick`). Either way the program counts the user and kernel stacks
    /// of tracked processes only.
    pub fn start_profile(&mut self, clock: ProfileClock) -> Result<(), EbpfError> {
        match clock {
            ProfileClock::RandomCpuClock(hz) => self.start_random_cpu_clock(hz)?,
            ProfileClock::CpuClock(hz) => self.start_cpu_clock(hz)?,
            ProfileClock::Tick => {
                self.start_tick()?;
                self.profile_note = Some(
                    "profile:tick samples at the tick's fixed phase: work driven by timers can run in step with it \
                     and get all or none of its samples (docs/probes.md; `profile` samples at 251 Hz, no phase \
                     in common with the tick)"
                        .into(),
                );
            }
        }
        self.profiling = true;
        Ok(())
    }

    /// Why the profile is not on the clock it was asked for, if it is not.
    pub fn profile_note(&self) -> Option<&str> {
        self.profile_note.as_deref()
    }

    fn start_cpu_clock(&mut self, frequency_hz: u64) -> Result<(), EbpfError> {
        let cpus = aya::util::online_cpus().map_err(|(what, e)| EbpfError::Io { what: what.into(), source: e })?;
        let program: &mut PerfEvent = program(&mut self.ebpf, "nq_sample")?;
        program.load().map_err(|e| crate::verifier::load_failed("nq_sample", e))?;
        for cpu in cpus {
            program
                .attach(
                    PerfEventConfig::Software(SoftwareEvent::CpuClock),
                    PerfEventScope::AllProcessesOneCpu { cpu },
                    // A fixed period, in ns of CPU clock: the same rate as frequency mode, without the
                    // kernel re-tuning the period on every tick and sample (measured cheaper,
                    // docs/probe-overhead.md).
                    SamplePolicy::Period(1_000_000_000 / frequency_hz.max(1)),
                    false,
                )
                .map_err(|e| EbpfError::Attach {
                    what: format!("cpu-clock sampling on cpu {cpu}"),
                    reason: format!("{e:#}"),
                })?;
        }
        self.profile_hz = frequency_hz;
        Ok(())
    }

    /// `profile:~HZ`: the program on a CPU-clock event per CPU whose period and phase
    /// a thread of ours draws anew every 10-30 ms (crate::sampler).
    fn start_random_cpu_clock(&mut self, mean_hz: u64) -> Result<(), EbpfError> {
        let cpus = aya::util::online_cpus().map_err(|(what, e)| EbpfError::Io { what: what.into(), source: e })?;
        let program: &mut PerfEvent = program(&mut self.ebpf, "nq_sample")?;
        program.load().map_err(|e| crate::verifier::load_failed("nq_sample", e))?;
        let fd = {
            use std::os::fd::{AsFd, AsRawFd};
            program.fd().map_err(|e| EbpfError::Load(format!("nq_sample: {e}")))?.as_fd().as_raw_fd()
        };
        self.random_clock = Some(crate::sampler::RandomClock::start(fd, &cpus, mean_hz)?);
        self.profile_hz = mean_hz;
        Ok(())
    }

    /// The random-interval sampler's re-arms so far (`None` on another clock), and why it stopped
    /// re-arming if it did.
    pub fn random_clock_rearms(&self) -> Option<(u64, Option<String>)> {
        self.random_clock.as_ref().map(|c| (c.rearms(), c.failure()))
    }

    /// `profile:tick`: the program on the tick's hrtimer expiry, told which callback is the tick
    /// and whether ticks in user code must walk the kernel stack too.
    fn start_tick(&mut self) -> Result<(), EbpfError> {
        let symbols = crate::tick::TickSymbols::read()?;
        let hz = crate::tick::scheduler_hz()?;
        let mut tick_function: Array<&mut MapData, u64> = Array::try_from(
            self.ebpf.map_mut("tick_function").ok_or_else(|| EbpfError::Load("map tick_function missing".into()))?,
        )
        .map_err(|e| EbpfError::Map(format!("tick_function: {e}")))?;
        tick_function
            .set(TICK_CALLBACK, symbols.callback, 0)
            .map_err(|e| EbpfError::Map(format!("tick_function: {e}")))?;
        // A kernel uprobe's handlers run in the kernel on the way back to user mode, where a tick
        // looks like one that interrupted user code: with uprobes, every tick walks the kernel
        // stack, so the probes' own cost stays in the profile (bpf/nesquic.bpf.c).
        let walk_always = u64::from(!self.functions.is_empty());
        tick_function
            .set(TICK_WALK_ALWAYS, walk_always, 0)
            .map_err(|e| EbpfError::Map(format!("tick_function: {e}")))?;
        let btf = Btf::from_sys_fs().map_err(|e| EbpfError::Load(format!("profile:tick needs kernel BTF: {e}")))?;
        let program: &mut BtfTracePoint = program(&mut self.ebpf, "nq_tick_sample")?;
        program.load("hrtimer_expire_entry", &btf).map_err(|e| crate::verifier::load_failed("nq_tick_sample", e))?;
        let link = program.attach().map_err(|e| EbpfError::Attach {
            what: "the scheduler tick (tp_btf/hrtimer_expire_entry)".into(),
            reason: format!("{e:#}"),
        })?;
        // A low-resolution tick is no hrtimer: the program would never run, and the profile would
        // be silently empty. This thread keeps its CPU busy for a few ticks to see one.
        let wait = std::time::Duration::from_millis(20_000 / hz.max(1) + 20);
        let deadline = std::time::Instant::now() + wait;
        while self.read_sampler_cost().is_none_or(|c| c.runs == 0) {
            if std::time::Instant::now() > deadline {
                let _ = self::program::<BtfTracePoint>(&mut self.ebpf, "nq_tick_sample")?.detach(link);
                return Err(EbpfError::Load(format!(
                    "the tick callback at {:#x} did not run within {} ms of busy CPU (a low-resolution tick?)",
                    symbols.callback,
                    wait.as_millis()
                )));
            }
            std::hint::spin_loop();
        }
        self.profile_hz = hz;
        self.tick = Some(symbols);
        Ok(())
    }

    /// What the profile samples on.
    pub fn sample_clock(&self) -> crate::profile::SampleClock {
        if self.tick.is_some() {
            crate::profile::SampleClock::SchedulerTick
        } else if self.random_clock.is_some() {
            crate::profile::SampleClock::RandomCpuClock
        } else {
            crate::profile::SampleClock::CpuClock
        }
    }

    /// The sampling frequency per CPU (0 when not profiling).
    pub fn profile_hz(&self) -> u64 {
        self.profile_hz
    }

    /// The sampling program's cost since the last [`ProbeSession::reset_profile`], as the
    /// program timed itself (`sampler_cost` map); `None` when not profiling or unreadable.
    pub fn sampler_cost(&self) -> Option<SamplerCost> {
        if !self.profiling {
            return None;
        }
        self.read_sampler_cost()
    }

    /// The `sampler_cost` map summed over CPUs, whether or not profiling has started.
    fn read_sampler_cost(&self) -> Option<SamplerCost> {
        let map: PerCpuArray<&MapData, SamplerCounters> = PerCpuArray::try_from(self.ebpf.map("sampler_cost")?).ok()?;
        let cpus = map.get(&0, 0).ok()?;
        Some(crate::profile::sampler_cost(cpus.iter()))
    }

    /// How packet I/O is measured, if it is.
    pub fn io_mechanism(&self) -> Option<String> {
        self.io.then(|| "syscall tracepoints (syscalls:sys_enter_*/sys_exit_*)".to_string())
    }

    /// How functions are measured, if any are: counted (entry probe) and/or timed.
    pub fn function_mechanism(&self) -> Option<String> {
        if self.functions.is_empty() {
            return None;
        }
        let mechanism = match (self.functions.iter().any(|f| f.timed), self.functions.iter().any(|f| !f.timed)) {
            (true, true) => "uprobe (counted) / uprobe + uretprobe (timed)",
            (true, false) => "uprobe + uretprobe (timed)",
            _ => "uprobe (counted; add :time for durations)",
        };
        Some(mechanism.to_string())
    }

    /// Whether the sampling profile runs.
    pub fn is_profiling(&self) -> bool {
        self.profiling
    }

    /// Every sampled (process, role, user stack, kernel stack) with its count; stacks innermost
    /// frame first. Empty unless [`Self::start_profile`] ran.
    pub fn profile_samples(&mut self) -> Result<Vec<crate::profile::RawSample>, EbpfError> {
        if !self.profiling {
            return Ok(Vec::new());
        }
        let samples: BpfHashMap<&MapData, NqSampleKey, u64> = BpfHashMap::try_from(
            self.ebpf.map("samples").ok_or_else(|| EbpfError::Load("map samples missing".into()))?,
        )
        .map_err(|e| EbpfError::Map(format!("samples: {e}")))?;
        let stacks: StackTraceMap<&MapData> = StackTraceMap::try_from(
            self.ebpf.map("stacks").ok_or_else(|| EbpfError::Load("map stacks missing".into()))?,
        )
        .map_err(|e| EbpfError::Map(format!("stacks: {e}")))?;
        let frames = |id: i32| -> Vec<u64> {
            if id < 0 {
                return Vec::new();
            }
            stacks.get(&(id as u32), 0).map(|s| s.frames().iter().map(|f| f.ip).collect()).unwrap_or_default()
        };
        let mut out = Vec::new();
        let mut unstripped = 0u64;
        for entry in samples.iter() {
            let (key, count) = entry.map_err(|e| EbpfError::Map(format!("samples: {e}")))?;
            let mut sample = raw_sample(&key, count, frames);
            // On the tick, the kernel stack starts with the tick's own interrupt path.
            if let Some(tick) = &self.tick {
                match tick.strip(&sample.kernel) {
                    Some(rest) => sample.kernel = rest.to_vec(),
                    None if !sample.kernel.is_empty() => unstripped += count,
                    None => {}
                }
            }
            out.push(sample);
        }
        if unstripped > 0 {
            eprintln!(
                "nesquic: {unstripped} tick samples had no interrupt-entry frame in their kernel stack; kept whole \
                 (the tick's own frames then count as kernel_other)"
            );
        }
        Ok(out)
    }

    /// Forgets every sample and stack (between repetitions).
    pub fn reset_profile(&mut self) -> Result<(), EbpfError> {
        if !self.profiling {
            return Ok(());
        }
        let map =
            self.ebpf.map_mut("sampler_cost").ok_or_else(|| EbpfError::Load("map sampler_cost missing".into()))?;
        let mut cost: PerCpuArray<&mut MapData, SamplerCounters> =
            PerCpuArray::try_from(map).map_err(|e| EbpfError::Map(format!("sampler_cost: {e}")))?;
        let zero = PerCpuValues::try_from(vec![SamplerCounters::default(); self.nr_cpus])
            .map_err(|e| EbpfError::Map(format!("sampler_cost: {e}")))?;
        cost.set(0, zero, 0).map_err(|e| EbpfError::Map(format!("sampler_cost: {e}")))?;
        let map = self.ebpf.map_mut("samples").ok_or_else(|| EbpfError::Load("map samples missing".into()))?;
        let mut samples: BpfHashMap<&mut MapData, NqSampleKey, u64> =
            BpfHashMap::try_from(map).map_err(|e| EbpfError::Map(format!("samples: {e}")))?;
        let keys: Vec<NqSampleKey> = samples.keys().filter_map(Result::ok).collect();
        for k in keys {
            let _ = samples.remove(&k);
        }
        let map = self.ebpf.map_mut("stacks").ok_or_else(|| EbpfError::Load("map stacks missing".into()))?;
        let mut stacks: StackTraceMap<&mut MapData> =
            StackTraceMap::try_from(map).map_err(|e| EbpfError::Map(format!("stacks: {e}")))?;
        let ids: Vec<u32> = stacks.stack_ids().filter_map(Result::ok).collect();
        for id in ids {
            let _ = stacks.remove(&id);
        }
        Ok(())
    }

    /// The functions this session times, in cookie order.
    pub fn functions(&self) -> &[ResolvedFunction] {
        &self.functions
    }

    /// Starts measuring `pid` (and its threads and children) under `role`. Call it before the
    /// process runs (nesquic holds LUTs before `exec`) so nothing is missed.
    pub fn track(&mut self, pid: u32, role: u32) -> Result<(), EbpfError> {
        if role >= MAX_ROLES {
            return Err(EbpfError::Map(format!("role index {role} out of range")));
        }
        self.targets.insert(pid, role, 0).map_err(|e| EbpfError::Map(format!("targets: {e}")))?;
        if !self.tracked.contains(&pid) {
            self.tracked.push(pid);
        }
        if self.functions_attached {
            self.attach_functions(pid)?;
        }
        Ok(())
    }

    /// Attaches every function probe to `pid`.
    fn attach_functions(&mut self, pid: u32) -> Result<(), EbpfError> {
        let Some(scope_pid) = NonZeroU32::new(pid) else { return Ok(()) };
        let mut links = Vec::with_capacity(self.functions.len());
        let functions = self.functions.clone();
        for (cookie, f) in functions.iter().enumerate() {
            let mut attach = |program: &str| -> Result<UProbeLinkId, EbpfError> {
                let point = UProbeAttachPoint {
                    location: UProbeAttachLocation::AbsoluteOffset(f.file_offset),
                    cookie: Some(cookie as u64),
                };
                self.uprobe(program)?.attach(point, &f.object, UProbeScope::OneProcess(scope_pid)).map_err(|e| {
                    EbpfError::Attach {
                        what: format!("{program} on {} in {}", f.name, f.object.display()),
                        reason: format!("{e:#}"),
                    }
                })
            };
            let enter = attach(FUNC_ENTER)?;
            // Counted functions get no return probe: half the probe hits, no in-flight state.
            let exit = if f.timed { Some(attach(FUNC_EXIT)?) } else { None };
            links.push((enter, exit));
        }
        self.links.insert(pid, links);
        Ok(())
    }

    /// Detaches every function probe from `pid` (it stays tracked).
    fn detach_functions(&mut self, pid: u32) -> Result<(), EbpfError> {
        for (enter, exit) in self.links.remove(&pid).unwrap_or_default() {
            // Return probe first: a call in flight then simply goes unfinished instead of
            // finishing without its start.
            if let Some(exit) = exit {
                self.close_link(FUNC_EXIT, exit)?;
            }
            self.close_link(FUNC_ENTER, enter)?;
        }
        Ok(())
    }

    /// Takes a link from its program and closes it on the closer thread (or here, if that
    /// thread is gone).
    fn close_link(&mut self, program: &str, id: UProbeLinkId) -> Result<(), EbpfError> {
        let link = self.uprobe(program)?.take_link(id).map_err(|e| EbpfError::Map(format!("detach: {e}")))?;
        match &self.closer {
            Some((tx, _)) => {
                self.closing.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                if let Err(unsent) = tx.send(link) {
                    drop(unsent.0);
                    self.closing.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                }
            }
            None => drop(link),
        }
        Ok(())
    }

    /// Whether detached probes are still being closed (their breakpoints may still fire):
    /// re-attaching now would probe some calls twice.
    pub fn detaching(&self) -> bool {
        self.closing.load(std::sync::atomic::Ordering::Acquire) > 0
    }

    /// Duty cycling: attaches (`true`) or detaches (`false`) the function probes of every
    /// tracked process. I/O tracepoints and the profile are not affected. A process that has
    /// exited is skipped.
    pub fn set_functions_attached(&mut self, on: bool) -> Result<(), EbpfError> {
        if on == self.functions_attached {
            return Ok(());
        }
        self.functions_attached = on;
        for pid in self.tracked.clone() {
            let result = if on { self.attach_functions(pid) } else { self.detach_functions(pid) };
            if let Err(e) = result {
                if std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    return Err(e);
                }
                self.tracked.retain(|p| *p != pid);
            }
        }
        Ok(())
    }

    /// Whether function probes are attached now.
    pub fn functions_attached(&self) -> bool {
        self.functions_attached
    }

    /// Stops measuring `pid` and detaches its uprobes.
    pub fn untrack(&mut self, pid: u32) -> Result<(), EbpfError> {
        // Absent keys (never tracked, or already removed) are fine.
        let _ = self.targets.remove(&pid);
        self.tracked.retain(|p| *p != pid);
        self.detach_functions(pid)
    }

    /// Stops measuring every process, including children the kernel side added.
    pub fn untrack_all(&mut self) -> Result<(), EbpfError> {
        let mut pids: Vec<u32> = self.links.keys().copied().collect();
        pids.extend(self.tracked.iter().copied());
        for pid in pids {
            self.untrack(pid)?;
        }
        self.functions_attached = true;
        // The next process starts counting, outside any duty cycle.
        self.settings_value.functions_paused = 0;
        self.settings_value.window_start_ns = 0;
        self.write_settings()?;
        let keys: Vec<u32> = self.targets.keys().filter_map(Result::ok).collect();
        for k in keys {
            let _ = self.targets.remove(&k);
        }
        Ok(())
    }

    /// Zeroes every aggregate (between repetitions).
    pub fn reset(&mut self) -> Result<(), EbpfError> {
        let zero_stats = || PerCpuValues::try_from(vec![NqStats::default(); self.nr_cpus]);
        for i in 0..MAX_ROLES * SYSCALLS.len() as u32 {
            let v = zero_stats().map_err(|e| EbpfError::Map(e.to_string()))?;
            self.io_stats.set(i, v, 0).map_err(|e| EbpfError::Map(format!("io_stats: {e}")))?;
        }
        for role in 0..MAX_ROLES {
            for cookie in 0..self.functions.len() as u32 {
                let v = zero_stats().map_err(|e| EbpfError::Map(e.to_string()))?;
                self.func_stats
                    .set(role * MAX_FUNCS + cookie, v, 0)
                    .map_err(|e| EbpfError::Map(format!("func_stats: {e}")))?;
            }
        }
        for i in 0..MAX_ROLES * KFUNCS as u32 {
            let v = zero_stats().map_err(|e| EbpfError::Map(e.to_string()))?;
            self.kfunc_stats.set(i, v, 0).map_err(|e| EbpfError::Map(format!("kfunc_stats: {e}")))?;
        }
        let v = PerCpuValues::try_from(vec![NqHealth::default(); self.nr_cpus])
            .map_err(|e| EbpfError::Map(e.to_string()))?;
        self.health.set(0, v, 0).map_err(|e| EbpfError::Map(format!("health: {e}")))?;
        Ok(())
    }

    /// Reads and sums the aggregates of `roles` (tracked under their [`Role::index`]).
    pub fn snapshot(&self, roles: &[Role]) -> Result<Metrics, EbpfError> {
        let mut out = Vec::new();
        let mut kernel_io = KernelIo { rows: Vec::new(), ..self.kernel_io.clone() };
        for &name in roles {
            let role = name.index();
            if kernel_io.mechanism.is_some() {
                let mut stats = Vec::with_capacity(KFUNCS);
                for i in 0..KFUNCS as u32 {
                    stats.push(self.sum(&self.kfunc_stats, role * KFUNCS as u32 + i)?);
                }
                crate::kernel_io::add_role(&mut kernel_io, name, &stats);
            }
            let mut io = Vec::new();
            for i in 0..SYSCALLS.len() as u32 {
                io.push(self.sum(&self.io_stats, role * SYSCALLS.len() as u32 + i)?);
            }
            let mut functions = Vec::new();
            for (cookie, f) in self.functions.iter().enumerate() {
                let label = FunctionLabel {
                    category: f.category.clone(),
                    name: f.name.clone(),
                    object: f.object.display().to_string(),
                    timed: f.timed,
                    site: Some(f.site.kind),
                };
                functions.push((label, self.sum(&self.func_stats, role * MAX_FUNCS + cookie as u32)?));
            }
            out.push(crate::metrics::role_metrics(name, &io, &functions));
        }
        let mut lost = nesquic_model::HealthCounts::default();
        for cpu in self.health.get(&0, 0).map_err(|e| EbpfError::Map(format!("health: {e}")))?.iter() {
            lost.add(&(*cpu).into());
        }
        Ok(Metrics {
            io_mechanism: self.io_mechanism(),
            function_mechanism: self.function_mechanism(),
            kprobes_available: preflight::kprobes_available(),
            roles: out,
            lost,
            kernel_io,
        })
    }

    fn sum(&self, map: &PerCpuArray<MapData, NqStats>, index: u32) -> Result<NqStats, EbpfError> {
        let mut total = NqStats::default();
        for cpu in map.get(&index, 0).map_err(|e| EbpfError::Map(format!("read stats: {e}")))?.iter() {
            total.add(cpu);
        }
        Ok(total)
    }

    fn attach_tracepoint(&mut self, program: &str, category: &str, name: &str) -> Result<(), EbpfError> {
        let tp: &mut TracePoint = self::program(&mut self.ebpf, program)?;
        tp.load().map_err(|e| crate::verifier::load_failed(program, e))?;
        tp.attach(category, name).map_err(|e| EbpfError::Attach {
            what: format!("tracepoint {category}:{name}"),
            reason: format!("{e:#}"),
        })?;
        Ok(())
    }

    fn uprobe(&mut self, name: &str) -> Result<&mut UProbe, EbpfError> {
        program(&mut self.ebpf, name)
    }
}

/// The object's program `name` as its kind `T` (`PerfEvent`, `TracePoint`, ...).
fn program<'a, T>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut T, EbpfError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or_else(|| EbpfError::Load(format!("program {name} missing from the object")))?
        .try_into()
        .map_err(|e| EbpfError::Load(format!("{name}: {e}")))
}

/// CLOCK_MONOTONIC in ns, the clock of `bpf_ktime_get_ns`.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes into a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The thread that closes uprobe links (see `ProbeSession::closer`); `None` if it cannot start
/// (links are then closed inline).
fn spawn_closer(
    closing: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> Option<(std::sync::mpsc::Sender<UProbeLink>, std::thread::JoinHandle<()>)> {
    let (tx, rx) = std::sync::mpsc::channel::<UProbeLink>();
    let handle = std::thread::Builder::new()
        .name("uprobe-closer".into())
        .spawn(move || {
            for link in rx {
                drop(link);
                closing.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            }
        })
        .ok()?;
    Some((tx, handle))
}

impl Drop for ProbeSession {
    fn drop(&mut self) {
        // Stops the re-arming thread and closes the sampler's events (detaching the program).
        self.random_clock = None;
        if let Some((tx, handle)) = self.closer.take() {
            drop(tx);
            let _ = handle.join();
        }
    }
}

/// One sample as the kernel keyed it; `frames` gives a stack id's addresses, innermost first.
/// A user stack lost to a collision (id < 0) keeps its leaf: the program put the leaf's
/// instruction pointer in `sp_word` (bpf/nesquic.bpf.c, `user_word`), so the sample is named and
/// classified by the function it was in rather than counted as an empty stack.
fn raw_sample(key: &NqSampleKey, count: u64, frames: impl Fn(i32) -> Vec<u64>) -> crate::profile::RawSample {
    let user_lost = key.user_stack < 0;
    crate::profile::RawSample {
        tgid: key.tgid,
        role: key.role,
        user: if user_lost {
            [key.sp_word].into_iter().filter(|&ip| ip != 0).collect()
        } else {
            frames(key.user_stack)
        },
        kernel: frames(key.kernel_stack),
        sp_word: if user_lost { 0 } else { key.sp_word },
        stack_lost: key.user_stack == -libc::EEXIST || key.kernel_stack == -libc::EEXIST,
        count,
    }
}

fn take_map<T>(
    ebpf: &mut Ebpf,
    name: &str,
    convert: impl FnOnce(aya::maps::Map) -> Result<T, aya::maps::MapError>,
) -> Result<T, EbpfError> {
    let map = ebpf.take_map(name).ok_or_else(|| EbpfError::Load(format!("map {name} missing from the object")))?;
    convert(map).map_err(|e| EbpfError::Map(format!("{name}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{build, Classifier, ProcessMaps};

    /// A msquic function's name, so that a catalog rule names it (connection.recovery).
    #[no_mangle]
    #[inline(never)]
    extern "C" fn QuicLossDetectionProcessAckBlocks() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn a_sample_whose_user_stack_collided_keeps_its_leaf() {
        let catalog = crate::Catalog::builtin().expect("catalog");
        let classifier = Classifier::new(&catalog.components).expect("catalog rules compile");
        let pid = std::process::id();
        let maps = HashMap::from([(pid, ProcessMaps::read(pid).expect("own maps"))]);
        let leaf = QuicLossDetectionProcessAckBlocks as *const () as usize as u64;
        // Sampled in user mode: the user stack collided (-EEXIST), the kernel one is empty (-EFAULT).
        let key = |sp_word| NqSampleKey {
            tgid: pid,
            role: Role::Server.index(),
            user_stack: -libc::EEXIST,
            kernel_stack: -libc::EFAULT,
            sp_word,
        };
        let samples = [raw_sample(&key(leaf), 3, |_| Vec::new()), raw_sample(&key(0), 1, |_| Vec::new())];
        assert_eq!(samples[0].user, vec![leaf]);
        assert_eq!(samples[0].sp_word, 0, "the leaf is not also a frameless leaf's return address");
        let p = build(&samples, &maps, &[Role::Server], &classifier, 999);
        let server = &p.roles[0];
        assert_eq!((server.samples, server.lost_stacks), (4, 4));
        let recovery = server.split.iter().find(|s| s.name == "connection.recovery").expect("classified by its leaf");
        assert_eq!(recovery.samples, 3);
        // Only the sample whose leaf could not be read is left without a name.
        assert_eq!(server.unknown_leaf_samples(), 1);
        assert_eq!(
            server.top_functions.iter().find(|s| s.name == "QuicLossDetectionProcessAckBlocks").map(|s| s.samples),
            Some(3)
        );
    }
}
