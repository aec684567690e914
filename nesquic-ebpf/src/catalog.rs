//! What to probe: the catalog (`probes.toml`, data not code), custom `uprobe:` globs, and their
//! resolution against a LUT's object files into concrete functions.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::symbols::{FunctionSymbol, ObjectSymbols};
use crate::EbpfError;

/// The catalog shipped with Nesquic.
pub const BUILTIN_CATALOG: &str = include_str!("../probes.toml");

/// Most functions one custom glob may attach to (each costs a probe hit per call).
pub const MAX_MATCHES_PER_GLOB: usize = 64;

/// One catalog entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogEntry {
    /// `crypto.seal`, `crypto.open`, `crypto.header_protection`, `crypto.handshake`.
    pub category: String,
    /// Crypto library or stack the names belong to.
    pub backend: String,
    /// Where the names were checked.
    pub seen_in: String,
    /// Argument (1-8, x86-64 SysV order; 7-8 are on the stack) holding the call's byte count.
    #[serde(default)]
    pub bytes_arg: u32,
    /// Match names with their version prefix removed too.
    #[serde(default)]
    pub versioned: bool,
    /// Use this entry only if no earlier entry matched in this category.
    #[serde(default)]
    pub only_if_unmatched: Option<String>,
    /// Pattern groups, tried in order; the first group that matches anything wins.
    pub alternatives: Vec<Vec<String>>,
}

/// The parsed catalog.
#[derive(Debug, Clone, Deserialize)]
pub struct Catalog {
    /// Entries in file order.
    #[serde(rename = "probe")]
    pub entries: Vec<CatalogEntry>,
    /// Component rules for the sampling profile, in the order they are tried.
    #[serde(rename = "component", default)]
    pub components: Vec<ComponentRule>,
}

/// A sampling-profile component rule. A sample's stack is walked from the leaf (kernel frames,
/// then user frames) toward the root; the first frame one of whose patterns matches (`user`:
/// demangled user-space names, `kernel`: kernel names) names the component; among the rules that
/// match that frame, the first in catalog order wins. `weak` rules (copies, the allocator) only
/// hold when no other rule names a frame further up: a `memcpy` under a seal is crypto.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentRule {
    /// `crypto.aead`, `packet_io.kernel`, ...: the part before the first dot is the top-level
    /// component the terminal table sums to.
    pub name: String,
    /// Which stacks the rule is written for (LUT names); empty: every LUT and the kernel.
    #[serde(default)]
    pub luts: Vec<String>,
    /// Holds only when no non-weak rule names a frame nearer the root.
    #[serde(default)]
    pub weak: bool,
    /// Globs on demangled user-space function names.
    #[serde(default)]
    pub user: Vec<String>,
    /// Globs on kernel function names.
    #[serde(default)]
    pub kernel: Vec<String>,
}

impl Catalog {
    /// The built-in catalog.
    pub fn builtin() -> Result<Self, EbpfError> {
        Self::parse(BUILTIN_CATALOG)
    }

    /// Parses catalog text.
    pub fn parse(text: &str) -> Result<Self, EbpfError> {
        let catalog: Catalog = toml::from_str(text).map_err(|e| EbpfError::Catalog(e.to_string()))?;
        for e in &catalog.entries {
            if e.bytes_arg > 8 {
                return Err(EbpfError::Catalog(format!("{} / {}: bytes_arg must be 1-8", e.category, e.backend)));
            }
            for group in &e.alternatives {
                for p in group {
                    Glob::new(p).map_err(|err| EbpfError::Catalog(format!("pattern {p:?}: {err}")))?;
                }
            }
        }
        Ok(catalog)
    }

    /// Every category named in the catalog.
    pub fn categories(&self) -> BTreeSet<String> {
        self.entries.iter().map(|e| e.category.clone()).collect()
    }
}

