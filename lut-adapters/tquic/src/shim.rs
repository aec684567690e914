//! tquic over the translation layer. tquic is callback-driven and does no I/O: datagrams go in
//! through `Endpoint::recv`, its timers through `on_timeout`, and `process_connections` runs the
//! connections, calling the [`TransportHandler`] (the benchmark protocol, [`ServerApp`] and
//! [`ClientApp`]) and handing finished packets to a [`PacketSendHandler`]. That sender writes
//! them straight into the translation layer's GSO batch (one copy, as tquic keeps its buffers),
//! taking every packet it is offered (see [`Sender`]).
//! tquic keeps the connection table itself (it routes datagrams by connection ID and visits
//! every connection in `process_connections`); the server serves its expected number of
//! connections, every stream each opens, and the client runs the workload's connections through
//! the translation layer's [`ClientRun`] (`parallel` at a time, every stream opened at once)
//! and reports its `done` result from it. The per-stream read and payload loops are the
//! translation layer's ([`drain_stream`], [`offer_payload`]), shared with the quiche shim.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use nesquic_lut_bins::protocol::options::CongestionControl;
use nesquic_lut_bins::protocol::payload::{ALPN, SERVER_NAME};
use nesquic_lut_bins::protocol::pem;
use nesquic_lut_bins::protocol::report::ClientResult;
use nesquic_lut_bins::protocol::stream::{PayloadChunk, ServerStream};
use nesquic_lut_bins::protocol::{ClientConnection, ClientRun};
use nesquic_lut_bins::translation::batch::TxBatch;
use nesquic_lut_bins::translation::streams::{drain_stream, offer_payload, Read};
use nesquic_lut_bins::translation::{ClientEndpoint, Endpoint, Stack, StackOptions, TranslationError};
use tquic::{Connection, PacketInfo, PacketSendHandler, TlsConfig, TransportHandler};

/// Largest datagram tquic may send: the ceiling the quiche LUT uses (loopback and veth carry it).
const MAX_DATAGRAM: usize = 1452;
/// Flow-control windows as the quiche LUT sets them, so neither is window-limited on loopback.
const STREAM_WINDOW: u64 = 16 << 20;
const CONNECTION_WINDOW: u64 = 32 << 20;
const IDLE_TIMEOUT_MS: u64 = 10_000;
/// tquic's default limit on concurrent bidirectional streams a peer may open.
const MAX_STREAMS_BIDI: u64 = 200;
/// Read buffer for stream data.
const SCRATCH: usize = 64 * 1024;

fn tquic_err(context: &'static str) -> impl Fn(tquic::Error) -> TranslationError {
    move |e| TranslationError::Stream(format!("tquic {context}: {e:?}"))
}

/// tquic settings shared by both roles; `cc` defaults to Cubic like the other LUTs (tquic's own
/// default is BBR).
fn config(options: &StackOptions, tls: TlsConfig) -> Result<tquic::Config, TranslationError> {
    let mut c = tquic::Config::new().map_err(tquic_err("config"))?;
    c.set_max_idle_timeout(IDLE_TIMEOUT_MS);
    c.set_send_udp_payload_size(MAX_DATAGRAM);
    c.set_recv_udp_payload_size(MAX_DATAGRAM as u16);
    c.set_initial_max_data(CONNECTION_WINDOW);
    c.set_initial_max_stream_data_bidi_local(STREAM_WINDOW);
    c.set_initial_max_stream_data_bidi_remote(STREAM_WINDOW);
    c.set_max_connection_window(CONNECTION_WINDOW);
    c.set_max_stream_window(STREAM_WINDOW);
    // The client opens every stream of a connection at once (`--streams`).
    c.set_initial_max_streams_bidi(u64::from(options.max_streams).max(MAX_STREAMS_BIDI));
    c.set_congestion_control_algorithm(match options.cc {
        None | Some(CongestionControl::Cubic) => tquic::CongestionControlAlgorithm::Cubic,
        Some(CongestionControl::Bbr) => tquic::CongestionControlAlgorithm::Bbr,
        Some(CongestionControl::Bbr3) => tquic::CongestionControlAlgorithm::Bbr3,
        Some(CongestionControl::Copa) => tquic::CongestionControlAlgorithm::Copa,
        Some(CongestionControl::NewReno) => {
            return Err(TranslationError::Config("congestion control: cubic, bbr, bbr3 or copa (tquic has no NewReno)"))
        }
    });
    c.set_tls_config(tls);
    Ok(c)
}

/// Where the sender puts packets: the loop's batch while `process_connections` runs.
#[derive(Default)]
struct Outbox {
    batch: Option<TxBatch>,
    now: Option<Instant>,
}

