#!/usr/bin/env bash
# Builds a Rust LUT adapter that is a cargo workspace of its own (lut-adapters/s2n-quic, ...) into
# the shared target dir's release/ folder, next to the other LUT executables (CARGO_TARGET_DIR
# respected). Where the installed Rust is older than the adapter's `rust-version`, or a tool its
# `[package.metadata.nesquic] needs` names is missing, it warns and skips: everything else still
# builds, and `nesquic luts` lists that LUT as unavailable with how to build it.
# usage: build-own-workspace.sh [--lint|--test] DIR
#   --lint: rustfmt check and clippy with warnings as errors (`just lint`); --test: its unit tests.
set -euo pipefail

mode=build
case "${1:-}" in --lint | --test) mode="${1#--}"; shift ;; esac
[ $# -eq 1 ] || { echo "usage: $0 [--lint|--test] DIR" >&2; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$(cd "$1" && pwd)"
manifest="$dir/Cargo.toml"
name="$(sed -n 's/^name = "\(.*\)"/\1/p' "$manifest" | head -n1)"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac

need="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$manifest" | head -n1)"
have="$(rustc --version | awk '{print $2}')"
if [ -n "$need" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1)" != "$need" ]; then
    echo "build: warning: rustc $have is older than $need; skipping $name (rustup update)" >&2
    exit 0
fi
for tool in $(sed -n 's/^needs = \[\(.*\)\]/\1/p' "$manifest" | tr -d '",'); do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "build: warning: $tool not found; skipping $name (scripts/setup.sh installs it)" >&2
        exit 0
    fi
done

cargo=(--release --manifest-path "$manifest" --target-dir "$target")
case "$mode" in
    build) cargo build "${cargo[@]}" ;;
    test) cargo test "${cargo[@]}" ;;
    lint)
        cargo fmt --manifest-path "$manifest" -- --check
        cargo clippy "${cargo[@]}" --all-targets -- -D warnings
        ;;
esac
