//! quiche (Cloudflare, BoringSSL) over the I/O layer. quiche has no I/O of its own: the
//! application routes datagrams to connections by connection ID (both sides keep a table, the
//! client routes by the IDs it chose), drives each connection's timers and sends what
//! `Connection::send` produces, honouring `SendInfo::at` (pacing). Connections are visited
//! starting one further along on every turn, and a connection's streams likewise, so none is
//! always served first. A server serves its expected number of connections; a client runs its
//! workload's connections, `parallel` at a time, each writing all its requests at once
//! (client-initiated bidirectional streams 0, 4, 8, ...).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Instant;

use nesquic_protocol::client::{ClientConnection, ClientRun};
use nesquic_protocol::options::CongestionControl;
use nesquic_protocol::report::ClientResult;
use nesquic_protocol::stream::{ClientStream, ProtocolError};

use crate::app::ServerStream;
use crate::batch::TxBatch;
use crate::driver::Endpoint;
use crate::fair::Rotation;
use crate::pem;
use crate::protocol::{ALPN, SERVER_NAME};
use crate::streams::{drain_stream, offer_payload, Read};
use crate::{random_bytes, ClientEndpoint, Stack, StackOptions, TranslationError};

/// Largest datagram quiche is allowed to send (loopback and veth carry it unfragmented; the
/// same ceiling quinn's MTU discovery uses by default).
const MAX_DATAGRAM: usize = 1452;
/// Flow-control windows large enough that a loopback transfer is never window-limited.
const STREAM_WINDOW: u64 = 16 << 20;
const CONNECTION_WINDOW: u64 = 32 << 20;
const IDLE_TIMEOUT_MS: u64 = 10_000;

fn err(context: &'static str) -> impl Fn(quiche::Error) -> TranslationError {
    move |source| TranslationError::Quiche { context, source }
}

/// quiche settings shared by both roles.
fn config(options: &StackOptions) -> Result<quiche::Config, TranslationError> {
    let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION).map_err(err("config"))?;
    c.set_application_protos(&[ALPN]).map_err(err("ALPN"))?;
    c.set_max_idle_timeout(IDLE_TIMEOUT_MS);
    c.set_max_recv_udp_payload_size(MAX_DATAGRAM);
    c.set_max_send_udp_payload_size(MAX_DATAGRAM);
    c.set_initial_max_data(CONNECTION_WINDOW);
    c.set_initial_max_stream_data_bidi_local(STREAM_WINDOW);
    c.set_initial_max_stream_data_bidi_remote(STREAM_WINDOW);
    // The client opens every stream of a connection at once (`--streams`).
    c.set_initial_max_streams_bidi(u64::from(options.max_streams).max(16));
    c.set_initial_max_streams_uni(16);
    c.set_max_connection_window(CONNECTION_WINDOW);
    c.set_max_stream_window(STREAM_WINDOW);
    c.set_disable_active_migration(true);
    c.enable_pacing(options.pacing);
    c.set_cc_algorithm(match options.cc {
        None | Some(CongestionControl::Cubic) => quiche::CongestionControlAlgorithm::CUBIC,
        Some(CongestionControl::NewReno) => quiche::CongestionControlAlgorithm::Reno,
        Some(CongestionControl::Bbr) => quiche::CongestionControlAlgorithm::Bbr2Gcongestion,
        Some(_) => return Err(TranslationError::Config("congestion control: quiche offers cubic, newreno or bbr")),
    });
    Ok(c)
}

/// Connections keyed by every connection ID that routes to them.
struct ConnTable<A> {
    entries: Vec<Option<(quiche::Connection, A)>>,
    ids: HashMap<Vec<u8>, usize>,
}

impl<A> ConnTable<A> {
    fn new() -> Self {
        Self { entries: Vec::new(), ids: HashMap::new() }
    }

    fn insert(&mut self, conn: quiche::Connection, app: A, ids: &[&[u8]]) -> usize {
        let index = self.entries.iter().position(Option::is_none).unwrap_or(self.entries.len());
        if index == self.entries.len() {
            self.entries.push(None);
        }
        self.entries[index] = Some((conn, app));
        for id in ids {
            self.ids.insert(id.to_vec(), index);
        }
        index
    }

    fn lookup(&self, id: &[u8]) -> Option<usize> {
        self.ids.get(id).copied()
    }

