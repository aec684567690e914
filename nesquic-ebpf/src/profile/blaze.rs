//! Symbolization on blazesym (libbpf's symbolizer, issue 37): the sampled addresses of a process
//! and of the kernel turned into function names, behind what [`super::build`] needs: user
//! addresses with the process's memory map, kernel addresses. Samples are symbolised after the
//! processes exit, when `/proc/PID` (blazesym's process source) is gone: each user address
//! becomes (file, file offset) with the map read while the process ran ([`ProcessMaps`]) and is
//! symbolised against that ELF file ([`Mode`] says from which of its symbols).
//!
//! [`compare`] runs this and the hand-written [`super::Symbolizer`] on the same captured stacks
//! (`NESQUIC_SYMBOLIZER_COMPARE=FILE` during `nesquic run`): bench/blazesym.md.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ::blazesym::symbolize::source::{Elf, Kernel, Source};
use ::blazesym::symbolize::{Builder, Input, Symbolized, Symbolizer};
use ::blazesym::MaybeDefault;

use super::{ProcessMaps, RawSample, Unresolved, VDSO};
use crate::stack_rules::Classifier;
use crate::Role;

/// A symbolised address: a name, or why there is none.
pub type Frame = Result<String, Unresolved>;

/// blazesym behind the sampler's interface; results are kept per (file, offset) and per kernel
/// address, so each is symbolised once whatever the number of samples holding it.
pub struct BlazeSymbolizer {
    inner: Symbolizer,
    /// Where names come from.
    mode: Mode,
    user: HashMap<(PathBuf, u64), UserFrame>,
    kernel: HashMap<u64, Frame>,
    /// What each file's headers say (`None`: unreadable).
    files: HashMap<PathBuf, Option<ElfInfo>>,
}

/// A function blazesym found: name, start (virtual address), the address's offset into it.
struct Found {
    name: String,
    start: u64,
    offset: u64,
    /// Whether the symbol has a size (else it may be a label inside another function).
    sized: bool,
    inlined: Vec<String>,
}

/// An ELF file's headers, read without reading the file: whether it has a symbol table, its
/// loadable segments, and its separate debug file.
#[derive(Debug, Clone)]
struct ElfInfo {
    symtab: bool,
    /// (virtual address, file offset, file size).
    segments: Vec<(u64, u64, u64)>,
    debug_file: Option<PathBuf>,
}

impl ElfInfo {
    fn read(path: &Path) -> Option<Self> {
        use object::{Object, ObjectSection, ObjectSegment};
        let file = std::fs::File::open(path).ok()?;
        let cache = object::ReadCache::new(file);
        let elf = object::File::parse(&cache).ok()?;
        let symtab = elf.section_by_name(".symtab").is_some_and(|s| s.size() > 0);
        let segments = elf
            .segments()
            .map(|seg| (seg.address(), seg.file_range().0, seg.file_range().1))
            .filter(|s| s.2 > 0)
            .collect();
        // As Debian's `-dbg` packages install them: /usr/lib/debug/.build-id/ab/cdef….debug.
        let debug_file = (!symtab)
            .then(|| elf.build_id().ok().flatten())
            .flatten()
            .map(|id| id.iter().map(|b| format!("{b:02x}")).collect::<String>())
            .filter(|hex| hex.len() > 2)
            .map(|hex| PathBuf::from(format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..])))
            .filter(|p| p.exists());
        Some(Self { symtab, segments, debug_file })
    }

    /// The virtual address of a file offset.
    fn virtual_address(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(_, off, size)| offset >= *off && offset < off + size)
            .map(|(va, off, _)| offset - off + va)
    }
}

/// A user address's function: its name, and the functions inlined there (DWARF modes).
#[derive(Debug, Clone)]
pub(super) struct UserFrame {
    pub(super) name: Frame,
    /// Inlined callees at this address, outermost first (only with `inlined`).
    pub(super) inlined: Vec<String>,
}

/// Where blazesym takes a user function's name from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The ELF symbol table where the file has one (full Rust paths: what the catalog's globs
    /// match); DWARF and split debug files (build-id, debug link) only for a file without
    /// `.symtab` (a distribution's stripped library).
    Symtab,
    /// DWARF first for every file (blazesym's default). Its Rust names are the DWARF `name`
    /// without the path (`run`, `poll<...>`), which no path glob matches.
    Dwarf,
    /// `Dwarf`, plus the functions inlined at each address (source line programs parsed).
    Inlined,
}

