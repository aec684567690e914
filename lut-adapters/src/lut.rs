//! The LUT adapter seam: what the orchestrator needs to know about a library under test and how
//! to start its server and client processes.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::tls::CertFiles;
pub use nesquic_testcases::Workload;

pub use nesquic_protocol::cli::IoMode;
pub use nesquic_protocol::options::{LutOpt, OptionKind};

pub use crate::descriptor::{Descriptor, OptionSpec, Refusal, SourceBuild};

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
        /// How to build it ([`Descriptor::build_hint`]).
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
        /// Why ([`Descriptor::single_workload_reason`]).
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
}

/// Bytes for a socket buffer request: a size (`4MB`) or a multiple of the kernel's default
/// (`16x`, read from /proc/sys/net/core/`sysctl`, e.g. `rmem_default`).
pub fn socket_buffer(text: &str, sysctl: &str) -> Result<u64, LutError> {
    let bad = |why: String| LutError::BadBuffer { text: text.to_string(), why };
    let Some(factor) = text.strip_suffix('x') else {
        return nesquic_testcases::size::parse(text).map_err(|e| bad(e.to_string()));
    };
    let factor: f64 = factor.parse().map_err(|_| bad("expected SIZE or Nx (16x)".into()))?;
    if factor <= 0.0 || !factor.is_finite() {
        return Err(bad("the multiple must be positive".into()));
    }
    let path = format!("/proc/sys/net/core/{sysctl}");
    let text = std::fs::read_to_string(&path).map_err(|e| bad(format!("read {path}: {e}")))?;
    let default: u64 = text.trim().parse().map_err(|_| bad(format!("{path} holds {:?}", text.trim())))?;
    Ok((default as f64 * factor) as u64)
}

/// Parameters of one server process.
#[derive(Debug, Clone)]
pub struct ServerSpec<'a> {
    /// Address to bind (port 0 picks one; the server reports it).
    pub listen: SocketAddr,
    /// What the client will ask for: the server serves `connections` connections, then exits.
    pub workload: Workload,
    /// Certificate and key.
    pub certs: &'a CertFiles,
    /// I/O path.
    pub io: IoMode,
    /// Where the library writes its own qlog, if asked (`--lut-qlog`).
    pub qlog: Option<&'a std::path::Path>,
    /// LUT-specific settings (`--lut-opt KEY=VALUE`), checked against [`Descriptor::options`].
    pub options: &'a [LutOpt],
}

/// Parameters of one client process.
#[derive(Debug, Clone)]
pub struct ClientSpec<'a> {
    /// Server address.
    pub connect: SocketAddr,
    /// Trust anchor (the server's certificate).
    pub certs: &'a CertFiles,
    /// Connections, streams and payload bytes per stream to request.
    pub workload: Workload,
    /// I/O path.
    pub io: IoMode,
    /// Where the library writes its own qlog, if asked (`--lut-qlog`).
    pub qlog: Option<&'a std::path::Path>,
    /// LUT-specific settings (`--lut-opt KEY=VALUE`), checked against [`Descriptor::options`].
    pub options: &'a [LutOpt],
}

/// A library under test: its [`Descriptor`] (data), plus behaviour only where a LUT truly
/// differs: where its executable is and how it is started (`exec` runs the user's commands; a
/// `--lut-path` build has its own binary and version). Process arguments follow one convention
/// for every LUT (`nesquic-protocol`'s `cli`).
pub trait Lut: Send + Sync {
    /// What the LUT is.
    fn descriptor(&self) -> &'static Descriptor;

    /// Short name used on the command line (`--lut NAME`).
    fn name(&self) -> &'static str {
        self.descriptor().name
    }

    /// The library's version as linked into this build.
    fn version(&self) -> String {
        self.descriptor().version.to_string()
    }

    /// Whether it runs commands the user gives (`exec`) rather than an executable of its own.
    fn runs_user_commands(&self) -> bool {
        false
    }

    /// The executable (the binary probes attach to) in `dir`, checked to exist.
    fn binary_path(&self, dir: &Path) -> Result<PathBuf, LutError> {
        let path = dir.join(self.descriptor().executable_name());
        if path.is_file() {
            Ok(path)
        } else {
            Err(LutError::NotBuilt { path, how: self.descriptor().build_hint })
        }
    }

    /// What to start: normally the binary itself; `exec` starts a launcher that sets up the
    /// environment and execs the user's command (same pid).
    fn launcher(&self, binary: &Path) -> PathBuf {
        binary.to_path_buf()
    }

    /// Arguments for the server process.
    fn server_args(&self, spec: &ServerSpec<'_>) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "server".into(),
            "--listen".into(),
            spec.listen.to_string().into(),
            "--cert".into(),
            spec.certs.cert.clone().into(),
            "--key".into(),
            spec.certs.key.clone().into(),
        ];
        push_workload_args(&mut args, &spec.workload, false);
        push_common_args(&mut args, spec.io, spec.qlog, spec.options);
        args
    }

    /// Arguments for the client process.
    fn client_args(&self, spec: &ClientSpec<'_>) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "client".into(),
            "--connect".into(),
            spec.connect.to_string().into(),
            "--ca".into(),
            spec.certs.cert.clone().into(),
            "--size".into(),
            spec.workload.size.to_string().into(),
        ];
        push_workload_args(&mut args, &spec.workload, true);
        push_common_args(&mut args, spec.io, spec.qlog, spec.options);
        args
    }
}

