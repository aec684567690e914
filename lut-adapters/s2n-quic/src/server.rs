//! The server: serves `connections` connections of `streams` streams each, then exits. Payload
//! chunks are `'static` slices of the pattern block handed to s2n-quic as `Bytes` (no copy).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use nesquic_protocol::payload::ALPN;
use nesquic_protocol::report::LutEvent;
use nesquic_protocol::stream::{PayloadChunk, ServerStream};
use nesquic_protocol::{pem, tls};
use s2n_quic::provider::congestion_controller::{Bbr, Cubic};
use s2n_quic::stream::BidirectionalStream;
use s2n_quic::{Connection, Server};

use crate::options::{Cc, Options};
use crate::socket::{self, PlatformFeatures};

/// How long the server waits for the client's CONNECTION_CLOSE once every stream was served and
/// acknowledged; a close lost on a lossy link then ends the connection on this timer, well inside
/// nesquic's grace for a finished client (as the quinn and quic-go LUTs do).
const CLOSE_GRACE: Duration = Duration::from_secs(3);

pub async fn run(
    listen: SocketAddr,
    cert: &Path,
    key: &Path,
    o: &Options,
    connections: u32,
    streams: u32,
) -> Result<()> {
    // s2n-tls loads PEM; nesquic hands LUTs DER files.
    let cert = pem::encode("CERTIFICATE", &tls::read(cert)?);
    let key = pem::encode("PRIVATE KEY", &tls::read(key)?);
    let tls = s2n_quic::provider::tls::default::Server::builder()
        .with_certificate(cert, key)
        .context("load certificate")?
        .with_application_protocols([ALPN])?
        .build()?;
    let (io, granted) = socket::bind(listen, o)?;
    let features = PlatformFeatures::default();
    let builder = Server::builder()
        .with_tls(tls)?
        .with_io(io)?
        .with_limits(crate::client::limits(streams)?)?
        .with_event(features.clone())?;
    let mut server = match o.cc {
        None | Some(Cc::Cubic) => builder.with_congestion_controller(Cubic::default())?.start()?,
        Some(Cc::Bbr) => builder.with_congestion_controller(Bbr::default())?.start()?,
    };
    features.report(granted);
    LutEvent::Listening { addr: server.local_addr()? }.emit();

    let mut running = tokio::task::JoinSet::new();
    for index in 0..connections {
        let conn = server.accept().await.context("the endpoint closed before every connection arrived")?;
        running
            .spawn(async move { serve_connection(conn, streams).await.with_context(|| format!("connection {index}")) });
        // A failed connection ends the run now, not after the rest were accepted.
        while let Some(done) = running.try_join_next() {
            done??;
        }
    }
    while let Some(done) = running.join_next().await {
        done??;
    }
    Ok(())
}

/// Serves the `expected` streams the client opens, then waits for its close (or CLOSE_GRACE).
/// Whether the client got every byte is the client's verdict: once every stream's data was
/// acknowledged, how the connection ends is not an error.
async fn serve_connection(mut conn: Connection, expected: u32) -> Result<()> {
    let mut streams = tokio::task::JoinSet::new();
    for opened in 0..expected {
        match conn.accept_bidirectional_stream().await {
            Ok(Some(stream)) => drop(streams.spawn(serve_stream(stream))),
            Ok(None) => bail!("the client closed after {opened} of {expected} streams"),
            Err(e) => return Err(e).context(format!("accept stream ({opened} of {expected} opened)")),
        }
    }
    while let Some(done) = streams.join_next().await {
        done??;
    }
    // The client closes with code 0 once it verified everything: accepting ends then.
    if tokio::time::timeout(CLOSE_GRACE, conn.accept_bidirectional_stream()).await.is_err() {
        conn.close(s2n_quic::application::Error::new(0)?);
    }
    Ok(())
}

async fn serve_stream(stream: BidirectionalStream) -> Result<()> {
    let (mut recv, mut send) = stream.split();
    let mut app = ServerStream::new();
    while let Some(chunk) = recv.receive().await.context("read request")? {
        app.on_request(&chunk, false)?;
    }
    app.on_request(&[], true)?;
    while let Some((chunk, last)) = app.pending_shared() {
        let len = chunk.as_slice().len();
        let bytes = match chunk {
            PayloadChunk::Shared(window) => Bytes::from_static(window),
            PayloadChunk::Owned(altered) => Bytes::from(altered),
        };
        send.send(bytes).await.context("write payload")?;
        app.accepted(len, last);
    }
    send.finish().context("finish stream")?;
    // Waits until the client acknowledged every byte, or closed the connection (code 0) once it
    // verified them; whether it got every byte is the client's verdict, not the server's.
    let _ = send.close().await;
    Ok(())
}
