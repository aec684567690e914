//! The LUT adapter seam: what the orchestrator needs to know about a library under test and how
//! to start its server and client processes.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::tls::CertFiles;
pub use nesquic_testcases::Workload;

pub use nesquic_protocol::cli::IoMode;

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
        /// How to build it ([`Lut::build_hint`]).
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
    #[error("LUT '{lut}' with --io {io} runs one connection with one stream; this testcase asks for {connections} connection(s) with {streams} stream(s) each{hint}")]
    UnsupportedWorkload {
        /// The LUT.
        lut: &'static str,
        /// The I/O path.
        io: IoMode,
        /// Connections asked for.
        connections: u32,
        /// Streams per connection asked for.
        streams: u32,
        /// Where it is supported, if anywhere.
        hint: String,
    },
    /// A LUT executable asked directly for more than it runs.
    #[error("{library} runs one connection with one stream (asked for {connections} connections, {streams} streams)")]
    SingleWorkloadOnly {
        /// The library (and I/O path).
        library: String,
        /// Connections asked for.
        connections: u32,
        /// Streams per connection asked for.
        streams: u32,
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
    #[error("LUT '{lut}' with --io {io} does not understand --lut-opt {option}; it accepts: {known}")]
    BadOption {
        /// The LUT.
        lut: &'static str,
        /// The I/O path.
        io: IoMode,
        /// What was given.
        option: String,
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
    /// LUT-specific settings (`--lut-opt KEY=VALUE`), checked against [`Lut::options`].
    pub options: &'a [String],
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
    /// LUT-specific settings (`--lut-opt KEY=VALUE`), checked against [`Lut::options`].
    pub options: &'a [String],
}

/// A library under test. Implementations are small: a name, versions, and the executable that
/// runs it. Process arguments follow one convention for every LUT (`nesquic-protocol`'s `cli`).
pub trait Lut: Send + Sync {
    /// Short name used on the command line (`--lut NAME`).
    fn name(&self) -> &'static str;
    /// The library's version as linked into this build.
    fn version(&self) -> String;
    /// One line for `--help` and listings.
    fn description(&self) -> &'static str;
    /// The crypto backend, which decides which probe catalog entries apply.
    fn crypto_backend(&self) -> &'static str;
    /// I/O paths the adapter supports; the first is the default.
    fn io_modes(&self) -> &'static [IoMode];

    /// Whether it runs commands the user gives (`exec`) rather than an executable of its own.
    fn runs_user_commands(&self) -> bool {
        false
    }

    /// How to rebuild the adapter against a checkout of the library (`--lut-path`); `None`: it
    /// cannot be.
    fn source_build(&self) -> Option<&'static SourceBuild> {
        None
    }

    /// Executable file name, found next to the `nesquic` binary.
    fn executable_name(&self) -> String {
        format!("nesquic-lut-{}", self.name())
    }

    /// The executable (the binary probes attach to) in `dir`, checked to exist.
    fn binary_path(&self, dir: &Path) -> Result<PathBuf, LutError> {
        let path = dir.join(self.executable_name());
        if path.is_file() {
            Ok(path)
        } else {
            Err(LutError::NotBuilt { path, how: self.build_hint() })
        }
    }

    /// How to get the executable when it is missing.
    fn build_hint(&self) -> &'static str {
        "build it with `just build` (Rust LUTs: `cargo build --release -p nesquic-lut-bins`)"
    }

    /// What to start: normally the binary itself; `exec` starts a launcher that sets up the
    /// environment and execs the user's command (same pid).
    fn launcher(&self, binary: &Path) -> PathBuf {
        binary.to_path_buf()
    }

    /// Checks `io` against [`Lut::io_modes`].
    fn check_io(&self, io: IoMode) -> Result<(), LutError> {
        if self.io_modes().contains(&io) {
            Ok(())
        } else {
            let supported = self.io_modes().iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            Err(LutError::UnsupportedIo { lut: self.name(), io, supported })
        }
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

    /// I/O paths on which the executable runs any [`Workload`] (several connections, several
    /// streams); on the others it runs only one connection with one stream.
    fn multi_workload_io(&self) -> &'static [IoMode] {
        &[]
    }

    /// Checks that the LUT can run `workload` on `io`.
    fn check_workload(&self, io: IoMode, workload: &Workload) -> Result<(), LutError> {
        if workload.is_single() || self.multi_workload_io().contains(&io) {
            return Ok(());
        }
        let hint = match self.multi_workload_io() {
            [] => String::new(),
            ios => {
                format!(" (it does with --io {})", ios.iter().map(ToString::to_string).collect::<Vec<_>>().join("|"))
            }
        };
        Err(LutError::UnsupportedWorkload {
            lut: self.name(),
            io,
            connections: workload.connections,
            streams: workload.streams,
            hint,
        })
    }

    /// Settings this LUT accepts with `--lut-opt KEY=VALUE`: (key, allowed values, meaning).
    fn options(&self) -> &'static [LutOption] {
        &[]
    }

    /// Checks `KEY=VALUE` settings against [`Lut::options`] for I/O path `io`.
    fn check_options(&self, io: IoMode, options: &[String]) -> Result<(), LutError> {
        for o in options {
            let known: Vec<&LutOption> = self.options().iter().filter(|opt| opt.io.contains(&io)).collect();
            let ok = o.split_once('=').is_some_and(|(k, v)| {
                known.iter().any(|opt| {
                    opt.key == k
                        && (opt.values.contains(&v) || (opt.values == [BYTES] && v.parse::<u64>().is_ok_and(|n| n > 0)))
                })
            });
            if !ok {
                let list: Vec<String> =
                    known.iter().map(|opt| format!("{}={} ({})", opt.key, opt.values.join("|"), opt.meaning)).collect();
                return Err(LutError::BadOption {
                    lut: self.name(),
                    io,
                    option: o.clone(),
                    known: if list.is_empty() { "none".into() } else { list.join(", ") },
                });
            }
        }
        Ok(())
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

/// `--io`, `--qlog` and `--opt` are the same for both roles.
fn push_common_args(args: &mut Vec<OsString>, io: IoMode, qlog: Option<&Path>, options: &[String]) {
    args.extend(["--io".into(), io.to_string().into()]);
    if let Some(q) = qlog {
        args.extend(["--qlog".into(), q.into()]);
    }
    for o in options {
        args.extend(["--opt".into(), o.into()]);
    }
}

/// The value placeholder of options that take a byte count.
pub const BYTES: &str = "BYTES";

pub(crate) const RCVBUF_NATIVE: LutOption = LutOption {
    key: "rcvbuf",
    values: &[BYTES],
    meaning: "SO_RCVBUF to request (also --rcvbuf)",
    io: &[IoMode::Native, IoMode::Nesquic, IoMode::Plain],
};
pub(crate) const SNDBUF_NATIVE: LutOption = LutOption {
    key: "sndbuf",
    values: &[BYTES],
    meaning: "SO_SNDBUF to request (also --sndbuf)",
    io: &[IoMode::Native, IoMode::Nesquic, IoMode::Plain],
};
const RCVBUF_NESQUIC: LutOption = LutOption { io: &[IoMode::Nesquic, IoMode::Plain], ..RCVBUF_NATIVE };
const SNDBUF_NESQUIC: LutOption = LutOption { io: &[IoMode::Nesquic, IoMode::Plain], ..SNDBUF_NATIVE };

const CC_ALL: LutOption = LutOption {
    key: "cc",
    values: &["cubic", "newreno", "bbr"],
    meaning: "congestion control (default cubic; also --cc)",
    io: &[IoMode::Native, IoMode::Nesquic, IoMode::Plain],
};

const CIPHER_ALL: LutOption = LutOption {
    key: "cipher",
    values: &["aes128gcm", "aes256gcm", "chacha20"],
    meaning: "the only TLS 1.3 cipher suite offered (Initial packets stay AES-128-GCM, RFC 9001); also --cipher",
    io: &[IoMode::Native, IoMode::Nesquic, IoMode::Plain],
};

/// How an adapter in `lut-adapters/quic-bins` is rebuilt against a checkout of its library
/// (`--lut-path`): the library's crates are patched in over the registry's.
#[derive(Debug)]
pub struct SourceBuild {
    /// The library's crates that can be patched in (a checkout holds them as directories of
    /// these names); the first is the one whose version is reported.
    pub crates: &'static [&'static str],
    /// The adapter's `main`, under `lut-adapters/quic-bins/`.
    pub adapter_source: &'static str,
    /// The adapter's dependencies besides `nesquic-lut-bins` (Cargo.toml lines).
    pub dependencies: &'static str,
}

