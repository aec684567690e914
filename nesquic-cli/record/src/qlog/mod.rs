//! qlog output: one JSON-SEQ trace per role (`server.sqlog`, `client.sqlog`) with Nesquic's own
//! events in the `nesquic` namespace (documented in docs/qlog.md), and a strict reader for them.

pub mod qvis;
pub mod reader;
mod time;
pub mod writer;

/// The `event_schemas` entry naming Nesquic's namespace.
pub const NESQUIC_SCHEMA: &str = "urn:ietf:params:qlog:events:nesquic";
/// The QUIC event schema (for merged library events).
pub const QUIC_SCHEMA: &str = "urn:ietf:params:qlog:events:quic";

/// `20261122-194501` (UTC), for directory names.
pub fn time_stamp(t: std::time::SystemTime) -> String {
    let s = time::rfc3339(t);
    // "2026-11-22T19:45:01.123Z" -> "20261122-194501"
    let digits: String = s[..19].chars().filter(char::is_ascii_digit).collect();
    format!("{}-{}", &digits[..8], &digits[8..])
}
