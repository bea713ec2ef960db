"""Typed results: one small frozen record per flow of a study, and the one function that builds the
part every flow has.

Modelled on sinter's ``TaskStats`` (``sinter`` package, ``sinter/_data/_task_stats.py``,
https://github.com/quantumlib/Stim/tree/main/glue/sample): an immutable record of what one task
measured, with a ``to_json()`` giving its mapping. Here a flow's record gives its entry of
results.json (docs/results.md): :class:`FlowSummary` one consumer's loop of ``twin run``
(``consumers[]``), :class:`MeshFlowSummary` one flow of a mesh (``flows[]``),
:class:`PlacementSummary` one placement of ``twin decode`` (``placements[]``). Each holds a
:class:`FlowTiming`, what the flow's timestamps give whatever the study (round trip and loop
percentiles, the card's backlog, the hop budget, the slowest round, the control program's waits,
deadline misses, the faults the run saw), built by :func:`flow_summary` alone.

``to_json()`` gives the mapping results.json holds, with the keys in the order the file's
readers have always had them; an optional block (``live``, ``measured``'s errors, ``program``,
``loop``, ``publish_to_reply``, ``deadline_ns`` ...) is left out where the record has None. The
records are frozen (``dataclasses.FrozenInstanceError`` on assignment; a changed record is
:func:`dataclasses.replace`'s new one); the JSON blocks they carry (a fault count, a budget row)
are the plain mappings results.json has and are not copied by ``to_json()``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from twin.stats import percentile, summary_ns

if TYPE_CHECKING:
    from twin.engine.hops import FlowStats
    from twin.engine.spec import LoopResult
    from twin.faults import FaultPlan

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Latency:
    """Percentiles and mean of one latency, in ns (:func:`twin.stats.summary_ns`: inverted CDF on
    integer picoseconds; the mean rounded to 1e-3 ns)."""

    p50_ns: float
    p90_ns: float
    p99_ns: float
    p999_ns: float
    mean_ns: float

    @classmethod
    def of(cls, samples_ps: np.ndarray) -> Latency:
        """The latency of ``samples_ps`` (int64 ps, at least one). Raises ValueError for none."""
        return cls(**summary_ns(samples_ps))

    def shifted(self, extra_ns: float) -> Latency:
        """Every statistic plus ``extra_ns`` (rounded to 1e-3 ns): a latency measured from an earlier
        instant, e.g. a Qblox cluster's acquisition before the loop's first byte."""
        return Latency(*(round(v + extra_ns, 3) for v in self.to_json().values()))

    def to_json(self) -> dict[str, float]:
        return {"p50_ns": self.p50_ns, "p90_ns": self.p90_ns, "p99_ns": self.p99_ns, "p999_ns": self.p999_ns,
                "mean_ns": self.mean_ns}


@dataclass(frozen=True, slots=True)
class Check:
    """The byte check of a flow's replies: the engine that ran it (``direct``, ``event``,
    ``direct+event``, or pending), the replies checked byte for byte, the card's mismatches, and the
    SHA-256 over the checked replies' sequence, status and bytes (None when the run has none)."""

    engine: str
    replies_checked: int
    mismatches: int
    reply_digest: str | None = None

    def to_json(self) -> Json:
        s: Json = {"engine": self.engine, "replies_checked": self.replies_checked, "mismatches": self.mismatches}
        if self.reply_digest is not None:
            s["reply_digest"] = self.reply_digest
        return s


