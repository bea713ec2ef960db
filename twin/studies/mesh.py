"""A mesh on the one engine: every flow of a mesh scenario as one :class:`Topology`.

Each flow (:class:`twin.scenario.Flow`) has its own queue pair (a request queue in its consumer's
memory, a reply queue in its link card's), with the contract's encodings and sequence words,
exactly as one loop. What flows share, they contend for (:func:`twin.engine.event.run_topology`):
a link direction (an Aurora cable, a card's PCIe path to a consumer: serialisation and posted-write
order), a card's bridge, and a consumer's one serving thread (a CPU core, a GPU persistent kernel,
an FPGA engine), which serves its queues first come, first served: a request seen while the thread
is busy waits (``wait_ps``). With Poisson arrivals (``gaps: {distribution: exponential}``) into a
consumer whose service time is fixed, the mean wait follows M/D/1, ``W = lambda D^2 / (2 (1 - rho))``
(``tests/test_mesh.py``). Every node is built by its model's registered factory, so ``code``,
``rtl`` and ``live`` nodes stand in a mesh where the registry allows (one queue pair for rtl/live).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from twin.calibration.params import ParamSet
from twin.engine.event import run_topology
from twin.engine.spec import LoopResult
from twin.engine.stop import Interrupted
from twin.engine.topology import Topology
from twin.output.summary import MeshFlowSummary, Wait
from twin.scenario.compile import scenario_topology
from twin.scenario.graph import Route
from twin.studies.mesh_reduce import FlowReduced, FlowTimes, flow_timing
from twin.units import PS_PER_NS


@dataclass
class MeshResult:
    """Every flow's times, its route, and the shared resources' statistics. ``reduced``: per flow its
    rounds reduced to their statistics (:class:`twin.studies.mesh_reduce.FlowReduced`, a partitioned
    run that keeps no round), ``flows`` then holding no rounds; None: ``flows`` hold every round."""

    routes: list[Route]
    flows: list[FlowTimes]
    stats: dict = field(default_factory=dict)
    reduced: list[FlowReduced] | None = None


def mesh_topology(sc, params: ParamSet, rounds: int | None = None, seed: int | None = None,
                  service_ns: dict[str, float] | None = None, rtl_config=None) -> Topology:
    """The :class:`Topology` of mesh scenario ``sc`` under card-path parameter set ``params``: the
    compile step's (:func:`twin.scenario.compile.scenario_topology`: one flow per ``flows`` entry,
    named ``flow<i>``, over the nodes and link directions its route uses). ``rounds`` overrides every
    flow's round count; ``seed`` the scenario's; ``service_ns`` a consumer node's function body (ns)
    instead of its parameter set's; ``rtl_config(node) -> RtlConfig | None``. The scenario's ``faults``
    apply to every flow (round numbers count each flow's own requests)."""
    topo = scenario_topology(sc, params, rounds, seed, rtl=rtl_config)
    if not service_ns:
        return topo
    flows = tuple(replace(f, spec=replace(f.spec, consumer=replace(
        f.spec.consumer, service_ps=int(round(service_ns[f.consumer] * PS_PER_NS))))) if f.consumer in service_ns
        else f for f in topo.flows)
    return replace(topo, flows=flows)


def run_mesh(sc, params: ParamSet, rounds: int | None = None, seed: int | None = None,
             progress: Callable[[int, int], None] | None = None,
             service_ns: dict[str, float] | None = None, rtl_config=None) -> MeshResult:
    """Simulate every flow of mesh scenario ``sc`` together (see :func:`mesh_topology`).
    ``progress(done, total)`` is called every 10,000 replies. Raises RuntimeError when the event
    queue runs dry with requests outstanding (cannot happen for a valid mesh). Asked to stop
    (:mod:`twin.engine.stop`) it raises :class:`Interrupted` whose ``partial`` is the
    :class:`MeshResult` of every flow's whole rounds so far. A live node the paced loop drives
    (:mod:`twin.studies.mesh_live`): the mesh simulated with its sim model first, then its flow on the
    device; its failure (:class:`hw_bridge.contract.LiveFailure`) or a stop then is raised with
    ``flow`` (its index) and ``partial`` the :class:`MeshResult` with its rounds so far (None before
    its first)."""
    from twin.studies.mesh_live import paced_live_flow, run_live_flow, simulated_topology
    topo = mesh_topology(sc, params, rounds, seed, service_ns, rtl_config)
    total = sum(f.spec.traffic.rounds for f in topo.flows)
    k = paced_live_flow(topo)
    n_live = 0 if k is None else topo.flows[k].spec.traffic.rounds
    try:
        results = run_topology(topo if k is None else simulated_topology(topo, k),
                               (lambda d: progress(d, total + n_live)) if progress else None)
    except Interrupted as e:
        if e.results is not None:  # the event engine's per-flow results (it sets them when it stops)
            e.partial = _mesh_result(sc, topo, e.results)
        raise
    if k is not None:  # the live node's flow on its device, at the pace of its simulated run
        try:
            results[k] = run_live_flow(topo, k, results, (lambda d: progress(total + d, total + n_live))
                                       if progress else None)
        except Exception as e:  # a live failure or a stop: the other flows whole, the live one's rounds so far
            part = getattr(e, "partial", None)
            e.flow = k  # type: ignore[attr-defined]
            if part is not None:  # (None: a failure before its first round)
                results[k] = part
                e.partial = _mesh_result(sc, topo, results) if len(part.t_in) else None  # type: ignore[attr-defined]
            raise
    return _mesh_result(sc, topo, results)


def _mesh_result(sc, topo: Topology, results: list[LoopResult], index: tuple[int, ...] | None = None,
                 reduced: list[FlowReduced] | None = None) -> MeshResult:
    """The :class:`MeshResult` of the event engine's per-flow results (``index``: the scenario's
    flows they are, when ``topo`` holds only those: a partitioned run that lost a part; ``reduced``:
    per flow its rounds' statistics, ``results`` then holding no rounds)."""
    # each flow's route as the scenario's graph gives it (twin.scenario.graph's: generator -> card ->
    # consumer), read off the compiled flows rather than building the graph again (0.4 s at 10,000 nodes)
    entries = sc.flows  # (once: a model's field read costs)
    routes = [Route(i, fl.generator, fl.card, fl.consumer, entries[i].function, (fl.generator, fl.card, fl.consumer))
              for i, fl in zip(range(len(topo.flows)) if index is None else index, topo.flows)]
    flows = []
    for res in results:
        stats = {k: v for k, v in res.stats.items() if k not in ("shared", "events")}
        flows.append(FlowTimes(res.name, res.engine, res.t_send, res.t_in, res.t_have, res.t_back, res.ok, stats,
                               res.hops))
    shared = results[0].stats["shared"]
    done = [len(ft.t_in) for ft in flows] if reduced is None else [r.rounds for r in reduced]
    end = (max(int(ft.t_back.max()) for ft in flows) if reduced is None else max(r.t_back_max for r in reduced)) or 1
    served: dict[str, int] = {}
    for f, n in zip(topo.flows, done):  # replies the card had from each consumer, whatever its model
        served[f.consumer] = served.get(f.consumer, 0) + n
    from twin.exchange.encoding import get_encoding
    body_ps = {f.consumer: f.spec.consumer.pre_service_ps(get_encoding(f.spec.consumer.encoding),
                                                          f.spec.traffic.frame_bytes) + f.spec.consumer.service_ps
               for f in topo.flows}  # the thread's time per request from having it to the reply: read + body
    live = {f.consumer for f, res in zip(topo.flows, results) if res.engine == "paced"}
    stats = {"events": results[0].stats["events"],
             "links": {name: {"writes": ln["writes"], "bytes": ln["bytes"],
                              "utilisation": round(ln["busy_ps"] / end, 6)} for name, ln in shared["lanes"].items()},
             "consumers": {name: {"served": served[name],
                                  # an RTL consumer's thread is its own Verilog: its busy time is not the twin's
                                  # a paced live device's: measured, its simulated stand-in's would mislead
                                  "utilisation": round(t["busy_ps"] / end, 6) if t["served"] and name not in live
                                  else None,
                                  "service_ns": body_ps[name] / 1000}
                           for name, t in shared["threads"].items()}}
    return MeshResult(routes, flows, stats, reduced)


def flow_summaries(sc, res: MeshResult, requested: dict[int, int] | None = None) -> list[MeshFlowSummary]:
    """Every flow's :class:`MeshFlowSummary` of mesh scenario ``sc``'s result ``res`` (its common
    part by :func:`twin.output.summary.flow_summary`: the loop always, the hop budget, the faults
    and host freezes, the control program, the deadline misses). ``requested``: after a stop, the
    rounds each flow (by index) was asked for."""
    out = []
    plan = sc.faults.plan() if sc.faults else None
    reduced: list[FlowReduced | None] = [None] * len(res.flows) if res.reduced is None else list(res.reduced)
    for r, ft, red in zip(res.routes, res.flows, reduced):
        if ft.hops is None:  # the event engine records them for every flow of a mesh
            raise RuntimeError(f"mesh flow {r.flow}: the engine recorded no hops")
        timing, rounds, mismatches, wait = (
            (flow_timing(ft, sc.deadline, sc.faults, plan), int(len(ft.t_in)), int((~ft.ok).sum()), Wait.of(ft.wait_ps))
            if red is None else (red.timing, red.rounds, red.mismatches, red.wait))
        out.append(MeshFlowSummary(
            flow=r.flow, source=r.generator, via=r.card, to=r.consumer, function=r.function, route=tuple(r.nodes),
            traffic=sc.flows[r.flow].traffic.model_dump(), rounds=rounds, mismatches=mismatches, wait=wait,
            timing=timing, rounds_requested=None if requested is None else requested[r.flow],
            live=_live_record(ft) if ft.engine == "paced" else None))
    return out


def _live_record(ft: FlowTimes) -> dict:
    """A paced live flow's ``live`` block: backend, endpoint, isolation, pace, the simulated flow
    beside it, the endpoint's own statistics, and ``error`` (set by the caller after a failure)."""
    lv = ft.stats["live"]
    return {k: lv.get(k) for k in ("backend", "endpoint", "isolation", "pace", "simulated", "endpoint_stats")} | \
        {"error": lv.get("error")}
