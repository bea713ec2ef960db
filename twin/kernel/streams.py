"""Random streams drawn in fixed-size blocks so that every engine consumes them identically."""
from __future__ import annotations

import numpy as np

from twin.kernel.sim import stream_rng

BLOCK = 4096


class JitterStream:
    """A stream of non-negative integer-picosecond delays: ``Exp(scale)`` rounded to 1 ps.

    The exponential tail is the jitter model for queueing in PCIe switches and root complexes
    (a memoryless extra wait). ``scale_ps == 0`` gives a stream of zeros and draws nothing.
    Values are drawn in blocks of :data:`BLOCK`; the event model and the direct loop both read
    the stream through this class, so for the same seed they see the same values in the same
    order.
    """

    def __init__(self, seed: int, name: str, scale_ps: int):
        if scale_ps < 0:
            raise ValueError(f"jitter scale must be >= 0 ps, got {scale_ps}")
        self.scale_ps = int(scale_ps)
        self.name = name
        self._rng = stream_rng(seed, name) if scale_ps else None
        self._arr = np.zeros(0, np.int64)  # the current block
        self._buf: list[int] | None = []  # the same block as a list (made when next() first reads it)
        self._i = 0

    def _refill(self) -> None:
        x = self._rng.exponential(self.scale_ps, size=BLOCK)
        self._arr = np.rint(x).astype(np.int64)
        self._buf = None
        self._i = 0

    def next(self) -> int:
        """Next delay in picoseconds."""
        if self._rng is None:
            return 0
        if self._i >= len(self._arr):
            self._refill()
        if self._buf is None:
            self._buf = self._arr.tolist()
        v = self._buf[self._i]
        self._i += 1
        return v

    def array(self, n: int) -> np.ndarray:
        """The next ``n`` delays as an int64 array (the values :meth:`next` would give one by one,
        from the same blocks): what the compiled core (:mod:`twin.engine.native`) consumes."""
        if self._rng is None:
            return np.zeros(n, np.int64)
        head = self._arr[self._i:self._i + n]  # what is left of the current block
        self._i += len(head)
        n -= len(head)
        if n <= 0:
            return head
        # the whole blocks this needs, drawn in one call: a Generator's draws in one call are its draws in
        # calls of BLOCK one after the other, so the values and the stream's state after are the same
        k = -(-n // BLOCK)
        more = np.rint(self._rng.exponential(self.scale_ps, size=k * BLOCK)).astype(np.int64)
        self._arr = more[(k - 1) * BLOCK:]  # the last block stays the current one, as _refill leaves it
        self._buf = None
        self._i = n - (k - 1) * BLOCK
        return np.concatenate((head, more[:n])) if len(head) else more[:n]

    def block(self, n: int) -> list[int]:
        """The next ``n`` delays as a list (same values :meth:`next` would give one by one)."""
        if self._rng is None:
            return [0] * n
        return self.array(n).tolist()
