//! The TCP sockets: creation with the requested options (before `connect`/`listen`, so the
//! buffers shape the window scale), what the kernel granted, and the byte mover rustls reads
//! from and writes to.
//!
//! The mover uses `send`/`recv`/`sendmsg` (never `write`/`writev`/`read`): the same kernel path,
//! and the system calls `--probe io` counts on both backends.

use std::io::{IoSlice, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;

use anyhow::{Context, Result};
use nesquic_lut_bins::protocol::report::{IoSettings, Transport};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use crate::options::Options;

/// Applies buffers, congestion control and TCP_NODELAY (records are flushed whole, and a
/// close_notify must not wait for an ACK behind Nagle).
pub fn configure(socket: &Socket, options: &Options) -> Result<()> {
    nesquic_lut_bins::io::set_socket_buffers(socket, options.rcvbuf, options.sndbuf).context("socket buffers")?;
    if let Some(cc) = &options.cc {
        socket.set_tcp_congestion(cc.as_bytes()).with_context(|| format!("setsockopt(TCP_CONGESTION, {cc:?})"))?;
    }
    socket.set_tcp_nodelay(true).context("TCP_NODELAY")?;
    Ok(())
}

/// A configured, connected client socket.
pub fn connect(addr: SocketAddr, options: &Options) -> Result<TcpStream> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).context("TCP socket")?;
    configure(&socket, options)?;
    socket.connect(&addr.into()).with_context(|| format!("connect {addr}"))?;
    Ok(socket.into())
}

/// A configured listening socket (accepted sockets inherit buffers and congestion control).
pub fn listen(addr: SocketAddr, options: &Options) -> Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).context("TCP socket")?;
    socket.set_reuse_address(true).context("SO_REUSEADDR")?;
    configure(&socket, options)?;
    socket.bind(&addr.into()).with_context(|| format!("bind {addr}"))?;
    socket.listen(1024).context("listen")?;
    Ok(socket.into())
}

/// What the kernel granted on a connected socket, read back with getsockopt.
pub fn io_settings(stream: &TcpStream) -> Result<IoSettings> {
    let socket = SockRef::from(stream);
    let cc = socket.tcp_congestion().context("getsockopt(TCP_CONGESTION)")?;
    let cc = String::from_utf8_lossy(&cc).trim_end_matches('\0').to_string();
    Ok(IoSettings {
        stack: "kernel TCP (segmentation and coalescing by the kernel: TSO/GSO, GRO) + rustls, blocking threads".into(),
        transport: Transport::Tcp,
        // One thread per TCP connection, reading and writing a blocking socket.
        blocking: true,
        // UDP GSO/GRO segment counts do not apply to a byte stream.
        gso_max_segments: 1,
        gro_segments: 1,
        send_mmsg: false,
        recv_mmsg: false,
        recv_buffer: socket.recv_buffer_size().context("getsockopt(SO_RCVBUF)")? as u64,
        send_buffer: socket.send_buffer_size().context("getsockopt(SO_SNDBUF)")? as u64,
        congestion_control: Some(cc),
    })
}

/// setsockopt(TCP_ULP, `name`).
pub fn set_ulp(socket: &Socket, name: &str) -> std::io::Result<()> {
    // SAFETY: a valid fd and a pointer/length pair to `name`'s bytes.
    let ret = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_TCP,
            libc::TCP_ULP,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Moves TLS records between rustls and the socket.
#[derive(Debug, Clone, Copy)]
pub struct SocketIo<'a>(pub &'a TcpStream);

impl Read for SocketIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // std's TcpStream reads with recv(2).
        (&mut &*self.0).read(buf)
    }
}

impl Write for SocketIo<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // std's TcpStream writes with send(2) (MSG_NOSIGNAL).
        (&mut &*self.0).write(buf)
    }

    /// All the records rustls has queued in one sendmsg(2) (std would use writev(2)).
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        // SAFETY: zeroed msghdr is valid (no name, no control data).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        // IoSlice is ABI-compatible with iovec on Unix (std documents it); the kernel only reads.
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = bufs.len().min(libc::UIO_MAXIOV as usize);
        loop {
            // SAFETY: msg points at `bufs`, alive for the call.
            let ret = unsafe { libc::sendmsg(self.0.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
            if ret >= 0 {
                return Ok(ret as usize);
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
