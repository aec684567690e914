//! Function symbols of ELF objects, made matchable: Rust and C++ names demangled (without the
//! per-build hash), library version prefixes removed (`aws_lc_0_47_0_`, `ring_core_0_17_8_`),
//! and the file offset computed for attaching.

use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

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
    /// Loadable segments: (virtual address, file offset, file size), to map a sampled address.
    pub segments: Vec<(u64, u64, u64)>,
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
        let segments = file
            .segments()
            .filter_map(|seg| {
                seg.file_range().1.gt(&0).then(|| (seg.address(), seg.file_range().0, seg.file_range().1))
            })
            .collect();
        Ok(Self { path: path.to_path_buf(), functions, segments })
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
}
