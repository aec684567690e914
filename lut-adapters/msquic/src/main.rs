//! `nesquic-lut-msquic`: MsQuic (the `msquic` crate's vendored sources with quictls, linked
//! statically) speaking the benchmark protocol on its own datapath (`--io native`). Started by
//! `nesquic run --lut msquic`; see docs/protocol.md.
//!
//! MsQuic is callback-driven: its worker threads call the listener, connection and stream
//! handlers below; the main thread waits on a channel for each connection's end. The server
//! serves `--connections` connections, every stream each opens; the client runs its workload
//! (`nesquic_protocol::client`): connections `--parallel` at a time, each opening its
//! `--streams` streams at once.

use std::collections::HashMap;
use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use msquic::{
    Addr, AllowedCipherSuiteFlags, BufferRef, CertificateFile, Configuration, Connection, ConnectionEvent,
    ConnectionRef, ConnectionShutdownFlags, Credential, CredentialConfig, ExecutionProfile, Listener, ListenerEvent,
    Registration, RegistrationConfig, SendFlags, Settings, Status, Stream, StreamEvent, StreamOpenFlags, StreamRef,
    StreamStartFlags,
};
use nesquic_protocol::cli::{IoMode, LutCli, LutCommand};
use nesquic_protocol::client::{ClientConnection, ClientRun, Workload};
use nesquic_protocol::options::{Choice, Cipher, CongestionControl, LutOpt, Profile};
use nesquic_protocol::payload::{ALPN, SERVER_NAME};
use nesquic_protocol::pem;
use nesquic_protocol::report::LutEvent;
use nesquic_protocol::stream::{PayloadChunk, ServerStream};

/// Payload sends in flight per stream: enough to keep MsQuic's send buffer full.
const SENDS_IN_FLIGHT: usize = 8;
const IDLE_TIMEOUT_MS: u64 = 10_000;
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

fn main() {
    let cli = LutCli::parse();
    if let Err(e) = run(cli.command) {
        eprintln!("nesquic-lut-msquic: {e:#}");
        std::process::exit(1);
    }
}

/// `--opt` settings: `profile=max-throughput|low-latency` (MsQuic's execution profile),
/// `cc=cubic|bbr` and `cipher=aes128gcm|aes256gcm|chacha20`.
struct Options {
    profile: ExecutionProfile,
    cc: u16,
    /// The only TLS 1.3 suite allowed (both sides set it, so the handshake must agree on it).
    cipher: Option<AllowedCipherSuiteFlags>,
}

impl Options {
    /// `config` with the cipher restriction applied.
    fn restrict(&self, config: CredentialConfig) -> CredentialConfig {
        match self.cipher {
            Some(c) => config.set_allowed_cipher_suites(c),
            None => config,
        }
    }
}

/// Reads the typed `--opt` settings (`nesquic-protocol` parses them); the last value of a key wins.
fn options(opts: &[LutOpt]) -> Result<Options> {
    use msquic::ffi::{
        QUIC_CONGESTION_CONTROL_ALGORITHM_QUIC_CONGESTION_CONTROL_ALGORITHM_BBR as BBR,
        QUIC_CONGESTION_CONTROL_ALGORITHM_QUIC_CONGESTION_CONTROL_ALGORITHM_CUBIC as CUBIC,
    };
    let mut o = Options { profile: ExecutionProfile::MaxThroughput, cc: 0, cipher: None };
    for &opt in opts {
        match opt {
            LutOpt::Profile(Profile::MaxThroughput) => o.profile = ExecutionProfile::MaxThroughput,
            LutOpt::Profile(Profile::LowLatency) => o.profile = ExecutionProfile::LowLatency,
            LutOpt::Cc(CongestionControl::Cubic) => o.cc = CUBIC as u16,
            LutOpt::Cc(CongestionControl::Bbr) => o.cc = BBR as u16,
            LutOpt::Cipher(Cipher::Aes128Gcm) => o.cipher = Some(AllowedCipherSuiteFlags::AES_128_GCM_SHA256),
            LutOpt::Cipher(Cipher::Aes256Gcm) => o.cipher = Some(AllowedCipherSuiteFlags::AES_256_GCM_SHA384),
            LutOpt::Cipher(Cipher::Chacha20) => o.cipher = Some(AllowedCipherSuiteFlags::CHACHA20_POLY1305_SHA256),
            other => bail!(
                "unknown option {other}; supported: profile={}, cc=cubic|bbr, cipher={}",
                Profile::names(),
                Cipher::names()
            ),
        }
    }
    Ok(o)
}

