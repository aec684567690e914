//! What a followed command starts that the agent cannot follow into. With `PLAN_FOLLOW`
//! (`nesquic trace`) every dynamically linked program the command execs or spawns loads the
//! agent and registers itself; a program that cannot load it would count nothing and leave no
//! trace. So `execve`, `execv`, `execvp`, `execvpe`, `posix_spawn` and `posix_spawnp` look at
//! the file first (its ELF program headers, a script's interpreter, its set-ID bits) and at the
//! environment it gets, and record a program that will run without the agent as an entry with
//! `entry::NO_AGENT` and the reason. `execl*` (variadic) and libc's own internal execs (`system`,
//! `popen`) are not seen; those go through `/bin/sh`, which loads the agent and is seen.
//!
//! Between `fork` and exec only async-signal-safe calls are allowed: open, pread, fstat, access,
//! close, and no allocation.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use libc::{c_char, c_int, pid_t};

use crate::abi::{self, entry};
use crate::counters;

static FOLLOW: AtomicBool = AtomicBool::new(false);

/// Starts watching execs and spawns (a plan with `PLAN_FOLLOW`).
pub fn follow() {
    FOLLOW.store(true, Ordering::Release);
}

const EXECVE: usize = 0;
const EXECV: usize = 1;
const EXECVP: usize = 2;
const EXECVPE: usize = 3;
const POSIX_SPAWN: usize = 4;
const POSIX_SPAWNP: usize = 5;
const NAMES: [&CStr; 6] = [c"execve", c"execv", c"execvp", c"execvpe", c"posix_spawn", c"posix_spawnp"];
static REAL: [AtomicUsize; 6] = [const { AtomicUsize::new(0) }; 6];

/// libc's function `$i` as type `$t`.
macro_rules! real {
    ($i:expr, $t:ty) => {
        next_libc_fn!(REAL, NAMES, $i, $t)
    };
}

/// Longest path looked at (PATH_MAX).
const PATH_MAX: usize = 4096;

/// A NUL-terminated path in a fixed buffer (no allocation).
struct PathBuf {
    bytes: [u8; PATH_MAX],
    len: usize,
}

impl PathBuf {
    fn new() -> PathBuf {
        PathBuf { bytes: [0; PATH_MAX], len: 0 }
    }

    /// `parts` joined, NUL-terminated; `None` when too long.
    fn of(parts: &[&[u8]]) -> Option<PathBuf> {
        let mut p = PathBuf::new();
        for part in parts {
            let end = p.len.checked_add(part.len()).filter(|&e| e < PATH_MAX)?;
            p.bytes[p.len..end].copy_from_slice(part);
            p.len = end;
        }
        p.bytes[p.len] = 0;
        Some(p)
    }

