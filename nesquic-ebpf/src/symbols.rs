//! Function symbols of ELF objects, made matchable: Rust and C++ names demangled (without the
//! per-build hash), library version prefixes removed (`aws_lc_0_47_0_`, `ring_core_0_17_8_`),
//! and the file offset computed for attaching; and the names of code generated at run time, from
//! the perf map a process writes (`PerfMap`: CPython's Python functions).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

use crate::EbpfError;

/// One function in one object file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSymbol {
    /// Name as stored (mangled).
    pub raw: String,
    /// Demangled, without hash suffix; equal to `raw` for C names.
    pub demangled: String,
    /// `demangled` without a library version prefix.
    pub normalized: String,
    /// Virtual address (`st_value`).
    pub address: u64,
    /// Size in bytes (0 if unknown).
    pub size: u64,
    /// Offset in the file, what the kernel's uprobe wants.
    pub file_offset: u64,
    /// The function's first bytes (to choose a cheap probe site, see `sites`).
    pub prologue: [u8; 8],
}

/// The function symbols of one object file.
#[derive(Debug, Clone)]
pub struct ObjectSymbols {
    /// The file.
    pub path: PathBuf,
    /// Its functions, one per address (aliases folded, first name kept).
    pub functions: Vec<FunctionSymbol>,
}

impl ObjectSymbols {
    /// Reads `path`'s symbol table (and dynamic symbols). A file without `.symtab` and without
    /// exported functions is reported as stripped: probes need symbols.
    pub fn load(path: &Path) -> Result<Self, EbpfError> {
        let data =
            std::fs::read(path).map_err(|source| EbpfError::Io { what: format!("read {}", path.display()), source })?;
        let file = object::File::parse(&*data)
            .map_err(|e| EbpfError::Object { path: path.to_path_buf(), reason: e.to_string() })?;
        let mut functions = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for symbol in file.symbols().chain(file.dynamic_symbols()) {
            if symbol.kind() != SymbolKind::Text || !symbol.is_definition() || symbol.address() == 0 {
                continue;
            }
            let Ok(raw) = symbol.name() else { continue };
            if raw.is_empty() || !seen.insert(symbol.address()) {
                continue;
            }
            let Some(file_offset) = symbol
                .section_index()
                .and_then(|i| file.section_by_index(i).ok())
                .and_then(|s| s.file_range().map(|(off, _)| symbol.address() - s.address() + off))
            else {
                continue;
            };
            let demangled = demangle(raw);
            let normalized = strip_version_prefix(&demangled).to_string();
            let mut prologue = [0u8; 8];
            if let Some(code) = usize::try_from(file_offset).ok().and_then(|o| data.get(o..o + 8)) {
                prologue.copy_from_slice(code);
            }
            functions.push(FunctionSymbol {
                raw: raw.to_string(),
                demangled,
                normalized,
                address: symbol.address(),
                size: symbol.size(),
                file_offset,
                prologue,
            });
        }
        if file.symbol_table().is_none() && functions.is_empty() {
            return Err(EbpfError::Stripped { path: path.to_path_buf() });
        }
        Ok(Self { path: path.to_path_buf(), functions })
    }
}

/// Rust (legacy and v0) or C++ demangling; C names come back unchanged. The Rust hash suffix
/// (`::h0123abcd…`) is dropped: it changes with every build.
pub fn demangle(raw: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(raw) {
        return format!("{d:#}");
    }
    if raw.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(raw) {
            if let Ok(s) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return s;
            }
        }
    }
    raw.to_string()
}

