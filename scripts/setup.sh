#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks, per need, and says why once per group.
#
#   setup.sh                 the main job (`just run`: nesquic, its eBPF programs, the quinn LUT):
#                            clang-19 + llvm-19 (eBPF programs), bpftool (vmlinux.h, link checks),
#                            libbpf headers, a C compiler, libc's symbols, `just`; mounts tracefs
#   setup.sh LUT...          what a LUT's build needs (quiche, tquic, s2n-quic, msquic, quic-go,
#                            aioquic, ngtcp2); scripts/build-lut.sh calls it, so `nesquic run --lut
#                            X` installs X's needs on X's first run
#   setup.sh tests           what the test suite needs besides every LUT (a headless browser, sshd,
#                            openssl, ethtool, a static busybox)
#   setup.sh kernels         the kernel matrix (`just test-kernels`, docs/kernels.md): QEMU, Debian's
#                            stock kernel image, busybox and virtme-ng (from PyPI)
#   setup.sh all             everything but kernels (`just build`, `just test`)
# `--kernels` is accepted for `kernels`. The core part is always included. Idempotent: does
# nothing when everything is present. Go is not installed here (Debian's is too old for quic-go):
# without the version lut-adapters/quic-go/go.mod names, the quic-go LUT is skipped with a warning.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
luts=(quiche tquic s2n-quic msquic quic-go aioquic ngtcp2)
parts=(core)
for arg in "$@"; do
    case "$arg" in
        all) parts+=("${luts[@]}" tests) ;;
        --kernels | kernels) parts+=(kernels) ;;
        tests | quiche | tquic | s2n-quic | msquic | quic-go | aioquic | ngtcp2) parts+=("$arg") ;;
        # Built with the core (no packages of their own).
        core | quinn | tcp-tls) ;;
        *) echo "setup: unknown part '$arg' (core, tests, kernels, all, or a LUT: ${luts[*]})" >&2; exit 2 ;;
    esac
done
wants() { printf '%s\n' "${parts[@]}" | grep -qx "$1"; }

