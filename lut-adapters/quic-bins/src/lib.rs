//! `nesquic-lut-bins`: the Rust LUT executables, `nesquic-lut-quinn` (quinn on quinn-udp, or
//! quinn-proto over Nesquic's I/O layer), `nesquic-lut-quiche` (quiche over Nesquic's I/O
//! layer) and the TCP+TLS baseline `nesquic-lut-tcp-tls` (kernel TCP + rustls), and the code they
//! share: running a sans-IO stack from the LUT command line
//! ([`translated`]) and the re-exports an adapter needs, so one built outside this workspace by
//! `nesquic run --lut-path` has a single dependency.
//!
//! This is the only package of the main workspace that links QUIC libraries and rustls (with
//! `nesquic-translation`); the `nesquic` binary does not depend on it. It must not know about
//! probes, the orchestrator's run model or how results are summarised: it speaks
//! `nesquic-protocol` and nothing else to the outside.
#![warn(missing_docs)]

pub mod translated;

/// `Bytes`, re-exported so adapters hand stacks shared pattern slices without a second dependency.
pub use bytes;
/// The I/O layer, re-exported for the same reason (adapters apply its socket-buffer requests).
pub use nesquic_io as io;
/// The benchmark protocol, LUT command line and report lines.
pub use nesquic_protocol as protocol;
pub use nesquic_testcases::Workload;
/// The translation layer, re-exported so adapter binaries (also ones built outside this workspace
/// by `--lut-path`) need no second dependency.
pub use nesquic_translation as translation;