/// Drops a `<lib>_<major>_<minor>_<patch>_` prefix, as aws-lc and ring put on their C symbols
/// (`aws_lc_0_47_0_EVP_AEAD_CTX_seal` -> `EVP_AEAD_CTX_seal`).
pub fn strip_version_prefix(name: &str) -> &str {
    let bytes = name.as_bytes();
    // Look for "_D_D_D_" (D = digits) starting within the first 32 bytes, after a letter prefix.
    for start in 1..name.len().min(32) {
        if bytes[start] != b'_' || !bytes[..start].iter().all(|b| b.is_ascii_lowercase() || *b == b'_') {
            continue;
        }
        let mut i = start;
        let mut groups = 0;
        while groups < 3 {
            if bytes.get(i) != Some(&b'_') {
                break;
            }
            let digits = bytes[i + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
            if digits == 0 {
                break;
            }
            i += 1 + digits;
            groups += 1;
        }
        if groups == 3 && bytes.get(i) == Some(&b'_') && i + 1 < name.len() {
            return &name[i + 1..];
        }
    }
    name
}

/// Up to `n` symbols that look most like `pattern` (shared words, then shorter names): for
/// "pattern matched nothing" errors.
pub fn nearest<'a>(pattern: &str, objects: &'a [ObjectSymbols], n: usize) -> Vec<&'a FunctionSymbol> {
    let words: Vec<String> = pattern
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.len() >= 3)
        .map(str::to_ascii_lowercase)
        .collect();
    if words.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(usize, usize, &FunctionSymbol)> = objects
        .iter()
        .flat_map(|o| o.functions.iter())
        .filter_map(|f| {
            let name = f.normalized.to_ascii_lowercase();
            let score = words.iter().filter(|w| name.contains(w.as_str())).count();
            (score > 0).then_some((score, f.normalized.len(), f))
        })
        .collect();
    // Most shared words first; among those, the smallest edit distance to the pattern
    // (so a typo like `..._tik` finds `..._tick` before `..._hot`).
    let literal: String = pattern.chars().filter(|c| !matches!(c, '*' | '?' | '[' | ']' | '{' | '}')).collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.truncate(2000);
    let mut ranked: Vec<(usize, usize, &FunctionSymbol)> =
        scored.into_iter().map(|(words, _, f)| (words, edit_distance(&literal, &f.normalized), f)).collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    ranked.dedup_by(|a, b| a.2.normalized == b.2.normalized);
    ranked.into_iter().take(n).map(|(_, _, f)| f).collect()
}

/// Levenshtein distance (bytes).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Names of code a process generated at run time, from the `/tmp/perf-PID.map` file it wrote
/// (the format perf reads: `START SIZE name` per line, hex). CPython 3.12+ writes one line per
/// Python function when its perf trampolines are on (`-X perf`,
/// `sys.activate_stack_trampoline("perf")`): each function gets a small trampoline in anonymous
/// executable memory that calls the interpreter, so a frame-pointer walk through an interpreter
/// built with frame pointers has the trampoline's return address between each pair of
/// `_PyEval_EvalFrameDefault` frames. Those names (`py::Class.method:/path/module.py`) become
/// `py::package.module::Class.method`, what the component rules match.
#[derive(Debug, Clone, Default)]
pub struct PerfMap {
    /// (start, end, name), sorted by start.
    entries: Vec<(u64, u64, String)>,
}

impl PerfMap {
    /// Reads `/tmp/perf-PID.map`; `None` if the process wrote none, or the file is not one it
    /// could have written ([`open_perf_map`]: skipped with a warning).
    pub fn load(pid: u32) -> Option<Self> {
        use std::io::Read;
        let path = perf_map_path(pid);
        let file = match open_perf_map(pid) {
            Ok(file) => file?,
            Err(why) => {
                log::warn!("{}: not read ({why})", path.display());
                return None;
            }
        };
        let mut bytes = Vec::new();
        // Bounded again while reading: the process may still be appending.
        file.take(PERF_MAP_MAX_BYTES).read_to_end(&mut bytes).ok()?;
        Some(Self::parse(&String::from_utf8_lossy(&bytes)))
    }

    /// Parses a perf map's text; malformed lines are skipped (the file is appended to while the
    /// process runs, its last line may be cut).
    pub fn parse(text: &str) -> Self {
        let mut modules = HashMap::new();
        let mut entries: Vec<(u64, u64, String)> = text
            .lines()
            .filter_map(|line| {
                let mut parts = line.splitn(3, ' ');
                let start = u64::from_str_radix(parts.next()?, 16).ok()?;
                let size = u64::from_str_radix(parts.next()?, 16).ok()?;
                let name = parts.next()?.trim();
                (size > 0 && !name.is_empty()).then(|| (start, start + size, python_frame_name(name, &mut modules)))
            })
            .collect();
        entries.sort_by_key(|e| e.0);
        Self { entries }
    }

    /// The name of the code containing `ip`.
    pub fn lookup(&self, ip: u64) -> Option<&str> {
        let i = self.entries.partition_point(|e| e.0 <= ip).checked_sub(1)?;
        let (_, end, name) = &self.entries[i];
        (ip < *end).then_some(name.as_str())
    }

