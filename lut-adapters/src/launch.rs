//! How a LUT is started: the [`Lut`] trait (where its executable is, the server and client
//! command lines built from [`ServerSpec`]/[`ClientSpec`]) and [`Builtin`], a LUT that is its
//! descriptor alone. It knows no adapter; [`registry`](crate::registry) lists them.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use nesquic_protocol::cli::IoMode;
use nesquic_protocol::options::LutOpt;
use nesquic_testcases::Workload;

use crate::descriptor::Descriptor;
use crate::error::LutError;
pub use crate::staging::{Collected, MountPoints};
use crate::tls::CertFiles;

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

    /// A stack driven through its own interop endpoint (a recipe, docs/luts.md): what the
    /// engine does besides starting the processes. `None` for an adapter, which speaks
    /// docs/protocol.md and reports its own result.
    fn endpoint(&self) -> Option<&dyn Endpoint> {
        None
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

/// What a stack's own endpoint needs from the engine: its files in place before the server
/// starts, the server's port, stopping a server that never exits, and the check of the
/// client's download (an endpoint prints no report lines).
pub trait Endpoint {
    /// The recipe's name (`lut-adapters/endpoints/NAME.toml`, or the user's file).
    fn recipe(&self) -> &str;
    /// The port the server binds whatever it is told; `None`: Nesquic picks one.
    fn fixed_port(&self) -> Option<u16>;
    /// Whether the server exits once it has served (interop servers do not).
    fn server_exits(&self) -> bool;
    /// Writes the run's files beside its certificate (the run's private scratch directory): the
    /// payload of `size` bytes, the certificate and key as PEM; makes missing mount points
    /// (removed on drop).
    fn prepare(&self, certs: &CertFiles, size: u64) -> Result<MountPoints, LutError>;
    /// After the client exited successfully: what it transferred, checked when the recipe's
    /// transfer can be; the download is removed for the next repetition.
    fn collect(&self, certs: &CertFiles, size: u64) -> Result<Collected, LutError>;
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
