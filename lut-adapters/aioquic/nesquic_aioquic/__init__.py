"""nesquic-lut-aioquic: aioquic (pure-Python QUIC on asyncio, crypto from the `cryptography`
wheel's bundled OpenSSL) speaking Nesquic's benchmark protocol (docs/protocol.md). It depends on
that description only, never on the project's Rust crates."""
