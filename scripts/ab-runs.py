#!/usr/bin/env python3
"""Probe sets compared in separate `nesquic run` processes, round by round.

    scripts/ab-runs.py ROUNDS LUT SIZE ARM [ARM ...]

Each ARM is a --probe list, optionally with environment settings for that run:
`none`, `profile`, `profile+NAME=VALUE,NAME2=VALUE2`. Every round runs each arm once, in
alternating order (forward, then backward), each as its own `nesquic run` (the first arm is the
baseline). Prints, per arm, the paired geometric mean of (arm / baseline) of both LUT processes'
CPU time and of goodput, with a 95% interval (normal approximation on the logs).

`nesquic run --overhead` compares sets inside one nesquic process; this is the same comparison
with a fresh process (fresh BPF objects, fresh agent) per run, for when that difference matters.
"""

import json
import math
import os
import subprocess
import sys
import tempfile

NESQUIC = os.environ.get("NESQUIC", os.path.join(os.path.dirname(__file__), "..", "target", "release", "nesquic"))


def run(lut, size, arm, report):
    probe, _, settings = arm.partition("+")
    env = dict(os.environ)
    for setting in filter(None, settings.split(",")):
        name, _, value = setting.partition("=")
        env[name] = value
    cmd = [NESQUIC, "run", "--lut", lut, "--probe", probe, "--size", size, "--json", report]
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"ab-runs: {' '.join(cmd)} failed:\n{done.stderr}")
    with open(report) as f:
        rep = json.load(f)["repetitions"][0]
    return rep["client"]["cpu_total_s"] + rep["server"]["cpu_total_s"], rep["goodput_mbps"]


def paired(values, baseline):
    logs = [math.log(a / b) for a, b in zip(values, baseline)]
    mean = sum(logs) / len(logs)
    sd = (sum((x - mean) ** 2 for x in logs) / max(1, len(logs) - 1)) ** 0.5
    half = 1.96 * sd / len(logs) ** 0.5
    return f"{math.exp(mean):.3f} ({math.exp(mean - half):.3f}-{math.exp(mean + half):.3f})"


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    rounds, lut, size, arms = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    results = {arm: [] for arm in arms}
    with tempfile.TemporaryDirectory() as scratch:
        report = os.path.join(scratch, "run.json")
        for r in range(rounds):
            for arm in arms if r % 2 == 0 else arms[::-1]:
                results[arm].append(run(lut, size, arm, report))
            print(f"round {r + 1}/{rounds}", file=sys.stderr)
    base = results[arms[0]]
    print(f"{rounds} rounds of {lut} {size}, separate processes; paired against {arms[0]} (95%)")
    for arm in arms:
        cpu = paired([c for c, _ in results[arm]], [c for c, _ in base])
        goodput = paired([g for _, g in results[arm]], [g for _, g in base])
        print(f"{arm:40} CPU {cpu}   goodput {goodput}")


if __name__ == "__main__":
    main()
