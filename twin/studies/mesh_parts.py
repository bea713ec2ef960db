"""A mesh run partitioned across processes (``twin run MESH --processes N`` / ``--cluster tcp://...``).

The mesh's topology (:func:`twin.studies.mesh.mesh_topology`) is cut into its interacting components
(:func:`twin.engine.partition.components`), placed onto parts balanced by expected events
(:func:`twin.engine.partition.place`), and each part runs as a Dask task on the one-process engine
(:mod:`twin.engine.parts`). The parent assembles the parts' per-flow results in flow order, with the
shared lanes' and threads' counters in the order one timeline makes them, so that the
:class:`twin.studies.mesh.MeshResult` (and the files written from it) equals the one-process run's for
any number of parts. One part (one component, or ``--processes 1``) runs in this process.

What a part ships back: its flows' results.json statistics (:mod:`twin.studies.mesh_reduce`: a few kB
a flow, computed on the part's worker by the one-process code), from which the parent builds the same
results.json; with a per-round file or histograms every round of its flows too (157 B a round,
pickled: on the compiled core shipping them costs more than running them), without
(``--no-rounds --no-plot``) nothing more.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Callable

from twin.calibration.params import ParamSet
from twin.engine.partition import Part, components, lane_keys, place
from twin.engine.stop import Interrupted
from twin.engine.topology import Topology
from twin.studies.mesh import MeshResult, _mesh_result, mesh_topology


@dataclass
class PartedMesh:
    """A partitioned mesh run: ``result`` (the flows kept, ``kept``: their indices; every flow unless
    a part was lost), the ``parts`` and ``components`` placed, per part ``cpu_s`` (CPU seconds of its
    engine), ``stopped`` (a stop cut some part: whole rounds so far), ``lost`` (per lost part index,
    why), ``here`` (one part, run in this process), and per part ``wall_s`` (seconds from its turn on
    its worker to its end) and ``finish_s`` (of them, reducing its rounds to their statistics)."""

    result: MeshResult
    kept: tuple[int, ...]
    parts: list[Part]
    components: list[tuple[int, ...]]
    cpu_s: list[float]
    stopped: bool = False
    lost: dict[int, str] = field(default_factory=dict)
    here: bool = False
    wall_s: list[float] = field(default_factory=list)
    finish_s: list[float] = field(default_factory=list)


def assemble(sc, topo: Topology, outcomes: list[tuple[tuple[int, ...], list]]
             ) -> tuple[MeshResult, tuple[int, ...]]:
    """The :class:`MeshResult` of the flows of ``topo`` that have a result (``outcomes``: per part
    that gave results, its flow indices and their :class:`LoopResult`s, or their
    :class:`twin.studies.mesh_reduce.FlowReduced`: every part's the one or the other), as one
    timeline of them gives it: flows in order, the shared lanes and serving threads in the order that
    timeline makes them (each flow's lanes in :func:`twin.engine.partition.lane_keys` order, each
    consumer at its first flow), ``events`` the parts' summed (every event belongs to one component)."""
    from twin.studies.mesh_reduce import FlowReduced
    reduced = {i: x for flows, part in outcomes for i, x in zip(flows, part) if isinstance(x, FlowReduced)}
    outcomes = [(flows, [x.result if isinstance(x, FlowReduced) else x for x in part]) for flows, part in outcomes]
    by_flow = {i: (res, part[0].stats) for flows, part in outcomes for i, res in zip(flows, part)}
    kept = tuple(sorted(by_flow))
    if reduced and len(reduced) != len(kept):
        raise ValueError(f"{len(reduced)} of {len(kept)} flows reduced: every part's or none")
    lanes: dict = {}
    threads: dict = {}
    for i in kept:
        fl, shared = topo.flows[i], by_flow[i][1]["shared"]
        for a, b in lane_keys(fl):
            lanes.setdefault(f"{a}->{b}", shared["lanes"][f"{a}->{b}"])
        threads.setdefault(fl.consumer, shared["threads"][fl.consumer])
    whole = {"lanes": lanes, "threads": threads}
    events = sum(int(part[0].stats["events"]) for _, part in outcomes)
    results = [by_flow[i][0] for i in kept]  # the whole's counters on the first (all _mesh_result reads of them)
    results[0] = replace(results[0], stats={**results[0].stats, "shared": whole, "events": events})
    sub = replace(topo, flows=tuple(topo.flows[i] for i in kept))
    return _mesh_result(sc, sub, results, None if len(kept) == len(topo.flows) else kept,
                        [reduced[i] for i in kept] if reduced else None), kept


def run_mesh_parts(sc, params: ParamSet, n: int, client_of: Callable, rounds: int | None = None,
                   seed: int | None = None, progress: Callable[[int, int], None] | None = None,
                   placed: Callable[[list[Part], list[tuple[int, ...]]], None] | None = None,
                   timeout_s: float = 20.0, rtl_config=None, on_lost=None, on_start=None,
                   keep_rounds: bool = True) -> PartedMesh:
    """Run mesh scenario ``sc`` in at most ``n`` parts. ``client_of(parts)``: a context manager
    giving the Dask client to run them on (called only for two parts or more). ``placed(parts,
    components)`` is called before anything runs; ``progress(done, total)`` as replies come back;
    ``timeout_s``: how long a silent part is waited for (:func:`twin.engine.parts.run_parts`);
    ``on_lost(run)`` / ``on_start(run)``: a part found lost / heard from first
    (:func:`twin.engine.parts.run_parts`). Each part computes its flows' results.json statistics
    (:func:`twin.studies.mesh_reduce.reduce_flows`: the result's ``reduced``) and ships them, with
    their rounds only where ``keep_rounds`` (a per-round file, histograms; else the result's flows hold
    no rounds). One part runs here
    (:func:`twin.engine.event.run_topology`, every round kept)."""
    topo = mesh_topology(sc, params, rounds, seed, rtl_config=rtl_config)
    comps = components(topo)
    parts = place(topo, n, comps)
    total = sum(f.spec.traffic.rounds for f in topo.flows)
    if placed:
        placed(parts, comps)
    if len(parts) == 1:
        return _run_here(sc, topo, parts, comps, progress, total)
    from twin.engine import compiled, event
    from twin.engine.parts import run_parts
    reference = not event.COMPILED or compiled.refusal(topo) is not None  # the whole topology's engine, per part
    from twin.studies.mesh_reduce import reduce_flows
    finish = partial(reduce_flows, deadline_ps=sc.deadline, faults=sc.faults, keep=keep_rounds)
    with client_of(parts) as client:
        runs = run_parts(client, topo, parts, (lambda d: progress(d, total)) if progress else None, timeout_s,
                         reference, on_lost, on_start, finish)
    outcomes = [(r.part.flows, r.results) for r in runs if r.results]
    lost = {r.part.index: r.lost for r in runs if r.lost is not None}
    if not outcomes:
        raise PartsLost(lost, parts, comps)
    res, kept = assemble(sc, topo, outcomes)
    return PartedMesh(res, kept, parts, comps, [r.cpu_s for r in runs], any(r.stopped for r in runs), lost,
                      wall_s=[r.wall_s for r in runs], finish_s=[r.finish_s for r in runs])


def _run_here(sc, topo: Topology, parts: list[Part], comps, progress, total: int) -> PartedMesh:
    """One part: the one-process run (a stop: every flow's whole rounds so far)."""
    from twin.engine.event import run_topology
    cpu, wall = time.thread_time(), time.perf_counter()
    stopped = False
    try:
        results = run_topology(topo, (lambda d: progress(d, total)) if progress else None)
    except Interrupted as e:
        if e.results is None:
            raise
        results, stopped = e.results, True
    res = _mesh_result(sc, topo, results)
    return PartedMesh(res, tuple(range(len(topo.flows))), parts, comps, [time.thread_time() - cpu], stopped,
                      here=True, wall_s=[time.perf_counter() - wall], finish_s=[0.0])


class PartsLost(RuntimeError):
    """Every part was lost: nothing to save. ``lost``: per part index, why."""

    def __init__(self, lost: dict[int, str], parts: list[Part], comps):
        self.lost, self.parts, self.comps = lost, parts, comps
        super().__init__("; ".join(f"part {k}: {why}" for k, why in lost.items()))


__all__ = ["PartedMesh", "PartsLost", "assemble", "run_mesh_parts"]
