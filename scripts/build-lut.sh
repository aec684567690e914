#!/usr/bin/env bash
# Builds one LUT executable (or nesquic itself) into the target dir's release/ folder: the one
# place that says how each is built. `just build` calls it for everything; `just run` only for
# `core` (nesquic, the agent, the quinn and TCP+TLS executables), and `nesquic run --lut X` calls it
# for X the first time X is needed (nesquic-cli/engine/src/on_demand.rs), so a fresh machine's
# first result does not wait for nine stacks. CARGO_TARGET_DIR is respected.
# usage: build-lut.sh core|quinn|tcp-tls|quiche|msquic|s2n-quic|tquic|quic-go|aioquic|ngtcp2
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 core|quinn|tcp-tls|quiche|msquic|s2n-quic|tquic|quic-go|aioquic|ngtcp2" >&2; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac

# quinn and the TCP+TLS baseline without quiche's BoringSSL (~3 min of cmake that they do not
# need), with the libraries' qlog (`--lut-qlog`); cargo keeps both feature sets' artifacts, so
# a later full build does not redo them.
without_quiche=(cargo build --release -p nesquic-lut-bins --no-default-features --features qlog
    --bin nesquic-lut-quinn --bin nesquic-lut-tcp-tls --target-dir "$target")

# What this LUT's build needs from the system, installed on its first build (said once, with why).
case "$1" in
    core | quinn | tcp-tls) ;;
    *) ./scripts/setup.sh "$1" || echo "build-lut: could not install what $1 needs (above); building anyway" >&2 ;;
esac

case "$1" in
    core)
        cargo build --release -p nesquic-cli -p nesquic-agent --target-dir "$target"
        "${without_quiche[@]}"
        ;;
    quinn | tcp-tls) "${without_quiche[@]}" ;;
    quiche) cargo build --release -p nesquic-lut-bins --bin nesquic-lut-quiche --target-dir "$target" ;;
    msquic) cargo build --release --manifest-path lut-adapters/msquic/Cargo.toml --target-dir "$target" ;;
    s2n-quic | tquic) ./scripts/build-own-workspace.sh "lut-adapters/$1" ;;
    quic-go | aioquic | ngtcp2) "./lut-adapters/$1/build.sh" ;;
    *)
        echo "build-lut: no LUT named '$1'" >&2
        exit 2
        ;;
esac
