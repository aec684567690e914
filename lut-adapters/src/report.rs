//! What a LUT process tells the orchestrator: one JSON object per line on stdout.

use serde::{Deserialize, Serialize};

/// One line of a LUT process's stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum LutEvent {
    /// The server is ready for a connection at `addr`.
    Listening {
        /// Address the server bound.
        addr: std::net::SocketAddr,
    },
    /// The client has verified `bytes` so far.
    Progress {
        /// Verified bytes.
        bytes: u64,
    },
    /// The client verified the whole payload.
    Done(ClientResult),
    /// How the LUT's UDP socket ended up configured (what the kernel granted).
    Io(IoSettings),
    /// The library writes its own qlog to `path`; its event times are milliseconds since
    /// `start_unix_ns` (wall clock), so nesquic can put them on its own clock.
    Qlog {
        /// The qlog file.
        path: std::path::PathBuf,
        /// Wall-clock time of the library's qlog time zero, ns since the Unix epoch.
        start_unix_ns: u64,
    },
    /// The I/O layer's own counters for the LUT's socket, at exit (LUTs on Nesquic's I/O
    /// layer), to be cross-checked against the eBPF probes.
    IoCounters(nesquic_io::Counters),
}

/// A LUT socket's effective I/O settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoSettings {
    /// Which code does the UDP I/O ("quinn-udp 0.5", "nesquic-io").
    pub stack: String,
    /// Most datagrams per GSO send (1 = no GSO).
    pub gso_max_segments: u64,
    /// Most datagrams per GRO receive (1 = no GRO).
    pub gro_segments: u64,
    /// Whether sends are batched with sendmmsg.
    pub send_mmsg: bool,
    /// Whether receives are batched with recvmmsg.
    pub recv_mmsg: bool,
    /// SO_RCVBUF as granted (the kernel doubles the request).
    pub recv_buffer: u64,
    /// SO_SNDBUF as granted.
    pub send_buffer: u64,
}

/// The client's measurements for one transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientResult {
    /// Bytes received and verified.
    pub bytes: u64,
    /// From starting the connection to the handshake completing, in ns.
    pub handshake_ns: u64,
    /// From sending the request to verifying the last byte, in ns.
    pub transfer_ns: u64,
}

impl From<nesquic_translation::ClientOutcome> for ClientResult {
    fn from(o: nesquic_translation::ClientOutcome) -> Self {
        Self { bytes: o.bytes, handshake_ns: o.handshake.as_nanos() as u64, transfer_ns: o.transfer.as_nanos() as u64 }
    }
}

impl LutEvent {
    /// Writes the event as one line on stdout (flushed, so the orchestrator sees it at once).
    pub fn emit(&self) {
        use std::io::Write;
        // serde_json cannot fail on these plain structs.
        if let Ok(line) = serde_json::to_string(self) {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}
