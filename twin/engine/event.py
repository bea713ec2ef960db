"""The event engine: any topology, real bytes in memory regions, posted writes, pollers.

Nodes meet only in memory: a card's engine posts a request's bytes into its consumer's request
queue, the consumer's poller sees it once the sequence word (or every piece) has landed, and the
reply comes back the same way into the card's reply queue, where the card checks it byte for
byte. Each node is built by the factory its model registered (:mod:`twin.nodes.registry`), so a
``code``, ``rtl`` or ``live`` node stands in a mesh, a decode study or a RoCE path exactly where a
``sim`` node would. Flows share what they share in the topology: link directions
(:class:`~twin.kernel.Lane`), a card's bridge, a consumer's serving thread.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from twin.devices.consumer import ServingThread
from twin.devices.linkcard import CardBridge
from twin.engine.counters import flow_stats, slot_bytes_of
from twin.engine.hops import Hops
from twin.engine.spec import LoopResult, LoopSpec
from twin.engine.stop import CHECK_REPLIES, Interrupted, stop_requested, take_stop
from twin.engine.topology import Flow, FlowWorkload, Topology
from twin.exchange.encoding import get_encoding
from twin.kernel import EmptySchedule, JitterStream, Kernel, Lane, MemoryRegion, PostedWritePath
from twin.nodes.models import model_for
from twin.nodes.protocol import CardNode, ConsumerNode, ControlNode, keeps_partial
from twin.runtime.functions import REGISTRY, lookup

Progress = Callable[[int], None]


def python_functions(fid: int):
    """The ``sim`` model's function for an id (``None`` if unknown)."""
    f = REGISTRY.get(fid)
    return f.python if f else None


@dataclass
class NodeContext:
    """What a model's factory gets to build one node's endpoint for one flow (a queue pair).

    kernel, name (the node's stream/trace name), spec (the flow's :class:`LoopSpec`: every declared
    parameter of the node, its model's options among them, e.g. ``spec.rtl``), enc, slot_bytes,
    phase_ps (consumer's poll phase), request region/path and reply region/path, hops
    (:class:`Hops`), workload (:class:`FlowWorkload`), thread (consumer: the node's
    :class:`ServingThread`), bridge (card: the node's :class:`CardBridge`), on_reply (card), lane
    (``lane(a, b, wire, stream, jitter_ps) -> Lane``: the topology's lane of link direction
    a -> b, made on first use, for a node that posts writes on a link of its own: a two-stage
    consumer's hand-off). The control side's: send (``send(seq, payload)`` at the send instant),
    gen_phase_ps (its oscillator's start phase: one per control node), salt (the payloads'),
    gaps_ps (its random gaps, or None).
    """

    kernel: Kernel
    name: str
    spec: LoopSpec
    enc: object
    slot_bytes: int
    phase_ps: int
    req_region: MemoryRegion
    req_path: PostedWritePath
    rep_region: MemoryRegion
    rep_path: PostedWritePath
    hops: Hops
    workload: FlowWorkload
    thread: ServingThread | None = None
    bridge: CardBridge | None = None
    on_reply: Callable | None = None
    lane: Callable | None = None
    send: Callable | None = None
    gen_phase_ps: int = 0
    salt: int = 0
    gaps_ps: np.ndarray | None = None

    def functions(self):
        """The consumer's function lookup (fid -> callable)."""
        return self.workload.functions or python_functions

    def reference(self) -> Callable[[bytes], bytes]:
        """What the card checks each reply against."""
        return self.workload.reference or lookup(self.spec.function).python


@dataclass
class _Shared:
    """What the flows of one topology share on the timeline: link directions, serving threads,
    card bridges, each consumer's poll grid and each control system's oscillator, and the count
    of replies back at their generators (all flows)."""

    lanes: dict = field(default_factory=dict)
    threads: dict = field(default_factory=dict)
    bridges: dict = field(default_factory=dict)
    phases: dict = field(default_factory=dict)
    clocks: dict = field(default_factory=dict)
    replies: int = 0

    def lane(self, seed: int, a: str, b: str, wire, stream: str, jitter_ps: int) -> Lane:
        """The lane of link direction a -> b, made on first use."""
        if (a, b) not in self.lanes:
            self.lanes[(a, b)] = Lane(f"{a}->{b}", wire, JitterStream(seed, stream, jitter_ps))
        return self.lanes[(a, b)]

    def stats(self) -> dict:
        """Every flow's ``shared`` statistics: the lanes' and serving threads' counters."""
        return {"lanes": {a + "->" + b: {"writes": ln.writes, "bytes": ln.bytes, "busy_ps": ln.busy_ps}
                          for (a, b), ln in self.lanes.items()},
                "threads": {name: {"served": t.served, "busy_ps": t.busy_ps} for name, t in self.threads.items()}}


