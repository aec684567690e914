//! Figures of a multi-connection or multi-stream repetition, derived from the client's
//! per-connection report: per-connection and per-stream goodput, Jain's fairness, handshakes per
//! second and handshake latency percentiles; and the scenario a run recorded.

use nesquic_protocol::report::ClientResult;
use nesquic_testcases::{Testcase, Workload};
use serde::{Deserialize, Serialize};

use crate::stats::Spread;
use crate::RecordError;

/// What a run's scenario was, as recorded in summary.json and qlog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestcaseInfo {
    /// Name.
    pub name: String,
    /// Where it was defined.
    pub origin: String,
    /// The workload after overrides.
    pub workload: Workload,
}

impl TestcaseInfo {
    const UNRECORDED: &'static str = "";

    /// A placeholder for records that have no testcase.
    pub fn unrecorded() -> Self {
        Self {
            name: Self::UNRECORDED.into(),
            origin: Self::UNRECORDED.into(),
            workload: Workload { connections: 1, parallel: 1, streams: 1, size: 0 },
        }
    }

    /// Whether this is [`TestcaseInfo::unrecorded`].
    pub fn is_unrecorded(&self) -> bool {
        self.name == Self::UNRECORDED
    }

    /// What a run recorded before testcases existed ran: one connection, one stream of `size`.
    pub fn bulk_before_testcases(size: u64) -> Self {
        Self {
            name: nesquic_testcases::DEFAULT_TESTCASE.into(),
            origin: "recorded before testcases existed (one connection, one stream)".into(),
            workload: Workload { connections: 1, parallel: 1, streams: 1, size },
        }
    }
}

impl From<&Testcase> for TestcaseInfo {
    fn from(t: &Testcase) -> Self {
        Self { name: t.name.clone(), origin: t.origin.clone(), workload: t.workload }
    }
}

/// Handshake latency distribution, ms (nearest-rank percentiles).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Percentiles {
    /// Fastest.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest.
    pub max: f64,
}

impl Percentiles {
    /// Of `values` (at least one).
    pub fn of(mut values: Vec<f64>) -> Option<Self> {
        values.sort_by(f64::total_cmp);
        let rank = |p: f64| nesquic_stats::nearest_rank(&values, p);
        Some(Self { min: *values.first()?, p50: rank(50.0)?, p90: rank(90.0)?, p99: rank(99.0)?, max: *values.last()? })
    }
}

/// Jain's fairness index of `x`: 1 when all are equal, 1/n when one takes everything.
pub fn jain(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    (x.len() > 1 && squares > 0.0).then(|| sum * sum / (x.len() as f64 * squares))
}

/// Figures of a multi-connection or multi-stream repetition, from the client's per-connection
/// report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkloadFigures {
    /// Connections run.
    pub connections: u32,
    /// Streams per connection.
    pub streams_per_connection: u32,
    /// First connection attempt to last byte verified, s.
    pub elapsed_s: f64,
    /// Connections completed (handshake, transfer, close) per second of `elapsed_s`.
    pub handshakes_per_s: f64,
    /// Handshake latencies over all connections.
    pub handshake_ms: Percentiles,
    /// Each connection's goodput (its bytes over its request-to-last-byte time), Mbit/s.
    pub connection_goodput_mbps: Spread,
    /// Jain's index over the connections' goodputs (with several connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_fairness: Option<f64>,
    /// Each stream's goodput, Mbit/s.
    pub stream_goodput_mbps: Spread,
    /// Jain's index over all streams' goodputs (with several streams per connection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_fairness: Option<f64>,
}

fn mbps(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 8e3 / ns as f64
    }
}

impl WorkloadFigures {
    /// Checks the client's report against what was asked (every connection and stream present,
    /// every stream's payload complete) and derives the figures. `None` for the single
    /// connection, single stream shape, whose payload is checked too: a client (an exec LUT
    /// above all) that reports fewer bytes than asked did not deliver the payload.
    pub fn of(result: &ClientResult, workload: &Workload) -> Result<Option<Self>, RecordError> {
        if workload.is_single() {
            if result.bytes != workload.size {
                return Err(RecordError::Report(format!(
                    "the client reported {} bytes, the testcase asked for {}: the payload was not delivered whole",
                    result.bytes, workload.size
                )));
            }
            return Ok(None);
        }
        let c = &result.connections;
        if c.len() != workload.connections as usize {
            return Err(RecordError::Report(format!(
                "the client reported {} connection(s), the testcase asked for {}",
                c.len(),
                workload.connections
            )));
        }
        for (i, conn) in c.iter().enumerate() {
            if conn.streams.len() != workload.streams as usize || conn.streams.iter().any(|s| s.bytes != workload.size)
            {
                return Err(RecordError::Report(format!(
                    "connection {i}: {} stream(s) with {:?} bytes; the testcase asked for {} of {} bytes",
                    conn.streams.len(),
                    conn.streams.iter().map(|s| s.bytes).collect::<Vec<_>>(),
                    workload.streams,
                    workload.size
                )));
            }
        }
        let elapsed_s = result.elapsed_ns as f64 / 1e9;
        let conn_goodput: Vec<f64> = c.iter().map(|x| mbps(x.bytes(), x.transfer_ns)).collect();
        let stream_goodput: Vec<f64> =
            c.iter().flat_map(|x| x.streams.iter().map(|s| mbps(s.bytes, s.transfer_ns))).collect();
        let handshakes: Vec<f64> = c.iter().map(|x| x.handshake_ns as f64 / 1e6).collect();
        // Invariants: validate() guarantees at least one connection with one stream.
        let (Some(connection_goodput_mbps), Some(stream_goodput_mbps), Some(handshake_ms)) = (
            Spread::of(conn_goodput.iter().copied()),
            Spread::of(stream_goodput.iter().copied()),
            Percentiles::of(handshakes),
        ) else {
            return Err(RecordError::Report("the client reported no connections".into()));
        };
        Ok(Some(Self {
            connections: workload.connections,
            streams_per_connection: workload.streams,
            elapsed_s,
            handshakes_per_s: if elapsed_s > 0.0 { c.len() as f64 / elapsed_s } else { 0.0 },
            handshake_ms,
            connection_goodput_mbps,
            // Fairness is about sharing: only when every connection ran at the same time.
            connection_fairness: (workload.parallel == workload.connections).then(|| jain(&conn_goodput)).flatten(),
            stream_goodput_mbps,
            stream_fairness: (workload.streams > 1).then(|| jain(&stream_goodput)).flatten(),
        }))
    }

