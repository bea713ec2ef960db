"""Property tests of the functional exchange, on the event kernel, with the real components.

A :class:`LinkCard` (producer) and a :class:`PollingConsumer` are wired by hand on a
:class:`Kernel`: the card posts requests into the consumer's request queue (a
:class:`MemoryRegion`) over one :class:`PostedWritePath`, the consumer answers into the card's
reply queue over another; both paths are PCIe links with a random latency and a
:class:`JitterStream`, so landings vary while posted writes on one path stay in order (the only
ordering PCIe gives). Requests of random sizes (1 byte up to what the slot holds) enter the card
at random card clock edges from a small scheduler in this file; slot counts are 1..8, slot sizes
32..512 bytes (multiples of 16), both encodings, random poll period, phase and cost.

Observation is done by thin test-only subclasses and wrappers that record what happens and at
which instant (nothing in ``twin/`` is changed):

* ``ObservedPath`` records each posted write (issue time, planned landing, offset, bytes, and the
  message it belongs to); ``ObservedRegion`` records each landing;
* ``ObservedCard`` / ``ObservedConsumer`` note the message a write or a read belongs to and
  check the slot at the instant the device acts on it; the card's reply poller is wrapped so its
  poll instant is observed too;
* ``Spy`` stands in for the encoding object inside each device and records what the device read
  (``payload``) and wrote (``writes``).

Layouts are decoded here with ``int.from_bytes`` (contract.yaml: classic = 16-byte header with
the u32 sequence word at byte 0 and the u16 length at byte 6, payload from byte 16; per-piece =
16-byte pieces, each a u32 sequence number and 12 bytes, piece 0 holding the header fields), not
with the module's own decoder, except where the test is *about* ``Encoding.ready``.

Properties (one test each): (1) no request lost or answered twice; (2) no reply read before its
ready word, no request served before it landed; (3) no slot reused before the reply to its
previous message was consumed; (4) per-piece messages reassemble exactly at every size; (5) torn
or stale per-piece slots are not ready and not served until repaired, then served once.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass

from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from twin.devices.consumer import ConsumerParams, PollingConsumer
from twin.devices.linkcard import LinkCard, LinkCardParams
from twin.exchange import CLASSIC, PER_PIECE
from twin.exchange.encoding import Encoding
from twin.kernel import JitterStream, Kernel, MemoryRegion, PostedWritePath
from twin.links.pcie import PcieLink

SEQ = 4            # u32 sequence word at the start of a classic slot / of every piece
HDR = 16           # classic header bytes (= one piece)
LEN_AT = 6         # u16 payload length inside the header (classic) / piece 0 (per-piece)
PIECE = 16
DATA = 12          # payload bytes per piece

# 300 examples per property in the default suite; .ci/run runs them again with 2,000
# (TWIN_PROPERTY_EXAMPLES=2000), the first round's count
PROPERTY = settings(max_examples=int(os.environ.get("TWIN_PROPERTY_EXAMPLES", "300")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------
# independent layout helpers
# ---------------------------------------------------------------------------------------------

def u32(buf, off: int) -> int:
    return int.from_bytes(buf[off:off + 4], "little")


def u16(buf, off: int) -> int:
    return int.from_bytes(buf[off:off + 2], "little")


def capacity(enc: Encoding, slot_bytes: int) -> int:
    """Most payload bytes a slot of ``slot_bytes`` holds."""
    if enc.per_piece:
        return (slot_bytes // PIECE - 1) * DATA
    return slot_bytes - HDR


def n_pieces(nbytes: int) -> int:
    return 1 + -(-nbytes // DATA)


def carries(enc: Encoding, buf, base: int, seq: int, nbytes: int) -> bool:
    """The slot at ``base`` holds message ``seq`` of ``nbytes`` payload by its ready marks:
    the sequence word (classic) or every piece the message needs (per-piece)."""
    if not enc.per_piece:
        return u32(buf, base) == seq
    return all(u32(buf, base + i * PIECE) == seq for i in range(n_pieces(nbytes)))


def decode(enc: Encoding, buf, base: int) -> bytes:
    """The payload in the slot at ``base``, by the contract's layout."""
    n = u16(buf, base + LEN_AT)
    if not enc.per_piece:
        return bytes(buf[base + HDR:base + HDR + n])
    out = b"".join(bytes(buf[base + i * PIECE + SEQ:base + (i + 1) * PIECE]) for i in range(1, n_pieces(n)))
    return out[:n]


