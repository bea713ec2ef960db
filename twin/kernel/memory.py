"""Memory regions owned by nodes: the only place where nodes meet."""
from __future__ import annotations

from typing import Callable


class MemoryRegion:
    """A byte-addressed region of one node's memory (a request queue, a reply queue, ...).

    Parameters: ``name`` (str), ``owner`` (node name), ``size_bytes`` (int > 0).
    Other nodes change it only through posted writes (:class:`~twin.kernel.PostedWritePath`),
    which call :meth:`land`; the owner reads it with :meth:`read` / :meth:`view`. Watchers
    (pollers) are told after every landing, so a poller needs no event per empty poll.

    Statistics: ``landings`` (posted writes landed), ``bytes_landed``.
    """

    def __init__(self, name: str, owner: str, size_bytes: int):
        if size_bytes <= 0:
            raise ValueError(f"region {name!r}: size must be > 0 bytes, got {size_bytes}")
        self.name = name
        self.owner = owner
        self.size_bytes = size_bytes
        self.buf = bytearray(size_bytes)
        self._watchers: list[Callable[[], None]] = []
        self.landings = 0
        self.bytes_landed = 0

    def watch(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` after every write that lands in this region."""
        self._watchers.append(fn)

    def land(self, offset: int, data: bytes) -> None:
        """Bytes arrive (called by the kernel at the landing instant). Raises on out-of-range."""
        end = offset + len(data)
        if offset < 0 or end > self.size_bytes:
            raise IndexError(f"region {self.name!r}: write [{offset}, {end}) outside 0..{self.size_bytes}")
        self.buf[offset:end] = data
        self.landings += 1
        self.bytes_landed += len(data)
        for fn in self._watchers:
            fn()

    def write_local(self, offset: int, data: bytes) -> None:
        """The owner's own store into its memory (no path latency); watchers are told too."""
        self.land(offset, data)

    def read(self, offset: int, nbytes: int) -> bytes:
        """Copy ``nbytes`` from ``offset``."""
        return bytes(self.buf[offset:offset + nbytes])

    def view(self) -> memoryview:
        """Zero-copy view of the whole region (read it; do not write through it)."""
        return memoryview(self.buf)
