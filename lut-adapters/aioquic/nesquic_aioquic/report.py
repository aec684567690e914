"""Report lines (docs/protocol.md "Reporting"): one JSON object per line on stdout, flushed at
once so the orchestrator sees it."""

import json
import sys


def emit(event: str, **fields) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def summarise(connections: list[dict], elapsed_ns: int) -> dict:
    """The `done` fields of a run with several connections or streams."""
    handshakes = sorted(c["handshake_ns"] for c in connections)
    first_request = min(c["start_ns"] + c["handshake_ns"] for c in connections)
    last_byte = max(c["start_ns"] + c["handshake_ns"] + c["transfer_ns"] for c in connections)
    return {
        "bytes": sum(s["bytes"] for c in connections for s in c["streams"]),
        "handshake_ns": handshakes[(len(handshakes) - 1) // 2],
        "transfer_ns": last_byte - first_request,
        "elapsed_ns": elapsed_ns,
        "connections": connections,
    }
