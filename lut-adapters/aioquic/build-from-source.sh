#!/usr/bin/env bash
# build-from-source.sh --lut-path CHECKOUT --out DIR: builds nesquic-lut-aioquic (the same
# executable and command line as build.sh's) against an aioquic checkout instead of the wheel
# requirements.txt pins, into DIR, and prints one JSON line on stdout (see ../source-build.sh).
#
# How: a virtual environment of its own, DIR/venv, gets the wheels requirements.txt pins (all but
# aioquic); then the checkout, copied to DIR/src (pip builds in the source tree, and the checkout
# is never written to), is installed there with `pip install` (its C extension compiled here).
# DIR/nesquic-lut-aioquic is a `#!DIR/venv/bin/python3` script running the adapter, as build.sh's.
# What it proves, or exits non-zero naming the mismatch, with the venv's own interpreter:
#   - `import aioquic` and its C extension `aioquic._buffer` resolve inside DIR/venv;
#   - the installed distribution was installed from the copy (its direct_url.json names DIR/src),
#     and that copy, C extension source included, equals the checkout (diff -r);
#   - every .py file of the checkout's aioquic package is byte-identical (sha256) to the installed
#     one, and the installed package has no .py file the checkout lacks.
# Cached in DIR (see ../source-build.sh): a second call with nothing changed only re-runs the proof.
set -euo pipefail

lut=aioquic
# shellcheck source=../source-build.sh
. "$(dirname "$0")/../source-build.sh"
# shellcheck source=launcher.sh
. "$(dirname "$0")/launcher.sh"
parse_args "$@"

# The interpreter build.sh chooses: the frame-pointer CPython when it is built (never built here),
# so the profile names Python functions in a source build too; else python3.
interp="${NESQUIC_AIOQUIC_PYTHON:-}"
[ -n "$interp" ] || [ "${NESQUIC_AIOQUIC_FP_PYTHON:-1}" = 0 ] || interp="$("$here/build-python-fp.sh" --print)"
interp="${interp:-python3}"
command -v "$interp" >/dev/null 2>&1 || die "$interp not found (scripts/setup.sh installs python3)"
"$interp" -c 'import venv, ensurepip' 2>/dev/null || die "$interp has no venv/ensurepip module (apt-get install python3-venv)"

# The package directory: src/aioquic (aioquic >= 1.0) or aioquic/ (older layouts).
if [ -f "$source/src/aioquic/__init__.py" ]; then
    package="src/aioquic"
elif [ -f "$source/aioquic/__init__.py" ]; then
    package="aioquic"
else
    die "$source has neither src/aioquic/__init__.py nor aioquic/__init__.py: not an aioquic checkout"
fi
[ -f "$source/pyproject.toml" ] || [ -f "$source/setup.py" ] || die "$source has no pyproject.toml or setup.py: pip cannot install it"

