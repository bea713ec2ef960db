"""A decoder through the loop: a workload's frames in, corrections out, checked and counted.

:func:`run_decode` runs one loop (control side -> link card -> consumer memory -> hosted decoder ->
reply queue -> card) with the full event model: each request carries one shot's detection events
in its payload (:meth:`twin.qec.workload.Workload.frames`), the consumer's poller sees it when its
sequence word (or every piece) has landed, the hosted decoder answers from the bytes in the
consumer's memory, and the card checks every reply against the direct decode of the same shot
(:func:`twin.qec.decoders.direct_corrections`, computed from stim's boolean events, not from the
frames). The card keeps every reply; they are the loop's corrections, counted against stim's
ground truth.

Batching (:class:`BatchReplies`): the consumer's decoder is deterministic in the syndrome bytes, so
the engine decodes the stream's distinct frames in one :meth:`Decoder.decode_frames` call before the
event run (a matching decoder is one PyMatching ``decode_batch`` over the bit-packed frames) and the
consumer answers each request by looking up the bytes it finds in its memory; bytes the batch never
saw (a corrupted request) are decoded on the spot, one frame. The wall-clock time of that batch gives
the loop's decoding throughput (benchmarks/decode_throughput.py).

Sliding windows (``per="window"``): each request carries a window's rounds and the consumer runs
the sliding-window matching decoder (:class:`twin.qec.window.WindowStream`) on the bytes it reads,
one PyMatching call per window, in request order; the card's reference runs the same algorithm on
the payloads it sends and the direct decode runs it on stim's boolean events. In open loop the
requests leave when their last round has been measured: the traffic's period is the QEC cycle and
request ``i`` leaves ``ready_rounds[i]`` cycles into the stream (:meth:`Workload.ready_rounds`).

Parallel decoders (``workers``, ``order``): :class:`twin.qec.hosting.HostedConsumer`; the direct
engine computes one executor only, so runs with more use the event model throughout.
One stream over several devices (``device`` a list): :mod:`twin.engine.share`, K flows in one
topology, request ``i`` to device ``i mod K``, merged back in stream order.

The per-request record (arrival, decoder start and end, queue wait, reaction time) and the
backlog read from it are in :mod:`twin.qec.streaming`.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field, replace

import numpy as np

from twin.calibration.params import ParamSet
from twin.devices.generator import Gaps, TrafficParams
from twin.engine.direct import DirectNotApplicable, EngineDisagreement, check_same, run_direct
from twin.engine.event import run_topology
from twin.engine.spec import LoopResult
from twin.engine.stop import Interrupted, stop_requested, take_stop
from twin.engine.topology import FlowWorkload, Topology
from twin.exchange import contract as C
from twin.qec.cost import CostModel
from twin.qec.decoders import Decoder, LookupDecoder, MatchingDecoder, direct_corrections
from twin.qec.hosting import HostingMode, HostingParams
from twin.qec.outcome import Outcome, reply_rows
from twin.qec.workload import Workload, logical_errors
from twin.runtime.functions import REGISTRY, Function, register

SESSION_IDS = range(0x4000, 0x8000)  # ids given to decoders built for a workload (see session_function)


def frame_keys(frames: np.ndarray) -> list[bytes]:
    """Each frame (uint8 (n, B)) as ``bytes``: the payloads the control side sends."""
    buf, b = np.ascontiguousarray(frames, np.uint8).tobytes(), frames.shape[1]
    return [buf[i:i + b] for i in range(0, len(buf), b)]


class BatchReplies:
    """A stream's frames decoded in one batch; the consumer answers from the bytes it reads.

    ``frames`` uint8 (n, B) and their ``keys`` (:func:`frame_keys`). Identical frames (the same
    syndrome; at low p most shots have none) are decoded once: :meth:`Decoder.decode_frames` runs
    on the distinct frames only. :meth:`serve` returns the reply for a payload; one the batch
    never saw (a request corrupted on its way) is decoded on the spot by
    :meth:`Decoder.decode_payload`. Statistics: ``distinct``, ``on_the_spot``.
    """

    def __init__(self, decoder: Decoder, frames: np.ndarray, keys: list[bytes]):
        self.decoder = decoder
        self.pos = dict(zip(keys, range(len(keys))))  # frame -> one shot with that frame
        first = np.fromiter(self.pos.values(), np.int64, len(self.pos))
        self.rows = np.zeros((len(keys), decoder.reply_bytes), np.uint8)
        self.rows[first] = decoder.decode_frames(frames[first])
        self.distinct = len(first)
        self.on_the_spot = 0

    def serve(self, payload: bytes) -> bytes:
        """The reply for ``payload`` (the bytes the consumer read from its request slot)."""
        i = self.pos.get(payload)
        if i is None:
            self.on_the_spot += 1
            return self.decoder.decode_payload(payload)
        return self.rows[i].tobytes()


def accumulate(fn, per_shot: int):
    """A stateful served function for per-round requests, called in request order: it ORs each
    payload into the shot's events so far (the bits of different rounds never overlap), starts
    afresh every ``per_shot`` requests, and returns ``fn(events so far)``."""
    state = {"count": 0, "acc": 0}

    def serve(payload: bytes) -> bytes:
        v = int.from_bytes(payload, "little")
        state["acc"] = v if state["count"] % per_shot == 0 else state["acc"] | v
        state["count"] += 1
        return fn(state["acc"].to_bytes(len(payload), "little"))
    return serve


def window_server(stream, n_detectors: int, reply_bytes: int):
    """A served function for window requests: the payload's syndrome bits (detector ``i`` in bit
    ``i % 8`` of byte ``i // 8``) go to ``stream`` (:class:`twin.qec.window.WindowStream`, called in
    request order); the reply is the correction committed so far, packed like the replies."""
    nb = -(-n_detectors // 8)

    def serve(payload: bytes) -> bytes:
        if len(payload) < nb:
            raise ValueError(f"payload of {len(payload)} bytes; a window's syndrome needs {nb}")
        det = np.unpackbits(np.frombuffer(payload[:nb], np.uint8), bitorder=C.SYNDROME_NUMPY_BITORDER,
                            count=n_detectors).astype(bool)
        obs = stream.step(det)
        return np.packbits(obs, bitorder=C.SYNDROME_NUMPY_BITORDER).tobytes().ljust(reply_bytes, b"\0")
    return serve


WINDOW_STOP_CHECK = 256
"""The direct windowed decode looks for a stop request every this many windows (tens of µs each in
Python: a few ms between looks)."""


def window_direct(decoder, workload: Workload) -> np.ndarray:
    """The direct windowed decode of every request from stim's boolean events, uint8 (requests,
    reply_bytes): the correction committed after each window (:class:`twin.qec.window.WindowStream`).
    A window at a time in Python (seconds for 1e5 windows): every :data:`WINDOW_STOP_CHECK` windows
    it looks for a stop request (:mod:`twin.engine.stop`) and raises :class:`Interrupted` (``partial``
    None: no request of the loop has run) when there is one."""
    stream = decoder.stream()
    rows = workload.request_detectors()
    obs = np.zeros((len(rows), workload.n_observables), bool)
    for i, r in enumerate(rows):
        if i % WINDOW_STOP_CHECK == 0 and stop_requested() and take_stop():
            raise Interrupted(f"in the direct windowed decode, after {i:,} of {len(rows):,} windows")
        obs[i] = stream.step(r)
    return np.packbits(obs, axis=1, bitorder=C.SYNDROME_NUMPY_BITORDER)


def stream_traffic(traffic: TrafficParams, workload: Workload) -> TrafficParams:
    """Open-loop traffic for a windowed stream: the period is the QEC cycle and request ``i`` leaves
    ``ready_rounds[i]`` cycles into the stream (as gaps between requests, a :class:`Gaps` file). Other
    workloads and closed loops keep ``traffic``. Raises ValueError for random gaps with windows."""
    if workload.per != "window" or traffic.mode != "open_loop":
        return traffic
    if traffic.gaps is not None:
        raise ValueError("a windowed stream's requests leave when their last round is measured (period = the "
                         "QEC cycle); random gaps do not apply")
    ready = workload.ready_rounds()
    gaps = np.append(np.diff(ready), 1) * traffic.period_ps
    return replace(traffic, period_ps=0, gaps=Gaps("file", values_ps=tuple(int(g) for g in gaps)))


def session_function(decoder: Decoder, workload_name: str) -> Function:
    """The function id a decoder is served under. The bundled decoders keep their ids (the
    contract's ``functions``: 16 ``decode_rep3``, 17 ``decode_steane7``, 18 ``decode_surface5``) when the decoder is
    the same table or model, and a union-find decoder on the distance-3 surface code's bundled graph is
    served as 19 ``decode_uf_surface3``; any other decoder is registered under ``decode_<workload>_<kind>`` with the
    first free id from 0x4000; the same name keeps its id within a process and is served by the
    latest decoder registered under it."""
    from twin.qec.decoders import STANDARD_MATCHING
    from twin.qec.lookup import STANDARD
    std = {"rep3": C.FUNCTION_DECODE_REP3, "steane7": C.FUNCTION_DECODE_STEANE7, "surface5": C.FUNCTION_DECODE_SURFACE5}
    from twin.qec.decoders.union_find import UnionFindDecoder
    from twin.qec.union_find import standard_graph
    if isinstance(decoder, UnionFindDecoder) and decoder.graph.same_as(standard_graph("surface3")):
        return REGISTRY[C.FUNCTION_DECODE_UF_SURFACE3]
    if decoder.name in std:
        if isinstance(decoder, LookupDecoder) and decoder.name in STANDARD or \
                isinstance(decoder, MatchingDecoder) and decoder.name in STANDARD_MATCHING:
            return REGISTRY[std[decoder.name]]
    name = f"decode_{workload_name}_{decoder.kind}"
    doc = f"{decoder.kind} decoder for {workload_name}"
    for f in list(REGISTRY.values()):
        if f.name == name and f.id in SESSION_IDS:
            REGISTRY[f.id] = Function(f.id, name, decoder.decode_payload, None, doc)  # the latest decoder of that name
            return REGISTRY[f.id]
    fid = next(i for i in SESSION_IDS if i not in REGISTRY)
    return register(Function(fid, name, decoder.decode_payload, None, doc))


@dataclass
class DecodeRun:
    """One decoder through one loop.

    result: the loop's :class:`LoopResult` (per-round t_send/t_in/t_have/t_back, card's ``ok``);
    corrections: the loop's replies, uint8 (requests, reply_bytes), as the card read them (one per
    shot, or one per round of each shot: the correction for the events seen so far);
    direct: the direct decode of the same events, same shape; compute_ps: the decoder's compute
    time per request (int64 ps); cost: the cost model's description; decode_wall_s: wall-clock
    seconds of the consumer's batched decode; direct_wall_s: of the direct decode; extra: the engine
    used and the replies the card checked byte for byte (``engine``, ``replies_checked``), the hosted
    consumer's statistics (``served``; chain: ``waited_for_rearm``, ``trigger_ps`` per request;
    ``decode_ready_ps`` / ``decode_start_ps`` / ``decode_end_ps`` / ``decode_busy_ps`` per request,
    int64 ps, for a hosted consumer; with workers > 1 ``executor`` and ``held_ps`` per request; a
    stream over several devices: ``device_index`` per request and ``devices``, the flows' names).
    """

    workload: Workload
    decoder: Decoder
    device: str
    mode: str
    function: Function
    result: LoopResult
    corrections: np.ndarray
    direct: np.ndarray
    compute_ps: np.ndarray
    cost: dict
    decode_wall_s: float
    direct_wall_s: float
    extra: dict = field(default_factory=dict)

    @property
    def identical(self) -> bool:
        """Every loop correction equals the direct decode's, byte for byte."""
        return bool(np.array_equal(self.corrections, self.direct))

    @property
    def final_corrections(self) -> np.ndarray:
        """Each shot's correction: its last request's reply, uint8 (shots, reply_bytes)."""
        g = self.workload.requests_per_shot
        return self.corrections[g - 1::g]

    @property
    def logical_errors_loop(self) -> int:
        """Shots whose loop correction leaves a logical error (against stim's ground truth)."""
        return int(logical_errors(self.final_corrections, self.workload).sum())

    @property
    def logical_errors_direct(self) -> int:
        """Shots whose direct correction leaves a logical error."""
        g = self.workload.requests_per_shot
        return int(logical_errors(self.direct[g - 1::g], self.workload).sum())


