//! What a LUT is, as data: one [`Descriptor`] a LUT (name, version, crypto backend, I/O paths,
//! the workloads it runs, the settings it accepts and why it refuses others), and the checks
//! every LUT shares, made against it.

use nesquic_protocol::cli::IoMode;
use nesquic_protocol::options::{LutOpt, OptionError, OptionKind};
use nesquic_testcases::Workload;

use crate::error::LutError;

/// A library under test, described.
#[derive(Debug)]
pub struct Descriptor {
    /// Short name used on the command line (`--lut NAME`).
    pub name: &'static str,
    /// The library's version as linked into this build (from a lock file or manifest).
    pub version: &'static str,
    /// One line for `--help` and listings.
    pub description: &'static str,
    /// The crypto backend, which decides which probe catalog entries apply.
    pub crypto_backend: &'static str,
    /// I/O paths the adapter supports; the first is the default.
    pub io_modes: &'static [IoMode],
    /// I/O paths on which the executable runs any [`Workload`] (several connections, several
    /// streams); on the others it runs only one connection with one stream.
    pub multi_workload_io: &'static [IoMode],
    /// Why the executable runs only one connection with one stream off `multi_workload_io`.
    pub single_workload_reason: &'static str,
    /// Settings it accepts with `--lut-opt KEY=VALUE`.
    pub options: &'static [OptionSpec],
    /// Settings it refuses for a reason worth telling (others are refused as absent).
    pub refuses: &'static [Refusal],
    /// How to get the executable when it is missing.
    pub build_hint: &'static str,
    /// How to rebuild the adapter against a checkout of the library (`--lut-path`); `None`: it
    /// cannot be.
    pub source_build: Option<&'static SourceBuild>,
    /// The upstream versions the adapter is written for, as a user reads it (`--help`,
    /// bench/versions.md): releases, branches, and what a version lacks (turned off, not failed).
    pub supported_versions: &'static str,
    /// Where `--lut-version VERSION` gets a published release from; `None`: no registry serves one.
    pub releases: Option<Releases>,
}

