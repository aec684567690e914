//! The sampling profile: CPU-clock samples of the LUT's user and kernel stacks, symbolised
//! (demangled) and classified into components by the catalog's `[[component]]` rules. Shares come
//! with 95% Wilson intervals: a share from n samples is an estimate, and says how good.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::Role;
pub use nesquic_model::profile::{MapsReads, Profile, RoleProfile, SampleClock, SamplerCost, Share};

pub use crate::stack_rules::Classifier;

mod blaze;
mod frameless;
pub mod packet_cost;
mod rep_movsb;
pub mod user_mode;

/// Sums the per-CPU counters of the `sampler_cost` map.
pub fn sampler_cost<'a>(cpus: impl IntoIterator<Item = &'a SamplerCounters>) -> SamplerCost {
    let mut c = SamplerCounters::default();
    for cpu in cpus {
        c.ticks += cpu.ticks;
        c.samples += cpu.samples;
        c.sample_ns += cpu.sample_ns;
        c.inserts += cpu.inserts;
        c.insert_ns += cpu.insert_ns;
        c.kernel_walks += cpu.kernel_walks;
    }
    SamplerCost {
        runs: c.ticks,
        run_ns: c.sample_ns + c.insert_ns,
        samples: c.samples,
        sample_ns: c.sample_ns,
        inserts: c.inserts,
        insert_ns: c.insert_ns,
        kernel_walks: Some(c.kernel_walks),
    }
}

/// `struct nq_sampler_cost` (bpf/nesquic.bpf.c): one CPU's sampler counters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SamplerCounters {
    /// Every run of the program on this CPU.
    pub ticks: u64,
    /// The LUT's samples whose key existed.
    pub samples: u64,
    /// Their time in the program, ns.
    pub sample_ns: u64,
    /// The LUT's samples that inserted their key.
    pub inserts: u64,
    /// Their time in the program, ns.
    pub insert_ns: u64,
    /// The LUT's samples whose kernel stack was walked (on the tick, those that did not
    /// interrupt user code).
    pub kernel_walks: u64,
}

// SAFETY: a plain `repr(C)` struct of six u64s, no padding (size asserted below).
unsafe impl aya::Pod for SamplerCounters {}
const _: () = assert!(std::mem::size_of::<SamplerCounters>() == 48);

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
    /// The word at the user stack pointer (0: unread): a frameless leaf's return address.
    pub sp_word: u64,
    /// A stack of this sample was lost: its hash bucket in the stack map held another stack
    /// (`bpf_get_stackid` returned -EEXIST; replacing it would relabel earlier samples).
    pub stack_lost: bool,
    /// How many times it was sampled.
    pub count: u64,
}

const VDSO: &str = "[vdso]";

/// A process's memory map, read while it runs (it is gone when samples are read): every
/// file-backed executable mapping any read of its current address space saw, and the address
/// spaces it had before an `exec`.
#[derive(Debug, Clone, Default)]
pub struct ProcessMaps {
    /// (start, end, file offset, path); a mapping a later read no longer showed is kept unless a
    /// newer one took its addresses: samples taken while it was mapped are named from it.
    entries: Vec<(u64, u64, u64, PathBuf)>,
    /// The address spaces before each `exec`, newest first (the first is the forked image of
    /// the process that started it, running until its `exec`).
    earlier: Vec<ProcessMaps>,
}

impl ProcessMaps {
    /// Reads /proc/PID/maps (file-backed executable mappings only); `None` if there are none.
    pub fn read(pid: u32) -> Option<Self> {
        Self::read_file(&format!("/proc/{pid}/maps"))
    }

