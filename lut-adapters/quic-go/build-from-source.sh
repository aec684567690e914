#!/usr/bin/env bash
# build-from-source.sh --lut-path CHECKOUT --out DIR: builds nesquic-lut-quic-go (the same
# executable and command line as build.sh's) against a quic-go checkout instead of the version
# go.mod pins, into DIR/nesquic-lut-quic-go, and prints one JSON line on stdout (see
# ../source-build.sh and docs: binary, version, source, revision, dirty, proof).
#
# How: the adapter's sources are copied to DIR/src (the checkout is never written to), then
# `go mod edit -replace github.com/quic-go/quic-go=CHECKOUT` and `go build` as build.sh does.
# What it proves, or exits non-zero naming the mismatch:
#   - the checkout's go.mod declares module github.com/quic-go/quic-go;
#   - `go list -m` resolves github.com/quic-go/quic-go to the replace, whose directory is CHECKOUT;
#   - the executable's own build information (`go version -m`) records the replace by CHECKOUT,
#     so the code compiled in is the checkout's, not the module cache's.
# Cached in DIR (see ../source-build.sh): a second call with nothing changed only re-runs the proof.
#
# Versions: the adapter is written for quic-go v0.49 to v0.66 and upstream's main. What differs
# is chosen by Go build tags (version.go lists them), selected here from the API the checkout has,
# not from a version number (a checkout between tags, or a module download without .git, states
# none). A part a version lacks (qlog before v0.56) is turned off with a note, never a failed build.
# The version recorded: `git describe --tags` in a git checkout; the version in
# .nesquic-release.json (a release `--lut-version` fetched); the Go module cache's
# `MODULE@VERSION` directory name for a module download (`go mod download -json` names it Dir);
# else "devel, replacing" the version go.mod pins. Where that is a release (or a pseudo-version
# of a commit after one), go.mod requires it, so that the executable's build information and its
# io report line name it too.
set -euo pipefail

lut=quic-go
# shellcheck source=../source-build.sh
. "$(dirname "$0")/../source-build.sh"
parse_args "$@"
module=github.com/quic-go/quic-go

command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || die "go not found (needs the Go toolchain lut-adapters/quic-go/go.mod names)"
export GOTOOLCHAIN=local CGO_ENABLED=0

[ -f "$source/go.mod" ] || die "$source has no go.mod: not a Go module (a quic-go checkout's root holds go.mod)"
declared="$(sed -n 's/^module[[:space:]]\{1,\}\([^[:space:]]*\).*/\1/p' "$source/go.mod" | head -n1)"
[ "$declared" = "$module" ] || die "$source/go.mod declares module '$declared', not $module: not a quic-go checkout"

checkout_state
binary="$out/nesquic-lut-quic-go"

