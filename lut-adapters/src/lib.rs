//! `nesquic-lut-adapters`: the libraries under test (LUTs), one adapter each behind the [`Lut`]
//! trait, and the benchmark protocol they all speak ([`protocol`]), with its TLS setup ([`tls`])
//! and the line-based report a LUT process writes for the orchestrator ([`report`]).
//!
//! Every LUT runs as its own executable (`nesquic-lut-<name>`) with `server` and `client`
//! subcommands, so probes can attach to its binary and tell server and client apart by pid. This
//! crate must not know about probes, eBPF or how results are summarised.
#![warn(missing_docs)]

pub mod exec;
pub mod lut;
/// The I/O layer, re-exported for the same reason (adapters apply its socket-buffer requests).
pub use nesquic_io as io;
/// The translation layer, re-exported so adapter binaries (also ones built outside this workspace
/// by `--lut-path`) need no second dependency.
pub use nesquic_translation as translation;
pub use nesquic_translation::protocol;
pub mod report;
pub mod tls;
pub mod translated;

pub use exec::ExecLut;
pub use lut::{all_luts, find_lut, IoMode, Lut, LutError, MsquicLut, QuicheLut, QuinnLut};
