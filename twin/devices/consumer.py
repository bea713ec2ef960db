"""A consumer that polls its request queue and answers through the reply queue."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from twin.devices.service import IdleCost, ServiceMode, idle_ps, mix_fraction, mode_draws, mode_extra_ps, mode_picks
from twin.exchange.contract import STATUS
from twin.exchange.encoding import Encoding, slot_offset
from twin.kernel import Kernel, MemoryRegion, Poller, PostedWritePath


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


class PollingConsumer:
    """One request queue of a CPU core, GPU persistent kernel or FPGA logic, and its replies.

    Ports: ``requests`` (its own :class:`MemoryRegion`: the request queue, ``slots`` slots of
    ``slot_bytes``), ``reply`` (a :class:`PostedWritePath` into the producer's reply queue).
    A node that serves several queues (a mesh: several flows routed to one consumer) has one
    :class:`PollingConsumer` per queue sharing one :class:`ServingThread` (``thread=``).

    Behaviour per request: a poll sees the slot complete (publish word, or every piece). If the
    thread is free at that poll it takes the request at once; if it is busy with another queue's
    request, it takes it at its first poll after it is free (the wait is queueing). It reads the
    payload, runs the function, writes the reply (per-piece: one burst; classic: data, release
    fence, ready word last), then polls the next slot. The echo returns the request payload;
    other functions are looked up by function id by the runtime library.

    ``hops``: a :class:`twin.engine.hops.Hops` the consumer writes its per-round instants into
    (seen, start, reply, publish, reply landed), or ``None``.

    Statistics: ``served``, ``poller.polls``, ``poller.hits``; the thread's ``busy_ps``.
    """

    def __init__(self, kernel: Kernel, name: str, params: ConsumerParams, encoding: Encoding,
                 requests: MemoryRegion, reply: PostedWritePath, slots: int, slot_bytes: int,
                 frame_bytes: int, functions: Callable[[int], Callable[[bytes], bytes] | None] | None = None,
                 tamper: Callable[[int, list], list] | None = None, stalls: tuple[tuple[int, int], ...] = (),
                 thread: ServingThread | None = None, hops=None):
        self.kernel = kernel
        self.name = name
        self.p = params
        self.enc = encoding
        self.requests = requests
        self.reply = reply
        self.slots = slots
        self.slot_bytes = slot_bytes
        self.frame_bytes = frame_bytes
        self.functions = functions or (lambda fid: (lambda b: bytes(b)) if fid == 0 else None)
        phase = params.poll_phase_ps or 0
        self.poller = Poller(kernel, requests, params.poll_period_ps, phase, params.poll_cost_ps, name=f"{name}.poll",
                             blackouts=stalls)
        self.tamper = tamper
        self.thread = thread if thread is not None else ServingThread()
        self.hops = hops
        self.next_seq = 1
        self.served = 0
        self.service_draws = None  # per round: (mode, uniform draw) of the service modes (make_endpoint sets it)

    def start(self) -> None:
        """Begin polling for the first request."""
        self._arm()

    def _arm(self) -> None:
        seq = self.next_seq
        base = slot_offset(seq, self.slots, self.slot_bytes)
        self.poller.arm(lambda: self.enc.ready(self.requests.buf, base, seq, self.slot_bytes),
                        lambda t: self._take(seq, base))

    def _take(self, seq: int, base: int) -> None:
        """A poll has seen request ``seq`` (now = poll instant + cost): the thread takes it now, or
        at its first poll after finishing the request it is busy with."""
        t = self.kernel.now
        cost = self.p.poll_cost_ps
        free = self.thread.free
        at = t if free <= t - cost else self.poller.first_poll(free) + cost
        if self.hops is not None:  # seen: the poll an idle thread would have seen it with (queueing after it)
            land = self.hops.land[seq - 1]
            self.hops.seen[seq - 1] = t if land < 0 else min(t, self.poller.first_poll(land) + cost)
            self.hops.start[seq - 1] = at
        self._seen(seq, base, at)

    def answer(self, seq: int, base: int) -> list[tuple[int, bytes]]:
        """The reply's posted writes (offsets in the reply slot, in issue order) for the request
        in the slot at ``base``: the function named by its header runs on its payload; an unknown
        function id gets an empty reply with status ``unknown_function``, a function that raises
        ValueError on its payload an empty reply with status ``function_failed``, a reply too long
        for its slot an empty reply with status ``bad_length``. The ``code`` model
        overrides this with the C runtime library."""
        h = self.enc.header(self.requests.buf, base)
        fn = self.functions(h.function)
        if fn is None:
            return self.enc.writes(seq, b"", function=h.function, flags=STATUS["unknown_function"])
        try:
            reply = fn(self.enc.payload(self.requests.buf, base))
        except ValueError:  # the function refused its input (e.g. a payload shorter than a syndrome)
            return self.enc.writes(seq, b"", function=h.function, flags=STATUS["function_failed"])
        if self.enc.slot_bytes(len(reply)) > self.slot_bytes:  # would spill into the next slot
            return self.enc.writes(seq, b"", function=h.function, flags=STATUS["bad_length"])
        return self.enc.writes(seq, reply, function=h.function)

    def _seen(self, seq: int, base: int, at: int) -> None:
        """Serve request ``seq`` (slot at ``base``), taken by the thread at ``at`` (ps, >= now)."""
        t = at + self.p.pre_service_ps(self.enc, self.frame_bytes) + self.p.service_ps + self.extra_ps(seq, at)
        writes = self.answer(seq, base)
        if self.tamper:
            writes = self.tamper(seq, writes)
        fence = 0 if self.enc.per_piece else self.p.fence_ps
        self._reply_at(seq, t, base, writes, fence)
        self._done(seq, at, t + fence, t, t + fence)

    def extra_ps(self, seq: int, at: int) -> int:
        """Request ``seq``'s service beyond the constant body (ps): the idle cost of the gap from the
        thread's last free instant to the poll that took it (``at`` minus the poll cost), plus its
        service-mode draw. 0 for a consumer whose service does not vary."""
        if not self.p.varies:
            return 0
        pick = self.service_draws[seq - 1] if self.service_draws is not None and seq <= len(self.service_draws) \
            else None
        return self.p.round_extra_ps(pick, at - self.p.poll_cost_ps - self.thread.free)

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

    def _done(self, seq: int, at: int, t_free: int, t_reply: int, t_publish: int) -> None:
        """Book request ``seq``: taken at ``at``, reply's first write issued at ``t_reply``, its
        publishing write at ``t_publish``, the thread free (polling again) at ``t_free``."""
        th = self.thread
        th.busy_ps += t_free - at + self.p.poll_cost_ps
        th.free = t_free
        th.served += 1
        self._record_reply(seq, t_reply, t_publish)
        self.next_seq = seq + 1
        self.served += 1
        self.kernel.at(max(self._next_poll_from(t_free), self.kernel.now), self._arm)

    def _record_reply(self, seq: int, t_reply: int, t_publish: int) -> None:
        """Keep request ``seq``'s reply instants in the flow's hops (a first stage that hands the
        request on replies through its second stage: :mod:`twin.devices.handoff`)."""
        if self.hops is not None:
            self.hops.reply[seq - 1] = t_reply
            self.hops.publish[seq - 1] = t_publish

    def _next_poll_from(self, t_free: int) -> int:
        """When the queue is polled for its next request after one freed its thread at ``t_free``:
        then (one thread); a consumer with several threads on the queue polls as soon as one is free."""
        return t_free

    def _post(self, seq: int, base: int, writes: list[tuple[int, bytes]]) -> None:
        land = 0
        for off, data in writes:
            land = self.reply.write(base + off, data)
        if self.hops is not None:
            self.hops.rland[seq - 1] = land


def make_endpoint(cls: type, ctx, **extra) -> PollingConsumer:
    """Build a consumer of class ``cls`` (or a subclass) for one queue pair from a
    :class:`twin.engine.event.NodeContext`: the flow's consumer parameters with the node's poll
    phase, its faults (reply tampering, stalls), the node's serving thread and the flow's hops;
    the flow's workload may wrap the class (a hosting mode) and add keyword arguments."""
    spec, fp, wl = ctx.spec, ctx.spec.faults, ctx.workload
    if wl.consumer_class is not None:
        cls = wl.consumer_class(cls)
    ep = cls(ctx.kernel, ctx.name, spec.consumer.with_phase(ctx.phase_ps), ctx.enc, ctx.req_region, ctx.rep_path,
             spec.slots, ctx.slot_bytes, spec.traffic.frame_bytes, ctx.functions(),
             fp.tamper("reply", ctx.enc.per_piece), fp.consumer_stalls(spec.consumer.kind), ctx.thread, ctx.hops,
             **extra, **wl.consumer_kwargs)
    if spec.consumer.modes:
        ep.service_draws = spec.consumer.mode_picks(spec.seed, spec.stream("consumer.modes"), spec.traffic.rounds)
    return ep


def build_endpoint(ctx) -> PollingConsumer:
    """A one-stage ``sim`` consumer for one queue pair (model ``sim`` is
    :func:`twin.devices.handoff.build_sim_endpoint`, which adds the two-stage consumer)."""
    return make_endpoint(PollingConsumer, ctx)
