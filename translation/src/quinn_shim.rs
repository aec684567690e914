//! quinn-proto (quinn's protocol logic, unchanged) over the I/O layer instead of quinn-udp.
//!
//! quinn-proto routes datagrams to connections itself (its `Endpoint` keeps the connection-ID
//! index); the shim keeps the connection table keyed by `ConnectionHandle`, pumps endpoint and
//! connection events between them, and asks each connection for GSO batches of as many datagrams
//! as one UDP send can carry. quinn itself caps that at 10 (`MAX_TRANSMIT_SEGMENTS`); here the
//! cap is the I/O layer's, which is what lets the two be compared without patching quinn.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint as ProtoEndpoint, EndpointConfig, Event,
    ReadError, ServerConfig, StreamEvent, StreamId, TransportConfig, WriteError,
};

use crate::app::{ClientOutcome, ClientStream, PayloadChunk, ServerStream};
use crate::batch::TxBatch;
use crate::driver::Endpoint;
use crate::protocol::SERVER_NAME;
use crate::{max_datagrams, ClientEndpoint, Stack, StackOptions, TranslationError};

/// quinn-proto's default upper bound for MTU discovery; GSO batches are sized for it.
const MAX_DATAGRAM: usize = 1452;

fn transport(options: &StackOptions, max_datagrams: usize) -> Result<Arc<TransportConfig>, TranslationError> {
    let mut t = TransportConfig::default();
    t.enable_segmentation_offload(max_datagrams > 1);
    let factory: Arc<dyn quinn_proto::congestion::ControllerFactory + Send + Sync> = match options.cc.as_deref() {
        None | Some("cubic") => Arc::new(quinn_proto::congestion::CubicConfig::default()),
        Some("newreno") => Arc::new(quinn_proto::congestion::NewRenoConfig::default()),
        Some("bbr") => Arc::new(quinn_proto::congestion::BbrConfig::default()),
        Some(_) => return Err(TranslationError::Config("congestion control: cubic, newreno or bbr")),
    };
    t.congestion_controller_factory(factory);
    t.max_idle_timeout(Some(Duration::from_secs(10).try_into().map_err(|_| TranslationError::Config("idle timeout"))?));
    if let Some(path) = &options.qlog {
        let file =
            std::fs::File::create(path).map_err(|source| TranslationError::File { path: path.clone(), source })?;
        let mut qlog = quinn_proto::QlogConfig::default();
        qlog.writer(Box::new(std::io::BufWriter::new(file))).title(Some("quinn-proto".into()));
        if let Some(start) = options.qlog_start {
            qlog.start_time(start);
        }
        t.qlog_stream(qlog.into_stream());
    }
    Ok(Arc::new(t))
}

pub use crate::rustls_config::CIPHERS;

/// QUIC protects Initial packets with AES-128-GCM whatever the handshake negotiates (RFC 9001
/// 5.2), so a provider limited to another suite still needs this one for them.
fn initial_suite() -> Result<rustls::quic::Suite, TranslationError> {
    rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|s| s.quic_suite())
        .ok_or(TranslationError::Config("ring has no QUIC AES-128-GCM suite"))
}

/// The benchmark's server TLS for quinn and quinn-proto alike ([`crate::rustls_config::server`]).
pub fn server_tls(cert: &Path, key: &Path, cipher: Option<&str>) -> Result<QuicServerConfig, TranslationError> {
    let tls = crate::rustls_config::server(cert, key, cipher)?;
    QuicServerConfig::with_initial(Arc::new(tls), initial_suite()?)
        .map_err(|_| TranslationError::Config("QUIC server TLS"))
}

/// The benchmark's client TLS ([`crate::rustls_config::client`]): trusts exactly `ca`.
pub fn client_tls(ca: &Path, cipher: Option<&str>) -> Result<QuicClientConfig, TranslationError> {
    let tls = crate::rustls_config::client(ca, cipher)?;
    QuicClientConfig::with_initial(Arc::new(tls), initial_suite()?)
        .map_err(|_| TranslationError::Config("QUIC client TLS"))
}

