//! `nesquic-testcases`: the scenarios Nesquic runs (bulk download, many connections, handshakes,
//! multiplexed streams), declared as TOML files — the built-in ones under `scenarios/`, users'
//! own with `--testcase-file` — and resolved into a [`Workload`]: how many connections, how many
//! at a time, how many streams each, and how many bytes per stream.
//!
//! It knows what a scenario asks for, not how any library carries it out, how links are shaped
//! or how results are reported.
#![warn(missing_docs)]

pub mod size;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The scenario `nesquic run` uses when none is named.
pub const DEFAULT_TESTCASE: &str = "bulk";

/// Most streams per connection a scenario may ask for (libraries' stream limits are raised to
/// this; beyond it a "stream" scenario is really a different experiment).
pub const MAX_STREAMS: u32 = 1000;

/// The built-in scenarios, embedded so the binary needs no data directory.
const BUILTIN: &[(&str, &str)] = &[
    ("scenarios/bulk.toml", include_str!("../scenarios/bulk.toml")),
    ("scenarios/multi-conn.toml", include_str!("../scenarios/multi-conn.toml")),
    ("scenarios/handshakes.toml", include_str!("../scenarios/handshakes.toml")),
    ("scenarios/multi-stream.toml", include_str!("../scenarios/multi-stream.toml")),
];

/// Errors loading or resolving a scenario.
#[derive(Debug, thiserror::Error)]
pub enum TestcaseError {
    /// No scenario of that name.
    #[error("unknown testcase '{name}'; known testcases: {known} (or give a file with --testcase-file)")]
    Unknown {
        /// What was asked for.
        name: String,
        /// Comma-separated known names.
        known: String,
    },
    /// The file could not be read.
    #[error("read testcase file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not a valid scenario.
    #[error("testcase file {origin}: {message}")]
    Invalid {
        /// Where it came from.
        origin: String,
        /// What is wrong (TOML errors name the line).
        message: String,
    },
    /// A size is malformed.
    #[error(transparent)]
    Size(#[from] size::SizeError),
}

/// What a scenario asks the client to do. Every stream carries one request/response of the
/// benchmark protocol (docs/protocol.md), so the server side needs no scenario logic beyond how
/// many connections to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// Connections in total.
    pub connections: u32,
    /// Connections open at the same time (a new one starts when one finishes).
    pub parallel: u32,
    /// Concurrent streams per connection.
    pub streams: u32,
    /// Payload bytes per stream.
    pub size: u64,
}

impl Workload {
    /// One connection, one stream of `size` bytes: the protocol's original shape.
    pub fn bulk(size: u64) -> Self {
        Self { connections: 1, parallel: 1, streams: 1, size }
    }

    /// Whether this is the one-connection, one-stream shape every LUT speaks.
    pub fn is_single(&self) -> bool {
        self.connections == 1 && self.streams == 1
    }

    /// `4x1x10000000`: connections x streams per connection x bytes per stream.
    pub fn shape(&self) -> String {
        format!("{}x{}x{}", self.connections, self.streams, self.size)
    }

    /// "4 connection(s) (4 at once) x 1 stream(s) x 10000000 bytes", or for the one-connection,
    /// one-stream shape just "25000000 bytes".
    pub fn describe(&self) -> String {
        if self.is_single() {
            return format!("{} bytes", self.size);
        }
        format!(
            "{} connection(s) ({} at once) x {} stream(s) x {} bytes",
            self.connections, self.parallel, self.streams, self.size
        )
    }

    /// Payload bytes over all connections and streams; `None` past `u64::MAX` (which
    /// [`Workload::validate`] refuses).
    pub fn checked_total_bytes(&self) -> Option<u64> {
        u64::from(self.connections).checked_mul(u64::from(self.streams))?.checked_mul(self.size)
    }

    /// Payload bytes over all connections and streams. Saturates past `u64::MAX`: a workload
    /// that passed [`Workload::validate`] never gets there (release builds would wrap silently).
    pub fn total_bytes(&self) -> u64 {
        self.checked_total_bytes().unwrap_or(u64::MAX)
    }

    /// Checks the counts; `origin` names the scenario in the message.
    pub fn validate(&self, origin: &str) -> Result<(), TestcaseError> {
        let invalid = |message: String| Err(TestcaseError::Invalid { origin: origin.to_string(), message });
        if self.connections == 0 || self.streams == 0 || self.parallel == 0 {
            return invalid("connections, parallel and streams must be at least 1".into());
        }
        if self.parallel > self.connections {
            return invalid(format!(
                "parallel = {} exceeds connections = {}: at most every connection can be open at once",
                self.parallel, self.connections
            ));
        }
        if self.streams > MAX_STREAMS {
            return invalid(format!("streams = {} exceeds the limit of {MAX_STREAMS} per connection", self.streams));
        }
        if self.size == 0 {
            return invalid("size must be at least 1 byte".into());
        }
        if self.checked_total_bytes().is_none() {
            return invalid(format!(
                "{} connection(s) x {} stream(s) x {} bytes is more than {} bytes in all: use a smaller size or \
                 fewer connections or streams",
                self.connections,
                self.streams,
                self.size,
                u64::MAX
            ));
        }
        Ok(())
    }
}

/// A named scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Testcase {
    /// Name (`--testcase NAME`).
    pub name: String,
    /// One line for listings.
    pub description: String,
    /// What the client does (sizes as declared; `--size` and friends override them).
    pub workload: Workload,
    /// Where it was defined: `builtin:scenarios/NAME.toml` or a file path.
    pub origin: String,
}