checkout_state
binary="$out/nesquic-lut-aioquic"
venv="$out/venv"
python="$venv/bin/python3"
src="$out/src"
[ ${#python} -lt 250 ] || die "the venv path is too long for a #! line ($python): use a shorter --out"
key="$(build_key "$here/requirements.txt" "$here"/nesquic_aioquic/*.py "$0" <(command -v "$interp"))"
pip=("$python" -m pip --disable-pip-version-check --no-input)
# Not the checkout's code, so not copied (and not compared): git's data, earlier builds' leftovers
# (build/, *.egg-info, which pip writes into the copy), caches and virtual environments.
skip=(--exclude=.git --exclude=build --exclude='*.egg-info' --exclude=__pycache__ --exclude=.tox --exclude=.venv
    --exclude=.mypy_cache)

if cached; then
    say "up to date: $binary ($source at $revision)"
else
    # A failed build must not leave the previous executable behind to be run by mistake.
    rm -f "$out/.build-key" "$binary" "$binary.dlopen"
    # The venv with the pinned dependencies survives checkout changes (only aioquic is reinstalled).
    deps="$venv/.requirements"
    want="$(grep -v '^aioquic==' "$here/requirements.txt"; echo "# python: $(command -v "$interp")")"
    if [ "$want" != "$(cat "$deps" 2>/dev/null)" ]; then
        rm -rf "$venv"
        step "create $venv" "$out/venv.log" "$interp" -m venv "$venv"
        step "install the pinned dependencies (requirements.txt, wheels from PyPI)" "$out/deps.log" \
            "${pip[@]}" install --only-binary=:all: -r <(grep -v '^aioquic==' "$here/requirements.txt")
        echo "$want" >"$deps"
    fi
    rm -rf "$src" && mkdir -p "$src"
    tar -C "$source" "${skip[@]}" -cf - . | tar -C "$src" -xf -
    # --force-reinstall --no-deps: aioquic itself, always from this copy, even at the same version;
    # then its own dependencies (the checkout may need others than the pinned ones: from PyPI).
    step "pip install $source (copied to $src; compiles the C extension)" "$out/build.log" \
        "${pip[@]}" install --no-cache-dir --force-reinstall --no-deps "$src"
    "$python" -c 'from importlib.metadata import requires
print("\n".join(r for r in requires("aioquic") or [] if "extra ==" not in r))' >"$out/checkout-requirements.txt"
    step "install what the checkout requires that the pinned wheels do not satisfy" "$out/checkout-deps.log" \
        "${pip[@]}" install -r "$out/checkout-requirements.txt"

    # The executable as build.sh writes it (perf trampolines on a frame-pointer interpreter).
    write_launcher "$binary" "$python" "$here" \
        "Generated by lut-adapters/aioquic/build-from-source.sh: the adapter with aioquic built from $source."
    # The objects Python will dlopen, for the probes (canonical paths), as build.sh writes them.
    "$python" - >"$binary.dlopen" <<'PY'
import os, importlib.util
for module in ("cryptography.hazmat.bindings._rust", "aioquic._buffer"):
    print(os.path.realpath(importlib.util.find_spec(module).origin))
PY
    mark_built
fi

# The proof, run by the interpreter the executable's #! line names. Prints the version, then
# the number of files compared; exits 1 with the mismatch otherwise.
[ "$(head -n1 "$binary")" = "#!$python" ] || die "$binary does not run $python"
proof="$(cd / && "$python" - "$venv" "$src" "$source/$package" <<'PY'
import hashlib, json, os, sys
from importlib import metadata

venv, src, package = (os.path.realpath(p) for p in sys.argv[1:])

def fail(msg):
    print(f"build-from-source(aioquic): error: {msg}", file=sys.stderr)
    sys.exit(1)

def inside(path, root):
    return os.path.commonpath([os.path.realpath(path), root]) == root

import aioquic, aioquic._buffer
for module in (aioquic, aioquic._buffer):
    if not inside(module.__file__, venv):
        fail(f"{module.__name__} resolves to {module.__file__}, outside {venv}")
dist = metadata.distribution("aioquic")
url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
if url != "file://" + src:
    fail(f"the installed aioquic came from '{url or 'an index (no direct_url.json)'}', not file://{src}")

def sources(root):
    found = {}
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(d, f)
                found[os.path.relpath(p, root)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return found

installed, checkout = sources(os.path.dirname(aioquic.__file__)), sources(package)
for rel in sorted(set(installed) | set(checkout)):
    if installed.get(rel) != checkout.get(rel):
        what = "missing from the checkout" if rel not in checkout else "not installed" if rel not in installed else "different"
        fail(f"aioquic/{rel}: the installed file and the checkout's {package}/{rel} differ ({what})")
print(dist.version)
print(len(checkout))
PY
)" || die "the installed aioquic is not the checkout's (above)"
# The copy pip built from, including the C extension's source, is the checkout as it is now.
changed="$(diff -rq "${skip[@]}" "$source" "$src" 2>&1)" \
    || die "$src (what pip built) differs from the checkout $source: $(head -n3 <<<"$changed")"
version="$(sed -n 1p <<<"$proof")"
files="$(sed -n 2p <<<"$proof")"
say "ready: $binary from $source ($version, $revision$([ "$dirty" = true ] && echo ", dirty"))"
emit "$version" "aioquic and aioquic._buffer import from $venv; direct_url.json: file://$src, identical to $source (diff -r); $files .py files installed identical to $source/$package"