    fn get(&mut self, index: usize) -> Option<&mut (quiche::Connection, A)> {
        self.entries.get_mut(index).and_then(Option::as_mut)
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut (quiche::Connection, A)> {
        self.entries.iter_mut().flatten()
    }

    /// Slots (some empty), for visiting them in a [`Rotation`]'s order with [`ConnTable::get`].
    fn slots(&self) -> usize {
        self.entries.len()
    }

    /// Drops closed connections and their IDs; returns how many were removed.
    fn remove_closed(&mut self) -> usize {
        let mut removed = 0;
        for (index, slot) in self.entries.iter_mut().enumerate() {
            if slot.as_ref().is_some_and(|(c, _)| c.is_closed()) {
                *slot = None;
                self.ids.retain(|_, i| *i != index);
                removed += 1;
            }
        }
        removed
    }

    fn is_empty(&self) -> bool {
        self.entries.iter().all(Option::is_none)
    }
}

/// Writes one connection's datagrams into the batch; stops at a paced datagram.
fn fill_from(conn: &mut quiche::Connection, now: Instant, batch: &mut TxBatch) -> Result<(), TranslationError> {
    // A datagram already waits for its pacing time: the ones after it are due later still.
    if batch.next_release().is_some() {
        return Ok(());
    }
    while !batch.is_full() {
        let mut paced = false;
        let added = batch.push_with(now, MAX_DATAGRAM, |buf| match conn.send(buf) {
            Ok((len, info)) => {
                paced = info.at > now + crate::batch::PACING_GRANULARITY;
                Ok(Some((len, info.to, Some(info.at))))
            }
            Err(quiche::Error::Done) => Ok(None),
            Err(e) => Err(e),
        });
        match added {
            Ok(true) if !paced => {}
            Ok(_) => return Ok(()),
            Err(e) => {
                // The connection is broken; quiche queues a CONNECTION_CLOSE for the peer.
                let _ = conn.close(false, 0x1, b"send failed");
                return Err(TranslationError::Quiche { context: "send", source: e });
            }
        }
    }
    Ok(())
}

fn set_qlog(conn: &mut quiche::Connection, path: Option<&Path>, role: &str) -> Result<(), TranslationError> {
    // Without the feature the adapter said so already (every quiche release has qlog).
    #[cfg(feature = "qlog")]
    if let Some(path) = path {
        let file =
            std::fs::File::create(path).map_err(|source| TranslationError::File { path: path.into(), source })?;
        conn.set_qlog(Box::new(std::io::BufWriter::new(file)), format!("quiche {role}"), String::new());
    }
    #[cfg(not(feature = "qlog"))]
    let _ = (conn, path, role);
    Ok(())
}

/// quiche, for [`crate::serve`] and [`crate::download`].
#[derive(Debug)]
pub struct Quiche;

impl Stack for Quiche {
    const NAME: &'static str = "quiche";

    fn server(
        _io: &nesquic_io::UdpIo,
        cert: &Path,
        key: &Path,
        connections: u32,
        options: &StackOptions,
    ) -> Result<Box<dyn Endpoint>, TranslationError> {
        Ok(Box::new(QuicheServer::new(cert, key, connections, options)?))
    }

