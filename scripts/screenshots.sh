#!/usr/bin/env bash
# Screenshots of the HTML report for docs/report.md, from a real run: quinn, 50 MB, 3 repetitions,
# every probe (root: eBPF). Headless Chromium photographs the page through a frame scrolled to
# each section, so no image tool is needed. Writes docs/img/report-*.png.
set -euo pipefail
cd "$(dirname "$0")/.."
nesquic=./target/release/nesquic
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$nesquic" run --lut quinn --size 50MB --repeat 3 --probe io,crypto,profile --interval 20ms \
    --out "$work/run" --html >/dev/null

shot() { # section-id output-png height
    cat >"$work/frame.html" <<HTML
<!DOCTYPE html><html><body style="margin:0"><iframe src="run/report.html#$1" style="border:0;width:1250px;height:$3px"></iframe></body></html>
HTML
    chromium --headless --disable-gpu --no-sandbox --hide-scrollbars --window-size="1250,$3" \
        --virtual-time-budget=3000 --screenshot="$2" "file://$work/frame.html" >/dev/null 2>&1
    echo "screenshots: $2"
}
shot what-ran docs/img/report-header.png 1100
shot where-the-cpu-goes-probe-profile docs/img/report-profile.png 1400
shot syscall-latency-probe-io docs/img/report-syscalls.png 900
