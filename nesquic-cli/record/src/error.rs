//! What can go wrong reading or writing records and traces.

use std::path::PathBuf;

/// Errors of the run model.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A file could not be read or written.
    #[error("{}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// JSON that is not valid, or does not have the expected shape.
    #[error("{what}: {}", if source.is_data() { "not the expected shape" } else { "not valid JSON" })]
    Json {
        /// What was being read or written.
        what: String,
        /// Why.
        source: serde_json::Error,
    },
    /// A qlog file that is not a valid JSON-SEQ trace.
    #[error("{} is not a valid JSON-SEQ qlog: {problem}", path.display())]
    Qlog {
        /// The file.
        path: PathBuf,
        /// The first problem, with its record number and byte offset.
        problem: String,
    },
    /// Input that cannot be used (a rule, a threshold file, a trace missing what is needed).
    #[error("{0}")]
    Invalid(String),
    /// A file nesquic refuses to read or write as root: a link, a device, a path outside the run
    /// directory, a directory another user controls.
    #[error("{0}")]
    Unsafe(String),
    /// A report that contradicts what was asked for.
    #[error("{0}")]
    Report(String),
}
