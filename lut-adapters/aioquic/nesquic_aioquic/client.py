"""The client: `connections` connections, `parallel` at a time, each opening `streams` streams
that request `size` bytes and verify every byte; then one `done` line."""

import asyncio
import inspect
import time

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic import events
from aioquic.quic.connection import QuicConnection

from .config import client_config
from .payload import REQUEST_LEN, Verifier
from .qlog import SeqLogger
from .report import emit, summarise
from .socket_io import family_of, open_socket

PROGRESS_EVERY_S = 0.1
# aioquic grants its peer 128 concurrent bidirectional streams and raises that only as streams end.
MAX_STREAMS = 128


class StreamState:
    def __init__(self, size: int, done: asyncio.Future) -> None:
        self.size, self.done, self.verifier = size, done, Verifier()


class ClientProtocol(QuicConnectionProtocol):
    def __init__(self, *args, counter: list, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._streams: dict[int, StreamState] = {}
        self._counter = counter  # [bytes verified by the whole process]
        self.ended: events.ConnectionTerminated | None = None

    def request(self, size: int) -> asyncio.Future:
        stream_id = self._quic.get_next_available_stream_id()
        done = self._loop.create_future()
        self._streams[stream_id] = StreamState(size, done)
        self._quic.send_stream_data(stream_id, size.to_bytes(REQUEST_LEN, "big"), end_stream=True)
        self.transmit()
        return done

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.StreamDataReceived):
            s = self._streams.get(event.stream_id)
            if s is None or s.done.done():
                return
            try:
                s.verifier.update(event.data)
            except Exception as e:  # a mismatch names its offset
                s.done.set_exception(e)
                return
            self._counter[0] += len(event.data)
            if s.verifier.received > s.size:
                s.done.set_exception(RuntimeError(f"stream carried more than the {s.size} bytes requested"))
            elif event.end_stream:
                if s.verifier.received < s.size:
                    s.done.set_exception(
                        RuntimeError(f"stream ended after {s.verifier.received} of {s.size} bytes")
                    )
                else:
                    s.done.set_result(time.perf_counter_ns())
        elif isinstance(event, events.ConnectionTerminated):
            self.ended = event
            why = RuntimeError(f"connection closed: {describe(event)}")
            for s in self._streams.values():
                if not s.done.done():
                    s.done.set_exception(why)


def describe(event: events.ConnectionTerminated | None) -> str:
    if event is None:
        return "no answer"
    return f"error 0x{event.error_code:x}: {event.reason_phrase or 'no reason given'}"


async def one_connection(args, options, config, server, first: int, counter: list, report_io: bool) -> dict:
    loop = asyncio.get_running_loop()
    sock = open_socket(family_of(server[0]), ("::" if ":" in server[0] else "0.0.0.0", 0), options, report=report_io)
    start = time.perf_counter_ns()
    _, protocol = await loop.create_datagram_endpoint(
        lambda: ClientProtocol(QuicConnection(configuration=config), counter=counter), sock=sock
    )
    try:
        protocol.connect(server)
        try:
            await protocol.wait_connected()
        except ConnectionError:
            raise RuntimeError(f"handshake failed: {describe(protocol.ended)}") from None
        handshake_ns = time.perf_counter_ns() - start
        requests = time.perf_counter_ns()
        streams = [protocol.request(args.size) for _ in range(args.streams)]
        ends = await asyncio.gather(*streams)
        transfer_ns = max(ends) - requests
        close(protocol, error_code=0)
        return {
            "start_ns": start - first,
            "handshake_ns": handshake_ns,
            "transfer_ns": transfer_ns,
            "streams": [{"bytes": args.size, "transfer_ns": end - requests} for end in ends],
        }
    except BaseException:
        close(protocol, error_code=1, reason_phrase="client failed")
        raise
    finally:
        # The CONNECTION_CLOSE is sent by close(); the closing period runs on in the background.
        asyncio.ensure_future(_wait_closed(protocol))


# QuicConnectionProtocol.close() takes an error code from aioquic 1.1 on; before, only the
# connection's own close() does, and the protocol's close() sends code 0.
_CLOSE_TAKES_CODE = "error_code" in inspect.signature(QuicConnectionProtocol.close).parameters


def close(protocol: QuicConnectionProtocol, error_code: int, reason_phrase: str = "") -> None:
    """Closes the connection with `error_code`, on any aioquic the adapter supports."""
    if _CLOSE_TAKES_CODE:
        protocol.close(error_code=error_code, reason_phrase=reason_phrase)
    else:
        protocol._quic.close(error_code=error_code, reason_phrase=reason_phrase)
        protocol.transmit()


async def _wait_closed(protocol: QuicConnectionProtocol) -> None:
    await protocol.wait_closed()


async def progress(counter: list) -> None:
    while True:
        await asyncio.sleep(PROGRESS_EVERY_S)
        emit("progress", bytes=counter[0])


async def run_client(args, options) -> None:
    if args.streams > MAX_STREAMS:
        raise SystemExit(f"nesquic-lut-aioquic: --streams {args.streams}: aioquic allows {MAX_STREAMS} concurrent streams")
    host, _, port = args.connect.rpartition(":")
    server = (host.strip("[]"), int(port))
    logger = SeqLogger(args.qlog, "client") if args.qlog else None
    config = client_config(args.ca, options, logger)
    counter = [0]
    ticker = asyncio.ensure_future(progress(counter))
    first = time.perf_counter_ns()
    slots = asyncio.Semaphore(max(1, args.parallel))

    async def limited(i: int) -> dict:
        async with slots:
            # The first connection's socket stands for all in the `io` line.
            try:
                return await one_connection(args, options, config, server, first, counter, report_io=i == 0)
            except Exception as e:
                raise RuntimeError(f"connection {i}: {e}") from e

    try:
        results = await asyncio.gather(*(limited(i) for i in range(args.connections)))
    finally:
        ticker.cancel()
    elapsed_ns = time.perf_counter_ns() - first
    if args.connections == 1 and args.streams == 1:
        c = results[0]
        emit("done", bytes=args.size, handshake_ns=c["handshake_ns"], transfer_ns=c["transfer_ns"])
    else:
        emit("done", **summarise(results, elapsed_ns))
    # Let the CONNECTION_CLOSE frames leave and be answered (aioquic's closing period).
    await asyncio.sleep(0.05)
    if logger:
        logger.write()
