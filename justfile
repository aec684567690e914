# Nesquic recipes. CI calls the same ones (`.ci/run` -> `just test`).
# On a fresh machine run `./scripts/setup.sh` once first (it installs `just` itself).

set shell := ["bash", "-euo", "pipefail", "-c"]

# Show the recipes.
default:
    @just --list

# Install what a fresh machine lacks, per need: no PARTS = the main job (clang-19, llvm-19,
# bpftool, libbpf headers, just); a LUT's name, `tests`, `kernels` or `all` (scripts/setup.sh).
setup *PARTS:
    ./scripts/setup.sh {{PARTS}}

# Build every binary (nesquic and the LUT executables), release profile, each through
# scripts/build-lut.sh (the one place that says how a LUT is built). The msquic adapter is its own
# workspace (quictls and BoringSSL cannot share a link); its binary lands next to the rest, as do
# s2n-quic's and tquic's (own workspaces; skipped with a warning where Rust is older than they
# need or cmake is missing), the quic-go LUT (a Go program; skipped with a warning where Go is
# missing or too old), the aioquic LUT (a Python venv from PyPI, on a CPython with frame pointers
# built once per machine into ~/.cache/nesquic: ~7-12 min the first time) and the ngtcp2 LUT (C against
# Debian's packages), each skipped with a warning where its toolchain or packages are missing.
build: (setup "all")
    cargo build --release --workspace --bins
    cargo build --release -p nesquic-agent
    for lut in msquic s2n-quic tquic quic-go aioquic ngtcp2; do ./scripts/build-lut.sh "$lut"; done

# What the main job needs first: nesquic, the agent, the quinn and TCP+TLS executables. Any other
# LUT is built the first time a run asks for it (nesquic-cli/engine/src/on_demand.rs).
build-core: setup
    ./scripts/build-lut.sh core

# The main job: `just run` = nesquic run --lut quinn --size 3GB: enough CPU time for the default
# profile (the scheduler tick, 250 Hz here) to take ~700-800 samples a side (measured: 800 server,
# 692 client; the largest component 36.8% [33.5-40.1]); arguments given replace those and go to `nesquic run`.
# Only nesquic and quinn are built up front; another --lut is built on its first run, once.
run *ARGS: build-core
    "${CARGO_TARGET_DIR:-target}/release/nesquic" run {{ if ARGS == "" { "--size 3GB" } else { ARGS } }}

# Formatting, clippy with warnings as errors, docs without warnings, and no module cycle inside
# any crate (scripts/module-cycles.py; docs/architecture.md).
lint:
    python3 scripts/module-cycles.py
    cargo fmt --all -- --check
    cargo fmt --manifest-path lut-adapters/msquic/Cargo.toml -- --check
    cargo clippy --release --workspace --all-targets -- -D warnings
    cargo clippy --release --manifest-path lut-adapters/msquic/Cargo.toml --target-dir "${CARGO_TARGET_DIR:-target}" --all-targets -- -D warnings
    ./scripts/build-own-workspace.sh --lint lut-adapters/s2n-quic
    ./scripts/build-own-workspace.sh --lint lut-adapters/tquic
    RUSTDOCFLAGS="-D warnings" cargo doc --release --workspace --no-deps --quiet
    ./lut-adapters/quic-go/build.sh --lint
    ./lut-adapters/aioquic/build.sh --lint
    ./lut-adapters/ngtcp2/build.sh --lint

# Everything CI runs: lint, then every test (real sockets, real processes; eBPF tests need root),
# then the eBPF + link subset again on Debian 12's kernel in QEMU (test-kernels).
test: build lint
    cargo test --release --workspace
    ./scripts/build-own-workspace.sh --test lut-adapters/s2n-quic
    ./scripts/test-kernels.sh

# Payload harness: generator/verifier speed vs memcpy/memcmp, and each LUT's goodput, CPU and
# harness share before vs after a change (BEFORE=<lut dir of the old build>); -> bench/harness*.md
bench-harness *BEFORE: build
    ./scripts/bench-harness.sh {{BEFORE}}

# I/O layer alone: fast paths vs one datagram per syscall; results go to docs/io-bench.md.
bench-io: setup
    cargo run --release -p nesquic-io --example io_bench -- docs/io-bench.md

# Probe cost: each LUT without and with io / crypto / timed crypto probes (user-space agent), quinn
# on the kernel backend, duty cycles and the profile; alternating rounds -> docs/probe-overhead.md
bench-probes: build
    ./scripts/bench-probes.sh

# Every stack side by side (25 MB, 1 GB; TCP+TLS as the reference row; crypto per packet) and the
# I/O paths (quinn native vs quinn-proto on Nesquic I/O vs plain, quiche), alternating rounds,
# syscalls from the probes; -> bench/luts.md (PART=stacks: only the every-stack tables ->
# bench/luts-stacks.md)
bench-luts PART="all": build
    ./scripts/bench-luts.sh {{PART}}