/// tquic's packet sink: copies each packet into the loop's batch.
struct Sender(Rc<RefCell<Outbox>>);

impl PacketSendHandler for Sender {
    fn on_packets_send(&self, packets: &[(Vec<u8>, PacketInfo)]) -> tquic::Result<usize> {
        let mut outbox = self.0.borrow_mut();
        let now = outbox.now.unwrap_or_else(Instant::now);
        let Some(batch) = outbox.batch.as_mut() else { return Ok(0) };
        let mut accepted = 0;
        // Every packet offered is taken, past the batch's nominal size (the loop flushes it all,
        // in as many sends as it takes): a refused packet stays in tquic's queue, and tquic
        // goes on building packets and offering the same ones again until its congestion window
        // is spent. Refusing at 256 datagrams cost the server ~20% more CPU per byte (cold copies
        // of a window of queued packets, their buffers allocated and zeroed; docs/luts.md).
        for (packet, info) in packets {
            let written = batch.push_with(now, packet.len(), |buf| {
                buf[..packet.len()].copy_from_slice(packet);
                // `info.time` is when tquic built the packet, not a time to send it at (tquic
                // paces inside, holding packets back until its pacer allows): due now.
                Ok::<_, ()>(Some((packet.len(), info.dst, None)))
            });
            if !matches!(written, Ok(true)) {
                break;
            }
            accepted += 1;
        }
        Ok(accepted)
    }
}

/// A tquic endpoint with its benchmark application `A`, as the translation loop sees it.
pub struct TquicEndpoint<A> {
    endpoint: tquic::Endpoint,
    /// The concrete local address a client's path was created with: the socket may be bound to
    /// the unspecified address, and tquic matches every datagram's destination to the path.
    local: Option<SocketAddr>,
    /// Where a client's connections go (`None` on a server).
    server: Option<SocketAddr>,
    /// The loop turn's time, as last seen: due work is reported due at it (tquic only says how
    /// long remains, and "zero from now" would always lie after the loop's `now`).
    last_turn: Instant,
    outbox: Rc<RefCell<Outbox>>,
    app: Rc<RefCell<A>>,
}

/// What the loop needs from either role's application.
pub trait App {
    /// The first error a callback ran into (callbacks cannot return one).
    fn take_error(&mut self) -> Option<TranslationError>;
    fn is_done(&self) -> bool;
    fn progress(&self) -> u64 {
        0
    }
    /// The workload's next connection, when one may start now (clients).
    fn next_connection(&mut self) -> Option<ClientConnection> {
        None
    }
    /// `app` was started as tquic's connection `index`.
    fn started(&mut self, _index: u64, _app: ClientConnection) {}
}

/// Shares `app` between tquic (which owns the handler) and the loop.
pub struct Shared<A>(Rc<RefCell<A>>);

impl<A> TquicEndpoint<A>
where
    Shared<A>: TransportHandler,
    A: 'static,
{
    fn new(config: tquic::Config, is_server: bool, app: A) -> Self {
        let app = Rc::new(RefCell::new(app));
        let outbox = Rc::new(RefCell::new(Outbox::default()));
        let endpoint = tquic::Endpoint::new(
            Box::new(config),
            is_server,
            Box::new(Shared(app.clone())),
            Rc::new(Sender(outbox.clone())),
        );
        Self { endpoint, local: None, server: None, last_turn: Instant::now(), outbox, app }
    }
}

