#!/usr/bin/env bash
# What frame pointers cost: each LUT built without them (OLD_LUT_DIR, e.g. the LUT executables of
# a build before .cargo/config.toml turned them on) against this build, alternating which goes first
# round by round under the same nesquic so that drift on a shared machine hits both alike; no probes.
# `scripts/bench-frame-pointers.sh OLD_LUT_DIR` -> bench/frame-pointers.md (median goodput and CPU
# per byte over rounds, ratio new/old).
set -euo pipefail
bin=${CARGO_TARGET_DIR:-target}/release
before=${1:?usage: bench-frame-pointers.sh OLD_LUT_DIR}
rounds=${ROUNDS:-5}
size=${SIZE:-200MB}
luts=${LUTS:-quinn quiche msquic}
out=${OUT:-bench/frame-pointers.md}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for round in $(seq 1 "$rounds"); do
    for lut in $luts; do
        order=(before after)
        if [ $((round % 2)) -eq 0 ]; then order=(after before); fi
        for arm in "${order[@]}"; do
            dir_arg=()
            [ "$arm" = before ] && dir_arg=(--lut-dir "$before")
            echo "round $round/$rounds: $lut ($arm)" >&2
            "$bin/nesquic" run --lut "$lut" --size "$size" --probe none "${dir_arg[@]}" \
                --out "$scratch/$lut-$arm-$round" >/dev/null
        done
    done
done
python3 scripts/frame-pointer-table.py "$scratch" "$size" "$rounds" "$before" "$*" > "$out"
cat "$out"
