#!/usr/bin/env bash
# Payload harness cost -> bench/harness.md (micro-benchmark) and bench/harness-luts.md (per LUT).
# `just bench-harness [OLD_LUT_DIR]`: with the LUT executables of an older build (e.g. a worktree of
# the previous commit built with `cargo build --release`), each LUT alternates old/new round by
# round under the same nesquic, so drift on a shared machine hits both alike; ratios are the result.
# Every run samples with `--probe profile`: the harness is the `app` component.
set -euo pipefail
bin=${CARGO_TARGET_DIR:-target}/release
before=${1:-}
rounds=${ROUNDS:-5}
size=${SIZE:-200MB}
luts=${LUTS:-quinn quiche msquic}

cargo run --release --quiet -p nesquic-translation --example harness_bench -- bench/harness.md

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
arms=(after)
[ -n "$before" ] && arms=(before after)
for round in $(seq 1 "$rounds"); do
    for lut in $luts; do
        order=("${arms[@]}")
        # Alternate which arm goes first each round.
        if [ $((round % 2)) -eq 0 ] && [ ${#arms[@]} -eq 2 ]; then order=(after before); fi
        for arm in "${order[@]}"; do
            dir_arg=()
            [ "$arm" = before ] && dir_arg=(--lut-dir "$before")
            echo "round $round/$rounds: $lut ($arm)" >&2
            "$bin/nesquic" run --lut "$lut" --size "$size" --probe profile "${dir_arg[@]}" \
                --out "$scratch/$lut-$arm-$round" >/dev/null
        done
    done
done
python3 scripts/harness-table.py "$scratch" "$size" "$rounds" "${before:+$before}" > bench/harness-luts.md
cat bench/harness.md bench/harness-luts.md
