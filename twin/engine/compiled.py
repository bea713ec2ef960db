"""The compiled event core: :func:`twin.engine.event.run_topology` for topologies of built-in
``sim`` nodes, in C (``twin_event_*`` in twin/engine/c/core.c), with identical results.

It runs the same events as the simpy reference, at the same instants, in the same order, on the
same random streams (each lane's jitter drawn here in numpy from its :class:`JitterStream`, the
gaps from the flow's stream) and moves the contract's bytes: the card writes each request's slot
image (classic: header and payload, then the sequence word; per-piece: one burst of pieces) into
the consumer's request queue, the consumer's poller sees it complete (:meth:`Encoding.ready`), the
echo's reply is written back the same way, and the card reads it out, checks it byte for byte
against the request's payload and hashes it (SHA-256, ``reply_digest``). Per-round timestamps,
hops, statistics (events, polls, posted writes, lanes, threads, slot waits) equal the reference's.

Coverage (:func:`refusal` says why anything else stays on the simpy reference): consumers and link
cards of model ``sim`` (a registry entry with ``compiled`` in ``supports["engines"]``), the echo
(function 0), no faults, the default workload (payloads :func:`payload_for`, the echo's reference,
in-order replies, no kept replies), no share of a stream, clocks without drift, any wire (PCIe,
RoCE, Aurora), one or many flows sharing lanes, bridges and serving threads, closed loop (any
in-flight count, gap or random gaps), open loop (period or random gaps), any slots and backlog.
"""
from __future__ import annotations

import numpy as np

from twin.engine import features, native
from twin.engine.counters import flow_stats, slot_bytes_of
from twin.engine.hops import Hops
from twin.engine.native import CoreUnavailable, note_fallback
from twin.engine.spec import LoopResult
from twin.engine.stop import CHECK_REPLIES, Interrupted, stop_requested, take_stop
from twin.engine.topology import FlowWorkload, Topology
from twin.exchange.encoding import get_encoding
from twin.kernel import JitterStream

__all__ = ["run", "refusal", "CoreUnavailable", "note_fallback"]

FLOW_PARAMS = ("n", "slots", "slot_bytes", "frame", "per_piece", "closed", "in_flight", "period_cycles", "gap",
               "has_gaps", "syn_bits", "salt", "function", "clk_period", "clk_ppb", "clk_phase", "poll", "phase",
               "cost", "body", "fence", "thread", "card_clk", "bridge_ps", "land_ps", "read", "reply_send",
               "card_poll", "bridge", "lreq", "lrep", "lup", "ldown", "req_ser0", "req_ser1", "req_tail0",
               "req_tail1", "rep_ser0", "rep_ser1", "rep_tail0", "rep_tail1", "up_ser", "up_tail", "down_ser",
               "down_tail")
"""A flow's parameters, in the order of core.c's ``FP_*``."""
FLOW_OUTS = ("t_send", "t_in", "t_have", "t_back", "issue", "land", "seen", "start", "reply", "publish", "rland",
             "slot_wait", "ok")
"""The columns of a flow's per-round record, in the order of core.c's ``FO_*``: one (len, n) int64
array whose rows are the columns, each contiguous, taken as they are (no copy)."""
FLOW_STATS = ("mismatches", "backlog_max", "consumer_polls", "card_polls", "corrupted", "sent", "received", "issued",
              "d0", "d1", "d2", "d3")
"""A flow's counters as twin_event_stats writes them (``FS_*``; d0..d3: the digest's 32 bytes)."""
MAX_FRAME = 65535  # the scratch of core.c's step holds one message of the contract's largest length


def refusal(topo: Topology) -> str | None:
    """Why the compiled core does not run ``topo`` (one line naming the flow), or None."""
    for fl in topo.flows:
        spec = fl.spec
        why = [features.refusal(spec)] if features.refusal(spec) else []
        if fl.workload != FlowWorkload():
            why.append("its workload (payloads, reference, functions, kept replies or reply order) is Python")
        if spec.rtl is not None or spec.bridge is not None:
            why.append("it has RTL or live-bridge options")
        if spec.traffic.frame_bytes > MAX_FRAME:
            why.append(f"frames over {MAX_FRAME} bytes")
        if why:
            return f"flow {spec.name!r}: {'; '.join(why)}"
    return None


def _wire(wire, sizes: list[int]) -> tuple[list[int], list[int]]:
    tail = getattr(wire, "tail_ps", None)
    return [wire.serialise_ps(s) for s in sizes], [tail(s) if tail else 0 for s in sizes]