def run_decode(params: ParamSet, device: str, workload: Workload, decoder: Decoder, *,
               mode: str = "inline", hosting: HostingParams = HostingParams(), cost: CostModel | None = None,
               traffic: TrafficParams | None = None, seed: int = 0, slots: int = 16, encoding: str | None = "classic",
               external_control: bool = False, progress=None, engine: str = "event",
               verify_rounds: int = 10_000, model: str = "sim", bridge=None, rtl=None, workers: int = 1,
               order: str = "in_order", inject_ps: int = 0) -> DecodeRun:
    """Run every shot of ``workload`` through the loop to consumer ``device`` of ``params``.

    device: a consumer's name, or a list of K >= 2 names: one open-loop stream (one control system,
    one card) dispatched round robin over them, request ``i`` to ``device[i mod K]``
    (:mod:`twin.engine.share`; the event model, per-shot requests only); the result is the stream's,
    in stream order, with ``extra["device_index"]`` and ``extra["devices"]`` (each flow's name,
    :func:`twin.engine.share.flow_names`) and ``cost["per_device"]``.

    traffic: closed loop by default (one request in flight); an open-loop ``TrafficParams`` streams
    the requests at its period (the QEC cycle). Its ``rounds`` and ``frame_bytes`` are replaced by
    the workload's. For a per-round workload the consumer (and the card's reference) keep the
    shot's events so far, in request order, and decode them at every round.
    encoding: ``classic`` by default, the encoding the seeds' sessions use to serve user functions
    (amd-qblox-exchange-runtime.txt); ``None`` keeps the consumer's own (its echo's).
    engine: ``event`` (default): the event model for every request, the card checks every reply;
    ``auto``: for inline hosting (and the OpenMP region routing itself) the direct engine
    (:func:`twin.engine.direct.run_direct` with the per-request compute time) for every request,
    with replies from the consumer's batch, and the event model over the first ``verify_rounds``
    requests, whose timestamps and replies must be identical (:class:`twin.engine.direct.EngineDisagreement`
    otherwise); other modes, and runs where requests queue for a slot, use the event model.
    model / bridge / rtl: what stands for the consumer (any registered model; ``bridge`` for live,
    ``rtl`` a :class:`twin.rtl.loop.RtlConfig`); ``params`` may be a card-path or a RoCE parameter set.
    inject_ps: a latency added to every request's decoder time (int ps >= 0; a latency sweep,
    :mod:`twin.qec.ler_latency`); sim and code placements only (ValueError otherwise).
    workers / order: N parallel decoders on the consumer's queue and their reply order
    (:class:`twin.qec.hosting.HostedConsumer`; ``as_ready`` has the card read replies as they land).
    A windowed workload (``per="window"``) needs a matching decoder; its open-loop stream leaves at
    the rounds' measurement (:func:`stream_traffic`).
    hosting: the hosting modes' costs; its ``general_path_ps`` (the runtime's general path, fitted on
    the card path's Python user function) applies to a Python user function (decoder kind
    ``function``) only: any other decoder's GPU time is its measurement in a persistent kernel, which
    holds the dispatch (:mod:`twin.qec.gpu_cost`), so it runs with ``general_path_ps`` 0.
    Raises KeyError for an unknown device, :class:`twin.qec.cost.CostError` when the device kind
    cannot serve the decoder under the cost model, ValueError for a bad mode or engine, or for a
    stream over several devices that is closed loop or not one request per shot, and
    :class:`twin.engine.stop.Interrupted` when asked to stop (:mod:`twin.engine.stop`): its
    ``partial`` is then the :class:`DecodeRun` of the whole shots completed (in ``auto``, stopped in
    the event model's check: of the shots it checked), its ``workload`` cut to those shots.
    """
    if engine not in ("event", "auto"):
        raise ValueError(f"engine {engine!r}: expected 'event' or 'auto'")
    from twin.qec.schema import cost_timed, cost_timed_models
    if inject_ps < 0 or (inject_ps and not cost_timed(model)):
        raise ValueError(f"an injected latency ({inject_ps} ps) is added to a {cost_timed_models('or')} decoder's "
                         "time, >= 0")
    if workload.per == "window" and not isinstance(decoder, MatchingDecoder):
        raise ValueError(f"windowed decoding runs the matching decoder on each window, not {decoder.kind}")
    if decoder.kind != "function":
        hosting = replace(hosting, general_path_ps=0)
    return _DecodeLoop(params, device, workload, decoder, mode=mode, hosting=hosting, cost=cost or CostModel(),
                       traffic=traffic or TrafficParams(), seed=seed, slots=slots, encoding=encoding,
                       external_control=external_control, progress=progress, engine=engine,
                       verify_rounds=verify_rounds, model=model, bridge=bridge, rtl=rtl, workers=workers,
                       order=order, inject_ps=inject_ps).run()