@dataclass(frozen=True, slots=True)
class FlowTiming:
    """What every flow's timestamps give (:func:`flow_summary`): ``rtt`` the card-boundary round
    trip; ``backlog_max`` the most requests the card had outstanding at once; ``budget`` and
    ``slowest_round`` (:func:`twin.engine.hops.budget`, :func:`~twin.engine.hops.slowest_round`);
    ``loop`` the controller's round trip and ``publish_to_reply`` a Qblox cluster's (from a round's
    last acquisition); ``program`` the control program's waits; ``deadline_ns`` and
    ``deadline_misses``; ``faults`` the injected and detected faults, ``host_freeze`` what the
    producer saw around host freezes. None: the flow has no such block."""

    rtt: Latency
    backlog_max: int
    budget: list[Json] | None = None
    slowest_round: Json | None = None
    loop: Latency | None = None
    publish_to_reply: Latency | None = None
    program: Json | None = None
    deadline_ns: float | None = None
    deadline_misses: int | None = None
    faults: Json | None = None
    host_freeze: Json | None = None

    def hops_json(self) -> Json:
        """``budget`` and ``slowest_round`` where the engine recorded hops."""
        return {} if self.budget is None else {"budget": self.budget, "slowest_round": self.slowest_round}

    def faults_json(self) -> Json:
        return {k: v for k, v in (("faults", self.faults), ("host_freeze", self.host_freeze)) if v is not None}

    def loop_json(self) -> Json:
        return {k: v.to_json() for k, v in (("loop", self.loop), ("publish_to_reply", self.publish_to_reply))
                if v is not None}

    def program_json(self) -> Json:
        return {} if self.program is None else {"program": self.program}

    def deadline_json(self, with_deadline: bool = True) -> Json:
        """``deadline_ns`` (with ``with_deadline``) and ``deadline_misses`` where a deadline is set."""
        if self.deadline_misses is None:
            return {}
        return ({"deadline_ns": self.deadline_ns} if with_deadline else {}) | {"deadline_misses": self.deadline_misses}


class Rounds:
    """A flow's statistics from its rounds in memory (``res``, a :class:`twin.engine.spec.LoopResult`):
    what :func:`flow_summary` reads. :class:`Streamed` gives the same from a streamed flow's
    :class:`twin.engine.hops.FlowStats`, equal key for key."""

    def __init__(self, res: LoopResult) -> None:
        self.res = res
        self.n = int(len(res.t_in))

    def rtt(self) -> Latency:
        return Latency.of(self.res.rtt_ps)

    def loop(self) -> Latency:
        return Latency.of(self.res.loop_ps)

    def budget(self) -> list[Json]:
        from twin.engine.hops import budget
        assert self.res.hops is not None
        return budget(self.res.t_in, self.res.t_have, self.res.hops)

    def slowest_round(self) -> Json | None:
        from twin.engine.hops import slowest_round
        assert self.res.hops is not None
        return slowest_round(self.res.t_in, self.res.t_have, self.res.hops)

    def misses(self, deadline_ps: int, on: str) -> int:
        """Rounds over ``deadline_ps`` of the loop (``on="loop"``) or the round trip (``"rtt"``)."""
        return int(((self.res.loop_ps if on == "loop" else self.res.rtt_ps) > deadline_ps).sum())

    def rtt_percentile(self, q: float) -> int:
        """The round trip's ``q``-th percentile (inverted CDF), ps."""
        from twin.stats import percentile_ps
        return percentile_ps(self.res.rtt_ps, q)


class Streamed(Rounds):
    """:class:`Rounds` of a streamed flow: its statistics accumulated batch by batch
    (:class:`twin.engine.hops.FlowStats`; the deadline misses counted on the loop, as it was built)."""

    def __init__(self, acc: FlowStats) -> None:
        self.acc = acc
        self.n = acc.n

    def rtt(self) -> Latency:
        return Latency(**self.acc.rtt.summary_ns())

    def loop(self) -> Latency:
        return Latency(**self.acc.loop.summary_ns())

    def budget(self) -> list[Json]:
        return self.acc.budget()

    def slowest_round(self) -> Json | None:
        return self.acc.slowest_round()

    def misses(self, deadline_ps: int, on: str) -> int:
        if on != "loop" or deadline_ps != self.acc.deadline_ps:
            raise ValueError("a streamed flow counts its misses on the loop over the deadline it was built with")
        return self.acc.misses

    def rtt_percentile(self, q: float) -> int:
        return int(self.acc.rtt.percentile(q))


