//! Which mechanism measures each probe (`--probe-backend`): the user-space agent
//! (`libnesquic_agent.so` preloaded into the LUT: inline hooks on functions, libc interposition
//! for packet I/O; a few ns per call, no root) or the kernel (eBPF uprobes and syscall
//! tracepoints; ~1 us per uprobe hit here, root). `auto` takes user space wherever the agent can
//! hook and the kernel for the rest; the sampling profile is always the kernel's.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use nesquic_ebpf::metrics::Mechanism;

// The mechanisms' labels, for the lines and summaries that name several at once.
const MECHANISM_INLINE_HOOK: &str = Mechanism::InlineHook.as_str();
const MECHANISM_INTERPOSITION: &str = Mechanism::Interposition.as_str();
const MECHANISM_UPROBE: &str = Mechanism::Uprobe.as_str();
use nesquic_ebpf::profile::user_mode::UserModeSampler;
use nesquic_ebpf::user::UserBackend;
use nesquic_ebpf::{Metrics, ProbeSession, ResolvedFunction, RoleMetrics};
use serde::Serialize;

use nesquic_protocol::Role;

use crate::error::StepExt;
use crate::plan::ProbePlan;
use crate::user::{AgentPlan, UserAgent};
use crate::EngineError;

type Result<T> = std::result::Result<T, EngineError>;

/// `--probe-backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendChoice {
    /// User space where the agent can hook (dynamically linked programs, safe function
    /// entries), the kernel for the rest (static binaries, refused entries, --duty,
    /// --qlog-datagrams).
    #[default]
    Auto,
    /// User space; refused function entries still fall back to kernel uprobes. An error when the
    /// program cannot load the agent or an option needs the kernel.
    User,
    /// eBPF only (uprobes, syscall tracepoints): root.
    Kernel,
    /// Functions as `auto`; packet I/O measured by both the agent and the tracepoints, and the
    /// two compared (root).
    Both,
}

/// What the kernel must measure in spite of the choice, and why (`--duty` toggles uprobes,
/// `--qlog-datagrams` streams tracepoint records).
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelNeeds {
    /// `--duty`: function probes are attached and detached on a schedule.
    pub duty: bool,
    /// `--qlog-datagrams`: one ring-buffer record per message.
    pub datagram_events: bool,
    /// The program starts through a launcher (`--lut exec` runs `/bin/sh -c 'exec CMD'`): the
    /// agent would load into the shell and be gone by the time it execs the command.
    pub launched_by_shell: bool,
    /// The agent follows the command into the programs it execs and starts (`nesquic trace`: a
    /// command is often a script or a launcher), instead of staying in its first process.
    pub agent_follows_programs: bool,
}

/// One function the agent refused, measured by a kernel uprobe instead.
#[derive(Debug, Clone, Serialize)]
pub struct Fallback {
    /// Demangled name.
    pub name: String,
    /// Why the agent cannot hook it.
    pub reason: String,
}

pub use nesquic_record::run::AgentReport;

/// The probes of one run: a kernel session and/or the user-space agent.
pub struct Probes {
    /// eBPF (root): uprobes, tracepoints, the profile.
    pub kernel: Option<ProbeSession>,
    /// The agent.
    pub user: Option<UserProbes>,
    /// The sampling profile without root (user mode only, no eBPF), when it replaces the kernel's.
    pub user_profile: Option<UserModeSampler>,
}

/// The user-space side: the plan and each LUT process's agent.
pub struct UserProbes {
    plan: Box<dyn AgentPlan>,
    /// I/O is measured by the agent.
    io: bool,
    /// The tracepoints measure I/O too (`both`): the agent's rows are compared with them.
    crosscheck: bool,
    /// Functions the agent refused (kernel uprobes measure them).
    pub fallbacks: Vec<Fallback>,
    agents: Vec<(Role, Box<dyn UserAgent>)>,
}