/// A concrete function to probe.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedFunction {
    /// Category (`crypto.seal`) or `uprobe:<glob>`.
    pub category: String,
    /// Which catalog backend (or "custom").
    pub backend: String,
    /// The object file holding it.
    pub object: PathBuf,
    /// Demangled name (no hash).
    pub name: String,
    /// Mangled name.
    pub raw_name: String,
    /// Virtual address.
    pub address: u64,
    /// File offset of the probe site (the function's start, or just after its `endbr64`).
    pub file_offset: u64,
    /// Where in the function the probe sits and how the kernel executes the instruction there.
    pub site: crate::sites::ProbeSite,
    /// Argument holding the byte count (0: none).
    pub bytes_arg: u32,
    /// Timed with an entry and a return probe; otherwise only counted (entry probe only).
    pub timed: bool,
    /// Symbol size in bytes (0: unknown); the user-space backend needs it to check a site.
    pub size: u64,
}

/// A pattern set that matched nothing.
#[derive(Debug, Clone, Serialize)]
pub struct Unmatched {
    /// Category.
    pub category: String,
    /// Backend.
    pub backend: String,
    /// The patterns tried.
    pub patterns: Vec<String>,
}

/// What a probe request resolved to.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Resolution {
    /// Functions to attach to.
    pub functions: Vec<ResolvedFunction>,
    /// Entries that matched nothing (normal for backends the LUT does not use).
    pub unmatched: Vec<Unmatched>,
}

/// One seam for everything that turns into function probes: catalog categories and custom globs.
pub trait ProbeSpec {
    /// The category the results are reported under.
    fn category(&self) -> String;
    /// Resolves against the objects; `taken` holds (object, address) pairs already attached in
    /// this category, so a function is never timed twice.
    fn resolve(&self, objects: &[ObjectSymbols], taken: &mut HashSet<(PathBuf, u64)>, out: &mut Resolution);
}

/// A catalog category (`crypto.seal`) with all its entries.
pub struct CategorySpec<'a> {
    /// Category name.
    pub category: String,
    /// The catalog.
    pub catalog: &'a Catalog,
}

impl ProbeSpec for CategorySpec<'_> {
    fn category(&self) -> String {
        self.category.clone()
    }

    fn resolve(&self, objects: &[ObjectSymbols], taken: &mut HashSet<(PathBuf, u64)>, out: &mut Resolution) {
        let mut category_matched = false;
        for entry in self.catalog.entries.iter().filter(|e| e.category == self.category) {
            if entry.only_if_unmatched.is_some() && category_matched {
                continue;
            }
            let mut matched_group = false;
            for group in &entry.alternatives {
                let matchers: Vec<GlobMatcher> =
                    group.iter().filter_map(|p| Glob::new(p).ok()).map(|g| g.compile_matcher()).collect();
                let hits = find(objects, |f| {
                    matchers.iter().any(|m| m.is_match(&f.demangled) || (entry.versioned && m.is_match(&f.normalized)))
                });
                if hits.is_empty() {
                    continue;
                }
                for (object, f) in hits {
                    if taken.insert((object.to_path_buf(), f.address)) {
                        out.functions.push(resolved(&self.category, &entry.backend, object, f, entry.bytes_arg));
                    }
                }
                matched_group = true;
                break;
            }
            if matched_group {
                category_matched = true;
            } else {
                out.unmatched.push(Unmatched {
                    category: self.category.clone(),
                    backend: entry.backend.clone(),
                    patterns: entry.alternatives.iter().flatten().cloned().collect(),
                });
            }
        }
    }
}

/// `uprobe:GLOB` or `uprobe:BINARY:GLOB`: time any function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomSpec {
    /// Restrict to this object (path, or file name of one of the LUT's objects).
    pub binary: Option<PathBuf>,
    /// Glob on demangled names (also tried on mangled and version-stripped names).
    pub glob: String,
}

impl CustomSpec {
    /// Parses the part after `uprobe:`. A single `:` (not Rust's `::`) separates a binary.
    pub fn parse(rest: &str) -> Result<Self, EbpfError> {
        let split = rest
            .char_indices()
            .find(|&(i, c)| c == ':' && !rest[..i].ends_with(':') && !rest[i + 1..].starts_with(':') && i > 0);
        let (binary, glob) = match split {
            Some((i, _)) => (Some(PathBuf::from(&rest[..i])), &rest[i + 1..]),
            None => (None, rest),
        };
        if glob.is_empty() {
            return Err(EbpfError::BadProbe(format!("uprobe:{rest}: the function glob is empty")));
        }
        Glob::new(glob).map_err(|e| EbpfError::BadProbe(format!("uprobe:{rest}: {e}")))?;
        Ok(Self { binary, glob: glob.to_string() })
    }