fn status(context: &'static str) -> impl Fn(Status) -> anyhow::Error {
    move |s| anyhow!("{context}: MsQuic status {s:?}")
}

fn run(command: LutCommand) -> Result<()> {
    let shape = command.workload();
    let options = options(&command.options().context("--opt")?)?;
    match command {
        LutCommand::Server { listen, cert, key, io, qlog, .. } => {
            native_only(io, qlog.is_some())?;
            server(listen, &cert, &key, shape, &options)
        }
        LutCommand::Client { connect, ca, io, qlog, .. } => {
            native_only(io, qlog.is_some())?;
            client(connect, &ca, shape, &options)
        }
    }
}

fn native_only(io: IoMode, qlog: bool) -> Result<()> {
    if io != IoMode::Native {
        bail!("--io {io}: msquic runs on its own datapath only (--io native)");
    }
    if qlog {
        bail!("--lut-qlog: MsQuic has no qlog output");
    }
    Ok(())
}

fn registration(profile: ExecutionProfile) -> Result<Registration> {
    let config = RegistrationConfig::new().set_app_name("nesquic".into()).set_execution_profile(profile);
    Registration::new(&config).map_err(status("open registration"))
}

/// `streams`: how many bidirectional streams the peer may open at once (the workload's
/// `--streams`, at most `nesquic_testcases::MAX_STREAMS` = 1000, which fits MsQuic's u16).
fn settings(o: &Options, streams: u32) -> Settings {
    let streams = u16::try_from(streams.max(1)).unwrap_or(u16::MAX);
    Settings::new()
        .set_PeerBidiStreamCount(streams)
        .set_IdleTimeoutMs(IDLE_TIMEOUT_MS)
        .set_CongestionControlAlgorithm(o.cc)
}

/// How a side's work ended, sent from MsQuic's threads to the main thread.
enum Outcome {
    Finished,
    Failed(String),
}

fn server(
    listen: SocketAddr,
    cert: &std::path::Path,
    key: &std::path::Path,
    shape: Workload,
    o: &Options,
) -> Result<()> {
    let registration = registration(o.profile.clone())?;
    let alpn = [BufferRef::from(ALPN)];
    let config = Configuration::open(&registration, &alpn, Some(&settings(o, shape.streams)))
        .map_err(status("open configuration"))?;
    // MsQuic's quictls backend loads PEM files; they are only needed while loading.
    let (cert_pem, key_pem) = pem::der_files_to_pem(cert, key)?;
    let credential = Credential::CertificateFile(CertificateFile::new(key_pem.path_str()?, cert_pem.path_str()?));
    config
        .load_credential(&o.restrict(CredentialConfig::new().set_credential(credential)))
        .map_err(status("load certificate"))?;
    drop((cert_pem, key_pem));
    let config = Arc::new(config);

    let (tx, rx) = channel::<Outcome>();
    let listener_config = config.clone();
    let listener = Listener::open(&registration, move |_, event| {
        if let ListenerEvent::NewConnection { connection, .. } = event {
            connection.set_callback_handler(server_connection(tx.clone()));
            let configured = connection.set_configuration(&listener_config);
            // The connection is closed once, in its ShutdownComplete (`server_connection`), or by
            // MsQuic itself when this callback fails. From MsQuic 2.6 the event hands an owned
            // `Connection` (whose drop would close it here, before the handshake: the client
            // then fails and the handshake's late events reach a freed callback), up to 2.5 a
            // `ConnectionRef`: either way nothing is dropped here.
            std::mem::forget(connection);
            configured?;
        }
        Ok(())
    })
    .map_err(status("open listener"))?;
    listener.start(&alpn, Some(&Addr::from(listen))).map_err(status("start listener"))?;
    let local = listener.get_local_addr().map_err(status("listener address"))?;
    let addr = local.as_socket().context("listener address is not IP")?;
    // MsQuic binds the unspecified address when asked for a port only; report what clients use.
    let addr = if addr.ip().is_unspecified() { SocketAddr::new(listen.ip(), addr.port()) } else { addr };
    LutEvent::Listening { addr }.emit();

    // Every connection reports its end once; streams report protocol errors.
    let mut served = 0;
    while served < shape.connections.max(1) {
        match rx.recv().context("MsQuic dropped the server's callbacks")? {
            Outcome::Finished => served += 1,
            Outcome::Failed(why) => bail!("after {served} connection(s) served: {why}"),
        }
    }
    listener.stop();
    Ok(())
}

