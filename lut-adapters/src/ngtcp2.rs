//! ngtcp2 (C, sans-IO) with GnuTLS, from Debian's packages, driven by a C adapter with its own
//! event loop (`lut-adapters/ngtcp2/`, built with the system compiler by `build.sh`); the same
//! adapter builds against an ngtcp2 1.x checkout (`--lut-path`, `compat.h`).

use nesquic_protocol::options::OptionKind;

use crate::descriptor::common::{CC, CIPHER, RCVBUF, SNDBUF};
use crate::descriptor::{Descriptor, OptionSpec, Releases, SourceBuild, NATIVE};

/// ngtcp2 + GnuTLS over the adapter's own `sendmsg` (UDP GSO) / `recvmsg` (UDP GRO) loop.
pub static NGTCP2: Descriptor = Descriptor {
    name: "ngtcp2",
    version: env!("NESQUIC_NGTCP2_VERSION"),
    description: "ngtcp2 (C, GnuTLS; Debian packages) on the adapter's own poll loop: sendmsg with UDP GSO, recvmsg with UDP GRO",
    crypto_backend: "gnutls (nettle)",
    io_modes: NATIVE,
    multi_workload_io: NATIVE,
    options: &[
        OptionSpec::new(
            OptionKind::Gso,
            "UDP GSO in the adapter's send loop (ngtcp2 writes packets of one size back to back; default on)",
        )
        .on(NATIVE),
        OptionSpec::new(
            OptionKind::Gro,
            "UDP GRO in the adapter's receive loop (several datagrams per recvmsg; default on)",
        )
        .on(NATIVE),
        RCVBUF.on(NATIVE),
        SNDBUF.on(NATIVE),
        OptionSpec { meaning: "congestion control: ngtcp2's Reno, Cubic (default) or BBR (also --cc)", ..CC.on(NATIVE) },
        OptionSpec {
            meaning: "the only TLS 1.3 cipher suite offered, as a GnuTLS priority (Initial packets stay AES-128-GCM); also --cipher",
            ..CIPHER.on(NATIVE)
        },
    ],
    build_hint: "it is a C program: `just build` builds it when Debian's libngtcp2-dev, libngtcp2-crypto-gnutls-dev and \
         libgnutls28-dev are installed (scripts/setup.sh installs them), or run lut-adapters/ngtcp2/build.sh",
    // Built from the checkout with cmake against GnuTLS; the executable's libraries prove it.
    source_build: Some(&SourceBuild::Script("ngtcp2/build-from-source.sh")),
    // compat.h picks the API from the checkout's NGTCP2_VERSION_NUM; checked 2026-12-07 with
    // upstream's repository (bench/versions.md has each build and transfer).
    supported_versions: "ngtcp2 1.x with GnuTLS (1.x asks for GnuTLS >= 3.7.2; Debian 12 has 3.7.9): upstream's default \
         branch (1.25.90, 2026-08-22) and every release from 1.0.0 to 1.25.0 (each built and moved 50 MB here; 1.3.0 \
         and 1.4.0 need their tests/munit submodule, which their cmake reads), Debian's 1.24.0 source \
         (release-source.sh); and 0.12.x (Debian 12, the pinned default). 0.13-0.19 are refused before building: their \
         API changed release by release on the way to 1.0",
    releases: Some(Releases::DebianSource("ngtcp2/release-source.sh")),
    ..Descriptor::BUILTIN
};
