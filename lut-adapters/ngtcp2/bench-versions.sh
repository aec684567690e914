#!/usr/bin/env bash
# bench-versions.sh [--repeat N] [--size SIZE] [LABEL=]CHECKOUT|pinned ...: the ngtcp2 rows of
# bench/versions.md. For each ngtcp2 checkout (a clone at its default branch, a worktree at a tag,
# a release-source.sh tree; `pinned`: Debian's 0.12.1, no --lut-path), runs
#   nesquic run --lut ngtcp2 --lut-path CHECKOUT --probe io,crypto --size SIZE --repeat N
# and prints one Markdown table row (named LABEL, else the checkout's folder name): the version and commit the record names, whether it built
# (else the reason, from nesquic's error), goodput (median, min-max over the repetitions), the
# server's datagrams per send message, its seals per datagram sent and the client's opens per
# datagram received (medians over the repetitions, from the probes' counts in the run's JSON).
# Needs ./target/release/nesquic (cargo build --release) and root for the probes' full set.
set -euo pipefail

repeat=5 size=50MB
while [ $# -gt 0 ]; do
    case "$1" in
    --repeat) repeat="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    -*) echo "usage: $0 [--repeat N] [--size SIZE] CHECKOUT|pinned ..." >&2; exit 2 ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--repeat N] [--size SIZE] CHECKOUT|pinned ..." >&2; exit 2; }
root="$(cd "$(dirname "$0")/../.." && pwd)"
nesquic="$root/target/release/nesquic"
[ -x "$nesquic" ] || { echo "bench-versions(ngtcp2): error: $nesquic missing (cargo build --release)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench-versions(ngtcp2): error: python3 missing" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "| checkout | ngtcp2 | commit | builds | goodput Mbit/s, median (min-max) | server datagrams/send | server seals/datagram | client opens/datagram |"
echo "|---|---|---|---|---|---|---|---|"
for checkout in "$@"; do
    args=(run --lut ngtcp2 --probe io,crypto --size "$size" --repeat "$repeat" --json "$work/run.json" --out "$work/run")
    label="$checkout"
    case "$checkout" in *=*) label="${checkout%%=*}" checkout="${checkout#*=}" ;; esac
    if [ "$checkout" != pinned ]; then
        args+=(--lut-path "$checkout")
        [ "$label" != "$checkout" ] || label="$(basename "$checkout")"
    fi
    rm -rf "$work/run" "$work/run.json"
    if ! "$nesquic" "${args[@]}" >"$work/out.txt" 2>&1; then
        reason="$(grep -m1 -E 'error' "$work/out.txt" | cut -c1-400 | tr '|' '/')"
        echo "| $label | - | $(git -C "$checkout" rev-parse --short=12 HEAD 2>/dev/null || echo -) | no: ${reason:-see the output of nesquic} | - | - | - | - |"
        continue
    fi
    python3 - "$work/run.json" "$label" <<'EOF'
import json, statistics, sys

record = json.load(open(sys.argv[1]))
label = sys.argv[2]
reps = [r for r in record["repetitions"] if r["payload_verified"]]
goodput = [r["goodput_mbps"] for r in reps]


def role(rep, name):
    return next(x for x in rep["probes"]["roles"] if x["role"] == name)


def io(r, direction):
    rows = [s for s in r["io"] if s["direction"] == direction]
    datagrams = sum(s["datagrams"] for s in rows)
    moved = sum(s["calls"] - s["eagain"] - s["errors"] for s in rows)
    return datagrams, moved


def calls(r, category):
    return sum(f["calls"] for f in r["functions"] if f["category"] == category)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


per_send, seals, opens = [], [], []
for rep in reps:
    server, client = role(rep, "server"), role(rep, "client")
    sent, moved = io(server, "send")
    received, _ = io(client, "recv")
    per_send.append(sent / moved if moved else None)
    seals.append(calls(server, "crypto.seal") / sent if sent else None)
    opens.append(calls(client, "crypto.open") / received if received else None)
lut = record["lut"]
source = lut.get("source") or {}
commit = source.get("revision", "-")
commit = commit[:12] if len(commit) == 40 else ("-" if label == "pinned" else commit)


def fmt(v, digits):
    return "-" if v is None else f"{v:.{digits}f}"


print(
    f"| {label} | {lut['version'].split()[0]} | {commit} | yes ({len(reps)}/{len(record['repetitions'])} verified) "
    f"| {fmt(median(goodput), 0)} ({fmt(min(goodput, default=None), 0)}-{fmt(max(goodput, default=None), 0)}) "
    f"| {fmt(median(per_send), 1)} | {fmt(median(seals), 2)} | {fmt(median(opens), 2)} |"
)
EOF
done