def piece_image(seq: int, payload: bytes, function: int = 0, flags: int = 0) -> bytes:
    """A per-piece message built here from the contract (not with ``Encoding.writes``)."""
    s = seq.to_bytes(4, "little")
    out = bytearray(s + function.to_bytes(2, "little") + len(payload).to_bytes(2, "little")
                    + flags.to_bytes(4, "little") + bytes(4))
    for i in range(0, len(payload), DATA):
        out += s + payload[i:i + DATA].ljust(DATA, b"\0")
    return bytes(out)


# consumer functions (all keep the reply within the slot)
FUNCTIONS = {
    "echo": lambda b: b,
    "mix": lambda b: bytes(x ^ 0xA5 for x in reversed(b)),   # same length, different bytes
    "half": lambda b: b[:(len(b) + 1) // 2],                 # shorter reply than request
}


def serving(fn):
    """The consumer's function table: ``fn`` as function id 0 (the id the card sends)."""
    return lambda fid: fn if fid == 0 else None


# ---------------------------------------------------------------------------------------------
# observed components (test-only)
# ---------------------------------------------------------------------------------------------

@dataclass
class W:
    """One posted write as issued."""
    idx: int
    seq: int | None        # the message it belongs to
    t_issue: int
    t_land: int            # planned landing
    offset: int
    data: bytes


class ObservedPath(PostedWritePath):
    """A posted-write path that records every write and which message it belongs to."""

    def __init__(self, rig: "Rig", *args):
        super().__init__(*args)
        self.rig = rig
        self.tag: int | None = None
        self.issued: list[W] = []
        self.landed_at: list[int] = []
        self.by_seq: dict[int, list[int]] = {}

    def write(self, offset: int, data: bytes) -> int:
        land = super().write(offset, data)
        w = W(len(self.issued), self.tag, self.kernel.now, land, offset, bytes(data))
        self.issued.append(w)
        if self.tag is not None:
            self.by_seq.setdefault(self.tag, []).append(w.idx)
        self.rig.on_write(self, w)
        return land


class ObservedRegion(MemoryRegion):
    """A region written by one path: checks that landings come in issue order, at the planned
    instant, with the issued bytes (PCIe posted-write ordering), and records the instants."""

    def __init__(self, rig: "Rig", *args):
        super().__init__(*args)
        self.rig = rig
        self.path: ObservedPath | None = None

    def land(self, offset: int, data: bytes) -> None:
        p = self.path
        i = len(p.landed_at)
        now = self.rig.k.now
        w = p.issued[i] if i < len(p.issued) else None
        if w is None or (w.offset, w.data, w.t_land) != (offset, bytes(data), now):
            self.rig.bad["order"].append(f"{p.name}: landing #{i} at {now} ps is not write #{i} as issued ({w})")
        p.landed_at.append(now)
        super().land(offset, data)


class Spy:
    """Stands in for an Encoding inside one device; records what the device read and wrote."""

    def __init__(self, enc: Encoding):
        self._enc = enc
        self.seq: int | None = None                     # the message the device is handling
        self.read: dict[int | None, list[bytes]] = {}
        self.answer: dict[int, bytes] = {}
        self.owner: dict[int, tuple[int, bytes]] = {}   # id(bytes written) -> (seq, the bytes)

    def __getattr__(self, name):
        return getattr(self._enc, name)

    def payload(self, buf, base):
        p = self._enc.payload(buf, base)
        self.read.setdefault(self.seq, []).append(p)
        return p

    def writes(self, seq, payload, *a, **kw):
        out = self._enc.writes(seq, payload, *a, **kw)
        self.answer[seq] = bytes(payload)
        for _, data in out:
            self.owner[id(data)] = (seq, data)
        return out


class ObservedCard(LinkCard):
    def __init__(self, rig: "Rig", *args):
        self.rig = rig
        super().__init__(*args)

    def _write(self, seq, payload):
        self.requests.tag = seq
        try:
            super()._write(seq, payload)
        finally:
            self.requests.tag = None

    def _have(self, base):
        seq = self._outstanding[0][0] if self._outstanding else None
        self.rig.card_reads(seq, base)
        self.enc.seq = seq
        super()._have(base)
        self.enc.seq = None


class ObservedConsumer(PollingConsumer):
    def __init__(self, rig: "Rig", *args):
        self.rig = rig
        super().__init__(*args)

    def _seen(self, seq, base, at):
        self.rig.consumer_sees(seq, base)
        self.enc.seq = seq
        super()._seen(seq, base, at)
        self.enc.seq = None

    def _post(self, seq, base, writes):
        owner = self.enc.owner.get(id(writes[0][1])) if writes else None
        self.reply.tag = owner[0] if owner else None
        try:
            super()._post(seq, base, writes)
        finally:
            self.reply.tag = None


# ---------------------------------------------------------------------------------------------
# one exchange
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Exchange:
    enc: Encoding
    slots: int
    slot_bytes: int
    requests: tuple[tuple[int, int], ...]      # (payload bytes, card cycles after the previous request)
    fn: str
    seed: int
    req_link: PcieLink
    rep_link: PcieLink
    req_jitter_ps: int
    rep_jitter_ps: int
    card: LinkCardParams
    consumer: ConsumerParams


CATEGORIES = ("lost", "ready", "order", "reuse", "reassembly")


class Rig:
    """Card + consumer + two paths on one kernel, observed."""

    def __init__(self, ex: Exchange):
        self.ex = ex
        self.k = k = Kernel(ex.seed)
        self.bad: dict[str, list[str]] = {c: [] for c in CATEGORIES}
        self.fn = FUNCTIONS[ex.fn]
        size = ex.slots * ex.slot_bytes
        cap = capacity(ex.enc, ex.slot_bytes)
        self.req_region = ObservedRegion(self, "consumer.request_queue", "consumer", size)
        self.rep_region = ObservedRegion(self, "card.reply_queue", "card", size)
        self.req_path = ObservedPath(self, k, "card->consumer", ex.req_link, self.req_region,
                                     JitterStream(ex.seed, "pcie.request", ex.req_jitter_ps))
        self.rep_path = ObservedPath(self, k, "consumer->card", ex.rep_link, self.rep_region,
                                     JitterStream(ex.seed, "pcie.reply", ex.rep_jitter_ps))
        self.req_region.path = self.req_path
        self.rep_region.path = self.rep_path
        self.consumer_spy = Spy(ex.enc)
        self.card_spy = Spy(ex.enc)
        self.consumer = ObservedConsumer(self, k, "consumer", ex.consumer, self.consumer_spy, self.req_region,
                                         self.rep_path, ex.slots, ex.slot_bytes, cap, serving(self.fn))
        self.card = ObservedCard(self, k, ex.card, self.card_spy, self.req_path, self.rep_region, ex.slots,
                                 ex.slot_bytes, cap, self.fn, self._on_reply)
        fire = self.card.poller._fire

        def card_poll_fires():
            if self.card._outstanding:
                self.card_polls(self.card._outstanding[0][0])
            fire()

        self.card.poller._fire = card_poll_fires     # the card's poll instant (its cost is 0)
        self.submitted: dict[int, bytes] = {}
        self.replies: list[tuple[int, bool]] = []
        self.served: list[int] = []
        self.consumed: dict[int, int] = {}
        self.seen_payload: dict[int, bytes] = {}
        self.drained = False

    # -- driving ----------------------------------------------------------------------------

    def run(self) -> "Rig":
        ex, k = self.ex, self.k
        rnd = random.Random(ex.seed)
        t = 0
        for seq, (n, gap) in enumerate(ex.requests, 1):
            t += gap * ex.card.clock_ps                     # requests enter the card on its clock edges
            payload = rnd.randbytes(n)
            self.submitted[seq] = payload
            k.at(t, self.card.submit, seq, payload)
        self.consumer.setup()
        budget = 200 * len(ex.requests) + 200                # livelock guard; ~15 events per request
        while budget and not k.idle():
            k.step()
            budget -= 1
        self.drained = k.idle()
        self._finish()
        if currently_in_test_context():     # label examples (pytest --hypothesis-show-statistics)
            event(f"{ex.enc.name}, backlog {'used' if self.card.backlog_max else 'unused'}, "
                  f"slots {'reused' if len(ex.requests) > ex.slots else 'fresh'}")
        return self

    def _on_reply(self, seq: int, t_in: int, t_have: int, ok: bool) -> None:
        self.replies.append((seq, ok))

    def _base(self, seq: int) -> int:
        return ((seq - 1) % self.ex.slots) * self.ex.slot_bytes

    # -- instant checks ---------------------------------------------------------------------

    def on_write(self, path: ObservedPath, w: W) -> None:
        """Property 3 at the instant a write is posted: its slot must be free."""
        m, slots = w.seq, self.ex.slots
        if m is None:
            self.bad["reuse"].append(f"{path.name}: write at {w.t_issue} ps belongs to no message")
            return
        base = self._base(m)
        if not (base <= w.offset and w.offset + len(w.data) <= base + self.ex.slot_bytes):
            self.bad["reuse"].append(f"{path.name}: message {m} writes [{w.offset}, {w.offset + len(w.data)}) "
                                     f"outside its slot [{base}, {base + self.ex.slot_bytes})")
        if m > slots and (m - slots) not in self.consumed:
            self.bad["reuse"].append(f"{path.name}: message {m} written into slot {(m - 1) % slots} at "
                                     f"{w.t_issue} ps before the card consumed reply {m - slots}")

    def _landed_by(self, path: ObservedPath, seq: int, t: int, who: str, what: str) -> None:
        idx = path.by_seq.get(seq)
        if not idx:
            self.bad["ready"].append(f"{who} acted on {what} {seq}, which was never written")
            return
        for i in idx:
            if i >= len(path.landed_at) or path.landed_at[i] > t:
                self.bad["ready"].append(f"{who} acted at {self.k.now} ps on {what} {seq} (observed at {t} ps) "
                                         f"before its write #{i} landed ({path.issued[i].t_land} ps)")
        buf = path.dst.buf
        for i in idx:
            w = path.issued[i]
            if bytes(buf[w.offset:w.offset + len(w.data)]) != w.data:
                self.bad["ready"].append(f"{who} at {self.k.now} ps: the slot does not hold the bytes of {what} "
                                         f"{seq}'s write #{i}")

    def consumer_sees(self, seq: int, base: int) -> None:
        """The consumer's poll saw request ``seq`` complete: check at that instant."""
        t_poll = self.k.now - self.consumer.p.poll_cost_ps
        self.served.append(seq)
        self._landed_by(self.req_path, seq, t_poll, "consumer", "request")
        payload = self.submitted.get(seq)
        if payload is None or not carries(self.ex.enc, self.req_region.buf, base, seq, len(payload)):
            self.bad["ready"].append(f"consumer served request {seq} whose slot does not carry it")
        self.seen_payload[seq] = decode(self.ex.enc, self.req_region.buf, base)

    def _answer(self, seq: int) -> bytes:
        """The reply the consumer wrote for ``seq`` (or, if it wrote none, the one it should)."""
        a = self.consumer_spy.answer.get(seq)
        return a if a is not None else self.fn(self.submitted.get(seq, b""))

    def card_polls(self, seq: int) -> None:
        """The card's reply poll saw reply ``seq`` ready: check at that instant."""
        self._landed_by(self.rep_path, seq, self.k.now, "card poll", "reply")
        answer = self._answer(seq)
        if not carries(self.ex.enc, self.rep_region.buf, self._base(seq), seq, len(answer)):
            self.bad["ready"].append(f"card poll at {self.k.now} ps took reply {seq} without its ready marks")

    def card_reads(self, seq: int | None, base: int) -> None:
        """The card reads reply ``seq`` out of its queue (and frees the slot)."""
        if seq is None:
            self.bad["lost"].append(f"card read a reply at {self.k.now} ps with nothing outstanding")
            return
        if seq in self.consumed:
            self.bad["lost"].append(f"card read reply {seq} twice")
        self.consumed[seq] = self.k.now
        self._landed_by(self.rep_path, seq, self.k.now, "card read", "reply")
        answer = self._answer(seq)
        if base != self._base(seq) or not carries(self.ex.enc, self.rep_region.buf, base, seq, len(answer)):
            self.bad["ready"].append(f"card read reply {seq} at {self.k.now} ps from slot base {base} "
                                     f"without its ready marks")

    # -- after the run ------------------------------------------------------------------------

    def _finish(self) -> None:
        n = len(self.ex.requests)
        want = list(range(1, n + 1))
        lost = self.bad["lost"]
        if not self.drained:
            lost.append("the kernel did not run dry (livelock)")
        if [s for s, _ in self.replies] != want:
            lost.append(f"replies at the card in order {[s for s, _ in self.replies]}, expected {want}")
        if not all(ok for _, ok in self.replies):
            lost.append(f"replies that failed the card's check: {[s for s, ok in self.replies if not ok]}")
        if self.served != want:
            lost.append(f"consumer served {self.served}, expected {want}")
        if self.card.mismatches or self.card._outstanding or self.card._backlog:
            lost.append(f"card: {self.card.mismatches} mismatches, {len(self.card._outstanding)} outstanding, "
                        f"{len(self.card._backlog)} in backlog at the end")
        for seq in want:
            payload = self.submitted[seq]
            answer = self.fn(payload)
            c_read = self.consumer_spy.read.get(seq, [])
            k_read = self.card_spy.read.get(seq, [])
            # (2) the bytes the card checked are the ones the consumer wrote; the consumer read the
            # bytes that were sent (a missing read is property 1's business)
            wrote = self.consumer_spy.answer.get(seq)
            if k_read and k_read[-1] != wrote:
                self.bad["ready"].append(f"reply {seq}: the card checked {k_read[-1]!r}, the consumer wrote {wrote!r}")
            if c_read and c_read[-1] != payload:
                self.bad["ready"].append(f"request {seq}: the consumer read {c_read[-1]!r}, the card sent {payload!r}")
            # (4) reassembly: by the module's decoder and by the layout, both directions
            if c_read != [payload] or self.seen_payload.get(seq) != payload or k_read != [answer]:
                self.bad["reassembly"].append(
                    f"message {seq} ({len(payload)} B): consumer read {c_read}, slot held "
                    f"{self.seen_payload.get(seq)!r}, card read {k_read}; sent {payload!r}, reply {answer!r}")

    def report(self, *cats: str) -> str:
        return "\n".join(f"[{c}] {m}" for c in cats for m in self.bad[c][:10])


# ---------------------------------------------------------------------------------------------
# strategies
# ---------------------------------------------------------------------------------------------

def size_edges(cap: int) -> list[int]:
    """Payload sizes worth trying every time: 1, the maximum, around multiples of 12."""
    return sorted({n for n in (1, 2, 11, 12, 13, 23, 24, 25, cap - 13, cap - 12, cap - 11, cap - 1, cap)
                   if 1 <= n <= cap})


def size_of(v: int, cap: int) -> int:
    """A payload size 1..cap from a code 0..3*cap-1: one code in three is an edge. Code 0 is 1 byte."""
    if v % 3 == 0:
        edges = size_edges(cap)
        return edges[(v // 3) % len(edges)]
    return v // 3 + 1


def sizes_for(cap: int) -> st.SearchStrategy[int]:
    return st.integers(0, 3 * cap - 1).map(lambda v: size_of(v, cap))


GAP_CODES = 6_002


def gap_of(v: int) -> int:
    """Card clock cycles before a request, from a code 0..6001: half are bursts of 0..3 cycles
    (slots fill up, the backlog is used), half 0..3000 cycles (sparse traffic). Code 0 is 0."""
    return (v // 2) % 4 if v % 2 == 0 else v // 2


pcie_links = st.builds(PcieLink,
                       generation=st.integers(1, 5),
                       lanes=st.sampled_from([1, 4, 16]),
                       max_payload_bytes=st.sampled_from([128, 256, 512]),
                       latency_ps=st.one_of(st.integers(0, 2_000), st.integers(0, 1_500_000)))

jitters = st.one_of(st.just(0), st.integers(1, 2_000), st.integers(1, 400_000))

card_params = st.builds(LinkCardParams,
                        clock_ps=st.sampled_from([1000, 3200, 4000]),
                        bridge_bits=st.sampled_from([256, 512]),
                        engine_land_ps=st.integers(0, 20_000),
                        reply_read_ps=st.one_of(st.just(0), st.integers(0, 80_000)),
                        reply_poll_period_ps=st.integers(1, 8_000))


@st.composite
def consumer_params(draw, enc: Encoding) -> ConsumerParams:
    period = draw(st.one_of(st.integers(1, 100), st.integers(1, 40_000)))
    return ConsumerParams(kind=draw(st.sampled_from(["cpu", "gpu", "fpga"])),
                          poll_period_ps=period,
                          poll_phase_ps=draw(st.integers(0, period - 1)),
                          poll_cost_ps=draw(st.one_of(st.just(0), st.integers(0, 60_000))),
                          service_ps=draw(st.one_of(st.just(0), st.integers(0, 400_000))),
                          encoding=enc.name,
                          read_ps=draw(st.integers(0, 40_000)),
                          piece_check_ps=draw(st.integers(0, 3_000)),
                          fence_ps=draw(st.one_of(st.just(0), st.integers(0, 60_000))))


@st.composite
def exchanges(draw, encodings=(CLASSIC, PER_PIECE), max_requests: int = 30) -> Exchange:
    enc = draw(st.sampled_from(encodings))
    slot_bytes = PIECE * draw(st.integers(2, 32))                  # 32..512 bytes
    cap = capacity(enc, slot_bytes)
    n = draw(st.integers(1, max_requests))
    # one integer per request codes its size and its gap (one draw each keeps generation cheap;
    # shrinking goes towards 1-byte requests back to back)
    codes = draw(st.lists(st.integers(0, 3 * cap * GAP_CODES - 1), min_size=n, max_size=n))
    reqs = [(size_of(c % (3 * cap), cap), gap_of(c // (3 * cap))) for c in codes]
    ex = Exchange(enc=enc, slots=draw(st.integers(1, 8)), slot_bytes=slot_bytes, requests=tuple(reqs),
                  fn=draw(st.sampled_from(sorted(FUNCTIONS))), seed=draw(st.integers(0, 2**32 - 1)),
                  req_link=draw(pcie_links), rep_link=draw(pcie_links),
                  req_jitter_ps=draw(jitters), rep_jitter_ps=draw(jitters),
                  card=draw(card_params), consumer=draw(consumer_params(enc)))
    note(repr(ex))
    return ex


# ---------------------------------------------------------------------------------------------
# 1. no request lost or answered twice
# ---------------------------------------------------------------------------------------------

@PROPERTY
@given(exchanges())
def test_every_request_is_answered_exactly_once_in_order_and_verified(ex):
    """Every submitted sequence number gets exactly one reply at the card (``on_reply``), in
    submission order, each passing the card's check against the reference function; the consumer
    serves each exactly once, in order; nothing is left outstanding or in the backlog and the
    kernel runs dry (no livelock)."""
    rig = Rig(ex).run()
    assert not rig.bad["lost"], rig.report("lost")
    assert rig.card.replies_seen == rig.consumer.served == len(ex.requests)


# ---------------------------------------------------------------------------------------------
# 2. no reply read before its ready word; no request served before it landed
# ---------------------------------------------------------------------------------------------

@PROPERTY
@given(exchanges())
def test_nothing_is_read_before_its_ready_word_has_landed(ex):
    """At the instant the card's reply poll takes reply ``k`` and again when it reads it out,
    every write of that reply has landed, the slot carries ``k`` in its sequence word (classic)
    or in every piece (per-piece), and its bytes are still exactly what the consumer wrote; the
    card then checks exactly the consumer's answer. At the instant of the consumer's poll that
    sees request ``k`` (poll answer time minus its cost), every write of the request has landed
    and is intact, and the consumer reads exactly the submitted payload. Underneath: landings on
    each path come in issue order, at their planned instants, with the bytes issued."""
    rig = Rig(ex).run()
    assert not rig.bad["order"], rig.report("order")
    assert not rig.bad["ready"], rig.report("ready")
    # the checks above ran for every message (a vacuous pass is a failure)
    assert len(rig.consumed) == len(rig.served) == len(ex.requests), \
        f"only {len(rig.served)} requests served and {len(rig.consumed)} replies read of {len(ex.requests)}"


# ---------------------------------------------------------------------------------------------
# 3. no slot reused early
# ---------------------------------------------------------------------------------------------

@PROPERTY
@given(exchanges())
def test_no_slot_is_reused_before_its_reply_is_consumed(ex):
    """Message ``k + slots`` is never posted into the request queue (nor its reply into the reply
    queue) before the card has consumed the reply to message ``k``, which used the same slot;
    every write stays inside its own slot."""
    rig = Rig(ex).run()
    assert not rig.bad["reuse"], rig.report("reuse")
    assert rig.req_path.writes >= len(ex.requests) and rig.rep_path.writes >= len(rig.consumed)
    assert len(rig.consumed) == len(ex.requests)


# ---------------------------------------------------------------------------------------------
# 4. per-piece reassembly
# ---------------------------------------------------------------------------------------------

@PROPERTY
@given(exchanges(encodings=(PER_PIECE,)))
def test_per_piece_messages_reassemble_exactly_at_every_size(ex):
    """Per-piece, sizes 1..(slot_bytes/16 - 1)*12 with the maximum and non-multiples of 12
    favoured, slots reused by messages of other sizes (stale pieces of a longer previous message
    remain behind a shorter one): the payload the consumer reads equals the submitted payload,
    by the module's decoder and by the contract's layout, and the card reads back exactly the
    reply; each request is one burst of exactly 1 + ceil(n/12) pieces."""
    rig = Rig(ex).run()
    assert not rig.bad["reassembly"], rig.report("reassembly")
    assert len(rig.seen_payload) == len(ex.requests)
    for seq, payload in rig.submitted.items():
        (i,) = rig.req_path.by_seq[seq]
        w = rig.req_path.issued[i]
        assert w.offset == rig._base(seq) and len(w.data) == PIECE * n_pieces(len(payload))
        assert w.data == piece_image(seq, payload)


# ---------------------------------------------------------------------------------------------
# 5. torn or stale pieces are detected
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tear:
    kind: str          # "stale" | "garbage" | "prefix" | "length"
    piece: int         # which piece (stale, garbage), or how many pieces landed (prefix); modulo the count
    word: int          # garbage sequence word, or the torn length field
    gap_ps: int        # after the previous landing


@st.composite
def tears(draw, seq: int, cap: int) -> Tear:
    kind = draw(st.sampled_from(["stale", "garbage", "prefix", "length"]))
    if kind == "length":
        word = draw(st.one_of(st.just(cap + 1), st.integers(cap + 1, 2**16 - 1)))
    else:
        word = draw(st.integers(0, 2**32 - 1).filter(lambda v: v != seq))
    return Tear(kind, draw(st.integers(0, 10**6)), word, draw(st.integers(0, 300_000)))


class SeenConsumer(PollingConsumer):
    """Records the instants at which the consumer's poll saw a request."""

    def __init__(self, *args):
        super().__init__(*args)
        self.seen: list[tuple[int, int, bytes]] = []

    def _seen(self, seq, base, at):
        self.seen.append((seq, at, self.enc.payload(self.requests.buf, base)))
        super()._seen(seq, base, at)


@st.composite
def torn_cases(draw):
    slot_bytes = PIECE * draw(st.integers(2, 32))
    cap = capacity(PER_PIECE, slot_bytes)
    slots = draw(st.integers(1, 8))
    seq = draw(st.integers(slots + 1, 3 * slots + 40))   # the slot held message seq - slots before
    size = draw(sizes_for(cap))
    steps = draw(st.lists(tears(seq, cap), min_size=1, max_size=4))
    return (slot_bytes, slots, seq, size, steps, draw(consumer_params(PER_PIECE)),
            draw(st.integers(0, 300_000)), draw(st.integers(0, 2**32 - 1)))


@PROPERTY
@given(torn_cases())
def test_torn_or_stale_pieces_are_never_served_until_repaired(case):
    """A per-piece slot for message ``s`` where one piece still holds the slot's previous message
    ``s - slots`` (stale), or carries a garbage sequence word, or only the first pieces of the
    burst have landed over the previous message (prefix), or piece 0's length field runs past the
    slot while every piece in reach carries ``s`` (length): ``Encoding.ready(limit=slot_bytes)``
    is False and the consumer does not serve it, through 1..4 such torn states landing one after
    another at random instants against random poll period/phase/cost; once the bad piece(s) are
    rewritten correctly the slot is ready and the consumer serves it exactly once, no earlier
    than the poll at or after the repair, reading the sent payload, and answers it."""
    slot_bytes, slots, s, size, steps, cparams, fix_gap, seed = case
    rnd = random.Random(seed)
    cap = capacity(PER_PIECE, slot_bytes)
    k = Kernel(seed)
    req = MemoryRegion("consumer.request_queue", "consumer", slots * slot_bytes)
    rep = MemoryRegion("card.reply_queue", "card", slots * slot_bytes)
    rep_path = PostedWritePath(k, "consumer->card", PcieLink(latency_ps=500_000), rep,
                               JitterStream(seed, "pcie.reply", 20_000))
    fn = FUNCTIONS["mix"]
    consumer = SeenConsumer(k, "consumer", cparams, PER_PIECE, req, rep_path, slots, slot_bytes, cap, serving(fn))
    consumer.next_seq = s            # it has served messages 1 .. s-1: it now polls slot (s-1) % slots for s
    base = ((s - 1) % slots) * slot_bytes

    # the slot holds the previous message (full size: every piece carries s - slots)
    prev = piece_image(s - slots, rnd.randbytes(cap))
    req.land(base, prev)
    payload = rnd.randbytes(size)
    good = piece_image(s, payload)
    k_pieces = len(good) // PIECE
    assert PER_PIECE.ready(req.buf, base, s - slots, limit=slot_bytes)      # sanity: the old one is complete

    not_ready: list[str] = []

    def land_checked(offset: int, data: bytes, what: str) -> None:
        req.land(offset, data)
        if PER_PIECE.ready(req.buf, base, s, limit=slot_bytes):
            not_ready.append(f"{what}: Encoding.ready is True at {k.now} ps")

    t = 0
    repair = (0, 0)                      # bytes [lo, hi) of the slot that the last torn state got wrong
    for tear in steps:
        img = bytearray(good)
        if tear.kind == "length":
            # piece 0 claims more than the slot holds; every piece within reach (to the end of the
            # region) carries s, so only the slot limit can reject it
            reach = min(len(req.buf) - base, PIECE * n_pieces(tear.word))
            img = bytearray(bytes(req.buf[base:base + reach]))
            img[:len(good)] = good
            for i in range(reach // PIECE):
                img[i * PIECE:i * PIECE + SEQ] = s.to_bytes(4, "little")
            img[LEN_AT:LEN_AT + 2] = tear.word.to_bytes(2, "little")
            repair = (0, PIECE)
        elif tear.kind == "prefix":
            m = 1 + tear.piece % (k_pieces - 1)              # pieces 0..m-1 landed, m.. still the old message
            img[m * PIECE:] = prev[m * PIECE:len(good)]
            repair = (m * PIECE, len(good))
        else:
            j = tear.piece % k_pieces
            if tear.kind == "stale":
                img[j * PIECE:(j + 1) * PIECE] = prev[j * PIECE:(j + 1) * PIECE]
            else:
                img[j * PIECE:j * PIECE + SEQ] = tear.word.to_bytes(4, "little")
                img[j * PIECE + SEQ:(j + 1) * PIECE] = rnd.randbytes(DATA)
            repair = (j * PIECE, (j + 1) * PIECE)
        t += tear.gap_ps
        k.at(t, land_checked, base, bytes(img), f"{tear.kind} {repair}")
    consumer.setup()
    k.run()
    assert not not_ready, not_ready
    assert consumer.seen == [] and consumer.served == 0 and rep_path.writes == 0

    # rewrite the bad piece(s) correctly, and only them
    lo, hi = repair
    t_fix = k.now + fix_gap
    k.at(t_fix, req.land, base + lo, good[lo:hi])
    k.run()
    assert PER_PIECE.ready(req.buf, base, s, limit=slot_bytes)
    assert len(consumer.seen) == 1 and consumer.served == 1
    seen_seq, t_seen, read = consumer.seen[0]
    assert seen_seq == s and t_seen - cparams.poll_cost_ps >= t_fix and read == payload
    # the reply went out and carries the function's answer; nothing more is served
    assert rep_path.writes == 1 and decode(PER_PIECE, rep.buf, base) == fn(payload)
    assert carries(PER_PIECE, rep.buf, base, s, len(payload))
    k.at(k.now + 1, req.land, base, good)     # the same message landing again is not a new request
    k.run()
    assert consumer.served == 1 and consumer.next_seq == s + 1
