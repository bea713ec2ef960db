"""Where the time goes: every round's instants at each hop of its flow, and the latency budget.

A round's card-boundary round trip (request enters the link card -> the card has read the reply)
is cut at the instants the engine records (integer ps, one int64 array per instant, one entry
per round):

=========  =========================================================================
t_in       the request enters the link card (a card clock edge)
ready      the card's exchange engine could issue it (bridge, landing logic): a free slot would
           send it now (known where the engine records slot waits: :meth:`Hops.with_slot_wait`)
issue      the card's exchange engine issues the request's posted writes (after any wait for a
           free slot: the ``slot_wait`` stage; merged into ``card`` where ``ready`` is not known)
land       the request's last write (its sequence word, or last piece) has landed in the
           consumer's request queue
seen       the first poll after the landing has its answer (poll instant + poll cost): when an
           idle thread would have seen it
start      the consumer's thread takes it (later than ``seen`` when it was busy: with this
           queue's previous request, or another queue's)
reply      the reply's first posted write is issued (read, function, compute)
publish    the reply's publishing write is issued (classic: after the release fence; per-piece:
           the same instant as ``reply``)
rland      the reply's publishing write has landed in the card's reply queue
t_have     the card's reply poller has seen it and read it out (``reply_read``)
=========  =========================================================================

A flow whose request is handed from the receiving device to a second one
(:mod:`twin.devices.handoff`) has four more instants between ``start`` and ``reply``, in
``Hops.inner``: ``h_issue`` (stage 1 posts the request into the hand-off queue, after reading and
pre-processing it), ``h_land`` (landed there), ``h_seen`` (stage 2's poll that saw it has its
answer), ``h_start`` (stage 2's thread takes it); their stages are ``preprocess``,
``handoff_write``, ``handoff_poll`` and ``handoff_queue``, and ``service`` is stage 2's.

The stages between consecutive instants add up to ``t_have - t_in`` exactly. A node that does not
expose an instant (a Verilated node keeps its inside to itself) leaves it at -1; its stage is
merged into the next stage and named ``a+b`` (e.g. ``poll+queue+service`` inside an RTL consumer,
whose posted writes still give ``reply``, ``publish`` and ``rland``: :mod:`twin.rtl.boundary`), so
the budget still adds up exactly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

import numpy as np

from twin.stats import Counts, percentile, ranks

INSTANTS = ("t_in", "issue", "land", "seen", "start", "reply", "publish", "rland", "t_have")
CSV_COLUMNS = ("t_send", "t_in", "ready", "issue", "land", "seen", "start", "reply", "publish", "rland", "t_have",
               "t_back")
"""Every instant of a round as the per-round files write them (``<name>_ps``): the send and the
reply's return at the control system around the card-boundary instants (:meth:`Hops.instant` of
each between them)."""
STAGES = ("card", "request_write", "poll", "queue", "service", "fence", "reply_write", "card_poll")
# NB: a stall (a blackout of the poller) falls in "poll": the thread was stopped, not queueing
"""Stage k runs from instant k to instant k+1: card (bridge, engine; the wait for a free slot too
where no ``slot_wait`` stage splits it out), request_write (the posted write's wire and landing),
poll (landing -> the poll that saw it), queue (waiting for the consumer's thread), service (read,
function, compute), fence (release fence before the publishing word), reply_write (its wire and
landing), card_poll (card's poll and read-out)."""
SLOT_WAIT = "slot_wait"
"""The stage a card's request spends waiting for a free slot (ready -> issue), split out of ``card``
where the engine records the wait (:meth:`Hops.with_slot_wait`)."""


Column = TypeVar("Column", np.ndarray, list[int])
"""How a :class:`Hops` holds each instant's rounds: int64 arrays (a result), or Python lists (the event
engine's recorder, written one instant at a time)."""
Other = TypeVar("Other", np.ndarray, list[int])


@dataclass
class Hops(Generic[Column]):
    """Per-round instants of one flow inside the card boundary (int64 ps, -1 where not known):
    ``Hops[np.ndarray]`` in a result, ``Hops[list[int]]`` while the event engine records them."""

    issue: Column
    land: Column
    seen: Column
    start: Column
    reply: Column
    publish: Column
    rland: Column
    inner: dict[str, Column] | None = None  # a hand-off's instants between start and reply (twin.devices.handoff)
    ready: Column | None = None  # the request ready to issue (issue - its wait for a free slot); None: not known

    @classmethod
    def recorder(cls, n: int) -> Hops[list[int]]:
        """Hops for ``n`` rounds held in Python lists (cheap to write one instant at a time while
        the event engine runs), every instant unknown (-1); :meth:`frozen` turns them into arrays."""
        def unknown() -> list[int]:
            return [-1] * n
        return Hops(unknown(), unknown(), unknown(), unknown(), unknown(), unknown(), unknown())

    def frozen(self) -> Hops[np.ndarray]:
        """The same hops as int64 arrays."""
        return self._map(lambda v: np.asarray(v, np.int64))

    def head(self, n: int) -> Hops[Column]:
        """The first ``n`` rounds."""
        return self._map(lambda v: v[:n])

    def _map(self, f: Callable[[Column], Other]) -> Hops[Other]:
        """Hops of ``f`` of each instant's rounds (a hand-off's inside too)."""
        inner = None if self.inner is None else {k: f(v) for k, v in self.inner.items()}
        return Hops(f(self.issue), f(self.land), f(self.seen), f(self.start), f(self.reply), f(self.publish),
                    f(self.rland), inner=inner, ready=None if self.ready is None else f(self.ready))

    def with_slot_wait(self, slot_wait_ps) -> Hops[np.ndarray]:
        """These hops with ``ready`` = issue - the wait for a free slot (``slot_wait_ps``: per
        request in issue order, int64 ps, as the card records it; a card issues its requests in
        round order, so entry i is round i's), so the budget's ``card`` stage ends where the
        ``slot_wait`` stage begins. Raises ValueError when fewer waits than rounds are given."""
        issue = np.asarray(self.issue, np.int64)
        w = np.asarray(slot_wait_ps, np.int64)
        if len(w) < len(issue):
            raise ValueError(f"{len(w)} slot waits for {len(issue)} rounds")
        h = self._map(lambda v: np.asarray(v, np.int64))
        h.ready = issue - w[:len(issue)]
        return h

    def instant(self, name: str) -> np.ndarray:
        """One instant's rounds by name (``ready``, ``issue`` .. ``rland``), int64 ps, -1 in every
        round where it is not known."""
        v = getattr(self, name)
        return np.full(len(self.issue), -1, np.int64) if v is None else np.asarray(v, np.int64)

    def instants(self) -> tuple[str, ...]:
        """The instants of these hops in order (``INSTANTS``, with ``ready`` after ``t_in`` when
        known and a hand-off's inside after ``start``)."""
        head = ("t_in", "ready") if self.ready is not None else ("t_in",)
        i = INSTANTS.index("start") + 1
        return head + INSTANTS[1:i] + tuple(self.inner or ()) + INSTANTS[i:]

    def columns(self, t_in: np.ndarray, t_have: np.ndarray) -> dict[str, np.ndarray]:
        """Every instant by name (``t_in``, ``ready`` when known, .. ``t_have``, a hand-off's
        inside), int64 ps."""
        inner = {k: np.asarray(v, np.int64) for k, v in (self.inner or {}).items()}
        ready = {} if self.ready is None else {"ready": np.asarray(self.ready, np.int64)}
        return {"t_in": t_in, **ready, **{f: getattr(self, f) for f in INSTANTS[1:-1]}, **inner, "t_have": t_have}


def stage_names(instants: tuple[str, ...]) -> tuple[str, ...]:
    """The stage after each instant but the last: :data:`STAGES`, with ``slot_wait`` after ``card``
    when ``instants`` has ``ready`` (``card`` then ends at ``ready``) and a hand-off's stages
    (``twin.devices.handoff.INNER_STAGES``) after ``queue`` when it has their instants."""
    stages: tuple[str, ...] = STAGES
    if "ready" in instants:
        stages = ("card", SLOT_WAIT) + STAGES[1:]
    if len(instants) == len(stages) + 1:
        return stages
    from twin.devices.handoff import INNER_STAGES
    i = stages.index("queue") + 1
    return stages[:i] + INNER_STAGES + stages[i:]


def _spans(cols: dict[str, np.ndarray], names: list[str]) -> list[tuple[str, str, str]]:
    """(stage name, from instant, to instant) of each stage :func:`stage_times` reports: between the
    instants known in every round (``t_in`` and ``t_have`` always), the unknown ones' stages merged."""
    stages = stage_names(tuple(names))
    known = [n for n in names if n in ("t_in", "t_have") or (cols[n] >= 0).all()]
    return [("+".join(stages[names.index(a):names.index(b)]), a, b) for a, b in zip(known, known[1:])]


def stage_times(t_in: np.ndarray, t_have: np.ndarray, hops: Hops) -> dict[str, np.ndarray]:
    """Per-round duration of each stage (int64 ps), unknown instants merged into the next stage.
    The values of each round add up to ``t_have - t_in`` exactly."""
    cols = hops.columns(t_in, t_have)
    return {name: cols[b] - cols[a] for name, a, b in _spans(cols, list(hops.instants()))}


def round_at(rtt: np.ndarray, k: int, counts: Counts | None = None) -> int:
    """The round (0-based index) at position ``k`` of the rounds ordered by round trip, ties in round
    order (a stable sort's), found by selection: the (k - fewer)-th of the rounds whose round trip
    is the k-th smallest. ``counts``: :class:`twin.stats.Counts` of ``rtt`` when the caller has them."""
    c = Counts.of(rtt) if counts is None else counts
    v = int(c.order_statistics([k])[0])
    return int(np.flatnonzero(rtt == v)[k - c.below(v)])


def rounds_from(rtt: np.ndarray, k: int, counts: Counts | None = None) -> np.ndarray:
    """Mask of the rounds at positions ``k`` .. end of the rounds ordered by round trip (ties in round
    order, as :func:`round_at`): every round slower than the k-th, and the last of its ties."""
    c = Counts.of(rtt) if counts is None else counts
    v = int(c.order_statistics([k])[0])
    mask = rtt > v
    mask[np.flatnonzero(rtt == v)[k - c.below(v):]] = True
    return mask


def budget(t_in: np.ndarray, t_have: np.ndarray, hops: Hops) -> list[dict]:
    """The latency budget of one flow: per stage its p50 and p99 (ns, inverted CDF), its time in the
    median round (the p50 round: the round at the p50's position when the rounds are ordered by round
    trip, ties in round order, so its stages add up to the p50 round trip) and that share of it, and
    its mean over the slowest 1 % of rounds (those from position ``int(0.99 * (n - 1))`` on: the
    means add up to their mean round trip). Each stage is computed once, into one buffer; the
    percentiles, the median round and the slowest rounds by counts or selection, no sort."""
    rtt = t_have - t_in
    n = len(rtt)
    if not n:
        return []
    counts = Counts.of(rtt)
    mid = round_at(rtt, int(ranks(n, 50)), counts)
    tail = rounds_from(rtt, int(0.99 * (n - 1)), counts)
    m = int(np.count_nonzero(tail))
    cols = hops.columns(t_in, t_have)
    d = np.empty(n, np.int64)
    rows = []
    for name, a, b in _spans(cols, list(hops.instants())):
        np.subtract(cols[b], cols[a], out=d)
        p50, p99 = (int(x) for x in percentile(d, [50, 99]))
        rows.append(_budget_row(name, p50, p99, int(d[mid]), int(rtt[mid]), int(d[tail].sum(dtype=np.int64)), m))
    return rows


def _budget_row(name: str, p50: int, p99: int, in_mid: int, rtt_mid: int, tail_sum: int, tail_n: int) -> dict:
    """One stage's row of :func:`budget` from its p50 and p99, its time in the median round (whose
    round trip is ``rtt_mid``) and its exact sum over the ``tail_n`` slowest rounds (all int ps)."""
    return {"stage": name, "p50_ns": p50 / 1000, "p99_ns": p99 / 1000, "median_round_ns": in_mid / 1000,
            "p99_rounds_mean_ns": round(float(np.float64(tail_sum) / tail_n) / 1000, 3),
            "share_median_round": round(float(in_mid) / max(1, rtt_mid), 6)}


def slowest_round(t_in: np.ndarray, t_have: np.ndarray, hops: Hops) -> dict | None:
    """Where the slowest round's time went: ``{round (1-based), rtt_ns, stages: {stage: ns}, held_by:
    the largest stage}`` (the stages add up to ``rtt_ns``), or None without rounds. Traces a stall
    to the hop that held it."""
    rtt = t_have - t_in
    if not len(rtt):
        return None
    i = int(np.argmax(rtt))
    cols = hops.columns(t_in, t_have)
    st = {name: int(cols[b][i] - cols[a][i]) / 1000 for name, a, b in _spans(cols, list(hops.instants()))}
    return {"round": i + 1, "rtt_ns": int(rtt[i]) / 1000, "stages": st, "held_by": max(st, key=lambda name: st[name])}


class FlowStats:
    """A flow's statistics accumulated batch by batch, in memory that does not grow with its rounds:
    the round trip's and the loop's counts (:class:`twin.stats.Counts`: exact percentiles and mean),
    each stage's counts, the slowest round, the deadline misses, and the budget. Equal, key for key,
    to :func:`twin.stats.summary_ns`, :func:`budget` and :func:`slowest_round` of all the rounds at once.

    Two passes over the same rounds in the same batches: :meth:`add` every batch (the counts), then
    :meth:`pick` every batch again (the median round and the slowest 1 % are positions in the
    round-trip order that only the whole run's counts give: the round at the p50's position, and the
    stages' sums over the rounds from position ``int(0.99 * (n - 1))``, ties in round order as in
    :func:`round_at`). Every instant must be known in every round (the direct engine's)."""

    def __init__(self, deadline_ps: int | None = None) -> None:
        self.rtt, self.loop = Counts(), Counts()
        self.stages: dict[str, Counts] = {}
        self.spans: list[tuple[str, str, str]] | None = None
        self.deadline_ps, self.misses = deadline_ps, 0
        self.slow: tuple[int, int, dict[str, int]] | None = None  # (rtt, round 0-based, stages)
        self._second: dict | None = None

    @property
    def n(self) -> int:
        return self.rtt.n

    @property
    def nbytes(self) -> int:
        """The memory its counts hold (bytes)."""
        return self.rtt.nbytes + self.loop.nbytes + sum(c.nbytes for c in self.stages.values())

    def _cols(self, t_in, t_have, hops: Hops) -> dict[str, np.ndarray]:
        cols = hops.columns(t_in, t_have)
        spans = _spans(cols, list(hops.instants()))
        if self.spans is None:
            self.spans = spans
            self.stages = {name: Counts() for name, _, _ in spans}
        elif spans != self.spans:
            raise ValueError("an instant known in some rounds only: its stages cannot be accumulated")
        return cols

    def add(self, first: int, t_send, t_in, t_have, t_back, hops: Hops) -> None:
        """The first pass over a batch of rounds (``first``: its first round, 0-based; int64 ps)."""
        cols = self._cols(t_in, t_have, hops)
        rtt = t_have - t_in
        if not len(rtt):
            return
        loop = t_back - t_send
        self.rtt.add(rtt)
        self.loop.add(loop)
        if self.deadline_ps is not None:
            self.misses += int(np.count_nonzero(loop > self.deadline_ps))
        assert self.spans is not None
        for name, a, b in self.spans:
            self.stages[name].add(cols[b] - cols[a])
        i = int(np.argmax(rtt))
        if self.slow is None or int(rtt[i]) > self.slow[0]:  # the first of the slowest, as np.argmax
            self.slow = (int(rtt[i]), first + i, {name: int(cols[b][i] - cols[a][i]) for name, a, b in self.spans})

    def pick(self, first: int, t_in, t_have, hops: Hops) -> None:
        """The second pass over the same batch (after every :meth:`add`)."""
        if self._second is None:
            n = self.n
            k50, k99 = int(ranks(n, 50)), int(0.99 * (n - 1))
            v50, v99 = (int(v) for v in self.rtt.order_statistics([k50, k99]))
            self._second = {"v50": v50, "need": k50 - self.rtt.below(v50), "seen50": 0, "mid": None,
                            "v99": v99, "skip": k99 - self.rtt.below(v99), "seen99": 0, "tail_n": n - k99,
                            "tail": {name: 0 for name in self.stages}}
        w = self._second
        cols = self._cols(t_in, t_have, hops)
        rtt = t_have - t_in
        if w["mid"] is None:
            eq = np.flatnonzero(rtt == w["v50"])
            if w["seen50"] + len(eq) > w["need"]:
                j = int(eq[w["need"] - w["seen50"]])
                w["mid"] = {name: int(cols[b][j] - cols[a][j]) for name, a, b in self.spans or ()}
            w["seen50"] += len(eq)
        tail = rtt > w["v99"]
        eq = np.flatnonzero(rtt == w["v99"])
        tail[eq[max(0, w["skip"] - w["seen99"]):]] = True
        w["seen99"] += len(eq)
        for name, a, b in self.spans or ():
            w["tail"][name] += int((cols[b][tail] - cols[a][tail]).sum(dtype=np.int64))

    def budget(self) -> list[dict]:
        """:func:`budget` of every round (after both passes)."""
        if not self.n:
            return []
        w = self._second
        if w is None or w["mid"] is None:
            raise RuntimeError("the budget needs the second pass (pick) over every round")
        rtt_mid = sum(w["mid"].values())
        rows = []
        for name, c in self.stages.items():
            p50, p99 = (int(x) for x in c.percentile([50, 99]))
            rows.append(_budget_row(name, p50, p99, w["mid"][name], rtt_mid, w["tail"][name], w["tail_n"]))
        return rows

    def slowest_round(self) -> dict | None:
        """:func:`slowest_round` of every round."""
        if self.slow is None:
            return None
        rtt, i, stages = self.slow
        st = {name: v / 1000 for name, v in stages.items()}
        return {"round": i + 1, "rtt_ns": rtt / 1000, "stages": st, "held_by": max(st, key=lambda name: st[name])}
