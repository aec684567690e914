//! What `nesquic-workload`'s calibration modes write, one JSON object a line: the types the
//! workload serializes and the calibration (`nesquic_engine::calibrate`) and tests read back.
//! They live in this crate's library because the workload is one of its binaries (it sees the
//! library without a new dependency) and the engine already depends on it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// `--calibrate ITERATIONS CALLS OUT`: one line per calibration function (`nesquic_cal_*`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrateLine {
    /// The probed function's symbol.
    pub function: String,
    /// Calls of it (and of its never-probed twin) timed.
    pub calls: u64,
    /// Per probed call, everything included, by the workload's own clock, ns.
    pub ns_per_call: f64,
    /// Per call of the never-probed twin: the true cost, ns.
    pub twin_ns_per_call: f64,
}

/// `--agent-calibrate CALLS ROUNDS OUT`: one line per round, mean ns per call of each function.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AgentCalibrateRound {
    /// `nesquic_agent_cal_count` (hooked in count mode under the agent).
    pub count_ns: f64,
    /// `nesquic_agent_cal_time` (hooked in time mode under the agent).
    pub time_ns: f64,
    /// `nesquic_agent_cal_twin`, never hooked.
    pub twin_ns: f64,
}

/// `--io-calibrate CALLS ROUNDS OUT`: one line per round, mean ns per call, through libc (which
/// the agent wraps) and straight to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IoCalibrateRound {
    /// `sendmsg` of one datagram through libc.
    pub sendmsg_libc_ns: f64,
    /// The same as a raw system call.
    pub sendmsg_kernel_ns: f64,
    /// `recvmsg` that finds nothing (EAGAIN) through libc.
    pub recvmsg_libc_ns: f64,
    /// The same as a raw system call.
    pub recvmsg_kernel_ns: f64,
}

/// `items` as JSON lines, each ended by a newline.
pub fn to_lines<T: Serialize>(items: &[T]) -> Result<String, serde_json::Error> {
    let mut text = String::new();
    for item in items {
        text.push_str(&serde_json::to_string(item)?);
        text.push('\n');
    }
    Ok(text)
}

/// The JSON lines of `text` (blank lines skipped).
pub fn from_lines<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, serde_json::Error> {
    text.lines().filter(|l| !l.trim().is_empty()).map(serde_json::from_str).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines as the workload wrote them with `format!` before these types existed: the
    /// typed form must read them and write the same JSON back.
    #[test]
    fn the_typed_lines_read_and_write_the_workloads_old_json() {
        let old_calibrate = "{\"function\":\"nesquic_cal_push\",\"calls\":2000,\"ns_per_call\":1234.5678,\"twin_ns_per_call\":1100.25}\n\
                             {\"function\":\"nesquic_cal_nop\",\"calls\":2000,\"ns_per_call\":1300.5,\"twin_ns_per_call\":1099.75}\n";
        let lines: Vec<CalibrateLine> = from_lines(old_calibrate).expect("old --calibrate lines");
        assert_eq!(
            lines[0],
            CalibrateLine {
                function: "nesquic_cal_push".into(),
                calls: 2000,
                ns_per_call: 1234.5678,
                twin_ns_per_call: 1100.25
            }
        );
        assert_eq!(to_lines(&lines).expect("json"), old_calibrate);

        let old_agent = "{\"count_ns\":3.125,\"time_ns\":27.5,\"twin_ns\":1.75}\n";
        let rounds: Vec<AgentCalibrateRound> = from_lines(old_agent).expect("old --agent-calibrate line");
        assert_eq!(rounds, [AgentCalibrateRound { count_ns: 3.125, time_ns: 27.5, twin_ns: 1.75 }]);
        assert_eq!(to_lines(&rounds).expect("json"), old_agent);

        let old_io = "{\"sendmsg_libc_ns\":1500.5,\"sendmsg_kernel_ns\":1480.25,\"recvmsg_libc_ns\":300.5,\"recvmsg_kernel_ns\":290.75}\n";
        let io: Vec<IoCalibrateRound> = from_lines(old_io).expect("old --io-calibrate line");
        assert_eq!(io[0].recvmsg_kernel_ns, 290.75);
        assert_eq!(to_lines(&io).expect("json"), old_io);
        // A field the reader needs and the line lacks is an error, not a zero.
        assert!(from_lines::<AgentCalibrateRound>("{\"count_ns\":1.0,\"time_ns\":2.0}").is_err());
    }
}
