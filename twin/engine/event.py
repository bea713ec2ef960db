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

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from twin.devices.consumer import ServingThread
from twin.devices.generator import TrafficGenerator
from twin.devices.linkcard import CardBridge
from twin.engine.counters import flow_stats, slot_bytes_of
from twin.engine.hops import Hops
from twin.engine.spec import LoopResult, LoopSpec
from twin.engine.stop import CHECK_REPLIES, Interrupted, stop_requested, take_stop
from twin.engine.topology import FlowWorkload, Topology
from twin.exchange.encoding import get_encoding
from twin.kernel import EmptySchedule, JitterStream, Kernel, Lane, MemoryRegion, PostedWritePath
from twin.nodes.models import model_for
from twin.runtime.functions import REGISTRY, lookup

Progress = Callable[[int], None]


def python_functions(fid: int):
    """The ``sim`` model's function for an id (``None`` if unknown)."""
    f = REGISTRY.get(fid)
    return f.python if f else None


@dataclass
class NodeContext:
    """What a model's factory gets to build one node's endpoint for one flow (a queue pair).

    kernel, name (the node's stream/trace name), spec (the flow's :class:`LoopSpec`), enc,
    slot_bytes, phase_ps (consumer's poll phase), request region/path and reply region/path,
    hops (:class:`Hops`), workload (:class:`FlowWorkload`), thread (consumer: the node's
    :class:`ServingThread`), bridge (card: the node's :class:`CardBridge`), on_reply (card),
    rtl (the :class:`twin.rtl.loop.RtlConfig` or None), lane (``lane(a, b, wire, stream,
    jitter_ps) -> Lane``: the topology's lane of link direction a -> b, made on first use, for a
    node that posts writes on a link of its own: a two-stage consumer's hand-off).
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
    rtl: object = None
    lane: Callable | None = None

    def functions(self):
        """The consumer's function lookup (fid -> callable)."""
        return self.workload.functions or python_functions

    def reference(self) -> Callable[[bytes], bytes]:
        """What the card checks each reply against."""
        return self.workload.reference or lookup(self.spec.function).python