impl Probes {
    /// Decides who measures what, prepares the agent's plan in `dir` and opens the kernel
    /// session if anything needs it.
    pub fn open(
        plan: &ProbePlan,
        choice: BackendChoice,
        binary: &Path,
        dir: &Path,
        needs: KernelNeeds,
    ) -> Result<Self> {
        plan.require_matches()?;
        let request = &plan.request;
        let functions = &plan.resolution.functions;
        let user_possible = user_space_possible(binary, choice, needs)?;
        let mut kernel_functions: Vec<ResolvedFunction> = Vec::new();
        let mut user = None;
        let user_io = user_possible && request.io;
        let wants_user_functions = user_possible && !needs.duty && !functions.is_empty();
        if user_io || wants_user_functions {
            let handed: &[ResolvedFunction] = if wants_user_functions { functions } else { &[] };
            let prepare =
                if needs.agent_follows_programs { UserBackend::prepare_following } else { UserBackend::prepare };
            let (backend, refused) = prepare(dir, handed, user_io).step("prepare the user-space probe agent")?;
            let fallbacks =
                refused.iter().map(|(f, why)| Fallback { name: f.name.clone(), reason: why.clone() }).collect();
            kernel_functions.extend(refused.into_iter().map(|(f, _)| f));
            user =
                Some(UserProbes::new(Box::new(backend), user_io, user_io && choice == BackendChoice::Both, fallbacks));
        }
        if !wants_user_functions {
            kernel_functions = functions.clone();
        }
        let kernel_io = request.io && (!user_io || choice == BackendChoice::Both);
        // Without root, a profile on the default clock is still possible: user mode only, on
        // the LUT's own processes (perf_event_paranoid <= 2), when nothing else needs eBPF.
        let privileges = nesquic_ebpf::preflight::check_privileges();
        let user_mode_profile = request.profile
            && privileges.is_err()
            && !kernel_io
            && kernel_functions.is_empty()
            && choice != BackendChoice::Kernel;
        // Only the fixed-rate clock: `~HZ` re-arms a BPF-fed event and the tick is a kernel hook.
        if let (true, nesquic_ebpf::catalog::ProfileClock::CpuClock(hz)) = (user_mode_profile, request.profile_clock) {
            let sampler = UserModeSampler::start(hz).step("cannot start the user-mode sampling profile")?;
            return Ok(Self { kernel: None, user, user_profile: Some(sampler) });
        }
        let kernel = if kernel_io || !kernel_functions.is_empty() || request.profile {
            if let Err(e) = privileges {
                return Err(EngineError::msg(format!(
                    "{e}; {}",
                    kernel_only_items(kernel_io, &kernel_functions, request.profile, &user)
                )));
            }
            let mut session = ProbeSession::open(kernel_io, kernel_functions).step("cannot start the eBPF probes")?;
            if request.profile {
                crate::plan::start_profile(&mut session, request.profile_clock)?;
            }
            Some(session)
        } else {
            None
        };
        Ok(Self { kernel, user, user_profile: None })
    }

    /// One line per mechanism in use, for the terminal.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(u) = &self.user {
            let hooked = u.plan.planned().len();
            if u.io {
                lines.push(format!(
                    "packet I/O: {MECHANISM_INTERPOSITION}{}",
                    if u.crosscheck { ", checked against the syscall tracepoints" } else { "" }
                ));
            }
            if hooked > 0 {
                lines.push(format!("{hooked} function(s): {MECHANISM_INLINE_HOOK}"));
            }
            for f in &u.fallbacks {
                lines.push(format!("{}: {MECHANISM_UPROBE} (the agent cannot hook it: {})", f.name, f.reason));
            }
        }
        if let Some(p) = &self.user_profile {
            lines.push(format!(
                "sampling profile: user mode only, {} Hz per CPU on the LUT's own processes (no root: time in the kernel is not sampled)",
                p.hz()
            ));
        }
        if let Some(k) = &self.kernel {
            if let Some(io) = k.io_mechanism() {
                if self.user.as_ref().is_none_or(|u| !u.io) {
                    lines.push(format!("packet I/O: {io}"));
                }
            }
            if self.user.is_none() && !k.functions().is_empty() {
                lines.push(format!("{} function(s): {MECHANISM_UPROBE}", k.functions().len()));
            }
        }
        lines
    }
}

impl UserProbes {
    /// The agent's side of a run: `plan` gives each process its agent; `io`: the agent measures
    /// packet I/O; `crosscheck`: the tracepoints measure it too, as the reference;
    /// `fallbacks`: the functions it refused, which kernel uprobes measure instead.
    pub fn new(plan: Box<dyn AgentPlan>, io: bool, crosscheck: bool, fallbacks: Vec<Fallback>) -> Self {
        Self { plan, io, crosscheck, fallbacks, agents: Vec::new() }
    }

