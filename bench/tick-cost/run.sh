#!/usr/bin/env bash
# Cost per profile sample as the sampled program sees it (timer interrupt + sampler), by rate:
# alternating rounds of a fixed busy chunk timed bare and under `nesquic trace --probe
# profile:HZ`. `bench/tick-cost/run.sh` (root) -> bench/tick-cost/results.md
set -euo pipefail
here=$(dirname "$0")
bin=${CARGO_TARGET_DIR:-$here/../../target}/release
rounds=${ROUNDS:-4}
rates=${RATES:-999 499}
prog=$(mktemp)
trap 'rm -f "$prog"' EXIT
cc -O2 -o "$prog" "$here/tick-cost.c"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
lines=()
for round in $(seq 1 "$rounds"); do
    for arm in bare $rates; do
        if [ "$arm" = bare ]; then
            out=$("$prog")
        else
            out=$("$bin/nesquic" trace --probe "profile:$arm" -- "$prog" 2>/dev/null | grep '^{')
        fi
        echo "round $round $arm $out" >&2
        lines+=("$arm $out")
    done
done
load="$load_before -> $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"
printf '%s\n' "${lines[@]}" | python3 "$here/table.py" "$rounds" "$load" > "$here/results.md"
cat "$here/results.md"
