//! The sampling profile: CPU-clock samples of the LUT's user and kernel stacks, symbolised
//! (demangled) and classified into components by the catalog's `[[component]]` rules. Shares come
//! with 95% Wilson intervals: a share from n samples is an estimate, and says how good.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::catalog::ComponentRule;
use crate::symbols::ObjectSymbols;

/// One sampled stack pair as read from the kernel, innermost frame first.
#[derive(Debug, Clone)]
pub struct RawSample {
    /// Process.
    pub tgid: u32,
    /// Role index.
    pub role: u32,
    /// User-space instruction pointers.
    pub user: Vec<u64>,
    /// Kernel instruction pointers.
    pub kernel: Vec<u64>,
    /// How many times it was sampled.
    pub count: u64,
}

/// A process's memory map, read while it runs (it is gone when samples are read).
#[derive(Debug, Clone, Default)]
pub struct ProcessMaps {
    entries: Vec<(u64, u64, u64, PathBuf)>,
}

impl ProcessMaps {
    /// Reads /proc/PID/maps (file-backed executable mappings only); `None` if there are none.
    pub fn read(pid: u32) -> Option<Self> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
        let mut entries = Vec::new();
        for line in text.lines() {
            let mut parts = line.split_whitespace();
            let (Some(range), Some(perms), Some(offset)) = (parts.next(), parts.next(), parts.next()) else { continue };
            let path = parts.nth(2);
            let (Some(path), true) = (path, perms.contains('x')) else { continue };
            if !path.starts_with('/') {
                continue;
            }
            let Some((start, end)) = range.split_once('-') else { continue };
            let parse = |h: &str| u64::from_str_radix(h, 16).ok();
            if let (Some(start), Some(end), Some(offset)) = (parse(start), parse(end), parse(offset)) {
                entries.push((start, end, offset, PathBuf::from(path)));
            }
        }
        // A process that has exited but is not yet reaped shows an empty map: report nothing,
        // so a cache keeps the last real map instead of losing every symbol.
        (!entries.is_empty()).then_some(Self { entries })
    }

    fn find(&self, ip: u64) -> Option<(&Path, u64)> {
        self.entries.iter().find(|(s, e, _, _)| ip >= *s && ip < *e).map(|(s, _, off, p)| (p.as_path(), ip - s + off))
    }
}

/// Turns addresses into function names.
#[derive(Default)]
pub struct Symbolizer {
    kernel: Vec<(u64, String)>,
    objects: HashMap<PathBuf, Option<ObjectSymbols>>,
}

impl Symbolizer {
    /// Loads the kernel's symbols from /proc/kallsyms (empty if hidden).
    pub fn new() -> Self {
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let mut kernel: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut p = l.split_whitespace();
                let addr = u64::from_str_radix(p.next()?, 16).ok()?;
                let kind = p.next()?;
                let name = p.next()?;
                (addr != 0 && matches!(kind, "t" | "T" | "w" | "W")).then(|| (addr, name.to_string()))
            })
            .collect();
        kernel.sort_unstable_by_key(|(a, _)| *a);
        Self { kernel, objects: HashMap::new() }
    }

    /// The kernel function containing `ip`.
    pub fn kernel_name(&self, ip: u64) -> Option<&str> {
        let i = self.kernel.partition_point(|(a, _)| *a <= ip);
        i.checked_sub(1).map(|i| self.kernel[i].1.as_str())
    }

    /// The user function containing `ip` in a process with `maps`.
    pub fn user_name(&mut self, maps: &ProcessMaps, ip: u64) -> Option<String> {
        let (path, file_offset) = maps.find(ip)?;
        let object = self
            .objects
            .entry(path.to_path_buf())
            .or_insert_with(|| {
                // Sorted by address once, so each lookup is a binary search.
                ObjectSymbols::load(path).ok().map(|mut o| {
                    o.functions.sort_by_key(|f| f.address);
                    o
                })
            })
            .as_ref()?;
        let vaddr = object
            .segments
            .iter()
            .find(|(_, off, size)| file_offset >= *off && file_offset < off + size)
            .map(|(va, off, _)| file_offset - off + va)?;
        // The function with the highest start at or below vaddr that still contains it.
        let below = object.functions.partition_point(|f| f.address <= vaddr);
        let best = object.functions[..below].iter().rev().find(|f| f.size == 0 || vaddr < f.address + f.size)?;
        Some(best.demangled.clone())
    }
}

/// Memory maps of running processes, re-read at most every 100 ms: samples are symbolised after
/// the processes are gone, with the last map seen.
#[derive(Debug, Default)]
pub struct MapsCache {
    /// Latest map per pid.
    pub maps: HashMap<u32, ProcessMaps>,
    last: Option<std::time::Instant>,
}

impl MapsCache {
    const PERIOD: std::time::Duration = std::time::Duration::from_millis(100);

    /// Re-reads the maps of `pids` if the last read is older than the period.
    pub fn refresh(&mut self, pids: impl IntoIterator<Item = u32>) {
        if self.last.is_some_and(|t| t.elapsed() < Self::PERIOD) {
            return;
        }
        for pid in pids {
            if let Some(m) = ProcessMaps::read(pid) {
                self.maps.insert(pid, m);
            }
        }
        self.last = Some(std::time::Instant::now());
    }
}

