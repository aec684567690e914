//! quinn-proto (quinn's protocol logic, unchanged) over the I/O layer instead of quinn-udp.
//!
//! quinn-proto routes datagrams to connections itself (its `Endpoint` keeps the connection-ID
//! index); the shim keeps the connection table keyed by `ConnectionHandle`, pumps endpoint and
//! connection events between them, and asks each connection for GSO batches of as many datagrams
//! as one UDP send can carry, starting with a different connection each time (and a different
//! stream when it offers payload) so none is always served first. A server serves its expected
//! number of connections and every stream they open; a client runs its workload's connections,
//! `parallel` at a time, each opening all its streams at once. quinn itself caps that at 10 (`MAX_TRANSMIT_SEGMENTS`); here the
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

use nesquic_protocol::client::{ClientConnection, ClientRun};
use nesquic_protocol::options::{Cipher, CongestionControl};
use nesquic_protocol::report::ClientResult;

use crate::app::{PayloadChunk, ServerStream};
use crate::batch::TxBatch;
use crate::driver::Endpoint;
use crate::fair::Rotation;
use crate::protocol::SERVER_NAME;
use crate::{max_datagrams, ClientEndpoint, Stack, StackOptions, TranslationError};

/// quinn-proto's default upper bound for MTU discovery; GSO batches are sized for it.
const MAX_DATAGRAM: usize = 1452;

fn transport(options: &StackOptions, max_datagrams: usize) -> Result<Arc<TransportConfig>, TranslationError> {
    let mut t = TransportConfig::default();
    t.enable_segmentation_offload(max_datagrams > 1);
    let factory: Arc<dyn quinn_proto::congestion::ControllerFactory + Send + Sync> = match options.cc {
        None | Some(CongestionControl::Cubic) => Arc::new(quinn_proto::congestion::CubicConfig::default()),
        Some(CongestionControl::NewReno) => Arc::new(quinn_proto::congestion::NewRenoConfig::default()),
        Some(CongestionControl::Bbr) => Arc::new(quinn_proto::congestion::BbrConfig::default()),
        Some(_) => {
            return Err(TranslationError::Config("congestion control: quinn-proto offers cubic, newreno or bbr"))
        }
    };
    t.congestion_controller_factory(factory);
    // quinn-proto allows 100 concurrent streams by default; a multi-stream workload may want more.
    if options.max_streams > 100 {
        t.max_concurrent_bidi_streams(options.max_streams.into());
    }
    t.max_idle_timeout(Some(Duration::from_secs(10).try_into().map_err(|_| TranslationError::Config("idle timeout"))?));
    // Without the feature (a quinn-proto before 0.11.13 has no qlog) the adapter said so already.
    #[cfg(feature = "qlog")]
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

/// A quinn-proto endpoint with MTU discovery allowed (the I/O layer never fragments).
fn new_endpoint(server: Option<Arc<ServerConfig>>) -> ProtoEndpoint {
    let config = Arc::new(EndpointConfig::default());
    // quinn-proto 0.12 dropped 0.11's `rng_seed` argument (it is in `EndpointConfig`).
    #[cfg(quinn_proto_0_12)]
    return ProtoEndpoint::new(config, server, true);
    #[cfg(not(quinn_proto_0_12))]
    ProtoEndpoint::new(config, server, true, None)
}

/// QUIC protects Initial packets with AES-128-GCM whatever the handshake negotiates (RFC 9001
/// 5.2), so a provider limited to another suite still needs this one for them.
fn initial_suite() -> Result<rustls::quic::Suite, TranslationError> {
    rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|s| s.quic_suite())
        .ok_or(TranslationError::Config("ring has no QUIC AES-128-GCM suite"))
}

/// The benchmark's server TLS for quinn and quinn-proto alike ([`crate::rustls_config::server`]).
pub fn server_tls(cert: &Path, key: &Path, cipher: Option<Cipher>) -> Result<QuicServerConfig, TranslationError> {
    let tls = crate::rustls_config::server(cert, key, cipher)?;
    QuicServerConfig::with_initial(Arc::new(tls), initial_suite()?)
        .map_err(|_| TranslationError::Config("QUIC server TLS"))
}

/// The benchmark's client TLS ([`crate::rustls_config::client`]): trusts exactly `ca`.
pub fn client_tls(ca: &Path, cipher: Option<Cipher>) -> Result<QuicClientConfig, TranslationError> {
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
        connections: u32,
        options: &StackOptions,
    ) -> Result<Box<dyn Endpoint>, TranslationError> {
        Ok(Box::new(QuinnProto::server(cert, key, connections, max_datagrams(io), options)?))
    }

    fn client(
        io: &nesquic_io::UdpIo,
        _local: SocketAddr,
        server: SocketAddr,
        ca: &Path,
        run: ClientRun,
        options: &StackOptions,
    ) -> Result<Box<dyn ClientEndpoint>, TranslationError> {
        Ok(Box::new(QuinnProto::client(server, ca, run, max_datagrams(io), options)?))
    }
}