    fn applies_to(&self, object: &Path) -> bool {
        match &self.binary {
            None => true,
            Some(b) if b.components().count() > 1 => object == b,
            Some(b) => object.file_name() == Some(b.as_os_str()),
        }
    }
}

impl ProbeSpec for CustomSpec {
    fn category(&self) -> String {
        match &self.binary {
            Some(b) => format!("uprobe:{}:{}", b.display(), self.glob),
            None => format!("uprobe:{}", self.glob),
        }
    }

    fn resolve(&self, objects: &[ObjectSymbols], taken: &mut HashSet<(PathBuf, u64)>, out: &mut Resolution) {
        let Ok(glob) = Glob::new(&self.glob) else { return };
        let m = glob.compile_matcher();
        let category = self.category();
        let scoped: Vec<ObjectSymbols> = objects.iter().filter(|o| self.applies_to(&o.path)).cloned().collect();
        let hits = find(&scoped, |f| m.is_match(&f.demangled) || m.is_match(&f.normalized) || m.is_match(&f.raw));
        if hits.is_empty() {
            out.unmatched.push(Unmatched { category, backend: "custom".into(), patterns: vec![self.glob.clone()] });
            return;
        }
        for (object, f) in hits {
            if taken.insert((object.to_path_buf(), f.address)) {
                out.functions.push(resolved(&category, "custom", object, f, 0));
            }
        }
    }
}

fn find(objects: &[ObjectSymbols], pred: impl Fn(&FunctionSymbol) -> bool) -> Vec<(&Path, &FunctionSymbol)> {
    objects.iter().flat_map(|o| o.functions.iter().filter(|f| pred(f)).map(move |f| (o.path.as_path(), f))).collect()
}

fn resolved(category: &str, backend: &str, object: &Path, f: &FunctionSymbol, bytes_arg: u32) -> ResolvedFunction {
    let site = crate::sites::choose(&f.prologue);
    ResolvedFunction {
        category: category.to_string(),
        backend: backend.to_string(),
        object: object.to_path_buf(),
        name: f.demangled.clone(),
        raw_name: f.raw.clone(),
        address: f.address,
        file_offset: f.file_offset + site.skip,
        site,
        bytes_arg,
        // Decided by the request after resolution (see ProbeRequest::resolve).
        timed: true,
        size: f.size,
    }
}

/// What the user asked for with `--probe`: `io`, `crypto`, `crypto.seal`, `uprobe:GLOB`, ...
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRequest {
    /// Packet I/O syscalls.
    pub io: bool,
    /// Catalog categories.
    pub categories: BTreeSet<String>,
    /// Categories asked for with `:time` (entry + return probes); the others are only counted.
    pub timed: BTreeSet<String>,
    /// Custom globs.
    pub custom: Vec<CustomSpec>,
    /// Sampling profile by component.
    pub profile: bool,
    /// What it samples on (`profile:HZ`, `profile:~HZ`, `profile:tick`; default a fixed
    /// [`DEFAULT_PROFILE_HZ`] Hz).
    pub profile_clock: ProfileClock,
}

/// What the sampling profile samples on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileClock {
    /// `profile:~HZ`: a CPU-clock perf event per CPU at a mean of this many Hz,
    /// re-armed every 10-30 ms with a new period and phase drawn at random (crate::sampler), so
    /// that no periodic work runs in step with it.
    RandomCpuClock(u64),
    /// A CPU-clock perf event per CPU at this many Hz, a fixed period (`profile:HZ`; `profile` at
    /// [`DEFAULT_PROFILE_HZ`]), as `perf record -F HZ`.
    CpuClock(u64),
    /// The scheduler tick (`profile:tick`): HZ samples a second per busy CPU, on an interrupt
    /// the CPU takes anyway (crate::tick), at a fixed phase: it aliases with work driven by
    /// timers (a function run in the 2 ms before each tick gets every sample).
    Tick,
}

