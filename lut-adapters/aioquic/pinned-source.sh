#!/usr/bin/env bash
# pinned-source.sh DEST: unpacks the source distribution of the aioquic version
# lut-adapters/aioquic/requirements.txt pins (downloaded from PyPI with pip) into DEST and prints
# DEST. Edit the copy, then build the LUT against it:
#   lut-adapters/aioquic/build-from-source.sh --lut-path DEST --out DIR
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 DEST (a directory that does not exist yet)" >&2; exit 2; }
dest="$1"
[ ! -e "$dest" ] || { echo "pinned-source(aioquic): error: $dest exists" >&2; exit 1; }
here="$(cd "$(dirname "$0")" && pwd)"
version="$(sed -n 's/^aioquic==\(.*\)/\1/p' "$here/requirements.txt")"
[ -n "$version" ] || { echo "pinned-source(aioquic): error: $here/requirements.txt pins no aioquic" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --disable-pip-version-check --quiet --no-deps --no-binary :all: \
    -d "$tmp" "aioquic==$version" >&2
sdist=("$tmp"/aioquic-*.tar.gz)
[ -f "${sdist[0]}" ] || { echo "pinned-source(aioquic): error: pip download gave no aioquic sdist" >&2; exit 1; }
mkdir -p "$dest"
tar -C "$dest" --strip-components=1 -xzf "${sdist[0]}"
echo "pinned-source(aioquic): aioquic $version from PyPI ($(basename "${sdist[0]}"))" >&2
realpath "$dest"