impl BlazeSymbolizer {
    /// A symbolizer taking names as `mode` says.
    pub fn new(mode: Mode) -> Self {
        let inlined = mode == Mode::Inlined;
        let inner = Builder::default()
            // The files do not change during a run: no stat per lookup.
            .enable_auto_reload(false)
            .enable_code_info(inlined)
            .enable_inlined_fns(inlined)
            .enable_demangling(true)
            .build();
        Self { inner, mode, user: HashMap::new(), kernel: HashMap::new(), files: HashMap::new() }
    }

    /// Symbolises every address of `ips` (absolute, in a process with `maps`) not seen yet,
    /// one batch per file.
    pub fn prefetch_user(&mut self, maps: &ProcessMaps, ips: impl IntoIterator<Item = u64>) {
        let mut per_file: HashMap<&Path, Vec<u64>> = HashMap::new();
        for ip in ips {
            if let Some((path, offset)) = maps.find(ip) {
                if path.as_os_str() != VDSO && !self.user.contains_key(&(path.to_path_buf(), offset)) {
                    per_file.entry(path).or_default().push(offset);
                }
            }
        }
        for (path, mut offsets) in per_file {
            offsets.sort_unstable();
            offsets.dedup();
            let frames = self.file_frames(path, &offsets);
            for (offset, frame) in offsets.into_iter().zip(frames) {
                self.user.insert((path.to_path_buf(), offset), frame);
            }
        }
    }

