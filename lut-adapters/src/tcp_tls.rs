//! The TCP+TLS baseline's descriptor: what QUIC replaces, run through the same protocol.

use nesquic_protocol::options::OptionKind;

use crate::descriptor::common::{CC, CIPHER, RCVBUF, SNDBUF};
use crate::descriptor::{Descriptor, OptionSpec, Refusal, NATIVE};

const NO_UDP: &str = "kernel TCP: there are no UDP datagrams to segment or batch";

/// Kernel TCP with TLS 1.3 from rustls (ring), the TLS configuration quinn uses; the executable
/// is `nesquic-lut-tcp-tls` (`nesquic-lut-bins`). `native` here means kernel TCP: there is no
/// UDP path to swap.
pub static TCP_TLS: Descriptor = Descriptor {
    name: "tcp-tls",
    version: concat!("rustls ", env!("NESQUIC_RUSTLS_VERSION")),
    description: "baseline: kernel TCP + TLS 1.3 (rustls + ring, blocking threads); one connection = one TCP+TLS connection, and M streams = M TCP+TLS connections",
    crypto_backend: "ring",
    io_modes: NATIVE,
    multi_workload_io: NATIVE,
    options: &[
        RCVBUF.on(NATIVE),
        SNDBUF.on(NATIVE),
        OptionSpec {
            meaning: "the kernel's TCP_CONGESTION (newreno = reno; refused if the kernel lacks it; default: the kernel's; also --cc)",
            ..CC.on(NATIVE)
        },
        OptionSpec { meaning: "the only TLS 1.3 cipher suite offered; also --cipher", ..CIPHER.on(NATIVE) },
        OptionSpec::new(
            OptionKind::Ktls,
            "kernel TLS offload: on is refused with the kernel's answer (needs the tls ULP; not implemented)",
        )
        .on(NATIVE),
    ],
    refuses: &[
        Refusal { kind: OptionKind::Gso, why: NO_UDP },
        Refusal { kind: OptionKind::Gro, why: NO_UDP },
        Refusal { kind: OptionKind::Mmsg, why: NO_UDP },
    ],
    ..Descriptor::BUILTIN
};
