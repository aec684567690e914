#!/bin/sh
# Bulk 200 MB, TCP+TLS baseline vs quinn, alternating rounds (so machine load hits both alike).
# Usage: scripts/tcp-tls-vs-quinn.sh [ROUNDS] > bench/tcp-tls-vs-quinn.md   (after `just build`)
set -eu
rounds=${1:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for r in $(seq 1 "$rounds"); do
    for lut in tcp-tls quinn; do
        ./target/release/nesquic run --lut "$lut" --size 200MB --probe none \
            --json "$dir/$lut-$r.json" --out "$dir/run-$lut-$r" >/dev/null 2>&1
    done
done
python3 - "$dir" "$rounds" <<'PY'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
print(f"# Bulk 200 MB: tcp-tls vs quinn ({rounds} alternating rounds, loopback)\n")
print("Command: `scripts/tcp-tls-vs-quinn.sh " + str(rounds) + "`. Medians (min-max) over the rounds.\n")
print("| LUT | goodput (Mbit/s) | handshake (ms) | server CPU (s) | client CPU (s) |")
print("|---|---|---|---|---|")
for lut in ["tcp-tls", "quinn"]:
    reps = [json.load(open(f"{d}/{lut}-{r}.json"))["repetitions"][0] for r in range(1, rounds + 1)]
    def cell(vals, digits):
        return f"{statistics.median(vals):.{digits}f} ({min(vals):.{digits}f}-{max(vals):.{digits}f})"
    version = json.load(open(f"{d}/{lut}-1.json"))["lut"]["version"]
    print(f"| {lut} {version} | {cell([r['goodput_mbps'] for r in reps], 0)} | {cell([r['handshake_ms'] for r in reps], 2)} "
          f"| {cell([r['server']['cpu_total_s'] for r in reps], 3)} | {cell([r['client']['cpu_total_s'] for r in reps], 3)} |")
PY
