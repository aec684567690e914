#!/usr/bin/env bash
# The CI gate's own benchmark: how often it fails unchanged code, and what it catches.
# - JOBS A/A jobs of unchanged quinn (`nesquic ab`, SIZE, ROUNDS interleaved rounds, --probe io):
#   the gate's verdict with its defaults, and with rules that make CPU and goodput gate;
# - the same jobs with +3% injected into head's recorded syscall counts (every repetition's
#   io calls and empty receives x 1.03, bytes and datagrams unchanged): is it caught, on which
#   metric (syscalls_per_mb gates by default);
# - GSO_JOBS jobs with GSO off on head;
# - each A/A job's base against the next job's head, unpaired (what `compare` of two separate
#   runs sees).
# Rewrites the results section of docs/ci.md (between the bench-gate markers).
# Usage: scripts/bench-gate.sh [JOBS] (after `just build`; root, for the io probes)
set -euo pipefail
jobs=${1:-20}
rounds=${ROUNDS:-10}
size=${SIZE:-25MB}
gso_jobs=${GSO_JOBS:-3}
nesquic=./target/release/nesquic
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
ab() { # NAME EXTRA...: one job; its JSON report and exit status are kept
    local name=$1; shift
    local status=0
    "$nesquic" ab --size "$size" --rounds "$rounds" --probe io --format json --out "$dir/$name" "$@" \
        >"$dir/$name.json" 2>"$dir/$name.log" || status=$?
    echo "$status" >"$dir/$name.status"
    [ "$status" -le 1 ] || { cat "$dir/$name.log" >&2; exit 1; }
}
start=$(date +%s)
for i in $(seq 1 "$jobs"); do
    ab "aa-$i"
    echo "bench-gate: A/A job $i/$jobs: exit $(cat "$dir/aa-$i.status")" >&2
done
for i in $(seq 1 "$gso_jobs"); do
    ab "gso-$i" --head-opt gso=off
    echo "bench-gate: GSO-off job $i/$gso_jobs: exit $(cat "$dir/gso-$i.status")" >&2
done
elapsed=$(( $(date +%s) - start ))
python3 - "$dir" "$jobs" "$gso_jobs" "$rounds" "$size" "$elapsed" "$nesquic" <<'PY' > "$dir/results.md"
import json, shutil, statistics, subprocess, sys
d, jobs, gso_jobs, rounds, size, elapsed, nesquic = sys.argv[1:]
jobs, gso_jobs = int(jobs), int(gso_jobs)

def compare(base, head, *extra):
    p = subprocess.run([nesquic, "compare", base, head, "--format", "json", *extra],
                       capture_output=True, text=True)
    if p.returncode > 1:
        sys.exit(f"compare {base} {head}: {p.stderr}")
    return p.returncode, json.loads(p.stdout)

def failed_on(report):
    return [r["metric"] for r in report["rows"] if r["verdict"] == "regression"]

def inject(job, factor):
    """A copy of an A/A job whose head made `factor` times the syscalls it made."""
    out = f"{d}/inj-{job}"
    shutil.copytree(f"{d}/{job}", out)
    path = f"{out}/head/summary.json"
    record = json.load(open(path))
    for rep in record["repetitions"]:
        for role in rep["probes"]["roles"]:
            for io in role["io"]:
                io["calls"] = round(io["calls"] * factor)
                io["eagain"] = round(io["eagain"] * factor)
    json.dump(record, open(path, "w"))
    return out

rules = ["--fail-on", "cpu_s>+5%", "--fail-on", "goodput_mbps<-5%"]
aa = [f"aa-{i}" for i in range(1, jobs + 1)]
default_fail, rule_fail, caught, unpaired_fail, widths, inconclusive = [], [], [], [], [], []
caught_ruled, sender_rule = [], ["--fail-on", "server.send_syscalls>+2%"]
for i, job in enumerate(aa):
    report = json.load(open(f"{d}/{job}.json"))
    if report["verdict"] == "fail":
        default_fail.append(f"{job}: {', '.join(failed_on(report))}")
    inconclusive.append(sum(r["verdict"] == "inconclusive" for r in report["rows"]))
    rows_per_job = len(report["rows"])
    for r in report["rows"]:
        if r["metric"] == "server.cpu_s" and r["interval"]:
            widths.append(100 * (r["interval"]["high"] - r["interval"]["low"]))
    code, ruled = compare(f"{d}/{job}/base", f"{d}/{job}/head", *rules)
    if code:
        rule_fail.append(f"{job}: {', '.join(failed_on(ruled))}")
    inj = inject(job, 1.03)
    code, injected = compare(f"{inj}/base", f"{inj}/head")
    caught.append(failed_on(injected) if code else [])
    code, ruled_inj = compare(f"{inj}/base", f"{inj}/head", *sender_rule)
    caught_ruled.append(failed_on(ruled_inj) if code else [])
    if i + 1 < len(aa):
        code, unpaired = compare(f"{d}/{job}/base", f"{d}/{aa[i + 1]}/head")
        if code:
            unpaired_fail.append(f"{job} vs {aa[i + 1]}: {', '.join(failed_on(unpaired))}")
