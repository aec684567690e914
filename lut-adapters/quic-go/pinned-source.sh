#!/usr/bin/env bash
# pinned-source.sh DEST: copies the source of the quic-go version lut-adapters/quic-go/go.mod pins
# (from the Go module cache; `go mod download` fetches it from the module proxy if it is not there)
# into DEST, writable, and prints DEST. Edit the copy, then build the LUT against it:
#   lut-adapters/quic-go/build-from-source.sh --lut-path DEST --out DIR
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 DEST (a directory that does not exist yet)" >&2; exit 2; }
dest="$1"
[ ! -e "$dest" ] || { echo "pinned-source(quic-go): error: $dest exists" >&2; exit 1; }
here="$(cd "$(dirname "$0")" && pwd)"
module=github.com/quic-go/quic-go
command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
version="$(sed -n "s|^[[:space:]]*\(require[[:space:]]\{1,\}\)\{0,1\}$module[[:space:]]\{1,\}\(v[^[:space:]]*\).*|\2|p" "$here/go.mod" | head -n1)"
[ -n "$version" ] || { echo "pinned-source(quic-go): error: $here/go.mod requires no $module" >&2; exit 1; }
# The module cache is read-only: copy it, then make the copy writable.
dir="$(cd / && GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
[ -d "$dir" ] || { echo "pinned-source(quic-go): error: go mod download $module@$version gave no directory" >&2; exit 1; }
mkdir -p "$(dirname "$dest")"
cp -r "$dir" "$dest"
chmod -R u+w "$dest"
echo "pinned-source(quic-go): $module@$version from $dir" >&2
realpath "$dest"