def rounds_of(res: LoopResult, acc: FlowStats | None = None) -> Rounds:
    """The statistics of a flow: :class:`Streamed` where it was streamed (``acc``), else its rounds."""
    return Rounds(res) if acc is None else Streamed(acc)


def flow_summary(res: LoopResult, *, budget: bool = True, loop: bool = False, publish_extra_ns: float | None = None,
                 deadline_ps: int | None = None, deadline_on: str = "loop", faults: Any = None,
                 plan: FaultPlan | None = None, mismatch_rounds: bool = True,
                 program: Callable[[Json], Json] | None = None, acc: FlowStats | None = None) -> FlowTiming:
    """The :class:`FlowTiming` of one flow's result ``res`` (a :class:`twin.engine.spec.LoopResult`,
    at least one round), for ``twin run``, a mesh and ``twin decode`` alike.

    ``budget``: the hop budget and slowest round, where the engine recorded hops. ``loop``: the
    controller's round trip (``res.loop_ps``); with ``publish_extra_ns`` (a Qblox cluster's result
    latency plus trigger network, ns) also ``publish_to_reply``. ``deadline_ps``: the misses of
    ``res.loop_ps`` (``deadline_on="loop"``) or ``res.rtt_ps`` (``"rtt"``) over it. ``faults``:
    the scenario's ``faults`` block (:class:`twin.scenario.schema.Faults`), with the flow's
    :class:`twin.faults.FaultPlan` ``plan`` (default ``faults.plan()``): the engine's fault counts,
    the faults not reached named by their scenario keys, with ``mismatch_rounds`` the rounds the card
    caught a corrupted piece in (1-based), and the host-freeze report. ``program(stats)``: the
    ``program`` block from the generator's statistics (default
    :func:`twin.output.program.program_summary`). ``acc``: a streamed flow's statistics
    (:class:`twin.engine.hops.FlowStats`; ``res`` then holds no rounds, only the engine's statistics)."""
    if deadline_on not in ("loop", "rtt"):
        raise ValueError(f"deadline_on must be 'loop' or 'rtt', got {deadline_on!r}")
    from twin.output.program import program_summary
    block = program_summary if program is None else program
    r = rounds_of(res, acc)
    loop_lat = r.loop() if loop else None
    hops = res.hops is not None and budget
    return FlowTiming(
        rtt=r.rtt(), backlog_max=int(res.stats.get("backlog_max", 0)),
        budget=r.budget() if hops else None, slowest_round=r.slowest_round() if hops else None,
        loop=loop_lat,
        publish_to_reply=None if loop_lat is None or publish_extra_ns is None else loop_lat.shifted(publish_extra_ns),
        program=block(res.stats["program"]) if "program" in res.stats else None,
        deadline_ns=None if deadline_ps is None else deadline_ps / 1000,
        deadline_misses=None if deadline_ps is None else r.misses(deadline_ps, deadline_on),
        **_faults(res, faults, plan, mismatch_rounds))


def _faults(res: LoopResult, faults: Any, plan: FaultPlan | None, mismatch_rounds: bool) -> Json:
    """:class:`FlowTiming`'s ``faults`` and ``host_freeze`` (see :func:`flow_summary`)."""
    if not faults or "faults" not in res.stats:
        return {}
    seen = dict(res.stats["faults"])
    if "not_reached" in seen:  # --rounds cut the run short of them: the file's keys, said
        seen["not_reached"] = faults.unreached(seen["not_reached"])
    if mismatch_rounds and faults.corrupt_piece:  # which rounds the card caught, not only how many
        seen["detected"] = dict(seen["detected"], mismatch_rounds=[int(i) + 1 for i in np.flatnonzero(~res.ok)])
    out: Json = {"faults": seen}
    if faults.host_freeze:
        from twin.faults import freeze_report
        plan = faults.plan() if plan is None else plan
        out["host_freeze"] = freeze_report(res.rtt_ps, res.t_in, plan.host_freezes, plan.timeout_ps)
    return out