impl<A: App> Endpoint for TquicEndpoint<A> {
    fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        local: SocketAddr,
        datagram: &mut [u8],
    ) -> Result<(), TranslationError> {
        // A datagram tquic rejects is dropped, as the network could have.
        let dst = self.local.unwrap_or(local);
        let _ = self.endpoint.recv(datagram, &PacketInfo { src: from, dst, time: now });
        Ok(())
    }

    fn next_timeout(&mut self) -> Option<Instant> {
        let remaining = self.endpoint.timeout()?;
        // tquic answers exactly its timer granularity when work is pending (queued packets, a
        // connection with more to do): that work is due now, not a millisecond from now.
        let due_now = remaining.is_zero() || remaining == tquic::TIMER_GRANULARITY;
        Some(if due_now { self.last_turn } else { Instant::now() + remaining })
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.on_timeout(now);
    }

    fn drive_app(&mut self, now: Instant) -> Result<(), TranslationError> {
        self.last_turn = now;
        if let (Some(local), Some(server)) = (self.local, self.server) {
            // Start what the workload lets run now (tquic calls back into `app` while
            // connecting, so it is not borrowed across the call).
            loop {
                let next = self.app.borrow_mut().next_connection();
                let Some(connection) = next else { break };
                let index = self
                    .endpoint
                    .connect(local, server, Some(SERVER_NAME), None, None, None)
                    .map_err(|e| TranslationError::Connect(format!("{e:?}")))?;
                self.app.borrow_mut().started(index, connection);
            }
        }
        // The rest of the application runs in tquic's callbacks, during process_connections.
        self.app.borrow_mut().take_error().map_or(Ok(()), Err)
    }

    fn fill_transmits(&mut self, now: Instant, batch: &mut TxBatch) -> Result<(), TranslationError> {
        // Lend the batch to the sender for this call (it writes packets straight into it).
        {
            let mut outbox = self.outbox.borrow_mut();
            outbox.batch = Some(std::mem::replace(batch, TxBatch::new(1)));
            outbox.now = Some(now);
        }
        let result = self.endpoint.process_connections();
        if let Some(lent) = self.outbox.borrow_mut().batch.take() {
            *batch = lent;
        }
        result.map_err(tquic_err("process connections"))?;
        self.app.borrow_mut().take_error().map_or(Ok(()), Err)
    }

    fn is_done(&self) -> bool {
        self.app.borrow().is_done()
    }

    fn progress(&self) -> u64 {
        self.app.borrow().progress()
    }
}

/// tquic, for the translation layer's `serve` and `download`.
#[derive(Debug)]
pub struct Tquic;

impl Stack for Tquic {
    const NAME: &'static str = "tquic";

    fn server(
        _io: &nesquic_lut_bins::io::UdpIo,
        cert: &Path,
        key: &Path,
        connections: u32,
        options: &StackOptions,
    ) -> Result<Box<dyn Endpoint>, TranslationError> {
        // BoringSSL loads PEM files; they are only needed while loading.
        let (cert_pem, key_pem) = pem::der_files_to_pem(cert, key)?;
        let tls = TlsConfig::new_server_config(&cert_pem.path_str()?, &key_pem.path_str()?, vec![ALPN.to_vec()], false)
            .map_err(tquic_err("server TLS"))?;
        let app = ServerApp {
            streams: HashMap::new(),
            qlog: options.qlog.clone(),
            expected: connections.max(1),
            closed: 0,
            scratch: vec![0; SCRATCH],
            error: None,
        };
        Ok(Box::new(TquicEndpoint::new(config(options, tls)?, true, app)))
    }

    fn client(
        _io: &nesquic_lut_bins::io::UdpIo,
        local: SocketAddr,
        server: SocketAddr,
        ca: &Path,
        run: ClientRun,
        options: &StackOptions,
    ) -> Result<Box<dyn ClientEndpoint>, TranslationError> {
        let mut tls = TlsConfig::new_client_config(vec![ALPN.to_vec()], false).map_err(tquic_err("client TLS"))?;
        let ca_pem = pem::der_file_to_pem(ca, "CERTIFICATE")?;
        tls.set_ca_certs(&ca_pem.path_str()?).map_err(tquic_err("load trust anchor"))?;
        // Verify the chain against that anchor and the name against SERVER_NAME.
        tls.set_verify(true);
        let app = ClientApp::new(run, options.qlog.clone());
        let mut endpoint = TquicEndpoint::new(config(options, tls)?, false, app);
        // Connections start in the loop's first turn (`drive_app`), `parallel` at a time.
        endpoint.local = Some(local);
        endpoint.server = Some(server);
        Ok(Box::new(endpoint))
    }
}

/// Writes the connection's qlog to `path`, if asked.
fn set_qlog(conn: &mut Connection, path: Option<&Path>, role: &str) -> Result<(), TranslationError> {
    if let Some(path) = path {
        let file =
            std::fs::File::create(path).map_err(|source| TranslationError::File { path: path.into(), source })?;
        conn.set_qlog(Box::new(std::io::BufWriter::new(file)), format!("tquic {role}"), String::new());
    }
    Ok(())
}

/// Why a connection ended, from tquic's view.
fn closed_reason(conn: &Connection) -> String {
    if conn.is_idle_timeout() {
        return "idle timeout".into();
    }
    let describe = |who: &str, e: &tquic::error::ConnectionError| {
        format!("{who} closed it: error {:#x} {:?}", e.error_code, String::from_utf8_lossy(&e.reason))
    };
    match (conn.peer_error(), conn.local_error()) {
        (Some(e), _) => describe("peer", e),
        (None, Some(e)) => describe("we", e),
        (None, None) => "closed".into(),
    }
}

