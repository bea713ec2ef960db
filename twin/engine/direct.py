"""The direct engine: the event model's arithmetic, round by round, without an event queue.

For one loop the only interactions are the recurrences between consecutive rounds (the
consumer's and the card's pollers re-arming, posted-write order on each path, slots), so every
instant can be computed in sequence with the same component functions the event model calls
(:meth:`PostedWritePath.plan`, :meth:`Poller.first_poll` arithmetic, :class:`Clock`) and the same
random streams in the same order. It moves no bytes: the byte-level checks live in the event
model, and ``tests/test_engines.py`` holds the two engines to identical per-round timestamps.
It refuses (``DirectNotApplicable``) when a request enters the card while every slot is still
busy (the reply that frees one comes strictly later); then only the event model is
authoritative. A slot freed at the very instant the request enters gives the same timing in
either event order (the engine issues at ``max(now, ready)``, ``ready`` fixed when the frame passed
the bridge), so that case is computed.
"""
from __future__ import annotations

from heapq import heappop, heappush
from typing import Callable

import numpy as np

from twin.engine.hops import Hops
from twin.engine.spec import LoopResult, LoopSpec
from twin.engine.stop import Interrupted, take_stop
from twin.exchange.encoding import get_encoding
from twin.kernel import JitterStream, PostedWritePath
from twin.nodes.models import model_for

Progress = Callable[[int], None]


def direct_computes(kind: str, model: str) -> bool:
    """Whether the direct engine computes a ``kind`` node of ``model`` (the model registry says:
    its ``supports["engines"]`` lists ``direct``)."""
    return "direct" in model_for(kind, model).supports.get("engines", ())


class EngineDisagreement(RuntimeError):
    """The direct engine and the event model gave different timestamps for the same rounds."""



def check_same(direct: LoopResult, event: LoopResult, n: int) -> None:
    """Raise :class:`EngineDisagreement` unless the first ``n`` rounds have the same timestamps and
    the same hops in both engines."""
    pairs = [(f, getattr(direct, f)[:n], getattr(event, f)[:n]) for f in ("t_send", "t_in", "t_have", "t_back")]
    pairs += [(f"hop {f}", getattr(direct.hops, f)[:n], getattr(event.hops, f)[:n])
              for f in ("issue", "land", "seen", "start", "reply", "publish", "rland")]
    for f, a, b in pairs:
        if not np.array_equal(a, b):
            i = int(np.argmax(a != b))
            raise EngineDisagreement(f"loop {direct.name!r}: engines disagree on {f} at round {i + 1}: "
                                     f"direct {a[i]} ps, event {b[i]} ps")


class DirectNotApplicable(Exception):
    """The direct engine cannot reproduce the event model for this run (backlog)."""


