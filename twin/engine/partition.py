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

A run across processes (:mod:`twin.engine.parts`) groups the components into parts balanced by
expected events (:func:`place`) and runs each part's topology (:func:`part_topology`) apart, with the
phases drawn over the whole (:func:`whole_draws`) shipped in it.

Covers the sharing of the built-in nodes (the compiled core's, :mod:`twin.engine.compiled`); a
two-stage consumer's own lanes (:mod:`twin.devices.handoff`) are not named here: the compiled core
refuses a hand-off lane that is also another flow's (:mod:`twin.engine.compiled`).
"""
from __future__ import annotations

from dataclasses import dataclass

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
    (:func:`shared_resources`), directly or through other flows: the connected components of the
    flows-resources graph, found by a union-find over the flows (each resource joins every flow
    naming it to the first that did), in time about linear in the flows."""
    n = len(topo.flows)
    root = list(range(n))

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]  # path halving
            i = root[i]
        return i

    first: dict[tuple, int] = {}
    for i, fl in enumerate(topo.flows):
        for key in shared_resources(fl):
            a, b = find(first.setdefault(key, i)), find(i)
            if a != b:
                root[max(a, b)] = min(a, b)  # a component's root: its first flow
    comps: dict[int, list[int]] = {}
    for i in range(n):
        comps.setdefault(find(i), []).append(i)
    return [tuple(c) for c in comps.values()] or [()]


def whole_draws(topo: Topology) -> tuple[dict[str, int], dict[str, int]]:
    """The constants the engines draw over the whole of ``topo``: per consumer node its poll phase
    and per generator node its oscillator's start phase (ps), each its first flow's
    (:meth:`twin.engine.spec.LoopSpec.draws`), as :func:`twin.engine.event.run_topology` and the
    compiled core take them; a topology's own ``phases`` / ``clocks`` first."""
    phases, clocks = dict(topo.phases), dict(topo.clocks)
    for fl in topo.flows:
        phase, gen_phase, _ = fl.spec.draws()
        phases.setdefault(fl.consumer, phase)
        clocks.setdefault(fl.generator, gen_phase)
    return phases, clocks


def part_topology(topo: Topology, flows: tuple[int, ...],
                  draws: tuple[dict[str, int], dict[str, int]] | None = None) -> Topology:
    """The topology of flows ``flows`` of ``topo`` (indices, ascending: whole components of
    :func:`components`), with the poll phases and oscillator phases of ``topo`` drawn over the whole
    (:func:`whole_draws`, or ``draws``, its result given: a generator whose flows fall in two parts
    keeps one oscillator). Its flows' results equal theirs in ``topo``. ValueError for indices not
    ascending or out of range."""
    if list(flows) != sorted(set(flows)) or any(not 0 <= i < len(topo.flows) for i in flows):
        raise ValueError(f"topology {topo.name!r}: part flows must be ascending indices below "
                         f"{len(topo.flows)}, got {flows}")
    phases, clocks = whole_draws(topo) if draws is None else draws
    sub = tuple(topo.flows[i] for i in flows)
    return Topology(topo.name, topo.seed, sub, {f.consumer: phases[f.consumer] for f in sub},
                    {f.generator: clocks[f.generator] for f in sub})


@dataclass(frozen=True)
class Part:
    """One part of a placement (:func:`place`): ``index`` (0-based), its ``components`` (indices
    into :func:`components`' list, ascending), their ``flows`` (ascending) and ``events``, the
    expected events (its flows' rounds summed: each round is a fixed number of events)."""

    index: int
    components: tuple[int, ...]
    flows: tuple[int, ...]
    events: int


def component_events(topo: Topology, comps: list[tuple[int, ...]]) -> list[int]:
    """Each component's expected events: the rounds of its flows summed (flows x rounds)."""
    return [sum(topo.flows[i].spec.traffic.rounds for i in c) for c in comps]


def place(topo: Topology, n: int, comps: list[tuple[int, ...]] | None = None) -> list[Part]:
    """``topo``'s components (:func:`components`, or ``comps``) grouped into at most ``n`` parts
    balanced by expected events (:func:`component_events`): largest first (ties: the lower
    component), each onto the part with the least events so far (ties: the lower part). Parts
    without a component are left out (``n`` above the components: one part each). ValueError for
    ``n`` < 1."""
    comps = components(topo) if comps is None else comps
    events = component_events(topo, comps)
    loads, members = balance(events, n)
    return [Part(p, tuple(m), tuple(sorted(i for c in m for i in comps[c])), loads[p])
            for p, m in enumerate(members)]


def balance(weights: list[int], n: int) -> tuple[list[int], list[list[int]]]:
    """Items of ``weights`` (expected work each, any unit) grouped into at most ``n`` bins: largest
    first (ties: the lower item), each into the bin of least work so far (ties: the lower bin).
    Returns the bins' work and their items (ascending); ``min(n, len(weights))`` bins. ValueError
    for ``n`` < 1."""
    if n < 1:
        raise ValueError(f"a placement needs at least one part, got {n}")
    loads = [0] * min(n, len(weights))
    members: list[list[int]] = [[] for _ in loads]
    for c in sorted(range(len(weights)), key=lambda c: (-weights[c], c)):
        p = min(range(len(loads)), key=lambda p: (loads[p], p))
        loads[p] += weights[c]
        members[p].append(c)
    return loads, [sorted(m) for m in members]


def ranges(ids: tuple[int, ...] | list[int]) -> str:
    """Ascending integers as runs: ``(0, 1, 2, 5, 7, 8)`` -> ``"0-2, 5, 7-8"``."""
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