/// The server's connection callback: accepts the benchmark stream, reports the end.
fn server_connection(tx: Sender<Outcome>) -> impl FnMut(ConnectionRef, ConnectionEvent) -> Result<(), Status> {
    move |connection, event| {
        match event {
            ConnectionEvent::PeerStreamStarted { stream, .. } => {
                stream.set_callback_handler(server_stream(tx.clone()));
            }
            ConnectionEvent::ShutdownComplete { handshake_completed, .. } => {
                let _ = tx.send(if handshake_completed {
                    Outcome::Finished
                } else {
                    Outcome::Failed("the connection closed before the handshake completed".into())
                });
                // SAFETY: MsQuic hands ownership of a server connection to the application; it
                // is closed exactly once, here, after its last event.
                drop(unsafe { Connection::from_raw(connection.as_raw()) });
            }
            _ => {}
        }
        Ok(())
    }
}

/// One payload send: the bytes (a `'static` slice of the pattern block, or owned) and the buffer
/// descriptor MsQuic reads them through, kept alive until its `SendComplete`.
type SendContext = (PayloadChunk, [BufferRef; 1]);

/// Sends `bytes`, kept alive in a boxed [`SendContext`] that the `SendComplete` handler frees.
/// MsQuic reads the application's buffers in place, so a pattern slice is sent without a copy.
fn send_owned(stream: &Stream, bytes: PayloadChunk, flags: SendFlags) -> Result<(), Status> {
    let mut ctx: Box<SendContext> = Box::new((bytes, [BufferRef::from(&[][..])]));
    ctx.1[0] = BufferRef::from(ctx.0.as_slice());
    let raw = Box::into_raw(ctx);
    // SAFETY: the buffer lives in the boxed context until SendComplete hands it back.
    if let Err(e) = unsafe { stream.send(&(*raw).1, flags, raw as *const c_void) } {
        // SAFETY: MsQuic refused the send, so it will not report it: take the box back.
        drop(unsafe { Box::from_raw(raw) });
        return Err(e);
    }
    Ok(())
}

/// Queues payload sends until `SENDS_IN_FLIGHT` are outstanding or the payload is all queued.
fn send_more(stream: &StreamRef, app: &mut ServerStream, in_flight: &mut usize) -> Result<(), Status> {
    while *in_flight < SENDS_IN_FLIGHT {
        let Some((data, last)) = app.pending_shared() else { break };
        let len = data.as_slice().len();
        send_owned(stream, data, if last { SendFlags::FIN } else { SendFlags::NONE })?;
        app.accepted(len, last);
        *in_flight += 1;
    }
    Ok(())
}

fn server_stream(tx: Sender<Outcome>) -> impl FnMut(StreamRef, StreamEvent) -> Result<(), Status> {
    let mut app = ServerStream::new();
    let mut in_flight = 0usize;
    move |stream, event| {
        match event {
            StreamEvent::Receive { buffers, .. } => {
                for b in buffers {
                    if let Err(e) = app.on_request(b.as_bytes(), false) {
                        let _ = tx.send(Outcome::Failed(e.to_string()));
                    }
                }
            }
            StreamEvent::PeerSendShutdown => match app.on_request(&[], true) {
                Ok(()) => send_more(&stream, &mut app, &mut in_flight)?,
                Err(e) => {
                    let _ = tx.send(Outcome::Failed(e.to_string()));
                }
            },
            StreamEvent::SendComplete { client_context, .. } => {
                // SAFETY: every send's context is a Box<SendContext> leaked in send_more.
                drop(unsafe { Box::from_raw(client_context as *mut SendContext) });
                in_flight -= 1;
                send_more(&stream, &mut app, &mut in_flight)?;
            }
            StreamEvent::ShutdownComplete { .. } => {
                // SAFETY: the application owns peer-started streams; closed once, after the
                // last event.
                drop(unsafe { Stream::from_raw(stream.as_raw()) });
            }
            _ => {}
        }
        Ok(())
    }
}

/// One client connection's state, shared by its connection and stream callbacks.
struct ClientState {
    /// The workload's view of the connection until every stream is verified.
    app: Option<ClientConnection>,
    index: u32,
    tx: Sender<ClientSignal>,
}

/// What a client connection's callbacks tell the main thread, by connection index.
enum ClientSignal {
    Verified(u32),
    Closed { index: u32, handshake_completed: bool },
    Failed(u32, String),
}

/// A started client connection: MsQuic's handle (closed when dropped) and its state.
type Open = (Connection, Arc<Mutex<ClientState>>);

