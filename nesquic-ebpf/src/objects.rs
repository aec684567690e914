//! The object files a LUT executes: the executable and the shared libraries it loads. Resolved
//! before the process runs (probes attach before `exec`), from the dynamic loader's own answer.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::EbpfError;

/// `binary` followed by the shared libraries the loader would map for it (vdso excluded).
pub fn objects_of(binary: &Path) -> Result<Vec<PathBuf>, EbpfError> {
    let binary =
        binary.canonicalize().map_err(|source| EbpfError::Io { what: format!("find {}", binary.display()), source })?;
    let mut out = vec![binary.clone()];
    // `ldd` asks the dynamic loader (it does not run the program); statically linked or
    // non-ELF files just yield no libraries.
    if let Ok(o) = Command::new("ldd").arg(&binary).output() {
        out.extend(parse_ldd(&String::from_utf8_lossy(&o.stdout)));
    }
    out.dedup();
    Ok(out)
}

fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = match line.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// Whether `path` is an ELF executable run by the dynamic loader (it has a `PT_INTERP`): only
/// then can `LD_PRELOAD` bring the user-space probe agent into it. Unreadable or non-ELF: false.
pub fn is_dynamic(path: &Path) -> bool {
    use object::read::elf::{FileHeader, ProgramHeader};
    let Ok(data) = std::fs::read(path) else { return false };
    let Ok(header) = object::elf::FileHeader64::<object::Endianness>::parse(&*data) else { return false };
    let Ok(endian) = header.endian() else { return false };
    let Ok(segments) = header.program_headers(endian, &*data) else { return false };
    segments.iter().any(|s| s.p_type(endian) == object::elf::PT_INTERP)
}

/// Whether `path` is a Go program (the Go linker's `.go.buildinfo` section). Go grows goroutine
/// stacks by copying them, so a uretprobe's rewritten return address on a moved stack crashes the
/// program: function probes there may only count (entry probe), never time. Unreadable: false.
pub fn is_go(path: &Path) -> bool {
    use object::Object;
    let Ok(data) = std::fs::read(path) else { return false };
    let Ok(file) = object::File::parse(&*data) else { return false };
    file.section_by_name(".go.buildinfo").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_is_parsed() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibmsquic.so.2 => /opt/lib/libmsquic.so.2 (0x7f)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x7f)\n\t/lib64/ld-linux-x86-64.so.2 (0x7f)\n";
        assert_eq!(
            parse_ldd(text),
            [
                PathBuf::from("/opt/lib/libmsquic.so.2"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2")
            ]
        );
    }
}