    fn as_ptr(&self) -> *const c_char {
        self.bytes.as_ptr().cast()
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The file `execvp` would run for `file`: itself when it names a path, else the first
/// executable `dir/file` of `PATH` (glibc's default when unset).
fn search_path(file: &CStr) -> Option<PathBuf> {
    let name = file.to_bytes();
    if name.contains(&b'/') {
        return PathBuf::of(&[name]);
    }
    // SAFETY: getenv with a NUL-terminated name (glibc's execvp reads it the same way).
    let path = unsafe { libc::getenv(c"PATH".as_ptr()) };
    let dirs: &[u8] = if path.is_null() { b"/bin:/usr/bin" } else { unsafe { CStr::from_ptr(path) }.to_bytes() };
    dirs.split(|b| *b == b':').find_map(|dir| {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let candidate = PathBuf::of(&[dir, b"/", name])?;
        // SAFETY: a NUL-terminated path.
        (unsafe { libc::access(candidate.as_ptr(), libc::X_OK) } == 0).then_some(candidate)
    })
}

/// Why the program at `path` cannot load the agent (`entry` reason bits), 0 if it can or the
/// file cannot be read (the exec will then fail or be retried through `/bin/sh`).
/// `depth` bounds a script's interpreter chain.
fn why_not_loadable(path: *const c_char, depth: u32) -> u32 {
    // SAFETY: a NUL-terminated path; the fd is closed below.
    let fd = unsafe { libc::open(path, libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return 0;
    }
    let why = why_not_loadable_fd(fd, depth);
    // SAFETY: our own fd.
    unsafe { libc::close(fd) };
    why
}

fn why_not_loadable_fd(fd: c_int, depth: u32) -> u32 {
    // SAFETY: a zeroed stat is valid; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid fd and out pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return 0;
    }
    // The loader ignores LD_PRELOAD's paths where the exec raises privileges (secure mode).
    // SAFETY (both): no preconditions.
    let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let raises = (st.st_mode & libc::S_ISUID != 0 && st.st_uid != euid)
        || (st.st_mode & libc::S_ISGID != 0 && st.st_gid != egid);
    if raises {
        return entry::NO_AGENT | entry::SETUID;
    }
    let mut head = [0u8; 256];
    // SAFETY: reads into our buffer.
    let n = unsafe { libc::pread(fd, head.as_mut_ptr().cast(), head.len(), 0) };
    let Ok(n) = usize::try_from(n) else { return 0 };
    let head = &head[..n];
    if let Some(script) = head.strip_prefix(b"#!") {
        return if depth == 0 { 0 } else { interpreter_not_loadable(script, depth - 1) };
    }
    if !head.starts_with(b"\x7fELF") {
        return 0; // not a program the kernel runs directly (execvp retries it with /bin/sh)
    }
    // e_ident[EI_CLASS] 2: ELFCLASS64; the agent is an x86-64 library.
    if head.len() < 64 || head[4] != 2 || u16::from_le_bytes([head[18], head[19]]) != 62 {
        return entry::NO_AGENT | entry::NOT_ELF64;
    }
    if has_interpreter(fd, head) {
        0
    } else {
        entry::NO_AGENT | entry::STATIC
    }
}

/// Whether the ELF64 file's program headers include `PT_INTERP` (a dynamic loader that reads
/// `LD_PRELOAD`); a static or static-PIE executable has none.
fn has_interpreter(fd: c_int, header: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    const MAX_PHDRS: usize = 64;
    let u16_at = |o: usize| u16::from_le_bytes([header[o], header[o + 1]]) as usize;
    let mut offset = [0u8; 8];
    offset.copy_from_slice(&header[32..40]);
    let (phoff, entsize, count) = (u64::from_le_bytes(offset), u16_at(54), u16_at(56).min(MAX_PHDRS));
    if !(4..=64).contains(&entsize) {
        return true; // malformed: let the exec decide, claim nothing
    }
    let mut table = [0u8; 64 * MAX_PHDRS];
    let want = entsize * count;
    // SAFETY: reads at most `want <= table.len()` bytes into our buffer.
    let n = unsafe { libc::pread(fd, table.as_mut_ptr().cast(), want, phoff as libc::off_t) };
    if usize::try_from(n).ok() != Some(want) {
        return true;
    }
    table[..want].chunks_exact(entsize).any(|ph| u32::from_le_bytes([ph[0], ph[1], ph[2], ph[3]]) == PT_INTERP)
}

/// A script's `#!` line: whether its interpreter can load the agent.
fn interpreter_not_loadable(line: &[u8], depth: u32) -> u32 {
    let line = line.split(|b| *b == b'\n').next().unwrap_or(line);
    let start = line.iter().position(|b| *b != b' ' && *b != b'\t').unwrap_or(line.len());
    let interpreter = line[start..].split(|b| *b == b' ' || *b == b'\t').next().unwrap_or(&[]);
    match PathBuf::of(&[interpreter]) {
        Some(p) if !interpreter.is_empty() => why_not_loadable(p.as_ptr(), depth),
        _ => 0,
    }
}

/// Whether `envp` still carries the agent: its counters variable and an `LD_PRELOAD` naming
/// the agent's library.
///
/// # Safety
/// `envp` is null or a NULL-terminated array of NUL-terminated strings.
unsafe fn env_carries_agent(envp: *const *const c_char) -> bool {
    if envp.is_null() {
        return false;
    }
    let counters = abi::COUNTERS_ENV.as_bytes();
    let (mut has_counters, mut has_preload) = (false, false);
    let mut i = 0;
    loop {
        // SAFETY: guaranteed by the caller.
        let var = unsafe { *envp.add(i) };
        if var.is_null() {
            break;
        }
        // SAFETY: as above.
        let var = unsafe { CStr::from_ptr(var) }.to_bytes();
        has_counters |= var.len() > counters.len() && var.starts_with(counters) && var[counters.len()] == b'=';
        let agent = abi::AGENT_LIB_NAME.as_bytes();
        has_preload |= var.starts_with(b"LD_PRELOAD=") && var.windows(agent.len()).any(|w| w == agent);
        i += 1;
    }
    has_counters && has_preload
}

/// Why the program `path` started with `envp` will run without the agent (0: it will load it).
///
/// # Safety
/// As [`env_carries_agent`].
unsafe fn why_unmeasured(path: &PathBuf, envp: *const *const c_char) -> u32 {
    let why = why_not_loadable(path.as_ptr(), 2);
    if why != 0 {
        return why;
    }
    // SAFETY: guaranteed by the caller.
    if unsafe { env_carries_agent(envp) } {
        0
    } else {
        entry::NO_AGENT | entry::ENV_DROPPED
    }
}

/// Records the program at `path` as started without the agent in process `pid`.
fn record(pid: pid_t, path: &PathBuf, why: u32) -> Option<usize> {
    let name = path.as_bytes().rsplit(|b| *b == b'/').next().unwrap_or(&[]);
    let mut comm = [0u8; 16];
    let n = name.len().min(15);
    comm[..n].copy_from_slice(&name[..n]);
    counters::add_entry(u32::try_from(pid).unwrap_or(0), comm, why)
}

/// Before an exec of the program `path` names (the program replaces this process): records it if
/// it will run without the agent; the number its entry took, to undo it if the exec fails. `path` is
/// only resolved when following (a PATH search costs an `access` per directory).
///
/// # Safety
/// As [`env_carries_agent`].
unsafe fn before_exec(path: impl FnOnce() -> Option<PathBuf>, envp: *const *const c_char) -> Option<usize> {
    if !FOLLOW.load(Ordering::Acquire) {
        return None;
    }
    let path = path()?;
    // SAFETY: guaranteed by the caller.
    let why = unsafe { why_unmeasured(&path, envp) };
    // SAFETY: no preconditions.
    (why != 0).then(|| record(unsafe { libc::getpid() }, &path, why)).flatten()
}

/// After an exec returned (it failed): its entry counts nothing.
fn exec_failed(index: Option<usize>) {
    if let Some(i) = index {
        counters::exec_failed(i);
    }
}

fn environ() -> *const *const c_char {
    extern "C" {
        static environ: *const *const c_char;
    }
    // SAFETY: libc's environment pointer, read once.
    unsafe { environ }
}

/// A path argument as the program it names, `None` when null or too long.
///
/// # Safety
/// `p` is null or NUL-terminated.
unsafe fn literal_path(p: *const c_char) -> Option<PathBuf> {
    // SAFETY: guaranteed by the caller.
    (!p.is_null()).then(|| PathBuf::of(&[unsafe { CStr::from_ptr(p) }.to_bytes()])).flatten()
}

/// A file argument as the program `execvp` would run for it (see [`search_path`]).
///
/// # Safety
/// As [`literal_path`].
unsafe fn searched_path(file: *const c_char) -> Option<PathBuf> {
    // SAFETY: guaranteed by the caller.
    (!file.is_null()).then(|| search_path(unsafe { CStr::from_ptr(file) })).flatten()
}

type Argv = *const *const c_char;

/// Interposed `execve`: see the module.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn execve(path: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let real = real!(EXECVE, unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int);
    // SAFETY: the caller's arguments, as libc would read them.
    let entry = unsafe { before_exec(|| literal_path(path), envp) };
    // SAFETY: forwarding unchanged.
    let ret = unsafe { real(path, argv, envp) };
    exec_failed(entry);
    ret
}

/// Interposed `execv`: see the module.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: Argv) -> c_int {
    let real = real!(EXECV, unsafe extern "C" fn(*const c_char, Argv) -> c_int);
    // SAFETY: as in `execve`.
    let entry = unsafe { before_exec(|| literal_path(path), environ()) };
    // SAFETY: forwarding unchanged.
    let ret = unsafe { real(path, argv) };
    exec_failed(entry);
    ret
}

