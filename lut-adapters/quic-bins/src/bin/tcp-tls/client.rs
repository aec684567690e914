//! The client: `connections` protocol connections, `parallel` at a time; each is `streams` TCP
//! connections (one per stream, TCP has no streams), handshaken together, then each sends its
//! request and verifies its payload.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex, Once};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nesquic_lut_bins::protocol::payload::{self as protocol, Verifier, SERVER_NAME};
use nesquic_lut_bins::protocol::report::{ClientResult, ConnectionResult, LutEvent, StreamResult};
use nesquic_lut_bins::translation::rustls_config;
use nesquic_lut_bins::Workload;

use crate::options::Options;
use crate::socket::{self, SocketIo};
use crate::tls_io::{self, Incoming, READ_BUFFER};

const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// What every connection shares.
struct Shared {
    connect: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    options: Options,
    workload: Workload,
    /// Bytes verified so far, for the progress lines.
    verified: AtomicU64,
    /// The `io` line goes out once, for the first socket.
    reported: Once,
    /// The first stream failure, as its stream saw it while its socket was still open.
    first_failure: Mutex<Option<String>>,
}

impl Shared {
    /// Keeps `failure` if it is the first. A stream notes its failure before it closes its
    /// socket, and every failure that close causes (the server ends at its broken pipe, the
    /// other streams then lose their peer) comes after it: the first noted is the cause.
    fn note_failure(&self, failure: String) {
        // A poisoned lock: a thread panicked while holding it; the note is then not needed.
        if let Ok(mut first) = self.first_failure.lock() {
            first.get_or_insert(failure);
        }
    }

    /// The cause of a failed run: the first failure noted, else `reported` (what reached the
    /// main thread first, which may be a consequence).
    fn cause(&self, reported: anyhow::Error) -> anyhow::Error {
        match self.first_failure.lock().ok().and_then(|mut f| f.take()) {
            Some(first) => anyhow::anyhow!(first),
            None => reported,
        }
    }
}

pub fn run(connect: SocketAddr, ca: &Path, options: &Options, workload: Workload) -> Result<()> {
    let config = Arc::new(rustls_config::client(ca, options.cipher).context("client TLS (trust anchor)")?);
    let shared = Arc::new(Shared {
        connect,
        config,
        options: options.clone(),
        workload,
        verified: AtomicU64::new(0),
        reported: Once::new(),
        first_failure: Mutex::new(None),
    });
    let progress = shared.clone();
    std::thread::spawn(move || loop {
        std::thread::sleep(PROGRESS_EVERY);
        LutEvent::Progress { bytes: progress.verified.load(Ordering::Relaxed) }.emit();
    });
    // `parallel` workers take connection indices in order, so at most that many are open.
    let next = Arc::new(AtomicU32::new(0));
    let (tx, rx) = mpsc::channel::<Result<(u32, Instant, ConnectionResult)>>();
    for _ in 0..workload.parallel.clamp(1, workload.connections.max(1)) {
        let (shared, next, tx) = (shared.clone(), next.clone(), tx.clone());
        std::thread::Builder::new()
            .spawn(move || loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= shared.workload.connections {
                    return;
                }
                let start = Instant::now();
                let result = one_connection(&shared, index, start).with_context(|| format!("connection {index}"));
                let failed = result.is_err();
                let _ = tx.send(result.map(|r| (index, start, r)));
                if failed {
                    return;
                }
            })
            .context("spawn a connection worker")?;
    }
    drop(tx);
    let mut results = Vec::with_capacity(workload.connections as usize);
    for _ in 0..workload.connections {
        // A failed connection ends the run now (the process exit ends the other threads), with
        // the failure that came first in time, not the first to reach this thread.
        match rx.recv().context("a connection worker ended early")? {
            Ok(result) => results.push(result),
            Err(e) => return Err(shared.cause(e)),
        }
    }
    // Connections' `start_ns` and the elapsed time count from the first connection attempt, not
    // from before the worker threads were spawned (a loaded machine delays those by 100+ ms).
    let first = results.iter().map(|(_, start, _)| *start).min().unwrap_or_else(Instant::now);
    let elapsed = first.elapsed();
    results.sort_by_key(|(index, _, _)| *index);
    let connections: Vec<ConnectionResult> = results
        .into_iter()
        .map(|(_, start, result)| ConnectionResult {
            start_ns: start.duration_since(first).as_nanos() as u64,
            ..result
        })
        .collect();
    let done = ClientResult::of_run(workload.is_single(), connections, elapsed.as_nanos() as u64)
        .context("a one-connection workload ran more than one connection")?;
    LutEvent::Done(done).emit();
    Ok(())
}

/// One stream's timeline.
struct StreamTimes {
    handshake_done: Instant,
    request_sent: Instant,
    verified: Instant,
    bytes: u64,
}

