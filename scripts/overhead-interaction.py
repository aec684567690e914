#!/usr/bin/env python3
"""Whether two probes cost more together than apart, from one `nesquic run --overhead
--overhead-sets each --probe A,B --json` run (slimmed by slim-overhead.py or not): per round,
(AB/none) / ((A/none) x (B/none)); the geometric mean with a 95% interval. 1 means the pair
costs what its parts cost; below 1 in goodput (above 1 in CPU per GB) means they interact.

Usage: overhead-interaction.py FILE
"""
import json
import math
import statistics
import sys

with open(sys.argv[1]) as f:
    report = json.load(f)
sets = {s["probes"]: s.get("rounds") or s["repetitions"] for s in report["sets"]}
names = [n for n in sets if n and "," not in n]
if len(names) != 2 or ",".join(names) not in sets:
    sys.exit(f"{sys.argv[1]}: needs the sets none, A, B and A,B (--overhead-sets each with two probes)")
a, b = names


def goodput(r):
    return r["goodput_mbps"]


def cpu_per_byte(r):
    server = r.get("server_cpu_s", r.get("server", {}).get("cpu_total_s"))
    client = r.get("client_cpu_s", r.get("client", {}).get("cpu_total_s"))
    return (server + client) / r["transfer_s"] / r["goodput_mbps"]


rounds = min(len(v) for v in sets.values())
for label, figure in [("goodput", goodput), ("CPU per byte", cpu_per_byte)]:
    logs = []
    for i in range(rounds):
        base = figure(sets[""][i])
        pa, pb, both = (figure(sets[n][i]) / base for n in (a, b, f"{a},{b}"))
        logs.append(math.log(both / (pa * pb)))
    mean, half = statistics.mean(logs), 1.98 * statistics.stdev(logs) / math.sqrt(rounds)
    print(f"{label}: ({a},{b}) / ({a} x {b}) = {math.exp(mean):.3f} "
          f"({math.exp(mean - half):.3f}-{math.exp(mean + half):.3f}), {rounds} rounds")