/// Interposed `execvp`: see the module.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: Argv) -> c_int {
    let real = real!(EXECVP, unsafe extern "C" fn(*const c_char, Argv) -> c_int);
    // SAFETY: as in `execve`.
    let entry = unsafe { before_exec(|| searched_path(file), environ()) };
    // SAFETY: forwarding unchanged.
    let ret = unsafe { real(file, argv) };
    exec_failed(entry);
    ret
}

/// Interposed `execvpe`: see the module.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let real = real!(EXECVPE, unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int);
    // SAFETY: as in `execve`.
    let entry = unsafe { before_exec(|| searched_path(file), envp) };
    // SAFETY: forwarding unchanged.
    let ret = unsafe { real(file, argv, envp) };
    exec_failed(entry);
    ret
}

type Spawn = unsafe extern "C" fn(
    *mut pid_t,
    *const c_char,
    *const libc::posix_spawn_file_actions_t,
    *const libc::posix_spawnattr_t,
    *const *mut c_char,
    *const *mut c_char,
) -> c_int;

/// After a spawn of the program `path` names succeeded: records the child if it runs without
/// the agent. `path` is only resolved when following and the spawn succeeded.
///
/// # Safety
/// `pid` null or the caller's out pointer, written by the spawn; `envp` as [`env_carries_agent`].
unsafe fn after_spawn(ret: c_int, pid: *mut pid_t, path: impl FnOnce() -> Option<PathBuf>, envp: *const *mut c_char) {
    if ret != 0 || !FOLLOW.load(Ordering::Acquire) {
        return;
    }
    let Some(path) = path() else { return };
    let envp = if envp.is_null() { environ() } else { envp.cast() };
    // SAFETY: guaranteed by the caller.
    let why = unsafe { why_unmeasured(&path, envp) };
    if why != 0 {
        // SAFETY: as above.
        let child = if pid.is_null() { 0 } else { unsafe { *pid } };
        record(child, &path, why);
    }
}

