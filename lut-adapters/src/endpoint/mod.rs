//! A stack driven through its own interop endpoint (`--lut NAME --lut-path CHECKOUT` for a
//! stack with only a recipe, `--endpoint` where an adapter exists too): the recipe read as data
//! ([`recipe`]), and [`EndpointLut`], which starts the recipe's server and client like any LUT.
//! Its programs speak no docs/protocol.md, so the engine does the rest through the
//! [`Endpoint`] seam: the payload file and certificate in place, the server's port watched, a
//! server that never exits stopped, the client's download checked byte for byte. Building the
//! programs from the checkout is the engine's (`custom_build`).

pub mod recipe;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::descriptor::Descriptor;
use crate::error::{EndpointError, LutError};
use crate::launch::{ClientSpec, Endpoint, Lut, ServerSpec};
use crate::staging::{verify_download, Collected, Layout, MountPoints, PAYLOAD_FILE};
use crate::tls::CertFiles;
pub use recipe::{Recipe, Transfer};

/// One recipe's server and client, built into `out` from `checkout`.
#[derive(Debug, Clone)]
pub struct EndpointLut {
    recipe: Arc<Recipe>,
    descriptor: &'static Descriptor,
    checkout: PathBuf,
    out: PathBuf,
    version: String,
}

/// Which of the recipe's programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// The server's.
    Server,
    /// The client's.
    Client,
}

impl EndpointLut {
    /// The recipe's programs, built into `out` from `checkout`; `version` says which commit.
    pub fn new(recipe: Recipe, checkout: PathBuf, out: PathBuf, version: String) -> Self {
        let descriptor = descriptor_for(&recipe);
        Self { recipe: Arc::new(recipe), descriptor, checkout, out, version }
    }

    /// The recipe.
    pub fn recipe(&self) -> &Recipe {
        &self.recipe
    }

    /// The executable of one program (probes resolve its functions), checked to exist.
    pub fn program(&self, which: Program) -> Result<PathBuf, LutError> {
        let template = match which {
            Program::Server => &self.recipe.server.program,
            Program::Client => &self.recipe.client.program,
        };
        let path = PathBuf::from(recipe::expand(template, &self.build_vars())?);
        if path.is_file() {
            Ok(path)
        } else {
            Err(EndpointError::Io {
                what: "the recipe's build made no program",
                path,
                source: std::io::ErrorKind::NotFound.into(),
            }
            .into())
        }
    }

    /// `{checkout}` and `{out}`, what program paths may name.
    fn build_vars(&self) -> BTreeMap<String, String> {
        [("checkout", &self.checkout), ("out", &self.out)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.display().to_string()))
            .collect()
    }

    /// Every run placeholder for a process talking on `addr`, its files under `dir`.
    fn run_vars(&self, dir: &Path, addr: SocketAddr, size: u64) -> BTreeMap<String, String> {
        let layout = Layout::under(dir);
        let mut vars = self.build_vars();
        let paths = [
            ("www", &layout.www),
            ("downloads", &layout.downloads),
            ("logs", &layout.logs),
            ("qlog", &layout.qlog),
            ("certs", &layout.certs),
        ];
        vars.extend(paths.iter().map(|(k, v)| (k.to_string(), v.display().to_string())));
        let host = addr.ip().to_string();
        vars.insert("url".into(), format!("https://{addr}/{PAYLOAD_FILE}"));
        vars.insert("host".into(), host);
        vars.insert("port".into(), addr.port().to_string());
        vars.insert("file".into(), PAYLOAD_FILE.into());
        vars.insert("size".into(), size.to_string());
        // Checked when the recipe was read: cert and key name only the directories above.
        for (k, t) in [("cert", &self.recipe.server.cert), ("key", &self.recipe.server.key)] {
            let v = recipe::expand(t, &vars).unwrap_or_else(|_| t.clone());
            vars.insert(k.into(), v);
        }
        vars
    }

    /// The process's argv after the launcher: the bind mounts (in unshare's private mount
    /// namespace), then `env VARS program args`, which execs the program (the pid stays).
    fn argv(&self, which: Program, vars: &BTreeMap<String, String>) -> Vec<OsString> {
        let (program, args, env, mounts, cwd) = match which {
            Program::Server => {
                let s = &self.recipe.server;
                (&s.program, &s.args, &s.env, &s.mounts, &s.cwd)
            }
            Program::Client => {
                let c = &self.recipe.client;
                (&c.program, &c.args, &c.env, &c.mounts, &c.cwd)
            }
        };
        // Every placeholder was checked against RUN_PLACEHOLDERS when the recipe was read and
        // `run_vars` fills them all, so expansion cannot fail here.
        let fill = |t: &String| recipe::expand(t, vars).unwrap_or_else(|_| t.clone());
        let mut argv: Vec<OsString> = Vec::new();
        if self.uses_mounts() {
            argv.extend(
                ["--mount", "--propagation", "private", "/bin/sh", "-c", MOUNT_SCRIPT, "nesquic-endpoint"]
                    .map(OsString::from),
            );
            for (target, source) in mounts {
                argv.push(fill(source).into());
                argv.push(target.into());
            }
            argv.extend(["--".into(), ENV.into()]);
        }
        if let Some(dir) = cwd {
            // GNU env's --chdir: the working directory without a shell.
            argv.extend(["-C".into(), fill(dir).into()]);
        }
        argv.extend(env.iter().map(|(k, v)| OsString::from(format!("{k}={}", fill(v)))));
        argv.push(fill(program).into());
        argv.extend(args.iter().map(|a| OsString::from(fill(a))));
        argv
    }

    fn uses_mounts(&self) -> bool {
        !self.recipe.server.mounts.is_empty() || !self.recipe.client.mounts.is_empty()
    }
}