need_apt=()
reasons=()
# need WHY PACKAGE...: queue the packages, and the reason said once for them.
need() {
    local why=$1
    shift
    local new=()
    for pkg in "$@"; do
        printf '%s\n' "${need_apt[@]}" | grep -qx "$pkg" || new+=("$pkg")
    done
    [ ${#new[@]} -gt 0 ] || return 0
    need_apt+=("${new[@]}")
    reasons+=("${new[*]}: $why")
}
has_cmd() { command -v "$1" >/dev/null 2>&1; }
has_pkg() { dpkg -s "$1" >/dev/null 2>&1; }

# The main job.
has_cmd clang-19 || need "the eBPF programs are C compiled by clang" clang-19 llvm-19
has_cmd bpftool || need "vmlinux.h for the eBPF programs" bpftool
[ -e /usr/include/bpf/bpf_helpers.h ] || need "the eBPF programs' helper headers" libbpf-dev
has_cmd cc || need "a C compiler for crates with C parts (ring)" build-essential
has_cmd pkg-config || need "finding C libraries" pkg-config
# Debian ships libc stripped and puts its symbols (its memcpy variants) in a build-id debug file.
has_pkg libc6-dbg || need "libc's function names in the profile" libc6-dbg

# BoringSSL (quiche, tquic) and aws-lc (s2n-quic) build from source with cmake; bindgen needs libclang.
boringssl_tools() {
    has_cmd cmake || need "$1" cmake
    has_cmd c++ || need "$1" g++
    ls /usr/lib/llvm-19/lib/libclang*.so* >/dev/null 2>&1 || need "$1" libclang1-19
}
wants quiche && boringssl_tools "the quiche LUT builds BoringSSL from source"
wants tquic && boringssl_tools "the tquic LUT builds its vendored BoringSSL"
wants s2n-quic && boringssl_tools "the s2n-quic LUT builds aws-lc"
if wants msquic; then
    boringssl_tools "the msquic LUT builds MsQuic and quictls"
    # MsQuic is linked statically, which pulls in libnuma whole.
    compgen -G '/usr/lib/*/libnuma.a' >/dev/null || [ -e /usr/lib/libnuma.a ] || need "MsQuic links libnuma statically" libnuma-dev
fi
if wants aioquic; then
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need "the aioquic LUT is a venv of PyPI wheels" python3-venv
    # Its CPython with frame pointers (lut-adapters/aioquic/build-python-fp.sh), built from Debian's
    # source package: headers for its ssl, zlib and ctypes modules, xz to unpack, the keyring to verify.
    for pkg in libssl-dev zlib1g-dev libffi-dev xz-utils debian-archive-keyring; do
        has_pkg "$pkg" || need "the aioquic LUT's CPython with frame pointers, built from Debian's source" "$pkg"
    done
fi
if wants ngtcp2; then
    pkg-config --exists libngtcp2_crypto_gnutls 2>/dev/null ||
        need "the ngtcp2 LUT links Debian's ngtcp2" libngtcp2-dev libngtcp2-crypto-gnutls-dev
    pkg-config --exists gnutls 2>/dev/null || need "the ngtcp2 LUT's TLS" libgnutls28-dev
    # pinned-source.sh unpacks Debian's ngtcp2 source; symbols.sh rebuilds ngtcp2 and GnuTLS with
    # symbols (Debian strips them), running autoreconf as debian/rules does.
    has_cmd dpkg-source || need "the ngtcp2 LUT unpacks Debian's ngtcp2 source" dpkg-dev
    for tool in autoreconf:autoconf automake:automake libtoolize:libtool autopoint:autopoint; do
        has_cmd "${tool%%:*}" || need "the ngtcp2 LUT rebuilds ngtcp2 and GnuTLS with symbols" "${tool#*:}"
    done
fi
if wants tests; then
    has_cmd chromium || need "the HTML report's tests load each page in a headless browser" chromium
    has_cmd openssl || need "tests make a certificate the client must not trust" openssl
    [ -x /usr/sbin/sshd ] || need "the remote-role tests start sshd in a namespace" openssh-server
    has_cmd ethtool || need "the remote-role tests read each host's NIC offloads" ethtool
    has_cmd busybox || need "a test traces a statically linked program" busybox-static
fi
if wants kernels; then
    has_cmd qemu-system-x86_64 || need "the kernel matrix boots other kernels in QEMU" qemu-system-x86
    compgen -G '/boot/vmlinuz-6.1.*-amd64' >/dev/null || need "the kernel matrix's Debian 12 kernel" linux-image-amd64
    has_cmd busybox || need "the kernel matrix's guest userland" busybox-static
fi

if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: need root to install: ${need_apt[*]} (run: sudo $0 $*)" >&2
        exit 1
    fi
    for reason in "${reasons[@]}"; do echo "setup: installing $reason"; done
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
    # openssh-server's postinst enables a system sshd on port 22: the tests start their own.
    if printf '%s\n' "${need_apt[@]}" | grep -qx openssh-server; then
        systemctl disable --now ssh >/dev/null 2>&1 || true
    fi
fi

if ! has_cmd cargo; then
    echo "setup: cargo not found; install Rust (https://rustup.rs) first" >&2
    exit 1
fi

if ! has_cmd just; then
    echo "setup: installing just from crates.io (the recipes)"
    cargo install just --locked --quiet
fi

if wants kernels && ! has_cmd vng; then
    echo "setup: installing virtme-ng from PyPI (boots the kernel matrix's kernels)"
    pip install --quiet virtme-ng
fi

# The quic-go LUT needs the Go version its go.mod names (Debian 12's 1.19 is too old).
if wants quic-go; then
    go_need="$(sed -n 's/^go \([0-9][0-9.]*\).*/\1/p' "$root/lut-adapters/quic-go/go.mod")"
    go_have="$(has_cmd go && go env GOVERSION | sed 's/^go//' || true)"
    if [ -z "$go_have" ] || [ "$(printf '%s\n%s\n' "$go_need" "$go_have" | sort -V | head -n1)" != "$go_need" ]; then
        echo "setup: warning: Go >= $go_need not found (have: ${go_have:-none}); the quic-go LUT will not be built (https://go.dev/dl/)" >&2
    fi
fi

# The s2n-quic LUT needs the Rust its Cargo.toml names (s2n-quic 1.91 needs 1.95).
if wants s2n-quic; then
    rust_need="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$root/lut-adapters/s2n-quic/Cargo.toml" | head -n1)"
    rust_have="$(rustc --version | awk '{print $2}')"
    if [ "$(printf '%s\n%s\n' "$rust_need" "$rust_have" | sort -V | head -n1)" != "$rust_need" ]; then
        echo "setup: warning: rustc $rust_have is older than $rust_need; the s2n-quic LUT will not be built (rustup update)" >&2
    fi
fi

# tracefs is needed by tracepoint probes; a fresh boot may not have it mounted.
if [ "$(id -u)" -eq 0 ] && [ ! -e /sys/kernel/tracing/events ]; then
    mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null ||
        echo "setup: warning: could not mount tracefs at /sys/kernel/tracing" >&2
fi
[ $# -gt 0 ] || echo "setup: ok (the main job; other LUTs install their needs on their first build, \`just test\` the tests')"