/// A LUT with an executable of its own built with Nesquic: nothing but its descriptor.
#[derive(Debug, Clone, Copy)]
pub struct Builtin(pub &'static Descriptor);

impl Lut for Builtin {
    fn descriptor(&self) -> &'static Descriptor {
        self.0
    }
}

/// `--connections/--streams` (both roles) and `--parallel` (client), only when they differ from
/// the single-connection default, so LUTs that run only that shape never see them.
fn push_workload_args(args: &mut Vec<OsString>, w: &Workload, client: bool) {
    if w.is_single() {
        return;
    }
    args.extend(["--connections".into(), w.connections.to_string().into()]);
    args.extend(["--streams".into(), w.streams.to_string().into()]);
    if client {
        args.extend(["--parallel".into(), w.parallel.to_string().into()]);
    }
}

/// `--io`, `--qlog` and `--opt KEY=VALUE` (the settings' wire form) are the same for both roles.
fn push_common_args(args: &mut Vec<OsString>, io: IoMode, qlog: Option<&Path>, options: &[LutOpt]) {
    args.extend(["--io".into(), io.to_string().into()]);
    if let Some(q) = qlog {
        args.extend(["--qlog".into(), q.into()]);
    }
    for o in options {
        args.extend(["--opt".into(), o.to_string().into()]);
    }
}

/// Every LUT this build knows.
pub fn all_luts() -> Vec<Box<dyn Lut>> {
    DESCRIPTORS.iter().map(|d| Box::new(Builtin(d)) as Box<dyn Lut>).collect()
}

/// The descriptors of every LUT with an executable of its own.
pub static DESCRIPTORS: [&Descriptor; 9] = [
    &crate::quinn::QUINN,
    &crate::quiche::QUICHE,
    &crate::msquic::MSQUIC,
    &crate::quic_go::QUIC_GO,
    &crate::s2n_quic::S2N_QUIC,
    &crate::tquic::TQUIC,
    &crate::tcp_tls::TCP_TLS,
    // Scripted and C stacks (lut-adapters/aioquic, lut-adapters/ngtcp2).
    &crate::aioquic::AIOQUIC,
    &crate::ngtcp2::NGTCP2,
];

/// `--lut NAME`, or `exec` with its two commands (which only `exec` takes).
pub fn find_lut_or_exec(
    name: &str,
    server_cmd: Option<String>,
    client_cmd: Option<String>,
) -> Result<Box<dyn Lut>, LutError> {
    match (name.eq_ignore_ascii_case("exec"), server_cmd, client_cmd) {
        (true, Some(server_cmd), Some(client_cmd)) => Ok(Box::new(crate::ExecLut { server_cmd, client_cmd })),
        (true, _, _) => Err(LutError::ExecWithoutCommands),
        (false, None, None) => find_lut(name),
        (false, _, _) => Err(LutError::CommandsWithoutExec),
    }
}

/// Finds a LUT by name, or lists the known ones.
pub fn find_lut(name: &str) -> Result<Box<dyn Lut>, LutError> {
    let mut luts = all_luts();
    match luts.iter().position(|l| l.name().eq_ignore_ascii_case(name)) {
        Some(i) => Ok(luts.swap_remove(i)),
        None => Err(LutError::Unknown {
            name: name.to_string(),
            known: luts
                .iter()
                .map(|l| l.name())
                .chain(["exec (with --server-cmd/--client-cmd)"])
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// Command-line arguments every LUT executable accepts (the other half of
/// [`Lut::server_args`]/[`Lut::client_args`]): `nesquic-protocol`'s [`cli`](nesquic_protocol::cli).
pub mod args {
    pub use nesquic_protocol::cli::{LutCli, LutCommand};

    /// The old name of [`LutCommand`]; [`Role`](nesquic_protocol::Role) now means server, client or
    /// process everywhere.
    #[deprecated(note = "use LutCommand (the subcommand) or nesquic_protocol::Role (the side)")]
    pub type Role = LutCommand;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_lut_lists_the_known_ones() {
        let err = find_lut("nope").err().unwrap().to_string();
        assert!(err.contains("unknown LUT 'nope'") && err.contains("quinn"), "{err}");
        assert_eq!(find_lut("QUINN").unwrap().name(), "quinn");
    }

    #[test]
    fn quinn_version_comes_from_the_lockfile() {
        let v = find_lut("quinn").unwrap().version();
        assert!(v.starts_with("0.11."), "{v}");
    }
}
