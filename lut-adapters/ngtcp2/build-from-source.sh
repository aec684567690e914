#!/usr/bin/env bash
# build-from-source.sh --lut-path CHECKOUT --out DIR: builds nesquic-lut-ngtcp2 (the same
# executable and command line as build.sh's) against an ngtcp2 checkout instead of Debian's
# libngtcp2, into DIR, and prints one JSON line on stdout (see ../source-build.sh).
#
# How: cmake builds the checkout out of tree in DIR/build (the checkout is never written to) with
# the GnuTLS crypto backend (Debian's libgnutls28-dev), shared libraries, symbols kept; the adapter
# is compiled against the checkout's headers and linked to those libraries with a DT_RPATH naming
# the build directories (DT_RPATH, not RUNPATH: LD_LIBRARY_PATH cannot override it). The libraries
# stay shared, as with build.sh, so the probes find ngtcp2_crypto_* and GnuTLS by name.
# What it proves, or exits non-zero naming the mismatch:
#   - DIR/build was configured from CHECKOUT (CMakeCache.txt's CMAKE_HOME_DIRECTORY);
#   - the dynamic loader (ldd) resolves libngtcp2 and libngtcp2_crypto_gnutls to DIR/build, and
#     no other copy of them (Debian's) is loaded;
#   - every ngtcp2_* symbol the executable imports is defined by those libraries (nm -D).
# Versions: the adapter's code for the checkout's API is chosen by compat.h from the checkout's
# NGTCP2_VERSION_NUM: 0.12.x (Debian 12) or 1.x (upstream since 1.0.0); 0.13-0.19 are refused
# before compiling, naming the version. Only the two libraries are built (ENABLE_LIB_ONLY, no
# tests): a clone without its submodules (tests/munit, third-party/urlparse) builds too.
# Cached in DIR (see ../source-build.sh): a second call with nothing changed only re-runs the proof.
set -euo pipefail

lut=ngtcp2
# shellcheck source=../source-build.sh
. "$(dirname "$0")/../source-build.sh"
parse_args "$@"

cc="${CC:-cc}"
for tool in "$cc" cmake make pkg-config ldd nm; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (scripts/setup.sh installs the build tools)"
done
pkg-config --exists gnutls || die "GnuTLS development files missing (apt-get install libgnutls28-dev, or scripts/setup.sh)"
grep -qsi '^project(ngtcp2' "$source/CMakeLists.txt" \
    || die "$source/CMakeLists.txt does not declare project(ngtcp2 ...): not an ngtcp2 checkout"

checkout_state
binary="$out/nesquic-lut-ngtcp2"
build="$out/build"
libdirs=("$build/lib" "$build/crypto/gnutls")
key="$(build_key "$here"/*.c "$here"/*.h "$0")"

# The checkout's version (the configured version.h) and the adapter's API branch for it (compat.h).
version_h="$build/lib/includes/ngtcp2/version.h"
check_api() {
    [ -f "$version_h" ] || die "cmake configured $source but wrote no $version_h"
    version="$(sed -n 's/^#define NGTCP2_VERSION "\(.*\)"/\1/p' "$version_h")"
    local num
    num="$(sed -n 's/^#define NGTCP2_VERSION_NUM \(0x[0-9a-fA-F]*\).*/\1/p' "$version_h")"
    [ -n "$num" ] || die "$version_h defines no NGTCP2_VERSION_NUM"
    if ((num >= 0x010000)); then
        api="1.x"
    elif ((num >= 0x000c00 && num < 0x000d00)); then
        api="0.12"
    else
        die "$source is ngtcp2 ${version:-$num}: the adapter is written for the 0.12.x API (Debian 12) and the 1.x API" \
            "(upstream since 1.0.0); 0.13-0.19 renamed it on the way to 1.0. Check out a 1.x tag or the default branch"
    fi
}

if cached; then
    say "up to date: $binary ($source at $revision)"
