#!/usr/bin/env bash
# The kernel matrix (`just test-kernels`, docs/kernels.md): the eBPF + link test subset on this
# machine's kernel natively, then inside QEMU on every stock kernel image in /boot other than the
# running one (Debian 12's 6.1 after `./scripts/setup.sh --kernels`). The guest boots this
# machine's root filesystem (virtme-ng), so it runs the test executables built here: nothing is
# rebuilt inside. TCG only (KVM guests hang at boot here): ~50x slower, functional checks only.
#
# Stock distribution kernels have kprobes, fentry and netem: the guest's tests require them
# (NESQUIC_EXPECT_CAPS), so a detection that silently degrades fails instead of skipping.
#
# Environment: NESQUIC_VM_TIMEOUT (s, per guest, default 1500), NESQUIC_KERNELS (glob of kernel
# images, default /boot/vmlinuz-*).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=${CARGO_TARGET_DIR:-$root/target}
case "$target" in /*) ;; *) target=$root/$target ;; esac

./scripts/setup.sh --kernels
export PATH="$HOME/.cargo/bin:$HOME/.pyenv/shims:$PATH"

# The test executables (built once, here).
exe() {
    cargo test --release -p nesquic-cli --test "$1" --no-run --message-format=json 2>/dev/null |
        grep "\"kind\":\[\"test\"\].*\"name\":\"$1\"" | grep '"executable":"/' |
        sed 's/.*"executable":"\([^"]*\)".*/\1/' | tail -n 1
}
cargo build --release --workspace --bins --quiet
kernels_test=$(exe kernels)
[ -x "$kernels_test" ] || { echo "test-kernels: test executables not found" >&2; exit 1; }
mkdir -p "$target/tmp"
# The guest's scratch space, handed to the tests as TMPDIR: on the host filesystem, which reaches
# the guest over 9p, where mmap(MAP_SHARED) of a file fails with EINVAL. On purpose: the agent's
# plan and counters are memfds, so probed runs must work with TMPDIR there (issue 32, item 10;
# a tmpfs used to be mounted here to hide the failure).
guest_tmp=$target/tmp/guest-tmp
mkdir -p "$guest_tmp"

# The subset, tests/kernels.rs: doctor, the workload's exact syscall + uprobe counts with the kernel
# UDP-path rows, quinn 2 MB with io+crypto, veth with loss + delay (netem where present).
subset="$kernels_test --test-threads=1"
results=$target/tmp/kernels
rm -rf "$results" && mkdir -p "$results"

echo "== $(uname -r) (native)"
start=$(date +%s)
NESQUIC_DOCTOR_OUT="$results/doctor-native.json" bash -c "$subset"
echo "== $(uname -r): passed in $(( $(date +%s) - start )) s"

running=$(uname -r)
found=0
for image in ${NESQUIC_KERNELS:-/boot/vmlinuz-*}; do
    release=${image#*/vmlinuz-}
    [ "$release" = "$running" ] && continue
    found=$((found + 1))
    echo "== $release (QEMU, TCG)"
    start=$(date +%s)
    # A guest that hangs is a failure, not a stuck CI: timeout kills QEMU.
    timeout "${NESQUIC_VM_TIMEOUT:-1500}" vng -r "$image" --user root --disable-kvm --cpus 2 --memory 4G \
        --rwdir "$target/tmp" -- \
        "cd '$root' && TMPDIR='$guest_tmp' NESQUIC_EXPECT_CAPS=kprobes,fentry,netem,tick NESQUIC_DOCTOR_OUT='$results/doctor-$release.json' bash -c '$subset'" \
        2>&1 | tee "$results/$release.log"
    status=${PIPESTATUS[0]}
    # vng passes the guest command's status through; the log's last verdict double-checks it.
    if [ "$status" -ne 0 ] || ! grep -q "^test result: ok" "$results/$release.log"; then
        echo "test-kernels: $release failed (status $status), log in $results/$release.log" >&2
        exit 1
    fi
    echo "== $release: passed in $(( $(date +%s) - start )) s (boot included)"
    # Different kernels must not look alike to doctor (it measures, it does not assume).
    same=$(python3 -c 'import json,sys; c=[json.load(open(f))["capabilities"] for f in sys.argv[1:]]; print(c[0]==c[1])' \
        "$results/doctor-native.json" "$results/doctor-$release.json")
    if [ "$same" != "False" ]; then
        echo "test-kernels: doctor reports the same capabilities on $running and $release" >&2
        exit 1
    fi
done
if [ "$found" -eq 0 ]; then
    echo "test-kernels: no other kernel image in ${NESQUIC_KERNELS:-/boot/vmlinuz-*}: run ./scripts/setup.sh --kernels" >&2
    exit 1
fi
echo "test-kernels: ok ($((found + 1)) kernels)"
