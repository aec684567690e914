//! Outgoing datagrams collected between two flushes, grouped into GSO-ready transmits.
//!
//! A group is a run of datagrams to one destination, all of one size except possibly the last
//! (exactly what one GSO send carries). Stacks that produce one datagram at a time (quiche) write
//! straight into the open group's buffer; stacks that produce whole GSO batches (quinn-proto) hand
//! over a buffer per batch. A datagram the library wants sent later (pacing) opens a group held
//! until that time.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use nesquic_io::Transmit;

/// Datagrams whose pacing time is at most this far ahead are sent at once: waking up for less
/// costs more than the burst does (quinn's timer granularity is of the same order).
pub const PACING_GRANULARITY: Duration = Duration::from_millis(1);

/// One GSO-ready run of datagrams.
#[derive(Debug)]
struct Group {
    destination: SocketAddr,
    segment: usize,
    buf: Vec<u8>,
    datagrams: usize,
    /// Not before this time (pacing); `None`: now.
    release: Option<Instant>,
}

impl Group {
    /// Whether one more `len`-byte datagram for `destination` can join this run, whose bytes
    /// so far are `group_len` (passed in: the buffer may be on loan to the writer).
    fn accepts(&self, group_len: usize, destination: SocketAddr, len: usize, release: Option<Instant>) -> bool {
        self.destination == destination
            && self.release == release
            && group_len == self.datagrams * self.segment // last datagram is full-size
            && len <= self.segment
    }
}

/// The datagrams waiting for the next flush.
#[derive(Debug)]
pub struct TxBatch {
    groups: Vec<Group>,
    /// Emptied buffers, reused so steady-state sending does not allocate.
    spare: Vec<Vec<u8>>,
    datagrams: usize,
    max_datagrams: usize,
}

impl TxBatch {
    /// A batch that counts as full after `max_datagrams` datagrams.
    pub fn new(max_datagrams: usize) -> Self {
        Self { groups: Vec::new(), spare: Vec::new(), datagrams: 0, max_datagrams: max_datagrams.max(1) }
    }

    /// Whether the producer should stop and let the batch be flushed.
    pub fn is_full(&self) -> bool {
        self.datagrams >= self.max_datagrams
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Datagrams queued.
    pub fn datagrams(&self) -> usize {
        self.datagrams
    }

    /// Earliest time a held (paced) group becomes due.
    pub fn next_release(&self) -> Option<Instant> {
        self.groups.iter().filter_map(|g| g.release).min()
    }

    /// Writes one datagram produced by `write`, which gets up to `max_len` bytes of space and
    /// returns the length written, the destination and the library's send time; `None` means it
    /// had nothing to send. Returns whether a datagram was added.
    pub fn push_with<E>(
        &mut self,
        now: Instant,
        max_len: usize,
        write: impl FnOnce(&mut [u8]) -> Result<Option<(usize, SocketAddr, Option<Instant>)>, E>,
    ) -> Result<bool, E> {
        let mut buf = match self.groups.last_mut() {
            // Write straight behind the open group's data; moved out below if it does not fit.
            Some(g) => std::mem::take(&mut g.buf),
            None => self.spare.pop().unwrap_or_default(),
        };
        let start = buf.len();
        buf.resize(start + max_len, 0);
        let written = write(&mut buf[start..]);
        let outcome = match written {
            Ok(Some((len, destination, at))) => Some((len, destination, at)),
            Ok(None) | Err(_) => None,
        };
        let Some((len, destination, at)) = outcome else {
            buf.truncate(start);
            match self.groups.last_mut() {
                Some(g) => g.buf = buf,
                None => self.put_back(buf),
            }
            return written.map(|_| false);
        };
        buf.truncate(start + len);
        let release = at.filter(|t| *t > now + PACING_GRANULARITY);
        match self.groups.last_mut() {
            Some(g) if g.accepts(start, destination, len, release) => {
                g.buf = buf;
                g.datagrams += 1;
            }
            Some(g) => {
                // Does not continue the run: move it into a group of its own (rare: a new
                // destination, a size change or a pacing hold).
                let mut own = self.spare.pop().unwrap_or_default();
                own.clear();
                own.extend_from_slice(&buf[start..]);
                buf.truncate(start);
                g.buf = buf;
                self.groups.push(Group { destination, segment: len, buf: own, datagrams: 1, release });
            }
            None => self.groups.push(Group { destination, segment: len, buf, datagrams: 1, release }),
        }
        self.datagrams += 1;
        Ok(true)
    }

    /// Adds a buffer that already holds `segment`-sized datagrams (the last may be shorter), as
    /// quinn-proto's `poll_transmit` produces them.
    pub fn push_owned(&mut self, destination: SocketAddr, buf: Vec<u8>, segment: Option<usize>) {
        if buf.is_empty() {
            self.put_back(buf);
            return;
        }
        let segment = segment.filter(|s| *s > 0).unwrap_or(buf.len());
        let datagrams = buf.len().div_ceil(segment);
        self.datagrams += datagrams;
        self.groups.push(Group { destination, segment, buf, datagrams, release: None });
    }

    /// An empty buffer for [`TxBatch::push_owned`].
    pub fn take_buffer(&mut self) -> Vec<u8> {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf
    }

    /// Returns an unused buffer from [`TxBatch::take_buffer`].
    pub fn put_back(&mut self, mut buf: Vec<u8>) {
        buf.clear();
        self.spare.push(buf);
    }

    /// The transmits due at `now`, in order, up to the first held group.
    pub fn due(&self, now: Instant) -> Vec<Transmit<'_>> {
        self.groups
            .iter()
            .take_while(|g| g.release.is_none_or(|t| t <= now))
            .map(|g| Transmit {
                destination: g.destination,
                contents: &g.buf,
                segment_size: (g.datagrams > 1).then_some(g.segment),
            })
            .collect()
    }

