//! tquic over the translation layer. tquic is callback-driven and does no I/O: datagrams go in
//! through `Endpoint::recv`, its timers through `on_timeout`, and `process_connections` runs the
//! connections, calling the [`TransportHandler`] (the benchmark protocol, [`ServerApp`] and
//! [`ClientApp`]) and handing finished packets to a [`PacketSendHandler`]. That sender writes
//! them straight into the translation layer's GSO batch (one copy, as tquic keeps its buffers),
//! accepting no more than the batch holds: tquic queues the rest for the next turn.
//! The client keeps the translation layer's [`ClientRun`] bookkeeping (one connection with one
//! stream: other shapes are refused on both sides) and reports its `done` result from it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use nesquic_lut_bins::protocol::payload::{ALPN, SERVER_NAME};
use nesquic_lut_bins::protocol::pem;
use nesquic_lut_bins::protocol::report::ClientResult;
use nesquic_lut_bins::protocol::stream::{PayloadChunk, ServerStream};
use nesquic_lut_bins::protocol::{ClientConnection, ClientRun};
use nesquic_lut_bins::translation::batch::TxBatch;
use nesquic_lut_bins::translation::{ClientEndpoint, Endpoint, Stack, StackOptions, TranslationError};
use tquic::{Connection, PacketInfo, PacketSendHandler, TlsConfig, TransportHandler};

