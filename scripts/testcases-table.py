#!/usr/bin/env python3
"""Renders `nesquic matrix --json` rows of the multi-conn, handshakes and multi-stream testcases
(scripts/bench-testcases.sh) as one markdown table per testcase, the reference LUT's row first."""
import json
import sys

rows = json.loads(open(sys.argv[1]).read())


def spread(s, fmt="{:.0f}"):
    if not s:
        return "-"
    return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}-{fmt.format(s['max'])})"


def ratio(row, key):
    v = (row.get("versus") or {}).get(key)
    return "-" if v is None else f"{v:.2f}"


def name(row):
    return f"{row['lut']} {row['version']} ({row['io']})"


def ordered(testcase):
    picked = [r for r in rows if r["testcase"]["name"] == testcase]
    # The reference row first, then as the matrix listed them.
    return sorted(picked, key=lambda r: (r.get("versus") or {}).get("goodput_ratio") != 1.0)


def shape(testcase):
    w = ordered(testcase)[0]["testcase"]["workload"]
    return f"{w['connections']} connection(s), {w['parallel']} at once, {w['streams']} stream(s) of {w['size']} bytes"


def workload(row, key):
    return (row["summary"].get("workload") or {}).get(key)


for testcase, title in [
    ("multi-conn", "Parallel connections: aggregate goodput and fairness"),
    ("handshakes", "Handshakes: connections per second and latency"),
    ("multi-stream", "Streams on one connection: aggregate goodput and fairness"),
]:
    if not ordered(testcase):
        continue
    print(f"## {title} ({testcase}: {shape(testcase)})")
    print()
    if testcase == "handshakes":
        print("| LUT (I/O) | rounds | connections/s | handshake p50 ms | handshake p99 ms | server CPU ms/conn | client CPU ms/conn | conn/s / ref |")
        print("|---|---|---|---|---|---|---|---|")
        ref = next((r for r in ordered(testcase) if (r.get("versus") or {}).get("goodput_ratio") == 1.0), None)
        for r in ordered(testcase):
            n = r["testcase"]["workload"]["connections"]
            rate = workload(r, "handshakes_per_s")
            versus = "-"
            if ref and rate and workload(ref, "handshakes_per_s"):
                versus = f"{rate['median'] / workload(ref, 'handshakes_per_s')['median']:.2f}"
            per_conn = lambda side: f"{1000 * r['summary'][side]['median'] / n:.2f}"
            print(
                f"| {name(r)} | {r['rounds']} | {spread(rate)} | {spread(workload(r, 'handshake_p50_ms'), '{:.2f}')} "
                f"| {spread(workload(r, 'handshake_p99_ms'), '{:.2f}')} | {per_conn('server_cpu_s')} | {per_conn('client_cpu_s')} | {versus} |"
            )
    else:
        fairness = "connection_fairness" if testcase == "multi-conn" else "stream_fairness"
        print(f"| LUT (I/O) | rounds | aggregate goodput Mbit/s | Jain fairness ({fairness.split('_')[0]}s) | handshake ms | goodput / ref | CPU per byte / ref |")
        print("|---|---|---|---|---|---|---|")
        for r in ordered(testcase):
            print(
                f"| {name(r)} | {r['rounds']} | {spread(r['summary']['goodput_mbps'])} "
                f"| {spread(workload(r, fairness), '{:.3f}')} | {r['summary']['handshake_ms']['median']:.2f} "
                f"| {ratio(r, 'goodput_ratio')} | {ratio(r, 'cpu_per_byte_ratio')} |"
            )
    print()
print("Jain's index: 1 = every connection (stream) got the same goodput, 1/n = one got everything.")
print("Ratios: each row's median over the reference row's (tcp-tls, same testcase).")
