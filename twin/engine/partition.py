"""A topology partitioned into what interacts: which flows can influence each other.

Two flows interact only through what the engine lets them share (:mod:`twin.engine.event`): a link
direction (a :class:`twin.kernel.Lane`: serialisation and posted-write order), a link card's
bridge, a consumer node's serving thread (and its one poll grid), and a shared stream's gaps
(:class:`twin.devices.generator.Share`). Flows that share none of these run on disjoint state: no
event of one reads or writes anything of the other, so each component can run on its own timeline
and every flow's results (timestamps, hops, replies, counters) are those of the one timeline of
the whole topology. Events at equal instants keep their order: within a component, events are
scheduled in the same relative order on either timeline.

A generator node (a control system's oscillator) is not a shared resource: each flow has its own
generator process; what its flows share is the oscillator's phase, a constant drawn before the
run (:meth:`twin.engine.spec.LoopSpec.draws`, the node's first flow's), which the caller draws over
the whole topology. The same holds for a consumer node's poll phase (its flows share its thread
anyway).

Covers the sharing of the built-in nodes (the compiled core's, :mod:`twin.engine.compiled`); a
two-stage consumer's own lanes (:mod:`twin.devices.handoff`) are not named here, and the compiled
core refuses it.
"""
from __future__ import annotations

from twin.engine.topology import Flow, Topology


def lane_keys(flow: Flow) -> list[tuple[str, str]]:
    """The link directions ``(from node, to node)`` of ``flow``, in the order the engines make its
    lanes: request (card -> consumer), reply (consumer -> card), then, with an Aurora cable from
    its generator, up (generator -> card) and down (card -> generator)."""
    keys = [(flow.card, flow.consumer), (flow.consumer, flow.card)]
    if flow.spec.aurora is not None:
        keys += [(flow.generator, flow.card), (flow.card, flow.generator)]
    return keys


def shared_resources(flow: Flow) -> list[tuple]:
    """What ``flow`` contends for with any other flow naming the same: its lanes, its card's bridge,
    its consumer's serving thread, and its gaps stream when it is a share of a stream."""
    keys: list[tuple] = [("lane", *k) for k in lane_keys(flow)]
    keys += [("bridge", flow.card), ("thread", flow.consumer)]
    if flow.spec.traffic.share is not None:
        keys.append(("gaps", flow.gaps_stream or flow.spec.stream("gaps")))
    return keys


def components(topo: Topology) -> list[tuple[int, ...]]:
    """The topology's interacting components: tuples of flow indices (ascending), ordered by their
    first flow; every flow in exactly one. Flows in different components share no resource
    (:func:`shared_resources`), directly or through other flows (connected components of the
    flows-resources graph, networkx)."""
    if len(topo.flows) < 2:
        return [tuple(range(len(topo.flows)))]
    import networkx as nx
    g = nx.Graph()
    for i, fl in enumerate(topo.flows):
        g.add_node(("flow", i))
        g.add_edges_from((("flow", i), ("resource", key)) for key in shared_resources(fl))
    comps = [tuple(sorted(n[1] for n in c if n[0] == "flow")) for c in nx.connected_components(g)]
    return sorted(comps)
