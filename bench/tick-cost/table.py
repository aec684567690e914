"""Cost per sample from bench/tick-cost/run.sh's lines: `ARM {json}` per round."""
import json, statistics, sys
rounds, load = sys.argv[1], sys.argv[2]
by = {}
for line in sys.stdin:
    arm, data = line.split(" ", 1)
    by.setdefault(arm, []).append(json.loads(data))
bare = statistics.median(r["mean_ns"] for r in by.pop("bare"))
print("# Profile cost per sample, as the sampled program sees it\n")
print(f"`bench/tick-cost/run.sh` (ROUNDS={rounds}): a ~100 us busy chunk timed 20,000 times, bare and under")
print("`nesquic trace --probe profile:HZ`, alternating; trimmed mean chunk time (chunks > 2x the median,")
print(f"preemptions, dropped), median over rounds. Load average before -> after: {load}.\n")
print("| rate (Hz per CPU) | chunk ns bare | chunk ns profiled | extra per chunk | cost per sample (us) | CPU share at this rate |")
print("|---|---|---|---|---|---|")
for hz, rs in sorted(by.items(), key=lambda kv: -int(kv[0])):
    prof = statistics.median(r["mean_ns"] for r in rs)
    extra = prof - bare
    samples_per_chunk = int(hz) * bare / 1e9
    per_sample_us = extra / samples_per_chunk / 1e3
    print(f"| {hz} | {bare:.0f} | {prof:.0f} | {extra:.0f} | {per_sample_us:.1f} | {100 * extra / bare:.2f}% |")
