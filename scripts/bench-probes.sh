#!/usr/bin/env bash
# What the probes cost -> docs/probe-overhead.md (+ raw JSON under bench/). `just bench-probes`.
# Each table is one `nesquic run --overhead`: per round it runs without probes and with every probe
# set, in rotating order, so drift on a shared machine hits all sets alike; ratios are of medians
# against the unprobed runs of the same invocation.
set -euo pipefail
bin=${CARGO_TARGET_DIR:-target}/release
out=docs/probe-overhead.md
rounds=${ROUNDS:-10}
size=${SIZE:-200MB}

overhead() { # json-name, nesquic run arguments...
    local name=$1
    shift
    "$bin/nesquic" run "$@" --overhead --json "bench/$name.json" 2>/dev/null | sed -n '/^probe overhead/,$p'
    python3 scripts/slim-overhead.py "bench/$name.json"
}

section() { # title, json-name, arguments...
    local title=$1 name=$2
    shift 2
    echo "## $title"
    echo
    echo "\`nesquic run $* --overhead\`"
    echo
    echo '```'
    overhead "$name" "$@"
    echo '```'
    echo
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Everything below this line of the document is written by hand (the profile's and the default
# set's measurements) and kept as it is.
marker='<!-- Written by hand from here on: scripts/bench-probes.sh keeps it. -->'
kept=$(awk -v m="$marker" 'found || $0 == m { found = 1; print }' "$out" 2>/dev/null || true)
# The agent's own cost per hit, from the calibration a timed run makes first.
# (Whole outputs to files first: a pipe into `grep -m1` would end nesquic early under pipefail.)
"$bin/nesquic" run --lut quinn --size 5MB --probe crypto:time --out "$scratch/cal" > "$scratch/cal.txt" 2>&1
"$bin/nesquic" run --lut quinn --size 5MB --probe crypto:time --probe-backend kernel --out "$scratch/kcal" > "$scratch/kcal.txt" 2>&1
"$bin/nesquic" run --lut quinn --size "$size" --probe profile --out "$scratch/run" > "$scratch/run.txt" 2>&1
agent_cost=$(grep 'user (inline hook): a counted call' "$scratch/cal.txt" | sort -u)
kernel_cost=$(grep 'adds' "$scratch/kcal.txt" | sort -u)
sampler=$(grep 'sampler cost' "$scratch/run.txt")

{
    echo "# Probe overhead"
    echo
    echo "Produced by \`just bench-probes\` on $(uname -sr), $(nproc) CPUs, $(date -u +%F); $rounds rounds of $size per set."
    echo "Raw figures: bench/probe-overhead-*.json. The default backend (\`auto\`) measures functions with the"
    echo "user-space agent's inline hooks and packet I/O with its libc interposition; \`--probe-backend kernel\`"
    echo "uses eBPF uprobes and syscall tracepoints."
    echo
    echo "Per-hit cost, from the start-up calibration (busy-loop workload, alternating rounds):"
    echo
    echo '```'
    echo "$agent_cost" | sed 's/^ *//'
    echo "$kernel_cost" | sed 's/^ *//'
    echo '```'
    echo
    for lut in quinn quiche msquic; do
        section "$lut, user-space agent (default backend)" "probe-overhead-$lut-user" \
            --lut "$lut" --size "$size" --repeat "$rounds" --probe io,crypto,crypto:time
    done
    section "quinn, kernel backend (eBPF uprobes and tracepoints)" "probe-overhead-quinn-kernel" \
        --lut quinn --size "$size" --repeat "$rounds" --probe io,crypto,crypto:time --probe-backend kernel
    section "quinn, kernel uprobes duty-cycled (timed crypto counted 50 ms of every 500 ms)" "probe-overhead-duty" \
        --lut quinn --size "$size" --repeat 5 --probe crypto:time --duty 50ms/500ms --probe-backend kernel
    section "quinn, the sampling profile alone (always eBPF; its cost is near this VM's round-to-round noise)" \
        "probe-overhead-profile" --lut quinn --size "$size" --repeat 20 --probe profile
    echo "The sampler's own cost, timed by the kernel (BPF_ENABLE_STATS) in one $size run:"
    echo
    echo '```'
    echo "$sampler" | sed 's/^ *//'
    echo '```'
    if [ -n "$kept" ]; then
        echo
        echo "$kept"
    fi
} > "$out"
cat "$out"
