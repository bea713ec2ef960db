"""A loop scenario's topology checked on plain dicts (:class:`twin.scenario.graph.Topology`) is the
networkx graph's check exactly: the same error (key, value, problem) or the same nodes, edges and
neighbours in the same order, on every bundled scenario and on random small topologies; and the
card path's link lookups (``roce_hops``, ``external_control``) answer as the graph does."""
from __future__ import annotations

from types import SimpleNamespace

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twin.bundled import scenario_files
from twin.scenario import load_scenario
from twin.scenario.graph import Topology, check_topology, roce_route, scenario_graph

RUN_SCENARIOS = [p for p in scenario_files() if "\nnodes:" in p.read_text()]


def _shape(g) -> tuple:
    """Nodes (name, attributes), edges (ends and attributes) and each node's neighbours, in order."""
    if isinstance(g, Topology):
        g = g.networkx()
    return (list(g.nodes(data=True)), list(g.edges(data=True)),
            {n: list(g.neighbors(n)) for n in g.nodes}, dict(g.graph))


def _outcome(check, sc) -> tuple:
    """``check(sc)``'s graph shape, or its error as (type, key path, value, problem)."""
    try:
        return ("ok", _shape(check(sc)))
    except ValueError as e:
        return ("error", type(e).__name__, getattr(e, "path", None), repr(getattr(e, "value", None)), str(e))


def test_bundled_run_scenarios_are_found():
    names = {p.stem for p in RUN_SCENARIOS}
    assert {"card_path_64b", "backline_roce", "mesh_fanout_by_function", "nvqlink_gb200"} <= names


@pytest.mark.parametrize("path", RUN_SCENARIOS, ids=lambda p: p.stem)
def test_bundled_scenarios_plain_topology_is_the_graph(path):
    sc = load_scenario(path).scenario
    assert _outcome(check_topology, sc) == _outcome(scenario_graph, sc)
    if sc.flows:
        return
    assert isinstance(check_topology(sc), Topology)
    g = scenario_graph(sc)
    gen = next(n.name for n in sc.nodes if n.place == "generator")
    card = next(n.name for n in sc.nodes if n.kind == "link_card")
    assert sc.external_control() == (g.edges[gen, card]["kind"] == "aurora")
    for c in sc.consumers():  # the graph's own answer (main's roce_hops)
        route = None if g.has_edge(card, c.name) else roce_route(g, card, c.name)
        want = None if route is None else sum(1 for v in route if g.nodes[v]["node"].kind == "switch")
        assert sc.roce_hops(c.name) == want


def test_a_roce_scenario_is_searched_on_networkx():
    sc = load_scenario(next(p for p in RUN_SCENARIOS if p.stem == "backline_roce")).scenario
    assert any(sc.roce_hops(c.name) is not None for c in sc.consumers())


PLACES = ("generator", "link_card", "consumer", "nic", "switch")
LINK_KINDS = ("on_card", "aurora", "pcie", "ethernet", "c2c")


def _node(name: str, place: str, kind: str, device, routes):
    return SimpleNamespace(name=name, place=place, kind=kind, device=device, routes=routes)


@st.composite
def topologies(draw):
    """Small loop scenarios (nodes and links only, as the checks read them): often a generator and a
    link card first, then nodes of any place, names distinct but now and then one used twice, links
    between any two names (now and then one that is no node, twice the same pair, a node to itself)."""
    places = (["generator", "link_card"] if draw(st.integers(0, 4)) != 3 else []) + draw(
        st.lists(st.sampled_from(("consumer", "consumer", "nic", "switch", "generator", "link_card")), min_size=1,
                 max_size=6))
    names = [f"n{i}" for i in range(len(places))]
    if len(names) > 1 and draw(st.integers(0, 9)) == 7:
        names[draw(st.integers(1, len(names) - 1))] = names[0]
    nodes = []
    for name, place in zip(names, places):
        kind = draw(st.sampled_from(("zhinst", "generator"))) if place == "generator" else place
        nodes.append(_node(name, place, kind, draw(st.sampled_from((None, "dev", "dev"))) if place == "consumer"
                           else None, {"echo": names[0]} if draw(st.integers(0, 9)) == 7 else None))
    ends = st.sampled_from(names + ["ghost"]) if draw(st.integers(0, 5)) == 4 else st.sampled_from(names)
    links = [SimpleNamespace(a=draw(ends), b=draw(ends), kind=draw(st.sampled_from(LINK_KINDS)))
             for _ in range(draw(st.integers(0, 9)))]
    return SimpleNamespace(nodes=nodes, links=links, flows=[])