    /// The functions at `offsets` (sorted file offsets) of the ELF file `path`.
    fn file_frames(&mut self, path: &Path, offsets: &[u64]) -> Vec<UserFrame> {
        let unknown = |why| UserFrame { name: Err(why), inlined: Vec::new() };
        let info = self.files.entry(path.to_path_buf()).or_insert_with(|| ElfInfo::read(path)).clone();
        let Some(info) = info else { return offsets.iter().map(|_| unknown(Unresolved::UnreadableObject)).collect() };
        // The file's own symbols first (`.symtab`, else the exported `.dynsym`).
        let debug = self.mode != Mode::Symtab;
        let Ok(mut found) = self.lookup(path, debug, Input::FileOffset(offsets)) else {
            return offsets.iter().map(|_| unknown(Unresolved::UnreadableObject)).collect();
        };
        // A stripped file (a distribution's libc: exported symbols only) has the rest of its
        // symbols in a separate debug file found by build-id; its code sections hold no bytes,
        // so it is asked by virtual address. (blazesym's own debug-file search yields DWARF
        // names there, `__GI___libc_malloc` for `malloc`: bench/blazesym.md.)
        if !info.symtab && !debug && found.iter().any(Option::is_none) {
            if let Some(debug_file) = &info.debug_file {
                let missing: Vec<(usize, u64)> = offsets
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| found[*i].is_none())
                    .filter_map(|(i, off)| info.virtual_address(*off).map(|va| (i, va)))
                    .collect();
                let vas: Vec<u64> = missing.iter().map(|(_, va)| *va).collect();
                if let Ok(more) = self.lookup(debug_file, false, Input::VirtOffset(&vas)) {
                    for ((i, _), f) in missing.into_iter().zip(more) {
                        found[i] = f;
                    }
                }
            }
        }
        found
            .into_iter()
            .map(|f| match f {
                Some(f) => UserFrame { name: Ok(f.name), inlined: f.inlined },
                None => unknown(Unresolved::NoSymbol),
            })
            .collect()
    }

    /// blazesym on one ELF file (`debug`: DWARF and debug files first): per address its
    /// function. A symbol without a size that lies inside a sized function (an assembly label,
    /// `skip_iv_len_12_init_IV` in OpenSSL's AES-GCM) gives way to that function: blazesym
    /// takes labels (`STT_NOTYPE`) for functions, the catalog names the enclosing function.
    fn lookup(&self, path: &Path, debug: bool, input: Input<&[u64]>) -> Result<Vec<Option<Found>>, ::blazesym::Error> {
        let mut elf = Elf::new(path);
        elf.debug_syms = debug;
        let src = Source::Elf(elf);
        let found = self.inner.symbolize(&src, input)?;
        Ok(found
            .into_iter()
            .map(|sym| {
                let Symbolized::Sym(s) = sym else { return None };
                let mut f = Found {
                    name: s.name.to_string(),
                    start: s.addr,
                    offset: s.offset as u64,
                    sized: s.size.is_some(),
                    inlined: s.inlined.iter().map(|f| f.name.to_string()).collect(),
                };
                // A few labels may follow each other inside one function.
                for _ in 0..8 {
                    if f.sized || f.start == 0 {
                        break;
                    }
                    let before = [f.start - 1];
                    let Ok(outer) = self.inner.symbolize(&src, Input::VirtOffset(&before)) else { break };
                    match outer.into_iter().next() {
                        Some(Symbolized::Sym(o)) if o.size.is_none_or(|n| o.addr + n as u64 > f.start + f.offset) => {
                            f = Found {
                                name: o.name.to_string(),
                                offset: f.start + f.offset - o.addr,
                                start: o.addr,
                                sized: o.size.is_some(),
                                inlined: f.inlined,
                            };
                        }
                        _ => break,
                    }
                }
                Some(f)
            })
            .collect())
    }

    /// The user frame at `ip` and its file (`None` if outside every mapped file).
    pub(super) fn user_function(&mut self, maps: &ProcessMaps, ip: u64) -> Option<(PathBuf, UserFrame)> {
        let (path, offset) = maps.find(ip)?;
        if path.as_os_str() == VDSO {
            return Some((path.to_path_buf(), UserFrame { name: Ok(VDSO.to_string()), inlined: Vec::new() }));
        }
        let key = (path.to_path_buf(), offset);
        if !self.user.contains_key(&key) {
            self.prefetch_user(maps, [ip]);
        }
        self.user.get(&key).map(|f| (key.0.clone(), f.clone()))
    }

    /// Symbolises the kernel addresses of `ips` not seen yet (kallsyms; no vmlinux search).
    pub fn prefetch_kernel(&mut self, ips: impl IntoIterator<Item = u64>) {
        let mut todo: Vec<u64> = ips.into_iter().filter(|ip| !self.kernel.contains_key(ip)).collect();
        todo.sort_unstable();
        todo.dedup();
        if todo.is_empty() {
            return;
        }
        // kallsyms, as the kernel shows it; a vmlinux search would walk the disk.
        let kernel = Kernel { vmlinux: MaybeDefault::None, debug_syms: false, ..Kernel::default() };
        let found = self.inner.symbolize(&Source::Kernel(kernel), Input::AbsAddr(&todo));
        for (i, ip) in todo.iter().enumerate() {
            let frame = match found.as_ref().map(|v| &v[i]) {
                Ok(Symbolized::Sym(s)) => Ok(s.name.to_string()),
                _ => Err(Unresolved::Kernel),
            };
            self.kernel.insert(*ip, frame);
        }
    }

    /// The kernel function containing `ip`.
    pub fn kernel_frame(&mut self, ip: u64) -> Frame {
        if !self.kernel.contains_key(&ip) {
            self.prefetch_kernel([ip]);
        }
        self.kernel.get(&ip).cloned().unwrap_or(Err(Unresolved::Kernel))
    }
}

/// Every frame of every sample as the sampler looks them up: a return address (every frame but
/// the innermost) is looked up one byte before, in the call.
fn lookup_ips(ips: &[u64]) -> impl Iterator<Item = u64> + '_ {
    ips.iter().enumerate().map(|(i, ip)| if i == 0 { *ip } else { ip.saturating_sub(1) })
}