# Build tags from the API the checkout has (version.go says what each one changes).
tags=() notes=()
has() { grep -Eqs "$1" "${@:2}"; }
root_go=("$source"/*.go)
if [ ! -d "$source/qlogwriter" ]; then
    tags+=(nesquic_noqlog)
    notes+=("qlog off: no qlogwriter package (quic-go v0.56 added it)")
elif has 'func NewConnectionFileSeq\(w io\.WriteCloser, isClient bool, odcid ConnectionID, eventSchemas \[\]string\)' "$source"/qlogwriter/*.go; then
    tags+=(nesquic_qlog_schemas)
elif ! has 'func NewConnectionFileSeq\(w io\.WriteCloser, isClient bool, odcid ConnectionID\)' "$source"/qlogwriter/*.go; then
    tags+=(nesquic_noqlog)
    notes+=("qlog off: qlogwriter.NewConnectionFileSeq has a signature this adapter does not know")
fi
has '^type Conn struct' "${root_go[@]}" || tags+=(nesquic_connif)
if ! has '^func \(c \*Conn\) ConnectionStats\(\) ConnectionStats' "${root_go[@]}"; then
    tags+=(nesquic_nostats)
    # Without ConnectionStats, a tracer finds each connection again by its tracing ID.
    has 'ConnectionTracingID' "${root_go[@]}" \
        || die "$source is a quic-go older than v0.43 (no ConnectionStats, no ConnectionTracingID): the adapter supports v0.43 and later (lut-adapters/quic-go/version.go)"
fi
tag_list="$(IFS=,; echo "${tags[*]:-}")"
for note in "${notes[@]}"; do say "note: $note"; done

# The version, and the one go.mod requires (a release or a pseudo-version; else the pin).
pinned="$(sed -n "s|^[[:space:]]*\(require[[:space:]]\{1,\}\)\{0,1\}$module[[:space:]]\{1,\}\(v[^[:space:]]*\).*|\2|p" "$here/go.mod" | head -n1)"
release='^v[0-9]+\.[0-9]+\.[0-9]+$'
require=""
if [ "$revision" != "not a git repository" ] && version="$(checkout_git describe --tags --always 2>/dev/null)"; then
    if [[ "$version" =~ $release ]]; then
        require="$version"
    elif [[ "$version" =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)-[0-9]+-g[0-9a-f]+$ ]]; then
        # Go's pseudo-version of a commit after release vX.Y.Z: vX.Y.(Z+1)-0.UTCTIME-HASH12.
        when="$(TZ=UTC checkout_git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S HEAD)"
        require="v${BASH_REMATCH[1]}.${BASH_REMATCH[2]}.$((BASH_REMATCH[3] + 1))-0.$when-${revision:0:12}"
    fi
elif marked="$(sed -n 's/^[[:space:]]*"version":[[:space:]]*"\(v[0-9][0-9.]*\)".*/\1/p' "$source/.nesquic-release.json" 2>/dev/null)" \
    && [[ "$marked" =~ $release ]]; then
    # A release nesquic fetched from the Go module proxy (--lut-version): its marker names it.
    version="$marked" require="$version"
elif [[ "$(basename "$source")" =~ ^quic-go@(v[0-9]+\.[0-9]+\.[0-9]+)$ ]]; then
    # A module download (the module cache's directory, or a copy keeping its name).
    version="${BASH_REMATCH[1]}" require="$version"
else
    # A directory has no version of its own: Go records the replaced module as (devel).
    version="devel, replacing ${pinned:-unknown}"
fi
adapter=("$here"/*.go "$here/go.mod" "$here/go.sum")
key="$(build_key "${adapter[@]}" "$0")"
src="$out/src"

if cached; then
    say "up to date: $binary ($source at $revision)"
else
    # A failed build must not leave the previous executable behind to be run by mistake.
    rm -f "$out/.build-key" "$binary"
    rm -rf "$src" && mkdir -p "$src"
    cp "${adapter[@]}" "$src/"
    cd "$src"
    go mod edit -replace "$module=$source"
    [ -z "$require" ] || go mod edit -require "$module@$require"
    # -mod=mod: the checkout may need other dependency versions than go.sum lists (fetched from the
    # Go module proxy); GOFLAGS from the caller's environment would otherwise decide.
    step "go build against $source (build tags: ${tag_list:-none})" "$out/build.log" \
        env GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath -tags "$tag_list" -o "$binary" .
    mark_built
fi

cd "$src"
# Proof 1: the module graph resolves quic-go to the checkout.
replaced="$(GOFLAGS=-mod=mod go list -m -f '{{if .Replace}}{{.Replace.Dir}}{{end}}' "$module")" \
    || die "go list -m $module failed in $src"
[ "$replaced" = "$source" ] \
    || die "the module graph resolves $module to '${replaced:-the registry version (no replace)}', not $source"
# Proof 2: the executable itself says which quic-go it was built from.
info="$(go version -m "$binary")" || die "go version -m $binary failed"
linked="$(printf '%s\n' "$info" | awk -v m="$module" '$1 == "dep" && $2 == m { getline; if ($1 == "=>") print $2 }')"
[ "$linked" = "$source" ] || {
    printf '%s\n' "$info" >&2
    die "$binary was not built from $source: its build information replaces $module with '${linked:-nothing}'"
}

say "ready: $binary from $source ($version, $revision$([ "$dirty" = true ] && echo ", dirty"))"
emit "$version" "go list -m $module: replaced by $source; go version -m $(basename "$binary"): dep $module => $source; build tags: ${tag_list:-none}${notes[*]/#/; }"