else
    # A failed build must not leave the previous executable behind to be run by mistake.
    rm -f "$out/.build-key" "$binary"
    # cmake refuses a build directory configured from another source tree: start that one afresh.
    if ! grep -qsxF "CMAKE_HOME_DIRECTORY:INTERNAL=$source" "$build/CMakeCache.txt"; then
        rm -rf "$build"
    fi
    say "configure $source (cmake, GnuTLS backend) ..."
    if ! cmake -S "$source" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_FLAGS=-fno-omit-frame-pointer -DENABLE_GNUTLS=ON -DENABLE_OPENSSL=OFF \
        -DENABLE_SHARED_LIB=ON -DENABLE_STATIC_LIB=OFF -DENABLE_LIB_ONLY=ON -DBUILD_TESTING=OFF >"$out/configure.log" 2>&1; then
        cat "$out/configure.log" >&2
        # 1.3-1.4 configure their tests whatever BUILD_TESTING says, from the tests/munit submodule.
        if grep -q 'munit/munit.c' "$out/configure.log" && [ ! -f "$source/tests/munit/munit.c" ]; then
            die "this ngtcp2 version's cmake needs its tests/munit submodule, which $source lacks:" \
                "run \`git -C $source submodule update --init tests/munit\` (1.5.0 and later build without it)"
        fi
        die "configure $source (cmake, GnuTLS backend) failed (output above, also in $out/configure.log)"
    fi
    check_api
    step "build libngtcp2 and libngtcp2_crypto_gnutls" "$out/build.log" \
        make -C "$build" -j"$(nproc)" ngtcp2 ngtcp2_crypto_gnutls
    # As build.sh, symbols kept; not -Werror: another ngtcp2 version may deprecate what the adapter calls.
    # shellcheck disable=SC2046 # pkg-config prints several flags
    step "compile the adapter against the checkout's headers" "$out/adapter.log" \
        "$cc" -std=c11 -O2 -g -fno-omit-frame-pointer -Wall -Wextra \
        -I"$source/lib/includes" -I"$build/lib/includes" -I"$source/crypto/includes" \
        $(pkg-config --cflags gnutls) -o "$binary" "$here"/*.c \
        -L"${libdirs[0]}" -L"${libdirs[1]}" -lngtcp2_crypto_gnutls -lngtcp2 $(pkg-config --libs gnutls) \
        -Wl,--disable-new-dtags,-rpath,"${libdirs[0]}:${libdirs[1]}"
    mark_built
fi
check_api

# Proof 1: the libraries were compiled from the checkout.
grep -qsxF "CMAKE_HOME_DIRECTORY:INTERNAL=$source" "$build/CMakeCache.txt" \
    || die "$build was not configured from $source ($(grep -s CMAKE_HOME_DIRECTORY "$build/CMakeCache.txt" || echo 'no CMakeCache.txt'))"
# Proof 2: the loader picks them, and no other ngtcp2.
resolved="$(ldd "$binary")" || die "ldd $binary failed"
declare -A libs=()
while read -r name _ path _; do
    case "$name" in libngtcp2.so* | libngtcp2_crypto_gnutls.so*) libs[$name]="$(realpath "$path" 2>/dev/null || echo "$path")" ;; esac
done <<<"$resolved"
for want in libngtcp2 libngtcp2_crypto_gnutls; do
    found=""
    for name in "${!libs[@]}"; do
        [ "${name%%.so*}" = "$want" ] || continue
        [ -z "$found" ] || die "$binary loads two ${want} libraries: $found and ${libs[$name]}"
        found="${libs[$name]}"
    done
    case "$found" in
    "$build"/*) ;;
    *) printf '%s\n' "$resolved" >&2; die "$binary loads $want from '${found:-nowhere}', not from the checkout's build in $build" ;;
    esac
done
# Proof 3: the symbols the adapter imports from ngtcp2 are the checkout build's.
imported="$(nm -D --undefined-only "$binary" | awk '$2 ~ /^ngtcp2_/ { print $2 }' | sort -u)"
defined="$(for lib in "${libs[@]}"; do nm -D --defined-only "$lib"; done | awk '{ print $3 }' | sed 's/@.*//' | sort -u)"
missing="$(comm -23 <(printf '%s\n' "$imported") <(printf '%s\n' "$defined"))"
[ -n "$imported" ] || die "$binary imports no ngtcp2_* symbol: ngtcp2 is not linked dynamically"
[ -z "$missing" ] || die "ngtcp2 symbols the adapter imports but the checkout's libraries do not define: $missing"

say "ready: $binary from $source (ngtcp2 ${version:-unknown}, the adapter's $api API, $revision$([ "$dirty" = true ] && echo ", dirty"))"
emit "${version:-unknown}" "$build configured from $source (ngtcp2 ${version:-unknown}, adapter API $api); ldd: $(for n in "${!libs[@]}"; do printf '%s => %s; ' "$n" "${libs[$n]}"; done)all $(wc -l <<<"$imported") ngtcp2_* symbols the adapter imports defined there"
