# Nesquic recipes. CI calls the same ones (`.ci/run` -> `just test`).
# On a fresh machine run `./scripts/setup.sh` once first (it installs `just` itself).

set shell := ["bash", "-euo", "pipefail", "-c"]

# Show the recipes.
default:
    @just --list

# Install what a fresh machine lacks (clang-19, llvm-19, bpftool, libbpf headers, just).
setup:
    ./scripts/setup.sh

# Build every binary (nesquic and the LUT executables), release profile. The msquic adapter is
# its own workspace (quictls and BoringSSL cannot share a link); its binary lands next to the rest.
build: setup
    cargo build --release --workspace --bins
    cargo build --release --manifest-path lut-adapters/msquic/Cargo.toml --target-dir "${CARGO_TARGET_DIR:-target}"

# The main job: `just run` = nesquic run --lut quinn; extra arguments go to `nesquic run`.
run *ARGS: build
    ./target/release/nesquic run {{ARGS}}

# Formatting, clippy with warnings as errors, and docs without warnings.
lint:
    cargo fmt --all -- --check
    cargo fmt --manifest-path lut-adapters/msquic/Cargo.toml -- --check
    cargo clippy --release --workspace --all-targets -- -D warnings
    cargo clippy --release --manifest-path lut-adapters/msquic/Cargo.toml --target-dir "${CARGO_TARGET_DIR:-target}" --all-targets -- -D warnings
    RUSTDOCFLAGS="-D warnings" cargo doc --release --workspace --no-deps --quiet

# Everything CI runs: lint, then every test (real sockets, real processes; eBPF tests need root).
test: build lint
    cargo test --release --workspace

# I/O layer alone: fast paths vs one datagram per syscall; results go to docs/io-bench.md.
bench-io: setup
    cargo run --release -p nesquic-io --example io_bench -- docs/io-bench.md

# Probe cost: quinn with and without io / crypto probes, alternating; -> docs/probe-overhead.md
bench-probes: build
    #!/usr/bin/env bash
    set -euo pipefail
    bin=${CARGO_TARGET_DIR:-target}/release
    out=docs/probe-overhead.md
    cmd="nesquic run --lut quinn --size 200MB --repeat 5 --probe io,profile,crypto,crypto:time --overhead"
    duty="nesquic run --lut quinn --size 200MB --repeat 5 --probe crypto:time --duty 50ms/500ms --overhead"
    profile="nesquic run --lut quinn --size 200MB --repeat 20 --probe profile --overhead"
    table=$($bin/$cmd --json bench/probe-overhead.json | sed -n '/^probe overhead/,$p')
    dtable=$($bin/$duty --json bench/probe-overhead-duty.json | sed -n '/^probe overhead/,$p')
    ptable=$($bin/$profile --json bench/probe-overhead-profile.json | sed -n '/^probe overhead/,$p')
    scratch=$(mktemp -d)
    sampler=$($bin/nesquic run --lut quinn --size 200MB --probe profile --out "$scratch/run" | grep 'sampler cost')
    rm -rf "$scratch"
    { echo "# Probe overhead"; echo; echo "Produced by \`just bench-probes\` on $(uname -sr), $(nproc) CPUs, $(date -u +%F)."; \
      echo "Raw figures: bench/probe-overhead.json, bench/probe-overhead-duty.json, bench/probe-overhead-profile.json."; echo; \
      echo "\`$cmd\`"; echo; echo '```'; echo "$table"; echo '```'; echo; \
      echo "Timed crypto probes duty-cycled (counting 50 ms of every 500 ms): \`$duty\`"; echo; \
      echo '```'; echo "$dtable"; echo '```'; echo; \
      echo "The sampling profile alone, 20 rounds (its cost is near this VM's round-to-round noise): \`$profile\`"; echo; \
      echo '```'; echo "$ptable"; echo '```'; echo; \
      echo "Its program's own cost, timed by the kernel (BPF_ENABLE_STATS) in one 200 MB run:"; echo; \
      echo '```'; echo "$sampler"; echo '```'; } > "$out"
    cat "$out"

# LUTs and I/O paths side by side (quinn native vs quinn-proto on Nesquic I/O vs plain, quiche,
# msquic; 25 MB, 200 MB, 1 GB), alternating rounds, syscalls from the eBPF probes; -> bench/luts.md
bench-luts: build
    ./scripts/bench-luts.sh

# Does the eBPF sampling profile agree with `perf record` on the same run? -> bench/perf-agreement.md
bench-perf: build
    ./scripts/perf-agreement.sh

# Every benchmark.
bench: bench-io bench-probes bench-luts bench-perf