def run(topo: Topology, progress=None, chunk_rounds: int = 10_000) -> list[LoopResult]:
    """Run ``topo`` (which :func:`refusal` accepts) in the compiled core; the same returns, stop
    behaviour (:class:`Interrupted` every :data:`CHECK_REPLIES` replies) and progress as
    :func:`twin.engine.event.run_topology`. Raises :class:`CoreUnavailable` without the core and
    RuntimeError when the timeline runs dry with requests outstanding."""
    lib = native.core()
    if lib.twin_event_columns() != len(FLOW_OUTS):  # the record's layout: core.c's FO_* and FLOW_OUTS agree
        raise CoreUnavailable(f"the compiled core writes {lib.twin_event_columns()} columns a round, "
                              f"twin/engine/compiled.py reads {len(FLOW_OUTS)}: rebuild twin")
    lanes: dict = {}   # (a, b) -> [index, wire, JitterStream, draws needed]
    threads: dict = {}
    bridges: dict = {}
    phases: dict = {}
    clocks: dict = {}
    rows, outs, keep = [], [], []

    def lane(a, b, wire, stream, jitter_ps, seed, writes):
        if (a, b) not in lanes:
            lanes[(a, b)] = [len(lanes), wire, JitterStream(seed, stream, jitter_ps), 0]
        ln = lanes[(a, b)]
        ln[3] += writes
        return ln
    for fl in topo.flows:
        spec, tr = fl.spec, fl.spec.traffic
        enc = get_encoding(spec.consumer.encoding)
        n, frame = tr.rounds, tr.frame_bytes
        phase, gen_phase, salt = spec.draws()
        phase = phases.setdefault(fl.consumer, phase)
        gen_phase = clocks.setdefault(fl.generator, gen_phase)
        sizes = [len(d) for _, d in enc.writes(1, bytes(frame))]
        req = lane(fl.card, fl.consumer, spec.request_link, fl.lane_stream("request"), spec.jitter_ps, spec.seed,
                   n * len(sizes))
        rep = lane(fl.consumer, fl.card, spec.reply_link, fl.lane_stream("reply"), spec.jitter_ps, spec.seed,
                   n * len(sizes))
        up = down = None
        if spec.aurora is not None:
            up = lane(fl.generator, fl.card, spec.aurora, f"{fl.generator}->{fl.card}.aurora", 0, spec.seed, n)
            down = lane(fl.card, fl.generator, spec.aurora, f"{fl.card}->{fl.generator}.aurora", 0, spec.seed, n)
        threads.setdefault(fl.consumer, len(threads))
        bridges.setdefault(fl.card, len(bridges))
        rser, rtail = _wire(req[1], sizes)
        pser, ptail = _wire(rep[1], sizes)
        rser, rtail, pser, ptail = (x + [0] * (2 - len(x)) for x in (rser, rtail, pser, ptail))
        useri, usert = _wire(up[1], [frame]) if up else ([0], [0])
        downs, downt = _wire(down[1], [frame]) if down else ([0], [0])
        clock = tr.make_clock(gen_phase)
        c, card = spec.consumer, spec.card
        closed = tr.mode == "closed_loop"
        g = tr.gaps_array(spec.seed, fl.gaps_stream or spec.stream("gaps"))
        par = dict(n=n, slots=spec.slots, slot_bytes=slot_bytes_of(spec), frame=frame, per_piece=int(enc.per_piece),
                   closed=int(closed), in_flight=tr.in_flight, period_cycles=0 if closed else tr.period_cycles,
                   gap=tr.gap_ps, has_gaps=int(g is not None), syn_bits=tr.syndrome_bits, salt=salt,
                   function=spec.function, clk_period=clock.period_ps, clk_ppb=clock.ppb, clk_phase=clock.phase_ps,
                   poll=c.poll_period_ps, phase=phase, cost=c.poll_cost_ps,
                   body=c.pre_service_ps(enc, frame) + c.service_ps, fence=c.fence_ps, thread=threads[fl.consumer],
                   card_clk=card.clock_ps, bridge_ps=card.bridge_ps(frame), land_ps=card.engine_land_ps,
                   read=card.reply_read_ps, reply_send=card.reply_send_ps, card_poll=card.reply_poll_period_ps,
                   bridge=bridges[fl.card], lreq=req[0], lrep=rep[0], lup=up[0] if up else -1,
                   ldown=down[0] if down else -1, req_ser0=rser[0], req_ser1=rser[1], req_tail0=rtail[0],
                   req_tail1=rtail[1], rep_ser0=pser[0], rep_ser1=pser[1], rep_tail0=ptail[0], rep_tail1=ptail[1],
                   up_ser=useri[0], up_tail=usert[0], down_ser=downs[0], down_tail=downt[0])
        rows.append([par[k] for k in FLOW_PARAMS])
        # zeros, untouched until the core writes them (the pages come as the rounds do); a round's hops are all
        # written by the time its reply is back, and only those rounds are kept (no -1 "not reached" to fill in)
        table = np.zeros((len(FLOW_OUTS), n), np.int64)
        outs.append((table, np.ascontiguousarray(g, np.int64) if g is not None else None))
    fp = np.ascontiguousarray(np.array(rows, np.int64).reshape(-1))
    fo = np.array([x for t, g in outs for x in (t.ctypes.data, 0 if g is None else g.ctypes.data)], np.int64)
    order = sorted(lanes.values(), key=lambda ln: ln[0])
    jit = [ln[2].array(ln[3]) if ln[2].scale_ps else None for ln in order]
    keep.extend(j for j in jit if j is not None)
    lp = np.array([ln[1].latency_ps for ln in order], np.int64)
    lj = np.array([0 if j is None else j.ctypes.data for j in jit], np.int64)
    h = lib.twin_event_new(len(topo.flows), native.ptr(fp), native.ptr(fo), len(order), native.ptr(lp),
                           native.ptr(lj), len(threads), len(bridges))
    if not h:
        raise MemoryError(f"topology {topo.name!r}: the compiled core could not allocate its queues")
    try:
        total = sum(f.spec.traffic.rounds for f in topo.flows)
        stats = np.zeros(3 + len(FLOW_STATS) * len(topo.flows) + 4 * len(order) + 2 * len(threads), np.int64)
        counter, stopped = 0, None
        check = min(chunk_rounds, CHECK_REPLIES)
        next_progress = min(total, chunk_rounds)
        run_until = lib.twin_event_run  # looked up once: this loop turns every CHECK_REPLIES replies
        while counter < total:
            target = counter + check
            if target > next_progress:  # next_progress <= total
                target = next_progress
            counter = run_until(h, target)
            if counter < 0:
                lib.twin_event_stats(h, native.ptr(stats))
                raise RuntimeError(f"topology {topo.name!r}: event queue ran dry after {int(stats[2])} of {total} "
                                   "replies")
            if counter == next_progress:
                next_progress = min(total, next_progress + chunk_rounds)
                if progress:
                    progress(counter)
            if counter < total and stop_requested():
                lib.twin_event_stats(h, native.ptr(stats))
                received = stats[3:3 + len(FLOW_STATS) * len(topo.flows)].reshape(-1, len(FLOW_STATS))[:, 6]
                if received.all() and take_stop():
                    stopped = Interrupted(f"after {counter} of {total} replies")
                    break
        lib.twin_event_stats(h, native.ptr(stats))
    finally:
        lib.twin_event_free(h)
    return _results(topo, outs, stats, order, lanes, threads, phases, stopped)


