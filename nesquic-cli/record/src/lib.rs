//! The run record and what is derived from it. The measurement types it is built from (metrics,
//! profile, packet cost, health counts, roles) are `nesquic-model`'s, below every crate that
//! measures; this crate owns the typed run record around them (`run::RunRecord`, summary.json, with
//! `schema_version`), the figures derived from measurements (`figures`, `workload`), the timing
//! calibration as recorded (`calibration`), Nesquic's qlog events (`events`, typed both ways), the
//! qlog traces (`qlog`: writer and strict reader;
//! `recorder`: a run's two traces, its output directory, merging a library's own qlog)
//! the sampling profile's folded stacks beside the record (`stacks`), the median and spread every
//! command shares (`stats`), packet I/O totals and the checks of probes against the I/O layer and
//! the agent against the tracepoints (`io`), comparing two runs, the CI gate (`compare`: samples per metric, rules, paired
//! ratio intervals, Holm correction, verdicts), the CPU cost per
//! datagram by component over repetitions (`packet_cost`), and each side's busiest thread over
//! repetitions (`saturation`).
//!
//! Every file of a run directory is written, and every file a record names is read, through
//! `files` (no links, bounded sizes, paths confined to the run directory).
//!
//! Must not know processes, probes or the command line: it receives what was measured and
//! describes it; it never measures.

pub mod calibration;
pub mod compare;
pub mod copy_limit;
pub mod crypto_limit;
mod error;
pub mod events;
pub mod figures;
#[cfg(test)]
mod file_safety_tests;
pub mod files;
pub mod finding;
pub mod findings;
pub mod io;
pub mod packet_cost;
pub mod qlog;
pub mod recorder;
pub mod run;
pub mod saturation;
pub mod stacks;
pub mod stats;
#[cfg(test)]
mod test_rows;
pub mod workload;

pub use error::RecordError;
pub use run::{RunRecord, SCHEMA_VERSION};
