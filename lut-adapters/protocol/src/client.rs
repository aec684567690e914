//! The client's side of a whole workload (docs/protocol.md, "Several connections and streams"),
//! independent of any QUIC library: which connection may start when (`parallel` at a time), each
//! connection's streams and timings, and the `done` report, in the form the quinn client gives it.
//!
//! An adapter keeps one [`ClientRun`]; it starts a library connection for every
//! [`ClientConnection`] that [`ClientRun::next_connection`] hands out, feeds that connection's
//! streams, and gives it back with [`ClientRun::finish`] once every stream is verified.

use std::time::Instant;

pub use nesquic_testcases::Workload;

use crate::report::{ClientResult, ConnectionResult};
use crate::stream::ClientStream;

/// A connection given back before all its streams were verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("connection {index} ended with {verified} of {streams} streams verified")]
pub struct Unverified {
    /// The connection.
    pub index: u32,
    /// Streams verified.
    pub verified: usize,
    /// Streams it had.
    pub streams: usize,
}

/// One connection of the workload: its start, handshake and streams.
#[derive(Debug)]
pub struct ClientConnection {
    index: u32,
    started: Instant,
    established: Option<Instant>,
    streams: Vec<ClientStream>,
}

impl ClientConnection {
    /// Its place in the workload (0-based, in start order).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The handshake completed (the first call counts).
    pub fn on_established(&mut self) {
        self.established.get_or_insert_with(Instant::now);
    }

    /// Whether the handshake completed.
    pub fn is_established(&self) -> bool {
        self.established.is_some()
    }

    /// The streams, in the order they are to be opened.
    pub fn streams_mut(&mut self) -> &mut [ClientStream] {
        &mut self.streams
    }

    /// Stream `i` (in opening order).
    pub fn stream_mut(&mut self, i: usize) -> Option<&mut ClientStream> {
        self.streams.get_mut(i)
    }

    /// Streams it opens.
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    /// Bytes verified so far on all its streams.
    pub fn received(&self) -> u64 {
        self.streams.iter().map(ClientStream::received).sum()
    }

    /// Whether every stream's payload was verified.
    pub fn is_verified(&self) -> bool {
        self.streams.iter().all(ClientStream::is_verified)
    }

    /// Its figures, relative to the workload's first connection attempt `first`.
    fn result(&self, first: Instant) -> Result<ConnectionResult, Unverified> {
        let unverified = || Unverified {
            index: self.index,
            verified: self.streams.iter().filter(|s| s.is_verified()).count(),
            streams: self.streams.len(),
        };
        let streams =
            self.streams.iter().map(ClientStream::result).collect::<Option<Vec<_>>>().ok_or_else(unverified)?;
        let established = self.established.ok_or_else(unverified)?;
        // First request sent to last byte verified (the quinn client's figure: its requests go
        // out right after the handshake).
        let first_request = self.streams.iter().filter_map(ClientStream::request_sent).min().unwrap_or(established);
        let last_byte = self.streams.iter().filter_map(ClientStream::verified_at).max().unwrap_or(first_request);
        Ok(ConnectionResult {
            start_ns: self.started.saturating_duration_since(first).as_nanos() as u64,
            handshake_ns: established.saturating_duration_since(self.started).as_nanos() as u64,
            transfer_ns: last_byte.saturating_duration_since(first_request).as_nanos() as u64,
            streams,
        })
    }
}

/// The whole workload on the client: hands out connections, collects their figures.
#[derive(Debug)]
pub struct ClientRun {
    shape: Workload,
    first: Option<Instant>,
    started: u32,
    open: u32,
    finished: Vec<(u32, ConnectionResult)>,
    finished_bytes: u64,
    last_byte: Option<Instant>,
}

impl ClientRun {
    /// A run of `shape` (counts below 1 count as 1).
    pub fn new(shape: Workload) -> Self {
        let shape = Workload {
            connections: shape.connections.max(1),
            parallel: shape.parallel.clamp(1, shape.connections.max(1)),
            streams: shape.streams.max(1),
            size: shape.size,
        };
        Self { shape, first: None, started: 0, open: 0, finished: Vec::new(), finished_bytes: 0, last_byte: None }
    }

    /// What it runs.
    pub fn shape(&self) -> Workload {
        self.shape
    }

