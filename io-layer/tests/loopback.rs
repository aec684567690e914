//! Real sockets on loopback: every combination of GSO, GRO and mmsg, with exact counts.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::io::IoSliceMut;
use std::net::SocketAddr;
use std::time::Duration;

use nesquic_io::{DirectionCounters, IoConfig, IoSwitches, RecvMeta, Transmit, UdpIo};

fn socket(gso: bool, gro: bool, mmsg: bool) -> UdpIo {
    socket_with(IoSwitches { gso, gro, mmsg, plain: false })
}

fn socket_with(switches: IoSwitches) -> UdpIo {
    let config = IoConfig { switches, ..IoConfig::default() };
    let io = UdpIo::bind("127.0.0.1:0".parse().unwrap(), &config).unwrap();
    io.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    io
}

/// A payload whose every datagram is recognisable: byte = (datagram index * 7 + offset) as u8.
fn payload(datagrams: usize, segment: usize) -> Vec<u8> {
    (0..datagrams * segment).map(|i| ((i / segment) * 7 + i % segment) as u8).collect()
}

/// Receives until `expected` datagrams arrived; returns every datagram's bytes, in order.
fn receive(io: &UdpIo, expected: usize) -> (Vec<Vec<u8>>, Vec<RecvMeta>) {
    let mut storage = vec![vec![0u8; io.recommended_recv_buffer()]; 32];
    let mut datagrams = Vec::new();
    let mut metas = Vec::new();
    while datagrams.len() < expected {
        let mut meta = [RecvMeta::default(); 32];
        let mut bufs: Vec<IoSliceMut<'_>> = storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        let n = io.recv(&mut bufs, &mut meta).expect("datagrams arrive before the timeout");
        drop(bufs);
        for (m, buf) in meta[..n].iter().zip(&storage) {
            for chunk in buf[..m.len].chunks(m.stride) {
                datagrams.push(chunk.to_vec());
            }
            metas.push(*m);
        }
    }
    (datagrams, metas)
}

struct Case {
    gso: bool,
    gro: bool,
    mmsg: bool,
}

impl Case {
    fn sender(&self) -> UdpIo {
        socket(self.gso, false, self.mmsg)
    }
    fn receiver(&self) -> UdpIo {
        socket(false, self.gro, self.mmsg)
    }
}

/// Sends `transmits` transmits of `segments` x `segment` bytes, checks content and counters.
fn round_trip(
    case: Case,
    transmits: usize,
    segments: usize,
    segment: usize,
) -> (DirectionCounters, DirectionCounters, Vec<RecvMeta>) {
    round_trip_between(case.sender(), case.receiver(), transmits, segments, segment)
}

fn round_trip_between(
    tx: UdpIo,
    rx: UdpIo,
    transmits: usize,
    segments: usize,
    segment: usize,
) -> (DirectionCounters, DirectionCounters, Vec<RecvMeta>) {
    let dest: SocketAddr = rx.local_addr().unwrap();
    let data: Vec<Vec<u8>> = (0..transmits).map(|_| payload(segments, segment)).collect();
    let list: Vec<Transmit<'_>> =
        data.iter().map(|d| Transmit { destination: dest, contents: d, segment_size: Some(segment) }).collect();
    assert_eq!(tx.send(&list).unwrap(), transmits);
    let total = transmits * segments;
    let (got, metas) = receive(&rx, total);
    assert_eq!(got.len(), total);
    let expected = payload(segments, segment);
    for (i, d) in got.iter().enumerate() {
        let k = i % segments;
        assert_eq!(d.as_slice(), &expected[k * segment..(k + 1) * segment], "datagram {i} content");
    }
    (tx.counters().send, rx.counters().recv, metas)
}

#[test]
fn gso_and_sendmmsg_pack_everything_into_one_syscall() {
    let (send, recv, _) = round_trip(Case { gso: true, gro: true, mmsg: true }, 3, 10, 1200);
    assert_eq!(send, DirectionCounters { syscalls: 1, datagrams: 30, bytes: 36_000, would_block: 0, errors: 0 });
    assert_eq!((recv.datagrams, recv.bytes), (30, 36_000));
    assert!(recv.syscalls <= 30);
}

#[test]
fn gro_coalesces_a_gso_send() {
    let (_, recv, metas) = round_trip(Case { gso: true, gro: true, mmsg: false }, 1, 10, 1200);
    assert_eq!((recv.datagrams, recv.bytes), (10, 12_000));
    // With GRO, the 10 segments arrive in fewer buffers than datagrams, each with the sender's stride.
    assert!(metas.len() < 10, "GRO coalesced nothing: {metas:?}");
    assert!(metas.iter().all(|m| m.stride == 1200));
    assert_eq!(recv.syscalls, metas.len() as u64);
}