    /// Entries read.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry was read.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Largest perf map read: CPython writes ~100 bytes a Python function, ~250 KB a process; a larger
/// file is not one of ours.
pub const PERF_MAP_MAX_BYTES: u64 = 64 << 20;

/// Where process `pid` writes its perf map.
pub fn perf_map_path(pid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/perf-{pid}.map"))
}

/// Opens process `pid`'s perf map if it is one the process could have written. /tmp is
/// everyone's: another user can create `perf-PID.map` for a pid to come (a link to a file only
/// root may read, a huge file, misleading names), and root reads it. Accepted: a regular file,
/// not a link, owned by root, by us (the LUT processes are our children) or by the process's uid
/// while it lives, at most [`PERF_MAP_MAX_BYTES`]. `Ok(None)`: there is none; `Err`: why it is
/// refused.
pub fn open_perf_map(pid: u32) -> Result<Option<std::fs::File>, String> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(perf_map_path(pid))
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err("a symbolic link".into()),
        Err(e) => return Err(e.to_string()),
    };
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let process = std::fs::metadata(format!("/proc/{pid}")).ok().map(|m| m.uid());
    if meta.uid() != 0 && meta.uid() != me && Some(meta.uid()) != process {
        return Err(format!("owned by uid {}, neither root, nor us, nor the process", meta.uid()));
    }
    if meta.len() > PERF_MAP_MAX_BYTES {
        return Err(format!("{} bytes, more than the {PERF_MAP_MAX_BYTES} a process writes", meta.len()));
    }
    Ok(Some(file))
}

/// Removes process `pid`'s perf map once read, only if [`open_perf_map`] accepts it: nesquic
/// never deletes a file in /tmp that another user placed there.
pub fn remove_perf_map(pid: u32) {
    if let Ok(Some(_)) = open_perf_map(pid) {
        let _ = std::fs::remove_file(perf_map_path(pid));
    }
}

/// Perf maps per process, each read once (after the processes are gone: the files stay).
#[derive(Debug, Default)]
pub struct PerfMaps {
    maps: HashMap<u32, Option<PerfMap>>,
}

impl PerfMaps {
    /// The run-time code name at `ip` in process `pid`, if it wrote a perf map naming it.
    pub fn lookup(&mut self, pid: u32, ip: u64) -> Option<String> {
        self.maps.entry(pid).or_insert_with(|| PerfMap::load(pid)).as_ref()?.lookup(ip).map(str::to_string)
    }
}

/// `py::QuicConnection.receive_datagram:/venv/.../site-packages/aioquic/quic/connection.py` ->
/// `py::aioquic.quic.connection::QuicConnection.receive_datagram`: the module as Python imports it
/// (the file's directories upwards while they are packages, i.e. hold `__init__.py`), so rules
/// match on modules whatever the venv's path. `<frozen importlib._bootstrap>` becomes
/// `importlib._bootstrap`; a name in another format is kept as it is. `modules` caches per file.
pub fn python_frame_name(raw: &str, modules: &mut HashMap<String, String>) -> String {
    let Some((function, file)) = raw.strip_prefix("py::").and_then(|rest| rest.split_once(':')) else {
        return raw.to_string();
    };
    let module = modules.entry(file.to_string()).or_insert_with(|| python_module(file));
    format!("py::{module}::{function}")
}

