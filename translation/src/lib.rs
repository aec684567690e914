//! `nesquic-translation`: shims that drive sans-IO QUIC state machines (quiche, quinn-proto) over
//! `nesquic-io`, so stacks without fast I/O of their own get the same I/O as the rest, and a
//! stack's own I/O can be swapped for Nesquic's to show what it costs.
//!
//! It owns the event loop ([`driver`]: timers, receive batches split back into datagrams,
//! outgoing datagrams batched into GSO sends in [`batch`], pacing), each library's connection
//! table and stream calls ([`quiche_shim`], [`quinn_shim`]), and the benchmark protocol
//! ([`protocol`], [`app`]). It knows each library's public API, never its internals, and it never
//! opens sockets or makes syscalls for packets itself: all packet I/O goes through `nesquic-io`.
//! It must not know about probes, the orchestrator or how results are reported.
#![warn(missing_docs)]

pub mod app;
pub mod batch;
pub mod driver;
pub mod pem;
pub mod protocol;
pub mod quiche_shim;
pub mod quinn_shim;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nesquic_io::{Counters, IoConfig, UdpIo};

pub use app::ClientOutcome;
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
    /// A fault-injection variable is malformed.
    #[error("{var}={value:?}: expected comma-separated datagram indices")]
    BadFault {
        /// The variable.
        var: String,
        /// Its value.
        value: String,
    },
}

/// Which sans-IO library to drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stack {
    /// Cloudflare quiche with BoringSSL.
    Quiche,
    /// quinn's protocol crate with rustls + ring.
    QuinnProto,
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
}

/// What one side of a transfer did.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// The I/O layer's own counters for the socket.
    pub io: Counters,
    /// The loop's counters.
    pub stats: LoopStats,
    /// The client's measurements (clients only).
    pub outcome: Option<ClientOutcome>,
}

/// How often the client reports verified bytes.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Binds a socket for `addr` with `config`.
pub fn bind(addr: SocketAddr, config: &IoConfig) -> Result<UdpIo, TranslationError> {
    Ok(UdpIo::bind(addr, config)?)
}

/// Most datagrams one send may carry on `io` (1 without GSO).
fn max_datagrams(io: &UdpIo) -> usize {
    io.capabilities().max_gso_segments
}

/// Serves one benchmark connection on `io`, then returns.
pub fn serve(
    stack: Stack,
    io: &UdpIo,
    cert: &Path,
    key: &Path,
    options: &StackOptions,
    impairment: &Impairment,
) -> Result<Summary, TranslationError> {
    let mut endpoint: Box<dyn Endpoint> = match stack {
        Stack::Quiche => Box::new(quiche_shim::QuicheServer::new(cert, key, options)?),
        Stack::QuinnProto => Box::new(quinn_shim::QuinnProto::server(cert, key, max_datagrams(io), options)?),
    };
    let stats = driver::run(io, endpoint.as_mut(), impairment, PROGRESS_EVERY, &mut |_| {})?;
    Ok(Summary { io: io.counters(), stats, outcome: None })
}

/// Downloads and verifies `size` bytes from `server` over `io`; `progress` gets verified bytes.
pub fn download(
    stack: Stack,
    io: &UdpIo,
    server: SocketAddr,
    ca: &Path,
    size: u64,
    options: &StackOptions,
    impairment: &Impairment,
    progress: &mut dyn FnMut(u64),
) -> Result<Summary, TranslationError> {
    let local = io.local_addr().map_err(TranslationError::Socket)?;
    let outcome;
    let stats = match stack {
        Stack::Quiche => {
            // quiche wants the concrete local address it will see in RecvInfo.
            let local = if local.ip().is_unspecified() { SocketAddr::new(server.ip(), local.port()) } else { local };
            let mut client = quiche_shim::QuicheClient::new(local, server, ca, size, options)?;
            let stats = driver::run(io, &mut client, impairment, PROGRESS_EVERY, progress)?;
            outcome = client.outcome();
            stats
        }
        Stack::QuinnProto => {
            let mut client = quinn_shim::QuinnProto::client(server, ca, size, max_datagrams(io), options)?;
            let stats = driver::run(io, &mut client, impairment, PROGRESS_EVERY, progress)?;
            outcome = client.outcome();
            stats
        }
    };
    let outcome = outcome.ok_or_else(|| TranslationError::Closed("the payload was not verified".into()))?;
    Ok(Summary { io: io.counters(), stats, outcome: Some(outcome) })
}

/// Fills `buf` from the kernel's random source (connection IDs).
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
