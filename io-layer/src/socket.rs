//! The socket: setup, capability detection, batched send and receive.

use std::io::{self, IoSliceMut};
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cmsg::{self, CmsgBuf};
use crate::config::IoConfig;
use crate::counters::{AtomicDirection, Counters};
use crate::{IoError, MAX_GSO_SEGMENTS, MAX_UDP_PAYLOAD};

/// One outgoing buffer: a single datagram, or several equal-size datagrams back to back.
#[derive(Debug, Clone, Copy)]
pub struct Transmit<'a> {
    /// Where to send.
    pub destination: SocketAddr,
    /// The payload: one datagram, or `segment_size`-sized datagrams (the last may be shorter).
    pub contents: &'a [u8],
    /// Size of each datagram in `contents`; `None` means `contents` is one datagram.
    pub segment_size: Option<usize>,
}

/// What arrived in one receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecvMeta {
    /// The sender.
    pub addr: SocketAddr,
    /// Bytes in the buffer.
    pub len: usize,
    /// Size of each datagram in the buffer (GRO); equals `len` for a single datagram.
    pub stride: usize,
}

impl Default for RecvMeta {
    fn default() -> Self {
        Self { addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0), len: 0, stride: 0 }
    }
}

impl RecvMeta {
    /// Datagrams in the buffer.
    pub fn datagrams(&self) -> usize {
        datagram_count(self.len, self.stride)
    }
}

/// What this socket ended up using, after the switches and the kernel had their say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// GSO in use (switch on and kernel supports it).
    pub gso: bool,
    /// GRO in use.
    pub gro: bool,
    /// `sendmmsg`/`recvmmsg` batching in use.
    pub mmsg: bool,
    /// Plain `sendto`/`recvfrom`, one datagram per syscall.
    #[serde(default)]
    pub plain: bool,
    /// Most datagrams per send message.
    pub max_gso_segments: usize,
    /// Most messages per batched syscall.
    pub batch: usize,
}

/// Socket buffer sizes as the kernel reports them back (Linux doubles the request for bookkeeping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantedBuffers {
    /// `SO_RCVBUF` after setup.
    pub recv: usize,
    /// `SO_SNDBUF` after setup.
    pub send: usize,
}

/// A UDP socket driven by the I/O layer. Methods take `&self` so one socket can be shared between
/// tasks; for tokio, wrap it in `tokio::io::unix::AsyncFd` after [`UdpIo::set_nonblocking`].
#[derive(Debug)]
pub struct UdpIo {
    socket: UdpSocket,
    caps: Capabilities,
    buffers: GrantedBuffers,
    send_counters: AtomicDirection,
    recv_counters: AtomicDirection,
}

impl UdpIo {
    /// Binds a socket and applies `config`. Buffer sizes use the `*FORCE` options first (root may
    /// exceed `net.core.rmem_max`) and fall back to the plain ones.
    pub fn bind(addr: SocketAddr, config: &IoConfig) -> Result<Self, IoError> {
        let socket = UdpSocket::bind(addr).map_err(|source| IoError::Bind { addr, source })?;
        let fd = socket.as_raw_fd();
        let buffers = set_socket_buffers(&socket, config.recv_buffer, config.send_buffer)?;
        // Detect at run time: the kernel says no with an error if it lacks the option.
        let plain = config.switches.plain;
        let gso = !plain && config.switches.gso && set_int(fd, libc::SOL_UDP, libc::UDP_SEGMENT, 0).is_ok();
        let gro = !plain && config.switches.gro && set_int(fd, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok();
        let caps = Capabilities {
            gso,
            gro,
            mmsg: !plain && config.switches.mmsg,
            plain,
            max_gso_segments: if gso { MAX_GSO_SEGMENTS } else { 1 },
            batch: if !plain && config.switches.mmsg { config.batch.clamp(1, 1024) } else { 1 },
        };
        Ok(Self {
            socket,
            caps,
            buffers,
            send_counters: AtomicDirection::default(),
            recv_counters: AtomicDirection::default(),
        })
    }

    /// What the socket uses.
    pub fn capabilities(&self) -> Capabilities {
        self.caps
    }

    /// Buffer sizes the kernel granted.
    pub fn granted_buffers(&self) -> GrantedBuffers {
        self.buffers
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Switches non-blocking mode (for event loops and tokio).
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.socket.set_nonblocking(nonblocking)
    }

    /// Bounds how long a blocking receive waits (`None`: forever).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.socket.set_read_timeout(timeout)
    }

