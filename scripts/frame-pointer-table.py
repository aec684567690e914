#!/usr/bin/env python3
"""Summarises `scripts/bench-frame-pointers.sh` runs (DIR/<lut>-<arm>-<round>/summary.json) as
markdown: per LUT, median goodput and CPU seconds per side over rounds, without (before) and with
(after) frame pointers, and the after/before ratio paired round by round (both arms of a round
ran back to back, so drift on a shared machine cancels): the geometric mean of the per-round
ratios with a 95% t interval on their logs."""
import datetime
import json
import math
import os
import statistics
import sys
from pathlib import Path

runs_dir, size, rounds, before = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]

runs = {}  # (lut, arm, round) -> repetition
for d in sorted(runs_dir.iterdir()):
    lut, arm, rnd = d.name.rsplit("-", 2)
    runs[(lut, arm, int(rnd))] = json.loads((d / "summary.json").read_text())["repetitions"][0]
luts = sorted({k[0] for k in runs})
round_ids = sorted({k[2] for k in runs})

# Two-sided 97.5% quantiles of Student's t for small degrees of freedom; 1.96 beyond.
T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23,
        12: 2.18, 15: 2.13, 20: 2.09, 25: 2.06, 30: 2.04, 40: 2.02, 60: 2.00, 120: 1.98}


def t975(df):
    return next((T975[k] for k in sorted(T975) if k >= df), 1.96)


def key(name):
    return {
        "goodput": lambda r: r["goodput_mbps"],
        "server": lambda r: r["server"]["cpu_total_s"],
        "client": lambda r: r["client"]["cpu_total_s"],
    }[name]


def median(lut, arm, name):
    return statistics.median(key(name)(runs[(lut, arm, i)]) for i in round_ids if (lut, arm, i) in runs)


def paired(lut, name):
    logs = [math.log(key(name)(runs[(lut, "after", i)]) / key(name)(runs[(lut, "before", i)]))
            for i in round_ids if (lut, "after", i) in runs and (lut, "before", i) in runs]
    mean = statistics.mean(logs)
    half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return f"{math.exp(mean):.3f} ({math.exp(mean - half):.3f}-{math.exp(mean + half):.3f})"


print("# Frame pointers: what they cost\n")
print(f"`scripts/bench-frame-pointers.sh {before}`: {size} per run, {rounds} alternating rounds per LUT,")
print("no probes; *before* = LUT executables built without frame pointers (`--lut-dir`), *after* = this")
print("build (`.cargo/config.toml`: Rust `-C force-frame-pointers=yes`, C/C++ `-fno-omit-frame-pointer")
print("-mno-omit-leaf-frame-pointer` for ring, BoringSSL, MsQuic, quictls). Medians over rounds, and")
print("after/before paired round by round: geometric mean of the per-round ratios (95% interval).")
load = Path("/proc/loadavg").read_text().split()[:3]
now = datetime.datetime.now(datetime.timezone.utc)
print(f"Summarised {now:%Y-%m-%d %H:%M} UTC, load average {' / '.join(load)} (1/5/15 min) on {os.cpu_count()} CPUs.\n")
print("| LUT | goodput before (Mbit/s) | after | paired goodput after/before | server CPU s before | after | paired server CPU after/before | client CPU s before | after | paired client CPU after/before |")
print("|---|---|---|---|---|---|---|---|---|---|")
for lut in luts:
    g, s, c = ([median(lut, a, n) for a in ("before", "after")] for n in ("goodput", "server", "client"))
    print(f"| {lut} | {g[0]:.0f} | {g[1]:.0f} | {paired(lut, 'goodput')} | {s[0]:.3f} | {s[1]:.3f} | "
          f"{paired(lut, 'server')} | {c[0]:.3f} | {c[1]:.3f} | {paired(lut, 'client')} |")
print("\nGoodput per round (Mbit/s), before / after:\n")
for lut in luts:
    per = [" ".join(f"{runs[(lut, a, i)]['goodput_mbps']:.0f}" for i in round_ids if (lut, a, i) in runs)
           for a in ("before", "after")]
    print(f"- {lut}: {per[0]} / {per[1]}")
