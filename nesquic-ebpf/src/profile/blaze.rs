//! Symbolization on blazesym (libbpf's symbolizer, issue 37): the sampled addresses of a process
//! and of the kernel turned into function names, for [`super::build`]. Samples are symbolised
//! after the processes exit, when `/proc/PID` (blazesym's process source) is gone: each user
//! address becomes (file, file offset) with the map read while the process ran ([`ProcessMaps`])
//! and is symbolised against that ELF file's symbols. Names come back demangled as
//! [`crate::symbols::demangle`] makes them (Rust without its hash). Measured against the
//! hand-written symbolizer it replaced on every LUT's stacks: bench/blazesym.md.
//!
//! Three things blazesym does not do the way the catalog needs, kept here:
//! - Names come from ELF symbols, not DWARF: blazesym's DWARF names for Rust lack the path
//!   (`run` for `tokio::runtime::scheduler::multi_thread::worker::run`), which no glob matches.
//! - A stripped library (Debian's libc: `.dynsym` only) gets the rest of its symbols from its
//!   build-id debug file, asked by virtual address; blazesym's own debug-file search yields DWARF
//!   names there (`__GI___libc_malloc` for `malloc`).
//! - blazesym takes assembly labels (`STT_NOTYPE`, no size) for functions: OpenSSL's
//!   `skip_iv_len_12_init_IV` inside `ossl_aes_gcm_setiv_avx512`; the enclosing sized function
//!   is taken instead.
//!
//! Code generated at run time (CPython's perf trampolines) is named by [`crate::symbols::PerfMap`]:
//! blazesym reads perf maps only through its process source.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ::blazesym::symbolize::source::{Elf, Kernel, Source};
use ::blazesym::symbolize::{Input, Symbolized, Symbolizer};
use ::blazesym::MaybeDefault;

use super::{FoundFunction, ProcessMaps, RawSample, Unresolved, VDSO};

/// A symbolised address: a name, or why there is none.
pub type Frame = Result<String, Unresolved>;

/// blazesym behind the sampler's interface. Results are kept per (file, offset) and per kernel
/// address: each is symbolised once, whatever the number of samples holding it.
pub struct BlazeSymbolizer {
    inner: Symbolizer,
    user: HashMap<(PathBuf, u64), UserFrame>,
    kernel: HashMap<u64, Frame>,
    /// What each file's headers say (`None`: unreadable).
    files: HashMap<PathBuf, Option<ElfInfo>>,
    /// Where separate debug files are, by build-id (`<root>/.build-id/ab/cdef….debug`).
    debug_root: PathBuf,
    /// Code bytes read from mapped files, per (file, offset): to tell frameless functions and
    /// return addresses (`frameless`).
    pub(super) code: HashMap<(PathBuf, u64), Option<[u8; super::frameless::CODE_BYTES]>>,
}

/// A user address's function: its name and the file offset where the function starts.
#[derive(Debug, Clone)]
struct UserFrame {
    name: Frame,
    start_offset: Option<u64>,
}

