//! `nesquic-lut-quinn`: quinn 0.11 (rustls + ring, quinn-udp I/O) speaking the benchmark protocol.
//! Started by `nesquic run`; see docs/protocol.md.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use nesquic_lut_adapters::lut::args::{LutCli, Role};
use nesquic_lut_adapters::protocol::{self, Verifier, ALPN, REQUEST_LEN, SERVER_NAME};
use nesquic_lut_adapters::report::{ClientResult, IoSettings, LutEvent};
use nesquic_lut_adapters::{tls, IoMode};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Test hooks: make the server abort after N payload bytes, or flip the payload byte at offset N.
const FAULT_ENV: &str = "NESQUIC_FAULT_SERVER_ABORT_AFTER_BYTES";
const CORRUPT_ENV: &str = "NESQUIC_FAULT_SERVER_CORRUPT_AT";
const CHUNK: usize = 64 * 1024;
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

fn main() {
    let cli = LutCli::parse();
    let io = match &cli.role {
        Role::Server { io, .. } | Role::Client { io, .. } => *io,
    };
    if io != IoMode::Native {
        // quinn's protocol logic (quinn-proto) unchanged, quinn-udp swapped for Nesquic's I/O.
        if let Err(e) = nesquic_lut_adapters::translated::run::<
            nesquic_lut_adapters::translation::quinn_shim::QuinnProtoStack,
        >(cli.role)
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
        match cli.role {
            Role::Server { listen, cert, key, io: _, qlog, opts } => {
                let socket = bind(listen, &opts)?;
                server(socket, &cert, &key, transport(qlog.as_deref(), "server", &opts)?).await
            }
            Role::Client { connect, ca, size, io: _, qlog, opts } => {
                let any: std::net::SocketAddr = if connect.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse()?;
                let socket = bind(any, &opts)?;
                client(socket, connect, &ca, size, transport(qlog.as_deref(), "client", &opts)?).await
            }
        }
    });
    if let Err(e) = result {
        eprintln!("nesquic-lut-quinn: {e:#}");
        std::process::exit(1);
    }
}

/// quinn's default transport, plus its own qlog when asked (reported to nesquic with the wall
/// clock of the qlog's time zero).
fn transport(qlog: Option<&std::path::Path>, role: &str, opts: &[String]) -> Result<Arc<quinn::TransportConfig>> {
    let mut transport = quinn::TransportConfig::default();
    for opt in opts {
        match opt.as_str() {
            "gso=on" => drop(transport.enable_segmentation_offload(true)),
            "gso=off" => drop(transport.enable_segmentation_offload(false)),
            "cc=cubic" => {
                transport.congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default()));
            }
            "cc=newreno" => {
                transport.congestion_controller_factory(Arc::new(quinn::congestion::NewRenoConfig::default()));
            }
            "cc=bbr" => {
                transport.congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default()));
            }
            // Socket options, applied in `bind`.
            o if o.starts_with("rcvbuf=") || o.starts_with("sndbuf=") => {}
            other => bail!(
                "unknown option {other:?}; supported: gso=on|off, cc=cubic|newreno|bbr, rcvbuf=BYTES, sndbuf=BYTES"
            ),
        }
    }
    if let Some(path) = qlog {
        let file = std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
        let (start, wall) = (Instant::now(), std::time::SystemTime::now());
        let mut config = quinn::QlogConfig::default();
        config.writer(Box::new(std::io::BufWriter::new(file))).title(Some(format!("quinn {role}"))).start_time(start);
        transport.qlog_stream(config.into_stream());
        let start_unix_ns = wall.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        LutEvent::Qlog { path: path.to_path_buf(), start_unix_ns }.emit();
    }
    Ok(Arc::new(transport))
}

