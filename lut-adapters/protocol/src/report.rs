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
    /// How the LUT's socket ended up configured (what the kernel granted).
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

/// What a LUT's sockets carry its payload over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// UDP datagrams: every QUIC stack. The default, so a LUT that does not say is one.
    #[default]
    Udp,
    /// A kernel TCP byte stream: a send or receive call moves bytes, not datagrams, so what is
    /// said of datagrams (GSO and GRO batches, ACKs per datagram, receive-buffer drops) does not
    /// apply.
    Tcp,
}

/// A LUT socket's effective I/O settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoSettings {
    /// Which code does the socket I/O ("quinn-udp 0.5", "nesquic-io", kernel TCP).
    pub stack: String,
    /// What the socket carries: UDP datagrams unless the LUT says otherwise.
    #[serde(default)]
    pub transport: Transport,
    /// Its socket calls block until they can move data (a thread per connection), so the time
    /// inside a call includes the wait for the peer or for buffer space, and is not CPU time.
    /// False unless the LUT says so: event-loop stacks poll non-blocking sockets.
    #[serde(default)]
    pub blocking: bool,
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
    /// The kernel's congestion control on the socket (TCP_CONGESTION as read back), for LUTs on
    /// kernel TCP; QUIC stacks run their own and leave it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_control: Option<String>,
}

/// The client's measurements. With one connection and one stream only the first three fields
/// are sent; with more (testcases other than `bulk`) every connection is listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientResult {
    /// Bytes received and verified, over all connections and streams.
    pub bytes: u64,
    /// From starting the connection to the handshake completing, in ns (several connections:
    /// the median).
    pub handshake_ns: u64,
    /// From sending the request to verifying the last byte, in ns (several connections: from
    /// the first request to the last byte verified on any of them).
    pub transfer_ns: u64,
    /// From the first connection attempt to the last connection's last byte verified, in ns
    /// (several connections; 0 when not reported).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub elapsed_ns: u64,
    /// Each connection, in the order they were started (several connections or streams).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connections: Vec<ConnectionResult>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One connection of a multi-connection or multi-stream workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionResult {
    /// When the connection attempt started, ns after the client's first one.
    pub start_ns: u64,
    /// Connect to handshake complete, ns.
    pub handshake_ns: u64,
    /// First request sent to last byte verified on this connection, ns.
    pub transfer_ns: u64,
    /// Each stream: verified bytes and request-to-last-byte time.
    pub streams: Vec<StreamResult>,
}

/// One stream's request and verified response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamResult {
    /// Bytes verified.
    pub bytes: u64,
    /// Request sent to last byte verified, ns.
    pub transfer_ns: u64,
}

impl ConnectionResult {
    /// Bytes verified on all of this connection's streams.
    pub fn bytes(&self) -> u64 {
        self.streams.iter().map(|s| s.bytes).sum()
    }
}

impl ClientResult {
    /// The `done` report of a client that ran `connections` (in order): the protocol's original
    /// one-connection form when the workload was a `single` connection with one stream, else
    /// [`ClientResult::from_connections`]. `None` when `single` but not exactly one connection ran.
    pub fn of_run(single: bool, mut connections: Vec<ConnectionResult>, elapsed_ns: u64) -> Option<Self> {
        if !single {
            return Some(Self::from_connections(connections, elapsed_ns));
        }
        let c = connections.pop().filter(|_| connections.is_empty())?;
        Some(Self {
            bytes: c.bytes(),
            handshake_ns: c.handshake_ns,
            transfer_ns: c.transfer_ns,
            elapsed_ns: 0,
            connections: Vec::new(),
        })
    }

    /// The `done` report of a multi-connection/multi-stream client: totals derived from each
    /// connection's figures (`start_ns` relative to the first connect; `elapsed_ns` measured by
    /// the client).
    pub fn from_connections(connections: Vec<ConnectionResult>, elapsed_ns: u64) -> Self {
        let bytes = connections.iter().map(ConnectionResult::bytes).sum();
        let mut handshakes: Vec<u64> = connections.iter().map(|c| c.handshake_ns).collect();
        handshakes.sort_unstable();
        // Nearest-rank median (the lower middle for an even count), as the percentiles nesquic prints.
        let handshake_ns = handshakes.get(handshakes.len().saturating_sub(1) / 2).copied().unwrap_or(0);
        // First request to last byte: each connection's requests go out right after its
        // handshake, so its transfer window is [start + handshake, start + handshake + transfer].
        let first = connections.iter().map(|c| c.start_ns + c.handshake_ns).min().unwrap_or(0);
        let last = connections.iter().map(|c| c.start_ns + c.handshake_ns + c.transfer_ns).max().unwrap_or(0);
        Self { bytes, handshake_ns, transfer_ns: last.saturating_sub(first), elapsed_ns, connections }
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