    /// Forgets the first `sent` groups (handed to the kernel).
    pub fn consume(&mut self, sent: usize) {
        for mut g in self.groups.drain(..sent.min(self.groups.len())) {
            self.datagrams -= g.datagrams;
            g.buf.clear();
            self.spare.push(g.buf);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn push(batch: &mut TxBatch, now: Instant, len: usize, port: u16, at: Option<Instant>) {
        let added = batch
            .push_with::<()>(now, 1500, |buf| {
                buf[..len].fill(len as u8);
                Ok(Some((len, addr(port), at)))
            })
            .unwrap();
        assert!(added);
    }

    #[test]
    fn equal_datagrams_to_one_peer_share_a_gso_transmit_until_a_short_one_ends_it() {
        let now = Instant::now();
        let mut batch = TxBatch::new(100);
        for len in [1200, 1200, 1200, 700, 1200] {
            push(&mut batch, now, len, 1, None);
        }
        let due = batch.due(now);
        let shapes: Vec<(usize, Option<usize>)> = due.iter().map(|t| (t.contents.len(), t.segment_size)).collect();
        assert_eq!(shapes, vec![(4300, Some(1200)), (1200, None)]);
        assert!(due[0].contents[3600..].iter().all(|b| *b == 700u16 as u8));
        assert_eq!(batch.datagrams(), 5);
    }

    #[test]
    fn a_new_destination_or_a_larger_datagram_opens_a_new_group() {
        let now = Instant::now();
        let mut batch = TxBatch::new(100);
        push(&mut batch, now, 1000, 1, None);
        push(&mut batch, now, 1000, 2, None);
        push(&mut batch, now, 1200, 2, None);
        let due = batch.due(now);
        let shapes: Vec<(u16, usize)> = due.iter().map(|t| (t.destination.port(), t.contents.len())).collect();
        assert_eq!(shapes, vec![(1, 1000), (2, 1000), (2, 1200)]);
    }

    #[test]
    fn paced_datagrams_wait_for_their_time_and_nothing_overtakes_them() {
        let now = Instant::now();
        let later = now + Duration::from_millis(5);
        let mut batch = TxBatch::new(100);
        push(&mut batch, now, 1000, 1, Some(now + Duration::from_micros(100))); // within granularity
        push(&mut batch, now, 1000, 1, Some(later));
        push(&mut batch, now, 1000, 1, Some(later));
        assert_eq!(batch.due(now).len(), 1);
        assert_eq!(batch.next_release(), Some(later));
        batch.consume(1);
        assert!(batch.due(now).is_empty());
        let due = batch.due(later);
        assert_eq!((due.len(), due[0].contents.len(), due[0].segment_size), (1, 2000, Some(1000)));
    }

    #[test]
    fn nothing_to_send_leaves_the_batch_unchanged_and_errors_pass_through() {
        let now = Instant::now();
        let mut batch = TxBatch::new(2);
        push(&mut batch, now, 1000, 1, None);
        assert!(!batch.push_with::<()>(now, 1500, |_| Ok(None)).unwrap());
        assert_eq!(batch.push_with(now, 1500, |_| Err("boom")), Err("boom"));
        assert_eq!(batch.due(now)[0].contents.len(), 1000);
        assert!(!batch.is_full());
        push(&mut batch, now, 1000, 1, None);
        assert!(batch.is_full());
        batch.push_owned(addr(3), vec![7u8; 2500], Some(1000));
        assert_eq!(batch.datagrams(), 5);
        batch.consume(2);
        assert!(batch.is_empty() && batch.datagrams() == 0);
    }
}