fn client(connect: SocketAddr, ca: &std::path::Path, shape: Workload, o: &Options) -> Result<()> {
    let registration = registration(o.profile.clone())?;
    let alpn = [BufferRef::from(ALPN)];
    let config = Configuration::open(&registration, &alpn, Some(&settings(o, shape.streams)))
        .map_err(status("open configuration"))?;
    let ca_pem = pem::der_file_to_pem(ca, "CERTIFICATE")?;
    // Default validation (no NO_CERTIFICATE_VALIDATION flag) against exactly this trust anchor.
    let credential = o.restrict(CredentialConfig::new_client().set_ca_certificate_file(ca_pem.path_str()?));
    config.load_credential(&credential).map_err(status("load trust anchor"))?;
    drop(ca_pem);

    let (tx, rx) = channel::<ClientSignal>();
    let mut run = ClientRun::new(shape);
    let mut open: HashMap<u32, Open> = HashMap::new();
    let mut last_progress = Instant::now();
    loop {
        while let Some(app) = run.next_connection() {
            let index = app.index();
            let started = start_connection(&registration, &config, connect, app, tx.clone())
                .with_context(|| format!("connection {index}"))?;
            open.insert(index, started);
        }
        if run.is_complete() && open.is_empty() {
            break;
        }
        if last_progress.elapsed() >= PROGRESS_EVERY {
            LutEvent::Progress { bytes: verified_bytes(&run, &open) }.emit();
            last_progress = Instant::now();
        }
        let signal = match rx.recv_timeout(PROGRESS_EVERY.saturating_sub(last_progress.elapsed())) {
            Ok(signal) => signal,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => bail!("MsQuic dropped the client's callbacks"),
        };
        match signal {
            ClientSignal::Verified(index) => {
                let Some((connection, state)) = open.get(&index) else { continue };
                let app = state.lock().map_err(|_| anyhow!("connection {index}: state poisoned"))?.app.take();
                if let Some(app) = app {
                    run.finish(app)?;
                    connection.shutdown(ConnectionShutdownFlags::NONE, 0);
                }
            }
            ClientSignal::Closed { index, handshake_completed } => {
                let Some((connection, state)) = open.remove(&index) else { continue };
                let unverified = state.lock().map_err(|_| anyhow!("connection {index}: state poisoned"))?.app.is_some();
                if unverified {
                    bail!(
                        "connection {index}: {}",
                        if handshake_completed {
                            "the connection closed before the payload was verified"
                        } else {
                            "the handshake failed (certificate not trusted or server unreachable)"
                        }
                    );
                }
                // After ShutdownComplete MsQuic calls no more handlers: closing the handle is safe.
                drop(connection);
            }
            ClientSignal::Failed(index, why) => {
                if let Some((connection, _)) = open.get(&index) {
                    connection.shutdown(ConnectionShutdownFlags::NONE, 1);
                }
                bail!("connection {index}: {why}");
            }
        }
    }
    LutEvent::Progress { bytes: verified_bytes(&run, &open) }.emit();
    let done = run.report().context("payload not verified")?;
    LutEvent::Done(done).emit();
    Ok(())
}

/// Bytes verified on finished and open connections.
fn verified_bytes(run: &ClientRun, open: &HashMap<u32, Open>) -> u64 {
    let open: u64 = open
        .values()
        .filter_map(|(_, state)| state.lock().ok().and_then(|s| s.app.as_ref().map(ClientConnection::received)))
        .sum();
    run.finished_bytes() + open
}

/// Opens and starts one connection of the workload.
fn start_connection(
    registration: &Registration,
    config: &Configuration,
    connect: SocketAddr,
    app: ClientConnection,
    tx: Sender<ClientSignal>,
) -> Result<Open> {
    let state = Arc::new(Mutex::new(ClientState { index: app.index(), app: Some(app), tx }));
    let conn_state = state.clone();
    let connection = Connection::open(registration, move |connection, event| {
        client_connection_event(&conn_state, connection, event)
    })
    .map_err(status("open connection"))?;
    // Connect to the exact address (a name lookup of "localhost" might prefer ::1) while the
    // TLS server name stays "localhost".
    let remote = Addr::from(connect);
    // SAFETY: passes a live Addr of the size MsQuic expects for QUIC_PARAM_CONN_REMOTE_ADDRESS.
    unsafe {
        msquic::Api::set_param(
            connection.as_raw(),
            msquic::ffi::QUIC_PARAM_CONN_REMOTE_ADDRESS,
            std::mem::size_of::<Addr>() as u32,
            &remote as *const Addr as *const c_void,
        )
    }
    .map_err(status("set remote address"))?;
    connection.start(config, SERVER_NAME, connect.port()).map_err(status("start connection"))?;
    Ok((connection, state))
}

