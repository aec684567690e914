//! The userspace impairment relay: delay, jitter and reordering on kernels without netem.
//!
//! A thread in the client's network namespace owns a "front" UDP socket the client connects to
//! and, per client address, a "back" socket connected to the server, so the server sees one peer
//! per client and all traffic still crosses the veth (where tbf and the tc-bpf loss filter act).
//! Every datagram, both ways, is held until its release time: arrival + delay + a uniform jitter
//! sample in [-jitter, +jitter] (so jitter reorders, as with netem); a `reorder` share of
//! datagrams skips the delay (netem's `reorder` semantics). What the relay actually did — held
//! time per datagram and datagrams that left out of arrival order — is measured and reported.
//! Its sockets are Nesquic's I/O layer: GRO batches in, many datagrams per `recvmmsg` and
//! `sendmmsg` call, so the relay keeps up with stacks that batch.

use std::collections::{BinaryHeap, HashMap};
use std::io::IoSliceMut;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nesquic_io::{IoConfig, RecvMeta, Transmit, UdpIo};
use serde::Serialize;

use crate::{LinkError, Result};

/// What the relay applies to each direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RelayConditions {
    /// Added one-way delay, ms.
    pub delay_ms: f64,
    /// Uniform jitter around the delay, ms (the sample is clamped at zero total delay).
    pub jitter_ms: f64,
    /// Share of datagrams sent without the delay, percent.
    pub reorder_pct: f64,
}

/// Measured behaviour of one direction.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize)]
pub struct DirectionStats {
    /// Datagrams forwarded.
    pub datagrams: u64,
    /// Payload bytes forwarded.
    pub bytes: u64,
    /// Datagrams that left after a datagram that arrived later than them.
    pub reordered: u64,
    /// Datagrams the reorder draw sent without delay.
    pub undelayed: u64,
    /// Sum of time held in the relay, ns (for the mean).
    pub held_ns_sum: u64,
    /// Shortest and longest time held, ns.
    pub held_ns_min: u64,
    /// Longest time held, ns.
    pub held_ns_max: u64,
    /// Datagrams the kernel refused to send (buffer full), lost like a full queue would.
    pub send_errors: u64,
    /// Shortest and longest delay drawn (arrival to release time), ns: what was asked of the
    /// relay, before its own lateness.
    pub drawn_ns_min: u64,
    /// Longest delay drawn, ns.
    pub drawn_ns_max: u64,
    /// How late the relay sent after the release time: sum (for the mean) and worst, ns. On a
    /// busy machine this is the relay competing for a CPU.
    pub late_ns_sum: u64,
    /// Worst lateness, ns.
    pub late_ns_max: u64,
}

impl DirectionStats {
    /// Mean held time, ms.
    pub fn mean_held_ms(&self) -> f64 {
        if self.datagrams == 0 {
            0.0
        } else {
            self.held_ns_sum as f64 / self.datagrams as f64 / 1e6
        }
    }

    /// Reordered datagrams, percent of forwarded.
    pub fn reordered_pct(&self) -> f64 {
        if self.datagrams == 0 {
            0.0
        } else {
            self.reordered as f64 * 100.0 / self.datagrams as f64
        }
    }
}

/// Both directions: client to server ("up") and back ("down").
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize)]
pub struct RelayStats {
    /// Client to server.
    pub up: DirectionStats,
    /// Server to client.
    pub down: DirectionStats,
}

