#!/usr/bin/env bash
# pinned-source.sh DEST: unpacks the source of the ngtcp2 that build.sh links (the Debian package
# libngtcp2-dev installed here, patches applied) into DEST and prints DEST. Edit the copy, then
# build the LUT against it:
#   lut-adapters/ngtcp2/build-from-source.sh --lut-path DEST --out DIR
# How: `apt-get source ngtcp2=<installed version>` from the Debian archive the system's apt sources
# name, as deb-src lines in a private apt state directory (the system's apt configuration and
# package lists are not touched).
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 DEST (a directory that does not exist yet)" >&2; exit 2; }
dest="$1"
die() { echo "pinned-source(ngtcp2): error: $*" >&2; exit 1; }
[ ! -e "$dest" ] || die "$dest exists"
for tool in apt-get dpkg-query dpkg-source; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (a Debian system with dpkg-dev is needed)"
done
version="$(dpkg-query -W -f '${source:Version}' libngtcp2-dev 2>/dev/null)" \
    || die "libngtcp2-dev is not installed (scripts/setup.sh installs it): no pinned version to fetch"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/src"
# The system's binary sources, turned into source sources.
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] && sed -n 's/^deb \(.*\)/deb-src \1/p' "$f" >>"$tmp/parts/system.list"
done
for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && sed 's/^Types:.*/Types: deb-src/' "$f" >"$tmp/parts/$(basename "$f")"
done
apt=(apt-get -q -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$tmp/parts"
    -o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache" -o APT::Sandbox::User=root)
echo "pinned-source(ngtcp2): fetching Debian's ngtcp2 $version source ..." >&2
"${apt[@]}" update >"$tmp/update.log" 2>&1 || { cat "$tmp/update.log" >&2; die "apt-get update (deb-src) failed"; }
(cd "$tmp/src" && "${apt[@]}" source "ngtcp2=$version") >"$tmp/source.log" 2>&1 \
    || { cat "$tmp/source.log" >&2; die "apt-get source ngtcp2=$version failed"; }
unpacked=("$tmp"/src/ngtcp2-*/)
[ -f "${unpacked[0]}CMakeLists.txt" ] || { cat "$tmp/source.log" >&2; die "apt-get source unpacked no ngtcp2 tree"; }
mkdir -p "$(dirname "$dest")"
mv "${unpacked[0]}" "$dest"
echo "pinned-source(ngtcp2): Debian ngtcp2 $version, patches applied" >&2
realpath "$dest"
