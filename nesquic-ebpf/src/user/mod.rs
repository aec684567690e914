//! User-space probes: Nesquic's side of the `LD_PRELOAD` agent (`libnesquic_agent.so`, crate
//! `nesquic-agent`). Before launch it checks each function's entry on the object file's bytes
//! (refused ones fall back to the kernel uprobe), writes the plan and the counters of each
//! process into memfds the agent opens by their `/proc` paths (files in the run directory where
//! memfds are missing); afterwards (or live) it turns the counters into the same
//! [`RoleMetrics`] the kernel path produces, with `mechanism` saying what measured each row.
//!
//! The CLI calls [`UserBackend::prepare`], then [`UserBackend::process`] per LUT process (adding
//! [`AgentProcess::env`] to its environment), then [`AgentProcess::snapshot`].

mod counters;
pub mod site;
mod tsc;

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::Role;
use nesquic_agent_abi::{self as abi, entry, plan_status, slot_status, CountersHeader, PlanHeader, PlanTarget, Stats};

// The calibration that measures it is the engine's (`nesquic_engine::calibrate`).
pub use counters::CountersMap;
pub use nesquic_agent_abi::SHADOW_DEPTH;
// Renderers read the depth from the model; the agent uses the ABI's.
const _: () = assert!(SHADOW_DEPTH == nesquic_model::agent::SHADOW_DEPTH);
pub use nesquic_model::agent::AgentCost;
pub use nesquic_model::agent::PatchStatus;
pub use nesquic_model::agent::{ProcessSeen, ProcessesSeen};
pub use tsc::tsc_mult;

use crate::catalog::ResolvedFunction;
use crate::metrics::{AgentLost, FunctionMetrics, Mechanism, RoleMetrics, Syscall, SyscallMetrics, Timing};

/// Env var overriding where the agent library is.
pub const AGENT_LIB_ENV: &str = "NESQUIC_AGENT_LIB";
pub use nesquic_agent_abi::AGENT_LIB_NAME;

/// What can go wrong preparing user-space probes.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    /// The agent library is not where it should be.
    #[error("the user-space probe agent {0} is missing: build it with `just build`")]
    AgentMissing(PathBuf),
    /// A file could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The agent's calibration measured nothing to report (never a figure in its place).
    #[error("agent calibration: {0}")]
    Calibration(String),
    /// A path does not fit the plan's fixed fields.
    #[error("path too long for the agent plan: {0}")]
    PathTooLong(PathBuf),
}

/// One function the agent hooks.
#[derive(Debug, Clone)]
pub struct PlannedFunction {
    /// The function.
    pub function: ResolvedFunction,
    /// Its counter slot.
    pub slot: u32,
}

/// The prepared user-space backend of one run.
pub struct UserBackend {
    run_dir: PathBuf,
    agent_lib: PathBuf,
    plan_path: PathBuf,
    /// The plan's memfd (or file): open while any process may still start and read it.
    plan_file: Arc<std::fs::File>,
    planned: Vec<PlannedFunction>,
    io: bool,
}

impl UserBackend {
    /// Checks every function's site, writes the plan (into a memfd; into `run_dir` where there
    /// is none). Returns the backend and
    /// the functions it refused, each with one short reason: measure those with kernel uprobes.
    /// The agent stays in the one process it is started in (see [`UserBackend::prepare_following`]).
    pub fn prepare(
        run_dir: &Path,
        functions: &[ResolvedFunction],
        io: bool,
    ) -> Result<(UserBackend, Vec<(ResolvedFunction, String)>), UserError> {
        Self::prepare_with(run_dir, functions, io, false)
    }

    /// [`UserBackend::prepare`] for an agent that follows the process into the programs it execs
    /// and starts (`abi::PLAN_FOLLOW`): they load it too and count into the same counters. Each
    /// hooks the planned functions of the objects it has loaded.
    pub fn prepare_following(
        run_dir: &Path,
        functions: &[ResolvedFunction],
        io: bool,
    ) -> Result<(UserBackend, Vec<(ResolvedFunction, String)>), UserError> {
        Self::prepare_with(run_dir, functions, io, true)
    }

