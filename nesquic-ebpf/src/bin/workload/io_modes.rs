//! The workload's packet-I/O modes for the user-space agent's libc wrappers: many threads
//! counted exactly (`--io-hammer`), what one wrapped call costs (`--io-calibrate`), and one fd
//! number reused by sockets and files behind the wrappers' back (`--fd-reuse`).

use std::net::UdpSocket;
use std::os::fd::AsRawFd;

use nesquic_ebpf::workload_report::{to_lines, IoCalibrateRound};

/// Bytes of each datagram the modes send.
pub const DATAGRAM: usize = 100;

/// A UDP socket connected to `sink` (sends succeed whether or not anyone reads: over loopback
/// a full receive queue drops the datagram after `sendmsg` returned), and one of its own that
/// never receives anything (a non-blocking `recvmsg` on it fails with EAGAIN).
struct Pair {
    sender: UdpSocket,
    empty: UdpSocket,
}

impl Pair {
    fn new(sink: &UdpSocket) -> std::io::Result<Pair> {
        let sender = UdpSocket::bind("127.0.0.1:0")?;
        sender.connect(sink.local_addr()?)?;
        let empty = UdpSocket::bind("127.0.0.1:0")?;
        empty.set_nonblocking(true)?;
        Ok(Pair { sender, empty })
    }
}

/// One `sendmsg` of a [`DATAGRAM`]-byte datagram on `fd`, through libc (the agent's wrapper
/// when it is preloaded) or straight to the kernel.
fn send(fd: i32, through_libc: bool) -> isize {
    let payload = [0x5au8; DATAGRAM];
    let mut iov = libc::iovec { iov_base: payload.as_ptr() as *mut libc::c_void, iov_len: payload.len() };
    // SAFETY: a zeroed msghdr is a valid empty message; the iovec outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    // SAFETY: a valid fd and msghdr.
    unsafe {
        if through_libc {
            libc::sendmsg(fd, &msg, 0)
        } else {
            libc::syscall(libc::SYS_sendmsg, fd, &msg as *const libc::msghdr, 0) as isize
        }
    }
}

/// One `recvmsg` on `fd` (EAGAIN on an empty non-blocking socket), as [`send`].
fn recv_nothing(fd: i32, through_libc: bool) -> isize {
    let mut buf = [0u8; DATAGRAM];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: as in `send`.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    // SAFETY: a valid fd and msghdr.
    unsafe {
        if through_libc {
            libc::recvmsg(fd, &mut msg, 0)
        } else {
            libc::syscall(libc::SYS_recvmsg, fd, &mut msg as *mut libc::msghdr, 0) as isize
        }
    }
}

