//! s2n-quic (AWS, Rust): its own tokio platform I/O and s2n-tls over aws-lc, in an executable
//! built from `lut-adapters/s2n-quic/` (its own cargo workspace, Cargo.lock names the version).

use nesquic_protocol::options::{CongestionControl as Cc, LutOpt, OptionKind};

use crate::descriptor::common::{RCVBUF, SNDBUF};
use crate::descriptor::{CargoAdapter, CargoBuild, Descriptor, OptionSpec, Refusal, Releases, SourceBuild, NATIVE};

/// s2n-quic on its own I/O (sendmmsg with GSO, recvmmsg with GRO), crypto from aws-lc.
pub static S2N_QUIC: Descriptor = Descriptor {
    name: "s2n-quic",
    version: env!("NESQUIC_S2N_QUIC_VERSION"),
    description: "s2n-quic (Rust, s2n-tls + aws-lc) on its own tokio I/O (GSO, GRO, sendmmsg/recvmmsg); no qlog",
    crypto_backend: "aws-lc (s2n-quic-crypto, s2n-tls)",
    io_modes: NATIVE,
    multi_workload_io: NATIVE,
    options: &[
        OptionSpec::new(OptionKind::Gso, "s2n-quic's UDP GSO (default on, up to 10 datagrams per send)").on(NATIVE),
        OptionSpec::new(OptionKind::Gro, "s2n-quic's UDP GRO (default on where the kernel has it)").on(NATIVE),
        RCVBUF.on(NATIVE),
        SNDBUF.on(NATIVE),
        OptionSpec::new(OptionKind::Cc, "congestion control (default cubic; s2n-quic has no NewReno; also --cc)")
            .on(NATIVE)
            .only(&[LutOpt::Cc(Cc::Cubic), LutOpt::Cc(Cc::Bbr)]),
    ],
    refuses: &[Refusal {
        kind: OptionKind::Cipher,
        why: "s2n-tls picks TLS 1.3 suites through named security policies, and none offers a single suite",
    }],
    build_hint:
        "it is its own cargo workspace (aws-lc and s2n-tls built from source, Rust >= 1.95): `just build` builds it, \
         or `cargo build --release --manifest-path lut-adapters/s2n-quic/Cargo.toml --target-dir target`",
    // The s2n-quic repository's crates the adapter links (s2n-tls is another repository).
    source_build: Some(&SourceBuild::Cargo(CargoBuild {
        crates: &[
            "s2n-quic",
            "s2n-quic-core",
            "s2n-quic-crypto",
            "s2n-quic-platform",
            "s2n-quic-tls",
            "s2n-quic-tls-default",
            "s2n-quic-rustls",
            "s2n-quic-transport",
            "s2n-codec",
        ],
        adapter: CargoAdapter::OwnWorkspace("s2n-quic"),
    })),
    // Verified (bench/versions.md): every API the adapter calls (the tokio I/O builder with its
    // GSO/GRO switches, the s2n-tls provider's trust store, limits, platform-feature events) is
    // the same in all of them, so no code is chosen by version. Their graphs reuse the pinned
    // lock's aws-lc and s2n-tls. Their minimum Rust: 1.71 (1.52) to 1.95 (1.91).
    supported_versions: "s2n-quic 1.52 (Jan 2025) to 1.91 and upstream main (1.88.0 when cloned; \
         a git checkout needs no submodules); the adapter is the same code for all of them",
    releases: Some(Releases::Crates),
    ..Descriptor::BUILTIN
};
