#!/usr/bin/env bash
# What `nesquic run`'s default probes (profile, io, crypto) cost each LUT, end to end.
# `just bench-default-probes [ROUNDS] [PARTS]`:
# - PARTS=whole (default): `nesquic run --overhead` without --probe, the default set as one against
#   none -> bench/default-probes.md (+ bench/default-probes-LUT.json);
# - PARTS=each: `--probe profile,io,crypto --overhead`, each probe alone and all three
#   -> bench/default-probes-parts.md (+ bench/default-probes-parts-LUT.json); 2.5x the time;
# - PARTS=profile: the sampling profile against perf in the same rounds. Each round runs, per LUT
#   and in rotating order, one `nesquic run --repeat 1` without probes, one with each of PROBES
#   (default profile:HZ, HZ default 999) and, when perf is installed, one without probes under
#   `perf record -F HZ -g -a` (the anchor: the kernel's own sampler on this machine); paired
#   against the same round's unprobed run -> bench/NAME.md (default profile-HZ) + bench/NAME.json
#   (every run's figures). SIZE defaults to 300MB there.
# Each round runs every set once, in rotating order; `--overhead` pairs each probed run with the
# same round's unprobed one. Single rounds on this VM scatter by 10-15%, so a 2% cost needs
# ~150-300 pairs to show. Run it on a quiet machine (nothing else running).
# RUN_ARGS adds options to every run, e.g. RUN_ARGS=--pin (each side on a CPU of its own);
# NAME renames the whole-set output (bench/NAME.md, bench/NAME-LUT.json).
set -euo pipefail
bin=${CARGO_TARGET_DIR:-target}/release
rounds=${1:-300}
parts=${2:-whole}
size=${SIZE:-200MB}
luts=${LUTS:-quinn quiche msquic}
read -r -a run_args <<< "${RUN_ARGS:-}"

# PARTS=profile: nesquic's sampler and perf's, alternating within each round.
profile_vs_perf() {
    local hz=${HZ:-999} size=${SIZE:-300MB}
    local name=${NAME:-profile-$hz}
    local -a arms=(none) probes
    read -r -a probes <<< "${PROBES:-profile:$hz}"
    arms+=("${probes[@]}")
    if command -v perf > /dev/null; then arms+=(perf); else echo "perf is not installed: no perf row" >&2; fi
    local scratch
    scratch=$(mktemp -d)
    # shellcheck disable=SC2064 # expanded now: the local is gone when the trap runs
    trap "rm -rf '$scratch'" EXIT
    local load_before n=${#arms[@]} round lut i arm dir
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    for round in $(seq 1 "$rounds"); do
        for lut in $luts; do
            for i in $(seq 0 $((n - 1))); do
                # Rotating order: drift on a noisy machine hits every arm alike.
                arm=${arms[$(((i + round) % n))]}
                dir="$scratch/$lut-$round-${arm//[:,]/_}"
                local -a cmd=("$bin/nesquic" run --lut "$lut" --size "$size" --repeat 1 "${run_args[@]}"
                    --out "$dir" --json "$dir.json")
                case "$arm" in
                    none) cmd+=(--probe none) ;;
                    perf) cmd=(perf record -F "$hz" -g -a -q -o "$dir.perf" -- "${cmd[@]}" --probe none) ;;
                    *) cmd+=(--probe "$arm") ;;
                esac
                if ! "${cmd[@]}" > "$dir.log" 2>&1; then
                    echo "round $round, $lut, $arm failed:" >&2
                    tail -5 "$dir.log" >&2
                    exit 1
                fi
                printf '{"round":%d,"lut":"%s","arm":"%s","json":"%s","log":"%s"}\n' \
                    "$round" "$lut" "$arm" "$dir.json" "$dir.log"
                rm -rf "$dir" "$dir.perf"
            done
        done
        echo "round $round of $rounds done (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    done > "$scratch/index.jsonl"
    local command="${HZ:+HZ=$HZ }${PROBES:+PROBES=\"$PROBES\" }${SIZE:+SIZE=$SIZE }${LUTS:+LUTS=\"$LUTS\" }"
    command+="${NAME:+NAME=$NAME }${RUN_ARGS:+RUN_ARGS=\"$RUN_ARGS\" }just bench-default-probes $rounds profile"
    python3 - "$scratch/index.jsonl" "bench/$name.json" "$hz" "$size" "$command" \
        "$(uname -sr), $(nproc) CPUs, $(date -u +%F)" \
        "$load_before -> $(cut -d' ' -f1-3 /proc/loadavg)" > "bench/$name.md" <<'EOF'
import json, math, re, statistics, sys

index, out_json, hz, size, command, machine, load = sys.argv[1:8]
# Two-sided 95% quantiles of Student's t by degrees of freedom (rounded down to a row).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
       10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


def paired(ratios):
    # Geometric mean of the per-round ratios with its 95% interval (t on the logs).
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return f"{math.exp(mean):.3f}"
    t = T95[max(k for k in T95 if k <= len(logs) - 1)]
    half = t * statistics.stdev(logs) / math.sqrt(len(logs))
    return f"{math.exp(mean):.3f} ({math.exp(mean - half):.3f}-{math.exp(mean + half):.3f})"


