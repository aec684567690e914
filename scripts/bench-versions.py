#!/usr/bin/env python3
"""The version matrix: per LUT, each release its registry serves (newest first, up to COUNT),
built with `nesquic run --lut-version` and run once, plus the upstream checkouts given in CLONES
(built with --lut-path as they are). Writes the block between the markers in bench/versions.md.

`just bench-versions` (env: LUTS=quinn,quic-go COUNT=10 SIZE=50MB CLONES="quinn=/src/quinn ...").
Each row: builds or not (and the first error line), goodput, the server's datagrams per send
message and seals per datagram sent (io and crypto probes), and what was linked (version, commit).
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

BIN = os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "nesquic")
OUT = "bench/versions.md"
BEGIN, END = "<!-- bench-versions:begin -->", "<!-- bench-versions:end -->"
REGISTRY = {
    "quinn": ("crates", "quinn"),
    "quiche": ("crates", "quiche"),
    "s2n-quic": ("crates", "s2n-quic"),
    "tquic": ("crates", "tquic"),
    "msquic": ("crates", "msquic"),
    "quic-go": ("go", "github.com/quic-go/quic-go"),
    "aioquic": ("pypi", "aioquic"),
    "ngtcp2": ("debian", "lut-adapters/ngtcp2/release-source.sh"),
}


def fetch_json_lines(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return [json.loads(line) for line in r.read().decode().splitlines() if line.strip()]


def crates_versions(name):
    n = len(name)
    prefix = {1: "1", 2: "2", 3: f"3/{name[0]}"}.get(n, f"{name[:2]}/{name[2:4]}")
    entries = fetch_json_lines(f"https://index.crates.io/{prefix}/{name}")
    return [e["vers"] for e in entries if not e.get("yanked")]


def go_versions(module):
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(
            ["go", "list", "-m", "-versions", "-json", module],
            cwd=d, capture_output=True, text=True, check=True,
            env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod",
                 "PATH": os.environ["PATH"] + ":/usr/local/go/bin"},
        )
    return json.loads(out.stdout).get("Versions", [])


def pypi_versions(project):
    with urllib.request.urlopen(f"https://pypi.org/pypi/{project}/json", timeout=60) as r:
        releases = json.load(r)["releases"]
    return [v for v, files in releases.items() if any(f.get("packagetype") == "sdist" for f in files)]


def debian_versions(script):
    out = subprocess.run(["bash", script, "--list"], capture_output=True, text=True, check=True)
    return [v.split("-")[0] for v in out.stdout.split()]


def version_key(v):
    parts = re.findall(r"\d+", v.split("-")[0].split("+")[0])
    return tuple(int(p) for p in parts[:3])


def newest(versions, count):
    stable = [v for v in versions if not re.search(r"-(alpha|beta|rc|pre)", v)]
    chosen = stable or versions  # msquic's crate publishes only -beta versions
    return sorted(set(chosen), key=version_key, reverse=True)[:count]


def releases(lut, count):
    kind, name = REGISTRY[lut]
    listing = {"crates": crates_versions, "go": go_versions, "pypi": pypi_versions, "debian": debian_versions}[kind]
    return newest(listing(name), count)


def figures(record):
    """Goodput (median), server datagrams per send message and seals per datagram sent."""
    goodput = record["summary"]["goodput_mbps"]["median"]
    sends = datagrams = seals = 0
    for rep in record["repetitions"]:
        for role in (rep.get("probes") or {}).get("roles", []):
            if role["role"] != "server":
                continue
            for io in role.get("io", []):
                if io.get("direction") == "send" and io.get("datagrams", 0) > 0:
                    sends += io["calls"]
                    datagrams += io["datagrams"]
            for f in role.get("functions", []):
                if f.get("category") == "crypto.seal":
                    seals += f["calls"]
    per_send = f"{datagrams / sends:.1f}" if sends else "-"
    per_dgram = f"{seals / datagrams:.2f}" if datagrams and seals else "-"
    return f"{goodput:.0f}", per_send, per_dgram


def run(lut, how, size):
    """One `nesquic run`; (status, goodput, dgrams/send, seals/dgram, linked)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [BIN, "run", "--lut", lut, *how, "--probe", "io,crypto", "--size", size, "--json", out,
               "--out", os.path.join(d, "runs")]
        started = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        took = time.time() - started
        if p.returncode != 0 or not os.path.exists(out):
            lines = p.stderr.strip().splitlines()
            errors = [l for l in lines if re.search(r"error|failed", l, re.IGNORECASE)]
            why = errors[0] if errors else (lines[-1] if lines else f"exit {p.returncode}")
            return ("fails: " + why.strip()[:160].replace("|", "/"), "-", "-", "-", "-")
        record = json.load(open(out))
        source = record["lut"].get("source") or {}
        release = source.get("release")
        linked = release["contents"] if release else (
            ", ".join(f"{c['name']} {c['version']}" for c in source.get("linked", []))
            + f" @ {source.get('revision', '')[:12]}")
        return (f"builds, runs ({took:.0f} s)", *figures(record), linked)


def main():
    luts = os.environ.get("LUTS", ",".join(REGISTRY)).split(",")
    count = int(os.environ.get("COUNT", "10"))
    size = os.environ.get("SIZE", "50MB")
    clones = dict(c.split("=", 1) for c in os.environ.get("CLONES", "").split() if "=" in c)
    rows = []
    for lut in luts:
        for path in [clones[lut]] if lut in clones else []:
            branch = subprocess.run(["git", "-C", path, "rev-parse", "--abbrev-ref", "HEAD"],
                                    capture_output=True, text=True).stdout.strip() or "?"
            rows.append((lut, f"checkout {os.path.basename(path)} ({branch})", *run(lut, ["--lut-path", path], size)))
            print(rows[-1], file=sys.stderr)
        if lut not in REGISTRY:
            continue
        try:
            versions = releases(lut, count)
        except Exception as e:  # a registry down is a row, not a lost table
            rows.append((lut, "registry", f"not listed: {e}", "-", "-", "-", "-"))
            continue
        for v in versions:
            rows.append((lut, v, *run(lut, ["--lut-version", v], size)))
            print(rows[-1], file=sys.stderr)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    block = [BEGIN, "",
             f"`LUTS={','.join(luts)} COUNT={count} SIZE={size} just bench-versions` on {os.uname().release}, "
             f"{os.cpu_count()} CPUs ({cpu}), {time.strftime('%Y-%m-%d', time.gmtime())}; one run each, "
             "`--probe io,crypto`, payload verified. Goodput is one run's (noisy: not for comparing rows).", "",
             "| LUT | release or checkout | result | goodput Mbit/s | server dgrams/send | seals/dgram | linked |",
             "|---|---|---|---:|---:|---:|---|"]
    block += ["| " + " | ".join(r) + " |" for r in rows]
    block += ["", END]
    text = open(OUT).read() if os.path.exists(OUT) else "# Versions Nesquic builds\n\n"
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + "\n".join(block) + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n## Registry releases (generated)\n\n" + "\n".join(block) + "\n"
    open(OUT, "w").write(text)
    print("\n".join(block))


if __name__ == "__main__":
    main()