/// One `stream_read` as the translation layer's [`drain_stream`] wants it.
fn read(conn: &mut Connection, id: u64, buf: &mut [u8], context: &'static str) -> Result<Read, TranslationError> {
    match conn.stream_read(id, buf) {
        Ok(read) => Ok(Some(read)),
        Err(tquic::Error::Done) => Ok(None),
        Err(e) => Err(tquic_err(context)(e)),
    }
}

/// tquic's connection index (set on every connection it creates).
fn index(conn: &Connection) -> u64 {
    conn.index().unwrap_or(u64::MAX)
}

/// The server's benchmark streams, per connection and stream; done after `expected` connections.
pub struct ServerApp {
    streams: HashMap<(u64, u64), ServerStream>,
    /// tquic writes one qlog per connection: the first connection's goes to this file.
    qlog: Option<std::path::PathBuf>,
    expected: u32,
    closed: u32,
    scratch: Vec<u8>,
    error: Option<TranslationError>,
}

impl ServerApp {
    fn read_request(&mut self, conn: &mut Connection, id: u64) -> Result<(), TranslationError> {
        let stream = self.streams.entry((index(conn), id)).or_default();
        drain_stream(
            &mut self.scratch,
            |buf| read(conn, id, buf, "read request"),
            |data, fin| Ok(stream.on_request(data, fin)?),
        )?;
        self.write_payload(conn, id)
    }

    /// Offers tquic pattern slices (shared, no copy) until its stream buffer is full.
    fn write_payload(&mut self, conn: &mut Connection, id: u64) -> Result<(), TranslationError> {
        let Some(stream) = self.streams.get_mut(&(index(conn), id)) else { return Ok(()) };
        offer_payload(stream, |chunk, last| {
            let bytes = match chunk {
                PayloadChunk::Shared(window) => Bytes::from_static(window),
                PayloadChunk::Owned(altered) => Bytes::from(altered),
            };
            match conn.stream_write(id, bytes, last) {
                Ok(n) => Ok(Some(n)),
                Err(tquic::Error::Done) => Ok(None),
                Err(e) => Err(tquic_err("write payload")(e)),
            }
        })
    }

    fn keep(&mut self, result: Result<(), TranslationError>) {
        if let Err(e) = result {
            self.error.get_or_insert(e);
        }
    }
}

impl App for ServerApp {
    fn take_error(&mut self) -> Option<TranslationError> {
        self.error.take()
    }
    fn is_done(&self) -> bool {
        self.closed >= self.expected
    }
}

impl TransportHandler for Shared<ServerApp> {
    fn on_conn_created(&mut self, conn: &mut Connection) {
        let mut app = self.0.borrow_mut();
        let qlog = app.qlog.take();
        let result = set_qlog(conn, qlog.as_deref(), "server");
        app.keep(result);
    }
    fn on_conn_established(&mut self, _conn: &mut Connection) {}
    fn on_conn_closed(&mut self, conn: &mut Connection) {
        // Whether the client got every byte is the client's verdict; this connection is done.
        let mut app = self.0.borrow_mut();
        app.closed += 1;
        let closed = index(conn);
        app.streams.retain(|(conn, _), _| *conn != closed);
    }
    fn on_stream_created(&mut self, _conn: &mut Connection, _stream_id: u64) {}
    fn on_stream_readable(&mut self, conn: &mut Connection, stream_id: u64) {
        let mut app = self.0.borrow_mut();
        let result = app.read_request(conn, stream_id);
        app.keep(result);
    }
    fn on_stream_writable(&mut self, conn: &mut Connection, stream_id: u64) {
        let mut app = self.0.borrow_mut();
        let result = app.write_payload(conn, stream_id);
        app.keep(result);
    }
    fn on_stream_closed(&mut self, conn: &mut Connection, stream_id: u64) {
        self.0.borrow_mut().streams.remove(&(index(conn), stream_id));
    }
    fn on_new_token(&mut self, _conn: &mut Connection, _token: Vec<u8>) {}
}

/// A client connection still running: the workload's view of it and tquic's ID of each of its
/// streams, in opening order.
struct Open {
    app: ClientConnection,
    ids: Vec<u64>,
}

/// The client's workload: its connections `parallel` at a time (started by the loop through
/// [`App::next_connection`]), every stream opened at once and verified.
pub struct ClientApp {
    run: ClientRun,
    /// Connections not yet verified, by tquic's connection index.
    open: HashMap<u64, Open>,
    started: u32,
    closed: u32,
    qlog: Option<std::path::PathBuf>,
    scratch: Vec<u8>,
    error: Option<TranslationError>,
}

