"""The direct engine: the event model's arithmetic, round by round, without an event queue.

For one loop the only interactions are the recurrences between consecutive rounds (the
consumer's and the card's pollers re-arming, posted-write order on each path, slots), so every
instant can be computed in sequence with the same component functions the event model calls
(:meth:`Lane.plan`, :meth:`Poller.first_poll` arithmetic, :class:`Clock`) and the same
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

from twin.devices.host_runtime import STREAM as HOST_STREAM
from twin.engine import features, native, service_core
from twin.engine.hops import Hops
from twin.engine.service_core import host_instants
from twin.engine.spec import LoopResult, LoopSpec
from twin.engine.stop import Interrupted, take_stop
from twin.exchange.encoding import get_encoding
from twin.kernel import Clock, JitterStream, Lane
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
    di = (direct.hops.inner if direct.hops is not None else None) or {}
    ei = (event.hops.inner if event.hops is not None else None) or {}
    if set(di) != set(ei):
        raise EngineDisagreement(f"loop {direct.name!r}: engines record different inner instants: direct "
                                 f"{sorted(di)}, event {sorted(ei)}")
    pairs += [(f"hop {f}", np.asarray(di[f])[:n], np.asarray(ei[f])[:n]) for f in di]
    for f, a, b in pairs:
        if not np.array_equal(a, b):
            i = int(np.argmax(a != b))
            raise EngineDisagreement(f"loop {direct.name!r}: engines disagree on {f} at round {i + 1}: "
                                     f"direct {a[i]} ps, event {b[i]} ps")


class DirectNotApplicable(Exception):
    """The direct engine cannot reproduce the event model for this run (backlog)."""


Sink = Callable[[int, dict[str, np.ndarray]], None]
"""A streamed run's consumer of each batch of rounds: ``sink(first round (0-based), columns)``, the
columns (:data:`native.DIRECT_OUTS`, int64 ps, one entry per round of the batch) valid only during
the call (their memory is reused for the next batch)."""


def run_direct(spec: LoopSpec, progress: Progress | None = None, chunk_rounds: int = 10_000, *,
               extra_ps=None, reply_bytes: int | None = None, sink: Sink | None = None) -> LoopResult:
    """Compute every round of ``spec`` directly; same results as :func:`run_event` for a seed.

    For functions other than the echo (:mod:`twin.qec`): ``reply_bytes`` is the length of every
    reply and ``extra_ps[i]`` (int ps) is added to round ``i``'s function body, as a consumer that
    answers inline after ``service_ps + extra_ps[i]`` does in the event model.
    Raises :class:`DirectNotApplicable` when a request finds all ``spec.slots`` slots busy, and
    :class:`twin.engine.stop.Interrupted` (``partial``: the whole rounds so far) when a stop was
    requested (:func:`twin.engine.stop.request_stop`); it looks every ``chunk_rounds`` rounds, with
    ``progress``.

    ``sink`` (:data:`Sink`): stream the rounds instead of keeping them: each batch of ``chunk_rounds``
    rounds goes to ``sink`` in a buffer the next batch reuses, so memory does not grow with the run
    (the per-round ``traffic.gaps`` draws, when the scenario has them, are still one array of 8 B a
    round); the result then holds no rounds (its arrays are empty, ``stats["rounds"]`` the rounds
    computed). The rounds are the same, batch for batch, as an unstreamed run's (the core's state
    carries over). Needs the compiled core (DirectNotApplicable otherwise) and the echo.
    """
    if spec.faults.active:
        raise DirectNotApplicable(f"loop {spec.name!r}: fault injection needs the event model")
    if spec.traffic.feedback is not None:  # a Q1 program interpreted as replies arrive
        raise DirectNotApplicable(f"loop {spec.name!r}: the control system's programs wait_trigger/set_cond on the "
                                  "replies: their sequencers run on the event engine")
    if spec.event_only:
        raise DirectNotApplicable(f"loop {spec.name!r}: {spec.event_only}")
    if spec.traffic.share is not None:  # one flow of a stream shared over several devices (one timeline)
        raise DirectNotApplicable(f"loop {spec.name!r}: a share of a stream runs with its other flows: event model")
    ctl = spec.control
    nodes = (("consumer", "consumer", spec.model), ("link card", "link_card", spec.card_model),
             (f"control side ({ctl.kind})", ctl.kind, ctl.model))
    why = [f"the {what} is model {name}" for what, kind, name in nodes
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
    req = Lane("req", spec.request_link, JitterStream(spec.seed, spec.stream("pcie.request"), spec.jitter_ps))
    rep = Lane("rep", spec.reply_link, JitterStream(spec.seed, spec.stream("pcie.reply"), spec.jitter_ps))
    req_sizes = [len(d) for _, d in enc.writes(1, bytes(frame))]
    rep_sizes = req_sizes if reply_bytes is None else [len(d) for _, d in enc.writes(1, bytes(reply_bytes))]
    body = c.pre_service_ps(enc, frame) + c.service_ps
    fence = c.fence_ps
    clock = tr.make_clock(gen_phase)
    g = tr.gaps_array(spec.seed, spec.stream("gaps"))
    loop = _choose_loop(spec, clock, extra_ps is not None, sink is not None)
    if sink is not None:
        out = _rounds_compiled(spec, req, rep, req_sizes, rep_sizes, enc.per_piece, phase, body, fence, clock, g,
                               None, progress, chunk_rounds, sink=sink)
    else:
        out = loop(spec, req, rep, req_sizes, rep_sizes, enc.per_piece, phase, body, fence, clock, g, extra_ps,
                   progress, chunk_rounds)
    t_send, t_in, t_have, t_back, hops, stopped, more = out
    m = len(hops.land)  # whole rounds computed (all n, or those before a stop)
    if progress and stopped is None:
        progress(tr.rounds)
    stats = {"mismatches": 0, "backlog_max": 0, "posted_writes": req.writes + rep.writes, "poll_phase_ps": phase,
             **more}
    res = LoopResult(spec.name, "direct", t_send[:m], t_in[:m], t_have[:m], t_back[:m], np.ones(m, bool), stats, hops)
    if stopped is not None:
        stopped.partial = res
        raise stopped
    return res


COMPILED = True
"""Whether the direct engine runs its rounds in the compiled core when it can (tests and the
benchmarks set it False for the Python recurrence, the reference)."""


def _choose_loop(spec: LoopSpec, clock, extra: bool, streamed: bool):
    """The recurrence that computes the rounds: :func:`_rounds_compiled` where the compiled core
    computes ``spec`` (:mod:`twin.engine.features`; its fallback noted otherwise), else
    :func:`_rounds_python`. ``streamed`` needs the compiled core, on the echo (``extra``: per-round
    extra body): DirectNotApplicable otherwise."""
    fallback: str | None = "the Python recurrence asked for (direct.COMPILED)"
    if COMPILED:  # the compiled core, unless the spec has what it does not compute (twin.engine.features)
        fallback = features.refusal(spec, direct=True)
        if fallback is None and type(clock) is not Clock:
            fallback = f"a {type(clock).__name__}'s edges are the Python clock's"
        try:
            if fallback is None:
                native.core()
        except native.CoreUnavailable as e:
            fallback = str(e)
        if fallback is not None and not streamed:
            native.note_fallback(f"loop {spec.name!r}: direct engine in Python: {fallback}")
    if streamed and fallback is not None:
        raise DirectNotApplicable(f"loop {spec.name!r}: streamed rounds need the compiled core ({fallback})")
    if streamed and extra:
        raise DirectNotApplicable(f"loop {spec.name!r}: streamed rounds compute the echo only")
    return _rounds_python if fallback is not None else _rounds_compiled

def _slot_busy(spec: LoopSpec, i: int) -> DirectNotApplicable:
    return DirectNotApplicable(f"loop {spec.name!r}: round {i + 1} waits for a free slot")


def _rounds_compiled(spec, req, rep, req_sizes, rep_sizes, per_piece, phase, body, fence, clock, g, extra_ps,
                     progress, chunk_rounds, sink: Sink | None = None):
    """The rounds of :func:`run_direct` in the compiled core (``twin_direct_run`` in core.c), in
    chunks of ``chunk_rounds`` (progress and a stop request between them), on the same jitter
    blocks (:meth:`JitterStream.array`) and gaps. Returns t_send, t_in, t_have, t_back, the
    :class:`Hops`, the stop (or None) and statistics of its own (streamed: ``rounds``, those
    computed). ``sink``: each chunk's columns go there from one reused block (the core writes
    round i at its column's address + 8 i: the block's address is moved back by the chunk's first
    round), none is kept."""
    lib = native.core()
    tr, c, card, aur = spec.traffic, spec.consumer, spec.card, spec.aurora
    n = tr.rounds
    if len(req_sizes) > 4 or len(rep_sizes) > 2:
        raise AssertionError("an encoding of more than 4 request or 2 reply writes")

    def wire(lane, sizes, k):
        tail = getattr(lane.wire, "tail_ps", None)
        ser = [lane.wire.serialise_ps(s) for s in sizes] + [0] * (k - len(sizes))
        return ser, [tail(s) if tail else 0 for s in sizes] + [0] * (k - len(sizes))
    rser, rtail = wire(req, req_sizes, 4)
    pser, ptail = wire(rep, rep_sizes, 2)
    closed = tr.mode == "closed_loop"
    par = dict(n=n, slots=spec.slots, closed=int(closed), in_flight=tr.in_flight, per_piece=int(per_piece),
               phase=phase, poll=c.poll_period_ps, cost=c.poll_cost_ps, body=body, fence=fence,
               card_poll=card.reply_poll_period_ps, read=card.reply_read_ps, bridge=card.bridge_ps(tr.frame_bytes),
               land=card.engine_land_ps, card_clk=card.clock_ps, clk_period=clock.period_ps, clk_ppb=clock.ppb,
               clk_phase=clock.phase_ps, period_cycles=tr.period_cycles if not closed else 0, gap=tr.gap_ps,
               aurora=int(aur is not None), aur_ser=aur.serialise_ps(tr.frame_bytes) if aur else 0,
               aur_lat=aur.latency_ps if aur else 0, reply_send=card.reply_send_ps,
               req_lat=req.wire.latency_ps, rep_lat=rep.wire.latency_ps, n_req=len(req_sizes),
               req_ser0=rser[0], req_ser1=rser[1], req_ser2=rser[2], req_ser3=rser[3], req_tail0=rtail[0],
               req_tail1=rtail[1], req_tail2=rtail[2], req_tail3=rtail[3], rep_ser0=pser[0], rep_ser1=pser[1],
               rep_tail0=ptail[0], rep_tail1=ptail[1], has_gaps=int(g is not None), has_extra=int(extra_ps is not None),
               svc=0)
    svc = _service(spec, sink is not None)
    par["svc"] = 0 if svc is None else svc.address
    p = np.array([par[k] for k in native.DIRECT_PARAMS], np.int64)
    st = np.zeros(len(native.DIRECT_STATE), np.int64)
    S = {k: i for i, k in enumerate(native.DIRECT_STATE)}
    st[S["ts"]] = clock.edge(0)
    heap = np.zeros(2 * max(1, tr.in_flight), np.int64)
    if closed and tr.in_flight > 1:  # the first in_flight requests leave at edge 0, in order (a heap already)
        k = min(tr.in_flight, n)
        heap[0:2 * k:2] = clock.edge(0)
        heap[1:2 * k:2] = np.arange(k)
        st[S["scheduled"]] = st[S["heap_n"]] = k
    have = np.zeros(spec.slots, np.int64)
    gaps = np.ascontiguousarray(g, np.int64) if g is not None else np.zeros(1, np.int64)
    extra = np.ascontiguousarray(extra_ps[:n], np.int64) if extra_ps is not None else np.zeros(1, np.int64)
    # the outputs (native.DIRECT_OUTS): the columns that equal another by construction are that array
    # (and the core does not write them: address 0), the rest rows of one block the core writes whole
    # (np.empty: no zeroing pass; numpy's huge-page advice kept)
    same = _aliases(spec, clock, per_piece)
    own = [k for k in range(len(native.DIRECT_OUTS)) if k not in same]
    block = np.empty((len(own), n if sink is None else min(n, chunk_rounds)), np.int64)
    outs: list = [None] * len(native.DIRECT_OUTS)
    for row, k in enumerate(own):
        outs[k] = block[row]
    base = np.array([0 if a is None else a.ctypes.data for a in outs], np.int64)
    addrs = base.copy()
    for k, to in same.items():
        outs[k] = outs[to]
    fixed = [native.ptr(a) for a in (p, st, heap, have, gaps, extra, addrs)]
    pp, pst, pheap, phave, pgaps, pextra, pouts = fixed
    nr, np_ = len(req_sizes), (1 if per_piece else 2)
    ja, jb = req.jitter, rep.jitter
    done, stopped = 0, None
    while done < n:
        end = min(n, done + chunk_rounds)
        rj = np.ascontiguousarray(ja.array((end - done) * nr))
        pj = np.ascontiguousarray(jb.array((end - done) * np_))
        if sink is not None:  # round i lands at block column i - done; its modes' picks drawn for the batch
            addrs[:] = np.where(base != 0, base - 8 * done, 0)
            service_core.window(svc, done, end)
        rc = lib.twin_direct_run(pp, pst, end, pheap, phave, native.ptr(rj), native.ptr(pj), pgaps, pextra, pouts)
        if rc == ALIAS_BROKEN:
            raise AssertionError(f"loop {spec.name!r}: a column kept as another differs (direct._aliases)")
        if rc < 0:
            raise _slot_busy(spec, -rc - 1)
        if sink is not None:
            sink(done, {k: a[:end - done] for k, a in zip(native.DIRECT_OUTS, outs)})
        done = end
        if done % chunk_rounds == 0:  # between batches, as the Python recurrence looks up
            stopped = _between_batches(done, n, progress)
            if stopped is not None:
                break
    req.writes, rep.writes = done * nr, done * np_  # the posted writes each lane planned
    for a in outs:  # some columns are one array: nobody may change one through another
        a.flags.writeable = False
    cut = {k: a[:done if sink is None else 0] for k, a in zip(native.DIRECT_OUTS, outs)}
    hops = Hops(**{k: cut[k] for k in ("issue", "land", "seen", "start", "reply", "publish", "rland")},
                ready=cut["issue"])  # no round waits for a slot here (it refuses one that would)
    hops.inner = service_core.inner(svc, hops.start, hops.reply)
    return (cut["t_send"], cut["t_in"], cut["t_have"], cut["t_back"], hops, stopped,
            {} if sink is None else {"rounds": done})


def _service(spec, streamed: bool):
    """The consumer's service table for the core (:func:`twin.engine.service_core.pack`: idle cost,
    modes, host runtime, computed per round; ``streamed``: the modes drawn batch by batch), or None.
    Raises DirectNotApplicable for a host runtime in ``streamed`` rounds (its inner instants are not
    streamed)."""
    svc = service_core.pack(spec.consumer, spec.seed, spec.stream, spec.traffic.rounds, streamed)
    if streamed and svc is not None and svc.stages is not None:
        raise DirectNotApplicable(f"loop {spec.name!r}: streamed rounds do not carry a host runtime's instants")
    return svc


ALIAS_BROKEN = -(1 << 63)
"""``twin_direct_run``'s return for a round where a column :func:`_aliases` keeps as another differs."""


