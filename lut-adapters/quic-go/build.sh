#!/usr/bin/env bash
# Builds nesquic-lut-quic-go into the cargo target dir's release/ folder (next to the other LUT
# executables; CARGO_TARGET_DIR respected). Symbols are kept (no -s -w) so probes attach by name;
# CGO off gives a static binary (the probe agent cannot be preloaded: the kernel backend measures it).
# Without a Go toolchain of the version go.mod names, it warns and skips: everything else still builds.
# `build.sh --lint`: gofmt and go vet instead of the build (`just lint`).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
need="$(sed -n 's/^go \([0-9][0-9.]*\).*/\1/p' "$here/go.mod")"

if ! command -v go >/dev/null 2>&1; then
    echo "build: warning: go not found; skipping the quic-go LUT (needs Go >= $need: https://go.dev/dl/)" >&2
    exit 0
fi
have="$(go env GOVERSION | sed 's/^go//')"
if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1)" != "$need" ]; then
    echo "build: warning: go $have is older than $need; skipping the quic-go LUT (install Go >= $need: https://go.dev/dl/)" >&2
    exit 0
fi

cd "$here"
if [ "${1:-}" = "--lint" ]; then
    unformatted="$(gofmt -l .)"
    [ -z "$unformatted" ] || { echo "gofmt: not formatted: $unformatted (run gofmt -w lut-adapters/quic-go)" >&2; exit 1; }
    GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" go vet ./...
    exit 0
fi
mkdir -p "$target/release"
# GOTOOLCHAIN=local: never download another toolchain behind the user's back; GOFLAGS=-mod=readonly:
# the build uses go.mod/go.sum as committed.
CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" go build -trimpath -o "$target/release/nesquic-lut-quic-go" .