    /// The next connection to start, if fewer than `parallel` are open and not all were started.
    /// Its handshake clock starts now: call this right before starting the library's connection.
    pub fn next_connection(&mut self) -> Option<ClientConnection> {
        if self.open >= self.shape.parallel || self.started >= self.shape.connections {
            return None;
        }
        let now = Instant::now();
        self.first.get_or_insert(now);
        let index = self.started;
        self.started += 1;
        self.open += 1;
        Some(ClientConnection {
            index,
            started: now,
            established: None,
            streams: (0..self.shape.streams).map(|_| ClientStream::new(self.shape.size)).collect(),
        })
    }

    /// Records a connection whose streams were all verified; frees its slot.
    pub fn finish(&mut self, connection: ClientConnection) -> Result<(), Unverified> {
        let first = self.first.unwrap_or(connection.started);
        let result = connection.result(first)?;
        self.open = self.open.saturating_sub(1);
        self.finished_bytes += result.bytes();
        let last = connection.streams.iter().filter_map(ClientStream::verified_at).max();
        self.last_byte = self.last_byte.max(last);
        self.finished.push((connection.index, result));
        Ok(())
    }

    /// Whether every connection was started and finished.
    pub fn is_complete(&self) -> bool {
        self.finished.len() as u32 == self.shape.connections
    }

    /// Bytes verified on finished connections (add the open ones' [`ClientConnection::received`]).
    pub fn finished_bytes(&self) -> u64 {
        self.finished_bytes
    }

    /// The `done` report once complete: the original one-connection form for a single
    /// connection with one stream, else every connection in start order with `elapsed_ns` from
    /// the first connection attempt to the last byte verified.
    pub fn report(&self) -> Option<ClientResult> {
        if !self.is_complete() {
            return None;
        }
        let mut finished = self.finished.clone();
        finished.sort_by_key(|(index, _)| *index);
        let elapsed = match (self.first, self.last_byte) {
            (Some(first), Some(last)) => last.saturating_duration_since(first).as_nanos() as u64,
            _ => 0,
        };
        ClientResult::of_run(self.shape.is_single(), finished.into_iter().map(|(_, c)| c).collect(), elapsed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::payload::{decode_request, fill_pattern};

    /// Verifies every stream of `c` with a payload of `size` bytes.
    fn serve(c: &mut ClientConnection, size: u64) {
        c.on_established();
        for s in c.streams_mut() {
            let request = s.request().unwrap();
            assert_eq!(decode_request(&request), Some(size));
            let mut data = vec![0u8; size as usize];
            fill_pattern(0, &mut data);
            s.on_payload(&data, true).unwrap();
        }
    }

    #[test]
    fn connections_start_parallel_at_a_time_and_report_in_start_order() {
        let mut run = ClientRun::new(Workload { connections: 3, parallel: 2, streams: 2, size: 1000 });
        let mut a = run.next_connection().unwrap();
        let mut b = run.next_connection().unwrap();
        assert!(run.next_connection().is_none(), "two at a time");
        serve(&mut b, 1000);
        run.finish(b).unwrap();
        let mut c = run.next_connection().unwrap();
        assert_eq!(c.index(), 2);
        assert!(run.next_connection().is_none() && !run.is_complete() && run.report().is_none());
        serve(&mut a, 1000);
        serve(&mut c, 1000);
        assert_eq!(a.received(), 2000);
        run.finish(c).unwrap();
        run.finish(a).unwrap();
        assert_eq!(run.finished_bytes(), 6000);
        assert!(run.next_connection().is_none() && run.is_complete());
        let report = run.report().unwrap();
        assert_eq!(report.bytes, 6000);
        assert_eq!(report.connections.len(), 3);
        assert_eq!(report.connections[0].start_ns, 0, "start times count from the first connection");
        assert!(report.connections.iter().all(|c| c.streams.len() == 2 && c.bytes() == 2000));
        assert!(report.elapsed_ns >= report.connections[2].start_ns);
    }

    #[test]
    fn an_unverified_connection_is_an_error_and_one_connection_reports_the_short_form() {
        let mut run = ClientRun::new(Workload::bulk(10));
        let mut c = run.next_connection().unwrap();
        c.on_established();
        let err = run.finish(c).unwrap_err();
        assert_eq!(err, Unverified { index: 0, verified: 0, streams: 1 });
        let mut run = ClientRun::new(Workload::bulk(10));
        let mut c = run.next_connection().unwrap();
        serve(&mut c, 10);
        run.finish(c).unwrap();
        let report = run.report().unwrap();
        assert_eq!((report.bytes, report.elapsed_ns, report.connections.len()), (10, 0, 0));
    }
}