/// `--io-hammer THREADS CALLS OUT`: THREADS threads each make CALLS `sendmsg` of one datagram
/// and CALLS `recvmsg` that find nothing, through libc; OUT gets what succeeded and failed.
pub fn io_hammer_mode(threads: u64, calls: u64, out: &str) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    let sink = UdpSocket::bind("127.0.0.1:0")?;
    let (sent, eagain, other) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| -> std::io::Result<()> {
        let mut workers = Vec::new();
        for _ in 0..threads {
            let pair = Pair::new(&sink)?;
            let (sent, eagain, other) = (&sent, &eagain, &other);
            workers.push(s.spawn(move || {
                for _ in 0..calls {
                    let ok = send(pair.sender.as_raw_fd(), true) == DATAGRAM as isize;
                    (if ok { sent } else { other }).fetch_add(1, Ordering::Relaxed);
                    let failed = recv_nothing(pair.empty.as_raw_fd(), true) < 0;
                    let again = failed && std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN);
                    (if again { eagain } else { other }).fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        Ok(())
    })?;
    let json = format!(
        "{{\"sendmsg\":{},\"sendmsg_bytes\":{},\"recvmsg_eagain\":{},\"other\":{}}}\n",
        sent.load(Ordering::Relaxed),
        sent.load(Ordering::Relaxed) * DATAGRAM as u64,
        eagain.load(Ordering::Relaxed),
        other.load(Ordering::Relaxed)
    );
    std::fs::write(out, json)
}

/// `--io-calibrate CALLS ROUNDS OUT`: per round, CALLS calls of each of `sendmsg` (one datagram)
/// and `recvmsg` (EAGAIN), through libc and straight to the kernel, in alternating batches; one
/// JSON line per round with the mean ns per call of each. Under the agent, libc's minus the
/// kernel's is what its wrapper adds to a call.
pub fn io_calibrate_mode(calls: u64, rounds: u64, out: &str) -> std::io::Result<()> {
    const BATCH: u64 = 200;
    let sink = UdpSocket::bind("127.0.0.1:0")?;
    let pair = Pair::new(&sink)?;
    let (tx, rx) = (pair.sender.as_raw_fd(), pair.empty.as_raw_fd());
    let batch = |f: &dyn Fn() -> isize| {
        let start = std::time::Instant::now();
        for _ in 0..BATCH {
            std::hint::black_box(f());
        }
        start.elapsed().as_nanos() as f64
    };
    let kinds: [&dyn Fn() -> isize; 4] =
        [&|| send(tx, true), &|| send(tx, false), &|| recv_nothing(rx, true), &|| recv_nothing(rx, false)];
    let lines: Vec<IoCalibrateRound> =
        super::rounds::alternating_rounds::<4>(rounds, calls, BATCH, |k| batch(kinds[k]))
            .into_iter()
            .map(|[sendmsg_libc_ns, sendmsg_kernel_ns, recvmsg_libc_ns, recvmsg_kernel_ns]| IoCalibrateRound {
                sendmsg_libc_ns,
                sendmsg_kernel_ns,
                recvmsg_libc_ns,
                recvmsg_kernel_ns,
            })
            .collect();
    std::fs::write(out, to_lines(&lines)?)
}

/// `--fd-reuse CALLS OUT`: one fd number held in turn by a file, a UDP socket, a TCP socket and
/// a file again, each closed where no libc wrapper sees it (a raw `close`, then `close_range`),
/// with CALLS 100-byte calls on each holder: `write` on the UDP socket, `send` on the TCP one,
/// `write` on the second file. The agent must see each holder for what it is, whatever it
/// learned of the number before. OUT gets the fd numbers and what each call returned.
pub fn fd_reuse_mode(calls: u64, out: &str) -> std::io::Result<()> {
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::IntoRawFd;
    extern "C" {
        // glibc >= 2.34; the agent interposes it.
        fn close_range(first: libc::c_uint, last: libc::c_uint, flags: libc::c_int) -> libc::c_int;
    }
    let payload = [0x5au8; DATAGRAM];
    let write_all = |fd: i32, through_send: bool| -> u64 {
        (0..calls)
            .map(|_| {
                // SAFETY: a valid fd and buffer.
                let n = unsafe {
                    if through_send {
                        libc::send(fd, payload.as_ptr().cast(), payload.len(), 0)
                    } else {
                        libc::write(fd, payload.as_ptr().cast(), payload.len())
                    }
                };
                u64::try_from(n).unwrap_or(0)
            })
            .sum()
    };
    let raw_close = |fd: i32| {
        // SAFETY: closing an fd this mode owns, straight to the kernel.
        unsafe { libc::syscall(libc::SYS_close, fd) };
    };
    let (sink, listener) = (UdpSocket::bind("127.0.0.1:0")?, TcpListener::bind("127.0.0.1:0")?);
    let file = std::fs::OpenOptions::new().write(true).open("/dev/null")?.into_raw_fd();
    let file_bytes = write_all(file, false);
    raw_close(file);
    let udp = UdpSocket::bind("127.0.0.1:0")?;
    udp.connect(sink.local_addr()?)?;
    let udp = udp.into_raw_fd();
    let udp_bytes = write_all(udp, false);
    raw_close(udp);
    let tcp = TcpStream::connect(listener.local_addr()?)?.into_raw_fd();
    let (_peer, _) = listener.accept()?;
    let tcp_bytes = write_all(tcp, true);
    // SAFETY: closes only this mode's TCP fd.
    if unsafe { close_range(tcp as libc::c_uint, tcp as libc::c_uint, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let again = std::fs::OpenOptions::new().write(true).open("/dev/null")?.into_raw_fd();
    let again_bytes = write_all(again, false);
    raw_close(again);
    let json = format!(
        "{{\"fds\":[{file},{udp},{tcp},{again}],\"file_bytes\":{file_bytes},\"udp_bytes\":{udp_bytes},\
         \"tcp_bytes\":{tcp_bytes},\"again_bytes\":{again_bytes}}}\n"
    );
    std::fs::write(out, json)
}
