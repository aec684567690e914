//! What a user can choose about the I/O layer.

use serde::{Deserialize, Serialize};

/// Switches to turn each acceleration off individually, so users can compare them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoSwitches {
    /// Use UDP generic segmentation offload on send when the kernel supports it.
    pub gso: bool,
    /// Use UDP generic receive offload when the kernel supports it.
    pub gro: bool,
    /// Batch messages with `sendmmsg`/`recvmmsg` instead of one `sendmsg`/`recvmsg` per message.
    pub mmsg: bool,
    /// The naive loop many examples use: one `sendto`/`recvfrom` per datagram, no control
    /// messages. Overrides the three switches above (the baseline that shows what they buy).
    #[serde(default)]
    pub plain: bool,
}

impl IoSwitches {
    /// One `sendto`/`recvfrom` per datagram.
    pub fn plain() -> Self {
        Self { gso: false, gro: false, mmsg: false, plain: true }
    }
}

impl Default for IoSwitches {
    fn default() -> Self {
        Self { gso: true, gro: true, mmsg: true, plain: false }
    }
}

/// Configuration of one [`crate::UdpIo`] socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IoConfig {
    /// Which accelerations to try.
    pub switches: IoSwitches,
    /// Requested `SO_RCVBUF` in bytes (`None` keeps the kernel default).
    pub recv_buffer: Option<usize>,
    /// Requested `SO_SNDBUF` in bytes (`None` keeps the kernel default).
    pub send_buffer: Option<usize>,
    /// Most messages per `sendmmsg`/`recvmmsg` call.
    pub batch: usize,
}

/// 8 MiB: 40x the 208 KiB Linux default, which drops packets at loopback speeds (TUM 2023 found
/// >= 16x needed).
pub const DEFAULT_SOCKET_BUFFER: usize = 8 << 20;

impl Default for IoConfig {
    fn default() -> Self {
        Self {
            switches: IoSwitches::default(),
            recv_buffer: Some(DEFAULT_SOCKET_BUFFER),
            send_buffer: Some(DEFAULT_SOCKET_BUFFER),
            batch: 32,
        }
    }
}