/// quinn: its three crates, the quinn adapter.
static QUINN_SOURCE_BUILD: SourceBuild = SourceBuild {
    crates: &["quinn", "quinn-proto", "quinn-udp"],
    adapter_source: "src/bin/quinn.rs",
    dependencies: "quinn = { version = \"*\", features = [\"qlog\"] }\n\
        tokio = { version = \"1\", features = [\"rt\", \"rt-multi-thread\", \"macros\", \"net\", \"time\", \"io-util\", \"sync\"] }\n\
        anyhow = \"1\"\nclap = { version = \"4.5\", features = [\"derive\", \"env\"] }\nlibc = \"0.2\"\n",
};

/// One `--lut-opt` setting a LUT understands.
#[derive(Debug, Clone, Copy)]
pub struct LutOption {
    /// Key.
    pub key: &'static str,
    /// Accepted values.
    pub values: &'static [&'static str],
    /// What it does.
    pub meaning: &'static str,
    /// The I/O paths it applies to.
    pub io: &'static [IoMode],
}

/// quinn 0.11 with rustls + ring, on its own quinn-udp I/O.
#[derive(Debug, Default)]
pub struct QuinnLut;

impl Lut for QuinnLut {
    fn name(&self) -> &'static str {
        "quinn"
    }
    fn source_build(&self) -> Option<&'static SourceBuild> {
        Some(&QUINN_SOURCE_BUILD)
    }
    fn options(&self) -> &'static [LutOption] {
        &[
            LutOption {
                key: "gso",
                values: &["on", "off"],
                meaning: "UDP segmentation offload (native: quinn's own; nesquic: the I/O layer's; default on)",
                io: &[IoMode::Native, IoMode::Nesquic],
            },
            NESQUIC_IO_GRO,
            NESQUIC_IO_MMSG,
            RCVBUF_NATIVE,
            SNDBUF_NATIVE,
            CC_ALL,
            CIPHER_ALL,
        ]
    }
    fn version(&self) -> String {
        env!("NESQUIC_QUINN_VERSION").to_string()
    }
    fn description(&self) -> &'static str {
        "quinn (rustls + ring); native: tokio + quinn-udp; nesquic/plain: quinn-proto over Nesquic I/O"
    }
    fn crypto_backend(&self) -> &'static str {
        "ring"
    }
    fn io_modes(&self) -> &'static [IoMode] {
        &[IoMode::Native, IoMode::Nesquic, IoMode::Plain]
    }
    fn multi_workload_io(&self) -> &'static [IoMode] {
        &[IoMode::Native]
    }
}

