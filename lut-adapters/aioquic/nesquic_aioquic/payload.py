"""The benchmark payload (docs/protocol.md): a block of PERIOD pattern bytes, stored twice in a
row so the window at any stream offset is one contiguous slice. The server hands aioquic those
slices (memoryviews: no copy of ours); the client checks what arrives with
`BLOCK2.startswith(chunk, phase)`, a memcmp against the block in place (memoryview equality
compares element by element, ~6x slower here)."""

PERIOD = 131071  # 2^17 - 1, a prime: no packet, GSO segment or buffer size divides it
SEED = 0x6E65737175696321  # "nesquic!"
REQUEST_LEN = 8  # the request: the payload size as a big-endian uint64
MASK = (1 << 64) - 1


def _splitmix64(n: int) -> int:
    z = ((n + SEED) * 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def _build_block2() -> bytes:
    words = b"".join(_splitmix64(i).to_bytes(8, "little") for i in range((PERIOD + 7) // 8))
    block = words[:PERIOD]
    return block + block


BLOCK2 = _build_block2()
_BLOCK2_VIEW = memoryview(BLOCK2)


def window(offset: int, max_len: int) -> memoryview:
    """The payload from stream offset `offset` on: min(max_len, PERIOD) bytes."""
    phase = offset % PERIOD
    return _BLOCK2_VIEW[phase : phase + min(max_len, PERIOD)]


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
        # A chunk of at most PERIOD bytes (every packet's stream data) is one window: one memcmp
        # and no slicing, min() or modulo, as this runs once per packet in the interpreter.
        if n <= PERIOD:
            if not BLOCK2.startswith(chunk, phase):
                self._mismatch(chunk, 0, phase)
            phase += n
            self._phase = phase - PERIOD if phase >= PERIOD else phase
            self.received += n
            return
        pos = 0
        while pos < len(chunk):
            n = min(len(chunk) - pos, PERIOD)
            piece = chunk if n == len(chunk) else chunk[pos : pos + n]
            if not BLOCK2.startswith(piece, phase):
                self._mismatch(piece, pos, phase)
            pos += n
            phase = (phase + n) % PERIOD
        self.received += len(chunk)
        self._phase = phase

    def _mismatch(self, piece: bytes, pos: int, phase: int) -> None:
        """Raises for the first byte of `piece` (at `pos` in its chunk) that differs."""
        i = next(i for i in range(len(piece)) if piece[i] != BLOCK2[phase + i])
        raise PayloadMismatch(f"payload mismatch at byte offset {self.received + pos + i}")
