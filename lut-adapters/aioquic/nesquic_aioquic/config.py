"""aioquic's QuicConfiguration for both roles: TLS 1.3 with ALPN `nesquic`, the run's DER
certificate and key (server), the run's certificate as the client's only trust anchor, server
name `localhost` (docs/protocol.md)."""

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from aioquic.quic.configuration import QuicConfiguration

from .options import Options

ALPN = ["nesquic"]
SERVER_NAME = "localhost"
# Without a packet for this long a connection ends; a client whose CONNECTION_CLOSE was lost
# does not keep the server waiting for aioquic's default of 60 s.
IDLE_TIMEOUT_S = 5.0


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise SystemExit(f"nesquic-lut-aioquic: read {what} {path}: {e.strerror}") from e


def configure(is_client: bool, options: Options, quic_logger) -> QuicConfiguration:
    c = QuicConfiguration(is_client=is_client, alpn_protocols=ALPN, idle_timeout=IDLE_TIMEOUT_S)
    c.quic_logger = quic_logger
    if options.congestion:
        c.congestion_control_algorithm = options.congestion
    if options.cipher is not None:
        c.cipher_suites = [options.cipher]
    return c


def server_config(cert: str, key: str, options: Options, quic_logger) -> QuicConfiguration:
    c = configure(False, options, quic_logger)
    c.certificate = x509.load_der_x509_certificate(_read(cert, "--cert"))
    c.private_key = serialization.load_der_private_key(_read(key, "--key"), password=None)
    return c


def client_config(ca: str, options: Options, quic_logger) -> QuicConfiguration:
    c = configure(True, options, quic_logger)
    c.server_name = SERVER_NAME
    # aioquic verifies the chain against `cadata` (PEM) and the name against server_name.
    anchor = x509.load_der_x509_certificate(_read(ca, "--ca"))
    c.load_verify_locations(cadata=anchor.public_bytes(serialization.Encoding.PEM))
    return c