const NESQUIC_IO_GSO: LutOption = LutOption {
    key: "gso",
    values: &["on", "off"],
    meaning: "the I/O layer's UDP GSO (default on)",
    io: &[IoMode::Nesquic],
};
const NESQUIC_IO_GRO: LutOption = LutOption {
    key: "gro",
    values: &["on", "off"],
    meaning: "the I/O layer's UDP GRO (default on)",
    io: &[IoMode::Nesquic],
};
const NESQUIC_IO_MMSG: LutOption = LutOption {
    key: "mmsg",
    values: &["on", "off"],
    meaning: "the I/O layer's sendmmsg/recvmmsg batching (default on)",
    io: &[IoMode::Nesquic],
};

/// quiche (Cloudflare, BoringSSL built from source) through the translation layer.
#[derive(Debug, Default)]
pub struct QuicheLut;

impl Lut for QuicheLut {
    fn name(&self) -> &'static str {
        "quiche"
    }
    fn options(&self) -> &'static [LutOption] {
        &[
            NESQUIC_IO_GSO,
            NESQUIC_IO_GRO,
            NESQUIC_IO_MMSG,
            RCVBUF_NESQUIC,
            SNDBUF_NESQUIC,
            LutOption {
                meaning: "congestion control: cubic (default), newreno (Reno), bbr (BBRv2); also --cc",
                ..CC_ALL
            },
            LutOption {
                key: "pacing",
                values: &["on", "off"],
                meaning: "quiche's pacing (SendInfo.at honoured; default on)",
                io: &[IoMode::Nesquic, IoMode::Plain],
            },
        ]
    }
    fn version(&self) -> String {
        env!("NESQUIC_QUICHE_VERSION").to_string()
    }
    fn description(&self) -> &'static str {
        "quiche (BoringSSL) driven by Nesquic's translation layer; it has no I/O of its own"
    }
    fn crypto_backend(&self) -> &'static str {
        "boringssl"
    }
    fn io_modes(&self) -> &'static [IoMode] {
        &[IoMode::Nesquic, IoMode::Plain]
    }
}