/// Sampling frequency per CPU of `profile`: a fixed period of its own (10^9/251 ns of CPU clock), a
/// prime rate near the tick's (HZ=250 on Debian's kernels), so as many samples as the tick took at
/// a timer interrupt of its own (~17 us a sample here, bench/sampler-floor.md), ~0.4% of a busy CPU.
/// 251 Hz shares no phase with work on a millisecond grid: a period of 3.984 ms steps 16 us
/// through a 4 ms window per sample, sweeping it once a second. It aliases only with work at 251 Hz
/// or a simple fraction of it; `profile:~HZ` has no period at all (random intervals) but measured
/// a residual bias against the 2 ms after each tick (bench/sampler-phase.md).
/// Before, `profile` sampled on the tick, whose fixed phase put a function that runs in the 2 ms
/// before each tick at ~100% of the samples and one that runs in the 2 ms after it at 0% (issue 53).
pub const DEFAULT_PROFILE_HZ: u64 = 251;

impl Default for ProbeRequest {
    fn default() -> Self {
        Self {
            io: false,
            categories: BTreeSet::new(),
            timed: BTreeSet::new(),
            custom: Vec::new(),
            profile: false,
            profile_clock: ProfileClock::CpuClock(DEFAULT_PROFILE_HZ),
        }
    }
}

impl ProbeRequest {
    /// Parses a comma-separated list. `crypto` means every `crypto.*` category. Catalog
    /// categories are counted (entry probe only, cheap) unless suffixed `:time` (entry + return
    /// probes: durations too); `uprobe:` globs are always timed.
    pub fn parse(text: &str, catalog: &Catalog) -> Result<Self, EbpfError> {
        let known = catalog.categories();
        let mut req = ProbeRequest::default();
        for item in split_items(text) {
            let item = item.trim();
            if let Some(rest) = item.strip_prefix("uprobe:") {
                req.custom.push(CustomSpec::parse(rest)?);
                continue;
            }
            if let Some(clock) = item.strip_prefix("profile:") {
                req.profile = true;
                let rate = |hz: &str| {
                    hz.parse().ok().filter(|hz| (1..=10_000).contains(hz)).ok_or_else(|| {
                        EbpfError::BadProbe(format!(
                            "{item:?}: profile:HZ takes a sampling frequency of 1-10000 per CPU (a fixed period), \
                             profile:~HZ the same as a mean (random intervals), or profile:tick (the \
                             scheduler tick: no interrupt of its own, but in step with timer-driven work)"
                        ))
                    })
                };
                req.profile_clock = match clock {
                    "tick" => ProfileClock::Tick,
                    _ => match clock.strip_prefix('~') {
                        Some(hz) => ProfileClock::RandomCpuClock(rate(hz)?),
                        None => ProfileClock::CpuClock(rate(clock)?),
                    },
                };
                continue;
            }
            let (name, timed) = match item.rsplit_once(':') {
                Some((name, "time")) => (name, true),
                Some((name, "count")) => (name, false),
                _ => (item, false),
            };
            let chosen: Vec<String> = match name {
                "" => continue,
                "io" => {
                    req.io = true;
                    Vec::new()
                }
                "profile" => {
                    req.profile = true;
                    Vec::new()
                }
                "all" => {
                    req.io = true;
                    known.iter().cloned().collect()
                }
                "crypto" => known.iter().filter(|c| c.starts_with("crypto.")).cloned().collect(),
                _ if known.contains(name) => vec![name.to_string()],
                _ => {
                    let list: Vec<&str> = known.iter().map(String::as_str).collect();
                    return Err(EbpfError::BadProbe(format!(
                        "unknown probe {item:?}; use io, profile, crypto, all, {} (append :time to time them, not \
                         only count), or uprobe:GLOB / uprobe:BINARY:GLOB",
                        list.join(", ")
                    )));
                }
            };
            if timed {
                req.timed.extend(chosen.iter().cloned());
            }
            req.categories.extend(chosen);
        }
        Ok(req)
    }