    fn prepare_with(
        run_dir: &Path,
        functions: &[ResolvedFunction],
        io: bool,
        follow: bool,
    ) -> Result<(UserBackend, Vec<(ResolvedFunction, String)>), UserError> {
        let agent_lib = agent_library()?;
        let mut files: HashMap<PathBuf, Result<(PathBuf, Vec<u8>), String>> = HashMap::new();
        let (mut targets, mut planned, mut refused) = (Vec::new(), Vec::new(), Vec::new());
        for f in functions {
            if planned.len() >= abi::MAX_SLOTS {
                refused.push((f.clone(), format!("more than {} functions for the agent", abi::MAX_SLOTS)));
                continue;
            }
            let file = files.entry(f.object.clone()).or_insert_with(|| read_object(&f.object));
            let target = match file {
                Ok((canonical, bytes)) => plan_target(f, canonical, bytes, planned.len() as u32),
                Err(e) => Err(e.clone()),
            };
            match target {
                Ok(t) => {
                    planned.push(PlannedFunction { function: f.clone(), slot: t.slot });
                    targets.push(t);
                }
                Err(reason) => refused.push((f.clone(), reason)),
            }
        }
        let placeholder = run_dir.join("agent.counters");
        let flags = if io { abi::PLAN_IO } else { 0 } | if follow { abi::PLAN_FOLLOW } else { 0 };
        let header =
            PlanHeader::new(targets.len() as u32, flags, tsc_mult(), placeholder.as_os_str().as_encoded_bytes())
                .ok_or_else(|| UserError::PathTooLong(placeholder.clone()))?;
        let mut bytes = abi::as_bytes(&header).to_vec();
        for t in &targets {
            bytes.extend_from_slice(abi::as_bytes(t));
        }
        let (counters::SharedFile { mut file, path: plan_path }, _) =
            counters::shared_file(c"nesquic-agent-plan", &run_dir.join("agent-plan.bin"))?;
        file.write_all(&bytes).map_err(|source| UserError::Io {
            what: format!("write the agent plan {}", plan_path.display()),
            source,
        })?;
        let plan_file = Arc::new(file);
        let backend = UserBackend { run_dir: run_dir.to_path_buf(), agent_lib, plan_path, plan_file, planned, io };
        Ok((backend, refused))
    }

    /// The functions the agent will hook (slot order).
    pub fn planned(&self) -> &[PlannedFunction] {
        &self.planned
    }

    /// The agent library used.
    pub fn agent_library(&self) -> &Path {
        &self.agent_lib
    }

    /// Where the agent reads the plan (`/proc/<pid>/fd/<n>` for a memfd).
    pub fn plan_path(&self) -> &Path {
        &self.plan_path
    }

    /// Sets up one LUT process: its counters (a memfd; `agent-<index>-<role>.counters` in the
    /// run directory where there is none) and the environment to start it with.
    pub fn process(&self, role_index: usize, role: Role) -> Result<AgentProcess, UserError> {
        let counters = CountersMap::create(&self.run_dir.join(format!("agent-{role_index}-{role}.counters")))?;
        let mut preload = self.agent_lib.clone().into_os_string();
        if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
            preload.push(":");
            preload.push(existing);
        }
        let env = vec![
            ("LD_PRELOAD".to_string(), preload),
            (abi::PLAN_ENV.to_string(), self.plan_path.clone().into_os_string()),
            (abi::COUNTERS_ENV.to_string(), counters.path().as_os_str().to_owned()),
        ];
        Ok(AgentProcess {
            role,
            counters,
            env,
            planned: self.planned.clone(),
            io: self.io,
            _plan: Arc::clone(&self.plan_file),
        })
    }
}

/// One LUT process's agent: its environment and its counters.
pub struct AgentProcess {
    role: Role,
    counters: CountersMap,
    env: Vec<(String, OsString)>,
    planned: Vec<PlannedFunction>,
    io: bool,
    /// The plan stays readable while this process may start.
    _plan: Arc<std::fs::File>,
}

/// The agent's own state in one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentState {
    /// The agent finished its initialisation in the process.
    pub ready: bool,
    /// The plan's [`plan_status`] code.
    pub plan_status: u32,
    /// The process (0 before init).
    pub pid: u32,
    /// Losses and events.
    pub health: abi::AgentHealth,
    /// CPU time the agent's start-up took (its constructor), summed over the processes it ran
    /// in, ns.
    pub init_cpu_ns: u64,
}

impl AgentProcess {
    /// Variables to add to the process's environment (`LD_PRELOAD`, plan and counters paths).
    pub fn env(&self) -> &[(String, OsString)] {
        &self.env
    }

    /// Adds [`AgentProcess::env`] to a command.
    pub fn apply_to(&self, command: &mut std::process::Command) {
        for (k, v) in &self.env {
            command.env(k, v);
        }
    }

    /// Where the agent opens the counters (`/proc/<pid>/fd/<n>` for a memfd).
    pub fn counters_path(&self) -> &Path {
        self.counters.path()
    }

    /// What the agent measured so far, as the kernel path reports it (rows with calls only).
    pub fn snapshot(&self) -> RoleMetrics {
        metrics_of(self.role, &self.counters, &self.planned, self.io)
    }