impl ClientApp {
    fn new(run: ClientRun, qlog: Option<std::path::PathBuf>) -> Self {
        Self { run, open: HashMap::new(), started: 0, closed: 0, qlog, scratch: vec![0; SCRATCH], error: None }
    }

    /// Opens every stream of the connection and writes its request (with fin).
    fn send_requests(&mut self, conn: &mut Connection) -> Result<(), TranslationError> {
        let Some(open) = self.open.get_mut(&index(conn)) else { return Ok(()) };
        open.app.on_established();
        for stream in open.app.streams_mut() {
            let Some(request) = stream.request() else { continue };
            let id = conn.stream_bidi_new(0, false).map_err(tquic_err("open stream"))?;
            conn.stream_write(id, Bytes::copy_from_slice(&request), true).map_err(tquic_err("write request"))?;
            open.ids.push(id);
        }
        Ok(())
    }

    fn read_payload(&mut self, conn: &mut Connection, id: u64) -> Result<(), TranslationError> {
        let key = index(conn);
        let Some(open) = self.open.get_mut(&key) else { return Ok(()) };
        let Some(i) = open.ids.iter().position(|&s| s == id) else { return Ok(()) };
        let connection = open.app.index();
        let Some(stream) = open.app.stream_mut(i) else { return Ok(()) };
        drain_stream(
            &mut self.scratch,
            |buf| read(conn, id, buf, "read payload"),
            |data, fin| {
                stream.on_payload(data, fin).map_err(|error| TranslationError::Payload { connection, stream: i, error })
            },
        )?;
        if open.app.is_verified() {
            if let Some(done) = self.open.remove(&key) {
                self.run.finish(done.app).map_err(|e| TranslationError::Closed(e.to_string()))?;
            }
            // Closing is the client's last word; an error here means tquic closes it already.
            let _ = conn.close(true, 0, b"done");
        }
        Ok(())
    }

    fn keep(&mut self, result: Result<(), TranslationError>) {
        if let Err(e) = result {
            self.error.get_or_insert(e);
        }
    }
}

impl App for ClientApp {
    fn take_error(&mut self) -> Option<TranslationError> {
        self.error.take()
    }
    fn is_done(&self) -> bool {
        self.run.is_complete() && self.closed == self.started
    }
    fn progress(&self) -> u64 {
        self.open.values().map(|o| o.app.received()).sum::<u64>() + self.run.finished_bytes()
    }
    fn next_connection(&mut self) -> Option<ClientConnection> {
        self.run.next_connection()
    }
    fn started(&mut self, index: u64, app: ClientConnection) {
        self.started += 1;
        self.open.insert(index, Open { app, ids: Vec::new() });
    }
}

impl TransportHandler for Shared<ClientApp> {
    fn on_conn_created(&mut self, conn: &mut Connection) {
        let mut app = self.0.borrow_mut();
        let qlog = app.qlog.take();
        let result = set_qlog(conn, qlog.as_deref(), "client");
        app.keep(result);
    }
    fn on_conn_established(&mut self, conn: &mut Connection) {
        let mut app = self.0.borrow_mut();
        let result = app.send_requests(conn);
        app.keep(result);
    }
    fn on_conn_closed(&mut self, conn: &mut Connection) {
        let mut app = self.0.borrow_mut();
        app.closed += 1;
        // A connection closed before its streams were verified fails the run.
        let Some(open) = app.open.remove(&index(conn)) else { return };
        let why = match open.app.is_established() {
            true => closed_reason(conn),
            false => format!(
                "the handshake failed (certificate not trusted, or server unreachable; {})",
                closed_reason(conn)
            ),
        };
        app.error.get_or_insert(TranslationError::Closed(format!("connection {}: {why}", open.app.index())));
    }
    fn on_stream_created(&mut self, _conn: &mut Connection, _stream_id: u64) {}
    fn on_stream_readable(&mut self, conn: &mut Connection, stream_id: u64) {
        let mut app = self.0.borrow_mut();
        let result = app.read_payload(conn, stream_id);
        app.keep(result);
    }
    fn on_stream_writable(&mut self, _conn: &mut Connection, _stream_id: u64) {}
    fn on_stream_closed(&mut self, _conn: &mut Connection, _stream_id: u64) {}
    fn on_new_token(&mut self, _conn: &mut Connection, _token: Vec<u8>) {}
}

impl ClientEndpoint for TquicEndpoint<ClientApp> {
    fn report(&self) -> Option<ClientResult> {
        self.app.borrow().run.report()
    }
    fn as_endpoint(&mut self) -> &mut dyn Endpoint {
        self
    }
}
