//! The event loop: one thread, one socket, any sans-IO stack behind [`Endpoint`].
//!
//! Each turn: fire due timers, let the application move stream data, collect outgoing datagrams
//! into a [`TxBatch`] and flush it through the I/O layer, then sleep in `ppoll` until the socket is
//! readable (or writable, after `EAGAIN`), the next timer, or the next paced datagram is due.
//! Receives are drained in `recvmmsg` batches and GRO buffers are split back into datagrams.

use std::io::IoSliceMut;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use nesquic_io::{RecvMeta, UdpIo, MAX_UDP_PAYLOAD};

use crate::batch::TxBatch;
use crate::TranslationError;

/// Most datagrams produced before a flush: enough for several full GSO sends per syscall,
/// small enough that acknowledgements are not left waiting behind a huge burst.
const MAX_DATAGRAMS_PER_FLUSH: usize = 256;
/// Receive calls per turn before sending again. One: a `recvmmsg` batch with GRO already holds
/// hundreds of datagrams, and acknowledging them promptly matters more than draining the socket
/// (measured: quiche 200 MB over loopback went from ~2.7 to ~3.9 Gbit/s going from 8 to 1).
const MAX_RECV_ROUNDS: usize = 1;

/// A sans-IO QUIC endpoint plus the benchmark application, as the loop sees it.
pub trait Endpoint {
    /// Feeds one received datagram (`local` is the socket's address).
    fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        local: SocketAddr,
        datagram: &mut [u8],
    ) -> Result<(), TranslationError>;
    /// When [`Endpoint::handle_timeout`] must next run.
    fn next_timeout(&mut self) -> Option<Instant>;
    /// Fires expired timers.
    fn handle_timeout(&mut self, now: Instant);
    /// Moves application data between the protocol's streams and the benchmark protocol.
    fn drive_app(&mut self, now: Instant) -> Result<(), TranslationError>;
    /// Adds outgoing datagrams to `batch` until it is full or nothing is left to send.
    fn fill_transmits(&mut self, now: Instant, batch: &mut TxBatch) -> Result<(), TranslationError>;
    /// Whether the endpoint's work is finished (the loop then flushes and returns).
    fn is_done(&self) -> bool;
    /// Payload bytes verified so far (clients), for progress reports.
    fn progress(&self) -> u64 {
        0
    }
}

/// Test-only damage applied to received datagrams, so tests can prove loss recovery and
/// reordering work through the shims' timers. Indices count received datagrams from 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Impairment {
    /// Received datagrams to drop.
    pub drop: Vec<u64>,
    /// Received datagrams to hold back and deliver after the next one.
    pub reorder: Vec<u64>,
}

/// Environment variables the adapters read into an [`Impairment`] (comma-separated indices).
pub const DROP_ENV: &str = "NESQUIC_FAULT_DROP_RX";
/// See [`DROP_ENV`].
pub const REORDER_ENV: &str = "NESQUIC_FAULT_REORDER_RX";

impl Impairment {
    /// Reads [`DROP_ENV`] and [`REORDER_ENV`]; a malformed list is an error, not ignored.
    pub fn from_env() -> Result<Self, TranslationError> {
        let list = |var: &str| -> Result<Vec<u64>, TranslationError> {
            match std::env::var(var) {
                Ok(v) if !v.trim().is_empty() => v
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse()
                            .map_err(|_| TranslationError::BadFault { var: var.to_string(), value: v.clone() })
                    })
                    .collect(),
                _ => Ok(Vec::new()),
            }
        };
        Ok(Self { drop: list(DROP_ENV)?, reorder: list(REORDER_ENV)? })
    }
}

/// What the loop did, beyond the I/O layer's own counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopStats {
    /// Loop turns.
    pub turns: u64,
    /// Datagrams dropped by the [`Impairment`].
    pub dropped: u64,
    /// Datagrams delivered late by the [`Impairment`].
    pub reordered: u64,
    /// Flushes that hit `EAGAIN` and waited for the socket to drain.
    pub send_blocked: u64,
}

