//! One measured repetition: the LUT processes run (`repetition`) while the probes track them,
//! periodic qlog snapshots are written, and afterwards the probes' totals, the agents' reports and
//! the sampling profile are collected and the probes left clean for the next repetition.

use std::time::{Duration, Instant};

use nesquic_ebpf::metrics::Direction;
use nesquic_protocol::report::{IoSettings, Transport};
use nesquic_protocol::role::{Role, LUT_ROLES};
use nesquic_record::events::{Event, IoConfigured, IoLayerCounters, MetricsUpdated};
use nesquic_record::figures::RepetitionFigures;
use nesquic_record::recorder::{process_cpu_s, Recorder};
use nesquic_record::workload::WorkloadFigures;

use crate::figures::repetition_figures;
use crate::kernel::KernelProbes;
use crate::lifecycle::{ProbeTracker, Probed, ProcessObserver};
use crate::repetition::{run_repetition, RepetitionSpec};
use crate::{Cause, EngineError};

/// Runs one repetition, with probes if a session is given (left clean for the next one) and
/// qlog snapshots if a recorder is given.
pub fn measure<'a>(
    spec: &RepetitionSpec<'_>,
    session: Option<&'a mut dyn KernelProbes>,
    user: Option<&'a mut crate::backend::UserProbes>,
    recorder: Option<&'a mut Recorder>,
    repetition: u32,
) -> Result<RepetitionFigures, EngineError> {
    let now = Instant::now();
    let mut observer = RunObserver {
        probes: ProbeTracker::new(session, user, spec.duty),
        recorder,
        started: now,
        last: now,
        repetition,
        io_settings: Vec::new(),
        io_layer_counters: Vec::new(),
        drops: crate::drops::RcvbufDrops::default(),
        threads: crate::threads::ThreadClock::default(),
    };
    let outcome = run_repetition(spec, &mut observer);
    let io_settings = std::mem::take(&mut observer.io_settings);
    let io_layer_counters = std::mem::take(&mut observer.io_layer_counters);
    let pids = observer.probes.pids.clone();
    let rcvbuf_drops = observer.drops.figures();
    let rcvbuf_drops_cost = Some(observer.drops.cost()).filter(|c| c.reads > 0);
    let threads = observer.threads.figures();
    let threads_cost = Some(observer.threads.cost()).filter(|c| c.reads > 0);
    if let (Some(recorder), Some(session)) = (observer.recorder.as_deref_mut(), observer.probes.session.as_deref_mut())
    {
        recorder.datagram_events(&model_events(session.drain_datagram_events()))?;
    }
    let here: Vec<Role> =
        LUT_ROLES.into_iter().filter(|r| spec.remote.is_none_or(|s| s.roles.target(*r).is_none())).collect();
    let Probed { metrics: mut probes, mut agents, mut profile } = observer.probes.collect(outcome.is_ok(), &here)?;
    if let Ok(o) = &outcome {
        for (_, totals) in &o.remote_totals {
            crate::remote::merge_totals(totals, &mut probes, &mut agents, &mut profile);
        }
    }
    if let Some(metrics) = probes.as_mut() {
        apply_socket_facts(metrics, &io_settings);
    }
    if let (Ok(o), Some(recorder)) = (&outcome, observer.recorder.as_deref_mut()) {
        for role in LUT_ROLES {
            let progress = (role == Role::Client).then_some(o.client_result.bytes);
            let elapsed_ms = now.elapsed().as_secs_f64() * 1e3;
            let event = MetricsUpdated::of(role, repetition, elapsed_ms, None, progress, probes.as_ref(), true);
            recorder.trace(role).event(&Event::MetricsUpdated(Box::new(event)))?;
        }
    }
    let outcome = outcome?;
    let mut figures = repetition_figures(&outcome);
    figures.workload = WorkloadFigures::of(&outcome.client_result, &spec.workload)?;
    figures.probes = probes;
    figures.agents = agents;
    figures.remote_calibration =
        outcome.remote_totals.iter().filter_map(|(role, totals)| Some((*role, totals.calibration.clone()?))).collect();
    figures.profile = profile;
    figures.io_settings = io_settings;
    figures.io_layer_counters = io_layer_counters;
    figures.pids = pids;
    figures.rcvbuf_drops = rcvbuf_drops;
    figures.rcvbuf_drops_cost = rcvbuf_drops_cost;
    figures.threads = threads;
    figures.threads_cost = threads_cost;
    if let Some(p) = figures.profile.as_mut() {
        // Cost per datagram: the probes' datagram count, else the LUT's own I/O counters.
        // A user-mode profile's shares are of the user-mode CPU time only.
        let (server_cpu, client_cpu) = if p.clock == nesquic_ebpf::profile::SampleClock::UserModeCpuClock {
            (figures.server.cpu_user_s, figures.client.cpu_user_s)
        } else {
            (figures.server.cpu_total_s, figures.client.cpu_total_s)
        };
        let (probes, counters) = (&figures.probes, &figures.io_layer_counters);
        let datagrams = |role: Role, direction: Direction| {
            let probed = probes.as_ref().and_then(|m| nesquic_ebpf::packet_cost::datagrams_probed(m, role, direction));
            probed.map(|n| (n, "io probes".to_string())).or_else(|| {
                let (_, c) = counters.iter().find(|(r, _)| *r == role)?;
                let n = if direction == Direction::Send { c.send.datagrams } else { c.recv.datagrams };
                Some((n, "the LUT's I/O counters".to_string()))
            })
        };
        let cpu = |role: Role| if role == Role::Client { client_cpu } else { server_cpu };
        nesquic_ebpf::packet_cost::attach(p, cpu, datagrams, figures.bytes);
    }
    Ok(figures)
}

