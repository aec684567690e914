#!/usr/bin/env bash
# bench-versions.sh [--nesquic BIN] [--releases N] [--since VERSION] [--versions 'vA vB ...'] [--clone DIR]...
#                   [--probe SET] [-- RUN_ARGS...]
#
# The quic-go rows of bench/versions.md: each release the Go module proxy serves from VERSION
# (default v0.49.0) on, newest first, at most N (default 10) (or exactly the --versions listed:
# the proxy serves some releases its list leaves out), and each git clone given (a
# developer's checkout: upstream's default branch, a tag), built through
# `nesquic run --lut quic-go --lut-path DIR --probe io RUN_ARGS` (default RUN_ARGS: --size 50MB
# --repeat 3).
# Prints one markdown row per version on stdout: whether it built (else the compiler's first
# error), the version and commit the record names as linked, the build tags the API chose,
# goodput (median, min-max), the server's datagrams per sendmsg (GSO; over all repetitions) from
# the io probe, and with --probe io,crypto its seals per datagram sent (counted uprobes: they cost
# goodput, so the default is --probe io). Progress on stderr.
# Releases are copied from the module cache as `quic-go@VERSION` (the name the build script
# reads the version from); run directories and copies go to a temporary directory, removed at exit.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
nesquic="$root/target/release/nesquic" releases=10 since=v0.49.0 clones=() run_args=() listed=() probe=io
while [ $# -gt 0 ]; do
    case "$1" in
    --nesquic) nesquic="$2"; shift 2 ;;
    --releases) releases="$2"; shift 2 ;;
    --since) since="$2"; shift 2 ;;
    --versions) read -r -a listed <<<"$2"; shift 2 ;;
    --probe) probe="$2"; shift 2 ;;
    --clone) clones+=("$(realpath "$2")"); shift 2 ;;
    --) shift; run_args=("$@"); break ;;
    *) echo "usage: $0 [--nesquic BIN] [--releases N] [--since VERSION] [--versions 'vA vB'] [--clone DIR]... [--probe SET] [-- RUN_ARGS...]" >&2; exit 2 ;;
    esac
done
[ ${#run_args[@]} -gt 0 ] || run_args=(--size 50MB --repeat 3)
[ -x "$nesquic" ] || { echo "bench-versions(quic-go): $nesquic missing (cargo build --release)" >&2; exit 1; }
command -v jq >/dev/null || { echo "bench-versions(quic-go): needs jq" >&2; exit 1; }
command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
module=github.com/quic-go/quic-go

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Releases (no pre-releases) from the proxy, at or after --since, newest first.
if [ ${#listed[@]} -gt 0 ]; then
    versions=("${listed[@]}")
else
    mapfile -t versions < <(cd "$work" && go list -m -versions "$module" | tr ' ' '\n' \
        | grep -E '^v[0-9]+\.[0-9]+\.[0-9]+$' | sort -V -r \
        | while read -r v; do [ "$(printf '%s\n%s\n' "$since" "$v" | sort -V | head -n1)" = "$since" ] && echo "$v"; done \
        | head -n "$releases")
fi

row() { printf '| %s ' "$@"; echo '|'; }
echo "| source | builds | linked version (commit) | build tags | goodput Mbit/s, median (min-max) | server datagrams per sendmsg | server seals per datagram | notes |"
echo "|---|---|---|---|---|---|---|---|"

measure() { # measure LABEL DIR
    local label="$1" dir="$2" json="$work/run-$RANDOM.json" err="$work/err"
    echo "bench-versions(quic-go): $label ($dir) ..." >&2
    if ! "$nesquic" run --lut quic-go --lut-path "$dir" --probe "$probe" "${run_args[@]}" --json "$json" \
        --out "$work/run-$RANDOM" >/dev/null 2>"$err"; then
        local why
        why="$(grep -m1 -E '\.go:[0-9]+:[0-9]+:|error' "$err" | sed 's/|/\\|/g' | cut -c1-200)"
        row "$label" "no" "" "" "" "" "" "${why:-$(tail -n1 "$err" | cut -c1-200)}"
        return
    fi
    # The build directory nesquic made for this temporary path is not needed again.
    local binary
    binary="$(jq -r '.lut.binary' "$json")"
    case "$binary" in */target/lut-builds/*) rm -rf "$(dirname "$binary")" ;; esac
    jq -r --arg name "$label" '
        [.repetitions[].probes.roles[]? | select(.role == "server") | .io[] | select(.syscall == "sendmsg")] as $s
        | [.repetitions[].probes.roles[]? | select(.role == "server") | .functions[]? | select(.category == "crypto.seal")] as $seal
        | (.lut.source.linked[0].version) as $v
        | (.lut.source.revision) as $rev
        | ((.lut.source.proof | capture("build tags: (?<t>[^;]*)").t) // "?") as $tags
        | ([.repetitions[0].io_settings[][1].stack | select(contains("qlog off"))] | length) as $noqlog
        | def r1: . * 10 | round / 10;
        "| \($name) | yes | \($v)\(if ($rev | length) == 40 then " (\($rev[0:12]))" else "" end) | \($tags) | "
          + "\(.summary.goodput_mbps.median | round) (\(.summary.goodput_mbps.min | round)-\(.summary.goodput_mbps.max | round)) | "
          + "\(if ($s | length) > 0 then (([$s[].datagrams] | add) / ([$s[].messages] | add) | r1 | tostring) else "?" end) | "
          + "\(if ($seal | length) > 0 and ($s | length) > 0 then (([$seal[].calls] | add) / ([$s[].datagrams] | add) * 100 | round / 100 | tostring) else "-" end) | "
          + "\(if $noqlog > 0 then "qlog off (no qlogwriter)" else "" end) |"' "$json"
}

for clone in "${clones[@]}"; do
    measure "clone $(git -c safe.directory='*' -C "$clone" describe --tags --always 2>/dev/null || basename "$clone")" "$clone"
done
for v in "${versions[@]}"; do
    dir="$(cd "$work" && go mod download -json "$module@$v" | jq -r '.Dir // empty')" || true
    if [ -z "$dir" ]; then
        row "proxy $v" "no" "" "" "" "" "" "go mod download $module@$v failed"
        continue
    fi
    copy="$work/$v/quic-go@$v"
    mkdir -p "$work/$v" && cp -r "$dir" "$copy" && chmod -R u+w "$copy"
    measure "proxy $v" "$copy"
    rm -rf "$work/$v"
done
