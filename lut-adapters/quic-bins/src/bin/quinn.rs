//! `nesquic-lut-quinn`: quinn 0.11 or 0.12 (rustls + ring, quinn-udp I/O) speaking the benchmark
//! protocol. Started by `nesquic run`; see docs/protocol.md. What differs by quinn version is
//! chosen by build.rs (`cfg(quinn_0_12)`) from the version `--lut-path` builds against.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use nesquic_lut_bins::protocol::options::{Choice, Cipher, CongestionControl, LutOpt};
use nesquic_lut_bins::protocol::payload::{self as protocol, Verifier, REQUEST_LEN, SERVER_NAME};
use nesquic_lut_bins::protocol::report::{
    ClientResult, ConnectionResult, IoSettings, LutEvent, StreamResult, Transport,
};
use nesquic_lut_bins::protocol::stream::{PayloadChunk, CORRUPT_ENV};
use nesquic_lut_bins::protocol::{IoMode, LutCli, LutCommand};
use nesquic_lut_bins::translation::quinn_shim;
use nesquic_lut_bins::Workload;

/// Test hook: make the server abort after N payload bytes (CORRUPT_ENV, shared with the
/// translation layer's servers, flips the payload byte at offset N).
const FAULT_ENV: &str = "NESQUIC_FAULT_SERVER_ABORT_AFTER_BYTES";
const CHUNK: usize = 64 * 1024;
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

fn main() {
    let cli = LutCli::parse();
    if cli.command.io() != IoMode::Native {
        // quinn's protocol logic (quinn-proto) unchanged, quinn-udp swapped for Nesquic's I/O.
        if let Err(e) =
            nesquic_lut_bins::translated::run::<nesquic_lut_bins::translation::quinn_shim::QuinnProtoStack>(cli.command)
        {
            eprintln!("nesquic-lut-quinn: {e:#}");
            std::process::exit(1);
        }
        return;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nesquic-lut-quinn: cannot start tokio: {e}");
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(async {
        let opts = Options::parse(&cli.command.options().context("--opt")?)?;
        match cli.command {
            LutCommand::Server { listen, ref cert, ref key, ref qlog, .. } => {
                let socket = bind(listen, &opts)?;
                let transport = transport(qlog.as_deref(), "server", &opts)?;
                server(socket, cert, key, opts.cipher, transport, cli.command.workload()).await
            }
            LutCommand::Client { connect, ref ca, ref qlog, .. } => {
                let any: std::net::SocketAddr = if connect.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse()?;
                let socket = bind(any, &opts)?;
                let transport = transport(qlog.as_deref(), "client", &opts)?;
                client(socket, connect, ca, opts.cipher, cli.command.workload(), transport).await
            }
        }
    });
    if let Err(e) = result {
        eprintln!("nesquic-lut-quinn: {e:#}");
        std::process::exit(1);
    }
}

/// The `--opt` settings quinn over quinn-udp understands, parsed once; the last value of a key wins.
#[derive(Debug, Clone, Copy, Default)]
struct Options {
    /// UDP segmentation offload; `None`: quinn's default.
    gso: Option<bool>,
    /// The congestion controller; `None`: quinn's default (CUBIC).
    cc: Option<CongestionControl>,
    /// SO_RCVBUF to request.
    rcvbuf: Option<usize>,
    /// SO_SNDBUF to request.
    sndbuf: Option<usize>,
    /// The only TLS 1.3 cipher suite offered.
    cipher: Option<Cipher>,
}

impl Options {
    fn parse(opts: &[LutOpt]) -> Result<Self> {
        let mut o = Options::default();
        for &opt in opts {
            let bytes = |n: u64| usize::try_from(n).with_context(|| format!("{opt}: too large"));
            match opt {
                LutOpt::Gso(on) => o.gso = Some(on),
                LutOpt::Cc(cc @ (CongestionControl::Cubic | CongestionControl::NewReno | CongestionControl::Bbr)) => {
                    o.cc = Some(cc)
                }
                LutOpt::RcvBuf(n) => o.rcvbuf = Some(bytes(n)?),
                LutOpt::SndBuf(n) => o.sndbuf = Some(bytes(n)?),
                LutOpt::Cipher(c) => o.cipher = Some(c),
                other => bail!(
                    "unknown option {other}; supported: gso=on|off, cc=cubic|newreno|bbr, rcvbuf=BYTES, sndbuf=BYTES, cipher={}",
                    Cipher::names()
                ),
            }
        }
        Ok(o)
    }
}

/// quinn's default transport with the `--opt` settings, plus its own qlog when asked (reported to
/// nesquic with the wall clock of the qlog's time zero).
fn transport(qlog: Option<&std::path::Path>, role: &str, opts: &Options) -> Result<quinn::TransportConfig> {
    let mut transport = quinn::TransportConfig::default();
    if let Some(on) = opts.gso {
        transport.enable_segmentation_offload(on);
    }
    match opts.cc {
        Some(CongestionControl::Cubic) => {
            transport.congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default()));
        }
        Some(CongestionControl::NewReno) => {
            transport.congestion_controller_factory(Arc::new(quinn::congestion::NewRenoConfig::default()));
        }
        Some(CongestionControl::Bbr) => {
            transport.congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default()));
        }
        // `Options::parse` refuses the others.
        Some(other) => bail!("cc={}: quinn offers cubic, newreno, bbr", other.name()),
        None => {}
    }
    #[cfg(not(feature = "qlog"))]
    if qlog.is_some() {
        // A release without a qlog API (quinn before 0.11.9): the run goes on without it.
        eprintln!("nesquic-lut-quinn: built without qlog (this quinn release has none): no quinn qlog for the {role}");
    }
    #[cfg(feature = "qlog")]
    if let Some(path) = qlog {
        let file = std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
        let (start, wall) = (Instant::now(), std::time::SystemTime::now());
        let mut config = quinn::QlogConfig::default();
        config.writer(Box::new(std::io::BufWriter::new(file))).title(Some(format!("quinn {role}"))).start_time(start);
        transport.qlog_stream(config.into_stream());
        let start_unix_ns = wall.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        LutEvent::Qlog { path: path.to_path_buf(), start_unix_ns }.emit();
    }
    Ok(transport)
}