/// quinn-proto, for [`crate::serve`] and [`crate::download`]: GSO batches as large as the
/// socket allows.
#[derive(Debug)]
pub struct QuinnProtoStack;

impl Stack for QuinnProtoStack {
    const NAME: &'static str = "quinn-proto";

    fn server(
        io: &nesquic_io::UdpIo,
        cert: &Path,
        key: &Path,
        options: &StackOptions,
    ) -> Result<Box<dyn Endpoint>, TranslationError> {
        Ok(Box::new(QuinnProto::server(cert, key, max_datagrams(io), options)?))
    }

    fn client(
        io: &nesquic_io::UdpIo,
        _local: SocketAddr,
        server: SocketAddr,
        ca: &Path,
        size: u64,
        options: &StackOptions,
    ) -> Result<Box<dyn ClientEndpoint>, TranslationError> {
        Ok(Box::new(QuinnProto::client(server, ca, size, max_datagrams(io), options)?))
    }
}

/// Which side of the benchmark a connection plays.
enum Role {
    Server(Option<(StreamId, ServerStream)>),
    Client(ClientStream, Option<StreamId>),
}

struct Entry {
    conn: Connection,
    role: Role,
    lost: Option<String>,
}

/// quinn-proto endpoint (server or client) with its connections.
pub struct QuinnProto {
    endpoint: ProtoEndpoint,
    conns: HashMap<ConnectionHandle, Entry>,
    /// Datagrams the endpoint itself answered with (stateless resets, version negotiation, ...).
    responses: Vec<(SocketAddr, Vec<u8>)>,
    max_datagrams: usize,
    served: usize,
    is_server: bool,
    scratch: Vec<u8>,
}

impl QuinnProto {
    /// A server with the DER certificate and PKCS#8 key. `max_datagrams`: most datagrams per
    /// GSO batch (1 without GSO).
    pub fn server(
        cert: &Path,
        key: &Path,
        max_datagrams: usize,
        options: &StackOptions,
    ) -> Result<Self, TranslationError> {
        let mut config = ServerConfig::with_crypto(Arc::new(server_tls(cert, key, options.cipher.as_deref())?));
        config.transport_config(transport(options, max_datagrams)?);
        let endpoint = ProtoEndpoint::new(Arc::new(EndpointConfig::default()), Some(Arc::new(config)), true, None);
        Ok(Self::with(endpoint, max_datagrams, true))
    }

    /// A client connecting to `server` for `size` bytes, trusting only the DER certificate `ca`.
    pub fn client(
        server: SocketAddr,
        ca: &Path,
        size: u64,
        max_datagrams: usize,
        options: &StackOptions,
    ) -> Result<Self, TranslationError> {
        let mut config = ClientConfig::new(Arc::new(client_tls(ca, options.cipher.as_deref())?));
        config.transport_config(transport(options, max_datagrams)?);
        let mut this =
            Self::with(ProtoEndpoint::new(Arc::new(EndpointConfig::default()), None, true, None), max_datagrams, false);
        let stream = ClientStream::new(size);
        let (handle, conn) = this
            .endpoint
            .connect(Instant::now(), config, server, SERVER_NAME)
            .map_err(|e| TranslationError::Connect(e.to_string()))?;
        this.conns.insert(handle, Entry { conn, role: Role::Client(stream, None), lost: None });
        Ok(this)
    }

    fn with(endpoint: ProtoEndpoint, max_datagrams: usize, is_server: bool) -> Self {
        Self {
            endpoint,
            conns: HashMap::new(),
            responses: Vec::new(),
            max_datagrams: max_datagrams.clamp(1, nesquic_io::MAX_UDP_PAYLOAD / MAX_DATAGRAM),
            served: 0,
            is_server,
            scratch: Vec::new(),
        }
    }