@dataclass(frozen=True, slots=True)
class FlowSummary:
    """One consumer's loop of ``twin run`` (results.json ``consumers[]``): the consumer (parameter
    set device ``name``, scenario ``node``, ``model``, ``function``, its ``device``, ``kind``,
    ``host``, ``encoding``), the byte ``check``, ``rounds`` (completed; after a stop
    ``rounds_requested`` is what was asked), its :class:`FlowTiming`, an RTL node's statistics
    (``rtl``), a live node's report beside its sim model (``live``), and the measurement it is held
    to (``measured``: None when the scenario names none; ``error_pct``)."""

    name: str
    node: str
    model: str
    function: str
    device: str
    kind: str
    host: str | None
    encoding: str
    check: Check
    rounds: int
    timing: FlowTiming
    rounds_requested: int | None = None
    rtl: Json | None = None
    live: Json | None = None
    measured: Json | None = None
    error_pct: Json | None = None

    def to_json(self) -> Json:
        t, c = self.timing, self.check
        s: Json = {"name": self.name, "node": self.node, "model": self.model, "function": self.function,
                   "device": self.device, "kind": self.kind, "host": self.host, "encoding": self.encoding,
                   "engine": c.engine, "rounds": self.rounds, "replies_checked": c.replies_checked,
                   "mismatches": c.mismatches, "backlog_max": t.backlog_max}
        s |= c.to_json()
        if self.rounds_requested is not None:
            s["rounds_requested"] = self.rounds_requested
        s |= t.rtt.to_json() | t.hops_json() | t.faults_json()
        if self.rtl is not None:
            s["rtl"] = self.rtl
        if self.live is not None:
            s["live"] = self.live
        s |= t.program_json() | t.deadline_json() | t.loop_json()
        s["measured"] = self.measured
        if self.error_pct is not None:
            s["error_pct"] = self.error_pct
        return s


@dataclass(frozen=True, slots=True)
class Wait:
    """Queueing at a mesh's shared consumer (its thread busy with other flows' requests): the mean
    and p99 wait (ns) and the fraction of requests that waited at all."""

    mean_ns: float
    p99_ns: float
    waited_fraction: float

    @classmethod
    def of(cls, wait_ps: np.ndarray) -> Wait:
        """From the per-request waits (int64 ps, at least one)."""
        return cls(round(float(wait_ps.mean()) / 1000, 3), float(percentile(wait_ps, 99)) / 1000,
                   round(float((wait_ps > 0).mean()), 6))

    def to_json(self) -> Json:
        return {"mean_ns": self.mean_ns, "p99_ns": self.p99_ns, "waited_fraction": self.waited_fraction}


@dataclass(frozen=True, slots=True)
class MeshFlowSummary:
    """One flow of a mesh (results.json ``flows[]``): its index, route (``source`` generator, ``via``
    card, ``to`` consumer, the ``route``'s nodes), ``function``, the scenario's ``traffic`` block,
    ``rounds`` completed (after a stop ``rounds_requested``), the card's ``mismatches``, the
    queueing ``wait`` and its :class:`FlowTiming` (``loop`` always); a live flow the paced loop ran,
    ``engine: paced`` and ``live`` (backend, endpoint, pace, the simulated flow's round trip and
    loop over the same rounds, error: :mod:`twin.studies.mesh_live`)."""

    flow: int
    source: str
    via: str
    to: str
    function: str
    route: tuple[str, ...]
    traffic: Json
    rounds: int
    mismatches: int
    wait: Wait
    timing: FlowTiming
    rounds_requested: int | None = None
    live: Json | None = None

    def to_json(self) -> Json:
        t = self.timing
        if t.loop is None:
            raise ValueError(f"mesh flow {self.flow}: no loop latency")
        s: Json = {"flow": self.flow, "from": self.source, "via": self.via, "to": self.to, "function": self.function,
                   "route": list(self.route), "traffic": self.traffic, "rounds": self.rounds,
                   "mismatches": self.mismatches, "rtt": t.rtt.to_json(), "loop": t.loop.to_json(),
                   "wait": self.wait.to_json()}
        if t.budget is not None:
            s["budget"] = t.budget
        s["backlog_max"] = t.backlog_max
        if t.budget is not None:
            s["slowest_round"] = t.slowest_round
        s |= t.faults_json() | t.program_json() | t.deadline_json()
        if self.rounds_requested is not None:
            s["rounds_requested"] = self.rounds_requested
        if self.live is not None:
            s["engine"], s["live"] = "paced", self.live
        return s


