//! MsQuic (Microsoft, C) on its own datapath, built from the `msquic` crate's vendored sources
//! with quictls; the executable is the `nesquic-lut-msquic` package.

use nesquic_protocol::options::{CongestionControl as Cc, LutOpt, OptionKind};

use crate::descriptor::common::CIPHER;
use crate::descriptor::{CargoAdapter, CargoBuild, Descriptor, OptionSpec, Refusal, Releases, SourceBuild, NATIVE};

/// MsQuic with its execution profiles; it opens and sizes its own sockets.
pub static MSQUIC: Descriptor = Descriptor {
    name: "msquic",
    version: env!("NESQUIC_MSQUIC_VERSION"),
    description: "MsQuic (C, quictls) on its own datapath (GSO/GRO where the kernel allows)",
    crypto_backend: "msquic (quictls)",
    io_modes: NATIVE,
    multi_workload_io: NATIVE,
    options: &[
        OptionSpec::new(
            OptionKind::Profile,
            "MsQuic's execution profile (default max-throughput; also --msquic-profile)",
        )
        .on(NATIVE),
        OptionSpec::new(OptionKind::Cc, "congestion control (default cubic; MsQuic has no NewReno; also --cc)")
            .on(NATIVE)
            .only(&[LutOpt::Cc(Cc::Cubic), LutOpt::Cc(Cc::Bbr)]),
        CIPHER.on(NATIVE),
    ],
    refuses: &[
        Refusal { kind: OptionKind::RcvBuf, why: "MsQuic opens its own sockets and sizes their buffers itself" },
        Refusal { kind: OptionKind::SndBuf, why: "MsQuic opens its own sockets and sizes their buffers itself" },
    ],
    // The MsQuic repository's own `msquic` crate (its root Cargo.toml; a git checkout needs its
    // submodules, quictls among them).
    source_build: Some(&SourceBuild::Cargo(CargoBuild {
        crates: &["msquic"],
        adapter: CargoAdapter::OwnWorkspace("msquic"),
    })),
    // Verified (bench/versions.md). The adapter uses the Rust API the crate has had since 2.5.0;
    // the 2.4 line (still patched upstream) has the older hand-written crate and would need an
    // adapter of its own. From 2.6 a new server connection comes owned (released, not dropped).
    supported_versions: "MsQuic 2.5.x, 2.6.0, the newest release, and upstream main (2.7.0-beta when cloned); \
         a git checkout needs its quictls submodule (`git submodule update --init submodules/quictls`), not \
         main's submodules/openssl; the 2.4 line (still patched) does not compile: its crate predates the Rust API the \
         adapter uses",
    releases: Some(Releases::Crates),
    ..Descriptor::BUILTIN
};