    /// Per planned function: patched, or why not.
    pub fn patch_status(&self) -> Vec<PatchStatus> {
        let h = self.counters.header();
        let state = state_of(&h);
        self.planned
            .iter()
            .map(|p| {
                let code = if !state.ready {
                    slot_status::UNUSED
                } else if state.plan_status != plan_status::OK {
                    slot_status::PLAN_REJECTED
                } else {
                    h.slot_status[p.slot as usize]
                };
                let reason = if state.ready { slot_status::describe(code) } else { "agent did not run in the process" };
                PatchStatus {
                    name: p.function.name.clone(),
                    object: p.function.object.display().to_string(),
                    patched: code == slot_status::PATCHED,
                    reason: reason.to_string(),
                }
            })
            .collect()
    }

    /// The agent's state in the process.
    pub fn state(&self) -> AgentState {
        state_of(&self.counters.header())
    }

    /// The programs the agent ran in and those they started that cannot load it, in the order
    /// they started (the first [`abi::MAX_PROCESSES`] entries), and how many more there were.
    pub fn processes(&self) -> ProcessesSeen {
        let entries = self.counters.processes();
        let written: Vec<_> = entries.iter().filter(|p| p.pid != 0 || p.flags & entry::NO_AGENT != 0).collect();
        let failed = written.iter().filter(|p| p.flags & entry::EXEC_FAILED != 0).count() as u32;
        let listed: Vec<ProcessSeen> = written
            .iter()
            .filter(|p| p.flags & entry::EXEC_FAILED == 0)
            .map(|p| {
                let len = p.comm.iter().position(|b| *b == 0).unwrap_or(p.comm.len());
                ProcessSeen {
                    pid: p.pid,
                    name: String::from_utf8_lossy(&p.comm[..len]).into_owned(),
                    without_agent: (p.flags & entry::NO_AGENT != 0).then(|| why_without_agent(p.flags).to_string()),
                }
            })
            .collect();
        let header = self.counters.header();
        let unlisted = header.processes.saturating_sub(failed).saturating_sub(listed.len() as u32);
        ProcessesSeen { listed, unlisted, unlisted_without_agent: header.unlisted_without_agent.min(unlisted) }
    }
}

/// The reason bits of an entry without the agent, in words.
fn why_without_agent(flags: u32) -> &'static str {
    if flags & entry::STATIC != 0 {
        "statically linked"
    } else if flags & entry::SETUID != 0 {
        "set-user-ID or set-group-ID: the loader ignores LD_PRELOAD"
    } else if flags & entry::NOT_ELF64 != 0 {
        "not a 64-bit x86 ELF program"
    } else if flags & entry::ENV_DROPPED != 0 {
        "started with an environment without the agent's variables"
    } else {
        "cannot load the agent"
    }
}

fn state_of(h: &CountersHeader) -> AgentState {
    AgentState {
        ready: h.is_valid() && h.state == abi::state::READY,
        plan_status: h.plan_status,
        pid: h.pid,
        health: h.health,
        init_cpu_ns: h.init_cpu_ns,
    }
}

/// Where the agent is: `$NESQUIC_AGENT_LIB`, else next to the running executable (one directory
/// up too, for test binaries in `target/release/deps`).
pub fn agent_library() -> Result<PathBuf, UserError> {
    if let Some(p) = std::env::var_os(AGENT_LIB_ENV) {
        let p = PathBuf::from(p);
        return if p.is_file() { Ok(p) } else { Err(UserError::AgentMissing(p)) };
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [dir.join(AGENT_LIB_NAME), dir.parent().unwrap_or(dir).join(AGENT_LIB_NAME)];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| UserError::AgentMissing(candidates[0].clone()))
}

fn read_object(path: &Path) -> Result<(PathBuf, Vec<u8>), String> {
    let canonical = std::fs::canonicalize(path).map_err(|e| format!("object unreadable ({e})"))?;
    let bytes = std::fs::read(&canonical).map_err(|e| format!("object unreadable ({e})"))?;
    Ok((canonical, bytes))
}

