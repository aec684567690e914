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
# `build.sh --lint`: compiles with every warning as an error, writing nothing, both API branches of
# compat.h: 0.12 against Debian's headers, 1.x against the headers of the newest 1.x source
# Debian serves (release-source.sh; fetched and configured once into
# target/lut-builds/ngtcp2-lint-1.x/, a few seconds) or of NESQUIC_NGTCP2_LINT_SOURCE (an ngtcp2
# 1.x checkout). Without either it warns that the 1.x branch was not checked.
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
# The 1.x branch of compat.h against a real 1.x tree: its headers, version.h as cmake writes it.
lint_1x() {
    local dir="$target/lut-builds/ngtcp2-lint-1.x" src
    if [ -n "${NESQUIC_NGTCP2_LINT_SOURCE:-}" ]; then
        src="$(cd "$NESQUIC_NGTCP2_LINT_SOURCE" && pwd)" || return 1
        dir="$dir/$(printf '%s' "$src" | sha256sum | cut -c1-12)"
        rm -f "$dir/.done"
    else
        src="$dir/src"
    fi
    if [ ! -f "$dir/.done" ]; then
        if [ -z "${NESQUIC_NGTCP2_LINT_SOURCE:-}" ]; then
            rm -rf "$dir"
            mkdir -p "$dir"
            "$here/release-source.sh" newest-1.x "$src" >/dev/null 2>"$dir/fetch.log" || {
                echo "build: warning: the adapter's 1.x API branch was not linted: no ngtcp2 1.x source" \
                    "($(tail -1 "$dir/fetch.log")); set NESQUIC_NGTCP2_LINT_SOURCE=CHECKOUT to lint against one" >&2
                return 0
            }
        fi
        mkdir -p "$dir"
        cmake -S "$src" -B "$dir/build" -DENABLE_GNUTLS=ON -DENABLE_OPENSSL=OFF -DENABLE_LIB_ONLY=ON \
            -DENABLE_STATIC_LIB=OFF -DBUILD_TESTING=OFF >"$dir/configure.log" 2>&1 \
            || { cat "$dir/configure.log" >&2; echo "build: error: cmake could not configure $src" >&2; return 1; }
        touch "$dir/.done"
    fi
    local version
    version="$(sed -n 's/^#define NGTCP2_VERSION "\(.*\)"/\1/p' "$dir/build/lib/includes/ngtcp2/version.h")"
    case "$version" in 1.*) ;; *) echo "build: error: $src is ngtcp2 '$version', not 1.x" >&2; return 1 ;; esac
    # shellcheck disable=SC2086 # pkg-config prints several flags
    "$cc" -std=c11 -O2 -Wall -Wextra -Werror -I"$src/lib/includes" -I"$dir/build/lib/includes" -I"$src/crypto/includes" \
        $(pkg-config --cflags gnutls) -fsyntax-only "${sources[@]}"
    echo "build: lint: the adapter compiles warnings-clean against Debian's ngtcp2 $(pkg-config --modversion libngtcp2) and ngtcp2 $version ($src)" >&2
}
if [ "${1:-}" = "--lint" ]; then
    "$cc" "${flags[@]}" -fsyntax-only "${sources[@]}"
    lint_1x
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
