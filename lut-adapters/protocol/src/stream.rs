//! The benchmark protocol's stream handling (docs/protocol.md), independent of any QUIC library:
//! the shims move bytes between these and their library's stream API.

use std::time::Instant;

use crate::report::StreamResult;

use crate::payload::{self as protocol, Verifier, VerifyError, REQUEST_LEN};

/// Size of the payload chunks the server generates and offers to the library.
const CHUNK: usize = 64 * 1024;

/// Test hook: the server flips the payload byte at this offset (the client must notice).
pub const CORRUPT_ENV: &str = "NESQUIC_FAULT_SERVER_CORRUPT_AT";

/// Protocol violations.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The request was not exactly 8 bytes.
    #[error("request is {0} bytes, expected {REQUEST_LEN}")]
    BadRequest(usize),
    /// The payload failed verification.
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

/// The server side of one benchmark stream: collects the request, then serves the pattern.
#[derive(Debug)]
pub struct ServerStream {
    request: Vec<u8>,
    size: Option<u64>,
    /// Payload bytes the library has accepted.
    sent: u64,
    fin_sent: bool,
    corrupt_at: Option<u64>,
    /// The window holding `corrupt_at`, copied and altered (fault-injection tests only).
    corrupted: Vec<u8>,
}

/// Payload bytes offered to a stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayloadChunk {
    /// A slice of the pattern block: the stack may keep it as long as it likes, no copy made.
    Shared(&'static [u8]),
    /// An altered copy (only when [`CORRUPT_ENV`] injects a fault).
    Owned(Vec<u8>),
}

impl PayloadChunk {
    /// The payload from stream offset `offset`, up to `max_len` bytes (at most
    /// [`protocol::WINDOW`]): a shared pattern window, or an altered copy when `corrupt_at` (the
    /// fault-injection hook) falls inside it.
    pub fn at(offset: u64, max_len: usize, corrupt_at: Option<u64>) -> Self {
        let window = protocol::pattern_window(offset, max_len);
        match corrupt_at.filter(|at| (offset..offset + window.len() as u64).contains(at)) {
            Some(at) => {
                let mut altered = window.to_vec();
                altered[(at - offset) as usize] ^= 0xff;
                PayloadChunk::Owned(altered)
            }
            None => PayloadChunk::Shared(window),
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            PayloadChunk::Shared(s) => s,
            PayloadChunk::Owned(v) => v,
        }
    }
}

impl Default for ServerStream {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerStream {
    /// A stream waiting for its request (honours [`CORRUPT_ENV`]).
    pub fn new() -> Self {
        Self {
            request: Vec::with_capacity(REQUEST_LEN),
            size: None,
            sent: 0,
            fin_sent: false,
            corrupt_at: std::env::var(CORRUPT_ENV).ok().and_then(|v| v.parse().ok()),
            corrupted: Vec::new(),
        }
    }

    /// Feeds request bytes; `fin` when the client finished its side.
    pub fn on_request(&mut self, data: &[u8], fin: bool) -> Result<(), ProtocolError> {
        self.request.extend_from_slice(data);
        if self.request.len() > REQUEST_LEN {
            return Err(ProtocolError::BadRequest(self.request.len()));
        }
        if fin {
            let size = protocol::decode_request(&self.request).ok_or(ProtocolError::BadRequest(self.request.len()))?;
            self.size = Some(size);
        }
        Ok(())
    }

    /// Whether the request is complete.
    pub fn has_request(&self) -> bool {
        self.size.is_some()
    }

    /// The next bytes to offer the library, and whether they end the stream; `None` before the
    /// request or once everything (including the fin) went out. Stacks that keep shared buffers
    /// use [`ServerStream::pending_shared`] instead and avoid even this borrow's copy.
    pub fn pending(&mut self) -> Option<(&[u8], bool)> {
        match self.pending_shared()? {
            (PayloadChunk::Shared(window), last) => Some((window, last)),
            (PayloadChunk::Owned(altered), last) => {
                self.corrupted = altered;
                Some((&self.corrupted, last))
            }
        }
    }

    /// As [`ServerStream::pending`], but as a chunk the stack may keep: normally a `'static`
    /// slice of the pattern block (no copy), an owned copy only when a fault is injected.
    pub fn pending_shared(&mut self) -> Option<(PayloadChunk, bool)> {
        let size = self.size?;
        if self.fin_sent {
            return None;
        }
        let want = (size - self.sent).min(CHUNK as u64) as usize;
        let chunk = PayloadChunk::at(self.sent, want, self.corrupt_at);
        let last = self.sent + chunk.as_slice().len() as u64 == size;
        Some((chunk, last))
    }

