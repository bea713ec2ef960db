"""Where an RTL node's posted writes begin and publish a message: the hops a Verilated node gives.

A Verilated node keeps its inside to itself, but every posted write it issues crosses its boundary
on the twin's timeline. Read against the memory contract (contract.yaml: message ``seq`` in slot
``(seq - 1) % slots``, complete when its sequence word -- per-piece: every piece's -- says ``seq``),
those writes give the instants the behavioural nodes record: the RTL card's first write of a request
(``issue``) and the landing of the write that completes it (``land``); the RTL consumer's first
write of a reply (``reply``), the write that publishes it (``publish``) and that write's landing
(``rland``). Messages go out in sequence order, one slot at a time (the ring), so the first write
into a slot with no message open is the next message's.
"""
from __future__ import annotations

from twin.exchange.encoding import Encoding, slot_offset

WIRE_SEQ = 2**32 - 1
"""The sequence word wraps after this many messages (numbers 1 .. 2**32 - 1)."""


class SlotWrites:
    """The messages an RTL node writes into a queue of ``slots`` slots of ``slot_bytes`` bytes in
    ``encoding``, followed write by write: a shadow of the bytes written (no path latency), the
    message open in each slot, the next message's number."""

    def __init__(self, encoding: Encoding, slots: int, slot_bytes: int):
        self.enc = encoding
        self.slots = int(slots)
        self.slot_bytes = int(slot_bytes)
        self.shadow = bytearray(self.slots * self.slot_bytes)
        self.open: dict[int, int] = {}  # slot -> the message being written there (1-based)
        self.next = 1

    def see(self, addr: int, data: bytes) -> tuple[int, bool, bool] | None:
        """The write of ``data`` at byte ``addr`` of the queue: (message, whether it is the message's
        first write, whether it completes the message), or None for a write outside the queue or
        into a slot that is not the next message's (a node writing the wrong slot: the card's byte
        check finds that, the hops are left unknown)."""
        slot = addr // self.slot_bytes
        if addr < 0 or addr + len(data) > len(self.shadow):
            return None
        first = slot not in self.open
        if first:
            if slot_offset(self.next, self.slots, self.slot_bytes) != slot * self.slot_bytes:
                return None
            self.open[slot] = self.next
            self.next += 1
        seq = self.open[slot]
        self.shadow[addr:addr + len(data)] = data
        base = slot * self.slot_bytes
        done = self.enc.ready(self.shadow, base, (seq - 1) % WIRE_SEQ + 1, self.slot_bytes)
        if done:
            del self.open[slot]
        return seq, first, done


class WriteHops:
    """The hops an RTL node's posted writes give (:class:`SlotWrites` of its queue), recorded into the
    flow's :class:`twin.engine.hops.Hops` recorder (``hops``; None: nothing recorded): the message's
    first write issued into instant ``first``, the write that completes it issued into ``published``
    (None: not recorded) and landed into ``landed``. The RTL card: ``issue``, -, ``land``; the RTL
    consumer: ``reply``, ``publish``, ``rland``."""

    def __init__(self, encoding: Encoding, slots: int, slot_bytes: int, first: str, published: str | None,
                 landed: str):
        self.writes = SlotWrites(encoding, slots, slot_bytes)
        self.first, self.published, self.landed = first, published, landed
        self.hops = None

    def mark(self, addr: int, data: bytes, now: int, land: int) -> None:
        """A write of ``data`` at ``addr`` issued at ``now`` that lands at ``land`` (ps)."""
        if self.hops is None:
            return
        w = self.writes.see(addr, data)
        if w is None or w[0] > len(self.hops.issue):
            return
        i = w[0] - 1
        if w[1]:
            getattr(self.hops, self.first)[i] = now
        if w[2]:
            if self.published is not None:
                getattr(self.hops, self.published)[i] = now
            getattr(self.hops, self.landed)[i] = land
