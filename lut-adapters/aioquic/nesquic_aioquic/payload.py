"""The benchmark payload (docs/protocol.md): a pattern of PERIOD bytes repeated to a block of
PERIOD + WINDOW bytes, so the window of up to WINDOW bytes at any stream offset is one contiguous
slice. The server hands aioquic those slices (memoryviews: no copy of ours); the client checks
what arrives with `BLOCK.startswith(chunk, phase)`, a memcmp against the block in place
(memoryview equality compares element by element, ~6x slower here). In the interpreter the call
costs more than the reference's cache misses, so a chunk of up to WINDOW bytes is one call rather
than one per period as in the compiled clients."""

PERIOD = 4093  # a prime: no packet, GSO segment or buffer size divides it
WINDOW = 131071  # the longest slice handed out at once
SEED = 0x6E65737175696321  # "nesquic!"
REQUEST_LEN = 8  # the request: the payload size as a big-endian uint64
MASK = (1 << 64) - 1


def _splitmix64(n: int) -> int:
    z = ((n + SEED) * 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def _build_block() -> bytes:
    words = b"".join(_splitmix64(i).to_bytes(8, "little") for i in range((PERIOD + 7) // 8))
    pattern = words[:PERIOD]
    return (pattern * (1 + WINDOW // PERIOD + 1))[: PERIOD + WINDOW]


BLOCK = _build_block()
_BLOCK_VIEW = memoryview(BLOCK)


def window(offset: int, max_len: int) -> memoryview:
    """The payload from stream offset `offset` on: min(max_len, WINDOW) bytes."""
    phase = offset % PERIOD
    return _BLOCK_VIEW[phase : phase + min(max_len, WINDOW)]


class PayloadMismatch(Exception):
    """A received byte differs from the pattern (the message names its stream offset)."""


class Verifier:
    """Checks a received stream chunk by chunk."""

    def __init__(self) -> None:
        self.received = 0
        self._phase = 0

    def update(self, chunk: bytes) -> None:
        n = len(chunk)
        phase = self._phase
        # A chunk of at most WINDOW bytes (every packet's stream data) is one window: one memcmp
        # and no slicing or min(), as this runs once per packet in the interpreter.
        if n <= WINDOW:
            if not BLOCK.startswith(chunk, phase):
                self._mismatch(chunk, 0, phase)
            self._phase = (phase + n) % PERIOD
            self.received += n
            return
        pos = 0
        while pos < len(chunk):
            n = min(len(chunk) - pos, WINDOW)
            piece = chunk if n == len(chunk) else chunk[pos : pos + n]
            if not BLOCK.startswith(piece, phase):
                self._mismatch(piece, pos, phase)
            pos += n
            phase = (phase + n) % PERIOD
        self.received += len(chunk)
        self._phase = phase

    def _mismatch(self, piece: bytes, pos: int, phase: int) -> None:
        """Raises for the first byte of `piece` (at `pos` in its chunk) that differs."""
        i = next(i for i in range(len(piece)) if piece[i] != BLOCK[phase + i])
        raise PayloadMismatch(f"payload mismatch at byte offset {self.received + pos + i}")