# What `nesquic run`'s default probes (profile, io, crypto) cost quinn, quiche and msquic end to
# end: paired alternating rounds (a 2% cost needs 150-300 on this VM), on a quiet machine; the set
# as one -> bench/default-probes.md, PARTS=each: each probe too -> bench/default-probes-parts.md
bench-default-probes ROUNDS="300" PARTS="whole": build
    ./scripts/bench-default-probes.sh {{ROUNDS}} {{PARTS}}

# Do calibrated timed crypto probes agree with the unprobed sampling profile? -> bench/crypto-agreement.md
bench-crypto: build
    ./scripts/crypto-agreement.sh

# What one sample costs apart from any LUT: a fixed UDP loop under perf's timer alone, perf -g,
# profile:HZ and profile:tick, alternating rounds -> bench/sampler-floor.md (quiet machine)
bench-sampler-floor ROUNDS="30": build
    ./scripts/sampler-floor.sh {{ROUNDS}}

# Does the eBPF sampling profile agree with `perf record` on the same run? -> bench/perf-agreement.md
bench-perf: build
    ./scripts/perf-agreement.sh

# How much of each side's CPU the profile names, all nine LUTs at profile:999,io and 500 MB, 2 rounds (~4 min;
# LUTS, SIZE, ROUNDS override): unnamed, app, unsymbolised leaf against issue 36's goals -> bench/profile-coverage.md
bench-profile: build
    ./scripts/profile-coverage.sh

# What verifying every byte costs the clients over 3% app: stack speed / verify speed in the LUT
# -> bench/harness-floor.md
bench-harness-floor: build
    ./scripts/harness-floor.sh

# QUIC against what it replaces: TCP+TLS vs quinn, bulk 200 MB, alternating rounds
# -> bench/tcp-tls-vs-quinn.md
bench-tcp-tls ROUNDS="9": build
    ./scripts/tcp-tls-vs-quinn.sh {{ROUNDS}} > bench/tcp-tls-vs-quinn.md

# Every testcase across LUTs, alternating rounds, TCP+TLS as the reference row: multi-conn
# goodput + Jain fairness, handshakes/s + p50/p99, multi-stream goodput -> bench/testcases.md
bench-testcases ROUNDS="15": build
    ./scripts/bench-testcases.sh {{ROUNDS}}

# What frame pointers cost: the LUT executables of a build without them (OLD_LUT_DIR) against
# this build, alternating rounds -> bench/frame-pointers.md (docs/frame-pointers.md explains it)
bench-frame-pointers OLD_LUT_DIR: build
    ./scripts/bench-frame-pointers.sh {{OLD_LUT_DIR}}

# What one profile sample costs the sampled program (timer interrupt included), per rate: a busy
# chunk timed bare and profiled, alternating rounds (root) -> bench/tick-cost/results.md
bench-profile-cost: build
    ./bench/tick-cost/run.sh

# Every benchmark (bench-frame-pointers needs an old build, so it is not among them).
bench: bench-harness bench-io bench-probes bench-default-probes bench-sampler-floor bench-crypto bench-luts bench-perf bench-profile bench-harness-floor bench-profile-cost bench-tcp-tls bench-testcases

# The tests too slow for every CI run (`#[ignore]`d with the reason): `nesquic bisect` over a
# constructed 16-commit history (~6-11 min, five quinn builds).
test-slow: build
    cargo test --release -p nesquic-cli --test lut_path -- --ignored

# The eBPF + link test subset on this kernel and, in QEMU (TCG), on Debian 12's stock 6.1
# (docs/kernels.md). Installs QEMU, the kernel image and virtme-ng on first use. CI runs it.
test-kernels: build
    ./scripts/test-kernels.sh

# Screenshots of the HTML report for docs/report.md (a real quinn run with every probe; root)
# -> docs/img/report-*.png
screenshots: build
    ./scripts/screenshots.sh

# The CI gate's false alarms and sensitivity: JOBS A/A `nesquic ab` jobs of quinn (defaults, and
# with rules on CPU and goodput), +2% sends injected, 20 jobs of a real change in quinn's source
# (REAL_JOBS), GSO off; results into docs/ci.md and bench/gate.md.
bench-gate JOBS="50": build
    ./scripts/bench-gate.sh {{JOBS}}

# The CI recipe of docs/ci.md, run on a local repository (needs nesquic built; root)
ci-recipe-check:
    ./scripts/ci-recipe-check.sh

# The version matrix: per LUT, the releases its registry serves (newest first, COUNT of them) built
# with --lut-version, plus upstream checkouts (CLONES="quinn=PATH ..." built with --lut-path):
# builds or not and why, goodput, datagrams per send, seals per datagram -> bench/versions.md
bench-versions: build
    ./scripts/bench-versions.py