/// The I/O code quinn runs on (quinn 0.12 moved to quinn-udp 0.6).
#[cfg(quinn_0_12)]
const QUINN_UDP: &str = "quinn-udp 0.6 (its own GSO/GRO path)";
#[cfg(not(quinn_0_12))]
const QUINN_UDP: &str = "quinn-udp 0.5 (its own GSO/GRO path)";

/// Binds the UDP socket quinn will use, applies `rcvbuf=`/`sndbuf=` options, and reports how
/// quinn-udp and the kernel configured it.
fn bind(addr: std::net::SocketAddr, opts: &Options) -> Result<std::net::UdpSocket> {
    let socket = std::net::UdpSocket::bind(addr).with_context(|| format!("bind {addr}"))?;
    let granted = nesquic_lut_bins::io::set_socket_buffers(&socket, opts.rcvbuf, opts.sndbuf)?;
    // The same probe quinn runs on this socket when it wraps it (sets the same options).
    let state = quinn::udp::UdpSocketState::new((&socket).into()).context("probe UDP socket capabilities")?;
    LutEvent::Io(IoSettings {
        stack: QUINN_UDP.into(),
        transport: Transport::Udp,
        blocking: false,
        gso_max_segments: state.max_gso_segments() as u64,
        gro_segments: state.gro_segments() as u64,
        // quinn-udp on Linux: one sendmsg per transmit, recvmmsg for receives.
        send_mmsg: false,
        recv_mmsg: true,
        recv_buffer: granted.recv as u64,
        send_buffer: granted.send as u64,
        congestion_control: None,
    })
    .emit();
    Ok(socket)
}

async fn server(
    socket: std::net::UdpSocket,
    cert: &std::path::Path,
    key: &std::path::Path,
    cipher: Option<Cipher>,
    mut transport: quinn::TransportConfig,
    workload: Workload,
) -> Result<()> {
    let crypto = quinn_shim::server_tls(cert, key, cipher).context("server TLS")?;
    // quinn allows 100 concurrent streams by default; a multi-stream testcase may want more.
    if workload.streams > 100 {
        transport.max_concurrent_bidi_streams(workload.streams.into());
    }
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    let runtime = Arc::new(quinn::TokioRuntime);
    let endpoint = quinn::Endpoint::new(quinn::EndpointConfig::default(), Some(config), socket, runtime)?;
    LutEvent::Listening { addr: endpoint.local_addr()? }.emit();

    let faults = Faults {
        abort_after: std::env::var(FAULT_ENV).ok().and_then(|v| v.parse().ok()),
        corrupt_at: std::env::var(CORRUPT_ENV).ok().and_then(|v| v.parse().ok()),
    };
    let mut connections = tokio::task::JoinSet::new();
    for index in 0..workload.connections {
        let incoming = endpoint.accept().await.context("endpoint closed before every connection arrived")?;
        let streams = workload.streams;
        connections.spawn(async move {
            serve_connection(incoming, faults, streams).await.with_context(|| format!("connection {index}"))
        });
        // A failed connection ends the run now, not after the rest were accepted.
        while let Some(done) = connections.try_join_next() {
            done??;
        }
    }
    while let Some(done) = connections.join_next().await {
        done??;
    }
    endpoint.wait_idle().await;
    Ok(())
}