/// What each LUT said of its socket, applied to what the probes counted there: a TCP socket's
/// calls moved a byte stream, not the datagrams the probes counted
/// ([`nesquic_ebpf::RoleMetrics::as_byte_stream`]), and a blocking socket's calls waited inside.
/// Applied to the qlog's snapshots as well as to the totals, so that the two agree.
fn apply_socket_facts(metrics: &mut nesquic_ebpf::Metrics, io_settings: &[(Role, IoSettings)]) {
    for role in &mut metrics.roles {
        let Some((_, io)) = io_settings.iter().find(|(r, _)| *r == role.role) else { continue };
        if io.transport == Transport::Tcp {
            role.as_byte_stream();
        }
        role.blocking_calls = io.blocking;
    }
}

/// Follows the LUT processes with the probes ([`ProbeTracker`]), and writes what they report
/// and periodic qlog snapshots while the transfer runs.
struct RunObserver<'a> {
    probes: ProbeTracker<'a>,
    recorder: Option<&'a mut Recorder>,
    started: Instant,
    last: Instant,
    repetition: u32,
    io_settings: Vec<(Role, IoSettings)>,
    io_layer_counters: Vec<(Role, nesquic_io::Counters)>,
    /// The LUT sockets' receive-buffer drops, sampled while the processes run.
    drops: crate::drops::RcvbufDrops,
    /// Each LUT thread's time on and waiting for a CPU over the transfer.
    threads: crate::threads::ThreadClock,
}

impl ProcessObserver for RunObserver<'_> {
    fn environment(&mut self, role: Role) -> Result<Vec<(String, std::ffi::OsString)>, Cause> {
        let mut env = self.probes.environment(role)?;
        env.extend(crate::process::faults::for_repetition(role, self.repetition));
        Ok(env)
    }

    fn spawned(&mut self, role: Role, pid: i32) -> Result<(), Cause> {
        self.drops.watch(role, pid);
        self.threads.watch(role, pid);
        self.probes.spawned(role, pid)
    }

    fn lut_event(&mut self, role: Role, event: &nesquic_lut_adapters::report::LutEvent) -> Result<(), Cause> {
        use nesquic_lut_adapters::report::LutEvent;
        match event {
            LutEvent::Io(settings) => {
                if let Some(recorder) = self.recorder.as_deref_mut() {
                    let data = IoConfigured { repetition: self.repetition, settings: settings.clone() };
                    recorder.trace(role).event(&Event::IoConfigured(data))?;
                }
                self.io_settings.push((role, settings.clone()));
            }
            // The transfer is over: the threads' window closes before the processes wind down.
            LutEvent::Done(_) => self.threads.close(),
            LutEvent::IoCounters(counters) => {
                if let Some(recorder) = self.recorder.as_deref_mut() {
                    let data =
                        IoLayerCounters { repetition: self.repetition, send: counters.send, recv: counters.recv };
                    recorder.trace(role).event(&Event::IoLayerCounters(data))?;
                }
                self.io_layer_counters.push((role, *counters));
            }
            _ => {}
        }
        Ok(())
    }

    fn next_tick(&self) -> Option<Duration> {
        // The drop counts are read until the processes exit: wake at least that often.
        let drops = crate::drops::SAMPLE_EVERY;
        Some(self.probes.next_tick().map_or(drops, |t| t.min(drops)))
    }

    fn tick(&mut self, progress_bytes: u64) -> Result<(), Cause> {
        self.probes.tick(progress_bytes)?;
        self.drops.tick();
        self.threads.tick();
        let Some(recorder) = self.recorder.as_deref_mut() else { return Ok(()) };
        if self.last.elapsed() < recorder.interval {
            return Ok(());
        }
        self.last = Instant::now();
        let kernel = match self.probes.session.as_deref_mut() {
            Some(s) if s.counts_totals() => {
                recorder.datagram_events(&model_events(s.drain_datagram_events()))?;
                Some(s.snapshot(&LUT_ROLES)?)
            }
            _ => None,
        };
        // The agents' counters are shared memory: read live, no syscall in the LUT.
        let mut metrics = match self.probes.user.as_deref() {
            Some(user) => Some(user.merge_into(kernel)),
            None => kernel,
        };
        if let Some(metrics) = metrics.as_mut() {
            apply_socket_facts(metrics, &self.io_settings);
        }
        for &(role, pid) in &self.probes.pids {
            let progress = (role == Role::Client).then_some(progress_bytes);
            let (elapsed_ms, cpu_s) = (self.started.elapsed().as_secs_f64() * 1e3, process_cpu_s(pid));
            let event = MetricsUpdated::of(role, self.repetition, elapsed_ms, cpu_s, progress, metrics.as_ref(), false);
            recorder.trace(role).event(&Event::MetricsUpdated(Box::new(event)))?;
        }
        Ok(())
    }
}

/// The kernel's per-message events as the recorder takes them (an event of an unknown role or
/// syscall index has no trace to go to).
fn model_events(events: Vec<nesquic_ebpf::layout::NqDatagramEvent>) -> Vec<nesquic_ebpf::DatagramEvent> {
    events.iter().filter_map(|e| e.to_model()).collect()
}
