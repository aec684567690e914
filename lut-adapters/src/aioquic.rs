//! aioquic (Python): pure-Python QUIC on asyncio's datagram transport, its crypto in the
//! `cryptography` wheel's library (bundled OpenSSL), run from a venv that
//! `lut-adapters/aioquic/build.sh` creates (requirements.txt pins the versions).

use nesquic_protocol::options::{CongestionControl as Cc, LutOpt, OptionKind};

use crate::descriptor::common::{CIPHER, RCVBUF, SNDBUF};
use crate::descriptor::{Descriptor, OptionSpec, Refusal, Releases, SourceBuild, NATIVE};

/// aioquic on asyncio (one `sendto`/`recvfrom` per datagram), crypto from `cryptography`.
pub static AIOQUIC: Descriptor = Descriptor {
    name: "aioquic",
    version: env!("NESQUIC_AIOQUIC_VERSION"),
    description: "aioquic (Python, asyncio: one sendto/recvfrom per datagram, no GSO/GRO); crypto: the cryptography wheel's OpenSSL",
    crypto_backend: "openssl (cryptography wheel)",
    io_modes: NATIVE,
    multi_workload_io: NATIVE,
    options: &[
        RCVBUF.on(NATIVE),
        SNDBUF.on(NATIVE),
        OptionSpec::new(
            OptionKind::Cc,
            "congestion control: aioquic's Reno (its default) or Cubic; it has no BBR (also --cc)",
        )
        .on(NATIVE)
        .only(&[LutOpt::Cc(Cc::NewReno), LutOpt::Cc(Cc::Cubic)]),
        CIPHER.on(NATIVE),
    ],
    refuses: &[
        Refusal { kind: OptionKind::Gso, why: "asyncio sends one datagram per sendto" },
        Refusal { kind: OptionKind::Gro, why: "asyncio receives one datagram per recvfrom" },
    ],
    build_hint: "it is a Python program: `just build` (or lut-adapters/aioquic/build.sh) creates its venv from PyPI on a \
         CPython with frame pointers, so the sampling profile names Python functions; that CPython is built once per \
         machine into ~/.cache/nesquic (~7-12 min; scripts/setup.sh installs its build dependencies). \
         NESQUIC_AIOQUIC_FP_PYTHON=0 uses python3 (>= 3.10, with venv) instead, as does a failed CPython build, with a \
         warning: then most of aioquic's profile stays unnamed",
    // Installed from the checkout into a venv of its own; the imported module's path proves it.
    source_build: Some(&SourceBuild::Script("aioquic/build-from-source.sh")),
    supported_versions: "aioquic 0.9.25 (Feb 2024) to 1.7.2 from PyPI and upstream main (1.3.0+1, 2025-10-11), each \
        built and run here (bench/versions.md); 1.9 builds only where pylsqpack >= 1.1.1 is installable (this \
        machine's index has older ones); before 1.1 the connection is closed through QuicConnection.close() (the \
        protocol's close() takes no error code there)",
    releases: Some(Releases::PyPi("aioquic")),
    ..Descriptor::BUILTIN
};
