"""The Alveo U55C link card: bridge, exchange engine and reply poller."""
from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from twin.exchange.contract import STATUS
from twin.exchange.encoding import Encoding, slot_offset
from twin.kernel import Kernel, MemoryRegion, Poller, PostedWritePath
from twin.nodes.protocol import CardStats, NoTrace
from twin.units import ceil_to_grid


@dataclass(frozen=True)
class LinkCardParams:
    """Timing of the link card (integer picoseconds; defaults from amd-qblox-exchange-runtime.txt).

    clock_ps: 4000 — the card's 250 MHz clock; every card timestamp is on this grid.
    bridge_bits: 512 — the bridge core takes whole frames as 512-bit words, one per cycle.
    engine_land_ps: 10000 — the exchange engine landing a request in accelerator memory (10 ns).
    reply_read_ps: 40000 — reading the reply out of card memory (40 ns).
    reply_send_ps: 30000 — sending the reply back towards the link (30 ns).
    reply_poll_period_ps: 4000 — the reply poller checks the reply queue once a cycle.
    """

    clock_ps: int = 4000
    bridge_bits: int = 512
    engine_land_ps: int = 10_000
    reply_read_ps: int = 40_000
    reply_send_ps: int = 30_000
    reply_poll_period_ps: int = 4000

    def bridge_ps(self, nbytes: int) -> int:
        """Cycles to pass a frame of ``nbytes`` through the bridge, in ps."""
        words = max(1, -(-nbytes * 8 // self.bridge_bits))
        return words * self.clock_ps

    def edge(self, t_ps: int) -> int:
        """The first card clock edge at or after ``t_ps``."""
        return ceil_to_grid(t_ps, self.clock_ps)


class CardBridge:
    """The card's bridge core, shared by every queue pair of one card: frames pass it one after
    another, in arrival order. ``free``: the instant (ps) it can take the next frame."""

    def __init__(self):
        self.free = 0


class LinkCard(NoTrace):
    """The U55C exchange engine and reply poller for one consumer's queues (a
    :class:`twin.nodes.protocol.CardNode`).

    A card that serves several queue pairs (a mesh: flows to several consumers) has one
    :class:`LinkCard` per queue pair sharing one :class:`CardBridge` (``bridge=``).

    Ports: ``requests`` (a :class:`PostedWritePath` into the consumer's request queue),
    ``replies`` (the card's own :class:`MemoryRegion` holding the reply queue), ``on_reply``
    (a callback ``(seq, t_in_ps, t_have_ps, ok)`` towards the control side).

    A request entering the card at ``t`` (a clock edge) crosses the bridge, and the engine
    writes it into the next free slot with the sequence word last (or as self-validating
    pieces). The reply poller watches the card's own reply queue; when the oldest outstanding
    reply is complete, the card reads it out (``reply_read_ps``), checks it against the
    reference answer and frees the slot. Requests that find every slot busy wait in order in
    the engine (``backlog``); none is dropped.

    Fault handling: ``tamper(seq, writes)`` may alter a request's posted writes (fault injection on
    the PCIe path); with ``timeout_ps`` > 0 a reply not had ``timeout_ps`` after its request was
    issued is counted in ``reply_timeouts`` (the run goes on and takes the reply when it comes).

    With ``keep_replies`` the card keeps every reply payload it reads, in request order, in
    ``kept_replies`` (a QEC workload's corrections, counted against ground truth by :mod:`twin.qec`).

    The reference answer of a request is computed when it enters the card (in request order, so a
    stateful reference, e.g. a decoder keeping a shot's rounds, sees the stream in order).
    ``reply_order``: ``in_order`` (default) the reply poller watches the oldest outstanding reply;
    ``as_ready`` (a consumer whose parallel decoders reply as they finish) it takes whichever
    outstanding reply is complete first (the lowest sequence number among them), and a waiting
    request is issued once its own slot is free.

    Statistics: ``issued``, ``replies_seen``, ``mismatches``, ``backlog_max``, ``slot_wait_ps`` (per
    request, in issue order: ready to issue -> issued, the wait for a free slot), ``reply_timeouts``,
    ``poller.polls``; ``corrupted_requests``: mismatches whose request did not sit in the consumer's
    memory as the card sent it (a diagnosis only a twin can make: it sees both memories; the rest of
    the mismatches were corrupted on the reply's way or by the consumer). :meth:`finish` gives them
    as a :class:`twin.nodes.protocol.CardStats`.
    """

    def __init__(self, kernel: Kernel, params: LinkCardParams, encoding: Encoding,
                 requests: PostedWritePath, replies: MemoryRegion, slots: int, slot_bytes: int,
                 frame_bytes: int, reference: Callable[[bytes], bytes],
                 on_reply: Callable[[int, int, int, bool], None],
                 tamper: Callable[[int, list], list] | None = None, timeout_ps: int = 0, function: int = 0,
                 keep_replies: bool = False, bridge: CardBridge | None = None, hops=None,
                 reply_order: str = "in_order"):
        self.kernel = kernel
        self.p = params
        self.enc = encoding
        self.requests = requests
        self.replies = replies
        self.slots = slots
        self.slot_bytes = slot_bytes
        self.frame_bytes = frame_bytes
        self.reference = reference
        self.on_reply = on_reply
        self.poller = Poller(kernel, replies, params.reply_poll_period_ps, 0, 0, name="card.reply_poll")
        self._outstanding: deque[tuple[int, int, bytes]] = deque()
        self._backlog: deque[tuple[int, int, bytes]] = deque()
        self._watching = False
        self.tamper = tamper
        self.function = function
        self.timeout_ps = timeout_ps
        self._replied: set[int] = set()
        if reply_order not in ("in_order", "as_ready"):
            raise ValueError(f"reply_order {reply_order!r}: expected in_order or as_ready")
        self.as_ready = reply_order == "as_ready"
        self._expect: dict[int, tuple[bytes | None, bool]] = {}  # seq -> (reference reply, function fails)
        self.bridge = bridge if bridge is not None else CardBridge()
        self.hops = hops  # a twin.engine.hops.Hops: issue, land, have per round (or None)
        self._ready_at: dict[int, int] = {}
        self.reply_digest = hashlib.sha256()  # over every reply read: sequence, status, payload
        self.kept_replies: list[bytes] | None = [] if keep_replies else None  # every reply payload, in order
        self.reply_timeouts = 0
        self.corrupted_requests = 0
        self.issued = 0
        self.replies_seen = 0
        self.mismatches = 0
        self.backlog_max = 0
        self.slot_wait_ps: list[int] = []  # per request, in issue order: how long it waited for a free slot

    def setup(self) -> None:
        """Nothing to arm: the reply poller is armed when the first request is issued."""

    def kept_reply(self, seq: int) -> bytes:
        """Reply ``seq``'s payload as the card read it (a flow that keeps its replies)."""
        if self.kept_replies is None:
            raise RuntimeError("this card keeps no replies")
        return self.kept_replies[seq - 1]

    def finish(self) -> CardStats:
        """Its statistics (class docstring)."""
        return CardStats(self.mismatches, self.backlog_max, self.poller.polls, self.reply_digest.hexdigest(),
                         self.reply_timeouts, self.corrupted_requests, np.asarray(self.slot_wait_ps, np.int64),
                         self.kept_replies)

    def submit(self, seq: int, payload: bytes) -> None:
        """A request enters the card now (``kernel.now`` must be a card clock edge). Frames pass the
        bridge one after another, in arrival order. Raises ValueError if the request does not fit
        a slot (``slot_bytes``)."""
        if self.enc.slot_bytes(len(payload)) > self.slot_bytes:
            raise ValueError(f"request {seq} of {len(payload)} bytes does not fit a {self.slot_bytes}-byte "
                             f"{self.enc.name} slot")
        t_in = self.kernel.now
        b = self.bridge
        b.free = max(t_in, b.free) + self.p.bridge_ps(len(payload))
        self._ready_at[seq] = b.free + self.p.engine_land_ps
        try:
            self._expect[seq] = (self.reference(payload), False)
        except ValueError:  # the function cannot run on this payload: the right answer is that status
            self._expect[seq] = (None, True)
        if not self._backlog and self._slot_free(seq):
            self._issue(seq, t_in, payload)
        else:
            self._backlog.append((seq, t_in, payload))
            self.backlog_max = max(self.backlog_max, len(self._backlog))

    def _slot_free(self, seq: int) -> bool:
        """Whether request ``seq``'s slot is free: fewer than ``slots`` outstanding and (as-ready
        replies free slots out of order) not the slot of request ``seq - slots``."""
        if len(self._outstanding) >= self.slots:
            return False
        return not self.as_ready or all(s != seq - self.slots for s, _, _ in self._outstanding)

    def _issue(self, seq: int, t_in: int, payload: bytes) -> None:
        self._outstanding.append((seq, t_in, payload))
        self.issued += 1
        ready = self._ready_at.pop(seq)
        t_issue = max(self.kernel.now, ready)
        self.slot_wait_ps.append(t_issue - ready)
        self.kernel.at(t_issue, self._write, seq, payload)
        if self.timeout_ps:
            self.kernel.at(t_issue + self.timeout_ps, self._overdue, seq)
        if not self._watching:
            self._watch()

    def _write(self, seq: int, payload: bytes) -> None:
        base = slot_offset(seq, self.slots, self.slot_bytes)
        writes = self.enc.writes(seq, payload, function=self.function)
        if self.tamper:
            writes = self.tamper(seq, writes)
        land = 0
        for off, data in writes:
            land = self.requests.write(base + off, data)
        if self.hops is not None:
            self.hops.issue[seq - 1] = self.kernel.now
            self.hops.land[seq - 1] = land

    def _overdue(self, seq: int) -> None:
        if seq not in self._replied:
            self.reply_timeouts += 1

    def _ready(self, seq: int) -> bool:
        return self.enc.ready(self.replies.buf, self._base(seq), seq, self.slot_bytes)

    def _base(self, seq: int) -> int:
        return slot_offset(seq, self.slots, self.slot_bytes)

    def _first_ready(self) -> int | None:
        """The slot base of the outstanding reply that is complete with the lowest sequence number
        (as-ready), or None."""
        return next((self._base(s) for s, _, _ in self._outstanding if self._ready(s)), None)

    def _watch(self) -> None:
        self._watching = True
        if self.as_ready:
            self.poller.arm(lambda: self._first_ready() is not None,
                            lambda t: self.kernel.after(self.p.reply_read_ps, self._have, self._first_ready()))
            return
        seq, _, _ = self._outstanding[0]
        base = self._base(seq)
        self.poller.arm(lambda: self._ready(seq), lambda t: self.kernel.after(self.p.reply_read_ps, self._have, base))

    def _have(self, base: int) -> None:
        """The card reads out the reply in the slot at ``base`` (the oldest outstanding one, or as
        ready the first complete one) and checks it."""
        i = next(j for j, (s, _, _) in enumerate(self._outstanding) if self._base(s) == base)
        seq, t_in, payload = self._outstanding[i]
        del self._outstanding[i]
        got = self.enc.payload(self.replies.buf, base)
        h = self.enc.header(self.replies.buf, base)
        want, fails = self._expect.pop(seq)
        ok = (got == b"" and h.flags == STATUS["function_failed"]) if fails else (got == want and h.flags == 0)
        self.reply_digest.update(h.seq.to_bytes(4, "little") + h.flags.to_bytes(4, "little") + got)
        if self.kept_replies is not None:
            kept = self.kept_replies
            if len(kept) < seq:
                kept.extend([b""] * (seq - len(kept)))
            kept[seq - 1] = got
        self.replies_seen += 1
        self._replied.add(seq)
        if not ok:
            self.mismatches += 1
            dst = getattr(self.requests, "dst", None)  # the twin sees both memories: which side was corrupted?
            if dst is not None and self.enc.payload(dst.buf, base) != payload:
                self.corrupted_requests += 1  # the consumer served a request that did not arrive as sent
        self._watching = False
        while self._backlog and self._slot_free(self._backlog[0][0]):
            bseq, bt_in, bpayload = self._backlog.popleft()
            self._issue(bseq, bt_in, bpayload)
        if self._outstanding and not self._watching:
            self._watch()
        self.on_reply(seq, t_in, self.kernel.now, ok)


def build_endpoint(ctx) -> LinkCard:
    """Model ``sim`` of a link card for one queue pair (registered in :mod:`twin.nodes.models`):
    request tampering and the reply timeout from the flow's faults, the card's shared bridge."""
    spec, fp = ctx.spec, ctx.spec.faults
    return LinkCard(ctx.kernel, spec.card, ctx.enc, ctx.req_path, ctx.rep_region, spec.slots, ctx.slot_bytes,
                    spec.traffic.frame_bytes, ctx.reference(), ctx.on_reply,
                    tamper=fp.tamper("request", ctx.enc.per_piece), timeout_ps=fp.timeout_ps, function=spec.function,
                    keep_replies=ctx.workload.keep_replies, bridge=ctx.bridge, hops=ctx.hops,
                    reply_order=ctx.workload.reply_order)


if TYPE_CHECKING:  # mypy checks that these satisfy the node protocol (twin/nodes/protocol.py)
    from twin.nodes.protocol import CardNode
    _linkcard: type[CardNode] = LinkCard
