"""Random streams drawn in fixed-size blocks so that every engine consumes them identically."""
from __future__ import annotations

import numpy as np

from twin.kernel.sim import stream_rng

BLOCK = 4096


class JitterStream:
    """A stream of non-negative integer-picosecond delays: ``Exp(scale)`` rounded to 1 ps.

    The exponential tail is the jitter model for queueing in PCIe switches and root complexes
    (a memoryless extra wait). ``scale_ps == 0`` gives a stream of zeros and draws nothing.
    The stream is defined block by block (block k: ``rint(Generator.exponential(scale, BLOCK))``
    of the stream's generator, k = 0, 1, ...); :meth:`next` draws a block of :data:`BLOCK` at a
    time, :meth:`array` exactly the values it still needs (numpy draws each value from the
    generator's next words and keeps nothing between calls, so any cut of the draws gives the
    blocks' values: a mesh flow of a few hundred rounds does not draw 4,096 per lane). The event
    model and the direct loop both read the stream through this class, so for the same seed they
    see the same values in the same order.
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

    def _refill(self, count: int = BLOCK) -> None:
        """The stream's next ``count`` values at once (the same values as one block at a time: each
        draw takes the generator's next words, none is buffered between calls). ``Generator.exponential(scale)``
        is ``scale * standard_exponential()`` draw for draw (numpy's ``random_exponential``), so the
        standard draws scaled, rounded and cast in place are its values, bit for bit, at less cost.
        Only called for a stream with a scale (its callers return zeros first for ``scale_ps == 0``)."""
        if self._rng is None:
            raise RuntimeError(f"jitter stream {self.name!r}: a zero-scale stream draws nothing")
        x = self._rng.standard_exponential(count)
        x *= self.scale_ps
        np.rint(x, out=x)
        self._arr = x.astype(np.int64)
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
        parts = []
        while n > 0:
            if self._i >= len(self._arr):
                self._refill(n)  # every value this call still needs, in one draw
            take = min(n, len(self._arr) - self._i)
            parts.append(self._arr[self._i:self._i + take])
            self._i += take
            n -= take
        return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def block(self, n: int) -> list[int]:
        """The next ``n`` delays as a list (same values :meth:`next` would give one by one)."""
        if self._rng is None:
            return [0] * n
        return self.array(n).tolist()
