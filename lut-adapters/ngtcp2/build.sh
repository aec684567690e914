#!/usr/bin/env bash
# Builds nesquic-lut-ngtcp2 into the cargo target dir's release/ folder (next to the other LUT
# executables; CARGO_TARGET_DIR respected) with the system C compiler against Debian's ngtcp2
# and GnuTLS (pkg-config: libngtcp2, libngtcp2_crypto_gnutls, gnutls). Symbols are kept (-g, no
# strip) and the libraries stay shared, so probes find ngtcp2_crypto_* and GnuTLS by name.
# Without those packages it warns and skips: everything else still builds.
# `build.sh --lint`: compiles with every warning as an error, writing nothing.
set -euo pipefail

# shellcheck source=../release-dir.sh
. "$(dirname "$0")/../release-dir.sh"
packages="libngtcp2 libngtcp2_crypto_gnutls gnutls"

cc="${CC:-cc}"
if ! command -v "$cc" >/dev/null 2>&1 || ! command -v pkg-config >/dev/null 2>&1; then
    echo "build: warning: no C compiler or pkg-config; skipping the ngtcp2 LUT (scripts/setup.sh installs them)" >&2
    exit 0
fi
if ! pkg-config --exists $packages; then
    echo "build: warning: ngtcp2/GnuTLS development packages missing ($packages); skipping the ngtcp2 LUT" \
        "(apt-get install libngtcp2-dev libngtcp2-crypto-gnutls-dev libgnutls28-dev, or scripts/setup.sh)" >&2
    exit 0
fi
# shellcheck disable=SC2086 # pkg-config prints several flags
flags=(-std=c11 -O2 -g -fno-omit-frame-pointer -Wall -Wextra -Werror $(pkg-config --cflags $packages))
# shellcheck disable=SC2086
libs=($(pkg-config --libs $packages))
sources=("$here"/*.c)
if [ "${1:-}" = "--lint" ]; then
    "$cc" "${flags[@]}" -fsyntax-only "${sources[@]}"
    exit 0
fi
mkdir -p "$release"
"$cc" "${flags[@]}" -o "$release/nesquic-lut-ngtcp2" "${sources[@]}" "${libs[@]}"