    fn client(
        _io: &nesquic_io::UdpIo,
        local: SocketAddr,
        server: SocketAddr,
        ca: &Path,
        run: ClientRun,
        options: &StackOptions,
    ) -> Result<Box<dyn ClientEndpoint>, TranslationError> {
        Ok(Box::new(QuicheClient::new(local, server, ca, run, options)?))
    }
}

/// A server connection's streams, each with its request and payload.
#[derive(Debug, Default)]
struct Served {
    streams: Vec<(u64, ServerStream)>,
    rotation: Rotation,
}

impl Served {
    /// The stream `id`, added when the client's first bytes on it arrive.
    fn stream(&mut self, id: u64) -> &mut ServerStream {
        let i = match self.streams.iter().position(|(s, _)| *s == id) {
            Some(i) => i,
            None => {
                self.streams.push((id, ServerStream::new()));
                self.streams.len() - 1
            }
        };
        &mut self.streams[i].1
    }
}

/// quiche serving the benchmark protocol on one socket: `expected` connections, then done.
pub struct QuicheServer {
    config: quiche::Config,
    conns: ConnTable<Served>,
    /// Version negotiation packets waiting to go out.
    responses: Vec<(SocketAddr, Vec<u8>)>,
    /// quiche writes one qlog per connection: the first connection's goes to this file.
    qlog: Option<std::path::PathBuf>,
    expected: u32,
    served: u32,
    rotation: Rotation,
    scratch: Vec<u8>,
    /// Datagrams that matched no connection and could not start one.
    pub unroutable: u64,
}

impl QuicheServer {
    /// A server for `connections` connections with the DER certificate and PKCS#8 key at `cert`
    /// and `key`.
    pub fn new(cert: &Path, key: &Path, connections: u32, options: &StackOptions) -> Result<Self, TranslationError> {
        let mut config = config(options)?;
        let (cert_pem, key_pem) = pem::der_files_to_pem(cert, key)?;
        config.load_cert_chain_from_pem_file(&cert_pem.path_str()?).map_err(err("load certificate"))?;
        config.load_priv_key_from_pem_file(&key_pem.path_str()?).map_err(err("load private key"))?;
        Ok(Self {
            config,
            conns: ConnTable::new(),
            responses: Vec::new(),
            qlog: options.qlog.clone(),
            expected: connections.max(1),
            served: 0,
            rotation: Rotation::default(),
            scratch: vec![0u8; 64 * 1024],
            unroutable: 0,
        })
    }
}

impl Endpoint for QuicheServer {
    fn handle_datagram(
        &mut self,
        _now: Instant,
        from: SocketAddr,
        local: SocketAddr,
        datagram: &mut [u8],
    ) -> Result<(), TranslationError> {
        let Ok(header) = quiche::Header::from_slice(datagram, quiche::MAX_CONN_ID_LEN) else {
            self.unroutable += 1;
            return Ok(());
        };
        let index = match self.conns.lookup(&header.dcid) {
            Some(i) => i,
            None if header.ty != quiche::Type::Initial => {
                self.unroutable += 1;
                return Ok(());
            }
            None if !quiche::version_is_supported(header.version) => {
                let mut out = vec![0u8; MAX_DATAGRAM];
                let len = quiche::negotiate_version(&header.scid, &header.dcid, &mut out)
                    .map_err(err("version negotiation"))?;
                out.truncate(len);
                self.responses.push((from, out));
                return Ok(());
            }
            None => {
                let mut scid = [0u8; quiche::MAX_CONN_ID_LEN];
                random_bytes(&mut scid);
                let scid = quiche::ConnectionId::from_ref(&scid);
                let mut conn = quiche::accept(&scid, None, local, from, &mut self.config).map_err(err("accept"))?;
                set_qlog(&mut conn, self.qlog.take().as_deref(), "server")?;
                self.conns.insert(conn, Served::default(), &[&scid, &header.dcid])
            }
        };
        if let Some((conn, _)) = self.conns.get(index) {
            // A datagram quiche rejects is dropped, as the network could have; the connection
            // decides whether it can go on.
            let _ = conn.recv(datagram, quiche::RecvInfo { from, to: local });
        }
        Ok(())
    }

    fn next_timeout(&mut self) -> Option<Instant> {
        self.conns.entries.iter().flatten().filter_map(|(c, _)| c.timeout_instant()).min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        for (conn, _) in self.conns.iter_mut() {
            if conn.timeout_instant().is_some_and(|t| t <= now) {
                conn.on_timeout();
            }
        }
    }

    fn drive_app(&mut self, _now: Instant) -> Result<(), TranslationError> {
        for (conn, served) in self.conns.iter_mut() {
            if !conn.is_established() && !conn.is_in_early_data() {
                continue;
            }
            for id in conn.readable() {
                let stream = served.stream(id);
                drain_stream(
                    &mut self.scratch,
                    |buf| recv(conn, id, buf, "read request"),
                    |data, fin| Ok(stream.on_request(data, fin)?),
                )?;
            }
            for i in served.rotation.order(served.streams.len()) {
                let (id, app) = &mut served.streams[i];
                send_payload(conn, *id, app)?;
            }
        }
        self.served += self.conns.remove_closed() as u32;
        Ok(())
    }

