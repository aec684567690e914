//! A `--probe` request resolved against a binary (`ProbePlan`), the eBPF session it opens, and
//! the sampling profile built from what the session sampled.

use std::path::Path;

use nesquic_ebpf::catalog::Unmatched;
use nesquic_ebpf::{Catalog, ObjectSymbols, ProbeRequest, ProbeSession, Resolution};

use crate::error::StepExt;
use crate::EngineError;

/// The catalog's component classifier.
pub fn classifier() -> Result<nesquic_ebpf::profile::Classifier, EngineError> {
    Ok(nesquic_ebpf::profile::Classifier::new(&Catalog::builtin()?.components)?)
}

/// The sampling profile of what `session` sampled since its last reset, symbolised with `maps`,
/// with the sampler's own cost (kernel BPF statistics).
pub fn build_profile(
    session: &mut ProbeSession,
    maps: &std::collections::HashMap<u32, nesquic_ebpf::profile::ProcessMaps>,
    roles: &[nesquic_protocol::Role],
) -> Result<nesquic_ebpf::profile::Profile, EngineError> {
    let samples = session.profile_samples()?;
    let mut profile = nesquic_ebpf::profile::build(&samples, maps, roles, &classifier()?, session.profile_hz());
    profile.sampler = session.sampler_cost();
    profile.clock = session.sample_clock();
    Ok(profile)
}

/// Starts `session`'s sampling profile on `clock`, saying on stderr when it fell back to another.
pub(crate) fn start_profile(
    session: &mut ProbeSession,
    clock: nesquic_ebpf::catalog::ProfileClock,
) -> Result<(), EngineError> {
    session.start_profile(clock).step("cannot start the sampling profile")?;
    if let Some(note) = session.profile_note() {
        eprintln!("nesquic: {note}");
    }
    Ok(())
}

/// A parsed and resolved `--probe` list.
pub struct ProbePlan {
    /// What was asked.
    pub request: ProbeRequest,
    /// What it resolved to.
    pub resolution: Resolution,
    /// Symbols of the objects searched (for suggestions).
    pub objects: Vec<ObjectSymbols>,
}

impl ProbePlan {
    /// Parses `text` and resolves its function probes against `binary` and its libraries.
    pub fn new(text: &str, binary: &Path) -> Result<Self, EngineError> {
        let catalog = Catalog::builtin()?;
        let request = ProbeRequest::parse(text, &catalog)?;
        let mut objects = Vec::new();
        if request.wants_functions() {
            for (i, path) in nesquic_ebpf::objects::objects_of(binary)?.into_iter().enumerate() {
                match ObjectSymbols::load(&path) {
                    Ok(o) => objects.push(o),
                    // The executable itself must be probe-able; a library we cannot read is skipped.
                    Err(e) if i == 0 => return Err(e.into()),
                    Err(e) => eprintln!("nesquic: skipping {}: {e}", path.display()),
                }
            }
        }
        let resolution = request.resolve(&catalog, &objects);
        Ok(Self { request, resolution, objects })
    }

    /// One plan over two executables (a pair's sides): their functions (each once) and objects.
    pub fn merge(mut self, other: ProbePlan) -> Self {
        for f in other.resolution.functions {
            let known = self.resolution.functions.iter().any(|g| g.object == f.object && g.address == f.address);
            if !known {
                self.resolution.functions.push(f);
            }
        }
        self.resolution.unmatched.extend(other.resolution.unmatched);
        for o in other.objects {
            if !self.objects.iter().any(|p| p.path == o.path) {
                self.objects.push(o);
            }
        }
        self
    }

    /// Fails when a requested category or glob found no function, naming the nearest symbols.
    pub fn require_matches(&self) -> Result<(), EngineError> {
        let mut wanted: Vec<String> = self.request.categories.iter().cloned().collect();
        wanted.extend(self.request.custom.iter().map(nesquic_ebpf::ProbeSpec::category));
        for category in wanted {
            if self.resolution.functions.iter().any(|f| f.category == category) {
                continue;
            }
            let tried: Vec<&Unmatched> = self.resolution.unmatched.iter().filter(|u| u.category == category).collect();
            let patterns: Vec<&str> = tried.iter().flat_map(|u| u.patterns.iter().map(String::as_str)).collect();
            let mut near = Vec::new();
            for p in &patterns {
                for f in nesquic_ebpf::symbols::nearest(p, &self.objects, 3) {
                    if !near.contains(&f.demangled) {
                        near.push(f.demangled.clone());
                    }
                }
            }
            near.truncate(6);
            let searched: Vec<String> = self.objects.iter().map(|o| o.path.display().to_string()).collect();
            let mut msg = format!(
                "probe {category} matched no function in {} (patterns tried: {})",
                searched.join(", "),
                patterns.join(", ")
            );
            if near.is_empty() {
                msg.push_str("; no similar symbol either");
            } else {
                msg.push_str(&format!("; nearest symbols:\n  {}", near.join("\n  ")));
            }
            return Err(EngineError::msg(msg));
        }
        // Before anything starts: timing Go functions would crash the LUT (return probes).
        nesquic_ebpf::catalog::refuse_timed_go(&self.resolution.functions)?;
        Ok(())
    }

    /// Loads and attaches (root).
    pub fn open_session(&self) -> Result<ProbeSession, EngineError> {
        self.require_matches()?;
        let mut session = ProbeSession::open(self.request.io, self.resolution.functions.clone())
            .step("cannot start the eBPF probes")?;
        if self.request.profile {
            start_profile(&mut session, self.request.profile_clock)?;
        }
        Ok(session)
    }
}
