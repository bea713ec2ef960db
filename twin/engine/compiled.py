"""The compiled event core: :func:`twin.engine.event.run_topology` for topologies of built-in
``sim`` nodes, in C (``twin_event_*`` in twin/engine/c/core.c), with identical results.

It runs the same events as the simpy reference, at the same instants, in the same order, on the
same random streams (each lane's jitter drawn here in numpy from its :class:`JitterStream`, the
gaps from the flow's stream) and moves the contract's bytes: the card writes each request's slot
image (classic: header and payload, then the sequence word; per-piece: one burst of pieces) into
the consumer's request queue, the consumer's poller sees it complete (:meth:`Encoding.ready`), the
function's reply is written back the same way, and the card reads it out, checks it byte for byte
against the function's reference and hashes it (SHA-256, ``reply_digest``). Per-round timestamps,
hops, statistics (events, polls, posted writes, lanes, threads, slot waits) equal the reference's.

Coverage (:func:`refusal` says why anything else stays on the simpy reference): consumers and link
cards of model ``sim`` (a registry entry with ``compiled`` in ``supports["engines"]``), the echo
(function 0) and the runtime library's C functions (twin/runtime/c/qrt_functions.c, linked into the
core: the code the ``code`` model runs; the card's reference the same C on the payload sent), a
function written in Python only, called back from the core at the consumer's service and the card's
check (:mod:`twin.runtime.callback`; an exception it raises is raised as the reference raises it), the
faults of :mod:`twin.faults` (a dropped frame with any number in flight), the default workload
(payloads :func:`payload_for`, the function's reference, in-order replies, no kept replies), no
share of a stream, clocks without drift, any wire (PCIe, RoCE, Aurora), one or many flows sharing
lanes, bridges and serving threads, a hand-off to a second device (:mod:`twin.devices.handoff`: stage 1
on the node's thread, the hand-off's own lane, stage 2 on its own poll grid and thread; no faults, a
serving stage of constant service: :func:`twin.engine.features.handoff_refusals`), closed loop (any
in-flight count, gap or random gaps), open loop (period or random gaps), any slots and backlog.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from twin.devices.handoff import INNER, lane_stream, stage_phase
from twin.engine import features, native, service_core
from twin.engine.core_interface import (
    FAULT_CORRUPT,
    FAULT_DROP,
    FLOW_OUTS,
    FLOW_PARAMS,
    FLOW_STATS,
    HANDOFF_OUTS,
    LANE_STATS,
    PATH_REPLY,
    PATH_REQUEST,
    THREAD_STATS,
    WORLD_STATS,
)
from twin.engine.counters import flow_stats, slot_bytes_of
from twin.engine.hops import Hops
from twin.engine.native import CoreUnavailable, note_fallback
from twin.engine.partition import components, lane_keys
from twin.engine.spec import LoopResult
from twin.engine.stop import Interrupted, stop_requested, take_stop
from twin.engine.topology import FlowWorkload, Topology
from twin.exchange.encoding import get_encoding
from twin.kernel import JitterStream
from twin.runtime.callback import callback_address, clear_pending, raise_pending
from twin.runtime.functions import lookup

__all__ = ["run", "refusal", "CoreUnavailable", "note_fallback"]

HOP_COLUMNS = ("issue", "land", "seen", "start", "reply", "publish", "rland")
_HOPS = slice(FLOW_OUTS.index(HOP_COLUMNS[0]), FLOW_OUTS.index(HOP_COLUMNS[-1]) + 1)
assert FLOW_OUTS[_HOPS] == HOP_COLUMNS  # one contiguous block of rows, filled with -1 in one move
assert HANDOFF_OUTS == INNER  # the hand-off's record is Hops.inner as the reference keeps it
FS = {k: i for i, k in enumerate(FLOW_STATS)}
WS = {k: i for i, k in enumerate(WORLD_STATS)}
LS = {k: i for i, k in enumerate(LANE_STATS)}
TS = {k: i for i, k in enumerate(THREAD_STATS)}
SPLIT = True
"""Whether :func:`run` runs each interacting component on its own timeline; False: the whole topology
on one (the same results; benchmarks/engine_speed.py compares the two)."""
MAX_FRAME = 65535  # the scratch of core.c's step holds one message of the contract's largest length


def refusal(topo: Topology) -> str | None:
    """Why the compiled core does not run ``topo`` (one line naming the flow), or None. A hand-off's
    lane (:func:`_handoff_key`) must be its flow's alone: the partition (:mod:`twin.engine.partition`)
    does not name it, so a flow sharing it could run on another timeline."""
    staged = [_handoff_key(fl) for fl in topo.flows if fl.spec.handoff is not None]
    keys = Counter(staged)
    if staged:
        keys.update(k for fl in topo.flows for k in lane_keys(fl))
    for fl in topo.flows:
        spec = fl.spec
        why = [w] if (w := features.refusal(spec)) else []
        if fl.workload != FlowWorkload():
            why.append("its workload (payloads, reference, functions, kept replies or reply order) is Python")
        if spec.rtl is not None or spec.bridge is not None:
            why.append("it has RTL or live-bridge options")
        if spec.traffic.frame_bytes > MAX_FRAME:
            why.append(f"frames over {MAX_FRAME} bytes")
        if spec.handoff is not None and keys[_handoff_key(fl)] > 1:
            why.append(f"its hand-off's link direction {'->'.join(_handoff_key(fl))} is another lane too")
        if why:
            return f"flow {spec.name!r}: {'; '.join(why)}"
    return None


def _handoff_key(fl) -> tuple[str, str]:
    """The link direction of flow ``fl``'s hand-off lane, as the reference names it
    (:func:`twin.devices.handoff.build_staged`: the flow's name -> the serving device)."""
    return (fl.spec.name, fl.spec.handoff.to)


def _faults(spec, keep: list) -> dict:
    """The fault parameters of flow ``spec`` for core.c (``FP_TIMEOUT`` .. ``FP_NSTALLS``): the card's
    reply timeout, per-round flags (FAULT_CORRUPT, FAULT_DROP; rounds past the run's are never reached), the
    path corrupt rounds flip a byte on, and the consumer's blackout windows (its stalls, plus the host
    freezes for a CPU consumer: :meth:`FaultPlan.consumer_stalls`), sorted as the poller sorts them.
    The arrays are appended to ``keep`` (alive while the core runs)."""
    fp, n = spec.faults, spec.traffic.rounds
    flags = wins = None
    if fp.corrupt_rounds or fp.drop_rounds:
        flags = np.zeros(n, np.uint8)
        for bit, rounds in ((FAULT_CORRUPT, fp.corrupt_rounds), (FAULT_DROP, fp.drop_rounds)):
            r = np.array(sorted(x for x in rounds if 1 <= x <= n), np.int64)
            flags[r - 1] |= bit
        keep.append(flags)
    stalls = sorted(fp.consumer_stalls(spec.consumer.kind))
    if stalls:
        wins = np.ascontiguousarray(np.array(stalls, np.int64).reshape(-1))
        keep.append(wins)
    return dict(timeout=fp.timeout_ps, fault_rounds=0 if flags is None else flags.ctypes.data,
                corrupt_path=PATH_REQUEST if fp.corrupt_path == "request" else PATH_REPLY,
                stalls=0 if wins is None else wins.ctypes.data, nstalls=len(stalls))


def _function(spec) -> tuple[int, int]:
    """The consumer's function of flow ``spec`` for core.c: the address of its C code in the core
    (``FP_FN``; 0 for the echo) and the reply payload bytes it gives for the flow's frame (``FP_REP_LEN``,
    from its Python twin on a frame of zeros: the functions the core runs give a reply whose length is
    the request's alone; a reply of another length stops the core, and the flow runs on the reference)."""
    frame = spec.traffic.frame_bytes
    if spec.function == 0:
        return 0, frame
    f = lookup(spec.function)
    try:
        rep_len = len(f.python(bytes(frame)))
    except ValueError as e:  # it refuses a frame of zeros: the reference answers function_failed
        raise CoreUnavailable(f"function {f.name} fails on a frame of zeros ({e})") from None
    if get_encoding(spec.consumer.encoding).slot_bytes(rep_len) > slot_bytes_of(spec):
        raise CoreUnavailable(f"function {f.name}'s {rep_len}-byte reply does not fit its slot (status bad_length)")
    if f.c_symbol is None:  # written in Python: called back through the runtime's function signature
        return callback_address(f), rep_len
    return native.function_address(f.c_symbol), rep_len


def _wire(wire, sizes: list[int]) -> tuple[list[int], list[int]]:
    tail = getattr(wire, "tail_ps", None)
    return [wire.serialise_ps(s) for s in sizes], [tail(s) if tail else 0 for s in sizes]


def run(topo: Topology, progress=None, chunk_rounds: int = 10_000) -> list[LoopResult]:
    """Run ``topo`` (which :func:`refusal` accepts) in the compiled core; the same returns, stop
    behaviour (:class:`Interrupted`, looked for between the steps of :func:`_drive`) and progress as
    :func:`twin.engine.event.run_topology`. Raises :class:`CoreUnavailable` without the core and
    RuntimeError when the timeline runs dry with requests outstanding.

    Each interacting component (:func:`twin.engine.partition.components`: flows sharing no lane,
    bridge, serving thread or stream cannot influence each other) runs on its own timeline (a
    small event heap: the cost of a round does not grow with the flows it does not meet), the
    components advanced together, each by its share of the replies; the results are those of one
    timeline of the whole topology, in flow order: every flow's rounds, hops and counters, the
    shared lanes' and threads' counters, ``events`` the sum of the components' (every event
    belongs to one). A stop cuts every flow at the instant the component furthest behind has
    reached (the whole rounds back by then: one consistent instant for all flows)."""
    lib = native.core()
    if lib.twin_event_columns() != len(FLOW_OUTS):  # the record's layout: core.c's FO_* and FLOW_OUTS agree
        raise CoreUnavailable(f"the compiled core writes {lib.twin_event_columns()} columns a round, "
                              f"twin/engine/compiled.py reads {len(FLOW_OUTS)}: rebuild twin")
    draws = [fl.spec.draws() for fl in topo.flows]
    # one poll grid per consumer node, one oscillator per control system: the first flow's (or the whole
    # topology's, for a part of it: Topology.phases / clocks)
    phases: dict = dict(topo.phases)
    clocks: dict = dict(topo.clocks)
    for fl, (phase, gen_phase, _) in zip(topo.flows, draws):
        phases.setdefault(fl.consumer, phase)
        clocks.setdefault(fl.generator, gen_phase)
    worlds: list[_World] = []
    clear_pending()
    try:
        for index in components(topo) if SPLIT else [tuple(range(len(topo.flows)))]:
            worlds.append(_World(lib, topo, index, draws, phases, clocks))
        cut = _drive(topo, worlds, progress, chunk_rounds)
        for w in worlds:
            w.read_stats()
    finally:
        for w in worlds:
            w.free()
    return _results(topo, worlds, phases, cut)


class _World:
    """One interacting component of a topology (flows ``index``, ascending) on its own compiled
    timeline: its parameter rows, per-round tables, lanes, threads and bridges (internal)."""

    def __init__(self, lib, topo: Topology, index: tuple[int, ...], draws, phases: dict, clocks: dict):
        self.lib, self.index, self.h, self.topo = lib, index, None, topo
        self.keep: list = []  # arrays the core reads (jitter, faults): alive as long as the handle
        self.lanes: dict = {}  # (a, b) -> [index, wire, JitterStream, draws needed]
        self.threads: dict = {}
        self.bridges: dict = {}
        self.outs: list = []
        self.flow_lanes: list = []  # per flow its lane keys (lane_keys order)
        self.services: list = []  # per flow its service table (twin.engine.service_core), or None
        self.ho_outs: list = []  # per flow its hand-off's record (HANDOFF_OUTS rows of n), or None
        rows = []
        for i in index:
            fl = topo.flows[i]
            rows.append(self._flow_row(fl, draws[i][2], phases[fl.consumer], clocks[fl.generator]))
        self.fp = np.ascontiguousarray(np.array(rows, np.int64).reshape(-1))
        fo = np.array([x for t, g in self.outs for x in (t.ctypes.data, 0 if g is None else g.ctypes.data)], np.int64)
        self.order = sorted(self.lanes.values(), key=lambda ln: ln[0])
        jit = [ln[2].array(ln[3]) if ln[2].scale_ps else None for ln in self.order]
        self.keep.extend(j for j in jit if j is not None)
        lp = np.array([ln[1].latency_ps for ln in self.order], np.int64)
        lj = np.array([0 if j is None else j.ctypes.data for j in jit], np.int64)
        self.h = lib.twin_event_new(len(index), native.ptr(self.fp), native.ptr(fo), len(self.order), native.ptr(lp),
                                    native.ptr(lj), len(self.threads), len(self.bridges))
        if not self.h:
            raise MemoryError(f"topology {topo.name!r}: the compiled core could not allocate its queues")
        self.total = sum(topo.flows[i].spec.traffic.rounds for i in index)
        self.counter = 0
        self.stats = np.zeros(len(WORLD_STATS) + len(FLOW_STATS) * len(index) + len(LANE_STATS) * len(self.order)
                              + len(THREAD_STATS) * len(self.threads), np.int64)

    def _lane(self, key, wire, stream, jitter_ps, seed, writes):
        if key not in self.lanes:
            self.lanes[key] = [len(self.lanes), wire, JitterStream(seed, stream, jitter_ps), 0]
        ln = self.lanes[key]
        ln[3] += writes
        return ln

    def _flow_row(self, fl, salt: int, phase: int, gen_phase: int) -> list[int]:
        """The core's parameters of flow ``fl`` (FLOW_PARAMS order); its tables appended to ``outs``."""
        spec, tr = fl.spec, fl.spec.traffic
        enc = get_encoding(spec.consumer.encoding)
        n, frame = tr.rounds, tr.frame_bytes
        sizes = [len(d) for _, d in enc.writes(1, bytes(frame))]
        fn, rep_len = _function(spec)
        rsizes = [len(d) for _, d in enc.writes(1, bytes(rep_len))]  # the reply's writes, as the lane sees them
        keys = lane_keys(fl)
        self.flow_lanes.append(keys)
        req = self._lane(keys[0], spec.request_link, fl.lane_stream("request"), spec.jitter_ps, spec.seed,
                         n * len(sizes))
        rep = self._lane(keys[1], spec.reply_link, fl.lane_stream("reply"), spec.jitter_ps, spec.seed, n * len(sizes))
        up = down = None
        if spec.aurora is not None:
            up = self._lane(keys[2], spec.aurora, f"{fl.generator}->{fl.card}.aurora", 0, spec.seed, n)
            down = self._lane(keys[3], spec.aurora, f"{fl.card}->{fl.generator}.aurora", 0, spec.seed, n)
        self.threads.setdefault(fl.consumer, len(self.threads))
        self.bridges.setdefault(fl.card, len(self.bridges))
        rser, rtail = _wire(req[1], sizes)
        pser, ptail = _wire(rep[1], rsizes)
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
                   function=spec.function, fn=fn, rep_len=rep_len, clk_period=clock.period_ps, clk_ppb=clock.ppb,
                   clk_phase=clock.phase_ps,
                   poll=c.poll_period_ps, phase=phase, cost=c.poll_cost_ps,
                   body=c.pre_service_ps(enc, frame) + c.service_ps, fence=c.fence_ps,
                   thread=self.threads[fl.consumer], card_clk=card.clock_ps, bridge_ps=card.bridge_ps(frame),
                   land_ps=card.engine_land_ps, read=card.reply_read_ps, reply_send=card.reply_send_ps,
                   card_poll=card.reply_poll_period_ps, bridge=self.bridges[fl.card], lreq=req[0], lrep=rep[0],
                   lup=up[0] if up else -1, ldown=down[0] if down else -1, req_ser0=rser[0], req_ser1=rser[1],
                   req_tail0=rtail[0], req_tail1=rtail[1], rep_ser0=pser[0], rep_ser1=pser[1], rep_tail0=ptail[0],
                   rep_tail1=ptail[1], up_ser=useri[0], up_tail=usert[0], down_ser=downs[0], down_tail=downt[0],
                   **_faults(spec, self.keep), svc=0, **self._handoff(fl, sizes, enc))
        # idle cost, modes, host runtime: per round (a first stage's service is its constant body, HandOff.serve)
        svc = service_core.pack(c, spec.seed, spec.stream, n) if spec.handoff is None else None
        self.services.append(svc)
        if svc is not None:
            par["svc"] = svc.address
        table = np.zeros((len(FLOW_OUTS), n), np.int64)  # by column: the core writes column c at table[c]
        table[_HOPS] = -1  # a hop not reached: -1, as the reference's
        self.outs.append((table, np.ascontiguousarray(g, np.int64) if g is not None else None))
        return [par[k] for k in FLOW_PARAMS]

    def _handoff(self, fl, sizes: list[int], enc) -> dict:
        """The hand-off parameters of flow ``fl`` for core.c (``FP_HO`` .. ``FP_HO_OUT``; ``ho`` 0: none): its
        lane (made after the flow's others, as the reference makes it), the request's writes on its wire,
        the serving stage's timing (its phase: :func:`twin.devices.handoff.stage_phase`) and its record
        (:data:`HANDOFF_OUTS` columns, -1 where not reached), appended to ``ho_outs``."""
        spec, ho = fl.spec, fl.spec.handoff
        if ho is None:
            self.ho_outs.append(None)
            return dict(ho=0, ho_lane=-1, ho_ser0=0, ho_ser1=0, ho_tail0=0, ho_tail1=0, ho_poll=1, ho_phase=0,
                        ho_cost=0, ho_body=0, ho_fence=0, ho_out=0)
        key = _handoff_key(fl)
        self.flow_lanes[-1].append(key)
        lane = self._lane(key, ho.wire, lane_stream(spec), ho.jitter_ps, spec.seed, spec.traffic.rounds * len(sizes))
        ser, tail = (x + [0] * (2 - len(x)) for x in _wire(ho.wire, sizes))
        table = np.full((len(HANDOFF_OUTS), spec.traffic.rounds), -1, np.int64)
        self.ho_outs.append(table)
        st = ho.stage
        return dict(ho=1, ho_lane=lane[0], ho_ser0=ser[0], ho_ser1=ser[1], ho_tail0=tail[0], ho_tail1=tail[1],
                    ho_poll=st.poll_period_ps, ho_phase=stage_phase(spec), ho_cost=st.poll_cost_ps,
                    ho_body=st.pre_service_ps(enc, spec.traffic.frame_bytes) + st.service_ps, ho_fence=st.fence_ps,
                    ho_out=table.ctypes.data)

    def advance(self, target: int) -> bool:
        """Process events until ``target`` replies of this component are back; False when its
        timeline ran dry first (``counter`` then the replies back)."""
        return self.settle(self.lib.twin_event_run(self.h, target))

    def settle(self, got: int) -> bool:
        """``counter`` from ``got``, what twin_event_run returned for this timeline (its replies back,
        or its code): False when the timeline ran dry; MemoryError (a link card's backlog could not
        grow), a Python function's pending exception, or CoreUnavailable (a function's reply of
        another length than planned) for the others."""
        if got == -3:
            raise MemoryError("the compiled core could not grow a link card's backlog")
        if got == -2:
            raise_pending()  # a Python function's exception, raised as the reference raises it
            off = np.zeros(2, np.int64)
            self.lib.twin_event_off(self.h, native.ptr(off))
            spec = self.topo.flows[self.index[int(off[0])]].spec
            raise CoreUnavailable(f"flow {spec.name!r}: function {lookup(spec.function).name} gave round "
                                  f"{int(off[1])} a reply of another length than the core planned, or failed")
        if got < 0:
            self.read_stats()
            self.counter = int(self.stats[WS["replies"]])
            return False
        self.counter = got
        return True

    def read_stats(self) -> None:
        """The core's counters into ``stats`` (twin_event_stats' layout)."""
        self.lib.twin_event_stats(self.h, native.ptr(self.stats))

    @property
    def now(self) -> int:
        """The instant of the last event processed (after :meth:`read_stats`)."""
        return int(self.stats[WS["now"]])

    def flow_stats(self) -> np.ndarray:
        """Per flow (rows, ``index`` order) its FLOW_STATS counters (after :meth:`read_stats`)."""
        o = len(WORLD_STATS)
        return self.stats[o:o + len(FLOW_STATS) * len(self.index)].reshape(-1, len(FLOW_STATS))

    def lane_stats(self) -> np.ndarray:
        """Per lane (rows, lane index order) writes, bytes, busy, held (after :meth:`read_stats`)."""
        o = len(WORLD_STATS) + len(FLOW_STATS) * len(self.index)
        return self.stats[o:o + len(LANE_STATS) * len(self.order)].reshape(-1, len(LANE_STATS))

    def thread_stats(self) -> np.ndarray:
        """Per serving thread (rows, thread index order) served, busy (after :meth:`read_stats`)."""
        o = len(WORLD_STATS) + len(FLOW_STATS) * len(self.index) + len(LANE_STATS) * len(self.order)
        return self.stats[o:].reshape(-1, len(THREAD_STATS))

    def free(self) -> None:
        if self.h:
            self.lib.twin_event_free(self.h)
            self.h = None


