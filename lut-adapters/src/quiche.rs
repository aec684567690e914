//! quiche (Cloudflare, BoringSSL built from source): no I/O of its own, driven through the
//! translation layer.

use nesquic_protocol::options::OptionKind;

use crate::descriptor::common::{CC, IO_GRO, IO_GSO, IO_MMSG, IO_RCVBUF, IO_SNDBUF};
use crate::descriptor::{CargoAdapter, CargoBuild, Descriptor, OptionSpec, Refusal, Releases, SourceBuild, TRANSLATED};

/// quiche through the translation layer, on Nesquic's I/O layer or plain sockets.
pub static QUICHE: Descriptor = Descriptor {
    name: "quiche",
    version: env!("NESQUIC_QUICHE_VERSION"),
    description: "quiche (BoringSSL) driven by Nesquic's translation layer; it has no I/O of its own",
    crypto_backend: "boringssl",
    io_modes: TRANSLATED,
    multi_workload_io: TRANSLATED,
    options: &[
        IO_GSO,
        IO_GRO,
        IO_MMSG,
        IO_RCVBUF,
        IO_SNDBUF,
        OptionSpec {
            meaning: "congestion control: cubic (default), newreno (Reno), bbr (BBRv2); also --cc",
            ..CC.on(TRANSLATED)
        },
        OptionSpec::new(OptionKind::Pacing, "quiche's pacing (SendInfo.at honoured; default on)").on(TRANSLATED),
    ],
    refuses: &[Refusal { kind: OptionKind::Cipher, why: "quiche::Config has no TLS 1.3 cipher suite setting" }],
    // Its checkout's own path dependencies (qlog, octets, ...) come along with it.
    source_build: Some(&SourceBuild::Cargo(CargoBuild {
        crates: &["quiche"],
        adapter: CargoAdapter::QuicBins {
            source: "src/bin/quiche.rs",
            dependencies: "clap = { version = \"4.5\", features = [\"derive\", \"env\"] }\n",
            features: &["quiche"],
        },
    })),
    supported_versions: "quiche 0.29.3 (master and its newest tag, built and run) and 0.30 (pinned); the adapter \
        accepts 0.24-0.30 (before 0.27 it reads streams through a copy, no stream_recv_buf; not built here); \
        BoringSSL always from the boring crate (crates.io), so a checkout needs no deps/boringssl submodule",
    releases: Some(Releases::Crates),
    ..Descriptor::BUILTIN
};