    /// Counters so far.
    pub fn counters(&self) -> Counters {
        Counters { send: self.send_counters.snapshot(), recv: self.recv_counters.snapshot() }
    }

    /// Largest receive buffer worth passing to [`UdpIo::recv`]: a GRO buffer can hold 64 KiB.
    pub fn recommended_recv_buffer(&self) -> usize {
        if self.caps.gro {
            u16::MAX as usize
        } else {
            MAX_UDP_PAYLOAD
        }
    }

    /// Sends `transmits`, packing them into as few syscalls as the capabilities allow: segments of
    /// one transmit share a GSO message, messages share a `sendmmsg` call.
    ///
    /// Returns how many transmits were handed to the kernel. An error is returned only if nothing
    /// was sent; if a later syscall fails (e.g. `EAGAIN` on a non-blocking socket), the transmits
    /// before it count as sent and, where a transmit needed several messages, its unsent rest is
    /// dropped, as a lossy link would.
    pub fn send(&self, transmits: &[Transmit<'_>]) -> io::Result<usize> {
        let messages = self.plan_messages(transmits);
        let mut done = 0;
        while done < messages.len() {
            let chunk = &messages[done..messages.len().min(done + self.caps.batch)];
            match self.send_messages(chunk) {
                Ok(sent) => done += sent,
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(match messages.get(done) {
            // The next unsent message's transmit and everything after it were not sent, unless
            // an earlier part of that transmit went out.
            Some(next) if next.first_of_transmit => next.transmit,
            Some(next) => next.transmit + 1,
            None => transmits.len(),
        })
    }

    /// Receives into `bufs`, filling `meta` for each buffer used; returns how many were used.
    /// Blocks (on a blocking socket) until at least one message arrives.
    pub fn recv(&self, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> io::Result<usize> {
        let n = bufs.len().min(meta.len()).min(self.caps.batch);
        if n == 0 {
            return Ok(0);
        }
        let mut names: Vec<libc::sockaddr_storage> = vec![zeroed_storage(); n];
        let mut controls = vec![CmsgBuf::default(); n];
        // SAFETY: mmsghdr is plain old data; all-zero is a valid empty header.
        let mut hdrs: Vec<libc::mmsghdr> = vec![unsafe { mem::zeroed() }; n];
        for (i, hdr) in hdrs.iter_mut().enumerate() {
            let h = &mut hdr.msg_hdr;
            h.msg_name = (&mut names[i] as *mut libc::sockaddr_storage).cast();
            h.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as _;
            // IoSliceMut is guaranteed ABI-compatible with iovec.
            h.msg_iov = (&mut bufs[i] as *mut IoSliceMut<'_>).cast();
            h.msg_iovlen = 1;
            h.msg_control = controls[i].0.as_mut_ptr().cast();
            h.msg_controllen = cmsg::CMSG_SPACE as _;
        }
        let fd = self.socket.as_raw_fd();
        self.recv_counters.call();
        let received = if self.caps.mmsg {
            // SAFETY: every header points at live buffers owned by this frame or by `bufs`.
            // MSG_WAITFORONE: block for the first message only, then take what is queued.
            let r =
                unsafe { libc::recvmmsg(fd, hdrs.as_mut_ptr(), n as _, libc::MSG_WAITFORONE, std::ptr::null_mut()) };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(r as usize)
            }
        } else if self.caps.plain {
            let h = &mut hdrs[0].msg_hdr;
            // SAFETY: the buffer and name storage are live for the call; the lengths are theirs.
            let r = unsafe {
                libc::recvfrom(fd, bufs[0].as_mut_ptr().cast(), bufs[0].len(), 0, h.msg_name.cast(), &mut h.msg_namelen)
            };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else {
                hdrs[0].msg_len = r as u32;
                Ok(1)
            }
        } else {
            // SAFETY: as above, for the first header.
            let r = unsafe { libc::recvmsg(fd, &mut hdrs[0].msg_hdr, 0) };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else {
                hdrs[0].msg_len = r as u32;
                Ok(1)
            }
        };
        let count = received.inspect_err(|e| self.recv_counters.failed(e))?;
        let (mut datagrams, mut bytes) = (0u64, 0u64);
        for i in 0..count {
            let len = hdrs[i].msg_len as usize;
            let stride = cmsg::read_gro_stride(&hdrs[i].msg_hdr).unwrap_or(len);
            meta[i] = RecvMeta { addr: from_storage(&names[i]), len, stride };
            datagrams += meta[i].datagrams() as u64;
            bytes += len as u64;
        }
        self.recv_counters.moved(datagrams, bytes);
        Ok(count)
    }

    /// Splits transmits into kernel messages: one per datagram without GSO, otherwise one per
    /// run of at most `max_gso_segments` segments and `MAX_UDP_PAYLOAD` bytes.
    fn plan_messages(&self, transmits: &[Transmit<'_>]) -> Vec<Message> {
        let mut out = Vec::with_capacity(transmits.len());
        for (index, t) in transmits.iter().enumerate() {
            let len = t.contents.len();
            let segment = t.segment_size.filter(|s| *s > 0 && *s < len).unwrap_or(len.max(1));
            let per_message = if self.caps.gso {
                (MAX_UDP_PAYLOAD / segment).clamp(1, self.caps.max_gso_segments) * segment
            } else {
                segment
            };
            let mut offset = 0;
            loop {
                let end = len.min(offset + per_message);
                out.push(Message {
                    transmit: index,
                    first_of_transmit: offset == 0,
                    destination: t.destination,
                    data: t.contents[offset..end].as_ptr(),
                    len: end - offset,
                    segment_size: (end - offset > segment).then_some(segment),
                });
                offset = end;
                if offset >= len {
                    break;
                }
            }
        }
        out
    }

    /// One syscall for up to `batch` messages; returns how many the kernel took.
    fn send_messages(&self, messages: &[Message]) -> io::Result<usize> {
        let n = messages.len();
        let mut names: Vec<libc::sockaddr_storage> = Vec::with_capacity(n);
        let mut name_lens = Vec::with_capacity(n);
        for m in messages {
            let (storage, len) = to_storage(m.destination);
            names.push(storage);
            name_lens.push(len);
        }
        let mut iovs: Vec<libc::iovec> =
            messages.iter().map(|m| libc::iovec { iov_base: m.data as *mut libc::c_void, iov_len: m.len }).collect();
        let mut controls = vec![CmsgBuf::default(); n];
        // SAFETY: mmsghdr is plain old data; all-zero is a valid empty header.
        let mut hdrs: Vec<libc::mmsghdr> = vec![unsafe { mem::zeroed() }; n];
        for (i, m) in messages.iter().enumerate() {
            let h = &mut hdrs[i].msg_hdr;
            h.msg_name = (&mut names[i] as *mut libc::sockaddr_storage).cast();
            h.msg_namelen = name_lens[i];
            h.msg_iov = &mut iovs[i];
            h.msg_iovlen = 1;
            if let Some(segment) = m.segment_size {
                // segment <= MAX_UDP_PAYLOAD < u16::MAX by construction in plan_messages.
                cmsg::write_segment_size(h, &mut controls[i], segment as u16);
            }
        }
        let fd = self.socket.as_raw_fd();
        self.send_counters.call();
        let sent = if self.caps.mmsg {
            // SAFETY: headers point at buffers that outlive the call (names, iovs, controls,
            // and the transmit contents borrowed by the caller).
            let r = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), n as _, 0) };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(r as usize)
            }
        } else if self.caps.plain {
            let h = &hdrs[0].msg_hdr;
            // SAFETY: the payload and destination outlive the call; plan_messages made one
            // message per datagram (no GSO), so no control message is lost.
            let r = unsafe {
                libc::sendto(fd, messages[0].data.cast(), messages[0].len, 0, h.msg_name.cast(), h.msg_namelen)
            };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(1)
            }
        } else {
            // SAFETY: as above, for the first header.
            let r = unsafe { libc::sendmsg(fd, &hdrs[0].msg_hdr, 0) };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(1)
            }
        };
        let sent = sent.inspect_err(|e| self.send_counters.failed(e))?;
        let (mut datagrams, mut bytes) = (0u64, 0u64);
        for m in &messages[..sent] {
            datagrams += datagram_count(m.len, m.segment_size.unwrap_or(m.len)) as u64;
            bytes += m.len as u64;
        }
        self.send_counters.moved(datagrams, bytes);
        Ok(sent)
    }
}