/// One role's comparison of the two symbolizers on the same samples.
#[derive(Debug, Default)]
pub struct RoleComparison {
    /// The role.
    pub role: String,
    /// The executable (first mapped file of the role's process).
    pub program: String,
    /// Samples, and unique user and kernel addresses in them.
    pub samples: u64,
    /// Unique (pid, address) user frames.
    pub user_addresses: usize,
    /// Unique kernel frames.
    pub kernel_addresses: usize,
    /// Time to symbolise every unique address, cold (fresh symbolizer, files not yet parsed), ms:
    /// hand-written, blazesym [`Mode::Symtab`], [`Mode::Dwarf`], [`Mode::Inlined`].
    pub ms: [f64; 4],
    /// Samples with a named leaf: hand-written, blazesym.
    pub named_leaf: [u64; 2],
    /// Unique user addresses named: hand-written, blazesym.
    pub named_user: [usize; 2],
    /// Unique kernel addresses named: hand-written, blazesym.
    pub named_kernel: [usize; 2],
    /// Samples per component (family, e.g. `crypto`): hand-written, blazesym, blazesym DWARF.
    pub components: Vec<(String, [u64; 3])>,
    /// Addresses blazesym's DWARF mode names differently from the hand-written symbolizer.
    pub dwarf_differ: usize,
    /// Addresses both named, differently: count, and up to 8 (hand-written, blazesym) examples
    /// with their sample counts.
    pub differ: usize,
    /// Examples of `differ`.
    pub differ_examples: Vec<(String, String, u64)>,
    /// Addresses only one side named: (hand-written only, blazesym only).
    pub one_sided: (usize, usize),
    /// Examples of one-sided names: (name, which side, samples).
    pub one_sided_examples: Vec<(String, &'static str, u64)>,
    /// Samples with an inlined function at one of their user addresses, and such unique addresses.
    pub inlined_samples: u64,
    /// Unique user addresses with inlined functions.
    pub inlined_addresses: usize,
}

/// Runs the hand-written symbolizer and blazesym on the same `samples` (each on every unique
/// address, cold), classifies both, and reports per role what differs.
pub fn compare(
    samples: &[RawSample],
    maps: &HashMap<u32, ProcessMaps>,
    roles: &[Role],
    classifier: &Classifier,
) -> Vec<RoleComparison> {
    let empty = ProcessMaps::default();
    let mut out = Vec::new();
    for &role in roles {
        let mine: Vec<&RawSample> = samples.iter().filter(|s| s.role == role.index()).collect();
        // Unique addresses as the sampler looks them up, per process.
        let mut user: Vec<(u32, u64)> = mine.iter().flat_map(|s| lookup_ips(&s.user).map(|ip| (s.tgid, ip))).collect();
        user.sort_unstable();
        user.dedup();
        let mut kernel: Vec<u64> = mine.iter().flat_map(|s| lookup_ips(&s.kernel)).collect();
        kernel.sort_unstable();
        kernel.dedup();
        let pmaps = |pid: u32| maps.get(&pid).unwrap_or(&empty);

        // Hand-written: kallsyms parse + per-object load on first use, then lookups. Perf maps
        // (Python) are the same code on both sides and left out of both timings.
        let t = Instant::now();
        let mut hand = super::Symbolizer::new();
        let hand_user: HashMap<(u32, u64), Frame> =
            user.iter().map(|&(pid, ip)| ((pid, ip), hand.user_frame(pmaps(pid), ip))).collect();
        let hand_kernel: HashMap<u64, Frame> =
            kernel.iter().map(|&ip| (ip, hand.kernel_name(ip).map(String::from).ok_or(Unresolved::Kernel))).collect();
        let hand_ms = t.elapsed().as_secs_f64() * 1e3;

        let run_blaze = |mode: Mode| {
            let t = Instant::now();
            let mut blaze = BlazeSymbolizer::new(mode);
            let mut pids: Vec<u32> = user.iter().map(|(p, _)| *p).collect();
            pids.dedup();
            for pid in pids {
                blaze.prefetch_user(pmaps(pid), user.iter().filter(|(p, _)| *p == pid).map(|(_, ip)| *ip));
            }
            blaze.prefetch_kernel(kernel.iter().copied());
            let u: HashMap<(u32, u64), (Frame, usize)> = user
                .iter()
                .map(|&(pid, ip)| {
                    let f = blaze.user_function(pmaps(pid), ip);
                    let name = f.as_ref().map(|(_, f)| f.name.clone()).unwrap_or(Err(Unresolved::NoMapping));
                    ((pid, ip), (name, f.map(|(_, f)| f.inlined.len()).unwrap_or(0)))
                })
                .collect();
            let k: HashMap<u64, Frame> = kernel.iter().map(|&ip| (ip, blaze.kernel_frame(ip))).collect();
            (t.elapsed().as_secs_f64() * 1e3, u, k)
        };
        let (blaze_ms, blaze_user, blaze_kernel) = run_blaze(Mode::Symtab);
        let (dwarf_ms, dwarf_user, _) = run_blaze(Mode::Dwarf);
        let (inlined_ms, inlined_user, _) = run_blaze(Mode::Inlined);

        // Python's perf maps name what no file maps, on both sides alike.
        let mut perf_maps = crate::symbols::PerfMaps::default();
        let mut with_perf = |pid: u32, ip: u64, f: &Frame| match f {
            Err(Unresolved::NoMapping) => perf_maps.lookup(pid, ip).ok_or(Unresolved::NoMapping),
            other => other.clone(),
        };
        let hand_user: HashMap<(u32, u64), Frame> =
            hand_user.iter().map(|(&(pid, ip), f)| ((pid, ip), with_perf(pid, ip, f))).collect();
        let blaze_user: HashMap<(u32, u64), Frame> =
            blaze_user.iter().map(|(&(pid, ip), (f, _))| ((pid, ip), with_perf(pid, ip, f))).collect();
        let dwarf_user: HashMap<(u32, u64), Frame> =
            dwarf_user.iter().map(|(&(pid, ip), (f, _))| ((pid, ip), with_perf(pid, ip, f))).collect();

        let mut c = RoleComparison {
            role: role.to_string(),
            program: maps
                .get(&mine.first().map(|s| s.tgid).unwrap_or(0))
                .and_then(|m| m.entries.first())
                .map(|e| e.3.display().to_string())
                .unwrap_or_default(),
            user_addresses: user.len(),
            kernel_addresses: kernel.len(),
            ms: [hand_ms, blaze_ms, dwarf_ms, inlined_ms],
            dwarf_differ: user.iter().filter(|a| hand_user.get(*a) != dwarf_user.get(*a)).count(),
            named_user: [
                hand_user.values().filter(|f| f.is_ok()).count(),
                blaze_user.values().filter(|f| f.is_ok()).count(),
            ],
            named_kernel: [
                hand_kernel.values().filter(|f| f.is_ok()).count(),
                blaze_kernel.values().filter(|f| f.is_ok()).count(),
            ],
            ..Default::default()
        };
        // Per-address weight: samples holding it.
        let mut weight: HashMap<(u32, u64), u64> = HashMap::new();
        let mut kweight: HashMap<u64, u64> = HashMap::new();
        let mut components: HashMap<String, [u64; 3]> = HashMap::new();
        for s in &mine {
            c.samples += s.count;
            let u: Vec<(u32, u64)> = lookup_ips(&s.user).map(|ip| (s.tgid, ip)).collect();
            let k: Vec<u64> = lookup_ips(&s.kernel).collect();
            for a in &u {
                *weight.entry(*a).or_default() += s.count;
            }
            for a in &k {
                *kweight.entry(*a).or_default() += s.count;
            }
            if u.iter().any(|a| inlined_user.get(a).is_some_and(|(_, n)| *n > 0)) {
                c.inlined_samples += s.count;
            }
            let sides = [(&hand_user, &hand_kernel), (&blaze_user, &blaze_kernel), (&dwarf_user, &blaze_kernel)];
            for (side, (uf, kf)) in sides.into_iter().enumerate() {
                let un: Vec<Option<&str>> = u.iter().map(|a| uf.get(a).and_then(|f| f.as_deref().ok())).collect();
                let kn: Vec<Option<&str>> = k.iter().map(|a| kf.get(a).and_then(|f| f.as_deref().ok())).collect();
                let component = crate::stack_rules::family(classifier.classify_frames(&kn, &un)).to_string();
                components.entry(component).or_default()[side] += s.count;
                if side < 2 && kn.first().or(un.first()).is_some_and(|f| f.is_some()) {
                    c.named_leaf[side] += s.count;
                }
            }
        }
        c.inlined_addresses = inlined_user.values().filter(|(_, n)| *n > 0).count();
        let mut components: Vec<(String, [u64; 3])> = components.into_iter().collect();
        components.sort_by(|a, b| b.1[0].cmp(&a.1[0]).then(a.0.cmp(&b.0)));
        c.components = components;
        // Disagreements, user then kernel, heaviest first.
        let mut differ: Vec<(String, String, u64)> = Vec::new();
        let mut one_sided: Vec<(String, &'static str, u64)> = Vec::new();
        let pairs =
            user.iter().map(|a| (hand_user.get(a), blaze_user.get(a), weight.get(a).copied().unwrap_or(0))).chain(
                kernel.iter().map(|a| (hand_kernel.get(a), blaze_kernel.get(a), kweight.get(a).copied().unwrap_or(0))),
            );
        for (h, b, w) in pairs {
            match (h, b) {
                (Some(Ok(h)), Some(Ok(b))) if h != b => differ.push((h.clone(), b.clone(), w)),
                (Some(Ok(h)), Some(Err(_))) => one_sided.push((h.clone(), "hand-written", w)),
                (Some(Err(_)), Some(Ok(b))) => one_sided.push((b.clone(), "blazesym", w)),
                _ => {}
            }
        }
        c.differ = differ.len();
        c.one_sided = (
            one_sided.iter().filter(|o| o.1 == "hand-written").count(),
            one_sided.iter().filter(|o| o.1 == "blazesym").count(),
        );
        differ.sort_by_key(|d| std::cmp::Reverse(d.2));
        one_sided.sort_by_key(|o| std::cmp::Reverse(o.2));
        c.differ_examples = differ.into_iter().take(8).collect();
        c.one_sided_examples = one_sided.into_iter().take(6).collect();
        out.push(c);
    }
    out
}

impl RoleComparison {
    /// Markdown: one block per role.
    pub fn markdown(&self) -> String {
        use std::fmt::Write;
        let pct = |n: u64| 100.0 * n as f64 / self.samples.max(1) as f64;
        let per = |ms: f64| 1e3 * ms / (self.user_addresses + self.kernel_addresses).max(1) as f64;
        let mut s = String::new();
        let _ = writeln!(s, "#### {} ({}), {} samples", self.role, self.program, self.samples);
        let _ = writeln!(
            s,
            "- unique addresses: {} user, {} kernel; named by hand-written / blazesym: user {} / {}, kernel {} / {}",
            self.user_addresses,
            self.kernel_addresses,
            self.named_user[0],
            self.named_user[1],
            self.named_kernel[0],
            self.named_kernel[1]
        );
        let _ = writeln!(
            s,
            "- time, cold: hand-written {:.1} ms ({:.1} us/address), blazesym {:.1} ms ({:.1} us/address, {:.2}x); \
             blazesym DWARF {:.1} ms ({:.2}x), DWARF + inlined {:.1} ms ({:.2}x)",
            self.ms[0],
            per(self.ms[0]),
            self.ms[1],
            per(self.ms[1]),
            self.ms[1] / self.ms[0].max(1e-9),
            self.ms[2],
            self.ms[2] / self.ms[0].max(1e-9),
            self.ms[3],
            self.ms[3] / self.ms[0].max(1e-9)
        );
        let _ = writeln!(
            s,
            "- named leaf: hand-written {:.1}%, blazesym {:.1}%; inlined functions at {} addresses, in {:.1}% of samples",
            pct(self.named_leaf[0]),
            pct(self.named_leaf[1]),
            self.inlined_addresses,
            pct(self.inlined_samples)
        );
        let comps: Vec<String> = self
            .components
            .iter()
            .map(|(n, [h, b, d])| format!("{n} {:.1}/{:.1}/{:.1}", pct(*h), pct(*b), pct(*d)))
            .collect();
        let _ = writeln!(s, "- components % (hand-written/blazesym/blazesym DWARF): {}", comps.join(", "));
        let _ =
            writeln!(s, "- blazesym DWARF names {} user addresses differently from hand-written", self.dwarf_differ);
        let _ = writeln!(
            s,
            "- disagreements: {} addresses named differently; named by one side only: hand-written {}, blazesym {}",
            self.differ, self.one_sided.0, self.one_sided.1
        );
        for (h, b, w) in &self.differ_examples {
            let _ = writeln!(s, "  - `{h}` vs `{b}` ({w} samples)");
        }
        for (n, side, w) in &self.one_sided_examples {
            let _ = writeln!(s, "  - only {side}: `{n}` ({w} samples)");
        }
        s
    }
}

/// With `NESQUIC_SYMBOLIZER_COMPARE=FILE` set, appends [`compare`]'s markdown for these samples
/// to FILE (the perf maps are still there at this point: the engine deletes them afterwards).
pub fn compare_if_asked(
    samples: &[RawSample],
    maps: &HashMap<u32, ProcessMaps>,
    roles: &[Role],
    classifier: &Classifier,
) {
    use std::io::Write;
    let Some(file) = std::env::var_os("NESQUIC_SYMBOLIZER_COMPARE") else { return };
    let text: String = compare(samples, maps, roles, classifier).iter().map(RoleComparison::markdown).collect();
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = written {
        eprintln!("nesquic: symbolizer comparison not written to {}: {e}", Path::new(&file).display());
    }
}
