//! The `exec` LUT: the user's own server and client commands, run like built-in LUTs and probed
//! by symbol. They speak the benchmark protocol and print the report lines (docs/protocol.md);
//! their parameters come in environment variables.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::descriptor::Descriptor;
use crate::error::LutError;
use crate::launch::{ClientSpec, Lut, ServerSpec};

/// `exec`: no executable of its own, no settings (its commands take NESQUIC_* variables).
pub static EXEC: Descriptor = Descriptor {
    name: "exec",
    version: "external",
    description: "your own commands: --server-cmd/--client-cmd, parameters in NESQUIC_* variables (docs/protocol.md)",
    crypto_backend: "unknown",
    single_workload_reason: "the commands are given one NESQUIC_SIZE and no connection or stream counts",
    ..Descriptor::BUILTIN
};

/// User-provided server and client commands (`/bin/sh -c` syntax).
#[derive(Debug, Clone)]
pub struct ExecLut {
    /// Runs the server.
    pub server_cmd: String,
    /// Runs the client.
    pub client_cmd: String,
}

impl ExecLut {
    fn env_args(vars: Vec<(&str, OsString)>, cmd: &str) -> Vec<OsString> {
        let mut args: Vec<OsString> = vars
            .into_iter()
            .map(|(k, v)| {
                let mut kv = OsString::from(format!("{k}="));
                kv.push(v);
                kv
            })
            .collect();
        // `exec` keeps the pid nesquic registered with the probes for the command itself.
        args.extend(["/bin/sh".into(), "-c".into(), format!("exec {cmd}").into()]);
        args
    }
}

impl Lut for ExecLut {
    fn descriptor(&self) -> &'static Descriptor {
        &EXEC
    }

    /// The server command's executable: what function probes resolve against.
    fn binary_path(&self, _dir: &Path) -> Result<PathBuf, LutError> {
        let first = self.server_cmd.split_whitespace().next().unwrap_or_default();
        let candidate = PathBuf::from(first);
        let found = if first.contains('/') {
            candidate.is_file().then_some(candidate)
        } else {
            std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).map(|d| d.join(first)).find(|c| c.is_file()))
                .unwrap_or_default()
        };
        found.ok_or_else(|| LutError::ExecNotFound { command: self.server_cmd.clone() })
    }

    fn runs_user_commands(&self) -> bool {
        true
    }

    fn launcher(&self, _binary: &Path) -> PathBuf {
        PathBuf::from("/usr/bin/env")
    }

    fn server_args(&self, spec: &ServerSpec<'_>) -> Vec<OsString> {
        let mut vars = vec![
            ("NESQUIC_ROLE", "server".into()),
            ("NESQUIC_LISTEN", spec.listen.to_string().into()),
            ("NESQUIC_CERT", spec.certs.cert.clone().into()),
            ("NESQUIC_KEY", spec.certs.key.clone().into()),
        ];
        if let Some(q) = spec.qlog {
            vars.push(("NESQUIC_QLOG", q.into()));
        }
        Self::env_args(vars, &self.server_cmd)
    }

    fn client_args(&self, spec: &ClientSpec<'_>) -> Vec<OsString> {
        let mut vars = vec![
            ("NESQUIC_ROLE", "client".into()),
            ("NESQUIC_CONNECT", spec.connect.to_string().into()),
            ("NESQUIC_CA", spec.certs.cert.clone().into()),
            ("NESQUIC_SIZE", spec.workload.size.to_string().into()),
        ];
        if let Some(q) = spec.qlog {
            vars.push(("NESQUIC_QLOG", q.into()));
        }
        Self::env_args(vars, &self.client_cmd)
    }
}
