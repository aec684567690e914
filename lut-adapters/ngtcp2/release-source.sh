#!/usr/bin/env bash
# release-source.sh VERSION DEST: unpacks a published ngtcp2 release's source, as Debian packages
# it (patches applied), into DEST and prints DEST on stdout; on stderr the Debian version taken
# and the sha256 of its .dsc (which holds the sha256 of every file of the source package).
# Build the LUT against it like any checkout:
#   lut-adapters/ngtcp2/build-from-source.sh --lut-path DEST --out DIR
#   nesquic run --lut ngtcp2 --lut-path DEST
# VERSION: an upstream version (1.24.0), a Debian version (1.24.0-1), or `newest-1.x` (the newest
# 1.x release the archive serves). `--list` instead of VERSION DEST: the versions served, newest
# first. Where from: the system's Debian archive (the URIs of its apt sources), as deb-src lines
# for this release's suites, its backports, and stable, testing and unstable (Debian 12 itself
# ships 0.12.1; 1.x comes from the newer suites), in a private apt state directory: the system's
# apt configuration and package lists are not touched. A version the archive lists but whose files
# it no longer serves is skipped for the next one of the same upstream version.
set -euo pipefail

usage() { echo "usage: $0 VERSION|newest-1.x DEST   or   $0 --list" >&2; exit 2; }
die() { echo "release-source(ngtcp2): error: $*" >&2; exit 1; }
say() { echo "release-source(ngtcp2): $*" >&2; }
case "${1:-}" in
--list) [ $# -eq 1 ] || usage ;;
"") usage ;;
*) [ $# -eq 2 ] || usage; dest="$2"; [ ! -e "$dest" ] || die "$dest exists" ;;
esac
want="$1"
for tool in apt-get apt-cache dpkg-source; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (a Debian system with dpkg-dev is needed)"
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/src"
# The system's archive (not its security archive, whose suites are named otherwise).
uris="" keyring="" codename=""
for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    u="$(sed -n 's/^URIs: *//p' "$f" | tr ' ' '\n' | grep -v -- '-security' | head -1 || true)"
    if [ -n "$u" ] && [ -z "$uris" ]; then
        uris="$u"
        keyring="$(sed -n 's/^Signed-By: *//p' "$f" | head -1)"
        codename="$(sed -n 's/^Suites: *//p' "$f" | awk '{ print $1 }' | head -1)"
    fi
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] && [ -z "$uris" ] || continue
    read -r uris codename < <(awk '$1 == "deb" && $2 !~ /^\[/ && $2 !~ /-security/ { print $2, $3; exit }' "$f") || true
done
[ -n "$uris" ] || die "no Debian archive in the system's apt sources (/etc/apt/sources.list*)"
suites="stable testing unstable"
[ -n "$codename" ] && suites="$codename $codename-backports $suites"
{
    echo "Types: deb-src"
    echo "URIs: $uris"
    echo "Suites: $suites"
    echo "Components: main"
    [ -n "$keyring" ] && echo "Signed-By: $keyring"
} >"$tmp/parts/ngtcp2.sources"
opts=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$tmp/parts" -o Dir::State::Lists="$tmp/lists"
    -o Dir::Cache="$tmp/cache")
apt=(apt-get -q "${opts[@]}" -o APT::Sandbox::User=root)
# A suite the archive lacks (or signs with a key this system does not have yet) fails alone.
"${apt[@]}" update >"$tmp/update.log" 2>&1 || say "apt-get update reported errors (some suites skipped): $(grep -m3 '^[EW]:' "$tmp/update.log" | tr '\n' ' ')"
served="$(apt-cache "${opts[@]}" showsrc ngtcp2 2>/dev/null | sed -n 's/^Version: //p' | sort -urV)"
[ -n "$served" ] || { cat "$tmp/update.log" >&2; die "the archive ($uris, suites $suites) serves no ngtcp2 source"; }
if [ "$want" = --list ]; then
    printf '%s\n' "$served"
    exit 0
fi
case "$want" in
newest-1.x) candidates="$(grep -E '^1\.' <<<"$served" || true)" ;;
*-*) candidates="$(grep -xF -- "$want" <<<"$served" || true)" ;;
*) candidates="$(grep -E "^${want//./\\.}-" <<<"$served" || true)" ;;
esac
[ -n "$candidates" ] || die "ngtcp2 $want is not served; the archive has: $(tr '\n' ' ' <<<"$served")"
# Newest first; one whose files are gone (a 404 on its .dsc) gives way to the next.
for version in $candidates; do
    rm -rf "$tmp/src" && mkdir -p "$tmp/src"
    if (cd "$tmp/src" && "${apt[@]}" source "ngtcp2=$version") >"$tmp/source.log" 2>&1; then
        unpacked=("$tmp"/src/ngtcp2-*/)
        if [ -f "${unpacked[0]}CMakeLists.txt" ]; then
            mkdir -p "$(dirname "$dest")"
            mv "${unpacked[0]}" "$dest"
            dsc=("$tmp"/src/*.dsc)
            say "Debian's ngtcp2 $version source, patches applied ($(basename "${dsc[0]}") sha256:$(sha256sum "${dsc[0]}" | cut -d' ' -f1))"
            realpath "$dest"
            exit 0
        fi
    fi
    say "ngtcp2 $version is listed but could not be fetched: $(grep -m1 '^E:' "$tmp/source.log" || tail -1 "$tmp/source.log")"
done
die "no ngtcp2 source for $want could be fetched (tried: $(tr '\n' ' ' <<<"$candidates"))"
