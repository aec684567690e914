//! `just bench-io`: the I/O layer alone, blasting UDP over loopback, fast paths against plain
//! one-datagram-per-syscall I/O. Prints a Markdown report (and writes it to the path given as the
//! first argument).
//!
//! Each scenario runs a sender thread for a fixed time and a receiver thread that drains until the
//! link goes quiet. Throughput is what the receiver got, over the time it was receiving; syscalls
//! per GB come from the layer's own counters. One scenario changes one side only, so its ratio
//! against the baseline isolates that side's fast path.

use std::io::IoSliceMut;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nesquic_io::{IoConfig, IoSwitches, RecvMeta, Transmit, UdpIo};

/// QUIC-sized datagrams (what quinn and msquic send on a 1500-byte path).
const DATAGRAM: usize = 1452;
const SEND_FOR: Duration = Duration::from_secs(3);
const QUIET: Duration = Duration::from_millis(300);

struct Scenario {
    name: &'static str,
    sender: IoSwitches,
    receiver: IoSwitches,
}

struct Outcome {
    sent_bytes: u64,
    send_syscalls: u64,
    recv_bytes: u64,
    recv_syscalls: u64,
    sent_datagrams: u64,
    recv_datagrams: u64,
    receiving: Duration,
}

impl Outcome {
    fn gbps(&self) -> f64 {
        self.recv_bytes as f64 * 8.0 / self.receiving.as_secs_f64() / 1e9
    }
    fn per_gb(calls: u64, bytes: u64) -> f64 {
        calls as f64 / (bytes as f64 / 1e9)
    }
    fn loss_pct(&self) -> f64 {
        100.0 * (1.0 - self.recv_datagrams as f64 / self.sent_datagrams.max(1) as f64)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fast = IoSwitches::default();
    let plain = IoSwitches { gso: false, gro: false, mmsg: false, plain: false };
    let scenarios = [
        Scenario { name: "GSO+sendmmsg -> GRO+recvmmsg", sender: fast, receiver: fast },
        Scenario { name: "plain send -> GRO+recvmmsg", sender: plain, receiver: fast },
        Scenario { name: "GSO+sendmmsg -> plain recv", sender: fast, receiver: plain },
        Scenario { name: "plain send -> plain recv", sender: plain, receiver: plain },
    ];
    let mut rows = Vec::new();
    for s in &scenarios {
        eprintln!("io-bench: {} ...", s.name);
        rows.push(run(s)?);
    }
    let base = &rows[0];
    let mut report = String::new();
    report.push_str("| scenario | received Gbit/s | vs fast path | send syscalls/GB | recv syscalls/GB | loss |\n");
    report.push_str("|---|---:|---:|---:|---:|---:|\n");
    for (s, o) in scenarios.iter().zip(&rows) {
        report.push_str(&format!(
            "| {} | {:.2} | {:.2}x | {:.0} | {:.0} | {:.2}% |\n",
            s.name,
            o.gbps(),
            o.gbps() / base.gbps(),
            Outcome::per_gb(o.send_syscalls, o.sent_bytes),
            Outcome::per_gb(o.recv_syscalls, o.recv_bytes),
            o.loss_pct()
        ));
    }
    report.push_str(&format!(
        "\nSend-side speedup (GSO+sendmmsg vs plain, fast receiver): {:.1}x; receive-side speedup \
         (GRO+recvmmsg vs plain, fast sender): {:.1}x.\n",
        base.gbps() / rows[1].gbps(),
        base.gbps() / rows[2].gbps()
    ));
    print!("{report}");
    if let Some(path) = std::env::args().nth(1) {
        let header = format!(
            "# I/O layer benchmark\n\nProduced by `just bench-io` on {} ({} CPUs): {}-byte datagrams over \
             loopback, sender busy for {:?} per scenario, 8 MiB socket buffers. Throughput is what the \
             receiver got; \"plain\" is one sendmsg/recvmsg per datagram (the cost of sendto/recvfrom).\n\n",
            kernel_release(),
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            DATAGRAM,
            SEND_FOR
        );
        std::fs::write(&path, header + &report)?;
        eprintln!("io-bench: written to {path}");
    }
    Ok(())
}

fn run(s: &Scenario) -> Result<Outcome, Box<dyn std::error::Error>> {
    let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let receiver = UdpIo::bind(any, &IoConfig { switches: s.receiver, ..IoConfig::default() })?;
    let sender = UdpIo::bind(any, &IoConfig { switches: s.sender, ..IoConfig::default() })?;
    receiver.set_read_timeout(Some(QUIET))?;
    let destination = receiver.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));

    let rx = std::thread::spawn(move || {
        let mut storage = vec![vec![0u8; 65536]; 32];
        let mut meta = [RecvMeta::default(); 32];
        let (mut first, mut last) = (None, Instant::now());
        loop {
            let mut bufs: Vec<IoSliceMut<'_>> = storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
            match receiver.recv(&mut bufs, &mut meta) {
                Ok(_) => {
                    last = Instant::now();
                    first.get_or_insert(last);
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => break,
                Err(e) => return Err(e),
            }
        }
        Ok((receiver.counters(), last.duration_since(first.unwrap_or(last))))
    });

    let stop_tx = stop.clone();
    let tx = std::thread::spawn(move || {
        let payload = vec![0xa5u8; 44 * DATAGRAM];
        let transmits: Vec<Transmit<'_>> =
            (0..8).map(|_| Transmit { destination, contents: &payload, segment_size: Some(DATAGRAM) }).collect();
        let started = Instant::now();
        while started.elapsed() < SEND_FOR && !stop_tx.load(Ordering::Relaxed) {
            // ENOBUFS and friends are loss on a saturated link, not a benchmark failure.
            let _ = sender.send(&transmits);
        }
        sender.counters()
    });
    let sent = tx.join().map_err(|_| "sender panicked")?;
    stop.store(true, Ordering::Relaxed);
    let (got, receiving) = rx.join().map_err(|_| "receiver panicked")??;
    Ok(Outcome {
        sent_bytes: sent.send.bytes,
        send_syscalls: sent.send.syscalls,
        sent_datagrams: sent.send.datagrams,
        recv_bytes: got.recv.bytes,
        recv_syscalls: got.recv.syscalls,
        recv_datagrams: got.recv.datagrams,
        receiving,
    })
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| format!("Linux {}", s.trim())).unwrap_or_default()
}