rows = []
for line in open(index):
    entry = json.loads(line)
    rep = json.load(open(entry["json"]))["repetitions"][0]
    server, client = rep["server"]["cpu_total_s"], rep["client"]["cpu_total_s"]
    sampler = [l.strip() for l in open(entry["log"]) if "sampler cost" in l]
    rows.append({"round": entry["round"], "lut": entry["lut"], "arm": entry["arm"],
                 "goodput_mbps": rep["goodput_mbps"], "server_cpu_s": server, "client_cpu_s": client,
                 "cpu_s_per_gb": (server + client) / (rep["bytes"] / 1e9),
                 "sampler": sampler[-1] if sampler else None})
with open(out_json, "w") as f:
    json.dump(rows, f, indent=1)

rounds = max(r["round"] for r in rows)
name = out_json.split("/")[-1]
arms_named = ", ".join(a for a in dict.fromkeys(r["arm"] for r in rows) if a not in ("none", "perf"))
print(f"# The sampling profile ({arms_named}) against perf -F {hz}, in the same rounds\n")
print(f"Produced by `{command}` on {machine}; load average before -> after: {load}.")
print(f"Each of {rounds} rounds runs every arm once per LUT, in rotating order: `nesquic run --lut LUT "
      f"--size {size} --repeat 1` without probes (none), with `--probe ARM`, and without probes under "
      f"`perf record -F {hz} -g -a` (perf). \"paired\" is the geometric mean of each round's ratio to the "
      "same round's unprobed run, with its 95% interval; CPU s/GB is both processes' CPU time per GB "
      f"(raw: bench/{name}).\n")
for lut in dict.fromkeys(r["lut"] for r in rows):
    mine = [r for r in rows if r["lut"] == lut]
    base = {r["round"]: r for r in mine if r["arm"] == "none"}
    print(f"## {lut}\n\n```")
    print(f"{'arm':<18}{'goodput Mbit/s':>15}{'paired':>24}{'CPU s/GB':>10}{'paired':>24}")
    # none first, perf last, nesquic's arms in between as given.
    arms = sorted(dict.fromkeys(r["arm"] for r in mine), key=lambda a: (a != "none") + (a == "perf"))
    for arm in arms:
        runs = [r for r in mine if r["arm"] == arm and r["round"] in base]
        ratio = lambda key: paired([r[key] / base[r["round"]][key] for r in runs])
        goodput = statistics.median(r["goodput_mbps"] for r in runs)
        cpu = statistics.median(r["cpu_s_per_gb"] for r in runs)
        print(f"{arm:<18}{goodput:>15.1f}{ratio('goodput_mbps'):>24}{cpu:>10.3f}{ratio('cpu_s_per_gb'):>24}")
    print("```")
    # The sampler's own clock, summed over the arm's runs: steady samples apart from first inserts.
    pattern = re.compile(r"(\d+) steady samples x ([\d.-]+) us \+ (\d+) first inserts x ([\d.-]+) us")
    for arm in arms:
        found = [pattern.search(r["sampler"] or "") for r in mine if r["arm"] == arm]
        found = [[float(x) if x != "-" else 0.0 for x in m.groups()] for m in found if m]
        if found:
            steady, inserts = sum(f[0] for f in found), sum(f[2] for f in found)
            steady_us = sum(f[0] * f[1] for f in found) / max(steady, 1)
            insert_us = sum(f[2] * f[3] for f in found) / max(inserts, 1)
            print(f"- {arm}, the program's own clock over {len(found)} runs: {steady:.0f} steady samples x "
                  f"{steady_us:.1f} us, {inserts:.0f} first inserts x {insert_us:.1f} us")
    print()
EOF
    cat "bench/$name.md"
}

case "$parts" in
    profile) profile_vs_perf; exit 0 ;;
    whole) out=bench/${NAME:-default-probes}.md json=${NAME:-default-probes} probe=() what="the default set as one" ;;
    each) out=bench/default-probes-parts.md json=default-probes-parts probe=(--probe profile,io,crypto)
        what="each default probe alone and all three" ;;
    *) echo "PARTS must be whole, each or profile, not '$parts'" >&2; exit 2 ;;
esac

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

{
    echo "# The default probes' cost, end to end: $what"
    echo
    env_prefix="${NAME:+NAME=$NAME }${RUN_ARGS:+RUN_ARGS=$RUN_ARGS }"
    echo "Produced by \`${env_prefix}just bench-default-probes $rounds $parts\` on $(uname -sr), $(nproc) CPUs, $(date -u +%F)."
    echo "Per LUT: \`nesquic run --lut LUT --size $size --repeat $rounds ${probe[*]:+${probe[*]} }${run_args[*]:+${run_args[*]} }--overhead\`"
    echo "(raw: bench/$json-LUT.json). \"paired\" is the geometric mean of each round's probed/unprobed"
    echo "ratio with its 95% interval; CPU s/GB is both processes' CPU time (start-up included) per GB."
    echo
    for lut in $luts; do
        echo "## $lut"
        echo
        echo '```'
        "$bin/nesquic" run --lut "$lut" --size "$size" --repeat "$rounds" "${probe[@]}" "${run_args[@]}" --overhead \
            --out "$scratch/$lut" --json "bench/$json-$lut.json" 2>/dev/null | sed -n '/^probe overhead/,$p' |
            grep -v '^nesquic: JSON written'
        # Per round only the figures behind the ratios (the whole report is ~20 MB at 300 rounds).
        python3 scripts/slim-overhead.py "bench/$json-$lut.json"
        echo '```'
        echo
    done
} > "$out"
cat "$out"