    fn fill_transmits(&mut self, now: Instant, batch: &mut TxBatch) -> Result<(), TranslationError> {
        for (to, packet) in self.responses.drain(..) {
            batch.push_owned(to, packet, None);
        }
        for index in self.rotation.order(self.conns.slots()) {
            if let Some((conn, _)) = self.conns.get(index) {
                if let Err(e) = fill_from(conn, now, batch) {
                    eprintln!("nesquic-translation: quiche server: {e}");
                }
            }
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.served >= self.expected && self.conns.is_empty()
    }
}

/// Offers stream `id` its payload until quiche's stream or connection window pushes back.
fn send_payload(conn: &mut quiche::Connection, id: u64, app: &mut ServerStream) -> Result<(), TranslationError> {
    offer_payload(app, |chunk, last| match conn.stream_send(id, chunk.as_slice(), last) {
        Ok(n) => Ok(Some(n)),
        Err(quiche::Error::Done) => Ok(None),
        Err(e) => Err(TranslationError::Quiche { context: "write payload", source: e }),
    })
}

/// One `stream_recv` as [`drain_stream`] wants it.
fn recv(
    conn: &mut quiche::Connection,
    id: u64,
    buf: &mut [u8],
    context: &'static str,
) -> Result<Read, TranslationError> {
    match conn.stream_recv(id, buf) {
        Ok(read) => Ok(Some(read)),
        Err(quiche::Error::Done) => Ok(None),
        Err(source) => Err(TranslationError::Quiche { context, source }),
    }
}

/// Why reading and verifying a client stream stopped.
enum ReadError {
    Quiche(quiche::Error),
    Payload(ProtocolError),
}

impl ReadError {
    fn into_translation(self, connection: u32, stream: usize) -> TranslationError {
        match self {
            ReadError::Quiche(source) => TranslationError::Quiche { context: "read payload", source },
            ReadError::Payload(error) => TranslationError::Payload { connection, stream, error },
        }
    }
}

/// Reads and verifies everything stream `id` has in order. quiche hands each contiguous piece of
/// its receive buffer to [`VerifyingSink`]'s `put_slice`, which checks it where it lies: no copy into
/// a scratch buffer and no second pass over that copy (`stream_recv` into 64 KiB did both).
#[cfg(quiche_0_27)]
fn verify_in_place(conn: &mut quiche::Connection, id: u64, stream: &mut ClientStream) -> Result<(), ReadError> {
    loop {
        let mut sink = VerifyingSink { stream: &mut *stream, error: None, spill: [0; SPILL] };
        let fin = match conn.stream_recv_buf(id, &mut sink) {
            Ok((_, fin)) => fin,
            Err(quiche::Error::Done) => return Ok(()),
            Err(e) => return Err(ReadError::Quiche(e)),
        };
        if let Some(error) = sink.error {
            return Err(ReadError::Payload(error));
        }
        if fin {
            return stream.on_payload(&[], true).map_err(ReadError::Payload);
        }
    }
}

/// Reads and verifies everything stream `id` has in order, through a scratch buffer: quiche
/// before 0.27 has no `stream_recv_buf` to hand its own buffer over.
#[cfg(not(quiche_0_27))]
fn verify_in_place(conn: &mut quiche::Connection, id: u64, stream: &mut ClientStream) -> Result<(), ReadError> {
    let mut buf = vec![0; 64 * 1024];
    loop {
        let (n, fin) = match conn.stream_recv(id, &mut buf) {
            Ok(read) => read,
            Err(quiche::Error::Done) => return Ok(()),
            Err(e) => return Err(ReadError::Quiche(e)),
        };
        // Invariant: quiche returns at most `buf.len()` bytes.
        stream.on_payload(&buf[..n], fin).map_err(ReadError::Payload)?;
        if fin {
            return Ok(());
        }
    }
}

/// Bytes of [`VerifyingSink`]'s spill buffer.
#[cfg(quiche_0_27)]
const SPILL: usize = 64;

/// A [`bytes::BufMut`] that verifies what is put into it instead of keeping it. quiche puts whole
/// slices (`put_slice`, checked in place); a writer going through `chunk_mut` instead gets a small
/// spill buffer, checked on `advance_mut`. The first error stops the checking and is kept.
#[cfg(quiche_0_27)]
struct VerifyingSink<'a> {
    stream: &'a mut ClientStream,
    error: Option<ProtocolError>,
    spill: [u8; SPILL],
}

#[cfg(quiche_0_27)]
impl VerifyingSink<'_> {
    fn check(&mut self, data: &[u8]) {
        if self.error.is_none() {
            self.error = self.stream.on_payload(data, false).err();
        }
    }
}

