//! `nesquic-ebpf`: measures a LUT from outside with eBPF. It owns the eBPF programs (C, in
//! `bpf/`, compiled by build.rs with clang-19 and CO-RE), their aya loader, the probe catalog
//! (`probes.toml`: which symbols stand for which crypto category, per backend), symbol resolution
//! (demangling, version prefixes, globs) and reading the in-kernel aggregates into [`Metrics`].
//! The measured types are `nesquic-model`'s (re-exported here and in the modules that build
//! them): this crate fills them in; records and renderers depend on the model alone.
//!
//! It must not know about QUIC libraries' APIs, LUT adapters or how processes are started: it is
//! given pids with a [`Role`] (`nesquic-model`'s, the one type every crate shares) and object
//! files to resolve against.
#![warn(missing_docs)]

pub mod catalog;
pub mod impair;
pub mod kernel_io;
pub mod layout;
pub mod metrics;
mod object;
pub mod objects;
pub mod preflight;
pub mod profile;
pub mod sampler;
pub mod session;
pub mod sites;
pub mod stack_rules;
pub mod symbols;
pub mod tick;
pub mod timing;
pub mod user;
pub mod verifier;
pub mod workload_report;

use std::path::PathBuf;

pub use nesquic_model::{DatagramEvent, HealthCounts, Role};

pub use catalog::{Catalog, ProbeRequest, ProbeSpec, Resolution, ResolvedFunction};
pub use metrics::{DutyScaled, FunctionMetrics, Metrics, RoleMetrics, SyscallMetrics};
pub use profile::packet_cost;
pub use profile::SamplerCost;
pub use session::ProbeSession;
pub use symbols::ObjectSymbols;

/// Everything that can go wrong while probing, phrased so the user knows what to do.
#[derive(Debug, thiserror::Error)]
pub enum EbpfError {
    /// Neither root nor the BPF capabilities.
    #[error("eBPF probes need root (or CAP_BPF + CAP_PERFMON): run as root, e.g. with sudo")]
    NotPrivileged,
    /// The kernel lacks something the probes need.
    #[error("{0}")]
    Unsupported(String),
    /// The object could not be loaded (verifier, BTF, ...).
    #[error("loading the eBPF programs failed: {0} (run `nesquic doctor`)")]
    Load(String),
    /// The kernel's verifier rejected a program: one line here, the whole log in a file.
    #[error(
        "the kernel ({kernel}) rejected eBPF program {program}: {reason}; run `nesquic doctor` (verifier log: {})",
        log.display()
    )]
    Verifier {
        /// The program.
        program: String,
        /// `uname -r`.
        kernel: String,
        /// The verifier's last complaint.
        reason: String,
        /// Where the full log went.
        log: PathBuf,
    },
    /// An attach failed.
    #[error("attaching {what} failed: {reason} (run `nesquic doctor`)")]
    Attach {
        /// What was being attached.
        what: String,
        /// Why it failed.
        reason: String,
    },
    /// A map operation failed.
    #[error("eBPF map: {0}")]
    Map(String),
    /// Reading a file.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not a parsable object file.
    #[error("{path}: not a readable ELF object ({reason})")]
    Object {
        /// The file.
        path: PathBuf,
        /// Parser message.
        reason: String,
    },
    /// No symbols to resolve against.
    #[error("{path} is stripped (no symbol table): rebuild it without `strip`, probes attach by symbol")]
    Stripped {
        /// The file.
        path: PathBuf,
    },
    /// The catalog is malformed.
    #[error("probe catalog: {0}")]
    Catalog(String),
    /// A `--probe` item is malformed or unknown.
    #[error("{0}")]
    BadProbe(String),
    /// More functions than the maps hold.
    #[error("{found} functions matched, at most {max} can be probed at once: narrow the pattern")]
    TooManyFunctions {
        /// Matched.
        found: usize,
        /// Limit.
        max: usize,
    },
}