/// The plan entry for `f`, or why its site is refused.
fn plan_target(f: &ResolvedFunction, canonical: &Path, file: &[u8], slot: u32) -> Result<PlanTarget, String> {
    if f.size == 0 {
        return Err("no symbol size".into());
    }
    let start = f.file_offset.checked_sub(f.site.skip).ok_or("bad file offset")? as usize;
    let code =
        start.checked_add(f.size as usize).and_then(|end| file.get(start..end)).ok_or("symbol outside the file")?;
    let site = site::analyse(code, f.address)?;
    let object =
        abi::c_path(canonical.as_os_str().as_encoded_bytes()).ok_or("object path too long for the agent plan")?;
    let mut expected = [0u8; abi::EXPECTED_LEN];
    expected[..site.expected.len()].copy_from_slice(&site.expected);
    Ok(PlanTarget {
        object,
        site_vaddr: f.address + site.skip,
        size: f.size - site.skip,
        displaced: site.displaced,
        expected_len: site.expected.len() as u32,
        expected,
        slot,
        mode: if f.timed { abi::MODE_TIME } else { abi::MODE_COUNT },
        bytes_arg: f.bytes_arg,
        flags: if site.position_independent { abi::target_flags::POSITION_INDEPENDENT } else { 0 },
    })
}

fn timing(s: &Stats) -> Timing {
    Timing::from_parts(s.calls, s.total_ns, &s.hist)
}

/// The agent's I/O slots as the system calls the tracepoints see: libc's `send` and `recv` are
/// the `sendto` and `recvfrom` system calls (x86-64 has no others), so their counts join those rows.
fn syscall_rows(slots: &[Stats]) -> Vec<Stats> {
    let mut rows = slots.to_vec();
    let slot = |name: &str| abi::IO_CALLS.iter().position(|c| *c == name);
    for (libc_fn, syscall) in [("send", "sendto"), ("recv", "recvfrom")] {
        if let (Some(from), Some(to)) = (slot(libc_fn), slot(syscall)) {
            if from < rows.len() && to < rows.len() {
                let moved = std::mem::replace(&mut rows[from], Stats::ZERO);
                rows[to].add(&moved);
            }
        }
    }
    rows
}

/// Counters -> one role's metrics (the kernel path's semantics; rows without calls left out).
/// A function's figures are the sum of its slot over every per-thread shard.
fn metrics_of(role: Role, c: &CountersMap, planned: &[PlannedFunction], io: bool) -> RoleMetrics {
    let valid = c.header().is_valid();
    let io_rows = if io && valid { syscall_rows(&c.io()) } else { Vec::new() };
    // Every slot with calls is a system call by now: `syscall_rows` moved libc's `send`/`recv`
    // (the only other names) into `sendto`/`recvfrom`.
    let io = io_rows
        .iter()
        .zip(abi::IO_CALLS)
        .filter(|(s, _)| s.calls > 0)
        .filter_map(|(s, name)| Some((s, Syscall::from_name(name)?)))
        .map(|(s, syscall)| SyscallMetrics {
            syscall,
            direction: syscall.direction(),
            timing: timing(s),
            errors: s.errors,
            eagain: s.eagain,
            bytes: s.bytes,
            datagrams: s.datagrams,
            messages: s.messages,
            segmented_messages: s.segmented,
            mechanism: Mechanism::Interposition,
        })
        .collect();
    let functions = planned
        .iter()
        .filter(|_| valid)
        .map(|p| (p, c.function(p.slot as usize)))
        .filter(|(_, s)| s.calls > 0)
        .map(|(p, s)| FunctionMetrics {
            category: p.function.category.clone(),
            name: p.function.name.clone(),
            object: p.function.object.display().to_string(),
            timing: if p.function.timed { timing(&s) } else { Timing { calls: s.calls, ..Timing::empty() } },
            bytes: s.bytes,
            timed: p.function.timed,
            site: None,
            compensated_mean_ns: None,
            compensation_uncertainty_ns: None,
            duty: None,
            mechanism: Mechanism::InlineHook,
        })
        .collect();
    // Read after the rows: a call lost meanwhile is reported rather than missed.
    let h = c.header();
    let agent_lost = (valid && h.state == abi::state::READY)
        .then_some(AgentLost { shadow_full: h.health.shadow_full, shadow_dropped: h.health.shadow_dropped });
    RoleMetrics {
        role,
        io,
        functions,
        io_crosscheck: Vec::new(),
        agent_lost,
        byte_stream: false,
        blocking_calls: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_and_recv_are_reported_as_the_system_calls_they_are() {
        let mut slots = [Stats::ZERO; abi::IO_KINDS];
        let at = |name: &str| abi::IO_CALLS.iter().position(|c| *c == name).expect("slot");
        slots[at("send")].calls = 3;
        slots[at("sendto")].calls = 2;
        slots[at("recv")].bytes = 100;
        slots[at("write")].calls = 7;
        let rows = syscall_rows(&slots);
        assert_eq!((rows[at("sendto")].calls, rows[at("send")].calls), (5, 0));
        assert_eq!((rows[at("recvfrom")].bytes, rows[at("recv")].bytes), (100, 0));
        assert_eq!(rows[at("write")].calls, 7, "write/read are not system calls the tracepoints see");
    }
}