/// A function blazesym found: name, start (virtual address), the address's offset into it.
struct Found {
    name: String,
    start: u64,
    offset: u64,
    /// Whether the symbol has a size (else it may be a label inside another function).
    sized: bool,
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
    fn read(path: &Path, debug_root: &Path) -> Option<Self> {
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
        // As Debian's `-dbg` packages install them.
        let debug_file = (!symtab)
            .then(|| elf.build_id().ok().flatten())
            .flatten()
            .map(|id| id.iter().map(|b| format!("{b:02x}")).collect::<String>())
            .filter(|hex| hex.len() > 2)
            .map(|hex| debug_root.join(format!(".build-id/{}/{}.debug", &hex[..2], &hex[2..])))
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

impl Default for BlazeSymbolizer {
    fn default() -> Self {
        Self::new()
    }
}

impl BlazeSymbolizer {
    /// Function names only: no source lines, no inlined functions (their names are DWARF's).
    pub fn new() -> Self {
        let inner = Symbolizer::builder()
            // The files do not change during a run: no stat per lookup.
            .enable_auto_reload(false)
            .enable_code_info(false)
            .enable_inlined_fns(false)
            .enable_demangling(true)
            .build();
        Self {
            inner,
            user: HashMap::new(),
            kernel: HashMap::new(),
            files: HashMap::new(),
            debug_root: PathBuf::from("/usr/lib/debug"),
            code: HashMap::new(),
        }
    }

    /// Symbolises every frame of `samples` in one batch per file and one for the kernel:
    /// blazesym parses a file once per call, so one call per address costs more.
    pub fn prefetch(&mut self, samples: &[RawSample], maps: &HashMap<u32, ProcessMaps>) {
        let empty = ProcessMaps::default();
        let mut pids: Vec<u32> = samples.iter().map(|s| s.tgid).collect();
        pids.sort_unstable();
        pids.dedup();
        for pid in pids {
            let all = maps.get(&pid).unwrap_or(&empty);
            // Each stack in the address space it was sampled in (`ProcessMaps::for_stack`).
            let mut spaces: Vec<(&ProcessMaps, Vec<u64>)> = Vec::new();
            for s in samples.iter().filter(|s| s.tgid == pid) {
                let space = all.for_stack(&s.user);
                match spaces.iter_mut().find(|(m, _)| std::ptr::eq(*m, space)) {
                    Some((_, ips)) => ips.extend(lookup_ips(&s.user)),
                    None => spaces.push((space, lookup_ips(&s.user).collect())),
                }
            }
            for (space, ips) in spaces {
                self.prefetch_user(space, ips);
            }
        }
        self.prefetch_kernel(samples.iter().flat_map(|s| lookup_ips(&s.kernel)));
    }

    /// Symbolises the addresses of `ips` (absolute, in a process with `maps`) not seen yet, one
    /// batch per file.
    fn prefetch_user(&mut self, maps: &ProcessMaps, ips: impl IntoIterator<Item = u64>) {
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

    /// The functions at `offsets` (file offsets) of the ELF file `path`.
    fn file_frames(&mut self, path: &Path, offsets: &[u64]) -> Vec<UserFrame> {
        let unknown = |why| UserFrame { name: Err(why), start_offset: None };
        let info =
            self.files.entry(path.to_path_buf()).or_insert_with(|| ElfInfo::read(path, &self.debug_root)).clone();
        let Some(info) = info else { return offsets.iter().map(|_| unknown(Unresolved::UnreadableObject)).collect() };
        // The file's own symbols first (`.symtab`, else the exported `.dynsym`).
        let Ok(mut found) = self.lookup(path, Input::FileOffset(offsets)) else {
            return offsets.iter().map(|_| unknown(Unresolved::UnreadableObject)).collect();
        };
        // What a stripped file does not name, its debug file may: its code sections hold no
        // bytes, so it is asked by virtual address.
        if let (false, Some(debug_file)) = (info.symtab, &info.debug_file) {
            let missing: Vec<(usize, u64)> = (0..offsets.len())
                .filter(|i| found[*i].is_none())
                .filter_map(|i| info.virtual_address(offsets[i]).map(|va| (i, va)))
                .collect();
            let addresses: Vec<u64> = missing.iter().map(|(_, va)| *va).collect();
            if let (false, Ok(more)) = (missing.is_empty(), self.lookup(debug_file, Input::VirtOffset(&addresses))) {
                for ((i, _), f) in missing.into_iter().zip(more) {
                    found[i] = f;
                }
            }
        }
        offsets
            .iter()
            .zip(found)
            .map(|(offset, f)| match f {
                Some(f) => UserFrame { name: Ok(f.name), start_offset: offset.checked_sub(f.offset) },
                None => unknown(Unresolved::NoSymbol),
            })
            .collect()
    }

    /// blazesym on one ELF file's symbols: per address its function, the enclosing sized
    /// function for a label (see the module's notes).
    fn lookup(&self, path: &Path, input: Input<&[u64]>) -> Result<Vec<Option<Found>>, ::blazesym::Error> {
        let src = Source::Elf(Elf { debug_syms: false, ..Elf::new(path) });
        let found = self.inner.symbolize(&src, input)?;
        Ok(found
            .into_iter()
            .map(|sym| {
                let Symbolized::Sym(s) = sym else { return None };
                let mut f =
                    Found { name: s.name.to_string(), start: s.addr, offset: s.offset as u64, sized: s.size.is_some() };
                // A few labels may follow each other inside one function.
                for _ in 0..8 {
                    if f.sized || f.start == 0 {
                        break;
                    }
                    let before = [f.start - 1];
                    let Ok(outer) = self.inner.symbolize(&src, Input::VirtOffset(&before)) else { break };
                    let address = f.start + f.offset;
                    match outer.into_iter().next() {
                        Some(Symbolized::Sym(o)) if o.size.is_none_or(|n| o.addr + n as u64 > address) => {
                            f = Found {
                                name: o.name.to_string(),
                                offset: address - o.addr,
                                start: o.addr,
                                sized: o.size.is_some(),
                            };
                        }
                        _ => break,
                    }
                }
                Some(f)
            })
            .collect())
    }

    /// The user function containing `ip`, or why there is none.
    pub fn user_frame(&mut self, maps: &ProcessMaps, ip: u64) -> Frame {
        self.function_at(maps, ip).map(|f| f.name)
    }

    /// The user function containing `ip`: its name, file, and where it and `ip` are in the file.
    pub(super) fn function_at(&mut self, maps: &ProcessMaps, ip: u64) -> Result<FoundFunction, Unresolved> {
        let (path, ip_offset) = maps.find(ip).ok_or(Unresolved::NoMapping)?;
        if path.as_os_str() == VDSO {
            return Ok(FoundFunction { name: VDSO.to_string(), path: None, start_offset: 0, ip_offset: 0 });
        }
        let key = (path.to_path_buf(), ip_offset);
        if !self.user.contains_key(&key) {
            self.prefetch_user(maps, [ip]);
        }
        let frame = self.user.get(&key).ok_or(Unresolved::NoSymbol)?;
        let name = frame.name.clone()?;
        Ok(FoundFunction { name, path: Some(key.0), start_offset: frame.start_offset.unwrap_or(ip_offset), ip_offset })
    }

    /// Symbolises the kernel addresses of `ips` not seen yet.
    fn prefetch_kernel(&mut self, ips: impl IntoIterator<Item = u64>) {
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
            let frame = match found.as_ref().map(|v| v.get(i)) {
                Ok(Some(Symbolized::Sym(s))) => Ok(s.name.to_string()),
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

/// The addresses of a stack as the sampler looks them up: every frame but the innermost is a
/// return address, looked up one byte before, in the call.
fn lookup_ips(ips: &[u64]) -> impl Iterator<Item = u64> + '_ {
    ips.iter().enumerate().map(|(i, ip)| if i == 0 { *ip } else { ip.saturating_sub(1) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Assembles `source` into a shared object at `dir/name` (the system's `cc`).
    fn shared_object(dir: &Path, name: &str, source: &str) -> PathBuf {
        let (src, out) = (dir.join(format!("{name}.s")), dir.join(name));
        std::fs::write(&src, source).expect("write source");
        let status = Command::new("cc")
            .args(["-shared", "-nostdlib", "-Wl,--build-id", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .expect("run cc");
        assert!(status.success(), "cc {}", src.display());
        out
    }

    /// The whole file mapped at `base` (as a loader maps a small object's text).
    fn mapped(path: &Path, base: u64) -> ProcessMaps {
        let len = std::fs::metadata(path).expect("stat").len();
        ProcessMaps { entries: vec![(base, base + len, 0, path.to_path_buf())], earlier: Vec::new() }
    }

    /// `name`'s file offset in `path`'s symbol table.
    fn offset_of(path: &Path, name: &str) -> u64 {
        let symbols = crate::symbols::ObjectSymbols::load(path).expect("symbols");
        symbols.functions.iter().find(|f| f.raw == name).expect("symbol").file_offset
    }

    // A function with a local label (`STT_NOTYPE`, no size) inside, as OpenSSL's and aws-lc's
    // AES-GCM assembly has them.
    const LABELLED: &str = ".text\n.globl outer\n.type outer,@function\nouter:\n  nop\n  nop\n\
        inner_label:\n  nop\n  nop\n  ret\n.size outer, .-outer\n\
        .globl after\n.type after,@function\nafter:\n  ret\n.size after, .-after\n";

    #[test]
    fn an_assembly_label_inside_a_function_names_the_function() {
        let dir = tempfile::tempdir().expect("tempdir");
        let so = shared_object(dir.path(), "labelled.so", LABELLED);
        let outer = offset_of(&so, "outer");
        let base = 0x7f00_0000_0000;
        let maps = mapped(&so, base);
        let mut s = BlazeSymbolizer::new();
        // Three bytes in: past the label (two one-byte nops).
        let f = s.function_at(&maps, base + outer + 3).expect("named");
        assert_eq!((f.name.as_str(), f.start_offset, f.ip_offset), ("outer", outer, outer + 3));
        assert_eq!(s.user_frame(&maps, base + outer), Ok("outer".to_string()));
        assert_eq!(s.user_frame(&maps, base + offset_of(&so, "after")), Ok("after".to_string()));
        assert_eq!(s.user_frame(&maps, base - 1), Err(Unresolved::NoMapping));
    }

    #[test]
    fn a_stripped_object_is_named_from_its_build_id_debug_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        // `exported` is in .dynsym; `local_fn` only in .symtab, which `strip` removes.
        let source = ".text\n.globl exported\n.type exported,@function\nexported:\n  ret\n.size exported, .-exported\n\
            .type local_fn,@function\nlocal_fn:\n  nop\n  ret\n.size local_fn, .-local_fn\n";
        let so = shared_object(dir.path(), "stripped.so", source);
        let local = offset_of(&so, "local_fn");
        let exported = offset_of(&so, "exported");
        let id = {
            use object::Object;
            let data = std::fs::read(&so).expect("read");
            let file = object::File::parse(&*data).expect("parse");
            let id = file.build_id().expect("notes").expect("build-id");
            id.iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        let root = dir.path().join("debug");
        let debug = root.join(format!(".build-id/{}/{}.debug", &id[..2], &id[2..]));
        std::fs::create_dir_all(debug.parent().expect("dir")).expect("mkdir");
        let ok = |c: &mut Command| c.status().expect("run").success();
        assert!(ok(Command::new("objcopy").arg("--only-keep-debug").arg(&so).arg(&debug)));
        assert!(ok(Command::new("strip").arg("--strip-all").arg(&so)));
        let base = 0x7f00_0000_0000;
        let maps = mapped(&so, base);
        let mut s = BlazeSymbolizer { debug_root: root, ..BlazeSymbolizer::new() };
        assert_eq!(s.user_frame(&maps, base + exported), Ok("exported".to_string()));
        assert_eq!(s.user_frame(&maps, base + local + 1), Ok("local_fn".to_string()));
        // Without the debug file, the local function has no name.
        let mut bare = BlazeSymbolizer { debug_root: dir.path().join("none"), ..BlazeSymbolizer::new() };
        assert_eq!(bare.user_frame(&maps, base + local + 1), Err(Unresolved::NoSymbol));
    }
}