    /// The environment for a LUT process about to start in `role` (its own counters file).
    pub fn environment(&mut self, role: Role) -> Result<Vec<(String, OsString)>> {
        let agent =
            self.plan.agent(self.agents.len(), role).with_step(|| format!("prepare the agent for the {role}"))?;
        let env = agent.env();
        self.agents.push((role, agent));
        Ok(env)
    }

    /// What the agents of this repetition measured so far, per role.
    pub fn snapshot(&self) -> Vec<RoleMetrics> {
        self.agents.iter().map(|(_, a)| a.snapshot()).collect()
    }

    /// Ends a repetition: what each agent reported about itself; the next repetition starts
    /// fresh agents (new counters files).
    pub fn finish_repetition(&mut self) -> Vec<AgentReport> {
        std::mem::take(&mut self.agents)
            .into_iter()
            .map(|(role, a)| {
                let seen = a.processes();
                AgentReport {
                    role,
                    ready: a.ready(),
                    functions: a.patch_status(),
                    startup_cpu_ns: a.startup_cpu_ns(),
                    processes: seen.listed,
                    processes_unlisted: seen.unlisted,
                    processes_unlisted_without_agent: seen.unlisted_without_agent,
                }
            })
            .collect()
    }

    /// The functions the agent hooks.
    pub fn planned(&self) -> impl Iterator<Item = &ResolvedFunction> {
        self.plan.planned().iter().map(|p| &p.function)
    }

    /// How the agent measures packet I/O, if it does.
    pub fn io_mechanism(&self) -> Option<&'static str> {
        self.io.then_some(MECHANISM_INTERPOSITION)
    }

    /// Whether the agent times any function (its calibration is then needed).
    pub fn times_functions(&self) -> bool {
        self.plan.planned().iter().any(|p| p.function.timed)
    }

    /// Adds what the agents measured to the kernel's figures (or makes them the only figures).
    /// With the cross-check on, the tracepoints' I/O rows stay the reference and the agent's go
    /// to `io_crosscheck`.
    pub fn merge_into(&self, kernel: Option<Metrics>) -> Metrics {
        let user = self.snapshot();
        let mut metrics = kernel.unwrap_or_else(no_totals);
        for u in user {
            let role = match metrics.roles.iter_mut().find(|r| r.role == u.role) {
                Some(r) => r,
                None => {
                    metrics.roles.push(RoleMetrics {
                        role: u.role,
                        io: Vec::new(),
                        functions: Vec::new(),
                        io_crosscheck: Vec::new(),
                        agent_lost: None,
                        byte_stream: false,
                        blocking_calls: false,
                    });
                    // Invariant: just pushed.
                    metrics.roles.last_mut().expect("role just added")
                }
            };
            if self.crosscheck {
                role.io_crosscheck.extend(u.io);
            } else if self.io {
                role.io.extend(u.io);
            }
            role.functions.extend(u.functions);
            // Each process's losses, summed per role (the kernel's go to `metrics.lost`).
            if let Some(lost) = u.agent_lost {
                role.agent_lost.get_or_insert_with(Default::default).add(&lost);
            }
        }
        if self.io && !self.crosscheck {
            metrics.io_mechanism = Some(MECHANISM_INTERPOSITION.to_string());
        }
        if !self.plan.planned().is_empty() {
            metrics.function_mechanism = Some(match (&metrics.function_mechanism, self.fallbacks.len()) {
                (Some(_), n) if n > 0 => format!(
                    "{MECHANISM_INLINE_HOOK}; {MECHANISM_UPROBE} for {n} refused entr{}",
                    if n == 1 { "y" } else { "ies" }
                ),
                _ => MECHANISM_INLINE_HOOK.to_string(),
            });
        }
        metrics
    }
}

/// Figures with no row yet: what the agents' rows go into when the kernel counts nothing.
pub(crate) fn no_totals() -> Metrics {
    Metrics {
        io_mechanism: None,
        function_mechanism: None,
        kprobes_available: nesquic_ebpf::preflight::kprobes_available(),
        roles: Vec::new(),
        lost: Default::default(),
        kernel_io: Default::default(),
    }
}