// SAFETY: `chunk_mut` hands out `spill`, whose bytes are always initialised, and `advance_mut`
// reads at most its length back; nothing is kept, so the capacity never runs out.
#[cfg(quiche_0_27)]
unsafe impl bytes::BufMut for VerifyingSink<'_> {
    fn remaining_mut(&self) -> usize {
        // Unbounded: quiche may hand over everything it holds in order in one call.
        isize::MAX as usize
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // `cnt` is at most what `chunk_mut` handed out (BufMut's contract); were it more, the
        // bytes past the spill would go unverified and the stream's length check would fail.
        let spill = self.spill;
        self.check(&spill[..cnt.min(SPILL)]);
    }

    fn chunk_mut(&mut self) -> &mut bytes::buf::UninitSlice {
        bytes::buf::UninitSlice::new(&mut self.spill)
    }

    fn put_slice(&mut self, src: &[u8]) {
        self.check(src);
    }
}

/// A client connection: the workload's view of it until every stream is verified.
struct Requested {
    app: Option<ClientConnection>,
    index: u32,
}

/// quiche running the client's workload: connections `parallel` at a time, every stream verified.
pub struct QuicheClient {
    config: quiche::Config,
    run: ClientRun,
    conns: ConnTable<Requested>,
    qlog: Option<std::path::PathBuf>,
    rotation: Rotation,
    server: SocketAddr,
    /// The concrete local address quiche's paths are created with (the socket may be bound to
    /// the unspecified address; quiche must see the same address on every datagram).
    local: SocketAddr,
}

/// Client-initiated bidirectional stream `i` (RFC 9000 2.1: 0, 4, 8, ...).
fn client_stream(i: usize) -> u64 {
    4 * i as u64
}

impl QuicheClient {
    /// Runs `run` from `local` against `server`, trusting only the DER certificate `ca`.
    pub fn new(
        local: SocketAddr,
        server: SocketAddr,
        ca: &Path,
        run: ClientRun,
        options: &StackOptions,
    ) -> Result<Self, TranslationError> {
        let mut config = config(options)?;
        let ca_pem = pem::der_file_to_pem(ca, "CERTIFICATE")?;
        config.load_verify_locations_from_file(&ca_pem.path_str()?).map_err(err("load trust anchor"))?;
        config.verify_peer(true);
        let mut this = Self {
            config,
            run,
            conns: ConnTable::new(),
            qlog: options.qlog.clone(),
            rotation: Rotation::default(),
            server,
            local,
        };
        this.start_connections()?;
        Ok(this)
    }

    /// Starts as many of the workload's connections as may run now.
    fn start_connections(&mut self) -> Result<(), TranslationError> {
        while let Some(app) = self.run.next_connection() {
            let mut scid = [0u8; quiche::MAX_CONN_ID_LEN];
            random_bytes(&mut scid);
            let id = quiche::ConnectionId::from_ref(&scid);
            let mut conn = quiche::connect(Some(SERVER_NAME), &id, self.local, self.server, &mut self.config)
                .map_err(err("connect"))?;
            set_qlog(&mut conn, self.qlog.take().as_deref(), "client")?;
            let index = app.index();
            // The server's packets carry the ID we chose as their destination.
            self.conns.insert(conn, Requested { app: Some(app), index }, &[&scid]);
        }
        Ok(())
    }
}

impl ClientEndpoint for QuicheClient {
    fn report(&self) -> Option<ClientResult> {
        self.run.report()
    }
    fn as_endpoint(&mut self) -> &mut dyn Endpoint {
        self
    }
}

impl Endpoint for QuicheClient {
    fn handle_datagram(
        &mut self,
        _now: Instant,
        from: SocketAddr,
        _local: SocketAddr,
        datagram: &mut [u8],
    ) -> Result<(), TranslationError> {
        let Ok(header) = quiche::Header::from_slice(datagram, quiche::MAX_CONN_ID_LEN) else { return Ok(()) };
        let Some(index) = self.conns.lookup(&header.dcid) else { return Ok(()) };
        if let Some((conn, _)) = self.conns.get(index) {
            let _ = conn.recv(datagram, quiche::RecvInfo { from, to: self.local });
        }
        Ok(())
    }

    fn next_timeout(&mut self) -> Option<Instant> {
        self.conns.entries.iter().flatten().filter_map(|(c, _)| c.timeout_instant()).min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        for (conn, _) in self.conns.iter_mut() {
            if conn.timeout_instant().is_some_and(|t| t <= now) {
                conn.on_timeout();
            }
        }
    }

