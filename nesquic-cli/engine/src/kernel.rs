//! The seam between the engine and the kernel's probe session: what following processes asks of
//! it (attach to a pid, switch the function probes for duty cycles, read the totals, the profile
//! and the datagram events, leave it clean). [`ProbeSession`] is the real one (root, eBPF); tests
//! put a fake behind the trait to check collection (duty scaling, merging the agents') without
//! root, the idea of aya's `sys/fake.rs` one level up.

use std::collections::HashMap;

use nesquic_ebpf::layout::NqDatagramEvent;
use nesquic_ebpf::profile::user_mode::UserModeSampler;
use nesquic_ebpf::profile::{ProcessMaps, Profile, SampleClock, SamplerCost};
use nesquic_ebpf::{Metrics, ProbeSession, Role};

use crate::EngineError;

/// What the engine asks of a kernel probe session.
pub trait KernelProbes {
    /// Starts measuring `pid` (its threads and children) as `role`.
    fn track(&mut self, pid: u32, role: Role) -> Result<(), EngineError>;
    /// Whether the function probes count (a duty cycle's window opens and closes with it).
    fn set_functions_counting(&mut self, on: bool) -> Result<(), EngineError>;
    /// Attaches or detaches the function probes (between a duty cycle's windows).
    fn set_functions_attached(&mut self, on: bool) -> Result<(), EngineError>;
    /// Whether the last detach is still under way (attaching now would probe calls twice).
    fn detaching(&self) -> bool;
    /// Whether the sampling profiler runs.
    fn is_profiling(&self) -> bool;
    /// Whether it counts totals ([`KernelProbes::snapshot`]); the user-mode profile counts none.
    fn counts_totals(&self) -> bool {
        true
    }
    /// The per-datagram events since the last call.
    fn drain_datagram_events(&mut self) -> Vec<NqDatagramEvent>;
    /// The totals of `roles` so far.
    fn snapshot(&self, roles: &[Role]) -> Result<Metrics, EngineError>;
    /// The sampling profile of `roles`, symbolised with `maps`.
    fn profile(&mut self, maps: &HashMap<u32, ProcessMaps>, roles: &[Role]) -> Result<Profile, EngineError>;
    /// Stops following every process and zeroes the totals and the profile for the next ones.
    fn clear(&mut self) -> Result<(), EngineError>;
}

impl KernelProbes for ProbeSession {
    fn track(&mut self, pid: u32, role: Role) -> Result<(), EngineError> {
        Ok(ProbeSession::track(self, pid, role.index())?)
    }
    fn set_functions_counting(&mut self, on: bool) -> Result<(), EngineError> {
        Ok(ProbeSession::set_functions_counting(self, on)?)
    }
    fn set_functions_attached(&mut self, on: bool) -> Result<(), EngineError> {
        Ok(ProbeSession::set_functions_attached(self, on)?)
    }
    fn detaching(&self) -> bool {
        ProbeSession::detaching(self)
    }
    fn is_profiling(&self) -> bool {
        ProbeSession::is_profiling(self)
    }
    fn drain_datagram_events(&mut self) -> Vec<NqDatagramEvent> {
        ProbeSession::drain_datagram_events(self)
    }
    fn snapshot(&self, roles: &[Role]) -> Result<Metrics, EngineError> {
        Ok(ProbeSession::snapshot(self, roles)?)
    }
    fn profile(&mut self, maps: &HashMap<u32, ProcessMaps>, roles: &[Role]) -> Result<Profile, EngineError> {
        crate::plan::build_profile(self, maps, roles)
    }
    fn clear(&mut self) -> Result<(), EngineError> {
        self.untrack_all()?;
        self.reset()?;
        Ok(self.reset_profile()?)
    }
}

/// What follows the processes in the kernel: the eBPF session, or else the user-mode profile.
pub fn as_probes<'a>(
    session: Option<&'a mut ProbeSession>,
    user_profile: Option<&'a mut UserModeSampler>,
) -> Option<&'a mut dyn KernelProbes> {
    match (session, user_profile) {
        (Some(s), _) => Some(s),
        (None, Some(p)) => Some(p),
        (None, None) => None,
    }
}

/// The sampling profile without root: user-mode perf samples of the LUT's own processes, no
/// eBPF and no totals (`nesquic_ebpf::profile::user_mode`).
impl KernelProbes for UserModeSampler {
    fn track(&mut self, pid: u32, role: Role) -> Result<(), EngineError> {
        Ok(UserModeSampler::track(self, pid, role.index())?)
    }

    fn set_functions_counting(&mut self, _on: bool) -> Result<(), EngineError> {
        Ok(())
    }

    fn set_functions_attached(&mut self, _on: bool) -> Result<(), EngineError> {
        Ok(())
    }

    fn detaching(&self) -> bool {
        false
    }

    fn is_profiling(&self) -> bool {
        true
    }

    fn counts_totals(&self) -> bool {
        false
    }

    fn drain_datagram_events(&mut self) -> Vec<NqDatagramEvent> {
        Vec::new()
    }

    fn snapshot(&self, _roles: &[Role]) -> Result<Metrics, EngineError> {
        Err(EngineError::msg("the user-mode profile counts no totals"))
    }

    fn profile(&mut self, maps: &HashMap<u32, ProcessMaps>, roles: &[Role]) -> Result<Profile, EngineError> {
        let samples = self.samples();
        let mut profile = nesquic_ebpf::profile::build(&samples, maps, roles, &crate::plan::classifier()?, self.hz());
        profile.clock = SampleClock::UserModeCpuClock;
        let taken: u64 = samples.iter().map(|s| s.count).sum();
        profile.sampler =
            Some(SamplerCost { runs: taken, samples: taken, run_ns: self.drain_ns(), ..Default::default() });
        Ok(profile)
    }

    fn clear(&mut self) -> Result<(), EngineError> {
        UserModeSampler::clear(self);
        Ok(())
    }
}

/// The link's tc-bpf filters, from the eBPF loader (`nesquic-link` takes them through its
/// [`nesquic_link::FilterAttacher`] and does not depend on the loader).
pub struct TcFilters;

/// One attached filter.
struct TcFilter(nesquic_ebpf::impair::LossFilter);

impl nesquic_link::PacketFilter for TcFilter {
    fn counts(&self) -> Result<(u64, u64), nesquic_link::BoxError> {
        Ok(self.0.counts()?)
    }
    fn packet_counts(&self) -> Result<(u64, u64), nesquic_link::BoxError> {
        Ok(self.0.packet_counts()?)
    }
}

impl nesquic_link::FilterAttacher for TcFilters {
    fn loss(
        &self,
        netns: &std::path::Path,
        iface: &str,
        per_million: u32,
    ) -> Result<Box<dyn nesquic_link::PacketFilter>, nesquic_link::BoxError> {
        Ok(Box::new(TcFilter(nesquic_ebpf::impair::LossFilter::attach(netns, iface, per_million)?)))
    }

    fn counter(
        &self,
        netns: &std::path::Path,
        iface: &str,
        ingress: bool,
    ) -> Result<Box<dyn nesquic_link::PacketFilter>, nesquic_link::BoxError> {
        Ok(Box::new(TcFilter(nesquic_ebpf::impair::LossFilter::attach_counter(netns, iface, ingress)?)))
    }
}