/// The dotted module name of a Python source file (see [`python_frame_name`]).
fn python_module(file: &str) -> String {
    if let Some(frozen) = file.strip_prefix("<frozen ").and_then(|f| f.strip_suffix('>')) {
        return frozen.to_string();
    }
    let path = Path::new(file);
    let Some(stem) = path.file_stem().and_then(|s| s.to_str()).filter(|_| file.ends_with(".py")) else {
        return file.to_string();
    };
    let mut parts = if stem == "__init__" { Vec::new() } else { vec![stem.to_string()] };
    let mut dir = path.parent();
    while let Some(d) = dir.filter(|d| d.join("__init__.py").is_file()) {
        match d.file_name().and_then(|n| n.to_str()) {
            Some(name) => parts.push(name.to_string()),
            None => break,
        }
        dir = d.parent();
    }
    parts.reverse();
    parts.join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_prefixes_are_stripped() {
        assert_eq!(strip_version_prefix("aws_lc_0_47_0_EVP_AEAD_CTX_seal_scatter"), "EVP_AEAD_CTX_seal_scatter");
        assert_eq!(
            strip_version_prefix("ring_core_0_17_14_aes_hw_ctr32_encrypt_blocks"),
            "aes_hw_ctr32_encrypt_blocks"
        );
        assert_eq!(strip_version_prefix("EVP_AEAD_CTX_open"), "EVP_AEAD_CTX_open");
        assert_eq!(strip_version_prefix("foo_1_2_bar"), "foo_1_2_bar");
        assert_eq!(strip_version_prefix("CxPlatEncrypt"), "CxPlatEncrypt");
    }

    #[test]
    // Looked up by name in this binary's symbol table below: never inlined into the harness.
    #[inline(never)]
    fn rust_hashes_and_cpp_are_demangled() {
        assert_eq!(
            demangle("_ZN4ring4aead9algorithm12aes_gcm_seal17h0123456789abcdefE"),
            "ring::aead::algorithm::aes_gcm_seal"
        );
        assert_eq!(
            demangle("_ZN4bssl17ssl_run_handshakeEP13SSL_HANDSHAKEPb"),
            "bssl::ssl_run_handshake(SSL_HANDSHAKE*, bool*)"
        );
        assert_eq!(demangle("EVP_AEAD_CTX_open"), "EVP_AEAD_CTX_open");
    }

    #[test]
    fn own_test_binary_has_resolvable_functions() {
        let me = std::env::current_exe().expect("test binary");
        let syms = ObjectSymbols::load(&me).expect("symbols");
        let f = syms
            .functions
            .iter()
            .find(|f| f.demangled.ends_with("rust_hashes_and_cpp_are_demangled"))
            .expect("this test function is in the symbol table");
        assert!(f.file_offset > 0 && f.file_offset <= f.address);
    }

    #[test]
    // Looks itself up by name: never inlined into the harness.
    #[inline(never)]
    fn nearest_ranks_shared_words() {
        let me = std::env::current_exe().expect("test binary");
        let syms = [ObjectSymbols::load(&me).expect("symbols")];
        let near = nearest("*nearest_ranks_shared*", &syms, 3);
        assert!(near.iter().any(|f| f.demangled.ends_with("nearest_ranks_shared_words")), "{near:?}");
    }

    #[test]
    fn a_perf_map_another_user_could_have_placed_is_not_read_or_removed() {
        use std::os::unix::fs::symlink;
        // Beyond any pid_max (at most 2^22): no process has it.
        let pid = (1 << 22) + 1 + std::process::id() % 1_000_000;
        let path = perf_map_path(pid);
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("map");
        std::fs::write(&target, "7fd82e4bd000 b py::main:/nowhere/script.py\n").expect("write");
        let _ = std::fs::remove_file(&path);
        symlink(&target, &path).expect("symlink");
        assert!(PerfMap::load(pid).is_none(), "read through a link");
        remove_perf_map(pid);
        assert!(path.symlink_metadata().is_ok(), "a link it did not verify was removed");
        std::fs::remove_file(&path).expect("clean up");
        std::fs::copy(&target, &path).expect("copy");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&path, Some(65534), None).expect("chown");
            assert!(PerfMap::load(pid).is_none(), "read another user's map");
            remove_perf_map(pid);
            assert!(path.exists(), "removed another user's file");
            std::os::unix::fs::chown(&path, Some(0), None).expect("chown");
        }
        assert_eq!(PerfMap::load(pid).map(|m| m.len()), Some(1), "our own map is read");
        std::fs::File::options().write(true).open(&path).and_then(|f| f.set_len(PERF_MAP_MAX_BYTES + 1)).expect("grow");
        assert!(PerfMap::load(pid).is_none(), "a map past the bound");
        std::fs::File::options().write(true).open(&path).and_then(|f| f.set_len(10)).expect("shrink");
        remove_perf_map(pid);
        assert!(!path.exists(), "our own map is removed");
    }

    #[test]
    fn perf_map_names_python_functions_by_module() {
        // A package tree as a venv holds it: aioquic/quic/connection.py under site-packages.
        let root = std::env::temp_dir().join(format!("nesquic-perfmap-{}", std::process::id()));
        let pkg = root.join("site-packages/aioquic/quic");
        std::fs::create_dir_all(&pkg).expect("temp dir");
        for init in [root.join("site-packages/aioquic/__init__.py"), pkg.join("__init__.py")] {
            std::fs::write(init, "").expect("__init__.py");
        }
        let file = pkg.join("connection.py");
        // Lines as CPython 3.13 writes them (`-X perf`), one cut short at the end.
        let text = format!(
            "7fd82e4bd000 b py::_find_and_load:<frozen importlib._bootstrap>\n\
             7fd82e4bd00b b py::QuicConnection.receive_datagram:{}\n\
             7fd82e4bd016 b py::main:/nowhere/script.py\n\
             7fd82e4bd021 b [jit] other code\n\
             7fd82e4bd0",
            file.display()
        );
        let map = PerfMap::parse(&text);
        std::fs::remove_dir_all(&root).expect("clean up");
        assert_eq!(map.len(), 4);
        assert_eq!(map.lookup(0x7fd8_2e4b_d000), Some("py::importlib._bootstrap::_find_and_load"));
        assert_eq!(map.lookup(0x7fd8_2e4b_d015), Some("py::aioquic.quic.connection::QuicConnection.receive_datagram"));
        assert_eq!(map.lookup(0x7fd8_2e4b_d016), Some("py::script::main"));
        assert_eq!(map.lookup(0x7fd8_2e4b_d021), Some("[jit] other code"));
        assert_eq!(map.lookup(0x7fd8_2e4b_d02c), None, "past the last entry's end");
        assert_eq!(map.lookup(0x7fd8_2e4b_cfff), None, "below the first entry");
    }
}
