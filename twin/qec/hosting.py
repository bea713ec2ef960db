"""The four ways to host a function on a consumer, with their costs.

amd-qblox-exchange-runtime.txt ("GPU Clients"): the runtime hosts a function ① ``inline`` (linked
into the persistent control kernel), ② ``worker`` (a resident persistent kernel fed by a device-side
queue), ③ external (another programming model owns the kernel and calls next/complete: an OpenMP
region that claims and routes frames itself, ``external_self``, or one the control kernel routes
for, ``external_routed``), ④ ``chain`` (ordinary kernels pre-armed in an HSA queue, released by
one store, whose completion signal triggers the reply; a host thread re-arms the chain).

:class:`Hosted` is the hosting part of a :class:`twin.devices.consumer.PollingConsumer` (built by a
:class:`HostingMode`, a flow workload's ``hosting``): the consumer's reply instant follows the mode.
Per request, after the control kernel's poll has seen it and read it (``pre``), with ``body`` = the
consumer's ``service_ps`` + the function's compute time and ``gp`` = the runtime's general path
(a Python user function on a GPU, where the seeds measured it; 0 for the built-in echo, for CPU cores,
whose general path the seeds do not give, for FPGA logic, which has none, and for the bundled
decoders, whose GPU time was measured in a persistent kernel with the dispatch in it:
:func:`twin.qec.loop.run_decode` passes 0 for them, :mod:`twin.qec.gpu_cost`):

- inline:          reply at ``t + pre + gp + body``; the control kernel is busy until then.
- external_self:   as inline plus ``omp_self`` (the region's own next/complete and routing).
- external_routed: the control kernel routes at ``t + pre + gp`` and polls on; the region starts
                   ``omp_routed`` later (or when it is free) and replies after ``body``.
- worker:          as external_routed with ``worker_handoff`` (device-queue push and the
                   worker's poll).
- chain:           the control kernel stores the trigger at ``t + pre + gp``; the first kernel
                   starts ``trigger`` later (``chain_trigger`` - jitter median + Exp(jitter)),
                   or ``trigger`` after the host re-armed the chain if that is later (the frame
                   waited for the re-arm); the reply goes ``chain_complete`` after the body
                   (the control kernel seeing the completion signal). The host re-arms the chain
                   Exp(``rearm_mean``) after the body ends.

Executors other than the control kernel run one request at a time, so several rounds can be in
flight (the control kernel polls on while the worker, region or chain computes).

Parallel decoders (``workers`` = N, default 1): N executors share the one request queue. Inline
(and ``external_self``) that is N serving threads polling the queue: each request is taken, in
order, by the thread that can take it first (the earliest at its poll; the lowest index on a tie),
and the queue is polled again as soon as any thread is free. In the hand-off modes the control
kernel hands each request to the first free of N workers (regions, chains; each chain re-arms on
its own). ``order``: ``in_order`` (default) commits replies in request order: a finished reply is
held (its executor with it) until every earlier reply is out; ``as_ready`` replies when done
(the card then reads replies as they land, :class:`twin.devices.linkcard.LinkCard`). With one
worker both orders are the same.

Statistics: ``served``, ``waited_for_rearm`` (chain), ``trigger_ps`` (chain: the trigger's own
latency per request, store -> first kernel once the chain is armed), ``executor`` (which of the N
executors served each request, in request order, with N > 1), ``held_ps`` (per request, how long
its finished reply waited for earlier ones: in_order only), ``decode_ready`` / ``decode_start`` /
``decode_end`` (per request, ps: when an idle executor would have started its body, when one did,
when the body ended; start - ready is its wait for a decoder), ``decode_busy`` (per request, ps:
how long it kept its executor from the next request: a thread from taking it to polling again, poll
cost included; a worker or region until its reply is out; a chain also until it is re-armed).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from pydantic import Field

from twin.config.strict import Strict
from twin.devices.consumer import HostingPart, PollingConsumer, ServingThread
from twin.kernel import JitterStream

MODES = ("inline", "worker", "external_self", "external_routed", "chain")
ORDERS = ("in_order", "as_ready")
INLINE = ("inline", "external_self")  # the serving threads run the body themselves


@dataclass(frozen=True)
class HostingParams:
    """Costs of the hosting modes, integer picoseconds (fitted values in calibrations/hosting.yaml).

    general_path_ps: the runtime's general path for a Python user function (dispatch by id, classic
    encoding), over the echo's fast path (fitted on the card path's user function; not for a
    decoder measured in a persistent kernel, :mod:`twin.qec.gpu_cost`); worker_handoff_ps; omp_self_ps; omp_routed_ps;
    chain_trigger_ps (median store -> first kernel, 1.92 us in the seed); chain_trigger_jitter_ps
    (exponential scale of the trigger's spread); chain_complete_ps; rearm_mean_ps (mean of the
    host thread's exponential re-arm time after a chain's body ends).
    """

    general_path_ps: int = 0
    worker_handoff_ps: int = 0
    omp_self_ps: int = 0
    omp_routed_ps: int = 0
    chain_trigger_ps: int = 1_920_000
    chain_trigger_jitter_ps: int = 0
    chain_complete_ps: int = 0
    rearm_mean_ps: int = 0

    def __post_init__(self):
        for k, v in self.__dict__.items():
            if v < 0:
                raise ValueError(f"hosting {k} must be >= 0 ps, got {v}")


@dataclass(frozen=True)
class HostingMode:
    """How a flow's consumers host their function (see module docstring): the factory of their
    hosting part (:class:`Hosted`), a :class:`twin.engine.topology.FlowWorkload`'s ``hosting``.

    mode: one of :data:`MODES`; hosting: the modes' costs (:class:`HostingParams`);
    compute_ps(seq) -> int: the function's compute time for request ``seq`` (ps; None: 0); seed:
    for the chain's random streams; workers: N parallel executors (>= 1); order: ``in_order`` |
    ``as_ready``.
    """

    mode: str = "inline"
    hosting: HostingParams = HostingParams()
    compute_ps: Callable[[int], int] | None = None
    seed: int = 0
    workers: int = 1
    order: str = "in_order"

    def __call__(self, c: PollingConsumer) -> "Hosted":
        """The hosting part of consumer ``c`` (raises as :class:`Hosted`)."""
        return Hosted(c, self)


class Hosted(HostingPart):
    """The hosting part of a polling consumer ``c`` hosting its function in a mode (see module
    docstring; its parameters: a :class:`HostingMode`). Raises ValueError for an unknown mode or
    order, fewer than one worker, a consumer whose service varies per round, or a mode the
    consumer's kind cannot host (FPGA logic: inline only; a kernel chain: GPU only). Statistics:
    the module docstring's, and ``served`` (its consumer's).
    """

    def __init__(self, c: PollingConsumer, how: HostingMode):
        super().__init__(c)
        mode, hosting, workers, order = how.mode, how.hosting, how.workers, how.order
        if c.p.varies:
            raise ValueError(f"consumer {c.name!r}: its service varies per round (an idle cost or service modes); "
                             "the decode study's hosting modes keep a constant body: use a calibration without them")
        if c.p.host_runtime is not None:
            raise ValueError(f"consumer {c.name!r}: a host runtime (dispatcher, queue, worker) is its own hosting; "
                             f"hosting mode {how.mode!r} would be a second one")
        if mode not in MODES:
            raise ValueError(f"hosting mode {mode!r}: expected one of {', '.join(MODES)}")
        if order not in ORDERS:
            raise ValueError(f"reply order {order!r}: expected one of {', '.join(ORDERS)}")
        if int(workers) < 1:
            raise ValueError(f"workers {workers}: need at least 1")
        check_mode(mode, c.p.kind, c.name)
        self.mode = mode
        self.h = hosting
        self.compute_ps = how.compute_ps or (lambda seq: 0)
        self.workers = int(workers)
        self.order = order
        n = self.workers if mode not in INLINE else 1
        self.exec_free = [0] * n  # per hand-off executor: free again (ps)
        self.chain_armed_at = [0] * n
        self.pool = [c.thread] + [ServingThread() for _ in range(self.workers - 1)] if mode in INLINE \
            else [c.thread]
        self.last_reply = 0  # the latest reply instant so far (in-order commit holds later ones behind it)
        self.executor: list[int] = []
        self.held_ps: list[int] = []
        self.decode_ready: list[int] = []
        self.decode_start: list[int] = []
        self.decode_end: list[int] = []
        self.decode_busy: list[int] = []
        trig_fixed = hosting.chain_trigger_ps - int(round(hosting.chain_trigger_jitter_ps * np.log(2)))
        self._trig_fixed = max(0, trig_fixed)
        self._trig = JitterStream(how.seed, f"{c.name}.chain.trigger", hosting.chain_trigger_jitter_ps)
        self._rearm = JitterStream(how.seed, f"{c.name}.chain.rearm", hosting.rearm_mean_ps)
        self.waited_for_rearm = 0
        self.trigger_ps: list[int] = []

    @property
    def served(self) -> int:
        """Requests its consumer served."""
        return self.c.served

    def pick(self, t: int) -> ServingThread:
        """With several serving threads: the one that can take the request first (the earliest at
        its poll, the lowest index on a tie)."""
        c = self.c
        if len(self.pool) == 1:
            return c.thread
        cost = c.poller.cost_ps

        def at(th):
            return t if th.free <= t - cost else c.poller.first_poll(th.free) + cost
        j = min(range(len(self.pool)), key=lambda i: (at(self.pool[i]), i))
        self.executor.append(j)
        return self.pool[j]

    def next_poll_from(self, t_free: int) -> int:
        """Several serving threads poll as soon as one is free."""
        return min(th.free for th in self.pool) if len(self.pool) > 1 else t_free

    def _record(self, ready: int, start: int, end: int, waited: int) -> None:
        """Book a body: ``ready`` when it could have started had the request been taken when it was
        taken (ps), less ``waited`` (the request's wait between the poll an idle thread would have
        seen it with and its take: every executor busy), so start - ready is its whole wait."""
        self.decode_ready.append(ready - waited)
        self.decode_start.append(start)
        self.decode_end.append(end)

    def _commit(self, end: int) -> int:
        """The reply instant of a body that ended at ``end``: in order, not before the previous reply."""
        t = max(end, self.last_reply) if self.order == "in_order" else end
        self.held_ps.append(t - end)
        self.last_reply = max(self.last_reply, t)
        return t

    def serve(self, seq: int, base: int, at: int) -> None:
        """Time request ``seq`` in the mode (module docstring), then post its reply."""
        c = self.c
        h = c.enc.header(c.requests.buf, base)
        gp = self.h.general_path_ps if h.function and c.p.kind == "gpu" else 0
        body = c.p.service_ps + int(self.compute_ps(seq))
        t_ready = at + c.p.pre_service_ps(c.enc, c.frame_bytes) + gp
        writes = c.answer(seq, base)
        if c.tamper:
            writes = c.tamper(seq, writes)
        fence = 0 if c.enc.per_piece else c.p.fence_ps
        waited = at - c.seen_ps
        if self.mode in INLINE:
            end = t_ready + body + (self.h.omp_self_ps if self.mode == "external_self" else 0)
            self._record(t_ready, t_ready, end, waited)
            t_reply = self._commit(end)
            t_free = t_reply + fence
            self.decode_busy.append(t_free - at + c.p.poll_cost_ps)
        else:
            t_free = t_ready  # the control kernel hands the request on and polls again
            t_reply = self._hand_on(t_ready, body, fence, waited)
        c._reply_at(seq, t_reply, base, writes, fence)
        c._done(seq, at, t_free, t_reply, t_reply + fence)

    def _hand_on(self, t_ready: int, body: int, fence: int, waited: int) -> int:
        """A hand-off mode (worker, external_routed, chain): the request handed on at ``t_ready``
        runs on the first free executor (``waited``: its wait for the control kernel, ps); returns
        its reply instant."""
        m, ef = self.mode, self.exec_free
        if m == "chain":
            ready = [max(a, f) for a, f in zip(self.chain_armed_at, ef)]
            j = min(range(len(ef)), key=lambda i: (max(t_ready, ready[i]), i))
            if self.chain_armed_at[j] > t_ready:
                self.waited_for_rearm += 1
            trig = self._trig_fixed + self._trig.next()
            start = max(t_ready, ready[j]) + trig
            self.trigger_ps.append(trig)
            end = start + body
            self._record(t_ready + trig, start, end, waited)
            t_reply = self._commit(end + self.h.chain_complete_ps)
            self.chain_armed_at[j] = end + self._rearm.next()
            began = start - trig
        else:
            hand = self.h.worker_handoff_ps if m == "worker" else self.h.omp_routed_ps
            j = min(range(len(ef)), key=lambda i: (max(t_ready + hand, ef[i]), i))
            start = max(t_ready + hand, ef[j])
            self._record(t_ready + hand, start, start + body, waited)
            t_reply = self._commit(start + body)
            began = start
        ef[j] = t_reply + fence
        again = max(ef[j], self.chain_armed_at[j]) if m == "chain" else ef[j]
        self.decode_busy.append(again - began)
        if len(ef) > 1:
            self.executor.append(j)
        return t_reply


def check_mode(mode: str, kind: str, name: str = "consumer") -> None:
    """Raise ValueError when a ``kind`` consumer cannot host ``mode`` (FPGA logic answers inline
    only; kernel chains are GPU dispatch packets)."""
    if kind == "fpga" and mode != "inline":
        raise ValueError(f"{name}: FPGA logic hosts its function inline only, not {mode!r}")
    if mode == "chain" and kind != "gpu":
        raise ValueError(f"{name}: a kernel chain runs on a GPU, not a {kind}")


# -- the fitted parameters ------------------------------------------------------------------------

class _Fitted(Strict):
    general_path_ns: float = Field(ge=0)
    worker_handoff_ns: float = Field(ge=0)
    omp_self_ns: float = Field(ge=0)
    omp_routed_ns: float = Field(ge=0)
    chain_trigger_ns: float = Field(ge=0)
    chain_trigger_jitter_ns: float = Field(ge=0)
    chain_complete_ns: float = Field(ge=0)
    rearm_mean_ns: float = Field(ge=0)


class _HostingFile(Strict):
    description: str = ""
    consumer: str
    calibration: str
    function: str
    rounds: int = Field(gt=0)
    seed: int = Field(ge=0)
    provenance: dict = {}
    values: _Fitted


def load_hosting(path: str | Path) -> tuple[HostingParams, dict]:
    """Read a hosting parameter file (``calibrations/hosting.yaml``); returns (params, the file's
    document). Raises :class:`twin.config.ConfigError` naming the file, key and value."""
    from twin.config import load_model
    doc = load_model(Path(path), _HostingFile)
    v = doc.values
    params = HostingParams(**{k[:-3] + "_ps": int(round(getattr(v, k) * 1000)) for k in type(v).model_fields})
    return params, doc.model_dump()


def hosting_document(params: HostingParams, meta: dict) -> dict:
    """The YAML document for ``params`` (values in ns) with ``meta`` (consumer, calibration, ...)."""
    vals = {k[:-3] + "_ns": v / 1000 for k, v in params.__dict__.items()}
    return {**meta, "values": vals}
