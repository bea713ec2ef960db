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

A consumer with a host runtime (:mod:`twin.devices.host_runtime`: a dispatcher, a worker queue,
a worker) has three instants between ``start`` and ``reply`` in ``Hops.inner``: ``hr_enqueued``,
``hr_awake``, ``hr_decoded``; its stages there are ``host_enqueue``, ``host_wake``, ``service``
(the consumer's own) and ``host_handback``.

The stages between consecutive instants add up to ``t_have - t_in`` exactly. A node that does not
expose an instant (a Verilated node keeps its inside to itself) leaves it at -1; its stage is
merged into the next stage and named ``a+b`` (e.g. ``poll+queue+service`` inside an RTL consumer,
whose posted writes still give ``reply``, ``publish`` and ``rland``: :mod:`twin.rtl.boundary`), so
the budget still adds up exactly.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Generic, TypeVar

import numpy as np

from twin.engine.flow_counts import add_columns
from twin.stats import Counts, SumsByValue, ranks

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
    from twin.devices.host_runtime import AFTER, BEFORE, INNER
    if INNER[0] in instants:  # a host runtime: its stages around the consumer's service
        i = stages.index("service")
        return stages[:i] + BEFORE + ("service",) + AFTER + stages[i + 1:]
    if len(instants) == len(stages) + 1:
        return stages
    from twin.devices.handoff import INNER_STAGES
    i = stages.index("queue") + 1
    return stages[:i] + INNER_STAGES + stages[i:]


def _spans(cols: dict[str, np.ndarray], names: list[str]) -> list[tuple[str, str, str]]:
    """(stage name, from instant, to instant) of each stage :func:`stage_times` reports: between the
    instants known in every round (``t_in`` and ``t_have`` always), the unknown ones' stages merged."""
    stages = stage_names(tuple(names))
    known = [n for n in names if n in ("t_in", "t_have") or not len(cols[n]) or int(cols[n].min()) >= 0]
    return [("+".join(stages[names.index(a):names.index(b)]), a, b) for a, b in zip(known, known[1:])]


def _same(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether ``x`` and ``y`` are one array (the same memory, shape and strides: a column the engine
    keeps as another, :func:`twin.engine.direct._aliases`), so their difference is 0 without a look."""
    return x is y or (x.__array_interface__["data"][0] == y.__array_interface__["data"][0]
                      and x.shape == y.shape and x.strides == y.strides and x.dtype == y.dtype)


def stage_times(t_in: np.ndarray, t_have: np.ndarray, hops: Hops) -> dict[str, np.ndarray]:
    """Per-round duration of each stage (int64 ps), unknown instants merged into the next stage.
    The values of each round add up to ``t_have - t_in`` exactly."""
    cols = hops.columns(t_in, t_have)
    return {name: cols[b] - cols[a] for name, a, b in _spans(cols, list(hops.instants()))}


def budget(t_in: np.ndarray, t_have: np.ndarray, hops: Hops) -> list[dict]:
    """The latency budget of one flow (int64 ps in, one row per stage out, ns): per stage its p50
    and p99 (inverted CDF), its time in the median round and that share of it, and its mean over
    the slowest 1 % of rounds (:func:`budget_rows`' definitions). Every stage counted at once
    (:func:`twin.engine.flow_counts.add_columns`: the compiled core's two passes, no stage's times
    stored): the percentiles from each stage's :class:`twin.stats.Counts`, the rest from the stages'
    sums per round-trip value (:class:`twin.stats.SumsByValue`), no sort: the same rows as a
    streamed run's (:class:`FlowStats`) of the same rounds."""
    if not len(t_in):
        return []
    cols = {k: _c64(v) for k, v in hops.columns(t_in, t_have).items()}
    spans = _spans(cols, list(hops.instants()))
    by_rtt = SumsByValue(len(spans))
    stages = [Counts() for _ in spans]
    pairs = [(cols[a], cols[b]) for _, a, b in spans] + [(cols["t_in"], cols["t_have"])]
    add_columns(pairs, [*stages, None], by_rtt, key=len(spans))
    pct = [(int(p[0]), int(p[1])) for p in (c.percentile([50, 99]) for c in stages)]
    return budget_rows([name for name, _, _ in spans], pct, by_rtt)


def _c64(a) -> np.ndarray:
    """``a`` as a C-contiguous int64 array (itself where it is one)."""
    return np.ascontiguousarray(a, np.int64)


def budget_rows(names: list[str], pct: list[tuple[int, int]], by_rtt: SumsByValue) -> list[dict]:
    """The budget's rows, one per stage ``names[j]`` (keys ``stage``, ``p50_ns``, ``p99_ns``,
    ``median_round_ns``, ``share_median_round``, ``p99_rounds_mean_ns``), from each stage's
    (p50, p99) (int ps, ``pct[j]``) and the rounds' stage sums per round-trip value (``by_rtt``:
    the round trips as keys, stage j's times as column j, int ps). Of the n rounds:

    - the median round: the mean of the rounds whose round trip is the p50 (inverted CDF, rank
      ``ranks(n, 50)``), all of its ties: stage j's sum over them over their count. Its stages add
      up to the p50 exactly; each is reported in integer ps, rounded by largest remainder
      (each the floor of its mean or one more, the ps left over going to the stages with the
      largest remainders, ties to the earlier stage) so that the reported stages add up to the p50
      exactly too. ``share_median_round``: the stage's exact mean over the p50 (rounded to 1e-6).
    - the slowest 1 %: the ``tail_n = n - int(0.99 * (n - 1))`` rounds from position
      ``k = int(0.99 * (n - 1))`` on in round-trip order; the rounds tied at that position's value
      v99 count in proportion: stage j's mean is (S_j[> v99] + S_j[v99] * t / c) / tail_n, with
      S_j the stage's sums, c the rounds at v99 and t those of them at positions >= k. Exact (its
      float64 the correctly rounded fraction, to 1e-3 ns), independent of the rounds' order; the
      stages' means add up to the slowest rounds' mean round trip.
    """
    n = by_rtt.n
    if not n:
        return []
    vals, cnt, sums = by_rtt.values, by_rtt.counts, by_rtt.sums
    i50 = by_rtt.position(int(ranks(n, 50)))
    v50, c50 = int(vals[i50]), int(cnt[i50])
    mid = _apportion([int(x) for x in sums[:, i50]], c50, v50)
    k99 = int(0.99 * (n - 1))
    i99 = by_rtt.position(k99)
    c99, tail_n = int(cnt[i99]), n - k99
    ties = tail_n - (n - int(cnt[:i99 + 1].sum()))  # the rounds at v99 from position k99 on (1 .. c99)
    rows = []
    for j, (name, (p50, p99)) in enumerate(zip(names, pct)):
        tail = Fraction(c99 * int(sums[j, i99 + 1:].sum()) + ties * int(sums[j, i99]), c99 * tail_n)
        rows.append({"stage": name, "p50_ns": p50 / 1000, "p99_ns": p99 / 1000, "median_round_ns": mid[j] / 1000,
                     "p99_rounds_mean_ns": round(float(tail) / 1000, 3),
                     "share_median_round": round(float(Fraction(int(sums[j, i50]), c50 * max(1, v50))), 6)})
    return rows


def _apportion(sums: list[int], count: int, total: int) -> list[int]:
    """``sums[j] / count`` in integers that add up to ``total`` (= sum(sums) / count, exactly): each
    the floor or one more, the units left over to the largest remainders (ties to the earlier)."""
    q, r = zip(*(divmod(s, count) for s in sums)) if sums else ((), ())
    out = list(q)
    short = total - sum(out)
    if not 0 <= short <= len(out) or sum(sums) != total * count:
        raise AssertionError(f"stages summing to {sum(sums)} over {count} rounds of round trip {total}")
    for j in sorted(range(len(out)), key=lambda j: -r[j])[:short]:
        out[j] += 1
    return out


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
    each stage's counts, the stages' sums per round-trip value (:class:`twin.stats.SumsByValue`:
    the budget's median round and slowest 1 %, :func:`budget_rows`), the slowest round, the deadline
    misses. Equal, key for key, to :func:`twin.stats.summary_ns`, :func:`budget` and
    :func:`slowest_round` of all the rounds at once, however they are cut into batches. One pass:
    :meth:`add` each batch once. Every instant must be known in every round (the direct engine's)."""

    def __init__(self, deadline_ps: int | None = None) -> None:
        self.rtt, self._loop = Counts(), Counts()
        self._loop_is_rtt = True  # every batch so far had the loop's instants the round trip's (the same arrays)
        self.stages: dict[str, Counts] = {}
        self.by_rtt: SumsByValue | None = None
        self.spans: list[tuple[str, str, str]] | None = None
        self.deadline_ps, self.misses = deadline_ps, 0
        self.slow: tuple[int, int, dict[str, int]] | None = None  # (rtt, round 0-based, stages)

    @property
    def n(self) -> int:
        return self.rtt.n

    @property
    def loop(self) -> Counts:
        """The loop's counts (t_back - t_send): the round trip's while every batch had the same
        instants for both (no Aurora link and the requests entering the card as they leave)."""
        return self.rtt if self._loop_is_rtt else self._loop

    @property
    def nbytes(self) -> int:
        """The memory its counts and sums hold (bytes)."""
        return (self.rtt.nbytes + (0 if self._loop_is_rtt else self._loop.nbytes)
                + sum(c.nbytes for c in self.stages.values()) + (0 if self.by_rtt is None else self.by_rtt.nbytes))

    def _cols(self, t_in, t_have, hops: Hops) -> dict[str, np.ndarray]:
        cols = hops.columns(t_in, t_have)
        spans = _spans(cols, list(hops.instants()))
        if self.spans is None:
            self.spans = spans
            self.stages = {name: Counts() for name, _, _ in spans}
            self.by_rtt = SumsByValue(len(spans))
        elif spans != self.spans:
            raise ValueError("an instant known in some rounds only: its stages cannot be accumulated")
        return cols

    def add(self, first: int, t_send, t_in, t_have, t_back, hops: Hops) -> None:
        """Count a batch of rounds (``first``: its first round, 0-based; int64 ps), each batch once:
        every stage and the round trip in one call (:func:`twin.engine.flow_counts.add_columns`)."""
        cols = self._cols(t_in, t_have, hops)
        m = len(t_in)
        if not m:
            return
        same = _same(t_back, t_have) and _same(t_send, t_in)
        if self._loop_is_rtt and not same:  # from here on counted apart: the batches so far were the round trip's
            self._loop_is_rtt, self._loop = False, copy.deepcopy(self.rtt)
        assert self.spans is not None and self.by_rtt is not None
        spans = self.spans
        pairs = [(_c64(cols[a]), _c64(cols[b])) for _, a, b in spans] + [(_c64(t_in), _c64(t_have))]
        k = len(spans)
        _, _, i = add_columns(pairs, [*self.stages.values(), self.rtt], self.by_rtt, key=k, arg=k)
        if not self._loop_is_rtt or self.deadline_ps is not None:
            loop = t_have - t_in if same else t_back - t_send
            if not self._loop_is_rtt:
                self._loop.add(loop)
            if self.deadline_ps is not None:
                self.misses += int(np.count_nonzero(loop > self.deadline_ps))
        rtt_i = int(t_have[i] - t_in[i])
        if self.slow is None or rtt_i > self.slow[0]:  # the first of the slowest, as np.argmax
            self.slow = (rtt_i, first + i, {name: int(cols[b][i] - cols[a][i]) for name, a, b in spans})

    def budget(self) -> list[dict]:
        """:func:`budget` of every round counted."""
        if not self.n or self.by_rtt is None:
            return []
        pct = [(int(p[0]), int(p[1])) for p in (c.percentile([50, 99]) for c in self.stages.values())]
        return budget_rows(list(self.stages), pct, self.by_rtt)

    def slowest_round(self) -> dict | None:
        """:func:`slowest_round` of every round."""
        if self.slow is None:
            return None
        rtt, i, stages = self.slow
        st = {name: v / 1000 for name, v in stages.items()}
        return {"round": i + 1, "rtt_ns": rtt / 1000, "stages": st, "held_by": max(st, key=lambda name: st[name])}
