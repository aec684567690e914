//! Why a LUT cannot be resolved, started or given a setting: the one error type of the crate's
//! checks, below the descriptors and the seam that return it.

use std::path::PathBuf;

use nesquic_protocol::cli::IoMode;

/// Errors resolving a LUT.
#[derive(Debug, thiserror::Error)]
pub enum LutError {
    /// No adapter of that name.
    #[error("unknown LUT '{name}'; known LUTs: {known}")]
    Unknown {
        /// What the user asked for.
        name: String,
        /// Comma-separated known names.
        known: String,
    },
    /// The adapter exists but its executable is not built.
    #[error("LUT executable {path} not found; {how}")]
    NotBuilt {
        /// Where it was expected.
        path: PathBuf,
        /// How to build it ([`Descriptor::build_hint`](crate::Descriptor::build_hint)).
        how: &'static str,
    },
    /// The LUT cannot run on the requested I/O path.
    #[error("LUT '{lut}' does not support --io {io}; it supports: {supported}")]
    UnsupportedIo {
        /// The LUT.
        lut: &'static str,
        /// What was asked for.
        io: IoMode,
        /// What it supports.
        supported: String,
    },
    /// The `exec` LUT's server command names no executable file.
    #[error("--server-cmd {command:?}: its first word is not an executable file (give a path or a name on PATH)")]
    ExecNotFound {
        /// The command.
        command: String,
    },
    /// `--server-cmd/--client-cmd` with a LUT other than `exec`.
    #[error("--server-cmd/--client-cmd only apply to --lut exec")]
    CommandsWithoutExec,
    /// `--lut exec` without its commands.
    #[error("--lut exec needs --server-cmd and --client-cmd (see docs/protocol.md for the NESQUIC_* variables)")]
    ExecWithoutCommands,
    /// The LUT's executable speaks only the one-connection, one-stream protocol on this path.
    #[error("LUT '{lut}' with --io {io} runs one connection with one stream ({why}); this testcase asks for {connections} connection(s) with {streams} stream(s) each{hint}")]
    UnsupportedWorkload {
        /// The LUT.
        lut: &'static str,
        /// Why ([`Descriptor::single_workload_reason`](crate::Descriptor::single_workload_reason)).
        why: &'static str,
        /// The I/O path.
        io: IoMode,
        /// Connections asked for.
        connections: u32,
        /// Streams per connection asked for.
        streams: u32,
        /// Where it is supported, if anywhere.
        hint: String,
    },
    /// A socket buffer request that is neither a size nor a multiple of the kernel's default.
    #[error("{text}: {why}")]
    BadBuffer {
        /// What was given.
        text: String,
        /// Why it cannot be used.
        why: String,
    },
    /// A `--lut-opt` the LUT does not understand on this I/O path.
    #[error("LUT '{lut}' with --io {io} does not understand --lut-opt {option}: {why}. {lut} accepts: {known}")]
    BadOption {
        /// The LUT.
        lut: &'static str,
        /// The I/O path.
        io: IoMode,
        /// What was given.
        option: String,
        /// Why not (unknown, a value it lacks, another I/O path's, what its library cannot do).
        why: String,
        /// What it accepts.
        known: String,
    },
    /// Driving a stack's own endpoint failed (docs/luts.md, "Endpoints").
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
}

/// Why a stack's own endpoint (a recipe, `lut-adapters/endpoints/`) cannot be read, prepared or
/// trusted.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// A recipe that does not parse or names an unknown placeholder.
    #[error("endpoint recipe {origin}: {why}")]
    Recipe {
        /// The file.
        origin: String,
        /// What is wrong.
        why: String,
    },
    /// A template with an unclosed `{`.
    #[error("endpoint recipe template {template:?}: a '{{' without its '}}'")]
    Template {
        /// The template.
        template: String,
    },
    /// A placeholder with no value here (a build step's `{dep.NAME}` without `--lut-dep`).
    #[error("endpoint recipe: no value for {{{name}}} here")]
    Placeholder {
        /// Its name.
        name: String,
    },
    /// Writing or reading the run's files.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was done.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The downloaded file differs from the payload served.
    #[error("the endpoint client's download {path} differs from the payload served: {why}")]
    Mismatch {
        /// The downloaded file.
        path: PathBuf,
        /// Where and how (first differing offset, or the lengths).
        why: String,
    },
}
