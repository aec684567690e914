//! aioquic (Python): pure-Python QUIC on asyncio's datagram transport, its crypto in the
//! `cryptography` wheel's library (bundled OpenSSL), run from a venv that
//! `lut-adapters/aioquic/build.sh` creates (requirements.txt pins the versions).

use nesquic_protocol::options::{CongestionControl as Cc, LutOpt, OptionKind};

use crate::descriptor::common::{CIPHER, RCVBUF, SNDBUF};
use crate::descriptor::{Descriptor, OptionSpec, Refusal, SourceBuild, NATIVE};

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
    build_hint: "it is a Python program: `just build` creates its venv from PyPI when python3 (>= 3.10, with venv) is \
         installed (scripts/setup.sh installs python3-venv), or run lut-adapters/aioquic/build.sh; for Python function \
         names in the sampling profile, `NESQUIC_AIOQUIC_FP_PYTHON=1 lut-adapters/aioquic/build.sh` first builds a CPython \
         with frame pointers (its perf trampolines name each Python call)",
    // Installed from the checkout into a venv of its own; the imported module's path proves it.
    source_build: Some(&SourceBuild::Script("aioquic/build-from-source.sh")),
    ..Descriptor::BUILTIN
};
