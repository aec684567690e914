//! `nesquic-translation`: shims that drive sans-IO QUIC state machines (quiche, quinn-proto) over
//! `nesquic-io`, so stacks without fast I/O of their own get the same I/O as the rest, and a
//! stack's own I/O can be swapped for Nesquic's to show what it costs.
//!
//! It owns the event loop ([`driver`]: timers, receive batches split back into datagrams,
//! outgoing datagrams batched into GSO sends in [`batch`], pacing), each library's connection
//! table and stream calls ([`quiche_shim`], [`quinn_shim`]: many connections and streams per
//! endpoint, visited in [`fair`] order; the per-stream read and payload loops they share are
//! [`streams`]), and the benchmark's rustls
//! configuration ([`rustls_config`], also used by the TCP+TLS baseline). The benchmark protocol it serves
//! ([`protocol`], [`app`], [`pem`]) is `nesquic-protocol`'s, re-exported under its old paths. It
//! knows each library's public API, never its internals, and it never
//! opens sockets or makes syscalls for packets itself: all packet I/O goes through `nesquic-io`.
//! It must not know about probes, the orchestrator or how results are reported.
#![warn(missing_docs)]

pub use nesquic_protocol::stream as app;
pub mod batch;
pub mod driver;
pub mod fair;
pub use nesquic_protocol::payload as protocol;
pub use nesquic_protocol::pem;
#[cfg(feature = "quiche")]
pub mod quiche_shim;
pub mod quinn_shim;
pub mod rustls_config;
pub mod streams;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nesquic_io::{Counters, IoConfig, UdpIo};
use nesquic_protocol::client::{ClientRun, Workload};
use nesquic_protocol::options::{Cipher, CongestionControl};
use nesquic_protocol::report::ClientResult;

pub use driver::{Endpoint, Impairment, LoopStats};

