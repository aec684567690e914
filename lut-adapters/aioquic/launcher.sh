# shellcheck shell=bash
# Sourced by build.sh and build-from-source.sh: writes the aioquic LUT's executable, a `#!`
# script whose interpreter is a venv's Python (the kernel starts Python itself: same pid, the
# probe agent's LD_PRELOAD kept).
# write_launcher EXE PYTHON ADAPTER_DIR WHAT: EXE runs the adapter in ADAPTER_DIR on PYTHON;
# WHAT (one line) goes in its header comment. With a frame-pointer CPython 3.12+ it turns on
# perf trampolines while Nesquic samples (NESQUIC_PROFILING), so the profile names Python
# functions (/tmp/perf-PID.map); elsewhere they cost (every Python call goes through the C
# evaluator) and name nothing.
write_launcher() {
    local exe=$1 python=$2 adapter=$3 what=$4 trampolines tmp
    trampolines="$("$python" -c 'import sys, sysconfig
fp = "-fno-omit-frame-pointer" in (sysconfig.get_config_var("CFLAGS") or "")
print(hasattr(sys, "activate_stack_trampoline") and fp)')"
    tmp="$(mktemp "$exe.XXXXXX")"
    cat >"$tmp" <<SCRIPT
#!$python
# $what
import os, sys
if $trampolines and os.environ.get("NESQUIC_PROFILING"):
    # One line per Python function in /tmp/perf-PID.map, for the profile's stack names (only
    # while Nesquic samples: they cost ~8% of the CPU). A map left by an earlier process with
    # this pid would be appended to: start afresh.
    try:
        os.unlink(f"/tmp/perf-{os.getpid()}.map")
    except FileNotFoundError:
        pass
    sys.activate_stack_trampoline("perf")
sys.path.insert(0, "$adapter")
from nesquic_aioquic.main import main
sys.exit(main(sys.argv[1:]))
SCRIPT
    chmod 755 "$tmp"
    mv "$tmp" "$exe"
}
