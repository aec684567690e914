//! Nesquic's engine: what happens to LUT processes during a run. Today it owns the process
//! lifecycle (`process`: spawned held at a gate so probes know the pid before the LUT runs,
//! watched by reader threads, reaped with `wait4` for the kernel's CPU accounting, always killed
//! when the run ends early). Repetitions, duty cycles, overhead rounds and calibration still live
//! in the CLI crate and move here next (docs/architecture.md).
//!
//! Must not know command-line flags, rendering, or which LUT it runs: it starts executables with
//! arguments and reports what they said and what they cost.

pub mod ab;
pub mod backend;
pub mod calibrate;
pub mod custom_build;
pub mod duty;
mod error;
pub mod figures;
pub mod measure;
pub mod overhead;
pub mod plan;
pub mod process;
pub mod repetition;
pub mod run;
pub mod trace;

pub use error::{Cause, EngineError};