/// Errors from the shims.
#[derive(Debug, thiserror::Error)]
pub enum TranslationError {
    /// Socket setup or a send/receive failed for a reason other than `EAGAIN`.
    #[error("socket: {0}")]
    Socket(std::io::Error),
    /// The I/O layer could not set up the socket.
    #[error(transparent)]
    Io(#[from] nesquic_io::IoError),
    /// A file (certificate, key, qlog) could not be read or written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// quiche refused a call.
    #[cfg(feature = "quiche")]
    #[error("quiche {context}: {source}")]
    Quiche {
        /// What we were doing.
        context: &'static str,
        /// quiche's error.
        source: quiche::Error,
    },
    /// TLS configuration failed.
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// A stack configuration was rejected.
    #[error("invalid configuration: {0}")]
    Config(&'static str),
    /// Starting a connection failed.
    #[error("connect: {0}")]
    Connect(String),
    /// A stream operation failed.
    #[error("stream: {0}")]
    Stream(String),
    /// The connection ended before the benchmark did.
    #[error("connection closed before the transfer completed: {0}")]
    Closed(String),
    /// The benchmark protocol was violated (wrong request, payload mismatch).
    #[error(transparent)]
    Protocol(#[from] app::ProtocolError),
    /// A client stream's payload failed verification.
    #[error("connection {connection}, stream {stream}: {error}")]
    Payload {
        /// The connection (0-based, in start order).
        connection: u32,
        /// The stream (0-based, in opening order).
        stream: usize,
        /// What was wrong (not `source`: the message already says it).
        error: app::ProtocolError,
    },
    /// A fault-injection variable is malformed.
    #[error("{var}={value:?}: expected comma-separated datagram indices")]
    BadFault {
        /// The variable.
        var: String,
        /// Its value.
        value: String,
    },
}

/// A sans-IO library the shims can drive. Callers pick one at compile time
/// (`serve::<quiche_shim::Quiche>`), so a LUT binary links only its own library and its probe
/// targets are not mixed with another library's.
pub trait Stack {
    /// The library's name in messages.
    const NAME: &'static str;
    /// A server that serves `connections` benchmark connections (every stream each opens).
    fn server(
        io: &UdpIo,
        cert: &Path,
        key: &Path,
        connections: u32,
        options: &StackOptions,
    ) -> Result<Box<dyn Endpoint>, TranslationError>;
    /// A client that runs `run`'s connections from `local` to `server`.
    fn client(
        io: &UdpIo,
        local: SocketAddr,
        server: SocketAddr,
        ca: &Path,
        run: ClientRun,
        options: &StackOptions,
    ) -> Result<Box<dyn ClientEndpoint>, TranslationError>;
}

/// A client endpoint: an [`Endpoint`] that ends with the protocol's measurements.
pub trait ClientEndpoint: Endpoint {
    /// The `done` report, once every connection's payloads were verified.
    fn report(&self) -> Option<ClientResult>;
    /// Upcast for the driver.
    fn as_endpoint(&mut self) -> &mut dyn Endpoint;
}

impl From<nesquic_protocol::tls::FileError> for TranslationError {
    fn from(e: nesquic_protocol::tls::FileError) -> Self {
        TranslationError::File { path: e.path, source: e.source }
    }
}

/// Library settings the shims apply.
#[derive(Debug, Clone, Default)]
pub struct StackOptions {
    /// Write the library's own qlog here.
    pub qlog: Option<PathBuf>,
    /// Time zero for the library's qlog, where the library lets us choose it (quinn-proto).
    pub qlog_start: Option<Instant>,
    /// Honour the library's pacing (quiche's `SendInfo::at`); quinn-proto paces internally.
    pub pacing: bool,
    /// Congestion control (`None`: CUBIC); each shim refuses one its library lacks.
    pub cc: Option<CongestionControl>,
    /// The only TLS 1.3 cipher suite offered (quinn-proto; quiche's BoringSSL does not let it be
    /// chosen). `None`: the library's preference.
    pub cipher: Option<Cipher>,
    /// Concurrent bidirectional streams a peer may open (the workload's `--streams`); the
    /// library's default when lower.
    pub max_streams: u32,
}

/// What one side of a transfer did.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The I/O layer's own counters for the socket.
    pub io: Counters,
    /// The loop's counters.
    pub stats: LoopStats,
    /// The client's `done` report (clients only).
    pub report: Option<ClientResult>,
}

/// How often the client reports verified bytes.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Binds a socket for `addr` with `config`.
pub fn bind(addr: SocketAddr, config: &IoConfig) -> Result<UdpIo, TranslationError> {
    Ok(UdpIo::bind(addr, config)?)
}

/// Most datagrams one send may carry on `io` (1 without GSO).
pub(crate) fn max_datagrams(io: &UdpIo) -> usize {
    io.capabilities().max_gso_segments
}

/// Serves `connections` benchmark connections on `io`, then returns.
pub fn serve<S: Stack>(
    io: &UdpIo,
    cert: &Path,
    key: &Path,
    connections: u32,
    options: &StackOptions,
    impairment: &Impairment,
) -> Result<Summary, TranslationError> {
    let mut endpoint = S::server(io, cert, key, connections, options)?;
    let stats = driver::run(io, endpoint.as_mut(), impairment, PROGRESS_EVERY, &mut |_| {})?;
    Ok(Summary { io: io.counters(), stats, report: None })
}

/// Runs the client workload `shape` against `server` over `io`, verifying every payload;
/// `progress` gets the bytes verified so far.
#[allow(clippy::too_many_arguments)] // one call site per LUT binary; a struct would only rename them
pub fn download<S: Stack>(
    io: &UdpIo,
    server: SocketAddr,
    ca: &Path,
    shape: Workload,
    options: &StackOptions,
    impairment: &Impairment,
    progress: &mut dyn FnMut(u64),
) -> Result<Summary, TranslationError> {
    let local = io.local_addr().map_err(TranslationError::Socket)?;
    // Libraries that track paths (quiche) need the concrete address they will see; a socket
    // bound to the unspecified address talks to `server` from the same IP.
    let local = if local.ip().is_unspecified() { SocketAddr::new(server.ip(), local.port()) } else { local };
    let mut client = S::client(io, local, server, ca, ClientRun::new(shape), options)?;
    let stats = driver::run(io, client.as_endpoint(), impairment, PROGRESS_EVERY, progress)?;
    let report = client.report().ok_or_else(|| TranslationError::Closed("the payload was not verified".into()))?;
    Ok(Summary { io: io.counters(), stats, report: Some(report) })
}

/// Fills `buf` from the kernel's random source (connection IDs).
#[cfg(feature = "quiche")]
pub(crate) fn random_bytes(buf: &mut [u8]) {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: writes at most the remaining length into a live buffer.
        let r = unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if r > 0 {
            filled += r as usize;
        }
    }
}
