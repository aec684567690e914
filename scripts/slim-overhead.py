#!/usr/bin/env python3
"""Slims `nesquic run --overhead --json` output for committing under bench/: per set the ratios
and, per round, the figures the ratios come from (goodput, transfer time, each side's CPU, the
agent's start-up), without each repetition's probe tables and profile (tens of MB at 300 rounds).

Usage: slim-overhead.py FILE...  (rewrites each file in place)
"""
import json
import sys

KEEP = ["probes", "goodput_mbps", "cpu_s_per_gb", "goodput_ratio", "cpu_ratio", "goodput_paired", "cpu_paired"]


def round_figures(rep):
    row = {
        "goodput_mbps": rep["goodput_mbps"],
        "transfer_s": rep["transfer_s"],
        "server_cpu_s": rep["server"]["cpu_total_s"],
        "client_cpu_s": rep["client"]["cpu_total_s"],
    }
    startup = {a["role"]: a["startup_cpu_ns"] for a in rep.get("agents", []) if "startup_cpu_ns" in a}
    if startup:
        row["agent_startup_cpu_ns"] = startup
    return row


def slim(report):
    sets = []
    for s in report["sets"]:
        kept = {k: s[k] for k in KEEP if k in s}
        kept["rounds"] = [round_figures(r) for r in s["repetitions"]]
        sets.append(kept)
    return {"rounds": report["rounds"], "size_bytes": report["size_bytes"], "sets": sets}


for path in sys.argv[1:]:
    with open(path) as f:
        report = json.load(f)
    if "sets" not in report or not report["sets"] or "repetitions" not in report["sets"][0]:
        continue  # already slim
    with open(path, "w") as f:
        json.dump(slim(report), f, indent=1)
        f.write("\n")
