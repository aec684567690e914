//! Rows of the probes' JSON form for the tests that build typed records by hand (the gate's and
//! the findings'): one shape, written once.

use serde_json::json;

/// What one syscall row counts.
#[derive(Clone, Copy, Default)]
pub(crate) struct SyscallCounts {
    /// Calls that moved data.
    pub moved: u64,
    /// Calls that returned EAGAIN.
    pub eagain: u64,
    /// Messages the calls moved.
    pub messages: u64,
    /// Datagrams they moved.
    pub datagrams: u64,
    /// Bytes they moved.
    pub bytes: u64,
}

/// A probe row of syscall `name` (`sendmsg`, `recvmmsg`) in `direction` (`send`, `recv`).
pub(crate) fn syscall(name: &str, direction: &str, c: SyscallCounts) -> serde_json::Value {
    json!({
        "syscall": name, "direction": direction, "calls": c.moved + c.eagain, "total_ns": 0, "p50_le_ns": 0,
        "p99_le_ns": 0, "hist": [], "errors": 0, "eagain": c.eagain, "bytes": c.bytes, "datagrams": c.datagrams,
        "messages": c.messages, "mechanism": "tracepoint"
    })
}