/// One protocol connection: `streams` TCP+TLS connections opened at once; requests go out once
/// every handshake is complete (as QUIC streams open after the one handshake). Its handshake time
/// is until the last TLS handshake completed; its transfer time from then to the last byte
/// verified; each stream's figures are its own TCP connection's.
/// `start_ns` is filled in by the caller, once the first connection's start is known.
fn one_connection(shared: &Shared, index: u32, start: Instant) -> Result<ConnectionResult> {
    let streams = shared.workload.streams.max(1);
    let label = |i: u32| format!("connection {index}: stream {i}");
    let times: Vec<StreamTimes> = if streams == 1 {
        vec![one_stream(shared, &label(0), None).context("stream 0")?]
    } else {
        let barrier = Barrier::new(streams as usize);
        let aborted = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..streams)
                .map(|i| {
                    let (barrier, aborted) = (&barrier, &aborted);
                    let label = label(i);
                    scope.spawn(move || {
                        one_stream(shared, &label, Some((barrier, aborted))).with_context(|| format!("stream {i}"))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("stream thread panicked"))))
                .collect::<Result<Vec<_>>>()
        })?
    };
    // Invariant: `times` has `streams` >= 1 entries.
    let handshakes_done = times.iter().map(|t| t.handshake_done).max().unwrap_or(start);
    let last_byte = times.iter().map(|t| t.verified).max().unwrap_or(start);
    Ok(ConnectionResult {
        start_ns: 0,
        handshake_ns: handshakes_done.duration_since(start).as_nanos() as u64,
        transfer_ns: last_byte.duration_since(handshakes_done).as_nanos() as u64,
        streams: times
            .iter()
            .map(|t| StreamResult {
                bytes: t.bytes,
                transfer_ns: t.verified.duration_since(t.request_sent).as_nanos() as u64,
            })
            .collect(),
    })
}

/// One TCP connection: connect, TLS handshake, (wait for the others' handshakes), request,
/// verify the payload up to the server's close_notify, close. A failure is noted as `label`'s
/// while the socket is still open ([`Shared::note_failure`]).
fn one_stream(shared: &Shared, label: &str, together: Option<(&Barrier, &AtomicBool)>) -> Result<StreamTimes> {
    let stream = socket::connect(shared.connect, &shared.options);
    let result = stream_on(shared, &stream, together);
    if let Err(e) = &result {
        shared.note_failure(format!("{label}: {e:#}"));
    }
    // `stream` closes here, after the note.
    result
}

fn stream_on(
    shared: &Shared,
    stream: &Result<std::net::TcpStream>,
    together: Option<(&Barrier, &AtomicBool)>,
) -> Result<StreamTimes> {
    let mut handshake = stream.as_ref().map_err(|e| anyhow::anyhow!("{e:#}")).and_then(|stream| {
        shared.reported.call_once(|| match socket::io_settings(stream) {
            Ok(settings) => LutEvent::Io(settings).emit(),
            Err(e) => eprintln!("nesquic-lut-tcp-tls: {e:#}"),
        });
        let mut incoming: Incoming<'_> = Incoming::with_capacity(READ_BUFFER, SocketIo(stream));
        let conn = handshake(shared, stream, &mut incoming)?;
        Ok((conn, incoming, Instant::now()))
    });
    if let Some((barrier, aborted)) = together {
        // Every stream reaches the barrier, failed or not, so none waits forever.
        if handshake.is_err() {
            aborted.store(true, Ordering::Relaxed);
        }
        barrier.wait();
        if handshake.is_ok() && aborted.load(Ordering::Relaxed) {
            handshake = Err(anyhow::anyhow!("another stream's handshake failed"));
        }
    }
    let (mut conn, mut incoming, handshake_done) = handshake?;
    // The same socket the handshake ran on.
    let out = *incoming.get_ref();
    let size = shared.workload.size;
    let request_sent = Instant::now();
    std::io::Write::write_all(&mut conn.writer(), &protocol::encode_request(size)).context("request")?;
    tls_io::flush(&mut conn, out).context("send request")?;
    let mut verifier = Verifier::default();
    tls_io::read_to_close(&mut conn, &mut incoming, out, |data| {
        verifier.update(data)?;
        shared.verified.fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(())
    })
    .context("read payload")?;
    verifier.finish(size)?;
    let verified = Instant::now();
    conn.send_close_notify();
    tls_io::flush(&mut conn, out).context("send close_notify")?;
    Ok(StreamTimes { handshake_done, request_sent, verified, bytes: verifier.received() })
}

fn handshake(
    shared: &Shared,
    stream: &std::net::TcpStream,
    incoming: &mut Incoming<'_>,
) -> Result<rustls::ClientConnection> {
    let name = rustls::pki_types::ServerName::try_from(SERVER_NAME).context("server name")?;
    let mut conn = rustls::ClientConnection::new(shared.config.clone(), name).context("TLS session")?;
    tls_io::handshake(&mut conn, incoming, SocketIo(stream)).context("handshake")?;
    Ok(conn)
}
