//! `nesquic-testcases`: the scenarios Nesquic runs (bulk download, many connections, handshakes,
//! impaired links), declared as data and resolved into concrete run parameters.
//!
//! It knows what a scenario asks for (sizes, connection and stream counts, link conditions), not
//! how any library carries it out. Today only `bulk` exists, as the built-in default.
#![warn(missing_docs)]

/// The one scenario available so far: one connection, one stream, a payload of the given size.
pub const DEFAULT_TESTCASE: &str = "bulk";

/// Names of the scenarios this build knows.
pub fn known() -> &'static [&'static str] {
    &[DEFAULT_TESTCASE]
}