class _FlowRun:
    """One flow on the timeline: its generator, card endpoint, consumer endpoint and per-round
    records (internal to :func:`run_topology`)."""

    def __init__(self, k: Kernel, flow, lanes: dict, threads: dict, bridges: dict, phases: dict, clocks: dict,
                 rtl_cfg, counter: list):
        spec = flow.spec
        self.flow, self.spec, self.k = flow, spec, k
        tr = spec.traffic
        enc = get_encoding(spec.consumer.encoding)
        self.frame = tr.frame_bytes
        slot_bytes = slot_bytes_of(spec)
        phase, gen_phase, salt = spec.draws()
        phase = phases.setdefault(flow.consumer, phase)  # one poll grid per consumer node (its first flow's)
        gen_phase = clocks.setdefault(flow.generator, gen_phase)  # one oscillator per control system
        fp = spec.faults
        self.fp = fp
        if fp.drop_rounds and tr.mode != "closed_loop":
            raise ValueError(f"loop {spec.name!r}: drop_frame faults need closed-loop traffic")
        n = tr.rounds
        self.n = n
        self.t_send = np.zeros(n, np.int64)
        self.t_in = np.zeros(n, np.int64)
        self.t_have = np.zeros(n, np.int64)
        self.t_back = np.zeros(n, np.int64)
        self.ok = np.zeros(n, bool)
        self.hops = Hops.recorder(n)  # lists while running; arrays in the result
        self.consumer_phase = phase
        self.counter = counter
        req_region = MemoryRegion(f"{flow.consumer}.{spec.name}.request_queue", flow.consumer, spec.slots * slot_bytes)
        rep_region = MemoryRegion(f"{flow.card}.{spec.name}.reply_queue", flow.card, spec.slots * slot_bytes)

        def lane(a: str, b: str, wire, stream: str, jitter_ps: int) -> Lane:
            if (a, b) not in lanes:
                lanes[(a, b)] = Lane(f"{a}->{b}", wire, JitterStream(spec.seed, stream, jitter_ps))
            return lanes[(a, b)]
        self.req_path = PostedWritePath(k, f"{flow.card}->{flow.consumer}", None, req_region,
                                        lane=lane(flow.card, flow.consumer, spec.request_link,
                                                  flow.lane_stream("request"), spec.jitter_ps))
        self.rep_path = PostedWritePath(k, f"{flow.consumer}->{flow.card}", None, rep_region,
                                        lane=lane(flow.consumer, flow.card, spec.reply_link,
                                                  flow.lane_stream("reply"), spec.jitter_ps))
        aur = spec.aurora
        self.up = self.down = None
        if aur is not None:
            self.up = lane(flow.generator, flow.card, aur, f"{flow.generator}->{flow.card}.aurora", 0)
            self.down = lane(flow.card, flow.generator, aur, f"{flow.card}->{flow.generator}.aurora", 0)
        self.rtl_cfg = rtl_cfg
        # a control program that listens (tr.feedback) reads each reply's bytes: the card keeps them
        wl = flow.workload if tr.feedback is None else replace(flow.workload, keep_replies=True)
        ctx = NodeContext(k, spec.name, spec, enc, slot_bytes, phase, req_region, self.req_path, rep_region,
                          self.rep_path, self.hops, wl,
                          thread=threads.setdefault(flow.consumer, ServingThread()),
                          bridge=bridges.setdefault(flow.card, CardBridge()), on_reply=self.on_reply, rtl=rtl_cfg,
                          lane=lane)
        self.consumer = model_for("consumer", spec.model).build()(ctx)
        self.card = model_for("link_card", spec.card_model).build()(ctx)
        self.dropped = {"frames": 0, "resent": 0}
        make = TrafficGenerator if tr.feedback is None else tr.feedback.generator  # a listening program's own
        self.gen = make(k, tr, tr.make_clock(gen_phase), self.send, salt, flow.workload.payloads,
                        gaps_ps=tr.gaps_array(spec.seed, flow.gaps_stream or spec.stream("gaps")))

    def _rtl_trace(self, on: bool) -> None:
        for node in (self.card, self.consumer):
            getattr(node, "trace", lambda on: None)(on)

    def on_reply(self, seq: int, tin: int, thave: int, good: bool) -> None:
        i = seq - 1
        self.t_in[i] = tin
        self.t_have[i] = thave
        self.ok[i] = good
        back = thave if self.down is None else self.down.plan(thave + self.spec.card.reply_send_ps, self.frame)
        self.t_back[i] = back
        self.k.at(back, self._back, seq)
        if self.rtl_cfg is not None and seq == self.rtl_cfg.trace_last:
            self._rtl_trace(False)

    def _back(self, seq: int) -> None:
        self.counter[0] += 1
        if self.spec.traffic.feedback is None:
            self.gen.reply(seq)
        else:  # the program reads the reply's bytes (the decoder's answer)
            self.gen.reply(seq, self.card.kept_replies[seq - 1])

    def deliver(self, seq: int, payload: bytes) -> None:
        k = self.k
        arrive = k.now if self.up is None else self.up.plan(k.now, len(payload))
        k.at(self.spec.card.edge(arrive), self.card.submit, seq, payload)

    def resend(self, seq: int, payload: bytes) -> None:
        self.dropped["resent"] += 1
        self.deliver(seq, payload)

    def send(self, seq: int, payload: bytes) -> None:
        self.t_send[seq - 1] = self.k.now
        if self.rtl_cfg is not None and seq == self.rtl_cfg.trace_first:
            self._rtl_trace(True)
        if seq in self.fp.drop_rounds:
            self.dropped["frames"] += 1  # lost on the link; the control side resends after its timeout
            self.k.at(self.k.now + self.fp.timeout_ps, self.resend, seq, payload)
            return
        self.deliver(seq, payload)

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

    def stats(self, k: Kernel) -> dict:
        card, consumer = self.card, self.consumer
        end = min(k.now, int(self.t_back.max())) or k.now  # the flow's last reply back (a mesh: its own)
        stats = flow_stats(self.fp, self.spec.consumer.kind, self.n, end, card.mismatches, card.backlog_max,
                           consumer.poller.polls, card.poller.polls, self.req_path.writes + self.rep_path.writes,
                           self.consumer_phase, card.reply_digest.hexdigest(), self.dropped, card.reply_timeouts,
                           getattr(card, "corrupted_requests", None))
        if self.flow.workload.keep_replies:
            stats["replies"] = card.kept_replies
        program = self.gen.stats()
        if program:  # a control program that waits on replies: its stalls and period (time in the program)
            stats["program"] = program
        if hasattr(card, "slot_wait_ps"):
            stats["slot_wait_ps"] = np.asarray(card.slot_wait_ps, np.int64)
        return stats


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


