"""The server: serves `connections` connections, each stream answering its 8-byte request with
that many pattern bytes, then exits once every connection has ended."""

import asyncio
import os
import socket

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.asyncio.server import QuicServer
from aioquic.quic import events

from .config import server_config
from .payload import REQUEST_LEN, WINDOW, window
from .qlog import SeqLogger
from .report import emit
from .socket_io import family_of, open_socket

CORRUPT_ENV = "NESQUIC_FAULT_SERVER_CORRUPT_AT"
# Bytes kept queued in aioquic per response stream beyond what it has sent: enough that it never
# waits for us (twice its 1 MiB stream window), bounded so a 1 GB response is never held whole
# (aioquic copies what it is given into the stream's send buffer).
SEND_AHEAD = 2 * 1024 * 1024


class Response:
    def __init__(self, stream_id: int, size: int) -> None:
        self.stream_id, self.size, self.offset = stream_id, size, 0


class ServerProtocol(QuicConnectionProtocol):
    def __init__(self, *args, served: "Served", corrupt_at: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._served, self._corrupt_at = served, corrupt_at
        self._requests: dict[int, bytearray] = {}
        self._responses: list[Response] = []
        self._ended = False

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.StreamDataReceived):
            request = self._requests.setdefault(event.stream_id, bytearray())
            request += event.data
            if len(request) > REQUEST_LEN:
                self._served.fail(f"request on stream {event.stream_id} is longer than {REQUEST_LEN} bytes")
            elif event.end_stream:
                if len(request) != REQUEST_LEN:
                    self._served.fail(f"request is {len(request)} bytes, expected {REQUEST_LEN}")
                    return
                self._responses.append(Response(event.stream_id, int.from_bytes(request, "big")))
        elif isinstance(event, events.ConnectionTerminated) and not self._ended:
            self._ended = True
            self._served.connection_ended()

    def transmit(self) -> None:
        self._refill()
        super().transmit()

    def _refill(self) -> None:
        """Tops up every response stream to SEND_AHEAD queued bytes (aioquic has no "writable"
        event, so this runs before each transmit: after every datagram received and timer)."""
        for r in self._responses:
            # aioquic exposes no public count of queued bytes; its sender keeps them in
            # [_buffer_start, _buffer_stop).
            stream = self._quic._streams.get(r.stream_id)
            if stream is None:
                continue
            sender = stream.sender
            while r.offset < r.size and sender._buffer_stop - sender._buffer_start < SEND_AHEAD:
                chunk = window(r.offset, min(r.size - r.offset, WINDOW))
                at = self._corrupt_at - r.offset
                if 0 <= at < len(chunk):
                    chunk = bytearray(chunk)
                    chunk[at] ^= 0xFF
                r.offset += len(chunk)
                self._quic.send_stream_data(r.stream_id, chunk, end_stream=r.offset == r.size)
            if r.size == 0 and r.offset == 0:
                r.offset = -1  # answered: an empty response is just the FIN
                self._quic.send_stream_data(r.stream_id, b"", end_stream=True)
        self._responses = [r for r in self._responses if 0 <= r.offset < r.size]


class Served:
    """Counts ended connections; the server exits when all expected ones have ended."""

    def __init__(self, expected: int) -> None:
        self.remaining = expected
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()

    def connection_ended(self) -> None:
        self.remaining -= 1
        if self.remaining == 0 and not self.done.done():
            self.done.set_result(None)

    def fail(self, why: str) -> None:
        if not self.done.done():
            self.done.set_exception(RuntimeError(why))


def _corrupt_at() -> int:
    value = os.environ.get(CORRUPT_ENV, "")
    try:
        return int(value) if value else -1
    except ValueError:
        raise SystemExit(f"nesquic-lut-aioquic: {CORRUPT_ENV}={value!r} is not a byte offset") from None


async def run_server(args, options) -> None:
    host, _, port = args.listen.rpartition(":")
    host = host.strip("[]")
    logger = SeqLogger(args.qlog, "server") if args.qlog else None
    config = server_config(args.cert, args.key, options, logger)
    served = Served(args.connections)
    corrupt_at = _corrupt_at()
    sock = open_socket(family_of(host), (host, int(port)), options, report=True)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: QuicServer(
            configuration=config,
            create_protocol=lambda *a, **kw: ServerProtocol(*a, served=served, corrupt_at=corrupt_at, **kw),
        ),
        sock=sock,
    )
    bound = sock.getsockname()
    emit("listening", addr=f"[{bound[0]}]:{bound[1]}" if sock.family == socket.AF_INET6 else f"{bound[0]}:{bound[1]}")
    try:
        await served.done
    finally:
        transport.close()
        if logger:
            logger.write()
