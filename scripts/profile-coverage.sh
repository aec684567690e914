#!/usr/bin/env bash
# How much of each side's CPU the profile's rules name (issue 19 goals: other + unknown +
# kernel_other <= 10% of samples, unsymbolised leaf frames <= 2%), and CPU ns per datagram by
# component. `scripts/profile-coverage.sh` -> bench/profile-coverage.md
set -euo pipefail
bin=${CARGO_TARGET_DIR:-target}/release
rounds=${ROUNDS:-3}
size=${SIZE:-200MB}
luts=${LUTS:-quinn quiche msquic}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq 1 "$rounds"); do
    for lut in $luts; do
        echo "round $round/$rounds: $lut" >&2
        "$bin/nesquic" run --lut "$lut" --size "$size" --probe io,profile --out "$scratch/$lut-$round" >/dev/null
    done
done
load="$load_before -> $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"
python3 - "$scratch" "$size" "$rounds" "$load" > bench/profile-coverage.md <<'PY'
import json, sys
from collections import defaultdict
from pathlib import Path
runs_dir, size, rounds, load = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
pooled = defaultdict(lambda: defaultdict(int))  # (lut, role) -> name -> samples
ns = defaultdict(lambda: defaultdict(list))  # (lut, role) -> component -> [ns/datagram]
for d in sorted(runs_dir.iterdir()):
    lut = d.name.rsplit("-", 1)[0]
    for rep in json.loads((d / "summary.json").read_text())["repetitions"]:
        for r in rep["profile"]["roles"]:
            key = (lut, r["role"])
            pooled[key]["samples"] += r["samples"]
            pooled[key]["unknown leaf"] += sum(u["samples"] for u in r.get("unknown_leaves", []))
            for c in r["components"]:
                pooled[key][c["name"]] += c["samples"]
            for c in (r.get("cost") or {}).get("components", []):
                ns[key][c["name"]].append(c["ns_per_datagram"])
print("# Profile coverage: where each side's CPU goes\n")
print(f"`scripts/profile-coverage.sh` (ROUNDS={rounds}, SIZE={size}): `nesquic run --lut LUT --size {size} --probe io,profile`,")
print("frame-pointer build, samples pooled over rounds. *unnamed* = other + unknown + kernel_other (goal <= 10%);")
print("*unsymbolised leaf* = samples whose innermost frame has no name (goal <= 2%).")
print(f"Load average (1, 5, 15 min) before -> after: {load}.\n")
fams = ["crypto", "packet_io", "connection", "runtime", "memory", "app", "other", "kernel_other", "unknown"]
print("| LUT | role | samples | unnamed | unsymbolised leaf | " + " | ".join(fams) + " |")
print("|---|---|---|---|---|" + "---|" * len(fams))
for (lut, role), p in sorted(pooled.items()):
    n = p["samples"]
    pct = lambda k: 100 * p[k] / n if n else 0
    unnamed = pct("other") + pct("unknown") + pct("kernel_other")
    print(f"| {lut} | {role} | {n} | {unnamed:.1f}% | {pct('unknown leaf'):.1f}% | " + " | ".join(f"{pct(f):.1f}%" for f in fams) + " |")
print("\nCPU ns per datagram (server: sent, client: received; datagrams from the io probes), median over rounds:\n")
print("| LUT | role | " + " | ".join(fams) + " |")
print("|---|---|" + "---|" * len(fams))
for (lut, role), c in sorted(ns.items()):
    med = lambda v: sorted(v)[len(v) // 2] if v else 0
    print(f"| {lut} | {role} | " + " | ".join(f"{med(c[f]):.0f}" for f in fams) + " |")
PY
cat bench/profile-coverage.md
