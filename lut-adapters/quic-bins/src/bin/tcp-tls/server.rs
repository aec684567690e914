//! The server: accepts connections × streams TCP connections, each on its own thread: TLS
//! handshake, the 8-byte request, the payload, then close_notify and the end of its write side.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::{mpsc, Arc, Once};
use std::time::Duration;

use anyhow::{Context, Result};
use nesquic_lut_bins::protocol::payload::{self as protocol, REQUEST_LEN};
use nesquic_lut_bins::protocol::report::LutEvent;
use nesquic_lut_bins::protocol::stream::{PayloadChunk, CORRUPT_ENV};
use nesquic_lut_bins::translation::rustls_config;
use nesquic_lut_bins::Workload;

use crate::options::Options;
use crate::socket::{self, SocketIo};
use crate::tls_io::{self, Incoming, READ_BUFFER};

/// Test hook: the server aborts after this many payload bytes of a connection.
const FAULT_ENV: &str = "NESQUIC_FAULT_SERVER_ABORT_AFTER_BYTES";
/// How long the server waits for the client's close_notify once it sent everything: the
/// client's verdict ends the connection, the server only avoids resetting it.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

/// Test hooks, applied to every connection.
#[derive(Debug, Clone, Copy)]
struct Faults {
    abort_after: Option<u64>,
    corrupt_at: Option<u64>,
}

/// Serves `workload.connections * workload.streams` TCP connections, then returns.
pub fn run(listen: SocketAddr, cert: &Path, key: &Path, options: &Options, workload: Workload) -> Result<()> {
    let config = Arc::new(rustls_config::server(cert, key, options.cipher).context("server TLS")?);
    let listener = socket::listen(listen, options)?;
    LutEvent::Listening { addr: listener.local_addr()? }.emit();
    let faults = Faults {
        abort_after: std::env::var(FAULT_ENV).ok().and_then(|v| v.parse().ok()),
        corrupt_at: std::env::var(CORRUPT_ENV).ok().and_then(|v| v.parse().ok()),
    };
    let expected = u64::from(workload.connections) * u64::from(workload.streams);
    let (done_tx, done_rx) = mpsc::channel::<Result<()>>();
    let reported = Arc::new(Once::new());
    // Accepting runs apart from the results, so a failed connection ends the run at once.
    std::thread::spawn(move || {
        for index in 0..expected {
            let accepted = listener.accept().context("accept");
            let (config, done, reported) = (config.clone(), done_tx.clone(), reported.clone());
            let spawned = std::thread::Builder::new().name(format!("tcp-{index}")).spawn(move || {
                let result = accepted.and_then(|(stream, _)| {
                    reported.call_once(|| match socket::io_settings(&stream) {
                        Ok(settings) => LutEvent::Io(settings).emit(),
                        Err(e) => eprintln!("nesquic-lut-tcp-tls: {e:#}"),
                    });
                    serve(&stream, config, faults)
                });
                let _ = done.send(result.with_context(|| format!("TCP connection {index}")));
            });
            if let Err(e) = spawned {
                let _ = done_tx.send(Err(e).context("spawn a connection thread"));
                return;
            }
        }
    });
    for _ in 0..expected {
        done_rx.recv().context("the accept thread ended early")??;
    }
    Ok(())
}

fn serve(stream: &TcpStream, config: Arc<rustls::ServerConfig>, faults: Faults) -> Result<()> {
    let mut conn = rustls::ServerConnection::new(config).context("TLS session")?;
    // Each payload window is encrypted whole and sent in one sendmsg (see the loop below).
    conn.set_buffer_limit(None);
    let out = SocketIo(stream);
    let mut incoming: Incoming<'_> = Incoming::with_capacity(READ_BUFFER, SocketIo(stream));
    tls_io::handshake(&mut conn, &mut incoming, out).context("handshake")?;
    let mut request = [0u8; REQUEST_LEN];
    tls_io::read_exact(&mut conn, &mut incoming, out, &mut request).context("read request")?;
    let size = protocol::decode_request(&request).context("request is not 8 bytes")?;
    let mut offset = 0u64;
    while offset < size {
        // One whole pattern window per write: rustls cuts it into 16 KiB records (copying it, as
        // it encrypts), and they go out together.
        let want = (size - offset).min(protocol::WINDOW as u64) as usize;
        let chunk = PayloadChunk::at(offset, want, faults.corrupt_at);
        std::io::Write::write_all(&mut conn.writer(), chunk.as_slice()).context("encrypt payload")?;
        offset += chunk.as_slice().len() as u64;
        if offset == size {
            // The close_notify leaves with the last records.
            conn.send_close_notify();
        }
        tls_io::flush(&mut conn, out).context("send payload")?;
        if faults.abort_after.is_some_and(|limit| offset >= limit) {
            eprintln!("nesquic-lut-tcp-tls: {FAULT_ENV} reached, aborting");
            std::process::abort();
        }
    }
    if size == 0 {
        conn.send_close_notify();
        tls_io::flush(&mut conn, out)?;
    }
    // Everything, close_notify included, is with the kernel: from here on the client's verdict
    // ends the connection. A client that already closed (ENOTCONN) is not this server's failure,
    // and failing here would end the process and cut every other connection short.
    if let Err(e) = stream.shutdown(std::net::Shutdown::Write) {
        eprintln!("nesquic-lut-tcp-tls: shutdown(SHUT_WR) after the payload: {e}");
    }
    // Wait for the client's close (it sends close_notify once it verified everything), so
    // closing here never resets a connection the client still reads.
    stream.set_read_timeout(Some(CLOSE_GRACE)).context("SO_RCVTIMEO")?;
    let _ = tls_io::read_to_close(&mut conn, &mut incoming, out, |_| Ok(()));
    Ok(())
}