/// Interposed `posix_spawn`: see the module.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut pid_t,
    path: *const c_char,
    actions: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    let real = real!(POSIX_SPAWN, Spawn);
    // SAFETY: forwarding unchanged.
    let ret = unsafe { real(pid, path, actions, attr, argv, envp) };
    // SAFETY: the caller's arguments, as libc read them.
    unsafe { after_spawn(ret, pid, || literal_path(path), envp) };
    ret
}

/// Interposed `posix_spawnp`: see the module.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut pid_t,
    file: *const c_char,
    actions: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    let real = real!(POSIX_SPAWNP, Spawn);
    // SAFETY: forwarding unchanged.
    let ret = unsafe { real(pid, file, actions, attr, argv, envp) };
    // SAFETY: as in `posix_spawn`.
    unsafe { after_spawn(ret, pid, || searched_path(file), envp) };
    ret
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(path: &str) -> u32 {
        let p = PathBuf::of(&[path.as_bytes()]).expect("path");
        why_not_loadable(p.as_ptr(), 2)
    }

    #[test]
    fn static_programs_are_told_from_dynamic_ones_and_scripts_by_their_interpreter() {
        let dir = tempfile::tempdir().expect("tempdir");
        // This test binary is dynamically linked; busybox-static (scripts/setup.sh) is not.
        let own = std::env::current_exe().expect("exe");
        assert_eq!(why(own.to_str().expect("utf-8")), 0);
        assert_eq!(why("/bin/busybox"), entry::NO_AGENT | entry::STATIC);
        let script = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).expect("write");
            p.to_str().expect("utf-8").to_string()
        };
        assert_eq!(why(&script("dyn.sh", "#!/bin/sh\necho hi\n")), 0);
        assert_eq!(why(&script("static.sh", "#! /bin/busybox sh\necho hi\n")), entry::NO_AGENT | entry::STATIC);
        assert_eq!(why(&script("text.txt", "no interpreter\n")), 0);
        assert_eq!(why("/nonexistent"), 0);
    }

    #[test]
    fn an_environment_carries_the_agent_only_with_its_variable_and_its_preload_entry() {
        let carries = |vars: &[&CStr]| {
            let mut v: Vec<*const c_char> = vars.iter().map(|s| s.as_ptr()).collect();
            v.push(std::ptr::null());
            // SAFETY: a NULL-terminated array of NUL-terminated strings.
            unsafe { env_carries_agent(v.as_ptr()) }
        };
        let counters = c"NESQUIC_AGENT_COUNTERS=/tmp/c";
        assert_eq!(abi::COUNTERS_ENV, "NESQUIC_AGENT_COUNTERS");
        assert!(carries(&[c"HOME=/root", counters, c"LD_PRELOAD=/x/libnesquic_agent.so"]));
        assert!(!carries(&[counters, c"LD_PRELOAD=/x/libother.so"]));
        assert!(!carries(&[c"LD_PRELOAD=/x/libnesquic_agent.so"]));
        assert!(!carries(&[c"NESQUIC_AGENT_COUNTERS_X=1", c"LD_PRELOAD=/x/libnesquic_agent.so"]));
        assert!(!carries(&[]));
        // SAFETY: null is allowed.
        assert!(!unsafe { env_carries_agent(std::ptr::null()) });
    }

    #[test]
    fn a_command_name_is_found_on_path_as_execvp_would() {
        let found = search_path(c"sh").expect("sh on PATH");
        assert!(found.as_bytes().ends_with(b"/sh"), "{:?}", String::from_utf8_lossy(found.as_bytes()));
        assert_eq!(search_path(c"/bin/sh").map(|p| p.as_bytes().to_vec()), Some(b"/bin/sh".to_vec()));
        assert!(search_path(c"no-such-command-anywhere").is_none());
    }
}
