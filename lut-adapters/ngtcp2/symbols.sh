#!/usr/bin/env bash
# symbols.sh DIR: builds Debian's ngtcp2 and GnuTLS from their Debian source packages (patches
# applied) with symbols and frame pointers (-O2 -g -fno-omit-frame-pointer) into DIR, and prints
# what build.sh compiles and links the adapter against, on one line: ngtcp2's source tree, its
# build tree (libngtcp2 in lib/, libngtcp2_crypto_gnutls in crypto/gnutls/) and GnuTLS's library
# folder.
# Why: Debian's libngtcp2 and libgnutls are stripped and have no frame pointers, so the sampling
# profile could name neither (issue 36: 65-68% of each side `[unknown: no symbol]`), and Debian's
# detached debug symbols (the debian-debug archive) are not reachable from here.
# Versions: ngtcp2 as installed (libngtcp2-dev); GnuTLS as installed (libgnutls30) when the archive
# still serves that source, else the newest source of the same upstream version (its security
# patches newer); DIR/versions says which. Sources come through apt's deb-src lines for the
# system's own Debian archive, in a private apt state directory (the system's apt configuration
# and package lists are not touched). Needs dpkg-dev, cmake, autoconf, automake, libtool, autopoint
# (scripts/setup.sh). Built once: a second call finds DIR/.done and only prints the folders.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
mkdir -p "$1"
dir="$(cd "$1" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
die() { echo "symbols(ngtcp2): error: $*" >&2; exit 1; }
say() { echo "symbols(ngtcp2): $*" >&2; }
ngtcp2_lib="$dir/ngtcp2-build"
gnutls_lib="$dir/gnutls-build/lib/.libs"
if [ -f "$dir/.done" ]; then
    echo "$dir/ngtcp2-src $ngtcp2_lib $gnutls_lib"
    exit 0
fi
for tool in apt-get dpkg-query dpkg-source cmake make autoreconf autopoint libtoolize; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (scripts/setup.sh installs the build tools)"
done
flags="-O2 -g -fno-omit-frame-pointer"
jobs="$(nproc)"

# 1. ngtcp2: the installed version's Debian source (pinned-source.sh), cmake, GnuTLS backend.
rm -rf "$dir/ngtcp2-src" "$ngtcp2_lib"
"$here/pinned-source.sh" "$dir/ngtcp2-src" >/dev/null
say "building ngtcp2 (cmake) ..."
cmake -S "$dir/ngtcp2-src" -B "$ngtcp2_lib" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" \
    -DENABLE_GNUTLS=ON -DENABLE_OPENSSL=OFF -DENABLE_SHARED_LIB=ON -DENABLE_STATIC_LIB=OFF >"$dir/ngtcp2-configure.log" 2>&1 \
    || { tail -20 "$dir/ngtcp2-configure.log" >&2; die "ngtcp2 cmake configure failed"; }
make -C "$ngtcp2_lib" -j"$jobs" ngtcp2 ngtcp2_crypto_gnutls >"$dir/ngtcp2-build.log" 2>&1 \
    || { tail -20 "$dir/ngtcp2-build.log" >&2; die "ngtcp2 build failed"; }

# 2. GnuTLS (Debian source package gnutls28), through the same private apt state.
apt_state="$dir/apt"
rm -rf "$apt_state" "$dir/gnutls-src" "$dir/gnutls-build"
mkdir -p "$apt_state/parts" "$apt_state/lists/partial" "$apt_state/cache/archives/partial" "$apt_state/src"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] && sed -n 's/^deb \(.*\)/deb-src \1/p' "$f" >>"$apt_state/parts/system.list"
done
for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && sed 's/^Types:.*/Types: deb-src/' "$f" >"$apt_state/parts/$(basename "$f")"
done
apt=(apt-get -q -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$apt_state/parts"
    -o Dir::State::Lists="$apt_state/lists" -o Dir::Cache="$apt_state/cache" -o APT::Sandbox::User=root)