WHOLE_STEP = True
"""Whether :func:`_drive` advances every component of a step in one call of the core
(``twin_event_run_all``); False: one call a component (the same results; tests compare the two)."""
WINDOW = 1024
"""Replies a component advances by in a step of :func:`_drive` (at most ``chunk_rounds``): on a
10,000-node echo mesh x 3,000 rounds (1,112 components) the core's time falls from 35 CPU-s at the
10,000 replies a step that progress allowed (9 a component: every step walking every component's
state out of the cache) to 11 at 256 a component and 8-9 at 1,024 (2-core VM, 2026-12-04)."""
STEP_MAX = 1 << 20
"""At most this many replies (all components) a step: a stop request is looked at between steps, so a
large mesh still sees it within about a second of the core's time."""


def _drive(topo: Topology, worlds: list[_World], progress, chunk_rounds: int) -> int | None:
    """Advance every component to the end (None) or to a stop: the instant every flow is cut at.

    The replies of all flows together advance by a step of :data:`WINDOW` per component (at most
    :data:`STEP_MAX`), each component to its share of them (so the components stay near one
    another in simulated time; each advanced by a window of about that many replies at once, its
    state hot in the cache), the whole step in one call of the core (:data:`WHOLE_STEP`); progress
    after the step that passes each ``chunk_rounds`` replies; between steps, a stop request is taken
    once every flow has a whole round back by the cut (the furthest-behind unfinished component's
    instant). A component's results do not depend on the steps it was advanced by."""
    totals = np.array([w.total for w in worlds], np.int64)
    total = int(totals.sum())
    step = max(1, min(STEP_MAX, min(chunk_rounds, WINDOW) * len(worlds)))
    got = np.zeros(len(worlds), np.int64)
    handles = np.array([w.h for w in worlds], np.int64)
    done = goal = 0
    next_progress = min(total, chunk_rounds)
    while done < total:
        goal = min(total, goal + step)
        _advance_all(topo, worlds, handles, np.minimum(totals, -(-totals * goal // total)), got)
        done = int(got.sum())
        if done >= next_progress:
            next_progress = min(total, (done // chunk_rounds + 1) * chunk_rounds)
            if progress:
                progress(done)
        if done < total and stop_requested():
            for w in worlds:
                w.read_stats()
            cut = min(w.now for w in worlds if w.counter < w.total)
            back = FLOW_OUTS.index("t_back")
            if all(len(t) and 0 < t[0, back] <= cut for w in worlds for t, _ in w.outs) and take_stop():
                return cut
    return None


def _advance_all(topo: Topology, worlds: list[_World], handles: np.ndarray, targets: np.ndarray,
                 got: np.ndarray) -> None:
    """Component ``k`` (its core handle ``handles[k]``) advanced to ``targets[k]`` replies (int64, one a
    component), its replies back
    then in ``got[k]`` and its ``counter``: one call of the core for all (:data:`WHOLE_STEP`), or one a
    component. RuntimeError when a timeline runs dry; the errors of :meth:`_World.settle`."""
    if WHOLE_STEP:
        k = int(worlds[0].lib.twin_event_run_all(len(worlds), native.ptr(handles), native.ptr(targets),
                                                 native.ptr(got)))
        for w, g in zip(worlds, got[:len(worlds) if k < 0 else k].tolist()):
            w.counter = g
        if k < 0:
            return
        worlds[k].settle(int(got[k]))  # its code: raises, or ran dry (its counter: the replies back)
    else:
        for k, (w, t) in enumerate(zip(worlds, targets.tolist())):
            ok = w.counter >= t or w.advance(t)
            got[k] = w.counter
            if not ok:
                break
        else:
            return
    got[k] = worlds[k].counter
    raise RuntimeError(f"topology {topo.name!r}: event queue ran dry after {sum(x.counter for x in worlds)} of "
                       f"{sum(x.total for x in worlds)} replies")


def _results(topo: Topology, worlds: list[_World], phases: dict, cut: int | None):
    """The per-flow :class:`LoopResult`s (flow order) from the components' arrays and counters, as
    run_topology builds them; ``cut``: the instant a stopped run keeps the whole rounds of."""
    events = sum(int(w.stats[WS["events"]]) for w in worlds)
    now = max(w.now for w in worlds) if cut is None else cut
    stopped = Interrupted(f"after {sum(w.counter for w in worlds)} of {sum(w.total for w in worlds)} replies") \
        if cut is not None else None
    where = {i: (w, j) for w in worlds for j, i in enumerate(w.index)}
    res_all = []
    for i, fl in enumerate(topo.flows):
        w, j = where[i]
        table, st, lane_st = w.outs[j][0], w.flow_stats()[j], w.lane_stats()
        a = dict(zip(FLOW_OUTS, table))  # each column contiguous: views, no copies
        spec = fl.spec
        n = spec.traffic.rounds
        m = n
        if stopped:  # whole rounds: replies back by now, a prefix
            back = (a["t_back"] > 0) & (a["t_back"] <= now)
            m = n if back.all() else int(np.argmin(back))
        keys = w.flow_lanes[j]
        lreq, lrep = w.lanes[keys[0]][0], w.lanes[keys[1]][0]
        digest = st[FS["d0"]:FS["d3"] + 1].tobytes().hex()
        end = min(now, int(a["t_back"][:n].max())) or now  # the flow's last reply back, not the mesh's
        c = {k: int(st[i]) for k, i in FS.items()}
        s = flow_stats(spec.faults, spec.consumer.kind, n, end, c["mismatches"], c["backlog_max"], c["consumer_polls"],
                       c["card_polls"], int(lane_st[lreq][LS["writes"]] + lane_st[lrep][LS["writes"]]),
                       phases[fl.consumer], digest, {"frames": c["dropped"], "resent": c["resent"]},
                       c["reply_timeouts"], c["corrupted"])
        s["slot_wait_ps"] = a["slot_wait"][:c["issued"]]
        hops = Hops(**{k: a[k][:m] for k in ("issue", "land", "seen", "start", "reply", "publish", "rland")},
                    ready=a["issue"][:m] - a["slot_wait"][:m])
        ho = w.ho_outs[j]
        hops.inner = service_core.inner(w.services[j], hops.start, hops.reply) if ho is None else \
            dict(zip(HANDOFF_OUTS, ho[:, :m]))  # a host runtime's instants, or a hand-off's
        res = LoopResult(spec.name, "event", a["t_send"][:m], a["t_in"][:m], a["t_have"][:m], a["t_back"][:m],
                         a["ok"][:m].astype(bool), {"events": events, **s}, hops)
        if stopped:
            res.stats["mismatches"] = res.mismatches
            res.stats.pop("reply_digest", None)
            res.stats["faults"]["injected"]["corrupt_piece"] = sum(1 for x in spec.faults.corrupt_rounds if x <= m)
            res.stats["faults"].pop("not_reached", None)  # a stopped run: the stop, not the plan, left them
        res_all.append(res)
    lanes, threads = {}, {}  # in the order the whole topology's flows make them, as run_topology's
    for i, fl in enumerate(topo.flows):
        w, j = where[i]
        for key in w.flow_lanes[j]:
            if key not in lanes:
                ln = w.lane_stats()[w.lanes[key][0]]
                lanes[key] = {"writes": int(ln[LS["writes"]]), "bytes": int(ln[LS["bytes"]]),
                              "busy_ps": int(ln[LS["busy"]])}
        if fl.consumer not in threads:
            th = w.thread_stats()[w.threads[fl.consumer]]
            threads[fl.consumer] = {"served": int(th[TS["served"]]), "busy_ps": int(th[TS["busy"]])}
    shared = {"lanes": {a + "->" + b: v for (a, b), v in lanes.items()}, "threads": threads}
    for res in res_all:
        res.stats["shared"] = shared
    if stopped:
        stopped.results = res_all
        stopped.partial = res_all[0]
        raise stopped
    return res_all