/// Test hooks (see FAULT_ENV, CORRUPT_ENV), applied to every stream.
#[derive(Debug, Clone, Copy)]
struct Faults {
    abort_after: Option<u64>,
    corrupt_at: Option<u64>,
}

/// How long the server waits for the client's CONNECTION_CLOSE once every stream was served and
/// acknowledged. On a lossy link that close can be lost; the server then ends on this local
/// timer, well inside nesquic's grace for a finished client (10 s). It is not the transport's idle
/// timeout: that one is negotiated and would also cut the client short on a slow, lossy path.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// Serves the `expected` streams the client opens, then waits for its close (code 0 = done), or
/// at most CLOSE_GRACE. Whether the client got every byte is the client's verdict, not the
/// server's: once every stream's data was acknowledged, how the connection ends is not an error.
async fn serve_connection(incoming: quinn::Incoming, faults: Faults, expected: u32) -> Result<()> {
    let conn = incoming.await.context("handshake")?;
    let mut streams = tokio::task::JoinSet::new();
    let mut opened = 0u32;
    while opened < expected {
        match conn.accept_bi().await {
            Ok((send, recv)) => {
                opened += 1;
                drop(streams.spawn(serve_stream(send, recv, faults)));
            }
            Err(quinn::ConnectionError::ApplicationClosed(close)) if close.error_code == 0u32.into() => break,
            Err(e) => return Err(e).context(format!("accept stream ({opened} of {expected} streams opened)")),
        }
    }
    while let Some(done) = streams.join_next().await {
        done??;
    }
    if tokio::time::timeout(CLOSE_GRACE, conn.closed()).await.is_err() {
        conn.close(0u32.into(), b"served");
    }
    Ok(())
}

async fn serve_stream(mut send: quinn::SendStream, mut recv: quinn::RecvStream, faults: Faults) -> Result<()> {
    let request = recv.read_to_end(REQUEST_LEN).await.context("read request")?;
    let size = protocol::decode_request(&request).context("request is not 8 bytes")?;
    let mut offset = 0u64;
    while offset < size {
        let n = (size - offset).min(CHUNK as u64) as usize;
        // A slice of the pattern block: quinn keeps `Bytes` without copying them.
        let (n, chunk) = match PayloadChunk::at(offset, n, faults.corrupt_at) {
            PayloadChunk::Shared(window) => (window.len(), nesquic_lut_bins::bytes::Bytes::from_static(window)),
            PayloadChunk::Owned(altered) => (altered.len(), nesquic_lut_bins::bytes::Bytes::from(altered)),
        };
        send.write_chunk(chunk).await.context("write payload")?;
        offset += n as u64;
        if faults.abort_after.is_some_and(|limit| offset >= limit) {
            eprintln!("nesquic-lut-quinn: {FAULT_ENV} reached, aborting");
            std::process::abort();
        }
    }
    send.finish().context("finish stream")?;
    // The client closes the connection once it has verified everything; until then the
    // stream's data must stay deliverable.
    let _ = send.stopped().await;
    Ok(())
}