/// A running relay; stopped (thread joined, sockets closed) on drop.
pub struct Relay {
    front: SocketAddr,
    target: Arc<Mutex<Option<SocketAddr>>>,
    stats: Arc<Mutex<RelayStats>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    /// Starts a relay in the network namespace at `netns`, its front socket on `bind`.
    pub fn start(netns: &Path, bind: SocketAddr, conditions: RelayConditions) -> Result<Self> {
        let ns = std::fs::File::open(netns).map_err(|e| LinkError::Relay(format!("open {}: {e}", netns.display())))?;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let target = Arc::new(Mutex::new(None));
        let stats = Arc::new(Mutex::new(RelayStats::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let shared = (target.clone(), stats.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("nesquic-relay".into())
            .spawn(move || {
                // SAFETY: setns on a valid namespace fd; it affects only this thread.
                if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    let _ = ready_tx.send(Err(LinkError::Relay(format!("setns: {}", std::io::Error::last_os_error()))));
                    return;
                }
                let front = match relay_socket(bind) {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = ready_tx.send(Err(LinkError::Relay(format!("bind the relay on {bind}: {e}"))));
                        return;
                    }
                };
                let _ = ready_tx.send(front.local_addr().map_err(|e| LinkError::Relay(format!("relay address: {e}"))));
                let (target, stats, stop) = shared;
                Worker::new(front, conditions, target, stats).run(&stop);
            })
            .map_err(|e| LinkError::Relay(format!("start the relay thread: {e}")))?;
        let front =
            ready_rx.recv().map_err(|_| LinkError::Relay("the relay thread ended before it was ready".into()))??;
        Ok(Self { front, target, stats, stop, thread: Some(thread) })
    }

    /// Points the relay at `server` (each repetition's server has its own port) and returns the
    /// address the client must connect to instead.
    pub fn route(&self, server: SocketAddr) -> SocketAddr {
        if let Ok(mut t) = self.target.lock() {
            *t = Some(server);
        }
        self.front
    }

    /// The front socket's address (what clients connect to).
    pub fn route_address(&self) -> SocketAddr {
        self.front
    }

    /// What the relay did so far.
    pub fn stats(&self) -> RelayStats {
        self.stats.lock().map(|s| *s).unwrap_or_default()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A datagram waiting for its release time. Ordered so the heap pops the earliest release
/// first (ties: arrival order).
struct Held {
    release: Instant,
    arrival: Instant,
    seq: u64,
    /// Client to server (through `client`'s back socket), else server to `client`.
    up: bool,
    client: SocketAddr,
    data: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.release, self.seq) == (other.release, other.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.release, other.seq).cmp(&(self.release, self.seq))
    }
}

/// A non-blocking I/O-layer socket on `bind`, with the layer's defaults (GRO, mmsg, 8 MiB buffers).
fn relay_socket(bind: SocketAddr) -> std::io::Result<UdpIo> {
    let io = UdpIo::bind(bind, &IoConfig::default()).map_err(std::io::Error::other)?;
    io.set_nonblocking(true)?;
    Ok(io)
}

struct Worker {
    front: UdpIo,
    /// Per client address: the socket that talks to the server on its behalf.
    backs: HashMap<SocketAddr, UdpIo>,
    routed_to: Option<SocketAddr>,
    conditions: RelayConditions,
    target: Arc<Mutex<Option<SocketAddr>>>,
    stats: Arc<Mutex<RelayStats>>,
    local: RelayStats,
    queue: BinaryHeap<Held>,
    seq: u64,
    /// Highest arrival sequence sent so far, per direction (up, down), to count reordering.
    sent_max_seq: [Option<u64>; 2],
    rng: u64,
}

/// Receive buffers per `recvmmsg`, each up to 64 KiB (a GRO batch is split into its datagrams).
const RECV_BATCH: usize = 32;
const RECV_BUFFER: usize = 65_536;
/// How long the loop sleeps at most, so a stop request is seen promptly.
const IDLE: Duration = Duration::from_millis(20);

impl Worker {
    fn new(
        front: UdpIo,
        conditions: RelayConditions,
        target: Arc<Mutex<Option<SocketAddr>>>,
        stats: Arc<Mutex<RelayStats>>,
    ) -> Self {
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        Self {
            front,
            backs: HashMap::new(),
            routed_to: None,
            conditions,
            target,
            stats,
            local: RelayStats::default(),
            queue: BinaryHeap::new(),
            seq: 0,
            sent_max_seq: [None, None],
            rng: seed | 1,
        }
    }