/// `env`, which execs the program with the recipe's variables.
const ENV: &str = "/usr/bin/env";
/// `unshare`, which gives the process a mount namespace of its own.
const UNSHARE: &str = "/usr/bin/unshare";
/// Binds each SOURCE TARGET pair up to `--`, then execs the rest (same pid).
const MOUNT_SCRIPT: &str =
    r#"while [ "$1" != -- ]; do mount --bind "$1" "$2" || exit 126; shift 2; done; shift; exec "$@""#;

/// The run's files live beside its certificate: `nesquic run` generates it into the run's
/// private scratch directory, which the endpoint's directories share.
fn run_dir(certs: &CertFiles) -> &Path {
    certs.cert.parent().unwrap_or(Path::new("."))
}

/// A descriptor for a recipe read at run time. Leaked: a command resolves its LUT once, and the
/// descriptors compiled in are `'static` too.
fn descriptor_for(recipe: &Recipe) -> &'static Descriptor {
    let leak = |s: &str| -> &'static str { Box::leak(s.to_owned().into_boxed_str()) };
    Box::leak(Box::new(Descriptor {
        name: leak(&recipe.name),
        version: "endpoint",
        description: leak(&recipe.description),
        crypto_backend: leak(&recipe.tls),
        single_workload_reason: "its own interop client downloads one file over one connection",
        build_hint: "it is built from its checkout: --lut-path CHECKOUT",
        supported_versions: "whatever checkout builds with its recipe (lut-adapters/endpoints/)",
        ..Descriptor::BUILTIN
    }))
}

impl Lut for EndpointLut {
    fn descriptor(&self) -> &'static Descriptor {
        self.descriptor
    }

    fn version(&self) -> String {
        self.version.clone()
    }

    fn binary_path(&self, _dir: &Path) -> Result<PathBuf, LutError> {
        self.program(Program::Server)
    }

    fn launcher(&self, _binary: &Path) -> PathBuf {
        PathBuf::from(if self.uses_mounts() { UNSHARE } else { ENV })
    }

    fn server_args(&self, spec: &ServerSpec<'_>) -> Vec<OsString> {
        let vars = self.run_vars(run_dir(spec.certs), spec.listen, spec.workload.size);
        self.argv(Program::Server, &vars)
    }

    fn client_args(&self, spec: &ClientSpec<'_>) -> Vec<OsString> {
        let vars = self.run_vars(run_dir(spec.certs), spec.connect, spec.workload.size);
        self.argv(Program::Client, &vars)
    }

    fn endpoint(&self) -> Option<&dyn Endpoint> {
        Some(self)
    }
}

impl Endpoint for EndpointLut {
    fn recipe(&self) -> &str {
        &self.recipe.name
    }

    fn fixed_port(&self) -> Option<u16> {
        (self.recipe.server.port != 0).then_some(self.recipe.server.port)
    }

    fn server_exits(&self) -> bool {
        self.recipe.server.exits
    }

    fn prepare(&self, certs: &CertFiles, size: u64) -> Result<MountPoints, LutError> {
        let dir = run_dir(certs);
        let layout = Layout::under(dir);
        layout.create(size)?;
        let vars = self.run_vars(dir, SocketAddr::from(([127, 0, 0, 1], 0)), size);
        for (var, der, label) in [("cert", &certs.cert, "CERTIFICATE"), ("key", &certs.key, "PRIVATE KEY")] {
            let bytes = crate::tls::read(der).map_err(|e| EndpointError::Recipe {
                origin: self.recipe.name.clone(),
                why: format!("cannot read the run's {var}: {e}"),
            })?;
            let path = PathBuf::from(&vars[var]);
            std::fs::write(&path, nesquic_protocol::pem::encode(label, &bytes))
                .map_err(|source| EndpointError::Io { what: "write", path, source })?;
        }
        let targets = self.recipe.server.mounts.keys().chain(self.recipe.client.mounts.keys());
        Ok(MountPoints::ensure(targets.map(String::as_str))?)
    }

    fn collect(&self, certs: &CertFiles, size: u64) -> Result<Collected, LutError> {
        let dir = run_dir(certs);
        match (&self.recipe.client.download, self.recipe.transfer) {
            (Some(template), Transfer::Http09) => {
                let vars = self.run_vars(dir, SocketAddr::from(([127, 0, 0, 1], 0)), size);
                let path = PathBuf::from(recipe::expand(template, &vars)?);
                let bytes = verify_download(&path, size)?;
                std::fs::remove_file(&path).map_err(|source| EndpointError::Io { what: "remove", path, source })?;
                Ok(Collected { bytes, verified: true })
            }
            // A perf client discards what it receives: the size asked for, not checked.
            _ => Ok(Collected { bytes: size, verified: false }),
        }
    }
}
