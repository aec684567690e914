//! From what the engine observed (process exits, a repetition's outcome) to the record's figures.

use nesquic_record::figures::{ProcessFigures, RepetitionFigures};

use crate::process::Exit;
use crate::repetition::RepetitionOutcome;

/// A process's CPU accounting from its exit (`wait4` rusage).
pub fn process_figures(e: Exit) -> ProcessFigures {
    {
        let user = e.user.as_secs_f64();
        let system = e.system.as_secs_f64();
        let wall = e.wall.as_secs_f64();
        ProcessFigures {
            cpu_user_s: user,
            cpu_system_s: system,
            cpu_total_s: user + system,
            wall_s: wall,
            cpu_utilisation_pct: if wall > 0.0 { 100.0 * (user + system) / wall } else { 0.0 },
            max_rss_kib: e.max_rss_kib,
        }
    }
}

/// The figures of one repetition from what the engine observed (probes, profile and the
/// per-side extras are filled in by the caller).
pub fn repetition_figures(o: &RepetitionOutcome) -> RepetitionFigures {
    {
        let transfer_s = o.client_result.transfer_ns as f64 / 1e9;
        RepetitionFigures {
            bytes: o.client_result.bytes,
            // An adapter's client exits non-zero on any verification failure, and an endpoint's
            // download is checked before an outcome exists: only a perf endpoint's is not.
            payload_verified: o.payload_verified,
            goodput_mbps: if transfer_s > 0.0 { o.client_result.bytes as f64 * 8.0 / transfer_s / 1e6 } else { 0.0 },
            transfer_s,
            handshake_ms: o.client_result.handshake_ns as f64 / 1e6,
            server: process_figures(o.server),
            client: process_figures(o.client),
            lut_qlogs: o.lut_qlogs.clone(),
            pids: Vec::new(),
            io_settings: Vec::new(),
            rcvbuf_drops: Vec::new(),
            rcvbuf_drops_cost: None,
            threads: Vec::new(),
            threads_cost: None,
            io_layer_counters: Vec::new(),
            probes: None,
            agents: Vec::new(),
            remote_calibration: Vec::new(),
            profile: None,
            workload: None,
        }
    }
}
