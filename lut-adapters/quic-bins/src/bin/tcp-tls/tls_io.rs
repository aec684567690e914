//! Driving a rustls connection over a blocking socket: the handshake, flushing queued records,
//! and waiting for plaintext. Generic over client and server (`rustls::ConnectionCommon`).

use std::io::{BufRead, BufReader, ErrorKind, Write};

use anyhow::{bail, Context, Result};
use rustls::ConnectionCommon;

use crate::socket::SocketIo;

/// Receive buffer: one recv(2) takes up to this much ciphertext, which rustls then deframes
/// 4 KiB at a time from memory (its own reads are 4 KiB, too small for a bulk transfer).
pub const READ_BUFFER: usize = 256 * 1024;

/// The receive side of a socket, buffered.
pub type Incoming<'a> = BufReader<SocketIo<'a>>;

/// Writes every queued record (several records per sendmsg).
pub fn flush<D>(conn: &mut ConnectionCommon<D>, mut out: SocketIo<'_>) -> Result<()> {
    while conn.wants_write() {
        conn.write_tls(&mut out).context("send")?;
    }
    out.flush().context("send")
}

/// Reads what the socket has and lets rustls process it; an error when the peer closed or
/// rustls refused the data (the alert it queued is sent first).
pub fn receive<D>(conn: &mut ConnectionCommon<D>, incoming: &mut Incoming<'_>, out: SocketIo<'_>) -> Result<usize> {
    let n = conn.read_tls(incoming).context("recv")?;
    if let Err(e) = conn.process_new_packets() {
        let _ = flush(conn, out);
        return Err(e).context("TLS");
    }
    Ok(n)
}

/// Runs the handshake to completion (the client's Finished is sent).
pub fn handshake<D>(conn: &mut ConnectionCommon<D>, incoming: &mut Incoming<'_>, out: SocketIo<'_>) -> Result<()> {
    while conn.is_handshaking() {
        flush(conn, out)?;
        if receive(conn, incoming, out)? == 0 && conn.is_handshaking() {
            bail!("the peer closed the connection during the handshake");
        }
    }
    flush(conn, out)
}

/// Fills `buf` with plaintext.
pub fn read_exact<D>(
    conn: &mut ConnectionCommon<D>,
    incoming: &mut Incoming<'_>,
    out: SocketIo<'_>,
    buf: &mut [u8],
) -> Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match std::io::Read::read(&mut conn.reader(), &mut buf[got..]) {
            Ok(0) => bail!("the peer closed after {got} of {} bytes", buf.len()),
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                receive(conn, incoming, out)?;
            }
            Err(e) => return Err(e).context("read"),
        }
    }
    Ok(())
}

/// Hands each piece of plaintext to `each` until the peer's close_notify; an error if the
/// connection ends without one (a truncation).
pub fn read_to_close<D>(
    conn: &mut ConnectionCommon<D>,
    incoming: &mut Incoming<'_>,
    out: SocketIo<'_>,
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    loop {
        let mut reader = conn.reader();
        match reader.fill_buf() {
            Ok([]) => return Ok(()),
            Ok(data) => {
                each(data)?;
                let n = data.len();
                reader.consume(n);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                receive(conn, incoming, out)?;
            }
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                bail!("the peer closed the TCP connection without a TLS close_notify")
            }
            Err(e) => return Err(e).context("read"),
        }
    }
}
