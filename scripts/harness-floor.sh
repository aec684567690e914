#!/usr/bin/env bash
# How low the harness's share of a client's CPU can go when it verifies every byte (issue 36's
# "app <= 3%"): per client, the stack's speed (payload GB per CPU-second, from the profile's
# samples) and the verifier's speed inside the LUT (payload GB per CPU-second of its `app.harness`
# samples). The verifier's share is their ratio, so it is under 3% only if the verifier runs faster
# than 33x the stack: the last column, to hold against the machine's memory speed (bench/harness.md).
# `just bench-harness-floor` -> bench/harness-floor.md.
# LUTS (quiche tcp-tls: the two clients over 3%), SIZE (500MB), ROUNDS (10) can be overridden.
set -euo pipefail
bin=${CARGO_TARGET_DIR:-target}/release
rounds=${ROUNDS:-10}
size=${SIZE:-500MB}
luts=${LUTS:-quiche tcp-tls}
out=${OUT:-bench/harness-floor.md}
hz=999
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
started=$(date -u +%FT%TZ)
for round in $(seq 1 "$rounds"); do
    for lut in $luts; do
        echo "round $round/$rounds: $lut" >&2
        "$bin/nesquic" run --lut "$lut" --size "$size" --probe "profile:$hz,io" --out "$scratch/$lut-$round" \
            >"$scratch/$lut-$round.log" 2>&1
    done
done
python3 - "$scratch" "$size" "$rounds" "$hz" "$started" "$luts" > "$out" <<'PY'
import json, sys
from pathlib import Path
runs_dir, size, rounds, hz, started, luts = sys.argv[1:7]
hz = int(hz)
print("# The harness's floor: what verifying every byte costs a client\n")
print(f"`just bench-harness-floor` (scripts/harness-floor.sh), started {started}: per LUT and round")
print(f"`nesquic run --lut LUT --size {size} --probe profile:{hz},io`, {rounds} rounds, the client's samples pooled.")
print(f"A sample stands for 1/{hz} s of CPU. **stack speed**: payload GB per CPU-second of the whole client")
print("(all its samples). **verify speed**: payload GB per CPU-second of its `app.harness` samples, the")
print("verifier reading each byte once where the stack hands it over. The harness's share is stack")
print("speed / verify speed, so `app.harness <= 3%` needs the verifier to run at 33x the stack's speed")
print("(last column). For the machine's memory speed see bench/harness.md (memcmp 48-58 GB/s).\n")
print("| LUT | client samples | app | app.harness | stack speed (GB/CPU-s) | verify speed in the LUT (GB/CPU-s) | verify speed 3% needs (GB/CPU-s) |")
print("|---|---|---|---|---|---|---|")
for lut in luts.split():
    samples = harness = app = runs = 0
    payload_gb = 0.0
    for d in sorted(Path(runs_dir).glob(f"{lut}-*/summary.json")):
        rep = json.loads(d.read_text())["repetitions"][0]
        role = next(r for r in rep["profile"]["roles"] if r["role"] == "client")
        split = {s["name"]: s["samples"] for s in role["split"]}
        samples += role["samples"]
        harness += split.get("app.harness", 0)
        app += sum(v for k, v in split.items() if k.startswith("app"))
        payload_gb += rep["bytes"] / 1e9
        runs += 1
    if runs == 0 or samples == 0 or harness == 0:
        print(f"| {lut} | no run with samples | | | | | |")
        continue
    stack = payload_gb / (samples / hz)
    verify = payload_gb / (harness / hz)
    print(f"| {lut} | {samples} | {100 * app / samples:.2f}% | {100 * harness / samples:.2f}% | {stack:.2f} | {verify:.1f} | {stack / 0.03:.0f} |")
PY
cat "$out"
