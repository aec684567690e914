//! The client: `connections` connections, `parallel` at a time, `streams` concurrent requests on
//! each, every payload verified as it arrives; then the `done` report.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use nesquic_protocol::cli::LutCommand;
use nesquic_protocol::payload::{self as protocol, Verifier, ALPN, SERVER_NAME};
use nesquic_protocol::report::{ClientResult, ConnectionResult, LutEvent, StreamResult};
use nesquic_protocol::{pem, tls};
use s2n_quic::client::Connect;
use s2n_quic::connection::Handle;
use s2n_quic::provider::congestion_controller::{Bbr, Cubic};
use s2n_quic::provider::limits::Limits;
use s2n_quic::Client;

use crate::options::{Cc, Options};
use crate::socket::{self, PlatformFeatures};

const PROGRESS_EVERY: Duration = Duration::from_millis(100);
/// s2n-quic's own default for concurrent bidirectional streams; raised when a testcase wants more.
const DEFAULT_STREAMS: u64 = 100;

/// s2n-quic's default limits, with room for `streams` concurrent bidirectional streams.
pub fn limits(streams: u32) -> Result<Limits> {
    let streams = DEFAULT_STREAMS.max(streams.into());
    Ok(Limits::new()
        .with_max_open_local_bidirectional_streams(streams)?
        .with_max_open_remote_bidirectional_streams(streams)?)
}

pub async fn run(connect: SocketAddr, ca: &Path, o: &Options, command: &LutCommand) -> Result<()> {
    // Only the run's certificate is trusted: the system's trust store is emptied first.
    let ca = pem::encode("CERTIFICATE", &tls::read(ca)?);
    let tls = s2n_quic::provider::tls::default::Client::builder()
        .with_empty_trust_store()?
        .with_certificate(ca)
        .context("load trust anchor")?
        .with_application_protocols([ALPN])?
        .build()?;
    let any: SocketAddr = if connect.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse()?;
    let (io, granted) = socket::bind(any, o)?;
    let features = PlatformFeatures::default();
    let builder = Client::builder()
        .with_tls(tls)?
        .with_io(io)?
        .with_limits(limits(command.streams())?)?
        .with_event(features.clone())?;
    let mut client = match o.cc {
        None | Some(Cc::Cubic) => builder.with_congestion_controller(Cubic::default())?.start()?,
        Some(Cc::Bbr) => builder.with_congestion_controller(Bbr::default())?.start()?,
    };
    features.report(granted);

    let verified = Arc::new(AtomicU64::new(0));
    let reporter = tokio::spawn(report_progress(verified.clone()));
    let shape = Shape { connect, streams: command.streams(), size: command.size() };
    let first = Instant::now();
    let slots = Arc::new(tokio::sync::Semaphore::new(command.parallel().max(1) as usize));
    let mut running = tokio::task::JoinSet::new();
    let mut results = Vec::with_capacity(command.connections() as usize);
    for index in 0..command.connections() {
        // Invariant: the semaphore is never closed.
        let slot = slots.clone().acquire_owned().await.context("connection slots")?;
        let (client, verified) = (client.clone(), verified.clone());
        running.spawn(async move {
            let result = one_connection(&client, shape, first, &verified).await;
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
    // Lets the CONNECTION_CLOSE frames go out before the process exits.
    client.wait_idle().await.context("closing")?;
    results.sort_by_key(|(index, _)| *index);
    let connections: Vec<ConnectionResult> = results.into_iter().map(|(_, r)| r).collect();
    let done = ClientResult::of_run(command.workload().is_single(), connections, elapsed.as_nanos() as u64)
        .context("a one-connection workload ran more than one connection")?;
    LutEvent::Done(done).emit();
    Ok(())
}

/// What every connection does.
#[derive(Debug, Clone, Copy)]
struct Shape {
    connect: SocketAddr,
    streams: u32,
    size: u64,
}

async fn report_progress(verified: Arc<AtomicU64>) {
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    tick.tick().await;
    loop {
        tick.tick().await;
        LutEvent::Progress { bytes: verified.load(Ordering::Relaxed) }.emit();
    }
}

/// One connection: handshake, `streams` concurrent requests, each payload verified, then a close
/// with code 0.
async fn one_connection(
    client: &Client,
    shape: Shape,
    first: Instant,
    verified: &Arc<AtomicU64>,
) -> Result<ConnectionResult> {
    let start = Instant::now();
    let connect = Connect::new(shape.connect).with_server_name(SERVER_NAME);
    let conn = client.connect(connect).await.context("handshake")?;
    let handshake = start.elapsed();
    let requests_start = Instant::now();
    let mut streams = tokio::task::JoinSet::new();
    for index in 0..shape.streams {
        let (handle, verified) = (conn.handle(), verified.clone());
        streams.spawn(async move {
            let result = one_stream(handle, shape.size, &verified).await;
            result.map(|r| (index, r)).with_context(|| format!("stream {index}"))
        });
    }
    let mut results = Vec::with_capacity(shape.streams as usize);
    while let Some(done) = streams.join_next().await {
        results.push(done??);
    }
    let transfer = requests_start.elapsed();
    conn.close(s2n_quic::application::Error::new(0)?);
    results.sort_by_key(|(index, _)| *index);
    Ok(ConnectionResult {
        start_ns: start.duration_since(first).as_nanos() as u64,
        handshake_ns: handshake.as_nanos() as u64,
        transfer_ns: transfer.as_nanos() as u64,
        streams: results.into_iter().map(|(_, r)| r).collect(),
    })
}

async fn one_stream(mut handle: Handle, size: u64, verified: &AtomicU64) -> Result<StreamResult> {
    let mut stream = handle.open_bidirectional_stream().await.context("open stream")?;
    let request_sent = Instant::now();
    stream.send(Bytes::copy_from_slice(&protocol::encode_request(size))).await.context("write request")?;
    stream.finish()?;
    let mut verifier = Verifier::default();
    while let Some(chunk) = stream.receive().await.context("read payload")? {
        verifier.update(&chunk)?;
        verified.fetch_add(chunk.len() as u64, Ordering::Relaxed);
    }
    verifier.finish(size)?;
    Ok(StreamResult { bytes: verifier.received(), transfer_ns: request_sent.elapsed().as_nanos() as u64 })
}