/// MsQuic (Microsoft, C) on its own datapath, built from the `msquic` crate's vendored sources
/// with quictls; the executable is the `nesquic-lut-msquic` package.
#[derive(Debug, Default)]
pub struct MsquicLut;

impl Lut for MsquicLut {
    fn name(&self) -> &'static str {
        "msquic"
    }
    fn options(&self) -> &'static [LutOption] {
        &[
            LutOption {
                key: "profile",
                values: &["max-throughput", "low-latency"],
                meaning: "MsQuic's execution profile (default max-throughput; also --msquic-profile)",
                io: &[IoMode::Native],
            },
            LutOption {
                key: "cc",
                values: &["cubic", "bbr"],
                meaning: "congestion control (default cubic; MsQuic has no NewReno; also --cc)",
                io: &[IoMode::Native],
            },
            LutOption { io: &[IoMode::Native], ..CIPHER_ALL },
        ]
    }
    fn version(&self) -> String {
        env!("NESQUIC_MSQUIC_VERSION").to_string()
    }
    fn description(&self) -> &'static str {
        "MsQuic (C, quictls) on its own datapath (GSO/GRO where the kernel allows)"
    }
    fn crypto_backend(&self) -> &'static str {
        "msquic (quictls)"
    }
    fn io_modes(&self) -> &'static [IoMode] {
        &[IoMode::Native]
    }
}

/// Every LUT this build knows.
pub fn all_luts() -> Vec<Box<dyn Lut>> {
    vec![
        Box::new(QuinnLut),
        Box::new(QuicheLut),
        Box::new(MsquicLut),
        Box::new(crate::quic_go::QuicGoLut),
        Box::new(crate::tcp_tls::TcpTlsLut),
        // Scripted and C stacks (lut-adapters/aioquic, lut-adapters/ngtcp2).
        Box::new(crate::aioquic::AioquicLut),
        Box::new(crate::ngtcp2::Ngtcp2Lut),
    ]
}

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

impl From<nesquic_protocol::cli::SingleWorkloadOnly> for LutError {
    fn from(e: nesquic_protocol::cli::SingleWorkloadOnly) -> Self {
        LutError::SingleWorkloadOnly { library: e.library, connections: e.connections, streams: e.streams }
    }
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
        let v = QuinnLut.version();
        assert!(v.starts_with("0.11."), "{v}");
    }
}
