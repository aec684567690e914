//! `nesquic-lut-adapters`: what the orchestrator knows about each library under test (LUT): one
//! [`Descriptor`] per LUT, as data (name, version, crypto backend, I/O paths, the typed
//! `--lut-opt` settings it accepts and why it refuses others, which workloads it runs), the
//! [`Lut`] trait for what truly differs (where the executable is, how it is started), resolving a
//! LUT by name ([`find_lut`]), building its server and client command lines, and generating the
//! run's certificate ([`tls`]).
//!
//! Layers, lowest first: [`error`] ([`LutError`]); [`descriptor`] (the data and the checks made
//! against it); [`launch`] (the [`Lut`] trait, command lines); one module per adapter (its
//! descriptor) and [`exec`] (the user's own commands); [`registry`], the one module that lists
//! them all. [`lut`] gathers the seam under the paths other crates use. [`endpoint`] drives a
//! stack's own interop endpoint from a recipe (`lut-adapters/endpoints/*.toml`) instead of an
//! adapter; [`staging`] holds its files (payload, certificates as PEM, mount points).
//!
//! Every LUT runs as its own executable (`nesquic-lut-<name>`, built by `nesquic-lut-bins`, the
//! msquic, s2n-quic and tquic workspaces, `quic-go/build.sh`, `aioquic/build.sh` and `ngtcp2/build.sh`; `tcp-tls` is the TCP+TLS baseline) with `server` and
//! `client` subcommands, so probes can attach to its binary and tell server and client apart by
//! pid. The protocol those executables speak is
//! `nesquic-protocol`'s, re-exported here under its old paths ([`protocol`], [`report`]). This
//! crate links no QUIC library (the `nesquic` binary depends on it), and must not know about
//! probes, eBPF or how results are summarised.
#![warn(missing_docs)]

pub mod aioquic;
pub mod buffer;
pub mod descriptor;
pub mod endpoint;
pub mod error;
pub mod exec;
pub mod launch;
pub mod lut;
pub mod msquic;
pub mod ngtcp2;
pub mod quic_go;
pub mod quiche;
pub mod quinn;
pub mod registry;
pub mod s2n_quic;
pub mod staging;
pub mod tcp_tls;
pub mod tquic;
/// The benchmark protocol's payload (`nesquic-protocol`'s [`payload`](nesquic_protocol::payload)).
pub use nesquic_protocol::payload as protocol;
/// The report lines (`nesquic-protocol`'s `report`).
pub use nesquic_protocol::report;
pub mod tls;

#[cfg(test)]
mod tests;

pub use descriptor::Descriptor;
pub use endpoint::EndpointLut;
pub use error::LutError;
pub use exec::ExecLut;
pub use launch::{Builtin, Endpoint, Lut};
pub use nesquic_protocol::cli::IoMode;
pub use nesquic_protocol::options::{LutOpt, OptionKind};
pub use registry::{all_luts, find_lut};