/// A server connection's streams, each with its request and payload.
#[derive(Default)]
struct Served {
    streams: Vec<(StreamId, ServerStream)>,
    rotation: Rotation,
}

/// A client connection: the workload's view of it (until every stream is verified) and the
/// streams opened so far, in opening order.
struct Requested {
    app: Option<ClientConnection>,
    ids: Vec<StreamId>,
}

/// Which side of the benchmark a connection plays.
enum Role {
    Server(Served),
    Client(Requested),
}

struct Entry {
    conn: Connection,
    role: Role,
    lost: Option<String>,
}

/// The client's workload and how to start its connections.
struct ClientSide {
    run: ClientRun,
    config: ClientConfig,
    server: SocketAddr,
}

/// quinn-proto endpoint (server or client) with its connections.
pub struct QuinnProto {
    endpoint: ProtoEndpoint,
    conns: HashMap<ConnectionHandle, Entry>,
    /// Datagrams the endpoint itself answered with (stateless resets, version negotiation, ...).
    responses: Vec<(SocketAddr, Vec<u8>)>,
    max_datagrams: usize,
    /// Server: connections to serve, and how many were served (closed and drained).
    expected: u32,
    served: u32,
    client: Option<ClientSide>,
    rotation: Rotation,
    scratch: Vec<u8>,
}

impl QuinnProto {
    /// A server for `connections` connections with the DER certificate and PKCS#8 key.
    /// `max_datagrams`: most datagrams per GSO batch (1 without GSO).
    pub fn server(
        cert: &Path,
        key: &Path,
        connections: u32,
        max_datagrams: usize,
        options: &StackOptions,
    ) -> Result<Self, TranslationError> {
        let mut config = ServerConfig::with_crypto(Arc::new(server_tls(cert, key, options.cipher)?));
        config.transport_config(transport(options, max_datagrams)?);
        let endpoint = new_endpoint(Some(Arc::new(config)));
        let mut this = Self::with(endpoint, max_datagrams, None);
        this.expected = connections.max(1);
        Ok(this)
    }

    /// A client running `run` against `server`, trusting only the DER certificate `ca`.
    pub fn client(
        server: SocketAddr,
        ca: &Path,
        run: ClientRun,
        max_datagrams: usize,
        options: &StackOptions,
    ) -> Result<Self, TranslationError> {
        let mut config = ClientConfig::new(Arc::new(client_tls(ca, options.cipher)?));
        config.transport_config(transport(options, max_datagrams)?);
        let endpoint = new_endpoint(None);
        let mut this = Self::with(endpoint, max_datagrams, Some(ClientSide { run, config, server }));
        this.start_connections(Instant::now())?;
        Ok(this)
    }

    fn with(endpoint: ProtoEndpoint, max_datagrams: usize, client: Option<ClientSide>) -> Self {
        Self {
            endpoint,
            conns: HashMap::new(),
            responses: Vec::new(),
            max_datagrams: max_datagrams.clamp(1, nesquic_io::MAX_UDP_PAYLOAD / MAX_DATAGRAM),
            expected: 0,
            served: 0,
            client,
            rotation: Rotation::default(),
            scratch: Vec::new(),
        }
    }

