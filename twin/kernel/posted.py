"""Posted writes: bytes that land in another node's memory after a path latency, in order."""
from __future__ import annotations

import builtins
from typing import Protocol

from twin.kernel.memory import MemoryRegion
from twin.kernel.sim import Kernel
from twin.kernel.streams import JitterStream


class Wire(Protocol):
    """What a posted-write path needs from the link under it (see :mod:`twin.links`)."""

    @property
    def latency_ps(self) -> int:
        """Time from the end of serialisation until the bytes have landed (ps): an attribute or a property."""

    def serialise_ps(self, nbytes: int) -> int:
        """Time the link is busy putting ``nbytes`` of payload on the wire (headers included)."""

    # Optional: ``tail_ps(nbytes) -> int``, size-dependent time after the link is free until the
    # bytes have landed (store-and-forward hops, a DMA write at the far end; see twin.links.roce).


class Lane:
    """One direction of one link: the state every posted write on it shares.

    A write issued at ``t`` starts when the lane is free (writes on one lane serialise), is on
    the wire for ``wire.serialise_ps(n)``, and lands ``wire.latency_ps + jitter`` later (plus
    ``wire.tail_ps(n)`` for a wire that has one: store-and-forward hops, e.g. RoCE v2). A write
    never lands before an earlier write on the same lane (PCIe keeps posted writes in order per
    path), so a sequence word written last is seen last. Several queue pairs routed over one
    link direction (a mesh) share its lane, and so its serialisation and its order.

    Statistics: ``writes``, ``bytes``, ``busy_ps`` (time spent serialising), ``reorders_held``
    (writes held back to keep order).
    """

    def __init__(self, name: str, wire: Wire, jitter: JitterStream):
        self.name = name
        self.wire = wire
        self.jitter = jitter
        self._free = 0
        self._last_land = 0
        self.writes = 0
        self.bytes = 0
        self.busy_ps = 0
        self.reorders_held = 0
        self._tail = getattr(wire, "tail_ps", None)
        self._ser: dict[int, int] = {}
        self._latency = wire.latency_ps

    def plan(self, t_issue: int, nbytes: int) -> int:
        """Advance the lane for a write of ``nbytes`` issued at ``t_issue``; return its landing
        time in ps. The event model and the direct engine both call this (same arithmetic)."""
        start = t_issue if t_issue > self._free else self._free
        ser = self._ser.get(nbytes)
        if ser is None:  # a wire's serialisation depends on the size only: computed once per size
            ser = self._ser[nbytes] = self.wire.serialise_ps(nbytes)
        self._free = start + ser
        self.busy_ps += ser
        land = start + ser + self._latency + self.jitter.next()
        if self._tail is not None:
            land += self._tail(nbytes)
        if land < self._last_land:
            land = self._last_land
            self.reorders_held += 1
        self._last_land = land
        self.writes += 1
        self.bytes += nbytes
        return land


class PostedWritePath:
    """One directed path of posted writes from a source node into a destination region.

    The timing is its :class:`Lane`'s (its own, or one shared with other paths over the same
    link direction: ``lane=``). There is no acknowledgement: the writer goes on at once.
    Statistics (of the lane): ``writes``, ``bytes``, ``reorders_held``.
    """

    def __init__(self, kernel: Kernel, name: str, wire: Wire | None, dst: MemoryRegion,
                 jitter: JitterStream | None = None, *, lane: Lane | None = None):
        """``wire`` and ``jitter`` make the path's own lane; with ``lane=`` they are not used (None).
        Raises ValueError without a lane and without a wire and a jitter stream."""
        self.kernel = kernel
        self.name = name
        self.dst = dst
        if lane is None:
            if wire is None or jitter is None:
                raise ValueError(f"posted-write path {name!r}: needs a wire and a jitter stream, or a lane")
            lane = Lane(name, wire, jitter)
        self.lane = lane
        self.wire = self.lane.wire
        self.plan = self.lane.plan

    @property
    def writes(self) -> int:
        return self.lane.writes

    @property
    def bytes(self) -> int:
        return self.lane.bytes

    @property
    def reorders_held(self) -> int:
        return self.lane.reorders_held

    def write(self, offset: int, data: builtins.bytes) -> int:
        """Post ``data`` to ``dst[offset:]`` now; returns the landing time (ps)."""
        land = self.plan(self.kernel.now, len(data))
        self.kernel.at(land, self.dst.land, offset, bytes(data))
        return land