def _results(topo, outs, stats, order, lanes, threads, phases, stopped):
    """The per-flow :class:`LoopResult`s from the core's arrays and counters, as run_topology builds them."""
    events, now = int(stats[0]), int(stats[1])
    per = stats[3:3 + len(FLOW_STATS) * len(topo.flows)].reshape(-1, len(FLOW_STATS))
    o = 3 + len(FLOW_STATS) * len(topo.flows)
    lane_st = stats[o:o + 4 * len(order)].reshape(-1, 4)
    thr_st = stats[o + 4 * len(order):].reshape(-1, 2)
    names = {ln[0]: key for key, ln in lanes.items()}
    res_all = []
    for fl, (table, _), st in zip(topo.flows, outs, per):
        a = dict(zip(FLOW_OUTS, table))
        spec = fl.spec
        n = spec.traffic.rounds
        m = n
        if stopped:  # whole rounds: replies back by now, a prefix
            back = (a["t_back"] > 0) & (a["t_back"] <= now)
            m = n if back.all() else int(np.argmin(back))
        lreq, lrep = lanes[(fl.card, fl.consumer)][0], lanes[(fl.consumer, fl.card)][0]
        digest = st[8:12].tobytes().hex()
        s = flow_stats(spec.faults, n, now, int(st[0]), int(st[1]), int(st[2]), int(st[3]),
                       int(lane_st[lreq][0] + lane_st[lrep][0]), phases[fl.consumer], digest,
                       {"frames": 0, "resent": 0}, 0, int(st[4]))
        s["slot_wait_ps"] = a["slot_wait"][:int(st[7])]
        hops = Hops(*(a[k][:m] for k in ("issue", "land", "seen", "start", "reply", "publish", "rland")))
        res = LoopResult(spec.name, "event", a["t_send"][:m], a["t_in"][:m], a["t_have"][:m], a["t_back"][:m],
                         a["ok"][:m].astype(bool), {"events": events, **s}, hops)
        if stopped:
            res.stats["mismatches"] = res.mismatches
            res.stats.pop("reply_digest", None)
            res.stats["faults"]["injected"]["corrupt_piece"] = sum(1 for x in spec.faults.corrupt_rounds if x <= m)
        res_all.append(res)
    shared = {"lanes": {names[i][0] + "->" + names[i][1]: {"writes": int(w), "bytes": int(b), "busy_ps": int(u)}
                        for i, (w, b, u, _) in enumerate(lane_st)},
              "threads": {name: {"served": int(thr_st[i][0]), "busy_ps": int(thr_st[i][1])}
                          for name, i in threads.items()}}
    for res in res_all:
        res.stats["shared"] = shared
    if stopped:
        stopped.results = res_all
        stopped.partial = res_all[0]
        raise stopped
    return res_all