    /// Lines for the terminal.
    pub fn describe(&self) -> Vec<String> {
        let h = &self.handshake_ms;
        let mut out = Vec::new();
        if self.connections > 1 {
            out.push(format!(
                "{} connections in {:.3} s: {:.1} connections/s; handshake ms min {:.2} p50 {:.2} p90 {:.2} p99 {:.2} max {:.2}",
                self.connections, self.elapsed_s, self.handshakes_per_s, h.min, h.p50, h.p90, h.p99, h.max
            ));
            out.push(format!(
                "per-connection goodput Mbit/s: min {:.1} median {:.1} max {:.1}{}",
                self.connection_goodput_mbps.min,
                self.connection_goodput_mbps.median,
                self.connection_goodput_mbps.max,
                self.connection_fairness.map(|j| format!("; Jain fairness {j:.3}")).unwrap_or_default()
            ));
        }
        if self.streams_per_connection > 1 {
            out.push(format!(
                "per-stream goodput Mbit/s: min {:.1} median {:.1} max {:.1}{}",
                self.stream_goodput_mbps.min,
                self.stream_goodput_mbps.median,
                self.stream_goodput_mbps.max,
                self.stream_fairness.map(|j| format!("; Jain fairness {j:.3}")).unwrap_or_default()
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use nesquic_protocol::report::{ConnectionResult, StreamResult};

    use super::*;

    #[test]
    fn jain_and_percentiles() {
        assert_eq!(jain(&[5.0, 5.0, 5.0]), Some(1.0));
        assert!((jain(&[10.0, 0.0]).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(jain(&[3.0]), None);
        let p = Percentiles::of((1..=100).map(f64::from).collect()).unwrap();
        assert_eq!((p.min, p.p50, p.p90, p.p99, p.max), (1.0, 50.0, 90.0, 99.0, 100.0));
        let p = Percentiles::of(vec![7.0]).unwrap();
        assert_eq!((p.p50, p.p99), (7.0, 7.0));
    }

    fn conn(start_ms: u64, handshake_ms: u64, streams: &[(u64, u64)]) -> ConnectionResult {
        ConnectionResult {
            start_ns: start_ms * 1_000_000,
            handshake_ns: handshake_ms * 1_000_000,
            transfer_ns: streams.iter().map(|s| s.1).max().unwrap() * 1_000_000,
            streams: streams.iter().map(|&(bytes, ms)| StreamResult { bytes, transfer_ns: ms * 1_000_000 }).collect(),
        }
    }

    #[test]
    fn figures_from_a_client_report() {
        let w = Workload { connections: 2, parallel: 2, streams: 2, size: 1_000_000 };
        let report = ClientResult::from_connections(
            vec![conn(0, 2, &[(1_000_000, 8), (1_000_000, 8)]), conn(1, 4, &[(1_000_000, 16), (1_000_000, 8)])],
            21_000_000,
        );
        // First request at 2 ms, last byte at 1 + 4 + 16 = 21 ms.
        assert_eq!((report.bytes, report.transfer_ns), (4_000_000, 19_000_000));
        let f = WorkloadFigures::of(&report, &w).unwrap().unwrap();
        assert_eq!(f.connection_goodput_mbps.max, 2e6 * 8.0 / 8e-3 / 1e6);
        assert_eq!(f.connection_goodput_mbps.min, 2e6 * 8.0 / 16e-3 / 1e6);
        assert!((f.connection_fairness.unwrap() - 0.9).abs() < 1e-9, "{:?}", f.connection_fairness);
        assert!((f.handshakes_per_s - 2.0 / 0.021).abs() < 1e-6);
        assert_eq!((f.handshake_ms.min, f.handshake_ms.max), (2.0, 4.0));
        // A missing stream or a short payload is an error, not a figure.
        let mut short = report.clone();
        short.connections[1].streams[0].bytes -= 1;
        assert!(WorkloadFigures::of(&short, &w).unwrap_err().to_string().contains("connection 1"));
        let mut missing = report;
        missing.connections.pop();
        assert!(WorkloadFigures::of(&missing, &w).is_err());
    }

    #[test]
    fn a_single_stream_is_checked_against_the_size_too() {
        let w = Workload::bulk(1_000_000);
        let whole = ClientResult::from_connections(vec![conn(0, 2, &[(1_000_000, 8)])], 10_000_000);
        assert!(WorkloadFigures::of(&whole, &w).unwrap().is_none());
        for bytes in [999_999, 1_000_001, 0] {
            let short = ClientResult::from_connections(vec![conn(0, 2, &[(bytes, 8)])], 10_000_000);
            let e = WorkloadFigures::of(&short, &w).unwrap_err().to_string();
            assert!(e.contains(&format!("reported {bytes} bytes, the testcase asked for 1000000")), "{e}");
        }
    }
}