    /// No probe at all.
    pub fn is_empty(&self) -> bool {
        !self.io && !self.profile && self.categories.is_empty() && self.custom.is_empty()
    }

    /// Needs uprobes.
    pub fn wants_functions(&self) -> bool {
        !self.categories.is_empty() || !self.custom.is_empty()
    }

    /// Resolves every function probe against `objects`.
    pub fn resolve(&self, catalog: &Catalog, objects: &[ObjectSymbols]) -> Resolution {
        let mut out = Resolution::default();
        let mut specs: Vec<Box<dyn ProbeSpec + '_>> = Vec::new();
        for c in &self.categories {
            specs.push(Box::new(CategorySpec { category: c.clone(), catalog }));
        }
        for c in &self.custom {
            specs.push(Box::new(c.clone()));
        }
        for spec in specs {
            let mut taken = HashSet::new();
            spec.resolve(objects, &mut taken, &mut out);
        }
        for f in &mut out.functions {
            f.timed = f.category.starts_with("uprobe:") || self.timed.contains(&f.category);
        }
        out
    }
}

/// Refuses timing (entry + return probes) of functions in Go programs: Go moves goroutine stacks,
/// and a uretprobe's return address on a moved stack crashes the program. Counting (entry probe
/// only) is fine. Each object is inspected once.
pub fn refuse_timed_go(functions: &[ResolvedFunction]) -> Result<(), EbpfError> {
    let mut go_objects: std::collections::HashMap<&Path, bool> = std::collections::HashMap::new();
    for f in functions.iter().filter(|f| f.timed) {
        if *go_objects.entry(&f.object).or_insert_with(|| crate::objects::is_go(&f.object)) {
            let how = if f.category.starts_with("uprobe:") {
                "uprobe: globs always time their functions; count them through a catalog category instead"
            } else {
                "drop `:time` to count calls instead"
            };
            return Err(EbpfError::BadProbe(format!(
                "{} ({}) cannot be timed: {} is a Go program, and timing needs a return probe (uretprobe), which \
                 crashes Go programs when the runtime moves a goroutine's stack; Go functions are only counted ({how})",
                f.category,
                f.name,
                f.object.display()
            )));
        }
    }
    Ok(())
}

