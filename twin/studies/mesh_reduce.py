"""A mesh flow's rounds reduced to what its results.json entry needs of them, where they are made.

A partitioned mesh run (:mod:`twin.studies.mesh_parts`) that writes no per-round file and no
histograms needs of a flow's rounds only its entry's statistics: its :class:`FlowTiming` (round
trip, loop, budget, slowest round, faults, program, deadline misses: :func:`flow_timing`,
the one code path a one-process run takes, on the same rounds), its queueing :class:`Wait`, the
rounds, the card's mismatches and the last reply's instant. A flow lies whole in one part (parts are
whole components), so each part reduces its flows to those (:func:`reduce_flows`, on the part's
worker) and ships them, a few kB a flow, instead of every round's instants (157 B a round: 140 MB for
1.28 M rounds); the parent builds the same results.json from them.

Why not the mergeable accumulators (:class:`twin.engine.hops.FlowStats`): a stage's times (a PCIe
write's wire and landing, a poll's phase) are not quantised, so its counts take one distinct value a
round and weigh 16 B a round, more than its column of the rounds (8 B); measured on the six-flow mesh
of tests/test_partition_run.py, 2,000 rounds a flow: 162 kB a flow as FlowStats, 210 kB as rounds.

What needs every round in the parent is named by :func:`rounds_needed`: the per-round file and the
histograms. Then each flow's rounds travel too (``keep``), its statistics still computed in its part.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.engine.hops import Hops
from twin.engine.spec import LoopResult
from twin.output.summary import FlowTiming, Wait, flow_summary

EMPTY = np.zeros(0, np.int64)
"""The one zero-length instant column every reduced flow's result shares (read only: no round)."""
NONE_OK = np.zeros(0, bool)


class FlowTimes(LoopResult):
    """One flow's per-request results (a :class:`LoopResult`: int64 ps per request, in order, the
    card's ``ok``, ``stats``, ``hops``), with the shared consumer's view: ``t_seen`` (the first poll
    after the request landed, its answer had: when an idle thread would have taken it) and ``t_start``
    (when the consumer's thread took it)."""

    @property
    def flow_hops(self) -> Hops[np.ndarray]:
        """The flow's hops: the event engine records them for every flow of a mesh (RuntimeError if not)."""
        if self.hops is None:
            raise RuntimeError(f"mesh flow {self.name!r}: the engine recorded no hops")
        return self.hops

    @property
    def t_seen(self) -> np.ndarray:
        """The idle-thread poll that saw each request (hop ``seen``)."""
        return self.flow_hops.seen

    @property
    def t_start(self) -> np.ndarray:
        """When the consumer's thread took each request (hop ``start``)."""
        return self.flow_hops.start

    @property
    def wait_ps(self) -> np.ndarray:
        """Queueing delay at the shared consumer per request (its thread busy with other requests)."""
        return self.t_start - self.t_seen


def flow_timing(ft: FlowTimes, deadline_ps: int | None, faults, plan) -> FlowTiming:
    """A mesh flow's :class:`FlowTiming` (:func:`twin.output.summary.flow_summary`: the loop always,
    the hop budget, the faults (``faults``: the scenario's block, ``plan`` its
    :class:`twin.faults.FaultPlan`) and host freezes, the control program, the misses of
    ``deadline_ps``), from its rounds (at least one)."""
    return flow_summary(ft, loop=True, deadline_ps=deadline_ps, faults=faults, plan=plan, mismatch_rounds=False)


@dataclass(frozen=True)
class FlowReduced:
    """One flow's rounds reduced (:func:`reduce_flow`): the flow's ``name``, ``engine`` and engine
    ``stats`` (but their per-round arrays: the slot waits, already in the hops), ``timing`` its
    :class:`FlowTiming`, ``wait`` its queueing at its consumer, ``rounds`` completed, ``mismatches``
    (the card's), ``t_back_max`` the last reply's return (int ps; 0 without rounds); ``kept`` its
    rounds where the run keeps them (a per-round file, histograms), else None."""

    name: str
    engine: str
    stats: dict
    timing: FlowTiming
    wait: Wait
    rounds: int
    mismatches: int
    t_back_max: int
    kept: LoopResult | None = None

    @property
    def result(self) -> LoopResult:
        """Its :class:`LoopResult`: ``kept``, or one with no rounds (zero-length columns and hops) and its stats."""
        if self.kept is not None:
            return self.kept
        hops = Hops(EMPTY, EMPTY, EMPTY, EMPTY, EMPTY, EMPTY, EMPTY)
        return LoopResult(self.name, self.engine, EMPTY, EMPTY, EMPTY, EMPTY, NONE_OK, dict(self.stats), hops)


def reduce_flow(res: LoopResult, deadline_ps: int | None, faults=None, plan=None, keep: bool = False) -> FlowReduced:
    """``res`` (a mesh flow's result: its hops recorded, at least one round) reduced to its
    statistics; ``deadline_ps`` (int ps or None), ``faults`` (the scenario's ``faults`` block) and
    ``plan`` (its :class:`twin.faults.FaultPlan`) as the scenario's (:func:`flow_timing`);
    ``keep``: its rounds kept too (``kept``)."""
    ft = FlowTimes(res.name, res.engine, res.t_send, res.t_in, res.t_have, res.t_back, res.ok, res.stats, res.hops)
    n = int(len(res.t_in))
    stats = {k: v for k, v in res.stats.items() if not isinstance(v, np.ndarray)}
    return FlowReduced(res.name, res.engine, stats, flow_timing(ft, deadline_ps, faults, plan), Wait.of(ft.wait_ps), n,
                       res.mismatches, int(res.t_back.max()) if n else 0, res if keep else None)


def reduce_flows(results: list[LoopResult], deadline_ps: int | None, faults=None, keep: bool = False
                 ) -> list[FlowReduced]:
    """:func:`reduce_flow` of each of ``results`` (a part's flows, in order), the fault plan drawn
    once from ``faults`` (as the one-process run draws it); ``keep``: their rounds kept too."""
    plan = faults.plan() if faults else None
    return [reduce_flow(r, deadline_ps, faults, plan, keep) for r in results]


def rounds_needed(rounds_file: bool, plot: bool) -> str | None:
    """Why a mesh run must ship every round to the parent (one phrase), or None: a per-round file
    (``rounds_file``) or histograms (``plot``) asked for."""
    if rounds_file:
        return "the per-round file writes every round"
    if plot:
        return "the histograms draw every round"
    return None


__all__ = ["FlowReduced", "reduce_flow", "reduce_flows", "rounds_needed"]
