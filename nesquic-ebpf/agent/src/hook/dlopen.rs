//! `dlopen` interposition: objects loaded later (plugins, Python extension modules) are hooked
//! right after the real `dlopen` maps them.
//!
//! glibc's `dlopen` looks at its caller (the return address) to pick the RPATH/RUNPATH searched
//! for a bare library name and to expand `$ORIGIN`. So while nothing is pending the wrapper is a
//! plain tail jump and glibc sees the real caller. While some planned object is still missing
//! the agent must regain control after the real `dlopen`, so glibc sees the agent as caller;
//! then the wrapper first does the caller-dependent part of glibc's search itself, for the
//! object its return address lies in (`DT_RPATH` before `LD_LIBRARY_PATH`, `DT_RUNPATH` after
//! it, `$ORIGIN` expanded), and hands glibc the path it found. Why not the alternatives: glibc
//! has no public "dlopen as if called from X" (`dlmopen` picks a namespace, not a caller), and
//! documenting "use absolute paths" would break plugins that rely on their RUNPATH (Python
//! extension modules' vendored libraries do). What is left to glibc (`LD_LIBRARY_PATH`, the
//! cache, the default directories, names already loaded) does not depend on the caller.

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::apply_pending;

/// Some plan target waits for its object.
static PENDING: AtomicBool = AtomicBool::new(false);
/// The next `dlopen` (libc's); 0 until resolved.
static REAL_DLOPEN: AtomicUsize = AtomicUsize::new(0);

type DlopenFn = unsafe extern "C" fn(*const libc::c_char, libc::c_int) -> *mut libc::c_void;

/// Records whether targets are still waiting for their object.
pub fn set_pending(pending: bool) {
    PENDING.store(pending, Ordering::Release);
}

fn real_dlopen() -> Option<DlopenFn> {
    let mut p = REAL_DLOPEN.load(Ordering::Acquire);
    if p == 0 {
        // SAFETY: dlsym with a valid NUL-terminated name.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"dlopen".as_ptr()) } as usize;
        REAL_DLOPEN.store(p, Ordering::Release);
    }
    // SAFETY: a non-null dlsym result for "dlopen" is libc's dlopen, of this type.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, DlopenFn>(p) })
}

/// Resolves the real `dlopen` ahead of time, so the fast path never needs to.
pub fn resolve() {
    let _ = real_dlopen();
}

/// The slow path: call the real `dlopen` (with the name resolved as for `caller`), then hook
/// what it mapped.
unsafe extern "C" fn dlopen_and_hook(
    filename: *const libc::c_char,
    flags: libc::c_int,
    caller: usize,
) -> *mut libc::c_void {
    let Some(real) = real_dlopen() else { return std::ptr::null_mut() };
    let resolved = if filename.is_null() {
        None
    } else {
        // SAFETY: dlopen's contract: a NUL-terminated name.
        let name = unsafe { CStr::from_ptr(filename) };
        resolve_for_caller(real, name, caller)
    };
    let filename = resolved.as_ref().map_or(filename, |p| p.as_ptr());
    // SAFETY: the caller's name (or the path it resolves to) and flags.
    let handle = unsafe { real(filename, flags) };
    if !handle.is_null() && PENDING.load(Ordering::Acquire) {
        apply_pending();
    }
    handle
}

/// The object containing `addr`: its canonical directory (`$ORIGIN`) and its `DT_RPATH` /
/// `DT_RUNPATH` strings.
struct CallerPaths {
    origin: Vec<u8>,
    rpath: Option<Vec<u8>>,
    runpath: Option<Vec<u8>>,
}

/// `Elf64_Dyn` (not in the libc crate).
#[repr(C)]
struct Dyn {
    d_tag: i64,
    d_un: u64,
}
const DT_STRTAB: i64 = 5;
const DT_RPATH: i64 = 15;
const DT_RUNPATH: i64 = 29;

struct Search {
    addr: usize,
    found: Option<CallerPaths>,
}

fn caller_paths(addr: usize) -> Option<CallerPaths> {
    let mut search = Search { addr, found: None };
    // SAFETY: the callback only reads the entry it is given and writes into `search`, which
    // outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut search as *mut Search).cast()) };
    search.found
}

unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _size: usize, data: *mut libc::c_void) -> libc::c_int {
    // SAFETY: dl_iterate_phdr passes a valid entry and our `data` pointer back.
    let (info, search) = unsafe { (&*info, &mut *data.cast::<Search>()) };
    let headers: &[libc::Elf64_Phdr] = if info.dlpi_phdr.is_null() {
        &[]
    } else {
        // SAFETY: the loader's program headers of this object, dlpi_phnum of them.
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) }
    };
    let bias = info.dlpi_addr as usize;
    let holds = headers.iter().any(|h| {
        let start = bias.wrapping_add(h.p_vaddr as usize);
        h.p_type == libc::PT_LOAD && (start..start.wrapping_add(h.p_memsz as usize)).contains(&search.addr)
    });
    if !holds {
        return 0;
    }
    let name = if info.dlpi_name.is_null() {
        &[][..]
    } else {
        // SAFETY: a NUL-terminated string owned by the loader.
        unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes()
    };
    // The executable has an empty name.
    let path = if name.is_empty() { "/proc/self/exe".into() } else { PathBuf::from(OsStr::from_bytes(name)) };
    let origin = std::fs::canonicalize(&path)
        .ok()
        .and_then(|p| p.parent().map(|d| d.as_os_str().as_bytes().to_vec()))
        .unwrap_or_default();
    let (mut strtab, mut rpath, mut runpath) = (0usize, None, None);
    if let Some(dynamic) = headers.iter().find(|h| h.p_type == libc::PT_DYNAMIC) {
        let mut d = bias.wrapping_add(dynamic.p_vaddr as usize) as *const Dyn;
        // SAFETY: PT_DYNAMIC of a loaded object is mapped and ends with DT_NULL.
        unsafe {
            while (*d).d_tag != 0 {
                match (*d).d_tag {
                    DT_STRTAB => strtab = (*d).d_un as usize,
                    DT_RPATH => rpath = Some((*d).d_un as usize),
                    DT_RUNPATH => runpath = Some((*d).d_un as usize),
                    _ => {}
                }
                d = d.add(1);
            }
        }
    }
    // glibc rewrites DT_STRTAB to a run-time address in place on x86-64; a value below the
    // bias is still the file's virtual address.
    if strtab < bias {
        strtab = strtab.wrapping_add(bias);
    }
    let string = |offset: Option<usize>| {
        // SAFETY: an offset into the object's mapped string table, NUL-terminated.
        offset
            .filter(|_| strtab != 0)
            .map(|o| unsafe { CStr::from_ptr((strtab + o) as *const libc::c_char) }.to_bytes().to_vec())
    };
    search.found = Some(CallerPaths { origin, rpath: string(rpath), runpath: string(runpath) });
    1
}

/// `$ORIGIN` / `${ORIGIN}` replaced; `None` if another dynamic string token remains (left to
/// glibc).
fn expand(s: &[u8], origin: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() + origin.len());
    let mut rest = s;
    while let Some(i) = rest.iter().position(|&b| b == b'$') {
        out.extend_from_slice(&rest[..i]);
        let tail = &rest[i..];
        let token = [&b"${ORIGIN}"[..], b"$ORIGIN"].into_iter().find(|t| tail.starts_with(t))?;
        out.extend_from_slice(origin);
        rest = &tail[token.len()..];
    }
    out.extend_from_slice(rest);
    Some(out)
}

/// The first directory of a `:`-separated list holding `name`, as a full path.
fn find_in(list: &[u8], name: &[u8], origin: &[u8]) -> Option<CString> {
    list.split(|&b| b == b':').filter(|d| !d.is_empty()).find_map(|dir| {
        let mut path = expand(dir, origin)?;
        path.push(b'/');
        path.extend_from_slice(name);
        Path::new(OsStr::from_bytes(&path)).is_file().then(|| CString::new(path).ok()).flatten()
    })
}

/// What glibc would have found for `name` had `caller` called it directly, where that differs
/// from what it finds for the agent; `None`: pass the name unchanged.
fn resolve_for_caller(real: DlopenFn, name: &CStr, caller: usize) -> Option<CString> {
    let bytes = name.to_bytes();
    let paths = caller_paths(caller)?;
    if bytes.contains(&b'/') {
        // A path: only `$ORIGIN` in it depends on the caller.
        return if bytes.contains(&b'$') { CString::new(expand(bytes, &paths.origin)?).ok() } else { None };
    }
    // Already loaded under that name: glibc returns it whoever asks.
    // SAFETY: RTLD_NOLOAD maps nothing; a handle it returns is released at once.
    let loaded = unsafe { real(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if !loaded.is_null() {
        // SAFETY: the handle just returned.
        unsafe { libc::dlclose(loaded) };
        return None;
    }
    // glibc's order: the caller's DT_RPATH (only without DT_RUNPATH), LD_LIBRARY_PATH, the
    // caller's DT_RUNPATH, then the cache and default directories (not caller-dependent).
    if paths.runpath.is_none() {
        if let Some(found) = paths.rpath.as_deref().and_then(|r| find_in(r, bytes, &paths.origin)) {
            return Some(found);
        }
    }
    let library_path = std::env::var_os("LD_LIBRARY_PATH").unwrap_or_default();
    if find_in(library_path.as_bytes(), bytes, &paths.origin).is_some() {
        return None;
    }
    paths.runpath.as_deref().and_then(|r| find_in(r, bytes, &paths.origin))
}

/// `dlopen`: tail-jumps to libc's unless a plan target is pending (then [`dlopen_and_hook`]).
///
/// # Safety
/// Same contract as libc's `dlopen`.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlopen(filename: *const libc::c_char, flags: libc::c_int) -> *mut libc::c_void {
    core::arch::naked_asm!(
        "cmp byte ptr [rip + {pending}], 0",
        "jne 2f",
        "mov rax, qword ptr [rip + {real}]",
        "test rax, rax",
        "jz 2f",
        "jmp rax",
        "2:",
        // The caller's return address, for resolving names as glibc would for it.
        "mov rdx, qword ptr [rsp]",
        "jmp {slow}",
        pending = sym PENDING,
        real = sym REAL_DLOPEN,
        slow = sym dlopen_and_hook,
    )
}