/// Whether the agent can be preloaded into `binary` under `choice`; an error when `user` was
/// asked for and cannot be had.
/// Why the user-space agent cannot measure `binary`'s process under `needs`, if it cannot.
pub fn why_not_user_space(binary: &Path, needs: KernelNeeds) -> Option<String> {
    if !nesquic_ebpf::objects::is_dynamic(binary) {
        Some(format!("{} is not dynamically linked, so LD_PRELOAD cannot load the agent into it", binary.display()))
    } else if needs.launched_by_shell {
        Some("the program starts through /bin/sh, which would drop the agent before it execs the command".to_string())
    } else if needs.datagram_events {
        Some("--qlog-datagrams streams one record per message from the syscall tracepoints".to_string())
    } else {
        None
    }
}

fn user_space_possible(binary: &Path, choice: BackendChoice, needs: KernelNeeds) -> Result<bool> {
    if choice == BackendChoice::Kernel {
        return Ok(false);
    }
    match (why_not_user_space(binary, needs), choice) {
        (Some(why), BackendChoice::User | BackendChoice::Both) => Err(EngineError::msg(format!(
            "--probe-backend {}: {why}; use --probe-backend kernel (root)",
            if choice == BackendChoice::User { "user" } else { "both" }
        ))),
        (Some(_), _) => Ok(false),
        (None, BackendChoice::User) if needs.duty => {
            Err(EngineError::msg("--duty switches kernel uprobes on and off: use --probe-backend kernel or auto"))
        }
        (None, _) => Ok(true),
    }
}

/// "needs root" detail: which requested probes only the kernel provides here.
fn kernel_only_items(io: bool, functions: &[ResolvedFunction], profile: bool, user: &Option<UserProbes>) -> String {
    let mut items = Vec::new();
    if profile {
        items.push("the sampling profile (perf events + BPF)".to_string());
    }
    if io {
        items.push("packet I/O by syscall tracepoints".to_string());
    }
    for f in functions {
        let why = user
            .as_ref()
            .and_then(|u| u.fallbacks.iter().find(|b| b.name == f.name))
            .map_or("kernel backend".to_string(), |b| format!("the agent cannot hook it: {}", b.reason));
        items.push(format!("{} ({why})", f.name));
    }
    format!("only the kernel can measure: {}", items.join(", "))
}

/// The run directory the agent's plan and counters go to when a command has none (`trace`,
/// `--overhead`): a fresh temporary directory, removed with the returned guard.
pub fn scratch_dir() -> Result<(tempfile::TempDir, PathBuf)> {
    let dir = crate::leftovers::scratch_dir("agent").step("create a directory for the agent plan")?;
    let path = dir.path().to_path_buf();
    Ok((dir, path))
}

/// Who measures the functions and I/O of a plan, as a run would decide (`nesquic probes`).
pub struct WhoMeasures {
    /// The agent measures (the program is dynamically linked and the choice allows it).
    pub user: bool,
    /// Why the kernel measures instead, when it does.
    pub why_kernel: String,
    /// Functions the agent would refuse (name, why); kernel uprobes measure them.
    pub refused: Vec<(String, String)>,
}

/// Decides [`WhoMeasures`] for `plan` on `binary` under `choice`.
pub fn who_measures(plan: &ProbePlan, binary: &Path, choice: BackendChoice) -> Result<WhoMeasures> {
    let user = choice != BackendChoice::Kernel && nesquic_ebpf::objects::is_dynamic(binary);
    // Which entries the agent would refuse, and why (the same check a run makes).
    let refused = if user && !plan.resolution.functions.is_empty() {
        let scratch = tempfile::tempdir().map_err(EngineError::os("scratch directory for the agent plan"))?;
        let (_, refused) = UserBackend::prepare(scratch.path(), &plan.resolution.functions, false)?;
        refused.into_iter().map(|(f, why)| (f.name, why)).collect()
    } else {
        Vec::new()
    };
    let why_kernel = if choice == BackendChoice::Kernel {
        "--probe-backend kernel".to_string()
    } else {
        format!("{} is not dynamically linked: LD_PRELOAD cannot load the agent", binary.display())
    };
    Ok(WhoMeasures { user, why_kernel, refused })
}