def run_topology(topo: Topology, progress: Progress | None = None, chunk_rounds: int = 10_000) -> list[LoopResult]:
    """Run every flow of ``topo`` together on one event timeline; one :class:`LoopResult` per
    flow, in flow order, with its per-round hops (:class:`Hops`) and statistics.

    ``progress(n)`` is called with the replies received so far (all flows), every
    ``chunk_rounds``. Raises RuntimeError when the event queue runs dry with requests
    outstanding; a live endpoint's failure (``keeps_partial``) carries ``partial``: the first
    flow's rounds completed so far. Every :data:`twin.engine.stop.CHECK_REPLIES` replies it looks
    for a stop request (:func:`twin.engine.stop.request_stop`) and then raises
    :class:`twin.engine.stop.Interrupted` whose ``results`` are every flow's whole rounds so far
    (``partial``: the live flow's, else the first), with the same statistics as a whole run except
    ``reply_digest`` (it may cover a reply past the cut).

    A topology of built-in ``sim`` nodes the compiled core computes (:mod:`twin.engine.compiled`)
    runs there, with identical results; any other stays on the simpy reference, the reason in
    verbose output (the ``twin.engine`` logger).
    """
    fast = _compiled(topo, progress, chunk_rounds)
    if fast is not None:
        return fast
    k = Kernel(topo.seed)
    lanes: dict = {}
    threads: dict = {}
    bridges: dict = {}
    phases: dict = {}
    clocks: dict = {}
    runs = []
    counter = [0]  # replies back at their generators, all flows
    stopped = None
    for flow in topo.flows:
        rtl_cfg = None
        if "rtl" in (flow.spec.model, flow.spec.card_model):
            from twin.rtl.loop import RtlConfig
            rtl_cfg = flow.spec.rtl or RtlConfig()
        runs.append(_FlowRun(k, flow, lanes, threads, bridges, phases, clocks, rtl_cfg, counter))
    total = sum(r.n for r in runs)
    try:
        for r in runs:
            r.consumer.start()
        for r in runs:
            r.gen.start()
        step = k.step
        check = min(chunk_rounds, CHECK_REPLIES)
        next_progress = min(total, chunk_rounds)
        while counter[0] < total:
            target = min(total, counter[0] + check, next_progress)
            try:
                while counter[0] < target:
                    step()
            except EmptySchedule:
                raise RuntimeError(f"topology {topo.name!r}: event queue ran dry after {counter[0]} of {total} "
                                   "replies") from None
            if counter[0] == next_progress:
                next_progress = min(total, next_progress + chunk_rounds)
                if progress:
                    progress(counter[0])
            # between batches of replies: a stop request (once every flow has a round to keep)
            if counter[0] < total and stop_requested() and all(r.gen.received for r in runs) and take_stop():
                stopped = Interrupted(f"after {counter[0]} of {total} replies")
                break
    except Exception as e:
        if getattr(e, "keeps_partial", False):  # a live endpoint failed: keep the rounds completed so far
            r = next((r for r in runs if hasattr(r.consumer, "live_stats")), runs[0])
            m = int(r.gen.received)
            e.partial = r.result(m)
            e.partial.stats = {"mismatches": int((~r.ok[:m]).sum()), "backlog_max": r.card.backlog_max,
                               **({"live": r.consumer.live_stats(),
                                   **{k: v[:m] for k, v in r.consumer.round_arrays().items()}}
                                  if hasattr(r.consumer, "live_stats") else {})}
        raise
    finally:
        for r in runs:
            if hasattr(r.consumer, "close") and hasattr(r.consumer, "live_stats"):
                r.consumer.close()
    out = []
    for r in runs:
        m = r.completed() if stopped else None
        res = r.result(m)
        res.stats = {"events": k.events, **r.stats(k)}
        if stopped:  # the counters of the rounds kept
            res.stats["mismatches"] = res.mismatches
            res.stats.pop("reply_digest", None)
            if "replies" in res.stats:
                res.stats["replies"] = res.stats["replies"][:m]
            res.stats["faults"]["injected"]["corrupt_piece"] = sum(1 for x in r.fp.corrupt_rounds if x <= m)
            res.stats["faults"].pop("not_reached", None)  # a stopped run: the stop, not the plan, left them
        if r.rtl_cfg is not None:
            res.stats["rtl"] = {name: {"cycles": node.cycles, "evaluated": node.evaluated, "steps": node.steps}
                                for name, node in (("card", r.card), (r.spec.name, r.consumer))
                                if hasattr(node, "evaluated")}
            if hasattr(r.card, "errors"):
                res.stats["rtl"]["card"]["errors"] = r.card.errors()
            for node in (r.card, r.consumer):
                getattr(node, "close", lambda: None)()
        if hasattr(r.consumer, "live_stats"):
            res.stats["live"] = r.consumer.live_stats()
            res.stats["live"]["endpoint_stats"] = r.consumer.close()
            res.stats.update({k: v[:m] for k, v in r.consumer.round_arrays().items()})
            if stopped:
                res.stats["live"]["rounds"] = len(res.t_in)
        out.append(res)
    out_stats = {"lanes": {name[0] + "->" + name[1]: {"writes": ln.writes, "bytes": ln.bytes, "busy_ps": ln.busy_ps}
                           for name, ln in lanes.items()},
                 "threads": {name: {"served": t.served, "busy_ps": t.busy_ps} for name, t in threads.items()}}
    for res in out:
        res.stats["shared"] = out_stats
    if stopped:
        stopped.results = out
        stopped.partial = next((res for r, res in zip(runs, out) if hasattr(r.consumer, "live_stats")), out[0])
        raise stopped
    return out


