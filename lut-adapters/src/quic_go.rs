//! quic-go (Go): its own UDP path and Go's crypto/tls, in a Go executable built from
//! `lut-adapters/quic-go/` (go.mod names the version) by `just build` when Go is installed.

use nesquic_protocol::options::{CongestionControl as Cc, LutOpt, OptionKind};

use crate::descriptor::common::{RCVBUF, SNDBUF};
use crate::descriptor::{Descriptor, OptionSpec, Refusal, Releases, SourceBuild, NATIVE};

/// quic-go on its own I/O (sendmsg with GSO, recvmmsg), crypto from Go's standard library.
pub static QUIC_GO: Descriptor = Descriptor {
    name: "quic-go",
    version: env!("NESQUIC_QUIC_GO_VERSION"),
    description:
        "quic-go (Go, crypto/tls) on its own UDP path (GSO, recvmmsg); function probes count only (no timing in Go)",
    crypto_backend: "go crypto",
    io_modes: NATIVE,
    multi_workload_io: NATIVE,
    options: &[
        OptionSpec::new(OptionKind::Gso, "quic-go's UDP GSO (off: QUIC_GO_DISABLE_GSO=1; default on)").on(NATIVE),
        OptionSpec {
            meaning: "SO_RCVBUF to request, set after quic-go's own 7 MiB (also --rcvbuf)",
            ..RCVBUF.on(NATIVE)
        },
        OptionSpec {
            meaning: "SO_SNDBUF to request, set after quic-go's own 7 MiB (also --sndbuf)",
            ..SNDBUF.on(NATIVE)
        },
        OptionSpec::new(
            OptionKind::Cc,
            "congestion control: quic-go runs only Cubic, nothing else can be chosen (also --cc)",
        )
        .on(NATIVE)
        .only(&[LutOpt::Cc(Cc::Cubic)]),
    ],
    refuses: &[Refusal {
        kind: OptionKind::Cipher,
        why: "Go's crypto/tls does not let TLS 1.3 cipher suites be configured",
    }],
    build_hint: "it is a Go program: `just build` builds it when Go (the version lut-adapters/quic-go/go.mod names, \
         https://go.dev/dl/) is installed, or run lut-adapters/quic-go/build.sh",
    // `go mod edit -replace` onto the checkout; `go list -m` and `go version -m` prove it.
    source_build: Some(&SourceBuild::Script("quic-go/build-from-source.sh")),
    // Verified by building and running each (bench/versions.md, quic-go section).
    supported_versions: "quic-go v0.43 to v0.66 and upstream's main (2026-08-03, v0.61.0-8): the adapter's Go build \
         tags are chosen from the checkout's API (interfaces before v0.53, a stats tracer before v0.55, qlog event \
         schemas v0.56-v0.64 and main); before v0.56 there is no qlogwriter, so --lut-qlog is off (the io line and \
         stderr say so); older than v0.43 is refused by name (no quic.ConnectionTracingID)",
    releases: Some(Releases::GoModule("github.com/quic-go/quic-go")),
    ..Descriptor::BUILTIN
};