#[test]
fn without_gso_each_datagram_is_its_own_message_in_one_sendmmsg() {
    let (send, recv, _) = round_trip(Case { gso: false, gro: true, mmsg: true }, 3, 10, 1200);
    assert_eq!((send.syscalls, send.datagrams, send.bytes), (1, 30, 36_000));
    assert_eq!((recv.datagrams, recv.bytes), (30, 36_000));
}

#[test]
fn without_mmsg_each_gso_transmit_is_one_sendmsg() {
    let (send, _, _) = round_trip(Case { gso: true, gro: false, mmsg: false }, 3, 10, 1200);
    assert_eq!((send.syscalls, send.datagrams, send.bytes), (3, 30, 36_000));
}

#[test]
fn forced_fallback_is_one_syscall_per_datagram_both_ways() {
    let (send, recv, metas) = round_trip(Case { gso: false, gro: false, mmsg: false }, 2, 5, 1000);
    assert_eq!(send, DirectionCounters { syscalls: 10, datagrams: 10, bytes: 10_000, would_block: 0, errors: 0 });
    assert_eq!(recv, DirectionCounters { syscalls: 10, datagrams: 10, bytes: 10_000, would_block: 0, errors: 0 });
    assert!(metas.iter().all(|m| m.stride == m.len));
}

#[test]
fn plain_loop_is_one_syscall_per_datagram_whatever_else_is_asked() {
    let plain = IoSwitches::plain();
    let tx = socket_with(IoSwitches { gso: true, ..plain });
    let rx = socket_with(IoSwitches { gro: true, mmsg: true, ..plain });
    for caps in [tx.capabilities(), rx.capabilities()] {
        assert!(caps.plain && !caps.gso && !caps.gro && !caps.mmsg, "{caps:?}");
        assert_eq!((caps.batch, caps.max_gso_segments), (1, 1));
    }
    let (send, recv, metas) = round_trip_between(tx, rx, 3, 4, 1100);
    assert_eq!(send, DirectionCounters { syscalls: 12, datagrams: 12, bytes: 13_200, would_block: 0, errors: 0 });
    assert_eq!(recv, DirectionCounters { syscalls: 12, datagrams: 12, bytes: 13_200, would_block: 0, errors: 0 });
    assert!(metas.iter().all(|m| m.len == 1100 && m.stride == 1100));
}

#[test]
fn oversized_transmit_is_split_at_the_kernel_segment_limit() {
    // 100 x 500 B: the kernel takes at most 64 segments per GSO message, so 2 messages, 1 sendmmsg.
    let (send, recv, _) = round_trip(Case { gso: true, gro: true, mmsg: true }, 1, 100, 500);
    assert_eq!((send.syscalls, send.datagrams, send.bytes), (1, 100, 50_000));
    assert_eq!((recv.datagrams, recv.bytes), (100, 50_000));
}

#[test]
fn batch_size_bounds_messages_per_sendmmsg() {
    let config = IoConfig {
        switches: IoSwitches { gso: false, gro: false, mmsg: true, plain: false },
        batch: 4,
        ..IoConfig::default()
    };
    let tx = UdpIo::bind("127.0.0.1:0".parse().unwrap(), &config).unwrap();
    let rx = socket(false, false, true);
    let data = payload(10, 100);
    let t = Transmit { destination: rx.local_addr().unwrap(), contents: &data, segment_size: Some(100) };
    tx.send(&[t]).unwrap();
    // 10 datagrams in batches of 4: 4 + 4 + 2.
    assert_eq!(tx.counters().send.syscalls, 3);
    assert_eq!(receive(&rx, 10).0.len(), 10);
}

#[test]
fn buffers_granted_cover_the_request_as_root() {
    let io = socket(true, true, true);
    let granted = io.granted_buffers();
    // As root the *FORCE options bypass rmem_max, so we get at least the default 8 MiB request.
    if is_root() {
        assert!(granted.recv >= nesquic_io_default(), "granted {granted:?}");
        assert!(granted.send >= nesquic_io_default(), "granted {granted:?}");
    } else {
        assert!(granted.recv > 0);
    }
}

fn nesquic_io_default() -> usize {
    IoConfig::default().recv_buffer.unwrap()
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .map(|l| l.split_whitespace().nth(1) == Some("0"))
        .unwrap()
}

#[test]
fn capabilities_follow_the_switches() {
    let off = socket(false, false, false).capabilities();
    assert!(!off.gso && !off.gro && !off.mmsg);
    assert_eq!((off.max_gso_segments, off.batch), (1, 1));
    let on = socket(true, true, true).capabilities();
    // This kernel (6.x) has both; on kernels without them detection turns them off.
    assert!(on.gso && on.gro && on.mmsg);
}