def run_direct(spec: LoopSpec, progress: Progress | None = None, chunk_rounds: int = 10_000, *,
               extra_ps=None, reply_bytes: int | None = None) -> LoopResult:
    """Compute every round of ``spec`` directly; same results as :func:`run_event` for a seed.

    For functions other than the echo (:mod:`twin.qec`): ``reply_bytes`` is the length of every
    reply and ``extra_ps[i]`` (int ps) is added to round ``i``'s function body, as a consumer that
    answers inline after ``service_ps + extra_ps[i]`` does in the event model.
    Raises :class:`DirectNotApplicable` when a request finds all ``spec.slots`` slots busy, and
    :class:`twin.engine.stop.Interrupted` (``partial``: the whole rounds so far) when a stop was
    requested (:func:`twin.engine.stop.request_stop`); it looks every ``chunk_rounds`` rounds, with
    ``progress``.
    """
    if spec.faults.active:
        raise DirectNotApplicable(f"loop {spec.name!r}: fault injection needs the event model")
    if spec.traffic.share is not None:  # one flow of a stream shared over several devices (one timeline)
        raise DirectNotApplicable(f"loop {spec.name!r}: a share of a stream runs with its other flows: event model")
    why = [f"the {what} is model {name}" for what, kind, name in (("consumer", "consumer", spec.model),
                                                                     ("link card", "link_card", spec.card_model))
           if not direct_computes(kind, name)]  # what this loop has that the direct engine does not compute
    if spec.function != 0 and reply_bytes is None:
        from twin.runtime.functions import lookup
        try:
            fname = lookup(spec.function).name
        except KeyError:
            fname = f"id {spec.function}"
        why.append(f"function {fname} is not the echo")
    if why:
        raise DirectNotApplicable(f"loop {spec.name!r}: {' and '.join(why)}; the direct engine computes only "
                                  "the echo in model sim, the others need the event model")
    tr = spec.traffic
    enc = get_encoding(spec.consumer.encoding)
    frame = tr.frame_bytes
    phase, gen_phase, salt = spec.draws()
    c = spec.consumer
    card = spec.card
    req = PostedWritePath(None, "req", spec.request_link, None,
                          JitterStream(spec.seed, spec.stream("pcie.request"), spec.jitter_ps))
    rep = PostedWritePath(None, "rep", spec.reply_link, None,
                          JitterStream(spec.seed, spec.stream("pcie.reply"), spec.jitter_ps))
    req_sizes = [len(d) for _, d in enc.writes(1, bytes(frame))]
    rep_sizes = req_sizes if reply_bytes is None else [len(d) for _, d in enc.writes(1, bytes(reply_bytes))]
    per_piece = enc.per_piece
    P, cost = c.poll_period_ps, c.poll_cost_ps
    body = c.pre_service_ps(enc, frame) + c.service_ps
    varies = c.varies  # idle cost and service modes (twin.devices.service), as PollingConsumer.extra_ps
    picks = c.mode_picks(spec.seed, spec.stream("consumer.modes"), tr.rounds) if c.modes else None
    extras: list[int] = []
    fence = c.fence_ps
    cP = card.reply_poll_period_ps
    read = card.reply_read_ps
    bridge, land_ps = card.bridge_ps(frame), card.engine_land_ps  # frames pass the bridge in order
    cclk = card.clock_ps
    clock = tr.make_clock(gen_phase)
    aur = spec.aurora
    closed = tr.mode == "closed_loop"
    in_flight = tr.in_flight
    back = 0
    # several in flight: each reply starts the next request's gap; requests leave in time order and
    # take their sequence numbers in that order (a short gap may overtake a long one), as the
    # generator's own events do: a heap of (send instant, order scheduled)
    pending = [(clock.edge(0), j) for j in range(min(in_flight, tr.rounds))] if closed and in_flight > 1 else None
    scheduled = len(pending) if pending is not None else 0
    g = tr.gaps_array(spec.seed, spec.stream("gaps"))
    gaps = None if g is None else g.tolist()
    slots = spec.slots

    n = tr.rounds
    t_send = np.zeros(n, np.int64)
    t_in = np.zeros(n, np.int64)
    t_have = np.zeros(n, np.int64)
    t_back = np.zeros(n, np.int64)
    have = [0] * slots  # ring: t_have of the last `slots` rounds
    tx_free = rx_free = bridge_free = 0
    t_free_c = 0       # consumer armed (first poll instant >= this)
    last_have = 0      # card's watch for request j starts at max(t_in_j, t_have_{j-1})
    ts = clock.edge(0)
    req_plan, rep_plan = req.plan, rep.plan
    issues: list[int] = []  # per round: the instants the other hops follow from (_hops)
    lands: list[int] = []
    replies: list[int] = []
    rlands: list[int] = []
    keep_issue, keep_land, keep_reply, keep_rland = issues.append, lands.append, replies.append, rlands.append
    check_at = chunk_rounds - 1  # the next round after which the loop looks up (progress, stop)
    stopped = None
    for i in range(n):
        if i and not closed:
            ts = clock.edge(i * tr.period_cycles) if gaps is None else clock.at_or_after(ts + gaps[i - 1])
        elif pending is not None:
            ts = heappop(pending)[0]
        elif closed and i:  # one in flight: sent when the previous round's reply is back, after its gap
            ts = clock.at_or_after(back + (tr.gap_ps if gaps is None else gaps[i - 1]))
        t_send[i] = ts
        if aur is None:
            arrive = ts
        else:
            tx_free = max(ts, tx_free) + aur.serialise_ps(frame)
            arrive = tx_free + aur.latency_ps
        tin = -((-arrive) // cclk) * cclk
        t_in[i] = tin
        if i >= slots and have[i % slots] > tin:
            raise DirectNotApplicable(f"loop {spec.name!r}: round {i + 1} waits for a free slot")
        bridge_free = (tin if tin > bridge_free else bridge_free) + bridge
        t_issue = bridge_free + land_ps
        for s in req_sizes:
            land = req_plan(t_issue, s)
        t = land if land > t_free_c else t_free_c
        t2 = phase + -((phase - t) // P) * P + cost + body
        if varies:  # the gap: the thread free at t_free_c, the poll that takes the request at t2 - cost - body
            x = c.round_extra_ps(picks[i] if picks is not None else None, t2 - cost - body - t_free_c)
            extras.append(x)
            t2 += x
        if extra_ps is not None:
            t2 += int(extra_ps[i])
        if per_piece:
            rland = rep_plan(t2, rep_sizes[0])
            t_free_c = t2
        else:
            rep_plan(t2, rep_sizes[0])
            t_free_c = t2 + fence
            rland = rep_plan(t_free_c, rep_sizes[1])
        keep_issue(t_issue)
        keep_land(land)
        keep_reply(t2)
        keep_rland(rland)
        armed = tin if tin > last_have else last_have
        t = rland if rland > armed else armed
        th = -((-t) // cP) * cP + read
        have[i % slots] = th
        last_have = th
        t_have[i] = th
        if aur is None:
            back = th
        else:
            rx_free = max(th + card.reply_send_ps, rx_free) + aur.serialise_ps(frame)
            back = rx_free + aur.latency_ps
        t_back[i] = back
        if pending is not None and scheduled < n:  # this reply starts request scheduled + 1's gap
            gap = tr.gap_ps if gaps is None else gaps[scheduled - 1]
            heappush(pending, (clock.at_or_after(back + gap), scheduled))
            scheduled += 1
        if i == check_at:  # between batches: progress, and a stop request (twin.engine.stop)
            check_at += chunk_rounds
            if take_stop():
                stopped = Interrupted(f"at round {i + 1} of {n}")
                break
            if progress:
                progress(i + 1)
    m = len(issues)  # whole rounds computed (all n, or those before a stop)
    if progress and stopped is None:
        progress(n)
    stats = {"mismatches": 0, "backlog_max": 0, "posted_writes": req.writes + rep.writes, "poll_phase_ps": phase}
    if varies:  # the per-round service extra counts in the body the hops take back from the reply
        ex = np.asarray(extras, np.int64)
        extra_ps = ex if extra_ps is None else ex + np.asarray(extra_ps, np.int64)[:m]
    hops = _hops(np.array(issues, np.int64), np.array(lands, np.int64), np.array(replies, np.int64),
                 np.array(rlands, np.int64), phase, P, cost, body, fence if not per_piece else 0, extra_ps)
    res = LoopResult(spec.name, "direct", t_send[:m], t_in[:m], t_have[:m], t_back[:m], np.ones(m, bool), stats, hops)
    if stopped is not None:
        stopped.partial = res
        raise stopped
    return res


def _hops(issue: np.ndarray, land: np.ndarray, reply: np.ndarray, rland: np.ndarray, phase: int, period: int,
          cost: int, body: int, fence: int, extra_ps) -> Hops:
    """Every round's hops from the four instants the loop keeps (issue, land, reply, reply landed):
    the thread took round i ``body`` (+ ``extra_ps``) before its reply, the publish follows the reply
    by ``fence`` (0 per-piece), and the idle-thread poll is the first poll after the landing."""
    n = len(land)
    extra = 0 if extra_ps is None else np.asarray(extra_ps, np.int64)[:n]
    seen = phase + -((phase - land) // period) * period + cost
    return Hops(issue=issue, land=land, seen=seen, start=reply - body - extra, reply=reply, publish=reply + fence,
                rland=rland)
