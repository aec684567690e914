#!/usr/bin/env bash
# Builds CPython with frame pointers into the cargo target dir ($release/cpython-fp), for the
# aioquic LUT's venv (build.sh uses it when it exists). Why: the sampling profile walks stacks by
# frame pointers. CPython 3.12+ names Python functions for perf (`perf trampolines`,
# /tmp/perf-PID.map), but a CPython built without frame pointers (pyenv's, Debian's) loses the
# walk inside `_PyEval_EvalFrameDefault`: measured, 0.8% of aioquic's client samples carried a
# Python frame (3.12.1, perf record -g); with this build, 77%.
# The source is Debian's python3.13 source package (the only CPython source reachable through a
# package registry here), fetched with apt-get into a private apt state under the build dir
# (no change to the system's apt sources). Needs deb-src access to deb.debian.org, gcc, make and
# CPython's build dependencies (the ones pyenv needs: libssl-dev, zlib1g-dev, libffi-dev, ...).
# ~6-12 min on 2 cores, once. `build-python-fp.sh --print`: the interpreter's path if built.
set -euo pipefail

# shellcheck source=../release-dir.sh
. "$(dirname "$0")/../release-dir.sh"
prefix="$release/cpython-fp"
python="$prefix/bin/python3"
if [ "${1:-}" = "--print" ]; then
    [ -x "$python" ] && echo "$python"
    exit 0
fi
if [ -x "$python" ] && "$python" -c 'import sys; sys.exit(not hasattr(sys, "activate_stack_trampoline"))'; then
    echo "$python"
    exit 0
fi

suite="${NESQUIC_CPYTHON_SUITE:-trixie}"
package="${NESQUIC_CPYTHON_PACKAGE:-python3.13}"
work="$release/cpython-fp-build"
rm -rf "$work"
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/src"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
    >"$work/apt/sources.list"
apt=(apt-get -q -o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache")
"${apt[@]}" update >&2
(cd "$work" && "${apt[@]}" source --download-only "$package" >&2)
orig="$(ls "$work"/"${package}"_*.orig.tar.xz | head -n 1)"
tar -xf "$orig" -C "$work/src" --strip-components=1

# -O3 as CPython's default, frame pointers in every function (leaves too), no PGO/LTO (minutes).
cd "$work/src"
./configure --prefix="$prefix" CFLAGS="-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer" >"$work/configure.log" 2>&1 ||
    { tail -n 20 "$work/configure.log" >&2; exit 1; }
make -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -n 30 "$work/make.log" >&2; exit 1; }
make install >"$work/install.log" 2>&1 || { tail -n 20 "$work/install.log" >&2; exit 1; }
cd /
rm -rf "$work"
"$python" -c 'import sys, zlib, ssl; assert hasattr(sys, "activate_stack_trampoline")' >&2
echo "$python"
