#!/usr/bin/env bash
# Builds nesquic-lut-ngtcp2 into the cargo target dir's release/ folder (next to the other LUT
# executables; CARGO_TARGET_DIR respected) with the system C compiler against Debian's ngtcp2
# and GnuTLS (pkg-config: libngtcp2, libngtcp2_crypto_gnutls, gnutls). Symbols are kept (-g, no
# strip) and the libraries stay shared, so probes find ngtcp2_crypto_* and GnuTLS by name.
# Debian's libraries are stripped, so the sampling profile could not name their functions: the
# adapter links the same Debian sources built with symbols and frame pointers by symbols.sh
# (target/lut-builds/ngtcp2-symbols/, once, a few minutes), loaded through a DT_RPATH. When that
# build fails (no deb-src access, build tools missing) it warns and links Debian's stripped
# libraries; NESQUIC_NGTCP2_LIBS=debian asks for those directly.
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
if [ "${NESQUIC_NGTCP2_LIBS:-symbols}" != debian ]; then
    if dirs="$("$here/symbols.sh" "$target/lut-builds/ngtcp2-symbols")"; then
        read -r ngtcp2_src ngtcp2_build gnutls_lib <<<"$dirs"
        libdirs="$ngtcp2_build/lib:$ngtcp2_build/crypto/gnutls:$gnutls_lib"
        # The built headers first (the same version as Debian's in /usr/include).
        flags=(-I"$ngtcp2_src/lib/includes" -I"$ngtcp2_build/lib/includes" -I"$ngtcp2_src/crypto/includes" "${flags[@]}")
        libs=(-L"$ngtcp2_build/lib" -L"$ngtcp2_build/crypto/gnutls" -L"$gnutls_lib" -lngtcp2_crypto_gnutls -lngtcp2 -lgnutls
            -Wl,--disable-new-dtags,-rpath,"$libdirs")
    else
        echo "build: warning: ngtcp2/GnuTLS with symbols could not be built (above); linking Debian's stripped" \
            "libraries: the sampling profile will not name their functions" >&2
    fi
fi
mkdir -p "$release"
"$cc" "${flags[@]}" -o "$release/nesquic-lut-ngtcp2" "${sources[@]}" "${libs[@]}"
