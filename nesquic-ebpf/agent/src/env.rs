//! The agent must not spread: during init it takes its own variables out of the environment and
//! its own entry out of `LD_PRELOAD`, so programs the LUT execs start without it. A plan with
//! `PLAN_FOLLOW` (`nesquic trace`) says the opposite: everything stays, and the programs the
//! command execs or starts load the agent too.

use std::ffi::{CStr, CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use crate::abi;

/// The files Nesquic named.
pub struct AgentPaths {
    /// The plan file.
    pub plan: Option<OsString>,
    /// The counters file.
    pub counters: Option<OsString>,
}

/// Reads the agent's variables, leaving them in place.
pub fn agent_vars() -> AgentPaths {
    AgentPaths { plan: read(abi::PLAN_ENV), counters: read(abi::COUNTERS_ENV) }
}

/// Removes the agent's variables and its `LD_PRELOAD` entry. Runs single-threaded, in the
/// constructor (setenv/unsetenv are not thread-safe).
pub fn remove_agent_vars() {
    for name in [abi::PLAN_ENV, abi::COUNTERS_ENV] {
        take(name);
    }
    remove_own_preload();
}

fn read(name: &str) -> Option<OsString> {
    let c_name = CString::new(name).ok()?;
    // SAFETY: getenv with a valid name; the value is copied at once.
    unsafe {
        let v = libc::getenv(c_name.as_ptr());
        (!v.is_null()).then(|| OsString::from_vec(CStr::from_ptr(v).to_bytes().to_vec()))
    }
}

fn take(name: &str) -> Option<OsString> {
    // `read` copies the value before unsetenv frees it.
    let value = read(name)?;
    let c_name = CString::new(name).ok()?;
    // SAFETY: unsetenv with a valid name, single-threaded (see remove_agent_vars).
    unsafe { libc::unsetenv(c_name.as_ptr()) };
    Some(value)
}

/// The file name this library was loaded as (`libnesquic_agent.so`).
fn own_file_name() -> Option<Vec<u8>> {
    // SAFETY: dladdr only reads the loader's tables; dli_fname is a NUL-terminated string owned
    // by the loader for as long as this object is mapped.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(agent_vars as *const libc::c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        let full = CStr::from_ptr(info.dli_fname).to_bytes();
        Some(full.rsplit(|b| *b == b'/').next().unwrap_or(full).to_vec())
    }
}

fn remove_own_preload() {
    let Some(own) = own_file_name() else { return };
    let Some(preload) = take("LD_PRELOAD") else { return };
    // LD_PRELOAD separates entries by spaces or colons.
    let kept: Vec<&[u8]> = preload
        .as_bytes()
        .split(|b| *b == b':' || *b == b' ')
        .filter(|e| !e.is_empty() && e.rsplit(|b| *b == b'/').next() != Some(own.as_slice()))
        .collect();
    if kept.is_empty() {
        return;
    }
    let (Ok(name), Ok(value)) = (CString::new("LD_PRELOAD"), CString::new(kept.join(&b':'))) else { return };
    // SAFETY: valid NUL-terminated strings; single-threaded init.
    unsafe { libc::setenv(name.as_ptr(), value.as_ptr(), 1) };
}
