//! tquic (Tencent, Rust, vendored BoringSSL): no I/O of its own, driven over Nesquic's I/O layer
//! like quiche, in an executable built from `lut-adapters/tquic/` (its own cargo workspace,
//! Cargo.lock names the version).

use nesquic_protocol::options::{CongestionControl as Cc, LutOpt, OptionKind};

use crate::descriptor::common::{IO_GRO, IO_GSO, IO_MMSG, IO_RCVBUF, IO_SNDBUF};
use crate::descriptor::{CargoAdapter, CargoBuild, Descriptor, OptionSpec, Releases, SourceBuild, TRANSLATED};

/// tquic through the translation layer, every workload shape.
pub static TQUIC: Descriptor = Descriptor {
    name: "tquic",
    version: env!("NESQUIC_TQUIC_VERSION"),
    description: "tquic (Rust, BoringSSL + ring header protection) driven by Nesquic's translation layer; it has no I/O of its own",
    crypto_backend: "boringssl (tquic's own)",
    io_modes: TRANSLATED,
    multi_workload_io: TRANSLATED,
    options: &[
        IO_GSO,
        IO_GRO,
        IO_MMSG,
        IO_RCVBUF,
        IO_SNDBUF,
        OptionSpec::new(
            OptionKind::Cc,
            "congestion control (default cubic here, tquic's own default is bbr; no NewReno; also --cc)",
        )
        .on(TRANSLATED)
        .only(&[LutOpt::Cc(Cc::Cubic), LutOpt::Cc(Cc::Bbr), LutOpt::Cc(Cc::Bbr3), LutOpt::Cc(Cc::Copa)]),
    ],
    build_hint: "it is its own cargo workspace (tquic vendors BoringSSL, built with cmake): `just build` builds it, \
         or `cargo build --release --manifest-path lut-adapters/tquic/Cargo.toml --target-dir target`",
    // A git checkout needs its BoringSSL submodule (`git submodule update --init`).
    source_build: Some(&SourceBuild::Cargo(CargoBuild {
        crates: &["tquic"],
        adapter: CargoAdapter::OwnWorkspace("tquic"),
    })),
    // Verified (bench/versions.md). The API the shim calls is the same from 1.0 to 1.6; 1.0-1.3
    // declare no `qlog` feature (qlog is always built there), which the adapter asks for, so
    // cargo refuses them.
    supported_versions: "tquic 1.5.0 (Nov 2024) and 1.6.0, the newest release, and upstream develop (the tree \
         of 1.6.0 when cloned); a git checkout needs its BoringSSL (`git submodule update --init deps/boringssl`); \
         1.0-1.3 are refused: they have no `qlog` feature to ask for",
    releases: Some(Releases::Crates),
    ..Descriptor::BUILTIN
};