/// Binds the UDP socket quinn will use, applies `rcvbuf=`/`sndbuf=` options, and reports how
/// quinn-udp and the kernel configured it.
fn bind(addr: std::net::SocketAddr, opts: &[String]) -> Result<std::net::UdpSocket> {
    let socket = std::net::UdpSocket::bind(addr).with_context(|| format!("bind {addr}"))?;
    let bytes = |key: &str| -> Result<Option<usize>> {
        let Some(opt) = opts.iter().rev().find(|o| o.split_once('=').is_some_and(|(k, _)| k == key)) else {
            return Ok(None);
        };
        let value = opt.split_once('=').map_or("", |(_, v)| v);
        Ok(Some(value.parse().with_context(|| format!("{opt}: bytes expected"))?))
    };
    let granted = nesquic_lut_adapters::io::set_socket_buffers(&socket, bytes("rcvbuf")?, bytes("sndbuf")?)?;
    // The same probe quinn runs on this socket when it wraps it (sets the same options).
    let state = quinn::udp::UdpSocketState::new((&socket).into()).context("probe UDP socket capabilities")?;
    LutEvent::Io(IoSettings {
        stack: "quinn-udp 0.5 (its own GSO/GRO path)".into(),
        gso_max_segments: state.max_gso_segments() as u64,
        gro_segments: state.gro_segments() as u64,
        // quinn-udp on Linux: one sendmsg per transmit, recvmmsg for receives.
        send_mmsg: false,
        recv_mmsg: true,
        recv_buffer: granted.recv as u64,
        send_buffer: granted.send as u64,
    })
    .emit();
    Ok(socket)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

async fn server(
    socket: std::net::UdpSocket,
    cert: &std::path::Path,
    key: &std::path::Path,
    transport: Arc<quinn::TransportConfig>,
) -> Result<()> {
    let cert = CertificateDer::from(tls::read(cert)?);
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(tls::read(key)?));
    let mut crypto = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .context("server certificate")?;
    crypto.alpn_protocols = vec![ALPN.to_vec()];
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(crypto)?));
    config.transport_config(transport);
    let runtime = Arc::new(quinn::TokioRuntime);
    let endpoint = quinn::Endpoint::new(quinn::EndpointConfig::default(), Some(config), socket, runtime)?;
    LutEvent::Listening { addr: endpoint.local_addr()? }.emit();

    let abort_after: Option<u64> = std::env::var(FAULT_ENV).ok().and_then(|v| v.parse().ok());
    let corrupt_at: Option<u64> = std::env::var(CORRUPT_ENV).ok().and_then(|v| v.parse().ok());
    let incoming = endpoint.accept().await.context("endpoint closed before a connection arrived")?;
    let conn = incoming.await.context("handshake")?;
    let (mut send, mut recv) = conn.accept_bi().await.context("accept stream")?;
    let request = recv.read_to_end(REQUEST_LEN).await.context("read request")?;
    let size = protocol::decode_request(&request).context("request is not 8 bytes")?;

    let mut buf = vec![0u8; CHUNK];
    let mut offset = 0u64;
    while offset < size {
        let n = (size - offset).min(CHUNK as u64) as usize;
        protocol::fill_pattern(offset, &mut buf[..n]);
        if let Some(at) = corrupt_at.filter(|at| (offset..offset + n as u64).contains(at)) {
            buf[(at - offset) as usize] ^= 0xff;
        }
        send.write_all(&buf[..n]).await.context("write payload")?;
        offset += n as u64;
        if abort_after.is_some_and(|limit| offset >= limit) {
            eprintln!("nesquic-lut-quinn: {FAULT_ENV} reached, aborting");
            std::process::abort();
        }
    }
    send.finish().context("finish stream")?;
    // The client closes the connection once it has verified everything.
    conn.closed().await;
    endpoint.wait_idle().await;
    Ok(())
}

async fn client(
    socket: std::net::UdpSocket,
    connect: std::net::SocketAddr,
    ca: &std::path::Path,
    size: u64,
    transport: Arc<quinn::TransportConfig>,
) -> Result<()> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(tls::read(ca)?)).context("trust anchor")?;
    let mut crypto = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    crypto.alpn_protocols = vec![ALPN.to_vec()];
    let mut config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(crypto)?));
    config.transport_config(transport);
    let endpoint = quinn::Endpoint::new(quinn::EndpointConfig::default(), None, socket, Arc::new(quinn::TokioRuntime))?;

    let start = Instant::now();
    let conn = endpoint.connect_with(config, connect, SERVER_NAME)?.await.context("handshake")?;
    let handshake = start.elapsed();

    let (mut send, mut recv) = conn.open_bi().await?;
    let request_sent = Instant::now();
    send.write_all(&protocol::encode_request(size)).await?;
    send.finish()?;
    let mut verifier = Verifier::default();
    let mut last_progress = Instant::now();
    while let Some(chunk) = recv.read_chunk(usize::MAX, true).await.context("read payload")? {
        verifier.update(&chunk.bytes)?;
        if last_progress.elapsed() >= PROGRESS_EVERY {
            LutEvent::Progress { bytes: verifier.received() }.emit();
            last_progress = Instant::now();
        }
    }
    verifier.finish(size)?;
    let transfer = request_sent.elapsed();
    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    LutEvent::Done(ClientResult {
        bytes: verifier.received(),
        handshake_ns: handshake.as_nanos() as u64,
        transfer_ns: transfer.as_nanos() as u64,
    })
    .emit();
    Ok(())
}