/// A scenario file as written (sizes as text, `parallel` optional).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    description: String,
    #[serde(default = "one")]
    connections: u32,
    /// Default: all connections at once.
    parallel: Option<u32>,
    #[serde(default = "one")]
    streams: u32,
    size: String,
}

fn one() -> u32 {
    1
}

impl Testcase {
    /// Parses a scenario from TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, TestcaseError> {
        let file: File = toml::from_str(text)
            .map_err(|e| TestcaseError::Invalid { origin: origin.to_string(), message: e.to_string() })?;
        if file.name.is_empty() || !file.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(TestcaseError::Invalid {
                origin: origin.to_string(),
                message: format!("name {:?}: use letters, digits, '-' and '_'", file.name),
            });
        }
        let workload = Workload {
            connections: file.connections,
            parallel: file.parallel.unwrap_or(file.connections),
            streams: file.streams,
            size: size::parse(&file.size)?,
        };
        workload.validate(origin)?;
        Ok(Self { name: file.name, description: file.description, workload, origin: origin.to_string() })
    }

    /// Reads a scenario file (`--testcase-file`).
    pub fn load(path: &Path) -> Result<Self, TestcaseError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| TestcaseError::Read { path: path.to_path_buf(), source })?;
        Self::parse(&text, &path.display().to_string())
    }
}

/// The built-in scenarios, in listing order.
pub fn builtin() -> Vec<Testcase> {
    BUILTIN
        .iter()
        .map(|(file, text)| {
            // The embedded files are checked by this crate's tests; a broken one is a build defect.
            Testcase::parse(text, &format!("builtin:{file}")).unwrap_or_else(|e| panic!("built-in testcase: {e}"))
        })
        .collect()
}

/// Finds a built-in scenario by name.
pub fn find(name: &str) -> Result<Testcase, TestcaseError> {
    let all = builtin();
    let known = all.iter().map(|t| t.name.clone()).collect::<Vec<_>>().join(", ");
    all.into_iter()
        .find(|t| t.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| TestcaseError::Unknown { name: name.to_string(), known })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn builtin_scenarios_parse_and_bulk_is_the_default() {
        let names: Vec<String> = builtin().into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["bulk", "multi-conn", "handshakes", "multi-stream"]);
        let bulk = find(DEFAULT_TESTCASE).unwrap();
        assert_eq!(bulk.workload, Workload::bulk(25_000_000));
        assert!(bulk.workload.is_single());
        let mc = find("multi-conn").unwrap().workload;
        assert_eq!((mc.connections, mc.parallel, mc.streams, mc.total_bytes()), (4, 4, 1, 40_000_000));
        assert_eq!(find("handshakes").unwrap().workload.connections, 200);
        assert_eq!(find("multi-stream").unwrap().workload.streams, 8);
        assert_eq!(mc.shape(), "4x1x10000000");
        assert_eq!(mc.describe(), "4 connection(s) (4 at once) x 1 stream(s) x 10000000 bytes");
        assert_eq!(bulk.workload.describe(), "25000000 bytes");
    }

    #[test]
    fn unknown_names_and_bad_files_say_what_is_wrong() {
        let e = find("nope").unwrap_err().to_string();
        assert!(e.contains("unknown testcase 'nope'") && e.contains("multi-conn"), "{e}");
        let e = Testcase::parse("name = \"x\"\ndescription = \"d\"\nsize = \"1MB\"\nconection = 3\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("f.toml") && e.contains("conection"), "{e}");
        let e =
            Testcase::parse("name = \"x\"\ndescription = \"d\"\nsize = \"1MB\"\nconnections = 2\nparallel = 3\n", "f")
                .unwrap_err()
                .to_string();
        assert!(e.contains("parallel = 3 exceeds connections = 2"), "{e}");
        let e = Testcase::parse("name = \"x\"\ndescription = \"d\"\nsize = \"lots\"\n", "f").unwrap_err().to_string();
        assert!(e.contains("invalid size 'lots'"), "{e}");
    }

    #[test]
    fn a_total_past_u64_is_refused_not_wrapped() {
        // 2^32 connections x 2^32 bytes: 2^64, one past u64::MAX (it used to wrap to 0).
        let w = Workload { connections: u32::MAX, parallel: 1, streams: 1, size: 1 << 33 };
        let e = w.validate("f").unwrap_err().to_string();
        assert!(e.contains("is more than 18446744073709551615 bytes in all"), "{e}");
        let text = "name = \"x\"\ndescription = \"d\"\nsize = \"10000000000GB\"\nconnections = 1000\n";
        assert!(Testcase::parse(text, "f").unwrap_err().to_string().contains("in all"));
        let fits = Workload { connections: 4, parallel: 4, streams: 1000, size: u64::MAX / 4000 };
        assert!(fits.validate("f").is_ok());
        assert_eq!(fits.total_bytes(), u64::MAX / 4000 * 4000);
        // The largest size parses; 2^64 bytes is not a u64.
        assert_eq!(size::parse("18446744073709549568").unwrap(), 18_446_744_073_709_549_568);
        assert!(size::parse("18446744073709551616").is_err());
    }

    #[test]
    fn parallel_defaults_to_all_connections() {
        let t = Testcase::parse("name = \"x\"\ndescription = \"d\"\nsize = \"1MB\"\nconnections = 6\n", "f").unwrap();
        assert_eq!(t.workload, Workload { connections: 6, parallel: 6, streams: 1, size: 1_000_000 });
    }
}
