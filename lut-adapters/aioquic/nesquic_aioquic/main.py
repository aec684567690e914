"""Command line (the same flags as every LUT executable, docs/protocol.md) and the entry point."""

import argparse
import asyncio
import sys

from . import options as opts

PROG = "nesquic-lut-aioquic"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="aioquic speaking Nesquic's benchmark protocol (docs/protocol.md)")
    sub = p.add_subparsers(dest="role", required=True)
    for role in ("server", "client"):
        r = sub.add_parser(role)
        if role == "server":
            r.add_argument("--listen", required=True, help="address to bind (port 0: pick one)")
            r.add_argument("--cert", required=True, help="DER certificate")
            r.add_argument("--key", required=True, help="DER PKCS#8 key")
        else:
            r.add_argument("--connect", required=True, help="server address")
            r.add_argument("--ca", required=True, help="DER certificate to trust (the only trust anchor)")
            r.add_argument("--size", required=True, type=int, help="bytes to request per stream")
            r.add_argument("--parallel", type=int, default=1, help="connections open at once")
        r.add_argument("--connections", type=int, default=1, help="connections in total")
        r.add_argument("--streams", type=int, default=1, help="streams per connection")
        r.add_argument("--io", default="native", help="I/O path (aioquic has only its own: native)")
        r.add_argument("--qlog", help="write aioquic's qlog (JSON-SEQ) here")
        r.add_argument("--opt", action="append", default=[], help=f"KEY=VALUE setting: {opts.SUPPORTED}")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.io != "native":
        print(f"{PROG}: --io {args.io}: aioquic runs only on its own asyncio UDP path (--io native)", file=sys.stderr)
        return 2
    if args.connections < 1 or args.streams < 1 or getattr(args, "parallel", 1) < 1:
        print(f"{PROG}: --connections, --streams and --parallel must be at least 1", file=sys.stderr)
        return 2
    try:
        options = opts.parse(args.opt)
    except opts.OptionError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    # Imported here so that a bad command line is answered before aioquic loads.
    from .client import run_client
    from .server import run_server

    try:
        asyncio.run(run_server(args, options) if args.role == "server" else run_client(args, options))
    except (RuntimeError, OSError, ValueError) as e:
        print(f"{PROG}: {args.role}: {e}", file=sys.stderr)
        return 1
    return 0
