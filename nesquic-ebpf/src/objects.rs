//! The object files a LUT executes: the executable and the shared libraries it loads. Resolved
//! before the process runs (probes attach before `exec`), from the dynamic loader's own answer.
//! A `#!` script stands for its interpreter (what the kernel really runs, under the same pid),
//! and objects the program will `dlopen` later (Python extension modules, plugins) are named
//! next to it in `<executable>.dlopen`, one path per line, by whoever built it: the loader
//! cannot know them in advance, and kernel uprobes attach to a file before it is mapped.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::EbpfError;

/// The program the kernel runs for `binary` (`binary` itself, or a `#!` script's interpreter),
/// followed by the shared libraries the loader would map for it (vdso excluded), then the
/// objects listed in `<binary>.dlopen`.
pub fn objects_of(binary: &Path) -> Result<Vec<PathBuf>, EbpfError> {
    let canonical =
        |p: &Path| p.canonicalize().map_err(|source| EbpfError::Io { what: format!("find {}", p.display()), source });
    let binary = canonical(binary)?;
    let program = match interpreter_of(&binary) {
        Some(interpreter) => canonical(&interpreter)?,
        None => binary.clone(),
    };
    let mut out = vec![program.clone()];
    // `ldd` asks the dynamic loader (it does not run the program); statically linked or
    // non-ELF files just yield no libraries.
    if let Ok(o) = Command::new("ldd").arg(&program).output() {
        out.extend(parse_ldd(&String::from_utf8_lossy(&o.stdout)));
    }
    for later in loaded_later(&binary)? {
        out.push(canonical(&later)?);
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    Ok(out)
}

/// A `#!` script's interpreter (the line's first word); `None` for anything else.
pub fn interpreter_of(path: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let word = String::from_utf8_lossy(line).split_whitespace().next()?.to_string();
    Some(PathBuf::from(word))
}

/// The objects `<binary>.dlopen` names (none without that file).
fn loaded_later(binary: &Path) -> Result<Vec<PathBuf>, EbpfError> {
    let mut list = binary.as_os_str().to_owned();
    list.push(".dlopen");
    match std::fs::read_to_string(&list) {
        Ok(text) => Ok(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(PathBuf::from).collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(EbpfError::Io { what: format!("read {}", Path::new(&list).display()), source }),
    }
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

/// Whether `path` (or a script's interpreter) is an ELF executable run by the dynamic loader (it
/// has a `PT_INTERP`): only then can `LD_PRELOAD` bring the user-space probe agent into it.
/// Unreadable or non-ELF: false.
pub fn is_dynamic(path: &Path) -> bool {
    use object::read::elf::{FileHeader, ProgramHeader};
    // A script: the kernel runs its interpreter, which is what the agent would be loaded into.
    let path = interpreter_of(path).unwrap_or_else(|| path.to_path_buf());
    let Ok(data) = std::fs::read(&path) else { return false };
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
    fn a_script_stands_for_its_interpreter_and_its_dlopen_list_is_added() {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = dir.path().join("lut");
        std::fs::write(&script, "#!/bin/sh -e\nexit 0\n").expect("write");
        let shell = Path::new("/bin/sh").canonicalize().expect("/bin/sh");
        assert_eq!(interpreter_of(&script), Some(PathBuf::from("/bin/sh")));
        assert!(is_dynamic(&script), "/bin/sh is dynamically linked");
        // Any file stands for a plugin here: objects_of only finds the files.
        let plugin = dir.path().join("plugin.so");
        std::fs::write(&plugin, "").expect("write");
        std::fs::write(dir.path().join("lut.dlopen"), format!("{}\n", plugin.display())).expect("write");
        let objects = objects_of(&script).expect("objects");
        assert_eq!(objects[0], shell);
        assert!(objects.len() > 2, "sh's libraries: {objects:?}");
        assert_eq!(objects.last(), Some(&plugin.canonicalize().expect("plugin")));
        std::fs::write(dir.path().join("lut.dlopen"), "/nonexistent/lib.so\n").expect("write");
        let err = objects_of(&script).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/lib.so"), "{err}");
    }

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