/// Largest datagram tquic may send: the ceiling the quiche LUT uses (loopback and veth carry it).
const MAX_DATAGRAM: usize = 1452;
/// Flow-control windows as the quiche LUT sets them, so neither is window-limited on loopback.
const STREAM_WINDOW: u64 = 16 << 20;
const CONNECTION_WINDOW: u64 = 32 << 20;
const IDLE_TIMEOUT_MS: u64 = 10_000;

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
    c.set_congestion_control_algorithm(match options.cc.as_deref() {
        None | Some("cubic") => tquic::CongestionControlAlgorithm::Cubic,
        Some("bbr") => tquic::CongestionControlAlgorithm::Bbr,
        Some("bbr3") => tquic::CongestionControlAlgorithm::Bbr3,
        Some("copa") => tquic::CongestionControlAlgorithm::Copa,
        Some(_) => {
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

struct Sender(Rc<RefCell<Outbox>>);

impl PacketSendHandler for Sender {
    fn on_packets_send(&self, packets: &[(Vec<u8>, PacketInfo)]) -> tquic::Result<usize> {
        let mut outbox = self.0.borrow_mut();
        let now = outbox.now.unwrap_or_else(Instant::now);
        let Some(batch) = outbox.batch.as_mut() else { return Ok(0) };
        let mut accepted = 0;
        for (packet, info) in packets {
            if batch.is_full() {
                break;
            }
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
        Self { endpoint, local: None, last_turn: Instant::now(), outbox, app }
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
        // The application runs in tquic's callbacks, during process_connections.
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
        if connections > 1 {
            return Err(TranslationError::Config("tquic serves one connection with one stream only"));
        }
        // BoringSSL loads PEM files; they are only needed while loading.
        let (cert_pem, key_pem) = pem::der_files_to_pem(cert, key)?;
        let tls = TlsConfig::new_server_config(&cert_pem.path_str()?, &key_pem.path_str()?, vec![ALPN.to_vec()], false)
            .map_err(tquic_err("server TLS"))?;
        let app = ServerApp { qlog: options.qlog.clone(), ..ServerApp::default() };
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
        if !run.shape().is_single() {
            return Err(TranslationError::Config("tquic runs one connection with one stream only"));
        }
        let mut tls = TlsConfig::new_client_config(vec![ALPN.to_vec()], false).map_err(tquic_err("client TLS"))?;
        let ca_pem = pem::der_file_to_pem(ca, "CERTIFICATE")?;
        tls.set_ca_certs(&ca_pem.path_str()?).map_err(tquic_err("load trust anchor"))?;
        // Verify the chain against that anchor and the name against SERVER_NAME.
        tls.set_verify(true);
        let app = ClientApp {
            run,
            connection: None,
            qlog: options.qlog.clone(),
            closed: false,
            close_sent: false,
            scratch: Vec::new(),
            error: None,
        };
        let mut endpoint = TquicEndpoint::new(config(options, tls)?, false, app);
        endpoint.local = Some(local);
        // The connection's handshake clock starts right before tquic starts it.
        let connection = endpoint.app.borrow_mut().run.next_connection();
        endpoint.app.borrow_mut().connection = connection;
        endpoint
            .endpoint
            .connect(local, server, Some(SERVER_NAME), None, None, None)
            .map_err(|e| TranslationError::Connect(format!("{e:?}")))?;
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

/// The server's benchmark streams, per connection and stream.
#[derive(Default)]
pub struct ServerApp {
    streams: HashMap<(u64, u64), ServerStream>,
    qlog: Option<std::path::PathBuf>,
    closed: u32,
    scratch: Vec<u8>,
    error: Option<TranslationError>,
}

impl ServerApp {
    fn read_request(&mut self, conn: &mut Connection, id: u64) -> Result<(), TranslationError> {
        self.scratch.resize(64 * 1024, 0);
        let key = (conn.index().unwrap_or(0), id);
        loop {
            match conn.stream_read(id, &mut self.scratch) {
                Ok((n, fin)) => {
                    self.streams.entry(key).or_default().on_request(&self.scratch[..n], fin)?;
                    if fin {
                        break;
                    }
                }
                Err(tquic::Error::Done) => break,
                Err(e) => return Err(tquic_err("read request")(e)),
            }
        }
        self.write_payload(conn, id)
    }

    /// Offers tquic pattern slices (shared, no copy) until its stream buffer is full.
    fn write_payload(&mut self, conn: &mut Connection, id: u64) -> Result<(), TranslationError> {
        let Some(app) = self.streams.get_mut(&(conn.index().unwrap_or(0), id)) else { return Ok(()) };
        while let Some((chunk, last)) = app.pending_shared() {
            let len = chunk.as_slice().len();
            let bytes = match chunk {
                PayloadChunk::Shared(window) => Bytes::from_static(window),
                PayloadChunk::Owned(altered) => Bytes::from(altered),
            };
            match conn.stream_write(id, bytes, last) {
                Ok(n) => {
                    app.accepted(n, last && n == len);
                    if n < len {
                        break;
                    }
                }
                Err(tquic::Error::Done) => break,
                Err(e) => return Err(tquic_err("write payload")(e)),
            }
        }
        Ok(())
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
        self.closed > 0
    }
}

impl TransportHandler for Shared<ServerApp> {
    fn on_conn_created(&mut self, conn: &mut Connection) {
        let mut app = self.0.borrow_mut();
        let result = set_qlog(conn, app.qlog.as_deref(), "server");
        app.keep(result);
    }
    fn on_conn_established(&mut self, _conn: &mut Connection) {}
    fn on_conn_closed(&mut self, _conn: &mut Connection) {
        // Whether the client got every byte is the client's verdict; the server is done.
        self.0.borrow_mut().closed += 1;
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
        self.0.borrow_mut().streams.remove(&(conn.index().unwrap_or(0), stream_id));
    }
    fn on_new_token(&mut self, _conn: &mut Connection, _token: Vec<u8>) {}
}

/// The client's workload: one connection with one benchmark stream (the descriptor refuses
/// other shapes, and [`Tquic::client`] checks).
pub struct ClientApp {
    run: ClientRun,
    /// The open connection, until its stream is verified and it is handed back to `run`.
    connection: Option<ClientConnection>,
    qlog: Option<std::path::PathBuf>,
    closed: bool,
    close_sent: bool,
    scratch: Vec<u8>,
    error: Option<TranslationError>,
}

impl ClientApp {
    fn send_request(&mut self, conn: &mut Connection) -> Result<(), TranslationError> {
        let Some(connection) = self.connection.as_mut() else { return Ok(()) };
        connection.on_established();
        let Some(request) = connection.stream_mut(0).and_then(|s| s.request()) else { return Ok(()) };
        let id = conn.stream_bidi_new(0, false).map_err(tquic_err("open stream"))?;
        conn.stream_write(id, Bytes::copy_from_slice(&request), true).map_err(tquic_err("write request"))?;
        Ok(())
    }

    fn read_payload(&mut self, conn: &mut Connection, id: u64) -> Result<(), TranslationError> {
        let Some(connection) = self.connection.as_mut() else { return Ok(()) };
        let index = connection.index();
        let Some(stream) = connection.stream_mut(0) else { return Ok(()) };
        self.scratch.resize(64 * 1024, 0);
        loop {
            match conn.stream_read(id, &mut self.scratch) {
                Ok((n, fin)) => {
                    stream.on_payload(&self.scratch[..n], fin).map_err(|error| TranslationError::Payload {
                        connection: index,
                        stream: 0,
                        error,
                    })?;
                    if fin {
                        break;
                    }
                }
                Err(tquic::Error::Done) => break,
                Err(e) => return Err(tquic_err("read payload")(e)),
            }
        }
        if connection.is_verified() {
            if let Some(connection) = self.connection.take() {
                self.run.finish(connection).map_err(|e| TranslationError::Closed(e.to_string()))?;
            }
        }
        if self.run.is_complete() && !self.close_sent {
            self.close_sent = true;
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
        self.closed
    }
    fn progress(&self) -> u64 {
        self.connection.as_ref().map_or(0, ClientConnection::received) + self.run.finished_bytes()
    }
}

impl TransportHandler for Shared<ClientApp> {
    fn on_conn_created(&mut self, conn: &mut Connection) {
        let mut app = self.0.borrow_mut();
        let result = set_qlog(conn, app.qlog.as_deref(), "client");
        app.keep(result);
    }
    fn on_conn_established(&mut self, conn: &mut Connection) {
        let mut app = self.0.borrow_mut();
        let result = app.send_request(conn);
        app.keep(result);
    }
    fn on_conn_closed(&mut self, conn: &mut Connection) {
        let mut app = self.0.borrow_mut();
        app.closed = true;
        if !app.run.is_complete() {
            let established = app.connection.as_ref().is_some_and(ClientConnection::is_established);
            let why = match established {
                true => closed_reason(conn),
                false => format!(
                    "the handshake failed (certificate not trusted, or server unreachable; {})",
                    closed_reason(conn)
                ),
            };
            app.error.get_or_insert(TranslationError::Closed(why));
        }
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