@dataclass(frozen=True, slots=True)
class PlacementSummary:
    """One placement of ``twin decode`` (results.json ``placements[]``; docs/results.md lists the
    blocks): where it decodes (``device``, ``mode``, a non-default ``model``, ``workers`` and
    ``order`` for N > 1, ``devices`` and ``dispatch`` for a stream shared over devices), the
    ``function`` its requests named, the serving ``kind``, the ``shots`` and ``requests`` decoded,
    the corrections identical to the direct decode, the ``check`` (its mismatches are the card's),
    the logical errors with rates and intervals, the decoder ``cost``, the ``stream`` (backlog,
    reaction), its :class:`FlowTiming` (deadline misses without ``deadline_ns``: the document has
    it), the decoder's own time, each device's part of a shared stream, the LER-vs-latency points
    (``feedback``), the card's queue depth, the wall-clock ``throughput`` (printed, not written),
    the requests that waited for a re-arm (``chain``), after a stop what was asked, and a paced
    live placement's ``live`` block (measured beside the same placement simulated:
    :func:`twin.qec.live_pace.live_block`)."""

    device: str
    mode: str
    function: Json
    kind: str
    shots: int
    requests: int
    identical_corrections: int
    check: Check
    logical_errors: Json
    ler: Json
    ci: Json
    cost: Json
    compute_ns_mean: float | None
    stream: Json
    timing: FlowTiming
    queue_depth_max: int
    throughput: Json
    model: str | None = None
    workers: tuple[int, str] | None = None
    shared: tuple[list[str], str | None] | None = None
    decoder_only: Latency | None = None
    per_device: list[Json] | None = None
    feedback: list[Json] | None = None
    waited_for_rearm: int | None = None
    requested: tuple[int, int] | None = None
    live: Json | None = None

    def to_json(self) -> Json:
        t, c = self.timing, self.check
        s: Json = {"device": self.device, "mode": self.mode}
        if self.model is not None:
            s["model"] = self.model
        if self.workers is not None:
            s["workers"], s["order"] = self.workers
        if self.shared is not None:
            s["devices"], s["dispatch"] = self.shared
        s |= {"function": self.function, "kind": self.kind, "shots": self.shots, "requests": self.requests,
              "identical_corrections": self.identical_corrections, "card_mismatches": c.mismatches,
              "engine": c.engine, "replies_checked": c.replies_checked, "logical_errors": self.logical_errors,
              "ler": self.ler, "ci": self.ci, "cost": self.cost, "compute_ns_mean": self.compute_ns_mean,
              "backlog_max": self.stream["backlog"]["max"], "card_backlog_max": t.backlog_max,
              "reaction": self.stream["reaction"], "stream": self.stream, "rtt": t.rtt.to_json()}
        if self.decoder_only is not None:
            s["decoder_only"] = self.decoder_only.to_json()
        if self.per_device is not None:
            s["per_device"] = self.per_device
        s |= t.hops_json() | t.loop_json() | t.program_json() | t.deadline_json(with_deadline=False)
        if self.feedback is not None:
            s["feedback"] = self.feedback
        s |= {"queue_depth_max": self.queue_depth_max, "throughput": self.throughput}
        if self.waited_for_rearm is not None:
            s["waited_for_rearm"] = self.waited_for_rearm
        if self.requested is not None:
            s["shots_requested"], s["requests_requested"] = self.requested
        if self.live is not None:
            s["live"] = self.live
        return s
