"""A consumer that polls its request queue and answers through the reply queue."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

from twin.devices.host_runtime import INNER as HOST_INNER
from twin.devices.host_runtime import STREAM as HOST_STREAM
from twin.devices.host_runtime import HostRuntime
from twin.devices.service import IdleCost, ServiceMode, idle_ps, mix_fraction, mode_draws, mode_extra_ps, mode_picks
from twin.exchange.contract import STATUS
from twin.exchange.encoding import Encoding, slot_offset
from twin.kernel import Kernel, MemoryRegion, Poller, PostedWritePath
from twin.nodes.protocol import ConsumerStats, NoTrace


@dataclass(frozen=True)
class ConsumerParams:
    """Timing of one consumer (all integer picoseconds).

    Parameters
    ----------
    kind: "cpu" | "gpu" | "fpga".
    poll_period_ps: time between two polls of the request queue.
    poll_phase_ps: the first poll instant (0 <= phase < period); a run draws it from its seed
        unless it is given.
    poll_cost_ps: from a poll's instant to having its answer (a load of the request slot).
    read_ps: classic encoding only: the dependent read of the payload after the publish word.
    piece_check_ps: per-piece encoding only: checking one 16-byte piece's sequence number.
    service_ps: the function body (the built-in echo) from having the request to issuing the
        reply's first write.
    fence_ps: classic encoding only: the release fence between reply data and ready word
        (0 where the device relies on posted-write order, as the V80 does).
    encoding: the encoding this consumer uses for the echo ("classic" | "per_piece").
    preprocess_ps_per_measurement: host pre-processing before the function body, per raw
        measurement the request carries (one measurement per payload bit): detector formation
        (XOR of consecutive rounds' measurements) ahead of the decoder; 0 when the request
        already carries detectors.
    idle: what idling costs (:class:`twin.devices.service.IdleCost` per mechanism): extra service
        time as a function of the idle gap before each request; default none.
    modes: extra modes of the service time (:class:`twin.devices.service.ServiceMode`); default none.
    idle_mix: (gap_ps, fraction) points: how far each mode moves to its long-idle block after a gap.
    host_runtime: a dispatcher-queue-worker host between taking the request and the reply
        (:class:`twin.devices.host_runtime.HostRuntime`: enqueue, wake and hand-back per round,
        measured); default none.
    """

    kind: str
    poll_period_ps: int
    poll_cost_ps: int
    service_ps: int
    encoding: str
    read_ps: int = 0
    piece_check_ps: int = 0
    fence_ps: int = 0
    poll_phase_ps: int | None = None
    preprocess_ps_per_measurement: int = 0
    idle: tuple[IdleCost, ...] = ()
    modes: tuple[ServiceMode, ...] = ()
    idle_mix: tuple[tuple[int, float], ...] = ()
    host_runtime: HostRuntime | None = None

    def __post_init__(self):
        if self.kind not in ("cpu", "gpu", "fpga"):
            raise ValueError(f"consumer kind must be cpu, gpu or fpga, got {self.kind!r}")
        if self.poll_period_ps <= 0:
            raise ValueError(f"poll_period_ps must be > 0, got {self.poll_period_ps}")
        for key in ("poll_cost_ps", "service_ps", "read_ps", "piece_check_ps", "fence_ps",
                    "preprocess_ps_per_measurement"):
            if getattr(self, key) < 0:
                raise ValueError(f"{key} must be >= 0, got {getattr(self, key)}")
        if self.poll_phase_ps is not None and not 0 <= self.poll_phase_ps < self.poll_period_ps:
            raise ValueError(f"poll_phase_ps must be in [0, poll_period_ps), got {self.poll_phase_ps}")

    @property
    def varies(self) -> bool:
        """Whether the service time varies per round (an idle cost or service modes)."""
        return bool(self.idle or self.modes)

    def idle_cost_ps(self, gap_ps: int) -> int:
        """Extra service time (ps) after ``gap_ps`` of idling (:func:`twin.devices.service.idle_ps`)."""
        return idle_ps(self.idle, gap_ps)

    def mode_draws(self, seed: int, stream: str, n: int):
        """Per-round extra service (int64 ps) of the modes (:func:`twin.devices.service.mode_draws`)."""
        return mode_draws(self.modes, seed, stream, n)

    def mode_picks(self, seed: int, stream: str, n: int) -> list[tuple[int, float]]:
        """Per-round mode and uniform draw (:func:`twin.devices.service.mode_picks`)."""
        return mode_picks(self.modes, seed, stream, n)

    def round_extra_ps(self, pick: tuple[int, float] | None, gap_ps: int) -> int:
        """One round's service beyond the constant body (ps): the idle cost of ``gap_ps`` plus its
        mode's extra (``pick``; None: no mode) at the idle fraction of ``gap_ps``. Both engines call it."""
        x = idle_ps(self.idle, gap_ps)
        if pick is not None:
            x += mode_extra_ps(self.modes, pick, mix_fraction(self.idle_mix, gap_ps) if self.idle_mix else 0.0)
        return x

    def pre_service_ps(self, enc: Encoding, nbytes: int) -> int:
        """Time from a poll's answer to the start of the function body for one request of
        ``nbytes`` payload: reading it (pieces checked, or the dependent read) and pre-processing
        its ``8 * nbytes`` measurements."""
        pre = 8 * nbytes * self.preprocess_ps_per_measurement
        if enc.per_piece:
            return enc.pieces(nbytes) * self.piece_check_ps + pre
        return self.read_ps + pre

    def with_phase(self, phase_ps: int) -> "ConsumerParams":
        """The same parameters with the poll phase set."""
        return replace(self, poll_phase_ps=int(phase_ps))


class ServingThread:
    """The one thread of a consumer node (a CPU core, a GPU persistent kernel, an FPGA engine):
    it serves the node's request queues one request at a time, first come first served.

    ``free``: the instant (ps) it has finished its current request and polls again; ``served``,
    ``busy_ps`` (from taking a request to polling again, poll cost included).
    """

    def __init__(self):
        self.free = 0
        self.served = 0
        self.busy_ps = 0


class EachLanding:
    """The poller part of a device that notices its own requests (a live device behind the bridge):
    the simulated side observes each landing at once, with no poll grid and no cost.

    Same interface as :class:`twin.kernel.Poller` (``arm``, ``first_poll``, ``cost_ps``): armed with
    a readiness test and a callback, it schedules the callback at the instant of the landing that
    makes the test pass (or at once if it passes when armed), as one event of that instant.
    Statistics: ``polls`` and ``hits``: the requests observed.
    """

    cost_ps = 0

    def __init__(self, kernel: Kernel, region: MemoryRegion, name: str = ""):
        self.kernel = kernel
        self.name = name
        self._ready: Callable[[], bool] | None = None
        self._on_seen: Callable[[int], None] | None = None
        self._pending = False
        self.hits = 0
        region.watch(self._landed)

    @property
    def polls(self) -> int:
        """Requests observed (one observation each)."""
        return self.hits

    def first_poll(self, t_ps: int) -> int:
        """The instant a landing at ``t_ps`` is observed: then."""
        return t_ps

    def arm(self, ready: Callable[[], bool], on_seen: Callable[[int], None]) -> None:
        """Watch for ``ready()`` from now on; call ``on_seen(t)`` when a landing makes it true.
        Raises if already armed."""
        if self._on_seen is not None:
            raise RuntimeError(f"poller {self.name!r} armed twice")
        self._ready, self._on_seen = ready, on_seen
        if ready():
            self._schedule()

    def _landed(self) -> None:
        if self._on_seen is not None and not self._pending and self._ready is not None and self._ready():
            self._schedule()

    def _schedule(self) -> None:
        self._pending = True
        self.kernel.at(self.kernel.now, self._fire)

    def _fire(self) -> None:
        cb = self._on_seen
        self._on_seen = self._ready = None
        self._pending = False
        self.hits += 1
        if cb is not None:
            cb(self.kernel.now)


class FunctionAnswer:
    """The answer part of model ``sim``: the function the request's header names, looked up by id
    (``functions(fid) -> callable | None``; default: the echo for id 0)."""

    def __init__(self, functions: Callable[[int], Callable[[bytes], bytes] | None] | None = None):
        self.functions = functions or (lambda fid: (lambda b: bytes(b)) if fid == 0 else None)

    def answer(self, c: "PollingConsumer", seq: int, base: int) -> list[tuple[int, bytes]]:
        """The reply's posted writes (offsets in the reply slot, in issue order) for the request
        in the slot at ``base`` of ``c``'s request queue: the function named by its header runs on
        its payload; an unknown function id gets an empty reply with status ``unknown_function``, a
        function that raises ValueError on its payload an empty reply with status
        ``function_failed``, a reply too long for its slot an empty reply with status ``bad_length``."""
        enc, buf = c.enc, c.requests.buf
        h = enc.header(buf, base)
        fn = self.functions(h.function)
        if fn is None:
            return enc.writes(seq, b"", function=h.function, flags=STATUS["unknown_function"])
        try:
            reply = fn(enc.payload(buf, base))
        except ValueError:  # the function refused its input (e.g. a payload shorter than a syndrome)
            return enc.writes(seq, b"", function=h.function, flags=STATUS["function_failed"])
        if enc.slot_bytes(len(reply)) > c.slot_bytes:  # would spill into the next slot
            return enc.writes(seq, b"", function=h.function, flags=STATUS["bad_length"])
        return enc.writes(seq, reply, function=h.function)

    def shutdown(self) -> None:
        """Nothing to release."""


class HostingPart:
    """The hosting part of a consumer: how the function it answers with is hosted, and so when a
    request's reply goes out and when the queue is polled again. This base is the calibrated
    service (no hosting mode: the consumer's ``service_ps`` plus its idle cost and service modes,
    :meth:`PollingConsumer.extra_ps`); the hosting modes (:class:`twin.qec.hosting.Hosted`), a
    live device's measured service (:class:`twin.devices.live.LiveHosting`) and a hand-off to a
    second device (:class:`twin.devices.handoff.HandOff`) are the others. Built for one consumer
    (``c``) by a factory ``(consumer) -> HostingPart`` (:class:`FlowWorkload`'s ``hosting``)."""

    keeps_partial = False  # a failed run keeps the rounds so far (a live device)

    def __init__(self, c: "PollingConsumer"):
        self.c = c

    def pick(self, t: int) -> "ServingThread":
        """The serving thread that takes the request a poll saw (now = ``t``): the consumer's."""
        return self.c.thread

    def next_poll_from(self, t_free: int) -> int:
        """When the queue is polled for its next request after one freed its thread at ``t_free``:
        then (one thread)."""
        return t_free

    def serve(self, seq: int, base: int, at: int) -> None:
        """Serve request ``seq`` (slot at ``base``), taken by the thread at ``at`` (ps, >= now)."""
        c = self.c
        t = at + c.host_before_ps(seq, at) + c.p.pre_service_ps(c.enc, c.frame_bytes) + c.p.service_ps \
            + c.extra_ps(seq, at)
        t += c.host_after_ps(seq, t)
        writes = c.answer(seq, base)
        if c.tamper:
            writes = c.tamper(seq, writes)
        fence = 0 if c.enc.per_piece else c.p.fence_ps
        c._reply_at(seq, t, base, writes, fence)
        c._done(seq, at, t + fence, t, t + fence)

    def sections(self) -> dict:
        """Its own sections of the consumer's statistics (:class:`twin.nodes.protocol.ConsumerStats`
        fields ``live``, ``endpoint``, ``rounds``); none."""
        return {}

    def shutdown(self) -> None:
        """Nothing to release."""


class PollingConsumer(NoTrace):
    """One request queue of a CPU core, GPU persistent kernel or FPGA logic, and its replies: a
    consumer node (:class:`twin.nodes.protocol.ConsumerNode`) composed of three parts.

    Ports: ``requests`` (its own :class:`MemoryRegion`: the request queue, ``slots`` slots of
    ``slot_bytes``), ``reply`` (a :class:`PostedWritePath` into the producer's reply queue).
    A node that serves several queues (a mesh: several flows routed to one consumer) has one
    :class:`PollingConsumer` per queue sharing one :class:`ServingThread` (``thread=``).

    Parts: ``poll`` (the poller part: default a :class:`twin.kernel.Poller` at the parameters'
    period, phase and cost, stalled in ``stalls``; :class:`EachLanding` for a device that notices
    its own requests), ``hosting`` (a factory ``(consumer) -> HostingPart``: when the reply goes
    out; default the calibrated service, :class:`HostingPart`), ``answer`` (what the reply says:
    default :class:`FunctionAnswer` over ``functions``; the C runtime library for model ``code``).

    Behaviour per request: a poll sees the slot complete (publish word, or every piece). If the
    thread is free at that poll it takes the request at once; if it is busy with another queue's
    request, it takes it at its first poll after it is free (the wait is queueing). It reads the
    payload, runs the function, writes the reply (per-piece: one burst; classic: data, release
    fence, ready word last), then polls the next slot.

    ``hops``: a :class:`twin.engine.hops.Hops` the consumer writes its per-round instants into
    (seen, start, reply, publish, reply landed), or ``None``.

    Statistics (:meth:`finish`): ``served``, ``poller.polls``, ``poller.hits``; the thread's ``busy_ps``.
    """

    def __init__(self, kernel: Kernel, name: str, params: ConsumerParams, encoding: Encoding,
                 requests: MemoryRegion, reply: PostedWritePath, slots: int, slot_bytes: int,
                 frame_bytes: int, functions: Callable[[int], Callable[[bytes], bytes] | None] | None = None,
                 tamper: Callable[[int, list], list] | None = None, stalls: tuple[tuple[int, int], ...] = (),
                 thread: ServingThread | None = None, hops=None, *, poll=None,
                 hosting: Callable[["PollingConsumer"], HostingPart] | None = None, answer=None):
        self.kernel = kernel
        self.name = name
        self.p = params
        self.enc = encoding
        self.requests = requests
        self.reply = reply
        self.slots = slots
        self.slot_bytes = slot_bytes
        self.frame_bytes = frame_bytes
        phase = params.poll_phase_ps or 0
        self.poller = poll if poll is not None else Poller(kernel, requests, params.poll_period_ps, phase,
                                                           params.poll_cost_ps, name=f"{name}.poll", blackouts=stalls)
        self.tamper = tamper
        self.thread = thread if thread is not None else ServingThread()
        self.hops = hops
        self.next_seq = 1
        self.served = 0
        self.seen_ps = 0  # the request being taken: the poll an idle thread would have seen it with (ps)
        self.service_draws = None  # per round: (mode, uniform draw) of the service modes (make_endpoint sets it)
        self.host_draws = None  # per round: the host runtime's uniform draw (make_endpoint sets it)
        self._host: tuple[int, int, int] = (0, 0, 0)  # the request being served: its host runtime stages (ps)
        self.answerer = answer if answer is not None else FunctionAnswer(functions)
        self.hosting = (hosting or HostingPart)(self)

    # -- the node protocol ------------------------------------------------------------------------

    def setup(self) -> None:
        """Begin polling for the first request."""
        self._arm()

    @property
    def keeps_partial(self) -> bool:
        """Whether a failed run keeps its rounds so far (its hosting part says: a live device)."""
        return self.hosting.keeps_partial

    def finish(self) -> ConsumerStats:
        """Its statistics: polls of its queue, requests served, its hosting part's sections."""
        return ConsumerStats(self.poller.polls, self.served, **self.hosting.sections())

    def shutdown(self) -> None:
        """Release what its parts hold (a live session, the C runtime's endpoint); idempotent."""
        self.hosting.shutdown()
        self.answerer.shutdown()

    # -- the request's way ------------------------------------------------------------------------

    def _arm(self) -> None:
        seq = self.next_seq
        base = slot_offset(seq, self.slots, self.slot_bytes)
        self.poller.arm(lambda: self.enc.ready(self.requests.buf, base, seq, self.slot_bytes),
                        lambda t: self._take(seq, base))

    def _take(self, seq: int, base: int) -> None:
        """A poll has seen request ``seq`` (now = poll instant + cost): the thread takes it now, or
        at its first poll after finishing the request it is busy with."""
        t = self.kernel.now
        cost = self.poller.cost_ps
        self.thread = self.hosting.pick(t)
        free = self.thread.free
        at = t if free <= t - cost else self.poller.first_poll(free) + cost
        self.seen_ps = t
        if self.hops is not None:  # seen: the poll an idle thread would have seen it with (queueing after it)
            land = self.hops.land[seq - 1]
            self.seen_ps = t if land < 0 else min(t, self.poller.first_poll(land) + cost)
            self.hops.seen[seq - 1] = self.seen_ps
            self.hops.start[seq - 1] = at
        self._seen(seq, base, at)

    def answer(self, seq: int, base: int) -> list[tuple[int, bytes]]:
        """The reply's posted writes (offsets in the reply slot, in issue order) for the request in
        the slot at ``base``: its answer part's (:meth:`FunctionAnswer.answer`)."""
        return self.answerer.answer(self, seq, base)

    def _seen(self, seq: int, base: int, at: int) -> None:
        """Serve request ``seq`` (slot at ``base``), taken by the thread at ``at`` (ps, >= now): its
        hosting part times it (:meth:`HostingPart.serve`)."""
        self.hosting.serve(seq, base, at)

    def extra_ps(self, seq: int, at: int) -> int:
        """Request ``seq``'s service beyond the constant body (ps): the idle cost of the gap from the
        thread's last free instant to the poll that took it (``at`` minus the poll cost), plus its
        service-mode draw. 0 for a consumer whose service does not vary."""
        if not self.p.varies:
            return 0
        pick = self.service_draws[seq - 1] if self.service_draws is not None and seq <= len(self.service_draws) \
            else None
        return self.p.round_extra_ps(pick, at - self.p.poll_cost_ps - self.thread.free)

    def host_before_ps(self, seq: int, at: int) -> int:
        """Request ``seq``'s host runtime time before its service (ps: enqueue + wake; 0 without a
        host runtime), drawn for the idle gap :meth:`extra_ps` uses; records ``hr_enqueued`` and
        ``hr_awake`` in the hops. Call before :meth:`host_after_ps`."""
        hr = self.p.host_runtime
        if hr is None:
            return 0
        assert self.host_draws is not None, "make_endpoint draws the host runtime's rounds"
        self._host = hr.stages_ps(float(self.host_draws[seq - 1]), at - self.p.poll_cost_ps - self.thread.free)
        enq, wake, _ = self._host
        if self.hops is not None and self.hops.inner is not None:
            self.hops.inner[HOST_INNER[0]][seq - 1] = at + enq
            self.hops.inner[HOST_INNER[1]][seq - 1] = at + enq + wake
        return enq + wake

    def host_after_ps(self, seq: int, decoded: int) -> int:
        """Request ``seq``'s hand-back (ps; 0 without a host runtime), its service done at
        ``decoded`` (recorded as ``hr_decoded``)."""
        if self.p.host_runtime is None:
            return 0
        if self.hops is not None and self.hops.inner is not None:
            self.hops.inner[HOST_INNER[2]][seq - 1] = decoded
        return self._host[2]

    def _reply_at(self, seq: int, t: int, base: int, writes, fence: int) -> None:
        """Post the reply's writes from ``t``: per-piece one burst; classic the data, then after the
        release ``fence`` (ps) the ready word. The reply uses its request's slot index (both
        queues share the geometry)."""
        k = self.kernel
        if self.enc.per_piece:
            k.at(t, self._post, seq, base, writes)
        else:
            (o_data, data), (o_word, word) = writes
            k.at(t, self._post, seq, base, [(o_data, data)])
            k.at(t + fence, self._post, seq, base, [(o_word, word)])

    def _done(self, seq: int, at: int, t_free: int, t_reply: int, t_publish: int, record: bool = True) -> None:
        """Book request ``seq``: taken at ``at``, reply's first write issued at ``t_reply``, its
        publishing write at ``t_publish``, the thread free (polling again) at ``t_free``; with
        ``record`` the reply instants go into the flow's hops (a first stage that hands the request
        on replies through its second stage: :mod:`twin.devices.handoff`)."""
        th = self.thread
        th.busy_ps += t_free - at + self.poller.cost_ps
        th.free = t_free
        th.served += 1
        if record and self.hops is not None:
            self.hops.reply[seq - 1] = t_reply
            self.hops.publish[seq - 1] = t_publish
        self.next_seq = seq + 1
        self.served += 1
        self.kernel.at(max(self.hosting.next_poll_from(t_free), self.kernel.now), self._arm)

    def _post(self, seq: int, base: int, writes: list[tuple[int, bytes]]) -> None:
        land = 0
        for off, data in writes:
            land = self.reply.write(base + off, data)
        if self.hops is not None:
            self.hops.rland[seq - 1] = land


def make_endpoint(ctx, *, poll=None, hosting=None, answer=None) -> PollingConsumer:
    """Build a consumer for one queue pair from a :class:`twin.engine.event.NodeContext`: the
    flow's consumer parameters with the node's poll phase, its faults (reply tampering, stalls),
    the node's serving thread and the flow's hops, and its parts (:class:`PollingConsumer`):
    ``poll`` and ``answer`` the model's; ``hosting`` the model's, else the flow workload's (a
    hosting mode), else the calibrated service."""
    spec, fp, wl = ctx.spec, ctx.spec.faults, ctx.workload
    ep = PollingConsumer(ctx.kernel, ctx.name, spec.consumer.with_phase(ctx.phase_ps), ctx.enc, ctx.req_region,
                         ctx.rep_path, spec.slots, ctx.slot_bytes, spec.traffic.frame_bytes, ctx.functions(),
                         fp.tamper("reply", ctx.enc.per_piece), fp.consumer_stalls(spec.consumer.kind), ctx.thread,
                         ctx.hops, poll=poll, hosting=hosting or wl.hosting, answer=answer)
    if spec.consumer.modes:
        ep.service_draws = spec.consumer.mode_picks(spec.seed, spec.stream("consumer.modes"), spec.traffic.rounds)
    hr = spec.consumer.host_runtime
    if hr is not None:
        ep.host_draws = hr.draws(spec.seed, spec.stream(HOST_STREAM), spec.traffic.rounds)
        if ctx.hops is not None:
            ctx.hops.inner = {name: [-1] * len(ctx.hops.land) for name in HOST_INNER}
    return ep


def build_endpoint(ctx) -> PollingConsumer:
    """A one-stage ``sim`` consumer for one queue pair (model ``sim`` is
    :func:`twin.devices.handoff.build_sim_endpoint`, which adds the two-stage consumer)."""
    return make_endpoint(ctx)


if TYPE_CHECKING:  # mypy checks that these satisfy the node protocol (twin/nodes/protocol.py)
    from twin.nodes.protocol import ConsumerNode
    _pollingconsumer: type[ConsumerNode] = PollingConsumer