/// Runs `endpoint` over `io` until it is done. `progress` is called every `progress_every` with
/// [`Endpoint::progress`]. `max_segments_hint` is not needed: the batch adapts to the socket.
pub fn run(
    io: &UdpIo,
    endpoint: &mut dyn Endpoint,
    impairment: &Impairment,
    progress_every: Duration,
    progress: &mut dyn FnMut(u64),
) -> Result<LoopStats, TranslationError> {
    io.set_nonblocking(true).map_err(TranslationError::Socket)?;
    let local = io.local_addr().map_err(TranslationError::Socket)?;
    let caps = io.capabilities();
    let mut batch = TxBatch::new(MAX_DATAGRAMS_PER_FLUSH);
    let mut rx = Receiver::new(caps.batch, io.recommended_recv_buffer(), impairment.clone());
    let mut stats = LoopStats::default();
    let mut send_blocked = false;
    let mut last_progress = Instant::now();
    loop {
        stats.turns += 1;
        let now = Instant::now();
        if endpoint.next_timeout().is_some_and(|t| t <= now) {
            endpoint.handle_timeout(now);
        }
        endpoint.drive_app(now)?;
        if !send_blocked {
            loop {
                endpoint.fill_transmits(now, &mut batch)?;
                let was_full = batch.is_full();
                let queued = batch.datagrams();
                if flush(io, &mut batch, now)? {
                    send_blocked = true;
                    stats.send_blocked += 1;
                    break;
                }
                // Go on only while a full batch made room: a batch full of datagrams held for
                // their pacing time must wait for that time, not spin here.
                if !was_full || batch.datagrams() == queued {
                    break;
                }
            }
        }
        if endpoint.is_done() && batch.is_empty() {
            progress(endpoint.progress());
            return Ok(stats);
        }
        if last_progress.elapsed() >= progress_every {
            progress(endpoint.progress());
            last_progress = Instant::now();
        }

        let wake = [endpoint.next_timeout(), batch.next_release()].into_iter().flatten().min();
        let (readable, writable) = wait(io, send_blocked, wake)?;
        if writable {
            send_blocked = false;
        }
        if readable {
            for _ in 0..MAX_RECV_ROUNDS {
                if !rx.receive(io, local, endpoint, &mut stats)? {
                    break;
                }
            }
        }
    }
}

/// Sends what is due; returns whether the socket pushed back (`EAGAIN`) with data left.
fn flush(io: &UdpIo, batch: &mut TxBatch, now: Instant) -> Result<bool, TranslationError> {
    loop {
        let due = batch.due(now);
        if due.is_empty() {
            return Ok(false);
        }
        let total = due.len();
        match io.send(&due) {
            Ok(sent) => {
                drop(due);
                batch.consume(sent);
                if sent < total {
                    return Ok(true);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) => return Err(TranslationError::Socket(e)),
        }
    }
}

/// Sleeps until the socket is ready or `wake` passes; returns (readable, writable).
fn wait(io: &UdpIo, want_write: bool, wake: Option<Instant>) -> Result<(bool, bool), TranslationError> {
    let events = libc::POLLIN | if want_write { libc::POLLOUT } else { 0 };
    let mut fds = [libc::pollfd { fd: io.as_raw_fd(), events, revents: 0 }];
    let timeout = wake.map(|t| {
        let d = t.saturating_duration_since(Instant::now());
        libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long }
    });
    let timeout_ptr = timeout.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: one live pollfd, a live (or null) timespec, no signal mask change.
    let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 1, timeout_ptr, std::ptr::null()) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok((false, false));
        }
        return Err(TranslationError::Socket(e));
    }
    let revents = fds[0].revents;
    if revents & (libc::POLLERR | libc::POLLNVAL) != 0 && revents & libc::POLLIN == 0 {
        // POLLERR on UDP means a queued ICMP error; reading clears it.
        return Ok((true, want_write));
    }
    Ok((revents & libc::POLLIN != 0, revents & libc::POLLOUT != 0))
}

/// Receive buffers and the impairment's state.
struct Receiver {
    storage: Vec<Vec<u8>>,
    meta: Vec<RecvMeta>,
    impairment: Impairment,
    seen: u64,
    held: Option<(SocketAddr, Vec<u8>)>,
}

impl Receiver {
    fn new(batch: usize, buffer: usize, impairment: Impairment) -> Self {
        Self {
            storage: vec![vec![0u8; buffer.max(MAX_UDP_PAYLOAD)]; batch.max(1)],
            meta: vec![RecvMeta::default(); batch.max(1)],
            impairment,
            seen: 0,
            held: None,
        }
    }

    /// One receive call; feeds every datagram. Returns whether the socket may hold more.
    fn receive(
        &mut self,
        io: &UdpIo,
        local: SocketAddr,
        endpoint: &mut dyn Endpoint,
        stats: &mut LoopStats,
    ) -> Result<bool, TranslationError> {
        let mut bufs: Vec<IoSliceMut<'_>> = self.storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        let n = match io.recv(&mut bufs, &mut self.meta) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
            // A peer that went away makes the kernel queue ECONNREFUSED; the stack's timers
            // handle the silence, so keep going.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(true),
            Err(e) => return Err(TranslationError::Socket(e)),
        };
        drop(bufs);
        let now = Instant::now();
        for i in 0..n {
            let meta = self.meta[i];
            let stride = if meta.stride == 0 { meta.len } else { meta.stride };
            let mut offset = 0;
            while offset < meta.len {
                let end = meta.len.min(offset + stride);
                let index = self.seen;
                self.seen += 1;
                let datagram = &mut self.storage[i][offset..end];
                offset = end;
                if self.impairment.drop.contains(&index) {
                    stats.dropped += 1;
                    continue;
                }
                if self.impairment.reorder.contains(&index) && self.held.is_none() {
                    self.held = Some((meta.addr, datagram.to_vec()));
                    stats.reordered += 1;
                    continue;
                }
                endpoint.handle_datagram(now, meta.addr, local, datagram)?;
                if let Some((from, mut late)) = self.held.take() {
                    endpoint.handle_datagram(now, from, local, &mut late)?;
                }
            }
        }
        Ok(n == self.meta.len())
    }
}
