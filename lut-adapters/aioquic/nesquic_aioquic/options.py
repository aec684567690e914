"""`--opt KEY=VALUE` settings (nesquic's `--lut-opt`), checked here too so direct use of the
executable gets the same refusals as `nesquic run`."""

from dataclasses import dataclass

from aioquic.tls import CipherSuite

SUPPORTED = "cc=newreno|cubic, cipher=aes128gcm|aes256gcm|chacha20, rcvbuf=BYTES, sndbuf=BYTES"

# Nesquic's names -> aioquic's `congestion_control_algorithm` (it has no BBR).
CONGESTION = {"newreno": "reno", "cubic": "cubic"}
CIPHERS = {
    "aes128gcm": CipherSuite.AES_128_GCM_SHA256,
    "aes256gcm": CipherSuite.AES_256_GCM_SHA384,
    "chacha20": CipherSuite.CHACHA20_POLY1305_SHA256,
}


class OptionError(ValueError):
    pass


@dataclass
class Options:
    congestion: str | None = None  # None: aioquic's default (reno)
    cipher: CipherSuite | None = None  # None: every TLS 1.3 suite aioquic offers
    rcvbuf: int = 0  # 0: the kernel's default
    sndbuf: int = 0


def parse(items: list[str]) -> Options:
    o = Options()
    for item in items:
        key, _, value = item.partition("=")
        if key == "cc":
            if value not in CONGESTION:
                raise OptionError(f"option {item!r}: aioquic offers only NewReno and Cubic (cc=newreno|cubic)")
            o.congestion = CONGESTION[value]
        elif key == "cipher":
            if value not in CIPHERS:
                raise OptionError(f"option {item!r}: cipher takes {'|'.join(CIPHERS)}")
            o.cipher = CIPHERS[value]
        elif key in ("rcvbuf", "sndbuf"):
            if not value.isdigit() or int(value) <= 0:
                raise OptionError(f"option {item!r}: a byte count above 0 expected")
            setattr(o, key, int(value))
        elif key in ("gso", "gro", "mmsg"):
            raise OptionError(
                f"option {item!r}: aioquic sends and receives one datagram per system call through asyncio "
                "(sendto/recvfrom): it has no GSO, GRO or mmsg batching to switch"
            )
        else:
            raise OptionError(f"unknown option {item!r}; supported: {SUPPORTED}")
    return o
