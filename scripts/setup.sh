#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks to build and run Nesquic:
# clang-19 + llvm-19 (eBPF programs), bpftool (vmlinux.h, link checks), libbpf headers,
# cmake + a C++ compiler + libclang (quiche builds BoringSSL from source, bindgen needs libclang),
# libnuma-dev (MsQuic, linked statically),
# chromium (the HTML report's tests load each page in it, headless; `just screenshots` uses it),
# and `just` (not packaged in Debian 12, so it comes from crates.io). Go is not installed here
# (Debian's is too old for quic-go): without the version lut-adapters/quic-go/go.mod names, the
# quic-go LUT is skipped and setup says so.
# `--kernels` also installs the kernel matrix (`just test-kernels`, docs/kernels.md): QEMU, Debian's
# stock kernel image, busybox and virtme-ng (from PyPI).
# Idempotent: does nothing when everything is present.
set -euo pipefail

kernels=0
[ "${1:-}" = "--kernels" ] && kernels=1

need_apt=()
command -v clang-19 >/dev/null 2>&1 || need_apt+=(clang-19 llvm-19)
command -v bpftool >/dev/null 2>&1 || need_apt+=(bpftool)
[ -e /usr/include/bpf/bpf_helpers.h ] || need_apt+=(libbpf-dev)
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
# The quic-go LUT's tests make a certificate the client must not trust.
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v c++ >/dev/null 2>&1 || need_apt+=(g++)
ls /usr/lib/llvm-19/lib/libclang*.so* >/dev/null 2>&1 || need_apt+=(libclang1-19)
# The msquic LUT links MsQuic statically, which pulls in libnuma whole.
compgen -G '/usr/lib/*/libnuma.a' >/dev/null || [ -e /usr/lib/libnuma.a ] || need_apt+=(libnuma-dev)
# libc's own symbols (its memcpy variants) for the sampling profile: Debian ships libc stripped and
# puts them in a build-id debug file (nesquic-ebpf/src/profile.rs, debug_file).
dpkg -s libc6-dbg >/dev/null 2>&1 || need_apt+=(libc6-dbg)
# The HTML report is tested in a real browser (nesquic-cli/tests/html.rs), headless.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# The aioquic LUT: a venv of PyPI wheels (python3 -m venv needs Debian's python3-venv); the ngtcp2
# LUT: ngtcp2 and GnuTLS from Debian (lut-adapters/ngtcp2/build.sh).
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
# The aioquic LUT's CPython with frame pointers (lut-adapters/aioquic/build-python-fp.sh, so that
# the profile names Python functions), built from Debian's source package: the OpenSSL, zlib and
# libffi headers for its ssl, zlib and ctypes modules (pip needs the first two), xz to unpack the
# source, Debian's archive keyring to verify the source index.
for pkg in libssl-dev zlib1g-dev libffi-dev xz-utils debian-archive-keyring; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
pkg-config --exists libngtcp2_crypto_gnutls 2>/dev/null || need_apt+=(libngtcp2-dev libngtcp2-crypto-gnutls-dev)
pkg-config --exists gnutls 2>/dev/null || need_apt+=(libgnutls28-dev)
# lut-adapters/ngtcp2/pinned-source.sh unpacks Debian's ngtcp2 source with dpkg-source.
command -v dpkg-source >/dev/null 2>&1 || need_apt+=(dpkg-dev)
# lut-adapters/ngtcp2/symbols.sh rebuilds Debian's ngtcp2 and GnuTLS with symbols (Debian strips
# them): GnuTLS's Debian patches touch configure.ac, so it runs autoreconf as debian/rules does.
for tool in autoreconf:autoconf automake:automake libtoolize:libtool autopoint:autopoint; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || need_apt+=("${tool#*:}")
done
# Remote roles (docs/remote.md): the tests start Debian's sshd in a namespace; each host's NIC
# offloads are read with ethtool -k.
[ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
command -v ethtool >/dev/null 2>&1 || need_apt+=(ethtool)

if [ "$kernels" -eq 1 ]; then
    command -v qemu-system-x86_64 >/dev/null 2>&1 || need_apt+=(qemu-system-x86)
    compgen -G '/boot/vmlinuz-6.1.*-amd64' >/dev/null || need_apt+=(linux-image-amd64)
    command -v busybox >/dev/null 2>&1 || need_apt+=(busybox-static)
fi

if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: need root to install: ${need_apt[*]} (run: sudo $0)" >&2
        exit 1
    fi
    echo "setup: installing ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
    # openssh-server's postinst enables a system sshd on port 22: the tests start their own.
    if printf '%s\n' "${need_apt[@]}" | grep -qx openssh-server; then
        systemctl disable --now ssh >/dev/null 2>&1 || true
    fi
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found; install Rust (https://rustup.rs) first" >&2
    exit 1
fi

if ! command -v just >/dev/null 2>&1; then
    echo "setup: installing just from crates.io"
    cargo install just --locked --quiet
fi

if [ "$kernels" -eq 1 ] && ! command -v vng >/dev/null 2>&1; then
    echo "setup: installing virtme-ng from PyPI"
    pip install --quiet virtme-ng
fi

# The quic-go LUT needs the Go version its go.mod names (Debian 12's 1.19 is too old).
go_need="$(sed -n 's/^go \([0-9][0-9.]*\).*/\1/p' "$(dirname "$0")/../lut-adapters/quic-go/go.mod")"
go_have="$(command -v go >/dev/null 2>&1 && go env GOVERSION | sed 's/^go//' || true)"
if [ -z "$go_have" ] || [ "$(printf '%s\n%s\n' "$go_need" "$go_have" | sort -V | head -n1)" != "$go_need" ]; then
    echo "setup: warning: Go >= $go_need not found (have: ${go_have:-none}); the quic-go LUT will not be built (https://go.dev/dl/)" >&2
fi

# The s2n-quic LUT needs the Rust its Cargo.toml names (s2n-quic 1.91 needs 1.95).
rust_need="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$(dirname "$0")/../lut-adapters/s2n-quic/Cargo.toml" | head -n1)"
rust_have="$(rustc --version | awk '{print $2}')"
if [ "$(printf '%s\n%s\n' "$rust_need" "$rust_have" | sort -V | head -n1)" != "$rust_need" ]; then
    echo "setup: warning: rustc $rust_have is older than $rust_need; the s2n-quic LUT will not be built (rustup update)" >&2
fi

# tracefs is needed by tracepoint probes; a fresh boot may not have it mounted.
if [ "$(id -u)" -eq 0 ] && [ ! -e /sys/kernel/tracing/events ]; then
    mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || \
        echo "setup: warning: could not mount tracefs at /sys/kernel/tracing" >&2
fi
echo "setup: ok"
