#!/usr/bin/env bash
# Builds CPython with frame pointers, once per machine and user, for the aioquic LUT's venv
# (build.sh uses it by default; NESQUIC_AIOQUIC_FP_PYTHON=0 there opts out). Why: the sampling
# profile walks stacks by frame pointers. CPython 3.12+ names Python functions for perf (`perf
# trampolines`, /tmp/perf-PID.map), but a CPython built without frame pointers (pyenv's, Debian's)
# loses the walk inside `_PyEval_EvalFrameDefault`: measured, 0.8% of aioquic's client samples
# carried a Python frame (3.12.1, perf record -g); with this build, 77%.
# Where: ${XDG_CACHE_HOME:-$HOME/.cache}/nesquic/cpython-fp-<version>-<hash of the configure
# flags>, not the cargo target dir, so a fresh clone or target dir (CI) reuses it. Built in a
# temporary directory next to it and renamed into place (a half-built interpreter is never used);
# a lock (flock) makes a second concurrent build wait for the first and reuse its result. The
# build's log is kept when it fails.
# The source is Debian's python3.13 source package (the only CPython source reachable through a
# package registry here), fetched with apt-get into a private apt state in the temporary directory
# (no change to the system's apt sources). Needs deb-src access to deb.debian.org, Debian's archive
# keyring, a C compiler, make and the headers of OpenSSL, zlib and libffi (scripts/setup.sh
# installs them). ~6-12 min on 2 cores, once.
# Prints the interpreter's path on stdout (nothing else goes there). `--print`: the path if it is
# built already, nothing otherwise (never builds).
set -euo pipefail

# shellcheck source=../release-dir.sh
. "$(dirname "$0")/../release-dir.sh"

suite="${NESQUIC_CPYTHON_SUITE:-trixie}"
package="${NESQUIC_CPYTHON_PACKAGE:-python3.13}"
series="${package#python}"
# -O3 as CPython's default, frame pointers in every function (leaves too), no PGO/LTO (minutes).
configure=("CFLAGS=-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer")
key="$(printf '%s\n' "${configure[@]}" | sha256sum | cut -c1-12)"
cache="${XDG_CACHE_HOME:-${HOME:?neither XDG_CACHE_HOME nor HOME is set}/.cache}/nesquic"

usable() {
    "$1/bin/python3" -c 'import sys, zlib, ssl, venv, ensurepip
sys.exit(not hasattr(sys, "activate_stack_trampoline"))' >/dev/null 2>&1
}

# The newest usable build of this series with these flags.
built() {
    local dir
    while IFS= read -r dir; do
        usable "$dir" && { echo "$dir/bin/python3"; return 0; }
    done < <(compgen -G "$cache/cpython-fp-$series.*-$key" | sort -rV)
    return 1
}

if [ "${1:-}" = "--print" ]; then
    built || true
    exit 0
fi
built && exit 0

mkdir -p "$cache"
exec 9>"$cache/cpython-fp.lock"
if ! flock -n 9; then
    echo "build: waiting for another build of the frame-pointer CPython ($cache/cpython-fp.lock)" >&2
    flock 9
fi
# The build that held the lock may have finished this one.
built && exit 0

log="$cache/cpython-fp-$series-$key.log"
# With the lock held no other build runs: a staging directory left here is a killed build's.
rm -rf "$cache"/.cpython-fp-build.*
work="$(mktemp -d "$cache/.cpython-fp-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# An interpreter this script built into the cargo target dir before it used the cache (same
# series and flags) is copied, not rebuilt: CPython finds its prefix from its executable's place.
old="$release/cpython-fp"
if usable "$old" && "$old/bin/python3" - "${configure[@]}" <<'PY'; then
import shlex, sys, sysconfig
args = shlex.split(sysconfig.get_config_var("CONFIG_ARGS") or "")
sys.exit(not (args[:1] == [f"--prefix={sys.prefix}"] and args[1:] == sys.argv[1:]))
PY
    version="$("$old/bin/python3" -c 'import platform; print(platform.python_version())')"
    case "$version" in
        "$series".*)
            dest="$cache/cpython-fp-$version-$key"
            cp -a "$old" "$work/copy" && mv "$work/copy" "$dest" && usable "$dest" && {
                echo "build: the frame-pointer CPython $version in $old copied to $dest (built once per machine from now on)" >&2
                echo "$dest/bin/python3"
                exit 0
            }
            rm -rf "$dest"
            ;;
    esac
fi
fail() {
    echo "build: error: frame-pointer CPython: $1 (log: $log)" >&2
    exit 1
}
: >"$log"

# A build that cannot work fails in seconds, not after ten minutes.
for tool in cc make apt-get tar; do
    command -v "$tool" >/dev/null 2>&1 || fail "$tool not found"
done
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -e "$keyring" ] || fail "$keyring not found (package debian-archive-keyring; scripts/setup.sh installs it)"
printf '#include <openssl/ssl.h>\n#include <zlib.h>\n#include <ffi.h>\n' | cc -E -x c - >/dev/null 2>>"$log" ||
    fail "CPython's build dependencies are missing: the headers of libssl-dev, zlib1g-dev, libffi-dev (scripts/setup.sh installs them)"

mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/src"
echo "deb-src [signed-by=$keyring] http://deb.debian.org/debian $suite main" >"$work/apt/sources.list"
apt=(apt-get -q -o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache")
"${apt[@]}" update >>"$log" 2>&1 || fail "apt-get update of Debian $suite's source index failed (no access to deb.debian.org?)"
(cd "$work" && "${apt[@]}" source --download-only "$package" >>"$log" 2>&1) ||
    fail "downloading Debian $suite's $package source package failed"
orig="$(compgen -G "$work/${package}_*.orig.tar.xz" | head -n 1)" || fail "no ${package}_*.orig.tar.xz downloaded"
version="$(basename "$orig" .orig.tar.xz)"
version="${version#"${package}"_}"
case "$version" in "$series".*) ;; *) fail "$orig is not CPython $series.x" ;; esac
dest="$cache/cpython-fp-$version-$key"

echo "build: building CPython $version with frame pointers for aioquic's profile: once per machine, ~10 min; log: $log" >&2
start=$SECONDS
tar -xf "$orig" -C "$work/src" --strip-components=1 >>"$log" 2>&1 || fail "unpacking $orig failed"
cd "$work/src"
./configure --prefix="$dest" "${configure[@]}" >>"$log" 2>&1 || fail "configure failed"
make -j"$(nproc)" >>"$log" 2>&1 || fail "make failed"
# Installed under a staging root with the final prefix compiled in, then renamed into place.
make install DESTDIR="$work/root" >>"$log" 2>&1 || fail "make install failed"
cd /
usable "$work/root$dest" || fail "the built interpreter lacks ssl, zlib, venv or perf trampolines"
rm -rf "$dest"
mv "$work/root$dest" "$dest"
rm -f "$log"
echo "build: CPython $version with frame pointers built in $((SECONDS - start)) s: $dest" >&2
echo "$dest/bin/python3"