impl AsRawFd for UdpIo {
    fn as_raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}

impl AsFd for UdpIo {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

/// One kernel message planned from a transmit.
struct Message {
    transmit: usize,
    first_of_transmit: bool,
    destination: SocketAddr,
    data: *const u8,
    len: usize,
    segment_size: Option<usize>,
}

fn datagram_count(len: usize, stride: usize) -> usize {
    if stride == 0 {
        return usize::from(len > 0);
    }
    len.div_ceil(stride).max(1)
}

/// Requests `SO_RCVBUF`/`SO_SNDBUF` sizes (`None` keeps the kernel's) on any socket, the `*FORCE`
/// options first (root may exceed `net.core.rmem_max`), and returns what the kernel granted.
/// Also for LUTs that bring their own sockets.
pub fn set_socket_buffers(
    socket: &impl AsRawFd,
    recv: Option<usize>,
    send: Option<usize>,
) -> Result<GrantedBuffers, IoError> {
    let fd = socket.as_raw_fd();
    if let Some(size) = recv {
        set_buffer(fd, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, size, "SO_RCVBUF")?;
    }
    if let Some(size) = send {
        set_buffer(fd, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, size, "SO_SNDBUF")?;
    }
    Ok(GrantedBuffers {
        recv: get_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF).unwrap_or(0),
        send: get_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF).unwrap_or(0),
    })
}

