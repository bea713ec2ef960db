"""A consumer's per-round service for the compiled core: its idle costs, service modes, ``idle_mix``
and host-runtime stages packed into small tables (``SV_*``, ``IR_*``, ``MR_*`` of
twin/engine/core_interface.yaml) that twin/engine/c/core.c reads in both its direct recurrence and
its event core.

The core computes each round's extra as :meth:`twin.devices.consumer.ConsumerParams.round_extra_ps`
and :meth:`twin.devices.host_runtime.HostRuntime.stages_ps` do, operation for operation in IEEE
double (the core is compiled with ``-ffp-contract=off``: no fused multiply-add), so its instants are
the Python engines' to the picosecond. The random draws are not made in C: the modes' picks and the
host runtime's uniforms come from the same streams and functions the Python engines use
(:func:`twin.devices.service.mode_pick_arrays`, :meth:`HostRuntime.draws`), one per round, and are passed
as arrays (16 B a round with modes, 8 B with a host runtime).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from twin.devices.host_runtime import INNER as HOST_INNER
from twin.devices.host_runtime import STREAM as HOST_STREAM
from twin.devices.service import mode_pick_arrays, pick_blocks
from twin.engine.core_interface import IDLE_ROW, IDLE_SATURATING, IDLE_TABLE, MODE_ROW, SERVICE_PARAMS

_KIND = {"saturating": IDLE_SATURATING, "table": IDLE_TABLE}


@dataclass
class Service:
    """One consumer's packed service table. ``table``: the ``SV_*`` row (int64; pass
    ``table.ctypes.data`` as the core's ``svc``); ``stages``: (n, 3) int64 the core fills with each
    round's (enqueue, wake, hand-back) ps, or None without a host runtime; ``keep``: the arrays the
    table points into (alive as long as the core may read them)."""

    table: np.ndarray
    stages: np.ndarray | None
    keep: list = field(default_factory=list)
    draw: Callable[[int], tuple[np.ndarray, np.ndarray]] | None = None
    """A streamed run's modes: the next rounds' picks (:meth:`window` draws them batch by batch)."""
    _window: tuple = ()

    @property
    def address(self) -> int:
        """The table's address (the core's ``P_SVC`` / ``FP_SVC``)."""
        return int(self.table.ctypes.data)

    def window(self, start: int, end: int) -> None:
        """Before the core computes rounds ``start`` .. ``end - 1`` of a streamed run: draw their modes'
        picks (the next rounds of the stream: batches are called in order) and point the table at them
        (the core reads round i at the address + 8 i: moved back by ``start``). Nothing to do for a run
        packed whole."""
        if self.draw is None:
            return
        k, v = self.draw(end - start)
        self._window = (k, v)  # alive while the core reads them
        self.table[SERVICE_PARAMS.index("pick_k")] = k.ctypes.data - 8 * start
        self.table[SERVICE_PARAMS.index("pick_v")] = v.ctypes.data - 8 * start


def varies(consumer) -> bool:
    """Whether ``consumer`` (:class:`twin.devices.consumer.ConsumerParams`) has a service that varies
    per round: an idle cost, service modes or a host runtime (``idle_mix`` acts through the modes)."""
    return bool(consumer.varies or consumer.host_runtime is not None)


def pack(consumer, seed: int, stream, n: int, streamed: bool = False) -> Service | None:
    """The service table of ``consumer`` for a run of ``n`` rounds of seed ``seed``; ``stream(name)``
    names a random stream of the loop (:meth:`twin.engine.spec.LoopSpec.stream`). None when its
    service does not vary (:func:`varies`). ``streamed``: the modes' picks are drawn batch by batch
    (:meth:`Service.window`), so memory does not grow with the run. Raises ValueError as
    :func:`twin.devices.service.mode_picks` does (weights summing to more than 1)."""
    if not varies(consumer):
        return None
    keep: list = []

    def addr(a: np.ndarray) -> int:
        a = np.ascontiguousarray(a)
        keep.append(a)
        return int(a.ctypes.data) if len(a) else 0

    sv = dict.fromkeys(SERVICE_PARAMS, 0)
    draw = None
    if consumer.idle:
        rows = []
        for m in consumer.idle:
            gaps = np.array([g for g, _ in m.points], np.int64)
            costs = np.array([c for _, c in m.points], np.int64)
            r = dict(kind=_KIND[m.kind], cost=m.cost_ps, tau=m.tau_ps, npts=len(m.points), gaps=addr(gaps),
                     costs=addr(costs))
            rows.append([r[k] for k in IDLE_ROW])
        sv.update(n_idle=len(rows), idle=addr(np.array(rows, np.int64).reshape(-1)))
    if consumer.modes:
        rows = [[m.offset_ps, m.width_ps, int(m.long_offset_ps is not None), m.long_offset_ps or 0,
                 m.long_width_ps or 0] for m in consumer.modes]
        assert len(rows[0]) == len(MODE_ROW)
        sv.update(n_modes=len(rows), modes=addr(np.array(rows, np.int64).reshape(-1)))
        if streamed:
            draw = pick_blocks(consumer.modes, seed, stream("consumer.modes"))
        else:
            k, v = mode_pick_arrays(consumer.modes, seed, stream("consumer.modes"), n)
            sv.update(pick_k=addr(k), pick_v=addr(v))
    if consumer.idle_mix:
        sv.update(n_mix=len(consumer.idle_mix),
                  mix_gap=addr(np.array([g for g, _ in consumer.idle_mix], np.int64)),
                  mix_frac=addr(np.array([float(f) for _, f in consumer.idle_mix], np.float64)))
    stages = None
    hr = consumer.host_runtime
    if hr is not None:
        rows_per = np.array([len(e) for e in hr.enqueue_ps], np.int64)
        first = np.concatenate([[0], np.cumsum(rows_per)[:-1]]).astype(np.int64)
        stages = np.zeros((n, 3), np.int64)
        keep.append(stages)
        sv.update(hr_n=len(hr.idle_ps), hr_logidle=addr(np.array([math.log(g) for g in hr.idle_ps], np.float64)),
                  hr_first=addr(first), hr_rows=addr(rows_per),
                  hr_enq=addr(np.concatenate(hr.enqueue_ps).astype(np.int64)),
                  hr_wake=addr(np.concatenate(hr.wake_ps).astype(np.int64)),
                  hr_hand=addr(np.concatenate(hr.handback_ps).astype(np.int64)),
                  hr_u=addr(np.asarray(hr.draws(seed, stream(HOST_STREAM), n), np.float64)),
                  stages=int(stages.ctypes.data) if n else 0)
    table = np.array([sv[k] for k in SERVICE_PARAMS], np.int64)
    return Service(table, stages, keep, draw)


def host_instants(start: np.ndarray, reply: np.ndarray, stages: np.ndarray) -> dict[str, np.ndarray]:
    """A host runtime's instants per round (``Hops.inner``, :data:`twin.devices.host_runtime.INNER`)
    from the thread's ``start``, its ``reply`` and the rounds' (enqueue, wake, hand-back) ``stages``
    (int64 ps, shape (rounds, 3)): enqueued at start + enqueue, awake after the wake, decoded a
    hand-back before the reply."""
    enq = start + stages[:, 0]
    return {HOST_INNER[0]: enq, HOST_INNER[1]: enq + stages[:, 1], HOST_INNER[2]: reply - stages[:, 2]}


def inner(svc: Service | None, start: np.ndarray, reply: np.ndarray) -> dict[str, np.ndarray] | None:
    """The host runtime's instants of the first ``len(start)`` rounds the core computed with ``svc``
    (:func:`host_instants` of its stages), or None without a host runtime."""
    if svc is None or svc.stages is None:
        return None
    return host_instants(start, reply, svc.stages[:len(start)])


def window(svc: Service | None, start: int, end: int) -> None:
    """:meth:`Service.window` of ``svc`` (nothing without one)."""
    if svc is not None:
        svc.window(start, end)