    /// Starts as many of the client's connections as its workload lets run now.
    fn start_connections(&mut self, now: Instant) -> Result<(), TranslationError> {
        let Some(side) = self.client.as_mut() else { return Ok(()) };
        while let Some(app) = side.run.next_connection() {
            let (handle, conn) = self
                .endpoint
                .connect(now, side.config.clone(), side.server, SERVER_NAME)
                .map_err(|e| TranslationError::Connect(format!("connection {}: {e}", app.index())))?;
            let role = Role::Client(Requested { app: Some(app), ids: Vec::new() });
            self.conns.insert(handle, Entry { conn, role, lost: None });
        }
        Ok(())
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

    /// The connection handles in a fair order: a different one first on every call.
    fn fair_handles(&mut self) -> Vec<ConnectionHandle> {
        let mut handles: Vec<ConnectionHandle> = self.conns.keys().copied().collect();
        handles.sort_unstable();
        let order = self.rotation.order(handles.len());
        order.map(|i| handles[i]).collect()
    }

    /// After a connection's events were handled: hands a verified client connection back to
    /// the workload, removes drained connections (counting the server's), and fails a client
    /// connection that ended before its payload was verified.
    fn settle(&mut self, handle: ConnectionHandle) -> Result<(), TranslationError> {
        let Some(entry) = self.conns.get_mut(&handle) else { return Ok(()) };
        let drained = entry.conn.is_drained();
        match &mut entry.role {
            Role::Client(requested) => {
                if let Some(app) = requested.app.take_if(|app| app.is_verified()) {
                    if let Some(side) = self.client.as_mut() {
                        side.run.finish(app).map_err(|e| TranslationError::Closed(e.to_string()))?;
                    }
                } else if let Some(app) = &requested.app {
                    if entry.lost.is_some() || drained {
                        let why = entry.lost.clone().unwrap_or_else(|| "drained".into());
                        return Err(TranslationError::Closed(format!("connection {}: {why}", app.index())));
                    }
                }
            }
            Role::Server(_) => {
                if drained {
                    self.served += 1;
                }
            }
        }
        if drained {
            self.conns.remove(&handle);
        }
        Ok(())
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
                    self.conns.insert(handle, Entry { conn, role: Role::Server(Served::default()), lost: None });
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
        for handle in self.fair_handles() {
            if let Some(entry) = self.conns.get_mut(&handle) {
                drive_connection(entry, now)?;
            }
            self.pump(handle);
            self.settle(handle)?;
        }
        self.start_connections(now)
    }

    fn fill_transmits(&mut self, now: Instant, batch: &mut TxBatch) -> Result<(), TranslationError> {
        for (to, packet) in self.responses.drain(..) {
            batch.push_owned(to, packet, None);
        }
        for handle in self.fair_handles() {
            let Some(entry) = self.conns.get_mut(&handle) else { continue };
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
        match &self.client {
            Some(side) => side.run.is_complete() && self.conns.is_empty(),
            None => self.served >= self.expected && self.conns.is_empty(),
        }
    }

    fn progress(&self) -> u64 {
        let open: u64 = self
            .conns
            .values()
            .filter_map(|e| match &e.role {
                Role::Client(Requested { app: Some(app), .. }) => Some(app.received()),
                _ => None,
            })
            .sum();
        open + self.client.as_ref().map_or(0, |side| side.run.finished_bytes())
    }
}

impl ClientEndpoint for QuinnProto {
    fn report(&self) -> Option<ClientResult> {
        self.client.as_ref().and_then(|side| side.run.report())
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
                if let Role::Client(Requested { app: Some(app), .. }) = &mut entry.role {
                    app.on_established();
                }
            }
            Event::ConnectionLost { reason } => entry.lost = Some(reason.to_string()),
            Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => {
                if let Role::Server(served) = &mut entry.role {
                    while let Some(id) = entry.conn.streams().accept(Dir::Bi) {
                        served.streams.push((id, ServerStream::new()));
                    }
                }
            }
            _ => {}
        }
    }
    match &mut entry.role {
        Role::Client(requested) => request(&mut entry.conn, requested, now),
        Role::Server(served) => {
            for i in served.rotation.order(served.streams.len()) {
                let (id, app) = &mut served.streams[i];
                serve_stream(&mut entry.conn, *id, app)?;
            }
            Ok(())
        }
    }
}

/// A client connection: opens its streams once established (as many as the server allows so
/// far), writes each request once, verifies what arrived, and closes with code 0 once every
/// stream is verified.
fn request(conn: &mut Connection, requested: &mut Requested, now: Instant) -> Result<(), TranslationError> {
    let Some(app) = requested.app.as_mut() else { return Ok(()) };
    if !app.is_established() {
        return Ok(());
    }
    while requested.ids.len() < app.stream_count() {
        let Some(id) = conn.streams().open(Dir::Bi) else { break };
        requested.ids.push(id);
    }
    let connection = app.index();
    for (i, (stream, id)) in app.streams_mut().iter_mut().zip(&requested.ids).enumerate() {
        if let Some(request) = stream.request() {
            let mut send = conn.send_stream(*id);
            let n = send.write(&request).map_err(|e| TranslationError::Stream(e.to_string()))?;
            debug_assert_eq!(n, request.len(), "a fresh stream takes 8 bytes");
            send.finish().map_err(|e| TranslationError::Stream(e.to_string()))?;
        }
        if !stream.is_verified() {
            read_stream(conn, *id, |data, fin| stream.on_payload(data, fin)).map_err(|e| match e {
                TranslationError::Protocol(source) => {
                    TranslationError::Payload { connection, stream: i, error: source }
                }
                other => other,
            })?;
        }
    }
    if app.is_verified() {
        conn.close(now, 0u32.into(), Bytes::from_static(b"done"));
    }
    Ok(())
}

/// A server stream: reads the request, then offers the payload until the stream or the
/// connection pushes back.
fn serve_stream(conn: &mut Connection, id: StreamId, app: &mut ServerStream) -> Result<(), TranslationError> {
    if !app.has_request() {
        read_stream(conn, id, |data, fin| app.on_request(data, fin))?;
    }
    while let Some((chunk, last)) = app.pending_shared() {
        // quinn-proto keeps `Bytes` as they are: a static pattern slice costs no copy.
        let mut bufs = [match chunk {
            PayloadChunk::Shared(window) => Bytes::from_static(window),
            PayloadChunk::Owned(altered) => Bytes::from(altered),
        }];
        let len = bufs[0].len();
        let mut send = conn.send_stream(id);
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
    Ok(())
}
