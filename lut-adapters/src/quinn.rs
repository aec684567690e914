//! quinn 0.11 and 0.12 with rustls + ring: natively on tokio + quinn-udp, or quinn-proto over
//! Nesquic's I/O.

use nesquic_protocol::cli::IoMode;
use nesquic_protocol::options::OptionKind;

use crate::descriptor::common::{CC, CIPHER, IO_GRO, IO_MMSG, RCVBUF, SNDBUF};
use crate::descriptor::{CargoAdapter, CargoBuild, Descriptor, OptionSpec, Releases, SourceBuild, ALL_IO};

/// quinn, rebuilt from a checkout by `--lut-path` (quinn, quinn-proto, quinn-udp); its GSO switch
/// is quinn-udp's natively and the I/O layer's on `--io nesquic`.
pub static QUINN: Descriptor = Descriptor {
    name: "quinn",
    version: env!("NESQUIC_QUINN_VERSION"),
    description: "quinn (rustls + ring); native: tokio + quinn-udp; nesquic/plain: quinn-proto over Nesquic I/O",
    crypto_backend: "ring",
    io_modes: ALL_IO,
    multi_workload_io: ALL_IO,
    options: &[
        OptionSpec::new(
            OptionKind::Gso,
            "UDP segmentation offload (native: quinn's own; nesquic: the I/O layer's; default on)",
        )
        .on(&[IoMode::Native, IoMode::Nesquic]),
        IO_GRO,
        IO_MMSG,
        RCVBUF,
        SNDBUF,
        CC,
        CIPHER,
    ],
    source_build: Some(&SourceBuild::Cargo(CargoBuild {
        crates: &["quinn", "quinn-proto", "quinn-udp"],
        adapter: CargoAdapter::QuicBins {
            source: "src/bin/quinn.rs",
            // quinn's qlog comes through quic-bins' `qlog` feature, on where the release has it.
            dependencies: "quinn = \"*\"\n\
                tokio = { version = \"1\", features = [\"rt\", \"rt-multi-thread\", \"macros\", \"net\", \"time\", \"io-util\", \"sync\"] }\n\
                anyhow = \"1\"\nclap = { version = \"4.5\", features = [\"derive\", \"env\"] }\nlibc = \"0.2\"\n",
            features: &[],
        },
    })),
    supported_versions: "quinn 0.12 (main, built and run), the 0.11.x branch (0.11.11 with quinn-proto 0.11.16, \
        built and run), 0.11.8-0.11.12 releases (0.11.8 compiled; qlog from 0.11.9, off with a note before); \
        quinn-proto and quinn-udp at the versions the checkout holds (bench/versions.md)",
    releases: Some(Releases::Crates),
    ..Descriptor::BUILTIN
};
