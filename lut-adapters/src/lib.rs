//! `nesquic-lut-adapters`: what the orchestrator knows about each library under test (LUT): one
//! descriptor per LUT behind the [`Lut`] trait (name, version, crypto backend, I/O paths,
//! `--lut-opt` settings, which workloads it runs), resolving a LUT by name ([`find_lut`]),
//! building its server and client command lines, and generating the run's certificate ([`tls`]).
//!
//! Every LUT runs as its own executable (`nesquic-lut-<name>`, built by `nesquic-lut-bins`, the
//! msquic workspace, `quic-go/build.sh`, `aioquic/build.sh` and `ngtcp2/build.sh`; `tcp-tls` is the TCP+TLS baseline) with `server` and
//! `client` subcommands, so probes can attach to its binary and tell server and client apart by
//! pid. The protocol those executables speak is
//! `nesquic-protocol`'s, re-exported here under its old paths ([`protocol`], [`report`]). This
//! crate links no QUIC library (the `nesquic` binary depends on it), and must not know about
//! probes, eBPF or how results are summarised.
#![warn(missing_docs)]

pub mod aioquic;
pub mod exec;
pub mod lut;
pub mod ngtcp2;
pub mod quic_go;
pub mod tcp_tls;
/// The benchmark protocol's payload (`nesquic-protocol`'s [`payload`](nesquic_protocol::payload)).
pub use nesquic_protocol::payload as protocol;
/// The report lines (`nesquic-protocol`'s `report`).
pub use nesquic_protocol::report;
pub mod tls;

pub use aioquic::AioquicLut;
pub use exec::ExecLut;
pub use lut::{all_luts, find_lut, IoMode, Lut, LutError, MsquicLut, QuicheLut, QuinnLut};
pub use ngtcp2::Ngtcp2Lut;
pub use quic_go::QuicGoLut;
pub use tcp_tls::TcpTlsLut;