"${apt[@]}" update >"$dir/apt-update.log" 2>&1 || { tail -20 "$dir/apt-update.log" >&2; die "apt-get update (deb-src) failed"; }
installed="$(dpkg-query -W -f '${source:Version}' libgnutls30 2>/dev/null)" || die "libgnutls30 is not installed"
upstream="${installed%%-*}"
if (cd "$apt_state/src" && "${apt[@]}" source "gnutls28=$installed") >"$dir/gnutls-source.log" 2>&1; then
    gnutls_version="$installed"
else
    # The archive keeps only the newest revisions: take the newest of the same upstream version.
    gnutls_version="$(apt-cache -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$apt_state/parts" \
        -o Dir::State::Lists="$apt_state/lists" -o Dir::Cache="$apt_state/cache" showsrc gnutls28 2>/dev/null |
        sed -n 's/^Version: //p' | grep -F "$upstream-" | sort -V | tail -1)"
    [ -n "$gnutls_version" ] || die "no gnutls28 $upstream source in the archive (installed: $installed)"
    say "GnuTLS $installed's source is gone from the archive: building $gnutls_version (same upstream $upstream)"
    (cd "$apt_state/src" && "${apt[@]}" source "gnutls28=$gnutls_version") >"$dir/gnutls-source.log" 2>&1 \
        || { tail -20 "$dir/gnutls-source.log" >&2; die "apt-get source gnutls28=$gnutls_version failed"; }
fi
unpacked=("$apt_state"/src/gnutls28-*/)
[ -f "${unpacked[0]}configure.ac" ] || die "apt-get source unpacked no GnuTLS tree"
mv "${unpacked[0]}" "$dir/gnutls-src"
say "building GnuTLS $gnutls_version (autoreconf, configure, make: a few minutes, once) ..."
(
    cd "$dir/gnutls-src"
    # As debian/rules' dh_autoreconf (Debian's patches touch configure.ac and gl/Makefile.am).
    grep -rl gettext-0.20 m4/ | xargs -r rm -f
    GTKDOCIZE="echo disabled" autoreconf -fi
) >"$dir/gnutls-autoreconf.log" 2>&1 || { tail -20 "$dir/gnutls-autoreconf.log" >&2; die "GnuTLS autoreconf failed"; }
mkdir -p "$dir/gnutls-build"
# Debian's configure options where they matter to a TLS client and server (version script, trust
# store); no tools, docs, C++, DANE, TPM or guile: only the library is built.
(cd "$dir/gnutls-build" && CFLAGS="$flags" ../gnutls-src/configure --enable-ld-version-script --disable-rpath \
    --disable-cxx --disable-libdane --without-tpm --without-tpm2 --disable-doc --disable-gtk-doc --disable-manpages \
    --disable-tests --disable-tools --disable-guile --disable-nls --with-included-unistring \
    --with-default-trust-store-file=/etc/ssl/certs/ca-certificates.crt) >"$dir/gnutls-configure.log" 2>&1 \
    || { tail -20 "$dir/gnutls-configure.log" >&2; die "GnuTLS configure failed"; }
{ make -C "$dir/gnutls-build/gl" -j"$jobs" && make -C "$dir/gnutls-build/lib" -j"$jobs"; } >"$dir/gnutls-build.log" 2>&1 \
    || { tail -20 "$dir/gnutls-build.log" >&2; die "GnuTLS build failed"; }
[ -f "$gnutls_lib/libgnutls.so.30" ] || die "the GnuTLS build made no $gnutls_lib/libgnutls.so.30"
ngtcp2_version="$(dpkg-query -W -f '${source:Version}' libngtcp2-dev)"
printf 'ngtcp2 %s (Debian source)\ngnutls %s (Debian source; installed %s)\n' "$ngtcp2_version" "$gnutls_version" "$installed" >"$dir/versions"
rm -rf "$apt_state"
touch "$dir/.done"
echo "$dir/ngtcp2-src $ngtcp2_lib $gnutls_lib"