/// Splits on commas that are outside `{...}` (globs may hold alternations like `{seal,open}`).
fn split_items(text: &str) -> Vec<&str> {
    let (mut depth, mut start, mut items) = (0i32, 0, Vec::new());
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(name: &str, address: u64) -> FunctionSymbol {
        FunctionSymbol {
            raw: name.into(),
            demangled: name.into(),
            normalized: crate::symbols::strip_version_prefix(name).into(),
            address,
            size: 16,
            file_offset: address,
            prologue: [0x55, 0, 0, 0, 0, 0, 0, 0],
        }
    }

    fn objects(names: &[&str]) -> Vec<ObjectSymbols> {
        let functions = names.iter().enumerate().map(|(i, n)| sym(n, 0x1000 + 16 * i as u64)).collect();
        vec![ObjectSymbols { path: "/bin/lut".into(), functions }]
    }

    #[test]
    fn builtin_catalog_parses_and_covers_the_crypto_categories() {
        let c = Catalog::builtin().expect("catalog");
        for cat in ["crypto.seal", "crypto.open", "crypto.header_protection", "crypto.handshake"] {
            assert!(c.categories().contains(cat), "{cat}");
        }
    }

    #[test]
    fn request_parsing() {
        let c = Catalog::builtin().expect("catalog");
        let r = ProbeRequest::parse("io,crypto.seal,uprobe:my::fn_{a,b}*,uprobe:/opt/lib.so:EVP_*", &c).expect("parse");
        assert!(r.io);
        assert_eq!(r.categories.iter().collect::<Vec<_>>(), ["crypto.seal"]);
        assert_eq!(r.custom[0], CustomSpec { binary: None, glob: "my::fn_{a,b}*".into() });
        assert_eq!(r.custom[1], CustomSpec { binary: Some("/opt/lib.so".into()), glob: "EVP_*".into() });
        assert_eq!(ProbeRequest::parse("crypto", &c).expect("parse").categories.len(), 4);
        let t = ProbeRequest::parse("crypto,crypto.seal:time", &c).expect("parse");
        assert_eq!(
            (t.categories.len(), t.timed.iter().map(String::as_str).collect::<Vec<_>>()),
            (4, vec!["crypto.seal"])
        );
        assert_eq!(ProbeRequest::parse("crypto:time", &c).expect("parse").timed.len(), 4);
        let err = ProbeRequest::parse("cryptoo", &c).expect_err("unknown").to_string();
        assert!(err.contains("cryptoo") && err.contains("crypto.seal"), "{err}");
        let p = ProbeRequest::parse("profile", &c).expect("parse");
        assert_eq!((p.profile, p.profile_clock), (true, ProfileClock::CpuClock(DEFAULT_PROFILE_HZ)));
        assert_eq!(
            ProbeRequest::parse("profile:~997", &c).expect("parse").profile_clock,
            ProfileClock::RandomCpuClock(997)
        );
        assert_eq!(
            ProbeRequest::parse("io,profile:499", &c).expect("parse").profile_clock,
            ProfileClock::CpuClock(499)
        );
        assert_eq!(ProbeRequest::parse("profile:tick,io", &c).expect("parse").profile_clock, ProfileClock::Tick);
        for bad in ["profile:0", "profile:fast", "profile:20000", "profile:~0", "profile:~", "profile:~tick"] {
            let err = ProbeRequest::parse(bad, &c).expect_err(bad).to_string();
            assert!(err.contains("1-10000"), "{err}");
        }
    }

    #[test]
    fn first_matching_alternative_wins_and_leaves_are_a_fallback() {
        let c = Catalog::builtin().expect("catalog");
        let api = "<rustls::crypto::ring::quic::PacketKey as rustls::quic::PacketKey>::encrypt_in_place";
        let objs = objects(&[api, "ring::aead::algorithm::aes_gcm_seal"]);
        let r = ProbeRequest::parse("crypto.seal", &c).expect("parse").resolve(&c, &objs);
        assert_eq!(r.functions.len(), 1, "{:?}", r.functions);
        assert_eq!(r.functions[0].name, api);
        assert_eq!(r.functions[0].bytes_arg, 7);
        // Inlined API-level function: the leaf is used instead.
        let objs = objects(&["ring::aead::algorithm::aes_gcm_seal"]);
        let r = ProbeRequest::parse("crypto.seal", &c).expect("parse").resolve(&c, &objs);
        assert_eq!(
            r.functions.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
            ["ring::aead::algorithm::aes_gcm_seal"]
        );
    }

    #[test]
    fn aws_lc_version_prefix_is_ignored_and_not_double_counted() {
        let c = Catalog::builtin().expect("catalog");
        let objs = objects(&["aws_lc_0_47_0_EVP_AEAD_CTX_seal_scatter", "aws_lc_9_1_2_EVP_AEAD_CTX_open"]);
        let r = ProbeRequest::parse("crypto.seal,crypto.open", &c).expect("parse").resolve(&c, &objs);
        let names: Vec<_> = r.functions.iter().map(|f| (f.category.as_str(), f.backend.as_str())).collect();
        assert_eq!(names, [("crypto.open", "aws-lc"), ("crypto.seal", "aws-lc")]);
    }

    #[test]
    fn custom_globs_scope_to_a_binary() {
        let objs = objects(&["nesquic_workload_tick", "nesquic_workload_sleep_1ms", "other"]);
        let c = Catalog::builtin().expect("catalog");
        let r = ProbeRequest::parse("uprobe:lut:nesquic_workload_*", &c).expect("parse").resolve(&c, &objs);
        assert_eq!(r.functions.len(), 2);
        let r = ProbeRequest::parse("uprobe:elsewhere:nesquic_workload_*", &c).expect("parse").resolve(&c, &objs);
        assert!(r.functions.is_empty() && r.unmatched.len() == 1);
    }
}
