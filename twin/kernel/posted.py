"""Posted writes: bytes that land in another node's memory after a path latency, in order."""
from __future__ import annotations

from typing import Protocol

from twin.kernel.memory import MemoryRegion
from twin.kernel.sim import Kernel
from twin.kernel.streams import JitterStream


class Wire(Protocol):
    """What a posted-write path needs from the link under it (see :mod:`twin.links`)."""

    latency_ps: int

    def serialise_ps(self, nbytes: int) -> int:
        """Time the link is busy putting ``nbytes`` of payload on the wire (headers included)."""

    # Optional: ``tail_ps(nbytes) -> int``, size-dependent time after the link is free until the
    # bytes have landed (store-and-forward hops, a DMA write at the far end; see twin.links.roce).


class PostedWritePath:
    """One directed path of posted writes from a source node into a destination region.

    A write issued at ``t`` starts when the path is free (writes on one path serialise), is on
    the wire for ``wire.serialise_ps(n)``, and lands ``wire.latency_ps + jitter`` later (plus
    ``wire.tail_ps(n)`` for a wire that has one: store-and-forward hops, e.g. RoCE v2). A write
    never lands before an earlier write on the same path (PCIe keeps posted writes in order per
    path), so a sequence word written last is seen last. There is no acknowledgement: the writer
    goes on at once.

    Statistics: ``writes``, ``bytes``, ``reorders_held`` (writes held back to keep order).
    """

    def __init__(self, kernel: Kernel, name: str, wire: Wire, dst: MemoryRegion, jitter: JitterStream):
        self.kernel = kernel
        self.name = name
        self.wire = wire
        self.dst = dst
        self.jitter = jitter
        self._free = 0
        self._last_land = 0
        self.writes = 0
        self.bytes = 0
        self.reorders_held = 0
        self._tail = getattr(wire, "tail_ps", None)

    def plan(self, t_issue: int, nbytes: int) -> int:
        """Advance the path state for a write of ``nbytes`` issued at ``t_issue``; return its
        landing time in ps. Used by :meth:`write` and by the direct loop (same arithmetic)."""
        start = t_issue if t_issue > self._free else self._free
        ser = self.wire.serialise_ps(nbytes)
        self._free = start + ser
        land = start + ser + self.wire.latency_ps + self.jitter.next()
        if self._tail is not None:
            land += self._tail(nbytes)
        if land < self._last_land:
            land = self._last_land
            self.reorders_held += 1
        self._last_land = land
        self.writes += 1
        self.bytes += nbytes
        return land

    def write(self, offset: int, data: bytes) -> int:
        """Post ``data`` to ``dst[offset:]`` now; returns the landing time (ps)."""
        land = self.plan(self.kernel.now, len(data))
        self.kernel.at(land, self.dst.land, offset, bytes(data))
        return land
