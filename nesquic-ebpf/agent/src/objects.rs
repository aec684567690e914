//! Where an object is mapped: its load bias (runtime address minus ELF virtual address) and its
//! executable segments, found by canonical path among the objects the dynamic loader knows
//! (`dl_iterate_phdr`).

use std::ffi::CStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// One loaded object.
pub struct Loaded {
    /// Canonical path.
    pub path: Vec<u8>,
    /// Load bias.
    pub bias: u64,
    /// Executable `PT_LOAD` segments: (ELF vaddr, size in memory).
    pub text: Vec<(u64, u64)>,
}

impl Loaded {
    /// Whether `[vaddr, vaddr + len)` lies inside one executable segment.
    pub fn holds_code(&self, vaddr: u64, len: u64) -> bool {
        self.text.iter().any(|&(start, size)| vaddr >= start && vaddr.saturating_add(len) <= start + size)
    }
}

/// Every object loaded now.
pub fn loaded() -> Vec<Loaded> {
    let mut out: Vec<Loaded> = Vec::new();
    // SAFETY: the callback only reads the entry it is given and pushes into `out`, which
    // outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut out as *mut Vec<Loaded>).cast()) };
    out
}

unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _size: usize, data: *mut libc::c_void) -> libc::c_int {
    // SAFETY: dl_iterate_phdr passes a valid entry and our `data` pointer back.
    let (info, out) = unsafe { (&*info, &mut *data.cast::<Vec<Loaded>>()) };
    let name = if info.dlpi_name.is_null() {
        &[][..]
    } else {
        // SAFETY: a NUL-terminated string owned by the loader.
        unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes()
    };
    // The executable has an empty name: it is /proc/self/exe.
    let path = if name.is_empty() {
        PathBuf::from("/proc/self/exe")
    } else {
        PathBuf::from(std::ffi::OsStr::from_bytes(name))
    };
    let Ok(canonical) = std::fs::canonicalize(&path) else { return 0 };
    let headers: &[libc::Elf64_Phdr] = if info.dlpi_phdr.is_null() {
        &[]
    } else {
        // SAFETY: the loader's program headers of this object, dlpi_phnum of them.
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) }
    };
    let text = headers
        .iter()
        .filter(|h| h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_X != 0)
        .map(|h| (h.p_vaddr, h.p_memsz))
        .collect();
    out.push(Loaded { path: canonical.as_os_str().as_bytes().to_vec(), bias: info.dlpi_addr, text });
    0
}