    /// splitmix64: a uniform draw in [0, 1).
    fn uniform(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn hold_for(&mut self) -> (Duration, bool) {
        let c = self.conditions;
        if c.reorder_pct > 0.0 && self.uniform() * 100.0 < c.reorder_pct {
            return (Duration::ZERO, true);
        }
        let jitter = if c.jitter_ms > 0.0 { (self.uniform() * 2.0 - 1.0) * c.jitter_ms } else { 0.0 };
        (Duration::from_secs_f64(((c.delay_ms + jitter).max(0.0)) / 1e3), false)
    }

    fn run(mut self, stop: &AtomicBool) {
        let mut buf = vec![vec![0u8; RECV_BUFFER]; RECV_BATCH];
        let mut last_publish = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let wait =
                self.queue.peek().map_or(IDLE, |h| h.release.saturating_duration_since(Instant::now()).min(IDLE));
            self.poll(wait);
            self.receive(&mut buf);
            self.release_due();
            if last_publish.elapsed() >= Duration::from_millis(100) {
                self.publish();
                last_publish = Instant::now();
            }
        }
        self.publish();
    }

    /// A new server (next repetition): forget the old clients' back sockets.
    fn follow_target(&mut self) {
        let current = self.target.lock().ok().and_then(|t| *t);
        if current != self.routed_to {
            self.routed_to = current;
            self.backs.clear();
        }
    }

