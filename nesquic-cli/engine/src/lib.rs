//! Nesquic's engine: what happens to LUT processes during a run. It owns the process lifecycle
//! (`process`: spawned held at a gate so probes know the pid before the LUT runs, watched by
//! reader threads, reaped with `wait4` for the kernel's CPU accounting, always killed when the
//! run ends early; a role on another host is its ssh session, `process::link`), the one probed
//! lifecycle run, trace and calibrate share (`lifecycle`), a repetition's two processes
//! (`repetition`) measured (`measure`), whole runs (`run`: `RunPlan` in, `RunRecord` out), duty
//! cycles, overhead rounds, calibration, custom LUT builds and LUT executables built on first
//! use (`on_demand`), whose helper programs die with nesquic (`tether`), what a dead run left behind
//! (`leftovers`), and roles on other hosts: the
//! protocol as plain data (`wire`), the OpenSSH client (`ssh`), the local side (`remote`) and the
//! remote one (`remote_role`).
//!
//! Must not know command-line flags, rendering, or which LUT it runs: it starts executables with
//! arguments and reports what they said and what they cost.

pub mod ab;
pub mod backend;
pub mod bisect;
pub mod calibrate;
pub mod copy_limit;
pub mod crypto_limit;
pub mod custom_build;
pub mod drops;
pub mod duty;
mod endpoint;
mod error;
pub mod figures;
pub mod kernel;
pub mod leftovers;
pub mod lifecycle;
mod lines;
pub mod measure;
pub mod on_demand;
pub mod overhead;
pub mod pin;
pub mod plan;
pub mod process;
pub mod remote;
pub mod remote_role;
pub mod repetition;
pub mod run;
pub mod ssh;
pub mod tether;
pub mod threads;
pub mod tool;
pub mod trace;
pub mod user;
pub mod wire;

pub use error::{Cause, EngineError};

/// Client x server pairs (docs/pairs.md): a part of the run plan, re-exported at the top.
pub use run::pair;