    fn read_file(file: &str) -> Option<Self> {
        let text = std::fs::read_to_string(file).ok()?;
        let mut entries = Vec::new();
        for line in text.lines() {
            let mut parts = line.split_whitespace();
            let (Some(range), Some(perms), Some(offset)) = (parts.next(), parts.next(), parts.next()) else { continue };
            let path = parts.nth(2);
            let (Some(path), true) = (path, perms.contains('x')) else { continue };
            // The vDSO (clock_gettime) has no file: kept so its frames get a name, `[vdso]`.
            if !path.starts_with('/') && path != VDSO {
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
        (!entries.is_empty()).then_some(Self { entries, earlier: Vec::new() })
    }

    /// Folds a newer read of the same process in. The same address space (a mapping in common:
    /// the executable, the loader) keeps what the newer read no longer shows unless a newer
    /// mapping overlaps it; another one (an `exec` in between) moves this one to `earlier`.
    fn merge(&mut self, newer: ProcessMaps) {
        let same_space = newer.entries.iter().any(|n| self.entries.iter().any(|o| o == n));
        if !same_space {
            let old = std::mem::replace(self, newer);
            self.earlier =
                std::iter::once(ProcessMaps { entries: old.entries, earlier: Vec::new() }).chain(old.earlier).collect();
            return;
        }
        let stale: Vec<_> = std::mem::take(&mut self.entries)
            .into_iter()
            .filter(|(s, e, _, _)| !newer.entries.iter().any(|(ns, ne, _, _)| s < ne && ns < e))
            .collect();
        self.entries = newer.entries.into_iter().chain(stale).collect();
    }

    fn find(&self, ip: u64) -> Option<(&Path, u64)> {
        self.entries.iter().find(|(s, e, _, _)| ip >= *s && ip < *e).map(|(s, _, off, p)| (p.as_path(), ip - s + off))
    }

    /// The address space a stack (innermost first) was sampled in: the current one if it maps
    /// any of its frames; else the newest earlier one mapping all of them (a sample between the
    /// fork and the `exec`, in the parent's code; all, so that code the current one never saw
    /// mapped, such as a JIT's, is not named by a chance overlap); else the current one.
    pub fn for_stack(&self, user: &[u64]) -> &ProcessMaps {
        // Return addresses are looked up one byte back, in their call (as `build` does).
        let ips = || user.iter().enumerate().map(|(i, ip)| if i == 0 { *ip } else { ip.saturating_sub(1) });
        if self.earlier.is_empty() || user.is_empty() || ips().any(|ip| self.find(ip).is_some()) {
            return self;
        }
        self.earlier.iter().find(|m| ips().all(|ip| m.find(ip).is_some())).unwrap_or(self)
    }
}

/// Where a sampled address is: its function's name, and for a mapped file, the file and the
/// file offsets of the function's start and of the address.
struct FoundFunction {
    name: String,
    path: Option<PathBuf>,
    start_offset: u64,
    ip_offset: u64,
}

/// Why a sampled address has no function name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unresolved {
    /// Outside every file-backed executable mapping any read of the process's maps saw
    /// (anonymous or JIT code, or code mapped and unmapped again between two reads).
    NoMapping,
    /// In a mapped file, but no function symbol covers it (stripped object, padding).
    NoSymbol,
    /// The mapped file could not be read or parsed.
    UnreadableObject,
    /// A kernel address below the first kallsyms entry.
    Kernel,
}

impl Unresolved {
    /// For the listing: `[unknown: no mapping]`.
    pub fn label(self) -> &'static str {
        match self {
            Unresolved::NoMapping => "[unknown: no mapping]",
            Unresolved::NoSymbol => "[unknown: no symbol]",
            Unresolved::UnreadableObject => "[unknown: object unreadable]",
            Unresolved::Kernel => "[unknown: kernel]",
        }
    }
}

/// Memory maps of running processes, for samples symbolised after the processes are gone.
/// Each read is folded into what earlier reads saw ([`ProcessMaps`]), so code that was mapped at
/// any read stays named.
///
/// A pid's maps are read when first seen and then whenever its executable memory changed size
/// since the last read (the kernel's `exec_vm`, /proc/PID/status `VmExe` + `VmLib`: exec, the
/// loader, mmap or mprotect of code, `dlopen`, `dlclose`), plus every 5 s as a safety net (code
/// replaced by code of the same size). The size is looked at 1, 2, 4, ... ms after a read, then
/// every 50 ms: a process maps its libraries in its first milliseconds, and a client whose only
/// read came before its loader mapped libc had every libc frame unnamed (issue 36: 7.3% of its
/// samples `[unknown: no mapping]`). The status file is cheap and the kernel fills it without
/// walking the maps; reading the maps on a fixed series and every 100 ms instead measured
/// 1.009x (1.000-1.019) msquic CPU per GB over 200 paired rounds.
#[derive(Debug, Default)]
pub struct MapsCache {
    /// Every pid's maps.
    pub maps: HashMap<u32, ProcessMaps>,
    last: Option<std::time::Instant>,
    /// Per pid: when its executable memory is looked at next.
    watch: HashMap<u32, CodeWatch>,
    /// Reads of /proc/PID/maps made (and of this process's own, once per pid).
    reads: u64,
    /// Their time in total, ns.
    read_ns: u64,
    /// Reads made because a process's executable memory changed size after its first read.
    code_changes: u64,
}