class _DecodeLoop:
    """One :func:`run_decode`: its flows (one spec and per-request compute time per device), the
    consumer's answers and the direct decode, the engine runs (the event model; or the direct engine
    checked by the event model), the whole shots kept after a stop, and the per-request statistics."""

    def __init__(self, params, device, workload: Workload, decoder: Decoder, *, mode: str, hosting: HostingParams,
                 cost: CostModel, traffic: TrafficParams, seed: int, slots: int, encoding: str | None,
                 external_control: bool, progress, engine: str, verify_rounds: int, model: str, bridge, rtl,
                 workers: int, order: str, inject_ps: int):
        self.params, self.device, self.workload, self.decoder = params, device, workload, decoder
        self.mode, self.hosting, self.cost, self.seed, self.slots = mode, hosting, cost, seed, slots
        self.encoding, self.external_control, self.progress, self.engine = encoding, external_control, progress, engine
        self.verify_rounds, self.model, self.bridge, self.rtl = verify_rounds, model, bridge, rtl
        self.workers, self.order, self.inject_ps = workers, order, inject_ps
        self.windowed = workload.per == "window"
        frames = workload.frames()
        self.acc_frames = workload.cumulative_frames() if workload.per == "round" else frames
        self.n = workload.requests
        self.traffic = stream_traffic(replace(traffic, rounds=self.n, frame_bytes=workload.frame_bytes), workload)
        self.fn = session_function(decoder, workload.name)
        self.devices = [device] if isinstance(device, str) else list(device)
        self.count = len(self.devices)
        if self.count > 1 and (workload.requests_per_shot != 1 or self.windowed):
            raise ValueError(f"a stream shared over {self.count} devices sends each request to one of them; a shot's "
                             f"{workload.per} requests build on the earlier ones' state in one decoder: per shot only")
        self.specs, self.computes, self.costs = self._flows()
        self.keys = frame_keys(frames)
        self.acc_keys = self.keys if self.acc_frames is frames else frame_keys(self.acc_frames)
        self.spent = [0.0]  # wall seconds the consumer spent decoding (windows: decoded as served)
        self._decode_batch()

    def _flows(self) -> tuple[list, list, list]:
        """One flow per device (:func:`twin.scenario.compile.flow_spec`, named by
        :func:`twin.engine.share.flow_names`; a shared stream's traffic dealt out): the specs, each
        device's per-request compute time (int64 ps, the injected latency added) and its cost model."""
        from twin.calibration.idle_prior import without_prior
        from twin.engine.share import flow_names, share_traffic
        from twin.scenario.compile import flow_spec
        w, count = self.workload, self.count
        flow_traffic = share_traffic(self.traffic, count) if count > 1 else [self.traffic]
        events = w.cumulative_detectors().sum(axis=1)
        specs, computes, costs = [], [], []
        for dev, name, tr in zip(self.devices, flow_names(self.devices), flow_traffic):
            spec = flow_spec(self.params, dev, tr, self.seed, slots=self.slots, encoding=self.encoding,
                             external_control=self.external_control, function=self.fn.id, model=self.model,
                             rtl=self.rtl, bridge=self.bridge)
            spec = replace(spec, name=name, consumer=without_prior(spec.consumer))  # docs/calibration.md, Idle priors
            specs.append(spec)
            c = spec.consumer if spec.handoff is None else spec.handoff.stage  # the device that runs the decoder
            clock_ps = c.poll_period_ps if c.kind == "fpga" else 4000
            dc = self.cost if count == 1 else copy.deepcopy(self.cost)  # each device's own description
            computes.append(dc.per_request_ps(self.decoder, c.kind, self.acc_frames, events,
                                              clock_ps=clock_ps, device=dev,
                                              host=self.params.consumers[dev].host) + self.inject_ps)
            costs.append(dc)
        return specs, computes, costs

    def _decode_batch(self) -> None:
        """The consumer's decoding of the stream, batched (:class:`BatchReplies`; windows: decoded as
        served), and the direct decode of stim's events, each with its wall seconds."""
        w = self.workload
        if self.windowed:
            from twin.qec.window import window_decoder
            self.wdec = window_decoder(w.circuit, w.window)
            self.replies = None
            t0 = time.perf_counter()
            self.direct = window_direct(self.wdec, w)
            self.direct_wall = time.perf_counter() - t0
            self.decode_wall = 0.0  # the consumer decodes window by window as it serves them: timed there (spent)
            return
        t0 = time.perf_counter()
        self.replies = BatchReplies(self.decoder, self.acc_frames, self.acc_keys)
        self.decode_wall = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.direct = direct_corrections(self.decoder, w.cumulative_detectors())
        self.direct_wall = time.perf_counter() - t0
        self.reference = dict(zip(self.acc_keys, (r.tobytes() for r in self.direct)))

    def timed(self, fn):
        """``fn`` with its wall seconds added to :attr:`spent`."""
        def serve(payload: bytes) -> bytes:
            t0 = time.perf_counter()
            try:
                return fn(payload)
            finally:
                self.spent[0] += time.perf_counter() - t0
        return serve

    def direct_one(self, acc: bytes) -> bytes:
        """The card's reference reply to the events ``acc``."""
        r = self.reference.get(acc)
        return r if r is not None else self.decoder.decode_payload(acc)

    def fresh(self):
        """The consumer's and the card's per-run state (per-round accumulation, window streams):
        ``(serve, reference)``, each ``payload -> reply``."""
        w, rb = self.workload, self.decoder.reply_bytes
        if self.windowed:
            self.spent[0] = 0.0
            return (self.timed(window_server(self.wdec.stream(), w.n_detectors, rb)),
                    window_server(self.wdec.stream(), w.n_detectors, rb))
        g = w.requests_per_shot
        if g == 1:
            return self.replies.serve, self.direct_one
        return accumulate(self.replies.serve, g), accumulate(self.direct_one, g)

    def event_run(self, run_specs, prog) -> Outcome:
        """The event model over ``run_specs`` (one flow, or a stream shared over several devices,
        :mod:`twin.engine.share`), with progress ``prog``; a stop keeps the requests so far."""
        made = []  # the hosting parts built (in flow order), for their statistics
        fn, keys, computes = self.fn, self.keys, self.computes
        mode, hosting, seed, workers, order = self.mode, self.hosting, self.seed, self.workers, self.order

        def recorded(how: HostingMode):
            def build(consumer):
                made.append(how(consumer))
                return made[-1]
            return build

        def flow_workload(k: int) -> FlowWorkload:
            serve, ref = self.fresh()

            def functions(fid: int):
                if fid == fn.id:
                    return serve
                f = REGISTRY.get(fid)
                return f.python if f else None
            K, comp = len(run_specs), computes[k]
            return FlowWorkload(lambda seq: keys[k + (seq - 1) * K], ref, True, functions,
                                recorded(HostingMode(mode, hosting, lambda seq: comp[k + (seq - 1) * K], seed,
                                                     workers, order)),
                                reply_order=order if workers > 1 else "in_order")
        wls = [flow_workload(k) for k in range(len(run_specs))]
        stopped = None
        if len(run_specs) == 1:
            try:
                res = run_topology(Topology.single(run_specs[0], wls[0]), prog)[0]
            except Interrupted as e:  # its whole requests so far (replies kept for those)
                stopped, res = e, e.partial
            res.stats.pop("shared", None)
            flow = None
        else:
            from twin.engine.share import merge, stream_prefix, stream_topology
            try:
                results = run_topology(stream_topology(run_specs, wls), prog)
            except Interrupted as e:  # the stream's requests so far that every device completed
                stopped, results = e, stream_prefix(e.results)
            res, flow = merge(results, "+".join(self.devices))
        kept = res.stats.pop("replies")
        return Outcome(res, reply_rows(kept, self.decoder.reply_bytes), made, flow, stopped)  # RTL times itself

    def run(self) -> DecodeRun:
        """The stream through the engines, cut to whole shots after a stop; the :class:`DecodeRun`
        (raised as the stop's ``partial`` after a stop)."""
        out = self._direct() if self._direct_applies() else None
        simulated = None
        if out is None and self.model == "live":
            from twin.qec.live_pace import paced_applies, run_paced_decode
            if paced_applies(self) is None:  # the same placement simulated first: its paths place the device
                simulated = self.simulated()
                out = run_paced_decode(self, simulated)
        if out is None:
            out = self.event_run(self.specs, self.progress)
            out.checked, out.served_wall = self.n, self.spent[0]
        decode_wall = out.served_wall if self.windowed else self.decode_wall
        workload, direct, compute = self.workload, self.direct, self.computes[0]
        if out.stopped is not None:  # keep whole shots: the requests of the shots completed (checked ones, in auto)
            g = workload.requests_per_shot
            shots = (out.checked if out.used == "direct+event" else len(out.res.t_in)) // g
            k = shots * g
            workload = replace(workload, detectors=workload.detectors[:shots],
                               observables=workload.observables[:shots])
            out.res, out.corr, direct, compute = out.res.head(k), out.corr[:k], direct[:k], compute[:k]
            out.res.stats["mismatches"] = out.res.mismatches
            out.checked = min(out.checked, k)
        extra = self._extra(out, compute)
        if simulated is not None:
            extra["simulated"] = simulated
        if self.count > 1:  # each request's compute time, from its device's flow
            compute = np.asarray(self.computes[0]).copy()
            for k in range(1, self.count):
                compute[k::self.count] = self.computes[k][k::self.count]
            compute = compute[:len(out.res.t_in)]
        run = DecodeRun(workload, self.decoder, "+".join(self.devices), self.mode, self.fn, out.res, out.corr, direct,
                        compute, self._described(), decode_wall, self.direct_wall, extra)
        if out.stopped is not None:
            out.stopped.partial = run
            raise out.stopped
        return run

    def simulated(self) -> DecodeRun:
        """This placement with model ``sim`` on the same device (the same workload, decoder, cost
        model, traffic and seed; engine ``auto``, no progress): the prediction a live placement is
        held against."""
        sim = copy.copy(self)
        sim.model, sim.bridge, sim.engine, sim.progress, sim.rtl = "sim", None, "auto", None, None
        sim.specs = [replace(s, model="sim", bridge=None) for s in self.specs]
        sim.spent = [0.0]
        return sim.run()

    def _direct_applies(self) -> bool:
        """``engine: auto`` for inline hosting (or the OpenMP region routing itself), one worker, one
        device, a model the direct engine computes."""
        from twin.engine.direct import direct_computes
        return self.engine == "auto" and self.mode in ("inline", "external_self") and self.workers == 1 and \
            self.count == 1 and direct_computes("consumer", self.model)

    def _direct(self) -> Outcome | None:
        """The direct engine with the per-request compute time for every request, replies from the
        consumer's batch, checked by the event model over the first ``verify_rounds`` requests
        (:meth:`_check_by_event`); None when requests queue for slots (only the event model is
        authoritative then)."""
        spec, c, rb = self.specs[0], self.specs[0].consumer, self.decoder.reply_bytes
        gp = self.hosting.general_path_ps if c.kind == "gpu" else 0
        extra_ps = self.computes[0] + gp + (self.hosting.omp_self_ps if self.mode == "external_self" else 0)
        try:
            res = run_direct(spec, self.progress, extra_ps=extra_ps, reply_bytes=rb)
        except DirectNotApplicable:
            return None
        except Interrupted as e:  # the direct engine's requests so far, none checked
            serve, _ = self.fresh()
            m = len(e.partial.t_in)
            return Outcome(e.partial, reply_rows([serve(k) for k in self.keys[:m]], rb), [], stopped=e, used="direct",
                            served_wall=self.spent[0])
        serve, _ = self.fresh()
        out = Outcome(res, reply_rows([serve(k) for k in self.keys], rb), [], used="direct", served_wall=self.spent[0])
        out.checked = max(0, min(self.verify_rounds, self.n))
        if out.checked:  # --verify-rounds 0: the direct engine alone, no reply checked by the card (as in twin run)
            self._check_by_event(out)
        else:
            res.stats.update(mismatches=0, backlog_max=0)
        return out

    def _check_by_event(self, out: Outcome) -> None:
        """The event model over the first ``out.checked`` requests: its timestamps, hops and replies
        must be the direct engine's (:class:`twin.engine.direct.EngineDisagreement` otherwise)."""
        ev = self.event_run([replace(self.specs[0], traffic=replace(self.traffic, rounds=out.checked))], None)
        out.made, out.stopped = ev.made, ev.stopped
        out.checked = len(ev.res.t_in)  # all asked for, or those before a stop (then only these are kept)
        check_same(out.res, ev.res, out.checked)  # timestamps and hops of the requests the event model ran
        if not np.array_equal(ev.corr, out.corr[:out.checked]):
            raise EngineDisagreement(f"decode loop {self.device!r}: the event model's replies differ from the batch's")
        out.res.stats.update(mismatches=ev.res.mismatches, backlog_max=0)
        out.res.ok[:out.checked] = ev.res.ok
        out.used = "direct+event"

    def _extra(self, out: Outcome, compute: np.ndarray) -> dict:
        """:attr:`DecodeRun.extra`: the engine, the replies checked, the batch's statistics, and the
        hosted consumers' per-request statistics (or, checked by the event model, the inline body's)."""
        res, made, m = out.res, out.made, len(out.res.t_in)
        extra_batch = {} if self.replies is None else {"distinct_frames": self.replies.distinct,
                                                       "decoded_on_the_spot": self.replies.on_the_spot}
        extra = {"served": sum(x.served for x in made) if made else len(res.t_in), "engine": out.used,
                 "replies_checked": out.checked, **extra_batch}
        con = made[0] if made else None
        if self.mode == "chain" and made:
            extra.update(waited_for_rearm=sum(x.waited_for_rearm for x in made),
                         trigger_ps=_per_request(out, "trigger_ps"))
        if out.used == "event" and con is not None:  # hosting parts (an RTL or live consumer builds none)
            extra.update({f"decode_{k}_ps": _per_request(out, f"decode_{k}")
                          for k in ("ready", "start", "end", "busy")})
            if self.workers > 1:
                extra.update(executor=_per_request(out, "executor"), held_ps=_per_request(out, "held_ps"))
        elif out.used == "direct+event":  # inline, one thread: the body ends at the reply; it waited for the thread
            extra.update(self._inline_body(res, compute))
        if self.count > 1:  # the device (flow) of each request, stream order, and each device's label
            from twin.engine.share import flow_names
            assert out.flow is not None  # a stream over several devices runs in the event model
            extra.update(device_index=out.flow[:m], devices=flow_names(self.devices))
        return extra

    def _inline_body(self, res: LoopResult, compute: np.ndarray) -> dict:
        """The inline body's decode ready/start/end/busy per request (int64 ps) from the direct
        engine's hops: it ends at the reply, after the service and compute time."""
        from twin.exchange.encoding import get_encoding
        h, c = res.hops, self.specs[0].consumer
        assert h is not None  # the direct engine records every request's hops
        start = h.reply - (c.service_ps + compute + (self.hosting.omp_self_ps if self.mode == "external_self" else 0))
        fence = 0 if get_encoding(c.encoding).per_piece else c.fence_ps
        return dict(decode_start_ps=start, decode_end_ps=h.reply.copy(), decode_ready_ps=start - (h.start - h.seen),
                    decode_busy_ps=h.reply + fence - h.start + c.poll_cost_ps)

    def _described(self) -> dict:
        """The decoder time's description: the cost model's (each device's, for a shared stream), or
        how the model times itself (:mod:`twin.nodes.models`: ``decoder_time``)."""
        from twin.nodes.models import COST_MODEL, model_for
        own = model_for("consumer", self.model).supports["decoder_time"]
        if own != COST_MODEL:
            return {"how": own}
        if self.count > 1:
            from twin.engine.share import flow_names
            return {**self.costs[0].describe(), "per_device": {nm: dc.describe() for nm, dc in
                                                               zip(flow_names(self.devices), self.costs)}}
        return self.cost.describe()


def _per_request(out: Outcome, attr: str) -> np.ndarray:
    """A hosted consumer statistic per request, in stream order (the first ``len(out.res.t_in)``)."""
    m = len(out.res.t_in)
    parts = [np.array(getattr(c, attr), np.int64) for c in out.made]
    if out.used != "event" or len(parts) == 1:
        return parts[0][:m]
    K = len(parts)
    parts = [p[:-(-(m - k) // K)] for k, p in enumerate(parts)]  # a stopped stream: its prefix's share
    res = np.empty(sum(len(p) for p in parts), np.int64)
    for k, p in enumerate(parts):
        res[k::K] = p
    return res


def queue_depth(result: LoopResult, t_ps: np.ndarray) -> np.ndarray:
    """Requests in the card (entered, reply not yet had) at each instant of ``t_ps`` (int64 ps):
    the loop's queue depth over time. Requests beyond the slot count wait in the card's backlog."""
    t_in = np.sort(result.t_in)
    t_have = np.sort(result.t_have)
    return np.searchsorted(t_in, t_ps, side="right") - np.searchsorted(t_have, t_ps, side="right")