class _FlowRun:
    """One flow on the timeline: its generator, card endpoint, consumer endpoint and per-round
    records (internal to :func:`run_topology`). Its nodes are asked only what the node protocol
    (:mod:`twin.nodes.protocol`) offers."""

    def __init__(self, k: Kernel, flow: Flow, shared: _Shared):
        spec = flow.spec
        self.flow, self.spec, self.k, self.shared = flow, spec, k, shared
        tr = spec.traffic
        self.frame = tr.frame_bytes
        phase, gen_phase, salt = spec.draws()
        self.consumer_phase = shared.phases.setdefault(flow.consumer, phase)  # one poll grid per consumer node
        gen_phase = shared.clocks.setdefault(flow.generator, gen_phase)  # one oscillator per control system
        self.fp = spec.faults
        if self.fp.drop_rounds and tr.mode != "closed_loop":
            raise ValueError(f"loop {spec.name!r}: drop_frame faults need closed-loop traffic")
        n = self.n = tr.rounds
        self.t_send = np.zeros(n, np.int64)
        self.t_in = np.zeros(n, np.int64)
        self.t_have = np.zeros(n, np.int64)
        self.t_back = np.zeros(n, np.int64)
        self.ok = np.zeros(n, bool)
        self.hops = Hops.recorder(n)  # lists while running; arrays in the result
        rtl: Any = spec.rtl  # the RTL options' trace window (a node without waveforms ignores trace())
        self.window = None if rtl is None else (rtl.trace_first, rtl.trace_last)
        self.dropped = {"frames": 0, "resent": 0}
        ctx = self._context()
        ctx.send, ctx.gen_phase_ps, ctx.salt = self.send, gen_phase, salt
        ctx.gaps_ps = tr.gaps_array(spec.seed, flow.gaps_stream or spec.stream("gaps"))
        self.consumer: ConsumerNode = model_for("consumer", spec.model).build()(ctx)
        try:
            self.card: CardNode = model_for("link_card", spec.card_model).build()(ctx)
        except BaseException:
            self.consumer.shutdown()  # it may hold a live session or a Verilated model already
            raise
        try:
            self.gen: ControlNode = model_for(spec.control.kind, spec.control.model).build()(ctx)
        except BaseException:
            self.card.shutdown()
            self.consumer.shutdown()
            raise

    def _lane(self, a: str, b: str, wire, stream: str, jitter_ps: int) -> Lane:
        return self.shared.lane(self.spec.seed, a, b, wire, stream, jitter_ps)

    def _context(self) -> NodeContext:
        """The flow's queue pair, paths and lanes, and the context its nodes are built from."""
        flow, spec, k, sh = self.flow, self.spec, self.k, self.shared
        slot_bytes = slot_bytes_of(spec)
        req_region = MemoryRegion(f"{flow.consumer}.{spec.name}.request_queue", flow.consumer, spec.slots * slot_bytes)
        rep_region = MemoryRegion(f"{flow.card}.{spec.name}.reply_queue", flow.card, spec.slots * slot_bytes)
        self.req_path = PostedWritePath(k, f"{flow.card}->{flow.consumer}", None, req_region,
                                        lane=self._lane(flow.card, flow.consumer, spec.request_link,
                                                        flow.lane_stream("request"), spec.jitter_ps))
        self.rep_path = PostedWritePath(k, f"{flow.consumer}->{flow.card}", None, rep_region,
                                        lane=self._lane(flow.consumer, flow.card, spec.reply_link,
                                                        flow.lane_stream("reply"), spec.jitter_ps))
        aur = spec.aurora
        self.up = self.down = None
        if aur is not None:
            self.up = self._lane(flow.generator, flow.card, aur, f"{flow.generator}->{flow.card}.aurora", 0)
            self.down = self._lane(flow.card, flow.generator, aur, f"{flow.card}->{flow.generator}.aurora", 0)
        # a control program that listens (tr.feedback) reads each reply's bytes: the card keeps them
        wl = flow.workload if spec.traffic.feedback is None else replace(flow.workload, keep_replies=True)
        return NodeContext(k, spec.name, spec, get_encoding(spec.consumer.encoding), slot_bytes, self.consumer_phase,
                           req_region, self.req_path, rep_region, self.rep_path, self.hops, wl,
                           thread=sh.threads.setdefault(flow.consumer, ServingThread()),
                           bridge=sh.bridges.setdefault(flow.card, CardBridge()), on_reply=self.on_reply,
                           lane=self._lane)

    def _trace(self, on: bool) -> None:
        self.card.trace(on)
        self.consumer.trace(on)

    def on_reply(self, seq: int, tin: int, thave: int, good: bool) -> None:
        i = seq - 1
        self.t_in[i] = tin
        self.t_have[i] = thave
        self.ok[i] = good
        back = thave if self.down is None else self.down.plan(thave + self.spec.card.reply_send_ps, self.frame)
        self.t_back[i] = back
        self.k.at(back, self._back, seq)
        if self.window is not None and seq == self.window[1]:
            self._trace(False)

    def _back(self, seq: int) -> None:
        self.shared.replies += 1
        if self.spec.traffic.feedback is None:
            self.gen.reply(seq)
        else:  # the program reads the reply's bytes (the decoder's answer)
            self.gen.reply(seq, self.card.kept_reply(seq))

    def deliver(self, seq: int, payload: bytes) -> None:
        k = self.k
        arrive = k.now if self.up is None else self.up.plan(k.now, len(payload))
        k.at(self.spec.card.edge(arrive), self.card.submit, seq, payload)

    def resend(self, seq: int, payload: bytes) -> None:
        self.dropped["resent"] += 1
        self.deliver(seq, payload)

    def send(self, seq: int, payload: bytes) -> None:
        self.t_send[seq - 1] = self.k.now
        if self.window is not None and seq == self.window[0]:
            self._trace(True)
        if seq in self.fp.drop_rounds:
            self.dropped["frames"] += 1  # lost on the link; the control side resends after its timeout
            self.k.at(self.k.now + self.fp.timeout_ps, self.resend, seq, payload)
            return
        self.deliver(seq, payload)

    def setup(self) -> None:
        """Set up the consumer's ports (the generators after every consumer: :func:`run_topology`)."""
        self.consumer.setup()
        self.card.setup()

    def shutdown(self) -> None:
        """Shut every node of the flow down (idempotent)."""
        for node in (self.card, self.consumer, self.gen):
            node.shutdown()

    def result(self, m: int | None = None) -> LoopResult:
        """The flow's :class:`LoopResult` (its first ``m`` rounds after a failure)."""
        m = self.n if m is None else m
        return LoopResult(self.spec.name, "event", self.t_send[:m], self.t_in[:m], self.t_have[:m],
                          self.t_back[:m], self.ok[:m], {}, self.hops.head(m).frozen())  # cut, then convert

    def completed(self) -> int:
        """The rounds 1..m whose replies are all back at the generator by now (what a stopped run
        keeps: whole rounds, a prefix)."""
        back = (self.t_back > 0) & (self.t_back <= self.k.now)
        return self.n if back.all() else int(np.argmin(back))

    def partial(self) -> LoopResult:
        """After a failure that keeps the rounds so far: the rounds whose replies are back, with the
        card's counters and (a consumer that keeps them) its live section and per-round arrays."""
        m = int(self.gen.received)
        res = self.result(m)
        res.stats = {"mismatches": int((~self.ok[:m]).sum()), "backlog_max": self.card.finish().backlog_max}
        if self.consumer.keeps_partial:
            ns = self.consumer.finish()
            res.stats.update({"live": ns.live, **{k: v[:m] for k, v in ns.rounds.items()}})
        return res

    def stats(self, k: Kernel) -> dict:
        """The flow's statistics from its nodes' records (after they are shut down)."""
        cs, ns = self.card.finish(), self.consumer.finish()
        end = min(k.now, int(self.t_back.max())) or k.now  # the flow's last reply back (a mesh: its own)
        stats = {"events": k.events,
                 **flow_stats(self.fp, self.spec.consumer.kind, self.n, end, cs.mismatches, cs.backlog_max, ns.polls,
                              cs.polls, self.req_path.writes + self.rep_path.writes, self.consumer_phase,
                              cs.reply_digest, self.dropped, cs.reply_timeouts, cs.corrupted_requests)}
        if self.flow.workload.keep_replies:
            stats["replies"] = cs.replies
        program = self.gen.finish().program
        if program:  # a control program that waits on replies: its stalls and period (time in the program)
            stats["program"] = program
        if cs.slot_wait_ps is not None:
            stats["slot_wait_ps"] = cs.slot_wait_ps
        rtl = {name: c.to_dict() for name, c in (("card", cs.rtl), (self.spec.name, ns.rtl)) if c is not None}
        if rtl:
            stats["rtl"] = rtl
        if ns.live is not None:
            stats["live"] = {**ns.live, "endpoint_stats": ns.endpoint}
        stats.update(ns.rounds)
        return stats

    def cut(self, res: LoopResult, m: int) -> None:
        """A stopped run's statistics for the ``m`` rounds kept (``res``: :meth:`result` of them)."""
        st = res.stats
        st["mismatches"] = res.mismatches
        st.pop("reply_digest", None)  # it may cover a reply past the cut
        if "replies" in st:
            st["replies"] = st["replies"][:m]
        st["faults"]["injected"]["corrupt_piece"] = sum(1 for x in self.fp.corrupt_rounds if x <= m)
        st["faults"].pop("not_reached", None)  # a stopped run: the stop, not the plan, left them
        if "live" in st:
            st["live"]["rounds"] = len(res.t_in)
        for name in self.consumer.finish().rounds:
            st[name] = st[name][:m]