/// When a pid's executable memory is looked at next, and its size at the last maps read.
#[derive(Debug, Clone, Copy)]
struct CodeWatch {
    /// `None` until a read succeeded.
    read_kb: Option<u64>,
    next_look: std::time::Instant,
    gap: std::time::Duration,
}

impl MapsCache {
    /// The safety net: every pid's maps, this often.
    const PERIOD: std::time::Duration = std::time::Duration::from_secs(5);
    const FIRST_GAP: std::time::Duration = std::time::Duration::from_millis(1);
    /// The gap between looks at the size doubles up to this.
    const LOOK_GAP: std::time::Duration = std::time::Duration::from_millis(50);

    /// Reads the maps of `pids` that are due. A pid seen for the first time is taken to be a
    /// child this process forked: until its `exec`, its address space is this process's.
    pub fn refresh(&mut self, pids: impl IntoIterator<Item = u32>) {
        let now = std::time::Instant::now();
        let periodic = self.last.is_none_or(|t| now.duration_since(t) >= Self::PERIOD);
        if periodic {
            self.last = Some(now);
        }
        for pid in pids {
            if !self.maps.contains_key(&pid) {
                if let Some(parent) = self.timed(|| ProcessMaps::read_file("/proc/self/maps")) {
                    self.maps.insert(pid, parent);
                }
            }
            let watch =
                *self.watch.entry(pid).or_insert(CodeWatch { read_kb: None, next_look: now, gap: Self::FIRST_GAP });
            if !periodic && now < watch.next_look {
                continue;
            }
            let Some(kb) = executable_kb(pid).filter(|&kb| periodic || watch.read_kb != Some(kb)) else {
                // Unchanged, or gone (whose look, left due, would have the caller poll every ms):
                // looked at again later, less often.
                let gap = (watch.gap * 2).min(Self::LOOK_GAP);
                self.watch.insert(pid, CodeWatch { next_look: now + gap, gap, ..watch });
                continue;
            };
            let read = self.timed(|| ProcessMaps::read(pid));
            if watch.read_kb.is_some_and(|old| old != kb) {
                self.code_changes += 1;
            }
            // Unread (inside its `exec`: the new address space still empty, the parent woken
            // as the exec closed the close-on-exec fds): the next look reads again.
            let read_kb = match read {
                Some(m) => {
                    match self.maps.get_mut(&pid) {
                        Some(old) => old.merge(m),
                        None => {
                            self.maps.insert(pid, m);
                        }
                    }
                    Some(kb)
                }
                None => watch.read_kb,
            };
            self.watch.insert(pid, CodeWatch { read_kb, next_look: now + Self::FIRST_GAP, gap: Self::FIRST_GAP });
        }
    }

    /// How long until a look or a read is due: the caller's next `refresh` should come no
    /// later.
    pub fn next_read(&self) -> Option<std::time::Duration> {
        let now = std::time::Instant::now();
        let periodic = self.last.map(|t| (t + Self::PERIOD).saturating_duration_since(now));
        let look = self.watch.values().map(|w| w.next_look.saturating_duration_since(now)).min();
        periodic.into_iter().chain(look).min()
    }

    /// The reads since the last call, and how many of them a change of executable memory
    /// caused.
    pub fn take_reads(&mut self) -> MapsReads {
        MapsReads {
            reads: std::mem::take(&mut self.reads),
            read_ns: std::mem::take(&mut self.read_ns),
            code_changes: std::mem::take(&mut self.code_changes),
        }
    }

    fn timed<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let start = std::time::Instant::now();
        let r = f();
        self.reads += 1;
        self.read_ns += u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        r
    }
}