    /// Passes a connection's endpoint events to the endpoint and the answers back.
    fn pump(&mut self, handle: ConnectionHandle) {
        let Some(entry) = self.conns.get_mut(&handle) else { return };
        while let Some(event) = entry.conn.poll_endpoint_events() {
            if let Some(answer) = self.endpoint.handle_event(handle, event) {
                entry.conn.handle_event(answer);
            }
        }
    }

    fn respond(&mut self, transmit: quinn_proto::Transmit, buf: &[u8]) {
        self.responses.push((transmit.destination, buf[..transmit.size].to_vec()));
    }
}

impl Endpoint for QuinnProto {
    fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        local: SocketAddr,
        datagram: &mut [u8],
    ) -> Result<(), TranslationError> {
        let mut buf = std::mem::take(&mut self.scratch);
        // quinn copies each datagram into a BytesMut the same way.
        let event = self.endpoint.handle(now, from, Some(local.ip()), None, BytesMut::from(&datagram[..]), &mut buf);
        match event {
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                if let Some(entry) = self.conns.get_mut(&handle) {
                    entry.conn.handle_event(event);
                }
                self.pump(handle);
            }
            Some(DatagramEvent::NewConnection(incoming)) => match self.endpoint.accept(incoming, now, &mut buf, None) {
                Ok((handle, conn)) => {
                    self.conns.insert(handle, Entry { conn, role: Role::Server(None), lost: None });
                    self.pump(handle);
                }
                Err(e) => {
                    if let Some(t) = e.response {
                        self.respond(t, &buf);
                    }
                }
            },
            Some(DatagramEvent::Response(t)) => self.respond(t, &buf),
            None => {}
        }
        buf.clear();
        self.scratch = buf;
        Ok(())
    }

    fn next_timeout(&mut self) -> Option<Instant> {
        self.conns.values_mut().filter_map(|e| e.conn.poll_timeout()).min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        let handles: Vec<ConnectionHandle> = self.conns.keys().copied().collect();
        for handle in handles {
            if let Some(entry) = self.conns.get_mut(&handle) {
                if entry.conn.poll_timeout().is_some_and(|t| t <= now) {
                    entry.conn.handle_timeout(now);
                }
            }
            self.pump(handle);
        }
    }

    fn drive_app(&mut self, now: Instant) -> Result<(), TranslationError> {
        let handles: Vec<ConnectionHandle> = self.conns.keys().copied().collect();
        for handle in handles {
            if let Some(entry) = self.conns.get_mut(&handle) {
                drive_connection(entry, now)?;
            }
            self.pump(handle);
            let Some(entry) = self.conns.get(&handle) else { continue };
            if let Role::Client(stream, _) = &entry.role {
                // A client connection that ends before its payload is verified is a failure.
                if stream.outcome().is_none() && (entry.lost.is_some() || entry.conn.is_drained()) {
                    return Err(TranslationError::Closed(entry.lost.clone().unwrap_or_else(|| "drained".into())));
                }
            } else if entry.conn.is_drained() {
                self.conns.remove(&handle);
                self.served += 1;
            }
        }
        Ok(())
    }

    fn fill_transmits(&mut self, now: Instant, batch: &mut TxBatch) -> Result<(), TranslationError> {
        for (to, packet) in self.responses.drain(..) {
            batch.push_owned(to, packet, None);
        }
        for entry in self.conns.values_mut() {
            while !batch.is_full() {
                let mut buf = batch.take_buffer();
                match entry.conn.poll_transmit(now, self.max_datagrams, &mut buf) {
                    Some(t) => {
                        buf.truncate(t.size);
                        batch.push_owned(t.destination, buf, t.segment_size);
                    }
                    None => {
                        batch.put_back(buf);
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        if self.is_server {
            self.served > 0 && self.conns.is_empty()
        } else {
            self.conns.values().all(|e| e.conn.is_drained())
        }
    }

    fn progress(&self) -> u64 {
        self.conns
            .values()
            .map(|e| match &e.role {
                Role::Client(s, _) => s.received(),
                Role::Server(_) => 0,
            })
            .sum()
    }
}

impl ClientEndpoint for QuinnProto {
    fn outcome(&self) -> Option<ClientOutcome> {
        self.conns.values().find_map(|e| match &e.role {
            Role::Client(s, _) => s.outcome(),
            Role::Server(_) => None,
        })
    }
    fn as_endpoint(&mut self) -> &mut dyn Endpoint {
        self
    }
}

/// Feeds what stream `id` has ready to `take` (data, then `(&[], true)` at the fin); returns
/// whether the fin was seen. A stream already read to its end yields nothing.
fn read_stream(
    conn: &mut Connection,
    id: StreamId,
    mut take: impl FnMut(&[u8], bool) -> Result<(), crate::app::ProtocolError>,
) -> Result<bool, TranslationError> {
    let mut recv = conn.recv_stream(id);
    let Ok(mut chunks) = recv.read(true) else { return Ok(false) };
    let mut finished = false;
    let result = loop {
        match chunks.next(usize::MAX) {
            Ok(Some(chunk)) => {
                if let Err(e) = take(&chunk.bytes, false) {
                    break Err(e.into());
                }
            }
            Ok(None) => {
                finished = true;
                break take(&[], true).map_err(Into::into);
            }
            Err(ReadError::Blocked) => break Ok(()),
            Err(e) => break Err(TranslationError::Stream(e.to_string())),
        }
    };
    let _ = chunks.finalize();
    result.map(|()| finished)
}

/// Handles one connection's application events and moves its stream data.
fn drive_connection(entry: &mut Entry, now: Instant) -> Result<(), TranslationError> {
    while let Some(event) = entry.conn.poll() {
        match event {
            Event::Connected => {
                if let Role::Client(stream, id) = &mut entry.role {
                    stream.on_established();
                    if id.is_none() {
                        *id = entry.conn.streams().open(Dir::Bi);
                    }
                }
            }
            Event::ConnectionLost { reason } => entry.lost = Some(reason.to_string()),
            Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => {
                if let Role::Server(slot @ None) = &mut entry.role {
                    if let Some(id) = entry.conn.streams().accept(Dir::Bi) {
                        *slot = Some((id, ServerStream::new()));
                    }
                }
            }
            _ => {}
        }
    }
    match &mut entry.role {
        Role::Client(stream, Some(id)) => {
            if let Some(request) = stream.request() {
                let mut send = entry.conn.send_stream(*id);
                let n = send.write(&request).map_err(|e| TranslationError::Stream(e.to_string()))?;
                debug_assert_eq!(n, request.len(), "a fresh stream takes 8 bytes");
                send.finish().map_err(|e| TranslationError::Stream(e.to_string()))?;
            }
            let verified_all = read_stream(&mut entry.conn, *id, |data, fin| stream.on_payload(data, fin))?;
            if verified_all {
                entry.conn.close(now, 0u32.into(), Bytes::from_static(b"done"));
            }
        }
        Role::Server(Some((id, app))) => {
            if !app.has_request() {
                read_stream(&mut entry.conn, *id, |data, fin| app.on_request(data, fin))?;
            }
            while let Some((chunk, last)) = app.pending_shared() {
                // quinn-proto keeps `Bytes` as they are: a static pattern slice costs no copy.
                let mut bufs = [match chunk {
                    PayloadChunk::Shared(window) => Bytes::from_static(window),
                    PayloadChunk::Owned(altered) => Bytes::from(altered),
                }];
                let len = bufs[0].len();
                let mut send = entry.conn.send_stream(*id);
                let n = match send.write_chunks(&mut bufs) {
                    Ok(written) => written.bytes,
                    Err(WriteError::Blocked) => break,
                    Err(e) => return Err(TranslationError::Stream(e.to_string())),
                };
                let all = n == len;
                if last && all {
                    send.finish().map_err(|e| TranslationError::Stream(e.to_string()))?;
                }
                app.accepted(n, last && all);
                if !all {
                    break;
                }
            }
        }
        _ => {}
    }
    Ok(())
}
