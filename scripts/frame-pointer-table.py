#!/usr/bin/env python3
"""Summarises `scripts/bench-frame-pointers.sh` runs (DIR/<lut>-<arm>-<round>/summary.json) as
markdown: per LUT, median goodput and CPU seconds per side over rounds, without (before) and with
(after) frame pointers, and the ratio after/before."""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

runs_dir, size, rounds, before = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]

runs = defaultdict(list)  # (lut, arm) -> [repetition]
for d in sorted(runs_dir.iterdir()):
    lut, arm, _ = d.name.rsplit("-", 2)
    runs[(lut, arm)].extend(json.loads((d / "summary.json").read_text())["repetitions"])


def median(lut, arm, key):
    return statistics.median(key(r) for r in runs[(lut, arm)])


def rounds_of(lut):
    return " / ".join(" ".join(f"{r['goodput_mbps']:.0f}" for r in runs[(lut, a)]) for a in ("before", "after"))


print("# Frame pointers: what they cost\n")
print(f"`scripts/bench-frame-pointers.sh {before}`: {size} per run, {rounds} alternating rounds per LUT,")
print("no probes; *before* = LUT executables built without frame pointers (`--lut-dir`), *after* = this")
print("build (`.cargo/config.toml`: Rust `-C force-frame-pointers=yes`, C/C++ `-fno-omit-frame-pointer")
print("-mno-omit-leaf-frame-pointer` for ring, BoringSSL, MsQuic, quictls). Medians over rounds.\n")
print("| LUT | goodput before (Mbit/s) | goodput after | after/before | server CPU s before | after | client CPU s before | after | goodput per round, before / after |")
print("|---|---|---|---|---|---|---|---|---|")
for lut in sorted({k[0] for k in runs}):
    g = [median(lut, a, lambda r: r["goodput_mbps"]) for a in ("before", "after")]
    s = [median(lut, a, lambda r: r["server"]["cpu_total_s"]) for a in ("before", "after")]
    c = [median(lut, a, lambda r: r["client"]["cpu_total_s"]) for a in ("before", "after")]
    print(f"| {lut} | {g[0]:.0f} | {g[1]:.0f} | {g[1] / g[0]:.3f} | {s[0]:.3f} | {s[1]:.3f} | {c[0]:.3f} | {c[1]:.3f} | {rounds_of(lut)} |")