/// A process's executable memory in kB (`VmExe` + `VmLib`: the kernel's `exec_vm`), from
/// /proc/PID/status, which the kernel fills without the memory-map lock; `None` once gone.
fn executable_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some(kb("VmExe:")? + kb("VmLib:")?)
}

/// Per-name sample counts, ranked into shares of `total`, largest first, at most `limit`.
fn ranked(m: HashMap<String, u64>, total: u64, limit: usize) -> Vec<Share> {
    let mut v: Vec<Share> = m.into_iter().map(|(n, c)| Share::of(n, c, total)).collect();
    v.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.name.cmp(&b.name)));
    v.truncate(limit);
    v
}

/// Symbolises and classifies `samples` per role.
pub fn build(
    samples: &[RawSample],
    maps: &HashMap<u32, ProcessMaps>,
    roles: &[Role],
    classifier: &Classifier,
    frequency_hz: u64,
) -> Profile {
    let mut symbolizer = blaze::BlazeSymbolizer::new();
    symbolizer.prefetch(samples, maps);
    let mut perf_maps = crate::symbols::PerfMaps::default();
    let empty = ProcessMaps::default();
    let mut out = Vec::new();
    for &role in roles {
        let mut total = 0;
        let mut components: HashMap<String, u64> = HashMap::new();
        let mut functions: HashMap<String, u64> = HashMap::new();
        let mut unknown: HashMap<String, u64> = HashMap::new();
        let mut unclassified: HashMap<String, u64> = HashMap::new();
        let mut folded: HashMap<String, u64> = HashMap::new();
        let (mut frameless_callers, mut lost_stacks, mut rep_movsb_leaves) = (0, 0, 0);
        for s in samples.iter().filter(|s| s.role == role.index()) {
            if s.stack_lost {
                lost_stacks += s.count;
            }
            let pmaps = maps.get(&s.tgid).map_or(&empty, |m| m.for_stack(&s.user));
            // Every frame but the innermost is a return address, one past the call: look up the
            // byte before it, or a call that ends a function names the next one.
            let caller = |i: usize, ip: u64| if i == 0 { ip } else { ip.saturating_sub(1) };
            let mut user_ips = s.user.clone();
            // A sample in user mode (no kernel frames) whose leaf is a `rep movsb`.
            if s.kernel.is_empty() && s.user.first().is_some_and(|&ip| symbolizer.is_rep_movsb(pmaps, ip)) {
                rep_movsb_leaves += s.count;
            }
            if let Some(ret) = symbolizer.frameless_caller(pmaps, &s.user, s.sp_word) {
                user_ips.insert(1, ret);
                frameless_callers += s.count;
            }
            // Outside every mapped file: code the process generated, named by its perf map if it
            // wrote one (CPython's perf trampolines: symbols::PerfMap).
            let user: Vec<Result<String, Unresolved>> = user_ips
                .iter()
                .enumerate()
                .map(|(i, ip)| {
                    symbolizer.user_frame(pmaps, caller(i, *ip)).or_else(|why| match why {
                        Unresolved::NoMapping => perf_maps.lookup(s.tgid, caller(i, *ip)).ok_or(why),
                        _ => Err(why),
                    })
                })
                .collect();
            let kernel: Vec<Result<String, Unresolved>> =
                s.kernel.iter().enumerate().map(|(i, ip)| symbolizer.kernel_frame(caller(i, *ip))).collect();
            fn names(v: &[Result<String, Unresolved>]) -> Vec<Option<&str>> {
                v.iter().map(|f| f.as_deref().ok()).collect()
            }
            let component = classifier.classify_frames(&names(&kernel), &names(&user)).to_string();
            total += s.count;
            let leaf = match kernel.first().or(user.first()) {
                Some(Ok(f)) => f.clone(),
                Some(Err(why)) => {
                    *unknown.entry(why.label().to_string()).or_default() += s.count;
                    why.label().to_string()
                }
                None => {
                    *unknown.entry("[unknown: empty stack]".to_string()).or_default() += s.count;
                    "[unknown: empty stack]".to_string()
                }
            };
            if matches!(
                component.as_str(),
                crate::stack_rules::OTHER | crate::stack_rules::KERNEL_OTHER | crate::stack_rules::UNKNOWN
            ) {
                *unclassified.entry(leaf.clone()).or_default() += s.count;
            }
            *folded.entry(fold(&user, &kernel)).or_default() += s.count;
            *functions.entry(leaf).or_default() += s.count;
            *components.entry(component).or_default() += s.count;
        }
        let mut groups: HashMap<String, u64> = HashMap::new();
        for (c, n) in &components {
            *groups.entry(crate::stack_rules::family(c).to_string()).or_default() += n;
        }
        out.push(RoleProfile {
            role,
            samples: total,
            components: ranked(groups, total, usize::MAX),
            split: ranked(components, total, usize::MAX),
            top_functions: ranked(functions, total, 15),
            unknown_leaves: ranked(unknown, total, usize::MAX),
            unclassified_leaves: ranked(unclassified, total, 20),
            frameless_callers,
            rep_movsb_leaves,
            lost_stacks,
            cost: None,
            folded: {
                let mut v: Vec<(String, u64)> = folded.into_iter().collect();
                v.sort_unstable();
                v
            },
        });
    }
    Profile { frequency_hz, clock: Default::default(), roles: out, sampler: None, maps_reads: None }
}