gso = []
for i in range(1, gso_jobs + 1):
    report = json.load(open(f"{d}/gso-{i}.json"))
    gso.append(failed_on(report) if report["verdict"] == "fail" else [])

def tally(failures, total):
    return f"**{len(failures)} of {total}**" + ("" if not failures else " (" + "; ".join(failures) + ")")

metric_counts = {}
for c in caught:
    for m in c:
        metric_counts[m] = metric_counts.get(m, 0) + 1
first = sorted(metric_counts.items(), key=lambda kv: -kv[1])[:4]
print(f"Measured by `just bench-gate` (`scripts/bench-gate.sh {jobs}`): quinn, {size}, {rounds} interleaved "
      f"rounds a job, `--probe io`, defaults unless named; {elapsed} s in all, on the 2-core VM shared with other builds.\n")
print("| what | gate failures |")
print("|---|---|")
print(f"| A/A, unchanged quinn, defaults | {tally(default_fail, jobs)} |")
print(f"| A/A, with `--fail-on 'cpu_s>+5%' --fail-on 'goodput_mbps<-5%'` | {tally(rule_fail, jobs)} |")
print(f"| A/A base against the next job's head, unpaired (`compare` of separate runs) | {tally(unpaired_fail, jobs - 1)} |")
print(f"| +3% syscalls injected into head's records | **{sum(1 for c in caught if c)} of {jobs} caught**"
      + (f"; on {', '.join(f'`{m}` ({n})' for m, n in first)}" if first else "") + " |")
print(f"| the same, with `--fail-on 'server.send_syscalls>+2%'` (the sender's own sends) | "
      f"**{sum(1 for c in caught_ruled if c)} of {jobs} caught** |")
print(f"| quinn with GSO off on head (`--head-opt gso=off`) | **{sum(1 for g in gso if g)} of {gso_jobs} caught**; "
      f"e.g. {', '.join(f'`{m}`' for m in (gso[0] if gso and gso[0] else [])[:4])} |")
if widths:
    print(f"\nIn the A/A jobs the 99% interval of `server.cpu_s`'s paired ratio was {statistics.median(widths):.1f} "
          f"points wide (median; {min(widths):.1f}-{max(widths):.1f}); a median of "
          f"{statistics.median(inconclusive):.0f} of the {rows_per_job} rows per job were inconclusive "
          "(mostly ACK-driven client syscall counts, which wobble by ~10% a round at this size).")
bound = 100 * (1 - 0.05 ** (1 / jobs))
aa_read = (f"0 failures in {jobs} A/A jobs bounds the false-alarm rate only loosely (below ~{bound:.0f}% at 95% "
           "confidence)") if not default_fail else f"{len(default_fail)} failures in {jobs} A/A jobs"
print(f"\nHow to read it: {aa_read}; the 1% claim rests on the synthetic calibration in the record crate's "
      "tests. The injection scales head's recorded syscall counts (empty receives in proportion) and leaves "
      "bytes and datagrams alone: each side's `syscalls_per_mb`, which gates by default, moves by exactly 3%, "
      "and is caught only when that stands out of the round-to-round wobble of the ACK-driven receives in "
      "the same sum (after Holm's correction over every metric). The sender's own sends wobble by about 1% a "
      "round: a rule on them catches a few percent; so would the per-call ratios (datagrams per send), which "
      "only report by default because batching differently is no regression unless it costs syscalls per MB "
      "or CPU. More rounds or larger transfers narrow the wobble.")
PY
python3 - "$dir/results.md" docs/ci.md <<'PY'
import sys
results, doc = open(sys.argv[1]).read(), open(sys.argv[2]).read()
start, end = "<!-- bench-gate:start -->", "<!-- bench-gate:end -->"
head, rest = doc.split(start)
_, tail = rest.split(end)
open(sys.argv[2], "w").write(f"{head}{start}\n{results}{end}{tail}")
PY
cat "$dir/results.md"