    /// Records that the library accepted `n` bytes of what [`ServerStream::pending`] offered,
    /// and the fin if `fin_accepted`.
    pub fn accepted(&mut self, n: usize, fin_accepted: bool) {
        self.sent += n as u64;
        self.fin_sent |= fin_accepted;
    }

    /// Whether the whole payload and the fin were handed to the library.
    pub fn is_complete(&self) -> bool {
        self.fin_sent
    }
}

/// The client side of one stream: sends the request, verifies the payload, keeps the stream's
/// timings. Connections and their handshakes are [`crate::client`]'s.
#[derive(Debug)]
pub struct ClientStream {
    size: u64,
    request_sent: Option<Instant>,
    verified_at: Option<Instant>,
    verifier: Verifier,
}

impl ClientStream {
    /// A stream that will ask for `size` bytes.
    pub fn new(size: u64) -> Self {
        Self { size, request_sent: None, verified_at: None, verifier: Verifier::default() }
    }

    /// The request to write (with fin), once.
    pub fn request(&mut self) -> Option<[u8; REQUEST_LEN]> {
        if self.request_sent.is_some() {
            return None;
        }
        self.request_sent = Some(Instant::now());
        Some(protocol::encode_request(self.size))
    }

    /// Verifies payload bytes; `fin` when the server finished the stream.
    pub fn on_payload(&mut self, data: &[u8], fin: bool) -> Result<(), ProtocolError> {
        self.verifier.update(data)?;
        if fin {
            self.verifier.finish(self.size)?;
            self.verified_at = Some(Instant::now());
        }
        Ok(())
    }

    /// Bytes verified so far.
    pub fn received(&self) -> u64 {
        self.verifier.received()
    }

    /// Whether the whole payload was verified.
    pub fn is_verified(&self) -> bool {
        self.verified_at.is_some()
    }

    /// When the request went out.
    pub fn request_sent(&self) -> Option<Instant> {
        self.request_sent
    }

    /// When the last byte was verified.
    pub fn verified_at(&self) -> Option<Instant> {
        self.verified_at
    }

    /// Bytes and request-to-last-byte time, once the whole payload is verified.
    pub fn result(&self) -> Option<StreamResult> {
        let transfer = self.verified_at?.duration_since(self.request_sent?);
        Some(StreamResult { bytes: self.verifier.received(), transfer_ns: transfer.as_nanos() as u64 })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn server_and_client_agree_through_partial_writes() {
        let size = 200_000u64;
        let mut client = ClientStream::new(size);
        let request = client.request().unwrap();
        assert!(client.request().is_none(), "the request is written once");
        let mut server = ServerStream { corrupt_at: None, ..ServerStream::default() };
        server.on_request(&request[..3], false).unwrap();
        assert!(server.pending().is_none());
        server.on_request(&request[3..], true).unwrap();
        let mut wire = Vec::new();
        // The library takes at most 1000 bytes per call, as a flow-controlled stack would.
        while let Some((data, last)) = server.pending() {
            let n = data.len().min(1000);
            let all = n == data.len();
            wire.extend_from_slice(&data[..n]);
            server.accepted(n, last && all);
        }
        assert!(server.is_complete());
        assert_eq!(wire.len() as u64, size);
        for (i, piece) in wire.chunks(3000).enumerate() {
            let fin = (i + 1) * 3000 >= wire.len();
            client.on_payload(piece, fin).unwrap();
        }
        assert_eq!(client.result().unwrap().bytes, size);
    }

    #[test]
    fn a_long_request_or_a_short_payload_is_an_error() {
        let mut server = ServerStream::default();
        assert!(matches!(server.on_request(&[0; 9], false), Err(ProtocolError::BadRequest(9))));
        let mut client = ClientStream::new(10);
        let mut data = [0u8; 5];
        protocol::fill_pattern(0, &mut data);
        assert!(client.on_payload(&data, true).is_err());
        assert!(client.result().is_none() && !client.is_verified());
    }

    #[test]
    fn an_empty_payload_is_just_a_fin() {
        let mut server = ServerStream::default();
        server.on_request(&protocol::encode_request(0), true).unwrap();
        let (data, last) = server.pending().unwrap();
        assert!(data.is_empty() && last);
        server.accepted(0, true);
        assert!(server.pending().is_none() && server.is_complete());
    }
}