/// One stack in the folded format flame graph tools read: outermost frame first, user frames
/// then the kernel frames they called, `;`-separated. Names may hold `;` (`[u8; 16]`) and a
/// folded line ends with ` count`, so `;` becomes `,` and an empty stack is named.
fn fold(user: &[Result<String, Unresolved>], kernel: &[Result<String, Unresolved>]) -> String {
    let name = |f: &Result<String, Unresolved>| match f {
        Ok(n) => n.replace(';', ","),
        Err(why) => why.label().to_string(),
    };
    let frames: Vec<String> = user.iter().rev().chain(kernel.iter().rev()).map(name).collect();
    if frames.is_empty() {
        "[unknown: empty stack]".to_string()
    } else {
        frames.join(";")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_walks_each_stack_from_the_leaf() {
        let catalog = crate::Catalog::builtin().expect("catalog");
        let c = Classifier::new(&catalog.components).expect("catalog rules compile");
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let seal = names(&[
            "ring_core_0_17_14_aes_hw_ctr32_encrypt_blocks",
            "ring::aead::algorithm::aes_gcm_seal",
            "quinn_proto::connection::Connection::poll_transmit",
        ]);
        assert_eq!(c.classify(&seal, &[]), "crypto.aead");
        // A copy under a seal is crypto; under the send path, packet I/O; under framing, framing.
        let copy_in = |caller: &str| names(&["__memmove_avx_unaligned_erms", caller, "main"]);
        assert_eq!(c.classify(&copy_in("ring::aead::algorithm::aes_gcm_seal"), &[]), "crypto.aead");
        assert_eq!(c.classify(&copy_in("quinn_udp::imp::send"), &[]), "packet_io.user");
        assert_eq!(
            c.classify(&copy_in("quinn_proto::connection::streams::send::Send::write"), &[]),
            "connection.streams"
        );
        assert_eq!(c.classify(&copy_in("some_unnamed_fn"), &[]), "memory.copy");
        // A sample in the kernel under a UDP send: the kernel's part decides.
        let send = names(&["sendmsg", "quinn_udp::imp::send"]);
        assert_eq!(c.classify(&send, &names(&["udp_sendmsg", "__sys_sendmsg"])), "packet_io.kernel");
        assert_eq!(
            c.classify(&send, &names(&["rep_movs_alternative", "_copy_from_iter", "udp_sendmsg"])),
            "packet_io.copy"
        );
        assert_eq!(
            c.classify(&send, &names(&["skb_segment", "__udp_gso_segment", "udp_sendmsg"])),
            "packet_io.gso_gro"
        );
        assert_eq!(
            c.classify(&names(&["quinn_proto::connection::Connection::handle_event"]), &[]),
            "connection.frames"
        );
        assert_eq!(
            c.classify(&names(&["QuicLossDetectionProcessAckBlocks", "QuicConnRecvFrames"]), &[]),
            "connection.recovery"
        );
        assert_eq!(c.classify(&names(&["CubicCongestionControlOnDataAcknowledged"]), &[]), "connection.congestion");
        assert_eq!(c.classify(&names(&["main"]), &[]), "other");
        assert_eq!(c.classify(&names(&["epoll_wait"]), &names(&["ep_poll", "do_epoll_wait"])), "runtime.poll");
        // The benchmark harness is never the stack's, whatever calls it.
        for harness in ["nesquic_protocol::payload::equal_avx512", "nesquic_protocol::payload::Verifier::update"] {
            assert_eq!(c.classify(&names(&[harness, "quinn_proto::connection::Connection::poll"]), &[]), "app.harness");
        }
        assert_eq!(c.classify(&names(&["memcmp", "nesquic_protocol::payload::Verifier::update"]), &[]), "app.harness");
    }

    #[test]
    fn components_sum_to_every_sample_and_unknown_leaves_are_counted() {
        let catalog = crate::Catalog::builtin().expect("catalog");
        let c = Classifier::new(&catalog.components).expect("catalog rules compile");
        // No map for pid 1 here: every user frame is unresolved; kernel addresses below kallsyms too.
        let samples = vec![
            RawSample {
                tgid: 1,
                role: 0,
                user: vec![0x1000, 0x2000],
                kernel: vec![],
                sp_word: 0,
                stack_lost: false,
                count: 3,
            },
            RawSample { tgid: 1, role: 0, user: vec![], kernel: vec![], sp_word: 0, stack_lost: true, count: 1 },
            RawSample { tgid: 1, role: 1, user: vec![0x1000], kernel: vec![], sp_word: 0, stack_lost: false, count: 5 },
        ];
        let p = build(&samples, &HashMap::new(), &[Role::Server, Role::Client], &c, 99);
        let server = &p.roles[0];
        assert_eq!(server.samples, 4);
        assert_eq!(server.components.iter().map(|s| s.samples).sum::<u64>(), 4);
        assert_eq!(server.split.iter().map(|s| s.samples).sum::<u64>(), 4);
        assert_eq!(server.unknown_leaf_samples(), 4);
        assert_eq!((server.lost_stacks, p.roles[1].lost_stacks), (1, 0), "the sample whose stacks a collision took");
        assert_eq!(server.components[0].name, "unknown");
        let no_map = server.unknown_leaves.iter().find(|s| s.name == Unresolved::NoMapping.label()).expect("no map");
        assert_eq!(no_map.samples, 3);
        assert_eq!(p.roles[1].samples, 5);
        // The folded stacks hold every sample, outermost frame first.
        assert_eq!(server.folded.iter().map(|(_, n)| n).sum::<u64>(), 4);
        let no_map = Unresolved::NoMapping.label();
        assert!(server.folded.contains(&(format!("{no_map};{no_map}"), 3)), "{:?}", server.folded);
        assert!(server.folded.contains(&("[unknown: empty stack]".to_string(), 1)), "{:?}", server.folded);
    }

    #[test]
    fn sampler_cost_sums_cpus_and_keeps_first_inserts_apart() {
        let cpu0 = SamplerCounters {
            ticks: 1000,
            samples: 300,
            sample_ns: 1_500_000,
            inserts: 50,
            insert_ns: 1_000_000,
            kernel_walks: 40,
        };
        let cpu1 = SamplerCounters {
            ticks: 998,
            samples: 100,
            sample_ns: 500_000,
            inserts: 0,
            insert_ns: 0,
            kernel_walks: 100,
        };
        let c = sampler_cost([&cpu0, &cpu1]);
        assert_eq!((c.runs, c.samples, c.inserts, c.run_ns), (1998, 400, 50, 3_000_000));
        // 5 us a steady sample, 20 us a first insert; the mean of all (6.67 us) is neither.
        assert_eq!((c.steady_ns(), c.insert_ns_each()), (Some(5000.0), Some(20000.0)));
        assert_eq!(c.kernel_walks, Some(140));
        assert_eq!(sampler_cost([&SamplerCounters::default()]).steady_ns(), None);
    }

    #[test]
    fn folded_frames_never_hold_the_separator() {
        let user = [Ok("<[u8; 16] as Foo>::bar".to_string()), Ok("main".to_string())];
        let kernel = [Ok("udp_sendmsg".to_string())];
        assert_eq!(fold(&user, &kernel), "main;<[u8, 16] as Foo>::bar;udp_sendmsg");
    }
}