COMPILED = True
"""Whether :func:`run_topology` runs a topology the compiled core computes there
(:mod:`twin.engine.compiled`); False: always the simpy reference (the property tests compare the two)."""


def _compiled(topo: Topology, progress, chunk_rounds: int):
    """The compiled core's results for ``topo``, or None (the reason logged once, verbose output)
    when it does not compute it."""
    if not COMPILED:
        return None
    from twin.engine import compiled
    why = compiled.refusal(topo)
    if why is None:
        try:
            return compiled.run(topo, progress, chunk_rounds)
        except compiled.CoreUnavailable as e:
            why = str(e)
    compiled.note_fallback(f"topology {topo.name!r} on the simpy reference: {why}")
    return None


def _step(k: Kernel, runs: list[_FlowRun], shared: _Shared, name: str, progress: Progress | None,
          chunk_rounds: int) -> Interrupted | None:
    """Run the timeline until every reply is back; returns the stop taken, if any (see
    :func:`run_topology`). Raises RuntimeError when the event queue runs dry with requests outstanding."""
    total = sum(r.n for r in runs)
    step = k.step
    check = min(chunk_rounds, CHECK_REPLIES)
    next_progress = min(total, chunk_rounds)
    while shared.replies < total:
        target = min(total, shared.replies + check, next_progress)
        try:
            while shared.replies < target:
                step()
        except EmptySchedule:
            raise RuntimeError(f"topology {name!r}: event queue ran dry after {shared.replies} of {total} "
                               "replies") from None
        if shared.replies == next_progress:
            next_progress = min(total, next_progress + chunk_rounds)
            if progress:
                progress(shared.replies)
        # between batches of replies: a stop request (once every flow has a round to keep)
        if shared.replies < total and stop_requested() and all(r.gen.received for r in runs) and take_stop():
            return Interrupted(f"after {shared.replies} of {total} replies")
    return None


