//! `nesquic-protocol`: what a library under test (LUT) and the orchestrator agree on, and nothing
//! else (docs/protocol.md). It owns the benchmark protocol's payload ([`payload`]: request
//! encoding, the pattern, the verifier), its per-stream harness ([`stream`]) and the client's
//! bookkeeping of a whole workload ([`client`]: connections `parallel` at a time, their figures), the command line
//! every LUT executable accepts ([`cli`]) and its typed settings ([`options`]), the report lines a LUT writes on stdout ([`report`]),
//! the one [`Role`] type, and the TLS files LUTs are handed ([`tls`], [`pem`]).
//!
//! Adapters in any language depend only on this crate (or on docs/protocol.md). It must not know
//! any QUIC library, async runtime or TLS stack, how LUTs are started or probed, or how results
//! are summarised: its dependencies are serde, clap, thiserror, `nesquic-io` (for the type of
//! the I/O layer's counters in [`report::LutEvent::IoCounters`]), `nesquic-testcases` (for
//! [`Workload`], what a client runs) and `nesquic-model` (for [`Role`], serde and thiserror only).
#![warn(missing_docs)]

pub mod cli;
pub mod client;
pub mod options;
pub mod payload;
pub mod pem;
pub mod report;
pub mod role;
pub mod stream;
pub mod tls;

pub use cli::{IoMode, LutCli, LutCommand};
pub use client::{ClientConnection, ClientRun, Workload};
pub use options::{LutOpt, OptionKind};
pub use report::LutEvent;
pub use role::{Role, LUT_ROLES};