async fn client(
    socket: std::net::UdpSocket,
    connect: std::net::SocketAddr,
    ca: &std::path::Path,
    cipher: Option<Cipher>,
    workload: Workload,
    transport: quinn::TransportConfig,
) -> Result<()> {
    let crypto = quinn_shim::client_tls(ca, cipher).context("client TLS (trust anchor)")?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    let endpoint = quinn::Endpoint::new(quinn::EndpointConfig::default(), None, socket, Arc::new(quinn::TokioRuntime))?;

    let verified = Arc::new(AtomicU64::new(0));
    let reporter = tokio::spawn({
        let verified = verified.clone();
        async move {
            let mut tick = tokio::time::interval(PROGRESS_EVERY);
            tick.tick().await;
            loop {
                tick.tick().await;
                LutEvent::Progress { bytes: verified.load(Ordering::Relaxed) }.emit();
            }
        }
    });
    let first = Instant::now();
    let slots = Arc::new(tokio::sync::Semaphore::new(workload.parallel as usize));
    let mut running = tokio::task::JoinSet::new();
    let mut results = Vec::with_capacity(workload.connections as usize);
    for index in 0..workload.connections {
        // Invariant: the semaphore is never closed.
        let slot = slots.clone().acquire_owned().await.context("connection slots")?;
        let (endpoint, config, verified) = (endpoint.clone(), config.clone(), verified.clone());
        running.spawn(async move {
            let result = one_connection(&endpoint, config, connect, workload, first, &verified).await;
            drop(slot);
            result.map(|r| (index, r)).with_context(|| format!("connection {index}"))
        });
        while let Some(done) = running.try_join_next() {
            results.push(done??);
        }
    }
    while let Some(done) = running.join_next().await {
        results.push(done??);
    }
    let elapsed = first.elapsed();
    reporter.abort();
    endpoint.wait_idle().await;
    results.sort_by_key(|(index, _)| *index);
    let connections: Vec<ConnectionResult> = results.into_iter().map(|(_, r)| r).collect();
    let done = ClientResult::of_run(workload.is_single(), connections, elapsed.as_nanos() as u64)
        .context("a one-connection workload ran more than one connection")?;
    LutEvent::Done(done).emit();
    Ok(())
}

/// One connection: handshake, `workload.streams` concurrent requests, each payload verified,
/// then a close with code 0.
async fn one_connection(
    endpoint: &quinn::Endpoint,
    config: quinn::ClientConfig,
    connect: std::net::SocketAddr,
    workload: Workload,
    first: Instant,
    verified: &Arc<AtomicU64>,
) -> Result<ConnectionResult> {
    let start = Instant::now();
    let conn = endpoint.connect_with(config, connect, SERVER_NAME)?.await.context("handshake")?;
    let handshake = start.elapsed();
    let requests_start = Instant::now();
    let mut streams = tokio::task::JoinSet::new();
    for index in 0..workload.streams {
        let (conn, verified) = (conn.clone(), verified.clone());
        streams.spawn(async move {
            let result = one_stream(&conn, workload.size, &verified).await;
            result.map(|r| (index, r)).with_context(|| format!("stream {index}"))
        });
    }
    let mut results = Vec::with_capacity(workload.streams as usize);
    while let Some(done) = streams.join_next().await {
        results.push(done??);
    }
    let transfer = requests_start.elapsed();
    conn.close(0u32.into(), b"done");
    results.sort_by_key(|(index, _)| *index);
    Ok(ConnectionResult {
        start_ns: start.duration_since(first).as_nanos() as u64,
        handshake_ns: handshake.as_nanos() as u64,
        transfer_ns: transfer.as_nanos() as u64,
        streams: results.into_iter().map(|(_, r)| r).collect(),
    })
}

async fn one_stream(conn: &quinn::Connection, size: u64, verified: &AtomicU64) -> Result<StreamResult> {
    let (mut send, mut recv) = conn.open_bi().await?;
    let request_sent = Instant::now();
    send.write_all(&protocol::encode_request(size)).await?;
    send.finish()?;
    let mut verifier = Verifier::default();
    while let Some(chunk) = recv.read_chunk(usize::MAX, true).await.context("read payload")? {
        verifier.update(&chunk.bytes)?;
        verified.fetch_add(chunk.bytes.len() as u64, Ordering::Relaxed);
    }
    verifier.finish(size)?;
    Ok(StreamResult { bytes: verifier.received(), transfer_ns: request_sent.elapsed().as_nanos() as u64 })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(texts: &[&str]) -> Result<Options> {
        Options::parse(&LutOpt::parse_all(&texts.iter().map(|t| t.to_string()).collect::<Vec<_>>())?)
    }

    #[test]
    fn options_are_read_typed_and_the_others_refused() {
        let o = parse(&["gso=off", "cc=bbr", "rcvbuf=4000", "cipher=chacha20", "gso=on"]).unwrap();
        assert_eq!(
            (o.gso, o.cc, o.rcvbuf, o.sndbuf, o.cipher),
            (Some(true), Some(CongestionControl::Bbr), Some(4000), None, Some(Cipher::Chacha20))
        );
        for (bad, why) in
            [("pacing=off", "unknown option pacing=off"), ("cc=copa", "supported"), ("gso=maybe", "on|off")]
        {
            let err = format!("{:#}", parse(&[bad]).unwrap_err());
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