def _keeper(runs: list[_FlowRun]) -> int:
    """The flow whose rounds a failed or stopped run keeps first: a consumer's that keeps its partial
    rounds (a live device), else the first."""
    return next((i for i, r in enumerate(runs) if r.consumer.keeps_partial), 0)


def _results(k: Kernel, runs: list[_FlowRun], shared: _Shared, stopped: bool) -> list[LoopResult]:
    """Every flow's result, with its statistics (a stopped run: its whole rounds so far) and the
    statistics the flows share (one record, the same in each)."""
    out = []
    for r in runs:
        m = r.completed() if stopped else None
        res = r.result(m)
        res.stats = r.stats(k)
        if m is not None:  # the counters of the rounds kept
            r.cut(res, m)
        if res.hops is not None and "slot_wait_ps" in res.stats:  # the card's slot waits: their own stage
            res.hops = res.hops.with_slot_wait(res.stats["slot_wait_ps"])
        out.append(res)
    both = shared.stats()
    for res in out:
        res.stats["shared"] = both
    return out


def run_topology(topo: Topology, progress: Progress | None = None, chunk_rounds: int = 10_000) -> list[LoopResult]:
    """Run every flow of ``topo`` together on one event timeline; one :class:`LoopResult` per
    flow, in flow order, with its per-round hops (:class:`Hops`) and statistics.

    ``progress(n)`` is called with the replies received so far (all flows), every
    ``chunk_rounds``. Raises RuntimeError when the event queue runs dry with requests
    outstanding; a failure that keeps the rounds so far (:func:`twin.nodes.protocol.keeps_partial`:
    a live endpoint's) carries ``partial``: the rounds completed so far of the flow whose consumer
    keeps them (else the first). Every :data:`twin.engine.stop.CHECK_REPLIES` replies it looks
    for a stop request (:func:`twin.engine.stop.request_stop`) and then raises
    :class:`twin.engine.stop.Interrupted` whose ``results`` are every flow's whole rounds so far
    (``partial``: that flow's), with the same statistics as a whole run except ``reply_digest``
    (it may cover a reply past the cut). Every node is shut down, whatever the outcome.

    A topology of built-in ``sim`` nodes the compiled core computes (:mod:`twin.engine.compiled`)
    runs there, with identical results; any other stays on the simpy reference, the reason in
    verbose output (the ``twin.engine`` logger).
    """
    fast = _compiled(topo, progress, chunk_rounds)
    if fast is not None:
        return fast
    k = Kernel(topo.seed)
    shared = _Shared(phases=dict(topo.phases), clocks=dict(topo.clocks))  # a part's: drawn over the whole
    runs: list[_FlowRun] = []
    try:
        for flow in topo.flows:
            runs.append(_FlowRun(k, flow, shared))
        for r in runs:
            r.setup()
        for r in runs:
            r.gen.setup()
        stopped = _step(k, runs, shared, topo.name, progress, chunk_rounds)
    except Exception as e:
        if len(runs) == len(topo.flows) and keeps_partial(e):  # a live endpoint failed: keep the rounds so far
            e.partial = runs[_keeper(runs)].partial()  # type: ignore[attr-defined]
        raise
    finally:
        for r in runs:
            r.shutdown()
    out = _results(k, runs, shared, stopped is not None)
    if stopped:
        stopped.results = out
        stopped.partial = out[_keeper(runs)]
        raise stopped
    return out


def run_event(spec: LoopSpec, progress: Progress | None = None, chunk_rounds: int = 10_000, *,
              payloads: Callable[[int], bytes] | None = None, reference: Callable[[bytes], bytes] | None = None,
              hosting: Callable | None = None, functions=None, keep_replies: bool = False) -> LoopResult:
    """Simulate one loop (the one-flow topology of ``spec``) and return every round's timestamps.

    ``progress(n)`` is called with the rounds completed so far, every ``chunk_rounds``. Workload
    hooks (:class:`FlowWorkload`): ``payloads(seq)`` request payloads; ``reference(payload)``
    what the card checks each reply against; ``functions`` the consumer's fid -> callable;
    ``hosting(consumer)`` the consumer's hosting part (a hosting mode:
    :class:`twin.qec.hosting.HostingMode`); ``keep_replies`` returns every reply payload in
    ``stats["replies"]``.
    """
    wl = FlowWorkload(payloads, reference, keep_replies, functions, hosting)
    try:
        res = run_topology(Topology.single(spec, wl), progress, chunk_rounds)[0]
    except Interrupted as e:
        e.partial.stats.pop("shared", None)
        raise
    res.stats.pop("shared", None)
    return res