    fn poll(&self, wait: Duration) {
        let mut fds: Vec<libc::pollfd> = std::iter::once(&self.front)
            .chain(self.backs.values())
            .map(|s| libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLIN, revents: 0 })
            .collect();
        // ppoll: nanosecond timeouts, so datagrams leave on time (poll's ms would add up to 1 ms).
        let timeout = libc::timespec { tv_sec: wait.as_secs() as libc::time_t, tv_nsec: wait.subsec_nanos().into() };
        // SAFETY: `fds` is a live array of `fds.len()` pollfd structs; no signal mask is passed.
        unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &timeout, std::ptr::null()) };
    }

    fn receive(&mut self, bufs: &mut [Vec<u8>]) {
        // The route may have been set while the loop slept: the client's first datagram must
        // find it.
        self.follow_target();
        let now = Instant::now();
        let mut meta = [RecvMeta::default(); RECV_BATCH];
        while let Some(n) = receive_batch(&self.front, bufs, &mut meta) {
            for (buf, m) in bufs.iter().zip(&meta[..n]) {
                self.ensure_back(m.addr);
                self.hold_each(true, m.addr, buf, m, now);
            }
        }
        let clients: Vec<SocketAddr> = self.backs.keys().copied().collect();
        for client in clients {
            while let Some(n) = self.backs.get(&client).and_then(|b| receive_batch(b, bufs, &mut meta)) {
                for (buf, m) in bufs.iter().zip(&meta[..n]) {
                    self.hold_each(false, client, buf, m, now);
                }
            }
        }
    }

    /// Holds each datagram of a received buffer (several when GRO coalesced them).
    fn hold_each(&mut self, up: bool, client: SocketAddr, buf: &[u8], meta: &RecvMeta, arrival: Instant) {
        let stride = meta.stride.max(1);
        for datagram in buf[..meta.len].chunks(stride) {
            self.hold(up, client, datagram, arrival);
        }
    }

    fn ensure_back(&mut self, client: SocketAddr) {
        let Some(server) = self.routed_to else { return };
        if self.backs.contains_key(&client) {
            return;
        }
        let local = SocketAddr::new(self.front.local_addr().map_or(client.ip(), |a| a.ip()), 0);
        // Unconnected: replies are taken from whoever sends to it, which is only the server.
        let _ = server;
        if let Ok(back) = relay_socket(local) {
            self.backs.insert(client, back);
        }
    }

    fn hold(&mut self, up: bool, client: SocketAddr, data: &[u8], arrival: Instant) {
        let (delay, undelayed) = self.hold_for();
        if undelayed {
            self.direction(up).undelayed += 1;
        }
        self.seq += 1;
        let held = Held { release: arrival + delay, arrival, seq: self.seq, up, client, data: data.to_vec() };
        self.queue.push(held);
    }

    fn direction(&mut self, up: bool) -> &mut DirectionStats {
        if up {
            &mut self.local.up
        } else {
            &mut self.local.down
        }
    }

    /// Sends every datagram whose time has come: towards the server through each client's back
    /// socket, towards the clients through the front socket, many per `sendmmsg`.
    fn release_due(&mut self) {
        let now = Instant::now();
        let mut due = Vec::new();
        while self.queue.peek().is_some_and(|h| h.release <= now) {
            let Some(h) = self.queue.pop() else { break };
            due.push(h);
        }
        if due.is_empty() {
            return;
        }
        let server = self.routed_to;
        // Per sending socket (None: the front), in release order.
        let mut by_socket: Vec<(Option<SocketAddr>, Vec<Held>)> = Vec::new();
        for h in due {
            let socket = h.up.then_some(h.client);
            match by_socket.iter_mut().find(|(s, _)| *s == socket) {
                Some((_, list)) => list.push(h),
                None => by_socket.push((socket, vec![h])),
            }
        }
        for (socket, held) in by_socket {
            let io = match socket {
                Some(client) => self.backs.get(&client),
                None => Some(&self.front),
            };
            let transmits: Vec<Transmit<'_>> = held
                .iter()
                .filter_map(|h| {
                    let destination = if h.up { server? } else { h.client };
                    Some(Transmit { destination, contents: &h.data, segment_size: None })
                })
                .collect();
            // A failed or partial send drops the rest, as a lossy link would; each is counted.
            let sent = match (io, server.is_some() || socket.is_none()) {
                (Some(io), true) => io.send(&transmits).unwrap_or(0),
                _ => 0,
            };
            let sent_at = Instant::now();
            for (i, h) in held.iter().enumerate() {
                self.account(h, (i < sent).then_some(h.data.len()), sent_at);
            }
        }
    }

    /// Records one released datagram: sent (its bytes) or not.
    fn account(&mut self, h: &Held, sent: Option<usize>, sent_at: Instant) {
        let index = usize::from(!h.up);
        let reordered = self.sent_max_seq[index].is_some_and(|m| m > h.seq);
        self.sent_max_seq[index] = Some(self.sent_max_seq[index].map_or(h.seq, |m| m.max(h.seq)));
        let d = self.direction(h.up);
        let Some(n) = sent else {
            d.send_errors += 1;
            return;
        };
        let held = sent_at.duration_since(h.arrival).as_nanos() as u64;
        d.datagrams += 1;
        d.bytes += n as u64;
        d.reordered += u64::from(reordered);
        d.held_ns_sum += held;
        let drawn = h.release.duration_since(h.arrival).as_nanos() as u64;
        let late = sent_at.saturating_duration_since(h.release).as_nanos() as u64;
        let first = d.datagrams == 1;
        d.held_ns_min = if first { held } else { d.held_ns_min.min(held) };
        d.held_ns_max = d.held_ns_max.max(held);
        d.drawn_ns_min = if first { drawn } else { d.drawn_ns_min.min(drawn) };
        d.drawn_ns_max = d.drawn_ns_max.max(drawn);
        d.late_ns_sum += late;
        d.late_ns_max = d.late_ns_max.max(late);
    }

    fn publish(&self) {
        if let Ok(mut s) = self.stats.lock() {
            *s = self.local;
        }
    }
}

/// One `recvmmsg` into `bufs`; `None` when nothing is waiting (or the socket failed).
fn receive_batch(io: &UdpIo, bufs: &mut [Vec<u8>], meta: &mut [RecvMeta]) -> Option<usize> {
    let mut slices: Vec<IoSliceMut<'_>> = bufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
    io.recv(&mut slices, meta).ok().filter(|n| *n > 0)
}