def _aliases(spec, clock, per_piece) -> dict[int, int]:
    """The output columns of :func:`_rounds_compiled` (indices in :data:`native.DIRECT_OUTS`) that
    equal another in every round by construction, as {column: the column it is}: t_back is t_have
    without an Aurora link (the reply is back when the card has it); t_in is t_send when, besides,
    every generator edge is a card clock edge (no drift, period and phase whole card cycles: the
    request enters at the edge it leaves); publish is reply per-piece (no fence: the reply's one
    write publishes it). The core checks each in every round it computes (``ALIAS_BROKEN``)."""
    same, col = {}, native.DIRECT_OUTS.index
    if spec.aurora is None:
        same[col("t_back")] = col("t_have")
        cclk = spec.card.clock_ps
        if clock.ppb == 0 and clock.period_ps % cclk == 0 and clock.phase_ps % cclk == 0:
            same[col("t_in")] = col("t_send")
    if per_piece:
        same[col("publish")] = col("reply")
    return same


def _rounds_python(spec, req, rep, req_sizes, rep_sizes, per_piece, phase, body, fence, clock, g, extra_ps,
                   progress, chunk_rounds):
    """The rounds of :func:`run_direct` in Python (the reference recurrence); same returns as
    :func:`_rounds_compiled` (the hops derived vectorised, :func:`_hops`; the statistics of a
    generator program's waits, ``program``)."""
    tr, c, card = spec.traffic, spec.consumer, spec.card
    frame = tr.frame_bytes
    P, cost = c.poll_period_ps, c.poll_cost_ps
    hr = c.host_runtime  # a dispatcher-queue-worker host (twin.devices.host_runtime)
    varies = c.varies or hr is not None
    host: list[tuple[int, int, int]] = []
    round_extra = _round_extra(spec, host) if varies else None
    extras: list[int] = []
    cP = card.reply_poll_period_ps
    read = card.reply_read_ps
    bridge, land_ps = card.bridge_ps(frame), card.engine_land_ps  # frames pass the bridge in order
    cclk = card.clock_ps
    aur = spec.aurora
    back = 0
    slots = spec.slots
    n = tr.rounds
    t_send = np.zeros(n, np.int64)
    t_in = np.zeros(n, np.int64)
    t_have = np.zeros(n, np.int64)
    t_back = np.zeros(n, np.int64)
    send, replied, nominal = _send_schedule(tr, clock, None if g is None else g.tolist(), t_back)
    have = [0] * slots  # ring: t_have of the last `slots` rounds
    tx_free = rx_free = bridge_free = 0
    t_free_c = 0       # consumer armed (first poll instant >= this)
    last_have = 0      # card's watch for request j starts at max(t_in_j, t_have_{j-1})
    req_plan, rep_plan = req.plan, rep.plan
    issues: list[int] = []  # per round: the instants the other hops follow from (_hops)
    lands: list[int] = []
    replies: list[int] = []
    rlands: list[int] = []
    keep_issue, keep_land, keep_reply, keep_rland = issues.append, lands.append, replies.append, rlands.append
    check_at = chunk_rounds - 1  # the next round after which the loop looks up (progress, stop)
    stopped = None
    for i in range(n):
        ts = send(i, back)
        t_send[i] = ts
        if aur is None:
            arrive = ts
        else:
            tx_free = max(ts, tx_free) + aur.serialise_ps(frame)
            arrive = tx_free + aur.latency_ps
        tin = -((-arrive) // cclk) * cclk
        t_in[i] = tin
        if i >= slots and have[i % slots] > tin:
            raise _slot_busy(spec, i)
        bridge_free = (tin if tin > bridge_free else bridge_free) + bridge
        t_issue = bridge_free + land_ps
        for s in req_sizes:
            land = req_plan(t_issue, s)
        t = land if land > t_free_c else t_free_c
        t2 = phase + -((phase - t) // P) * P + cost + body
        if round_extra is not None:  # the gap: the thread free at t_free_c, the poll taking it at t2 - cost - body
            x = round_extra(i, t2 - cost - body - t_free_c)
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
        if replied is not None:
            replied(back)
        if i == check_at:
            check_at += chunk_rounds
            stopped = _between_batches(i + 1, n, progress)
            if stopped is not None:
                break
    m = len(issues)  # whole rounds computed (all n, or those before a stop)
    if varies:  # the per-round service extra counts in the body the hops take back from the reply
        ex = np.asarray(extras, np.int64)[:m]
        extra_ps = ex if extra_ps is None else ex + np.asarray(extra_ps, np.int64)[:m]
    hops = _hops(np.asarray(issues, np.int64), np.asarray(lands, np.int64), np.asarray(replies, np.int64),
                 np.asarray(rlands, np.int64), phase, P, cost, body, fence if not per_piece else 0, extra_ps)
    if hr is not None:
        hops.inner = host_instants(hops.start, hops.reply, np.asarray(host, np.int64).reshape(-1, 3)[:m])
    stats = {} if nominal is None else {"program": _program_stats(t_send[:m], nominal[:m], tr)}
    return t_send[:m], t_in[:m], t_have[:m], t_back[:m], hops, stopped, stats


def _round_extra(spec, host: list[tuple[int, int, int]]) -> Callable[[int, int], int]:
    """``extra(i, gap)``: round ``i``'s service beyond the constant body (ps) after an idle gap of
    ``gap``, as the event model's consumer adds it: the idle cost and service modes
    (:meth:`PollingConsumer.extra_ps`) and a host runtime's enqueue, wake and hand-back
    (:meth:`PollingConsumer.host_before_ps`), whose (enqueue, wake, hand-back) it appends to ``host``."""
    c, n = spec.consumer, spec.traffic.rounds
    picks = c.mode_picks(spec.seed, spec.stream("consumer.modes"), n) if c.modes else None
    hr = c.host_runtime
    hdraws: list[float] = hr.draws(spec.seed, spec.stream(HOST_STREAM), n).tolist() if hr is not None else []
    varies, keep = c.varies, host.append

    def extra(i: int, gap: int) -> int:
        x = c.round_extra_ps(picks[i] if picks is not None else None, gap) if varies else 0
        if hr is not None:
            hs = hr.stages_ps(hdraws[i], gap)
            keep(hs)
            x += hs[0] + hs[1] + hs[2]
        return x
    return extra


def _send_schedule(tr, clock, gaps: list[int] | None, t_back: np.ndarray):
    """When each request of the Python recurrence leaves, as the event model's generator sends them
    (``tr``: the traffic; ``gaps``: per round, ps, or None; ``t_back``: the rounds' reply-back
    instants, ps, as the loop fills them). Returns ``(send, replied, nominal)``: ``send(i, back)``
    the send instant of request ``i`` (ps; ``back``: the previous round's reply back);
    ``replied(back)`` to call after each round's reply is back, or None when no request waits on it
    that way; ``nominal``: a generator program's nominal send instants (filled by ``send``), or None."""
    n = tr.rounds
    first = clock.edge(0)
    waits = tr.waits  # each request may wait for an earlier reply (traffic.program.waits)
    if waits is not None:  # the edges of the event model's generator (Waits.next_edge; replies back already)
        nominal = np.zeros(n, np.int64)
        cyc = 0  # the clock edge index of the last send

        def send_program(i: int, back: int) -> int:
            nonlocal cyc
            nom, cyc = waits.next_edge(clock, cyc, i, tr.period_cycles, t_back.item) if i else (0, 0)
            nominal[i] = clock.edge(nom)
            return clock.edge(cyc)
        return send_program, None, nominal
    if tr.mode != "closed_loop":  # open loop: on its period's edges, or after each gap
        ts = first

        def send_open(i: int, back: int) -> int:
            nonlocal ts
            if i:
                ts = clock.edge(i * tr.period_cycles) if gaps is None else clock.at_or_after(ts + gaps[i - 1])
            return ts
        return send_open, None, None
    if tr.in_flight > 1:
        return _in_flight_schedule(tr, clock, gaps)
    gap_ps = tr.gap_ps

    def send_closed(i: int, back: int) -> int:  # one in flight: sent when the previous reply is back, after its gap
        return clock.at_or_after(back + (gap_ps if gaps is None else gaps[i - 1])) if i else first
    return send_closed, None, None


def _in_flight_schedule(tr, clock, gaps: list[int] | None):
    """:func:`_send_schedule` of a closed loop with several requests in flight: each reply starts the
    next request's gap; requests leave in time order and take their sequence numbers in that order (a
    short gap may overtake a long one), as the generator's own events do: a heap of (send instant,
    order scheduled)."""
    n = tr.rounds
    pending = [(clock.edge(0), j) for j in range(min(tr.in_flight, n))]
    scheduled = len(pending)

    def send(i: int, back: int) -> int:
        return heappop(pending)[0]

    def replied(back: int) -> None:  # this reply starts request scheduled + 1's gap
        nonlocal scheduled
        if scheduled < n:
            gap = tr.gap_ps if gaps is None else gaps[scheduled - 1]
            heappush(pending, (clock.at_or_after(back + gap), scheduled))
            scheduled += 1
    return send, replied, None


def _between_batches(done: int, n: int, progress: Progress | None) -> Interrupted | None:
    """After ``done`` of ``n`` rounds, between batches (both recurrences look up there): the stop
    to end on when one was requested (:mod:`twin.engine.stop`), else None after ``progress(done)``."""
    if take_stop():
        return Interrupted(f"at round {done} of {n}")
    if progress:
        progress(done)
    return None


def _program_stats(t_send: np.ndarray, nominal: np.ndarray, tr) -> dict:
    """A generator program's stalls over the rounds computed (send instants against its nominal
    edges, ps), as the event model's generator counts them."""
    from twin.devices.generator import program_stats
    return {**program_stats(t_send, nominal), "nominal_period_ps": tr.period_ps}


def _hops(issue: np.ndarray, land: np.ndarray, reply: np.ndarray, rland: np.ndarray, phase: int, period: int,
          cost: int, body: int, fence: int, extra_ps) -> Hops:
    """Every round's hops from the four instants the loop keeps (issue, land, reply, reply landed):
    the thread took round i ``body`` (+ ``extra_ps``) before its reply, the publish follows the reply
    by ``fence`` (0 per-piece), and the idle-thread poll is the first poll after the landing."""
    n = len(land)
    extra = 0 if extra_ps is None else np.asarray(extra_ps, np.int64)[:n]
    seen = phase + -((phase - land) // period) * period + cost
    return Hops(issue=issue, land=land, seen=seen, start=reply - body - extra, reply=reply, publish=reply + fence,
                rland=rland, ready=issue)  # no round waits for a slot (the loop refuses one that would)