/// A registry that serves a LUT's published releases, for `--lut-version`: the release is
/// fetched into a checkout-shaped tree and built like a `--lut-path` checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Releases {
    /// crates.io: the library's crates (as [`CargoBuild::crates`]), the first being the one
    /// whose version is asked for; the others at the newest versions that release accepts.
    Crates,
    /// The Go module proxy: this module path.
    GoModule(&'static str),
    /// PyPI: this project's source distribution.
    PyPi(&'static str),
    /// Debian's source package, as this script under `lut-adapters/` unpacks it
    /// (`SCRIPT VERSION DEST`; the `.dsc`'s sha256 on stderr).
    DebianSource(&'static str),
}

/// What most descriptors share; a LUT's own `static` overrides the rest
/// (`Descriptor { name: ..., ..Descriptor::BUILTIN }`).
impl Descriptor {
    /// The defaults of a LUT whose executable is built with the workspace.
    pub const BUILTIN: Descriptor = Descriptor {
        name: "",
        version: "",
        description: "",
        crypto_backend: "",
        io_modes: NATIVE,
        multi_workload_io: &[],
        single_workload_reason: "its executable is not given connection or stream counts",
        options: &[],
        refuses: &[],
        build_hint: "build it with `just build` (Rust LUTs: `cargo build --release -p nesquic-lut-bins`)",
        source_build: None,
        supported_versions: "the version this build pins",
        releases: None,
    };

    /// Executable file name, found next to the `nesquic` binary.
    pub fn executable_name(&self) -> String {
        format!("nesquic-lut-{}", self.name)
    }

    /// Checks `io` against [`Descriptor::io_modes`].
    pub fn check_io(&self, io: IoMode) -> Result<(), LutError> {
        if self.io_modes.contains(&io) {
            Ok(())
        } else {
            Err(LutError::UnsupportedIo { lut: self.name, io, supported: join(self.io_modes) })
        }
    }

    /// Checks that the LUT can run `workload` on `io`.
    pub fn check_workload(&self, io: IoMode, workload: &Workload) -> Result<(), LutError> {
        if workload.is_single() || self.multi_workload_io.contains(&io) {
            return Ok(());
        }
        let hint = match self.multi_workload_io {
            [] => String::new(),
            ios => format!(" (it does with --io {})", join(ios).replace(", ", "|")),
        };
        Err(LutError::UnsupportedWorkload {
            lut: self.name,
            why: self.single_workload_reason,
            io,
            connections: workload.connections,
            streams: workload.streams,
            hint,
        })
    }

    /// Whether it has the setting `kind` on any I/O path.
    pub fn offers(&self, kind: OptionKind) -> bool {
        self.options.iter().any(|o| o.kind == kind)
    }

    /// Parses `--lut-opt KEY=VALUE` texts and checks each against what the LUT accepts on `io`.
    pub fn parse_options(&self, io: IoMode, texts: &[String]) -> Result<Vec<LutOpt>, LutError> {
        texts
            .iter()
            .map(|text| {
                let opt = text.parse::<LutOpt>().map_err(|e| {
                    let why = match e {
                        OptionError::UnknownKey(_) => "unknown option".into(),
                        OptionError::NotKeyValue(_) => "not KEY=VALUE".into(),
                        OptionError::BadValue { kind, .. } => format!("{} takes {}", kind.key(), kind.values()),
                    };
                    self.bad_option(io, text, why)
                })?;
                self.check_option(io, opt)?;
                Ok(opt)
            })
            .collect()
    }

    /// Checks typed settings against what the LUT accepts on `io`.
    pub fn check_options(&self, io: IoMode, options: &[LutOpt]) -> Result<(), LutError> {
        options.iter().try_for_each(|o| self.check_option(io, *o))
    }

    fn check_option(&self, io: IoMode, opt: LutOpt) -> Result<(), LutError> {
        let kind = opt.kind();
        if self.options.iter().any(|s| s.io.contains(&io) && s.accepts(opt)) {
            return Ok(());
        }
        let here = self.options.iter().find(|s| s.kind == kind && s.io.contains(&io));
        let elsewhere: Vec<IoMode> =
            self.options.iter().filter(|s| s.kind == kind).flat_map(|s| s.io.iter().copied()).collect();
        let refusal = self.refuses.iter().find(|r| r.kind == kind);
        let why = match (here, refusal, elsewhere.is_empty()) {
            (Some(spec), _, _) => format!("it takes {}={}, {}", kind.key(), spec.values(), spec.meaning),
            (None, _, false) => format!("{} applies only with --io {}", kind.key(), join(&elsewhere)),
            (None, Some(r), true) => r.why.to_string(),
            (None, None, true) => format!("{} has no {} setting", self.name, kind.key()),
        };
        Err(LutError::BadOption { lut: self.name, io, option: opt.to_string(), why, known: self.accepted(io) })
    }

    fn bad_option(&self, io: IoMode, text: &str, why: String) -> LutError {
        LutError::BadOption { lut: self.name, io, option: text.to_string(), why, known: self.accepted(io) }
    }

    /// `key=values, ...` for every setting accepted on `io`, or `none`.
    pub fn accepted(&self, io: IoMode) -> String {
        let list: Vec<String> = self
            .options
            .iter()
            .filter(|s| s.io.contains(&io))
            .map(|s| format!("{}={}", s.kind.key(), s.values()))
            .collect();
        if list.is_empty() {
            "none".into()
        } else {
            list.join(", ")
        }
    }
}

/// One `--lut-opt` setting a LUT understands.
#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    /// Which setting.
    pub kind: OptionKind,
    /// The values accepted; empty: every value the setting takes.
    pub only: &'static [LutOpt],
    /// What it does for this LUT.
    pub meaning: &'static str,
    /// The I/O paths it applies to.
    pub io: &'static [IoMode],
}

impl OptionSpec {
    /// `kind` with every value it takes, on every I/O path a LUT may have.
    pub const fn new(kind: OptionKind, meaning: &'static str) -> Self {
        OptionSpec { kind, only: &[], meaning, io: ALL_IO }
    }

    /// Only on `io`.
    pub const fn on(self, io: &'static [IoMode]) -> Self {
        OptionSpec { io, ..self }
    }

    /// Only these values.
    pub const fn only(self, only: &'static [LutOpt]) -> Self {
        OptionSpec { only, ..self }
    }

    /// Whether `opt` is this setting with a value it accepts.
    pub fn accepts(&self, opt: LutOpt) -> bool {
        opt.kind() == self.kind && (self.only.is_empty() || self.only.contains(&opt))
    }

    /// The values as help shows them (`on|off`, `BYTES`, `cubic|bbr`).
    pub fn values(&self) -> String {
        if self.only.is_empty() {
            self.kind.values()
        } else {
            self.only.iter().map(|o| o.value()).collect::<Vec<_>>().join("|")
        }
    }
}

/// A setting the LUT refuses, and why (its library cannot do it).
#[derive(Debug, Clone, Copy)]
pub struct Refusal {
    /// Which setting.
    pub kind: OptionKind,
    /// Why not.
    pub why: &'static str,
}

/// How a LUT is rebuilt against a checkout of its library (`--lut-path`, `--lut-rev`).
#[derive(Debug)]
pub enum SourceBuild {
    /// A Rust library: its crates are patched in over the registry's (cargo `[patch]`) in a
    /// generated cargo project, and cargo's resolved graph must name the checkout.
    Cargo(CargoBuild),
    /// Another toolchain: a script under `lut-adapters/` builds the adapter and proves what it
    /// linked (`SCRIPT --lut-path CHECKOUT --out DIR`; progress and errors on stderr, one JSON
    /// line on stdout: `binary`, `version`, `source`, `revision`, `dirty`, `proof`).
    Script(&'static str),
}

/// A Rust LUT rebuilt with cargo `[patch.crates-io]`.
#[derive(Debug)]
pub struct CargoBuild {
    /// The library's crates that can be patched in (a checkout holds them as directories of
    /// these names, or is one of them); the first is the one whose version is reported. Those
    /// the adapter does not depend on are left out.
    pub crates: &'static [&'static str],
    /// The adapter built against them.
    pub adapter: CargoAdapter,
}

/// Which cargo project an adapter is.
#[derive(Debug)]
pub enum CargoAdapter {
    /// A binary of `lut-adapters/quic-bins` (main workspace), built in a generated project that
    /// depends on `nesquic-lut-bins` and starts from the workspace's Cargo.lock.
    QuicBins {
        /// The adapter's `main`, under `lut-adapters/quic-bins/`.
        source: &'static str,
        /// The adapter's dependencies besides `nesquic-lut-bins` (Cargo.toml lines).
        dependencies: &'static str,
        /// `nesquic-lut-bins` features (its defaults are off).
        features: &'static [&'static str],
    },
    /// A cargo workspace of its own under `lut-adapters/` (this directory): its manifest, with
    /// paths made absolute, and its Cargo.lock start the generated project.
    OwnWorkspace(&'static str),
}

/// Only the library's own I/O.
pub const NATIVE: &[IoMode] = &[IoMode::Native];
/// Nesquic's I/O layer and plain sockets (the translated stacks).
pub const TRANSLATED: &[IoMode] = &[IoMode::Nesquic, IoMode::Plain];
/// Every I/O path.
pub const ALL_IO: &[IoMode] = &[IoMode::Native, IoMode::Nesquic, IoMode::Plain];

/// Settings several LUTs share, with their usual meaning.
pub mod common {
    use nesquic_protocol::cli::IoMode;
    use nesquic_protocol::options::{CongestionControl as Cc, LutOpt, OptionKind};

    use super::{OptionSpec, TRANSLATED};

    /// `rcvbuf=BYTES`.
    pub const RCVBUF: OptionSpec = OptionSpec::new(OptionKind::RcvBuf, "SO_RCVBUF to request (also --rcvbuf)");
    /// `sndbuf=BYTES`.
    pub const SNDBUF: OptionSpec = OptionSpec::new(OptionKind::SndBuf, "SO_SNDBUF to request (also --sndbuf)");
    /// `cc=cubic|newreno|bbr`.
    pub const CC: OptionSpec = OptionSpec::new(OptionKind::Cc, "congestion control (default cubic; also --cc)")
        .only(&[LutOpt::Cc(Cc::Cubic), LutOpt::Cc(Cc::NewReno), LutOpt::Cc(Cc::Bbr)]);
    /// `cipher=...`, every suite.
    pub const CIPHER: OptionSpec = OptionSpec::new(
        OptionKind::Cipher,
        "the only TLS 1.3 cipher suite offered (Initial packets stay AES-128-GCM, RFC 9001); also --cipher",
    );
    const NESQUIC: &[IoMode] = &[IoMode::Nesquic];
    /// The I/O layer's GSO switch.
    pub const IO_GSO: OptionSpec = OptionSpec::new(OptionKind::Gso, "the I/O layer's UDP GSO (default on)").on(NESQUIC);
    /// The I/O layer's GRO switch.
    pub const IO_GRO: OptionSpec = OptionSpec::new(OptionKind::Gro, "the I/O layer's UDP GRO (default on)").on(NESQUIC);
    /// The I/O layer's batching switch.
    pub const IO_MMSG: OptionSpec =
        OptionSpec::new(OptionKind::Mmsg, "the I/O layer's sendmmsg/recvmmsg batching (default on)").on(NESQUIC);
    /// `rcvbuf=` for a stack over Nesquic's I/O layer (its socket).
    pub const IO_RCVBUF: OptionSpec = RCVBUF.on(TRANSLATED);
    /// `sndbuf=` for a stack over Nesquic's I/O layer (its socket).
    pub const IO_SNDBUF: OptionSpec = SNDBUF.on(TRANSLATED);
}

fn join(ios: &[IoMode]) -> String {
    ios.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}