@st.composite
def sound_topologies(draw):
    """Loop scenarios most of which pass: a generator on a card, consumers on pcie or behind NICs
    and switches over ethernet, a few extra links."""
    n_cons, n_sw = draw(st.integers(1, 4)), draw(st.integers(0, 3))
    nodes = [_node("gen", "generator", "generator", None, None), _node("card", "link_card", "link_card", None, None)]
    nodes += [_node(f"c{i}", "consumer", "consumer", "dev", None) for i in range(n_cons)]
    nodes += [_node(f"nic{i}", "nic", "nic", None, None) for i in range(n_cons)]
    nodes += [_node(f"s{i}", "switch", "switch", None, None) for i in range(n_sw)]
    links = [SimpleNamespace(a="gen", b="card", kind=draw(st.sampled_from(("on_card", "aurora"))))]
    for i in range(n_cons):
        if draw(st.booleans()):
            links.append(SimpleNamespace(a="card", b=f"c{i}", kind="pcie"))
        else:
            links.append(SimpleNamespace(a=f"nic{i}", b=f"c{i}", kind="pcie"))
    sw, nics = [f"s{i}" for i in range(n_sw)], [f"nic{i}" for i in range(n_cons)]
    pairs = [("card", v) for v in sw + nics] + [(a, b) for a in sw for b in sw + nics if a != b]
    for a, b in draw(st.lists(st.sampled_from(pairs), max_size=8, unique_by=lambda ab: frozenset(ab))):
        links.append(SimpleNamespace(a=a, b=b, kind="ethernet"))
    if draw(st.integers(0, 9)) == 7:  # now and then a link the checks refuse
        links.append(SimpleNamespace(a=draw(st.sampled_from(eth_ends := ["card", *sw, *nics])),
                                     b=draw(st.sampled_from(eth_ends)), kind=draw(st.sampled_from(LINK_KINDS))))
    return SimpleNamespace(nodes=nodes, links=draw(st.permutations(links)), flows=[])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies())
def test_random_topologies_plain_is_the_graph(sc):
    assert _outcome(check_topology, sc) == _outcome(scenario_graph, sc)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sound_topologies())
def test_random_roce_topologies_plain_is_the_graph(sc):
    plain, graph = _outcome(check_topology, sc), _outcome(scenario_graph, sc)
    assert plain == graph
    if plain[0] == "ok":  # every route the same on the graph and on the plain topology's networkx
        g, t = scenario_graph(sc), check_topology(sc)
        for c in (n.name for n in sc.nodes if n.kind == "consumer"):
            assert roce_route(t, "card", c) == roce_route(g, "card", c)


def test_topology_reads_as_a_graph():
    t = Topology()
    for n in ("a", "b", "c"):
        t.add_node(n, index=n)
    t.add_edge("b", "a", kind="pcie")
    t.add_edge("a", "c", kind="c2c")
    assert "a" in t and "z" not in t and t.has_edge("a", "b") and t.has_edge("b", "a") and not t.has_edge("b", "c")
    assert not t.has_edge("z", "a") and list(t.neighbors("a")) == ["b", "c"] and t.edges["a", "c"]["kind"] == "c2c"
    g = nx.Graph()
    g.add_nodes_from([("a", {"index": "a"}), ("b", {"index": "b"}), ("c", {"index": "c"})])
    g.add_edge("b", "a", kind="pcie")
    g.add_edge("a", "c", kind="c2c")
    assert _shape(t) == _shape(g)