    fn drive_app(&mut self, _now: Instant) -> Result<(), TranslationError> {
        for (conn, requested) in self.conns.iter_mut() {
            let Some(app) = requested.app.as_mut() else { continue };
            if conn.is_closed() {
                return Err(TranslationError::Closed(format!(
                    "connection {}: {}",
                    requested.index,
                    closed_reason(conn)
                )));
            }
            if !conn.is_established() {
                continue;
            }
            app.on_established();
            for (i, stream) in app.streams_mut().iter_mut().enumerate() {
                let id = client_stream(i);
                if let Some(request) = stream.request() {
                    conn.stream_send(id, &request, true).map_err(err("write request"))?;
                }
                if !stream.is_verified() && conn.stream_readable(id) {
                    let connection = requested.index;
                    verify_in_place(conn, id, stream).map_err(|error| error.into_translation(connection, i))?;
                }
            }
            if app.is_verified() {
                if let Some(app) = requested.app.take() {
                    self.run.finish(app).map_err(|e| TranslationError::Closed(e.to_string()))?;
                }
                let _ = conn.close(true, 0, b"done");
            }
        }
        self.conns.remove_closed();
        self.start_connections()
    }

    fn fill_transmits(&mut self, now: Instant, batch: &mut TxBatch) -> Result<(), TranslationError> {
        for index in self.rotation.order(self.conns.slots()) {
            if let Some((conn, _)) = self.conns.get(index) {
                fill_from(conn, now, batch)?;
            }
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.run.is_complete() && self.conns.is_empty()
    }

    fn progress(&self) -> u64 {
        let open: u64 =
            self.conns.entries.iter().flatten().filter_map(|(_, r)| r.app.as_ref()).map(|a| a.received()).sum();
        open + self.run.finished_bytes()
    }
}

fn closed_reason(conn: &quiche::Connection) -> String {
    if conn.is_timed_out() {
        return "idle timeout".into();
    }
    let describe = |who: &str, e: &quiche::ConnectionError| {
        format!("{who} closed it: error {:#x} {:?}", e.error_code, String::from_utf8_lossy(&e.reason))
    };
    match (conn.peer_error(), conn.local_error()) {
        (Some(e), _) => describe("peer", e),
        (None, Some(e)) => describe("we", e),
        (None, None) => "closed".into(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use bytes::BufMut;
    use nesquic_protocol::payload::{fill_pattern, VerifyError};

    use super::*;

    fn sink(stream: &mut ClientStream) -> VerifyingSink<'_> {
        VerifyingSink { stream, error: None, spill: [0; SPILL] }
    }

    /// What quiche puts, as whole slices or through `chunk_mut`, is checked at its stream offset;
    /// the first wrong byte is kept with its exact offset and later bytes do not replace it.
    #[test]
    fn the_verifying_sink_checks_slices_and_chunk_writes_at_their_stream_offsets() {
        let mut data = vec![0u8; 10_000];
        fill_pattern(0, &mut data);
        let mut stream = ClientStream::new(10_000);
        let mut s = sink(&mut stream);
        s.put_slice(&data[..1420]);
        // Through the spill buffer: 64 bytes written in place, then 10.
        s.chunk_mut().copy_from_slice(&data[1420..1484]);
        // SAFETY: the 64 bytes of the spill were just written.
        unsafe { s.advance_mut(64) };
        s.chunk_mut()[..10].copy_from_slice(&data[1484..1494]);
        // SAFETY: 10 bytes of the spill were just written.
        unsafe { s.advance_mut(10) };
        s.put_slice(&data[1494..5000]);
        assert!(s.error.is_none());
        let mut wrong = data[5000..7000].to_vec();
        wrong[1234] ^= 0x08;
        s.put_slice(&wrong);
        s.put_slice(&[0xff; 10]);
        assert!(matches!(s.error, Some(ProtocolError::Verify(VerifyError::Mismatch { offset: 6234 }))));
        assert_eq!(stream.received(), 5000, "nothing after the first wrong chunk counts as verified");

        // A wrong byte written through `chunk_mut` (put_bytes fills the spill 64 bytes at a time).
        let mut stream = ClientStream::new(10_000);
        let mut s = sink(&mut stream);
        s.put_slice(&data[..100]);
        s.put_bytes(data[100], 1);
        s.put_bytes(data[101] ^ 1, 70);
        assert!(matches!(s.error, Some(ProtocolError::Verify(VerifyError::Mismatch { offset: 101 }))));
    }
}