fn client_connection_event(
    state: &Arc<Mutex<ClientState>>,
    connection: ConnectionRef,
    event: ConnectionEvent,
) -> Result<(), Status> {
    match event {
        ConnectionEvent::Connected { .. } => {
            // Every stream's request, written while holding the lock (callbacks for these
            // streams run on this worker thread after this handler returns).
            let requests: Vec<_> = {
                let Ok(mut s) = state.lock() else { return Ok(()) };
                let Some(app) = s.app.as_mut() else { return Ok(()) };
                app.on_established();
                app.streams_mut().iter_mut().map(|stream| stream.request()).collect()
            };
            for (i, request) in requests.into_iter().enumerate() {
                let Some(request) = request else { continue };
                let stream_state = state.clone();
                let stream = Stream::open(&connection, StreamOpenFlags::NONE, move |stream, event| {
                    client_stream_event(&stream_state, i, stream, event)
                })?;
                stream.start(StreamStartFlags::NONE)?;
                send_owned(&stream, PayloadChunk::Owned(request.to_vec()), SendFlags::FIN)?;
                // The stream closes itself in its ShutdownComplete handler.
                std::mem::forget(stream);
            }
        }
        ConnectionEvent::ShutdownComplete { handshake_completed, .. } => {
            if let Ok(s) = state.lock() {
                let _ = s.tx.send(ClientSignal::Closed { index: s.index, handshake_completed });
            }
        }
        _ => {}
    }
    Ok(())
}

/// Stream `i` of a client connection: verifies its payload; says when the connection's last
/// stream was verified.
fn client_stream_event(
    state: &Arc<Mutex<ClientState>>,
    i: usize,
    stream: StreamRef,
    event: StreamEvent,
) -> Result<(), Status> {
    let Ok(mut s) = state.lock() else { return Ok(()) };
    let ClientState { app, index, tx } = &mut *s;
    match event {
        StreamEvent::Receive { buffers, .. } => {
            if let Some(verifier) = app.as_mut().and_then(|a| a.stream_mut(i)) {
                for b in buffers {
                    if let Err(e) = verifier.on_payload(b.as_bytes(), false) {
                        let _ = tx.send(ClientSignal::Failed(*index, format!("stream {i}: payload: {e}")));
                    }
                }
            }
        }
        StreamEvent::PeerSendShutdown => {
            if let Some(app) = app.as_mut() {
                match app.stream_mut(i).map(|v| v.on_payload(&[], true)) {
                    Some(Err(e)) => {
                        let _ = tx.send(ClientSignal::Failed(*index, format!("stream {i}: payload: {e}")));
                    }
                    _ if app.is_verified() => {
                        let _ = tx.send(ClientSignal::Verified(*index));
                    }
                    _ => {}
                }
            }
        }
        StreamEvent::SendComplete { client_context, .. } => {
            // SAFETY: the request's context is the Box<SendContext> leaked on Connected.
            drop(unsafe { Box::from_raw(client_context as *mut SendContext) });
        }
        StreamEvent::ShutdownComplete { .. } => {
            // SAFETY: the stream was leaked with mem::forget on Connected; closed once here.
            drop(unsafe { Stream::from_raw(stream.as_raw()) });
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(texts: &[&str]) -> Result<Options> {
        options(&LutOpt::parse_all(&texts.iter().map(|t| t.to_string()).collect::<Vec<_>>())?)
    }

    #[test]
    fn options_are_read_typed_and_the_others_refused() {
        let o = parse(&["profile=low-latency", "cc=bbr", "cipher=aes256gcm"]).unwrap();
        assert!(matches!(o.profile, ExecutionProfile::LowLatency));
        assert_eq!(o.cc, msquic::ffi::QUIC_CONGESTION_CONTROL_ALGORITHM_QUIC_CONGESTION_CONTROL_ALGORITHM_BBR as u16);
        assert_eq!(o.cipher, Some(AllowedCipherSuiteFlags::AES_256_GCM_SHA384));
        for (bad, why) in [
            ("cc=newreno", "unknown option cc=newreno"),
            ("gso=on", "supported"),
            ("profile=x", "max-throughput|low-latency"),
        ] {
            let err = format!("{:#}", parse(&[bad]).err().unwrap());
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