fn set_buffer(
    fd: RawFd,
    force: libc::c_int,
    plain: libc::c_int,
    size: usize,
    name: &'static str,
) -> Result<(), IoError> {
    let size = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    // The kernel doubles the value; ask for half so the granted size matches the request.
    let ask = size / 2;
    if set_int(fd, libc::SOL_SOCKET, force, ask).is_ok() {
        return Ok(());
    }
    set_int(fd, libc::SOL_SOCKET, plain, ask).map_err(|source| IoError::SockOpt { option: name, source })
}

fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its size.
    let r = unsafe {
        libc::setsockopt(fd, level, name, (&value as *const libc::c_int).cast(), mem::size_of::<libc::c_int>() as _)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn get_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<usize> {
    let mut value: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: passes a pointer to a live c_int and its size.
    let r = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut libc::c_int).cast(), &mut len) };
    if r == 0 {
        Ok(value.max(0) as usize)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn zeroed_storage() -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
    unsafe { mem::zeroed() }
}

fn to_storage(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    let mut storage = zeroed_storage();
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as _,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as _,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

fn from_storage(storage: &libc::sockaddr_storage) -> SocketAddr {
    match storage.ss_family as libc::c_int {
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            ))
        }
        _ => {
            // SAFETY: AF_INET (the only other family a UDP/IPv4 socket reports) holds a sockaddr_in.
            let sin = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(sin.sin_port),
            ))
        }
    }
}