/// A share of samples with its 95% Wilson interval.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Share {
    /// Component or function.
    pub name: String,
    /// Samples attributed.
    pub samples: u64,
    /// samples / total.
    pub share: f64,
    /// 95% interval, low end.
    pub ci95_low: f64,
    /// 95% interval, high end.
    pub ci95_high: f64,
}

impl Share {
    fn new(name: String, samples: u64, total: u64) -> Self {
        let (n, p) = (total.max(1) as f64, samples as f64 / total.max(1) as f64);
        let z = 1.96f64;
        let denom = 1.0 + z * z / n;
        let centre = (p + z * z / (2.0 * n)) / denom;
        let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
        Self { name, samples, share: p, ci95_low: (centre - half).max(0.0), ci95_high: (centre + half).min(1.0) }
    }
}

/// One role's profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RoleProfile {
    /// Role name.
    pub role: String,
    /// Samples in total.
    pub samples: u64,
    /// Per component, largest first.
    pub components: Vec<Share>,
    /// Innermost function of each sample (user frame, else kernel frame), largest first (top 15).
    pub top_functions: Vec<Share>,
}

/// The profile of one window.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Profile {
    /// Sampling frequency per CPU.
    pub frequency_hz: u64,
    /// Per role.
    pub roles: Vec<RoleProfile>,
    /// What the sampling program itself cost, from the kernel's BPF statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler: Option<crate::SamplerCost>,
}

/// Compiled component rules.
pub struct Classifier {
    rules: Vec<(String, Vec<GlobMatcher>, Vec<GlobMatcher>)>,
}

impl Classifier {
    /// From the catalog's rules.
    pub fn new(rules: &[ComponentRule]) -> Self {
        let compile = |ps: &[String]| {
            ps.iter().filter_map(|p| Glob::new(p).ok()).map(|g| g.compile_matcher()).collect::<Vec<_>>()
        };
        Self { rules: rules.iter().map(|r| (r.name.clone(), compile(&r.user), compile(&r.kernel))).collect() }
    }

    /// The component of a stack (names innermost first).
    pub fn classify(&self, user: &[String], kernel: &[String]) -> &str {
        for (name, u, k) in &self.rules {
            if user.iter().any(|f| u.iter().any(|m| m.is_match(f)))
                || kernel.iter().any(|f| k.iter().any(|m| m.is_match(f)))
            {
                return name;
            }
        }
        "other"
    }
}

/// Symbolises and classifies `samples` per role.
pub fn build(
    samples: &[RawSample],
    maps: &HashMap<u32, ProcessMaps>,
    roles: &[(u32, &str)],
    classifier: &Classifier,
    frequency_hz: u64,
) -> Profile {
    let mut symbolizer = Symbolizer::new();
    let empty = ProcessMaps::default();
    let mut out = Vec::new();
    for &(role, name) in roles {
        let mut total = 0;
        let mut components: HashMap<String, u64> = HashMap::new();
        let mut functions: HashMap<String, u64> = HashMap::new();
        for s in samples.iter().filter(|s| s.role == role) {
            let pmaps = maps.get(&s.tgid).unwrap_or(&empty);
            let user: Vec<String> = s.user.iter().filter_map(|ip| symbolizer.user_name(pmaps, *ip)).collect();
            let kernel: Vec<String> =
                s.kernel.iter().filter_map(|ip| symbolizer.kernel_name(*ip).map(String::from)).collect();
            total += s.count;
            *components.entry(classifier.classify(&user, &kernel).to_string()).or_default() += s.count;
            let leaf = user.first().or(kernel.first()).cloned().unwrap_or_else(|| "[unknown]".into());
            *functions.entry(leaf).or_default() += s.count;
        }
        let ranked = |m: HashMap<String, u64>, limit: usize| {
            let mut v: Vec<Share> = m.into_iter().map(|(n, c)| Share::new(n, c, total)).collect();
            v.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.name.cmp(&b.name)));
            v.truncate(limit);
            v
        };
        out.push(RoleProfile {
            role: name.to_string(),
            samples: total,
            components: ranked(components, usize::MAX),
            top_functions: ranked(functions, 15),
        });
    }
    Profile { frequency_hz, roles: out, sampler: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_interval_brackets_the_share() {
        let s = Share::new("x".into(), 70, 100);
        assert!((s.share - 0.7).abs() < 1e-12);
        assert!(s.ci95_low > 0.59 && s.ci95_low < 0.7 && s.ci95_high > 0.7 && s.ci95_high < 0.79, "{s:?}");
    }

    #[test]
    fn first_matching_component_wins() {
        let catalog = crate::Catalog::builtin().expect("catalog");
        let c = Classifier::new(&catalog.components);
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let crypto =
            names(&["ring::aead::algorithm::aes_gcm_seal", "quinn_proto::connection::Connection::poll_transmit"]);
        assert_eq!(c.classify(&crypto, &[]), "crypto");
        assert_eq!(
            c.classify(&names(&["quinn_udp::imp::send"]), &names(&["udp_sendmsg", "__sys_sendmsg"])),
            "packet_io"
        );
        assert_eq!(c.classify(&names(&["quinn_proto::connection::Connection::handle_event"]), &[]), "connection");
        assert_eq!(c.classify(&names(&["main"]), &[]), "other");
        // The benchmark harness is never the stack's, whatever calls it.
        for harness in ["nesquic_protocol::payload::equal_avx512", "nesquic_protocol::payload::Verifier::update"] {
            assert_eq!(c.classify(&names(&[harness, "quinn_proto::connection::Connection::poll"]), &[]), "app");
        }
    }
}
