#!/usr/bin/env bash
# What `nesquic run`'s default probes (profile, io, crypto) cost each LUT, end to end.
# `just bench-default-probes [ROUNDS] [PARTS]`:
# - PARTS=whole (default): `nesquic run --overhead` without --probe, the default set as one against
#   none -> bench/default-probes.md (+ bench/default-probes-LUT.json);
# - PARTS=each: `--probe profile,io,crypto --overhead`, each probe alone and all three
#   -> bench/default-probes-parts.md (+ bench/default-probes-parts-LUT.json); 2.5x the time.
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
case "$parts" in
    whole) out=bench/${NAME:-default-probes}.md json=${NAME:-default-probes} probe=() what="the default set as one" ;;
    each) out=bench/default-probes-parts.md json=default-probes-parts probe=(--probe profile,io,crypto)
        what="each default probe alone and all three" ;;
    *) echo "PARTS must be whole or each, not '$parts'" >&2; exit 2 ;;
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