def run_event(spec: LoopSpec, progress: Progress | None = None, chunk_rounds: int = 10_000, *,
              payloads: Callable[[int], bytes] | None = None, reference: Callable[[bytes], bytes] | None = None,
              consumer_class: Callable[[type], type] | None = None, consumer_kwargs: dict | None = None,
              functions=None, keep_replies: bool = False) -> LoopResult:
    """Simulate one loop (the one-flow topology of ``spec``) and return every round's timestamps.

    ``progress(n)`` is called with the rounds completed so far, every ``chunk_rounds``. Workload
    hooks (:class:`FlowWorkload`): ``payloads(seq)`` request payloads; ``reference(payload)``
    what the card checks each reply against; ``functions`` the consumer's fid -> callable;
    ``consumer_class(base)`` wraps the model's consumer class (a hosting mode) with
    ``consumer_kwargs``; ``keep_replies`` returns every reply payload in ``stats["replies"]``.
    """
    wl = FlowWorkload(payloads, reference, keep_replies, functions, consumer_class, dict(consumer_kwargs or {}))
    try:
        res = run_topology(Topology.single(spec, wl), progress, chunk_rounds)[0]
    except Interrupted as e:
        e.partial.stats.pop("shared", None)
        raise
    res.stats.pop("shared", None)
    return res
