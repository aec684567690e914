"""`--qlog PATH`: aioquic's own qlog events (draft names such as transport:packet_sent), every
connection of the process in one JSON-SEQ file, written at exit. Event times are milliseconds
since the process's reference time, which the `qlog` report line gives as `start_unix_ns`."""

import json
import time

from aioquic.quic.logger import QuicLogger

from .report import emit


class SeqLogger(QuicLogger):
    def __init__(self, path: str, vantage: str) -> None:
        super().__init__()
        self.path = path
        self.vantage = vantage
        self.start_unix_ns = time.time_ns()
        emit("qlog", path=path, start_unix_ns=self.start_unix_ns)

    def write(self) -> None:
        reference_ms = self.start_unix_ns / 1e6
        header = {
            "qlog_version": "0.3",
            "qlog_format": "JSON-SEQ",
            "trace": {
                "vantage_point": {"type": self.vantage},
                "common_fields": {"reference_time": reference_ms, "time_format": "relative"},
            },
        }
        events = sorted(
            (e for trace in self._traces for e in trace._events),  # noqa: SLF001 (aioquic keeps them there)
            key=lambda e: e["time"],
        )
        with open(self.path, "w") as f:
            f.write("\x1e" + json.dumps(header) + "\n")
            for e in events:
                f.write("\x1e" + json.dumps({**e, "time": e["time"] - reference_ms}) + "\n")
