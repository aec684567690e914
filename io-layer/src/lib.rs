//! `nesquic-io`: the shared, fast UDP I/O layer every library under test without its own fast path
//! runs on. It owns socket setup (buffer sizes, reporting what the kernel granted), UDP GSO
//! (`UDP_SEGMENT`) combined with `sendmmsg` batching, UDP GRO (`UDP_GRO`) combined with `recvmmsg`
//! batching, run-time capability detection with fallbacks, per-feature switches, and its own
//! syscall/datagram/byte counters (later cross-checked against the eBPF probes).
//!
//! It must not know anything about QUIC or any QUIC library: its API is plain datagrams, modelled on
//! quinn-udp's [`Transmit`] and [`RecvMeta`]. Linux only.
#![warn(missing_docs)]

mod cmsg;
mod config;
mod counters;
mod socket;

pub use config::{IoConfig, IoSwitches};
pub use counters::{Counters, DirectionCounters};
pub use socket::{set_socket_buffers, Capabilities, GrantedBuffers, RecvMeta, Transmit, UdpIo};

/// Largest UDP payload the kernel accepts in one GSO send over IPv4 (65535 - 20 - 8).
pub const MAX_UDP_PAYLOAD: usize = 65_507;
/// The kernel's limit on segments in one GSO send (`UDP_MAX_SEGMENTS`).
pub const MAX_GSO_SEGMENTS: usize = 64;

/// Errors from setting up the I/O layer. Per-call send/receive errors are plain [`std::io::Error`]s
/// so callers can match `WouldBlock` as usual.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// Creating or binding the socket failed.
    #[error("cannot bind UDP socket to {addr}: {source}")]
    Bind {
        /// The address we tried to bind.
        addr: std::net::SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// A socket option could not be set.
    #[error("setsockopt {option} failed: {source}")]
    SockOpt {
        /// The option's name.
        option: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
}
