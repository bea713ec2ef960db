"""The topology of a scenario as a networkx graph: checks, routes, the links' allowed ends.

Nodes are placed by their kind's ``place`` (:attr:`twin.nodes.declare.NodeKind.place`: any control
kind stands as the generator). A loop scenario has one generator and one link card; each consumer
hangs off the card on pcie, or is reached over ethernet (RoCE v2: card -> switches -> NIC ->
pcie). A mesh scenario has ``flows``: each flow leaves a generator (a control system), enters a
link card next to it (``via`` when there are several) and is routed by the card to a consumer by
function id (the card's ``routes``: function name -> consumer node), over pcie. Two flows whose
routes share an edge share that link direction (its wire serialises both); two flows routed to one
consumer share its serving thread.
A loop scenario is checked on :class:`Topology` (its nodes and links in plain dicts: networkx is
imported only where a route must be searched, a consumer reached over ethernet, or a graph is
asked for); :func:`scenario_graph` builds the same checks on a networkx graph.
Pure: no I/O.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from twin.config import Located

if TYPE_CHECKING:
    import networkx as nx


class _Edges:
    """``topology.edges[a, b]``: the attributes of the edge between ``a`` and ``b`` (KeyError if none)."""

    def __init__(self, adj: dict[str, dict[str, dict]]) -> None:
        self._adj = adj

    def __getitem__(self, ab: tuple[str, str]) -> dict:
        a, b = ab
        return self._adj[a][b]


class Topology:
    """An undirected graph in plain dicts with the part of :class:`networkx.Graph`'s interface the
    topology's checks read: ``name in t``, :meth:`add_node` (name, attributes), ``t.nodes[name]``
    (its attributes), :meth:`add_edge`, :meth:`has_edge`, ``t.edges[a, b]`` (its attributes),
    :meth:`neighbors` (in the order the edges were added), ``t.graph`` (a dict). A node is added
    once, an edge between two nodes once (the checks refuse a second). :meth:`networkx` gives the
    networkx graph of the same nodes and edges, added in the same order."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict] = {}
        self.graph: dict = {}
        self._adj: dict[str, dict[str, dict]] = {}
        self._added: list[tuple[str, str, dict]] = []  # the edges in the order they were added
        self.edges = _Edges(self._adj)
        self._nx: nx.Graph | None = None

    def __contains__(self, name: object) -> bool:
        return name in self.nodes

    def add_node(self, name: str, **attrs) -> None:
        self.nodes[name] = attrs
        self._adj[name] = {}
        self._nx = None

    def add_edge(self, a: str, b: str, **attrs) -> None:
        self._adj[a][b] = self._adj[b][a] = attrs
        self._added.append((a, b, attrs))
        self._nx = None

    def has_edge(self, a: str, b: str) -> bool:
        return a in self._adj and b in self._adj[a]

    def neighbors(self, name: str) -> Iterator[str]:
        return iter(self._adj[name])

    def networkx(self) -> nx.Graph:
        """The same graph as networkx's (kept until the next node or edge)."""
        if self._nx is None:
            import networkx as nx
            g = nx.Graph()
            for name, attrs in self.nodes.items():
                g.add_node(name, **attrs)
            for a, b, attrs in self._added:
                g.add_edge(a, b, **attrs)
            g.graph.update(self.graph)
            self._nx = g
        return self._nx


Graph = Union[Topology, "nx.Graph"]
"""What the checks read: a :class:`Topology` or a networkx graph."""

_LINK_ENDS = {"pcie": ({"link_card", "consumer"}, {"nic", "consumer"}),
              "on_card": ({"generator", "link_card"},), "aurora": ({"generator", "link_card"},),
              "ethernet": ({"link_card", "nic"}, {"link_card", "switch"}, {"switch", "nic"}, {"switch"}),
              "c2c": ({"consumer"},)}


def check_link_ends(g: Graph, link, j: int) -> None:
    """Raise :class:`Located` when ``link`` (the scenario's ``links[j]``, a
    :class:`twin.scenario.schema.Link`) joins node kinds its kind cannot join."""
    ends = {g.nodes[link.a]["node"].place, g.nodes[link.b]["node"].place}
    allowed = _LINK_ENDS[link.kind]
    if ends not in allowed:
        text = " or ".join("a " + " and a ".join(sorted(a)) if len(a) > 1 else "two " + next(iter(a)) + "es"
                           for a in allowed)
        raise Located(("links", j, "kind"), link.kind, f"a {link.kind} link joins {text}, not {link.a} and {link.b}")


def add_links(sc, g: Graph, mesh: bool) -> None:
    """Add the scenario's links to ``g`` (its nodes already there) as edges carrying their kind and
    index. Raises :class:`Located` for an end that is no node, a second link between two nodes, a
    link joining kinds it cannot join, and in a mesh an ethernet link (the RoCE wire is modelled end
    to end per card-consumer pair: flows to different consumers behind one NIC would not contend on
    the cable, so RoCE routes run as loops)."""
    for j, link in enumerate(sc.links):
        for key, end in (("from", link.a), ("to", link.b)):
            if end not in g:
                raise Located(("links", j, key), end, "no node of that name")
        if g.has_edge(link.a, link.b):
            raise Located(("links", j, "to"), link.b, f"a second link between {link.a} and {link.b}")
        if mesh and link.kind in ("ethernet", "c2c"):
            raise Located(("links", j, "kind"), link.kind, "RoCE (ethernet) routes and NVLink-C2C placements are "
                          "modelled one loop at a time, not in a mesh (no flows)")
        check_link_ends(g, link, j)
        g.add_edge(link.a, link.b, kind=link.kind, index=j)


def roce_route(g: Graph, card: str, consumer: str) -> list[str] | None:
    """The route link card -> (switch)* -> nic -> consumer over ethernet then pcie, or ``None``
    (networkx's shortest path; a :class:`Topology` is searched as its networkx graph)."""
    import networkx as nx
    if isinstance(g, Topology):
        g = g.networkx()
    sub = nx.Graph((a, b) for a, b, k in g.edges(data="kind") if k == "ethernet")
    for nic in g.neighbors(consumer):
        if g.nodes[nic]["node"].kind != "nic" or g.edges[nic, consumer]["kind"] != "pcie":
            continue
        if card in sub and nic in sub and nx.has_path(sub, card, nic):
            return nx.shortest_path(sub, card, nic) + [consumer]
    return None



@dataclass(frozen=True)
class Route:
    """One flow's route: node names from the generator to the consumer, and the edge kinds."""

    flow: int
    generator: str
    card: str
    consumer: str
    function: str
    nodes: tuple[str, ...]

    def edges(self) -> list[tuple[str, str]]:
        """Directed edges (a, b) in the request's direction."""
        return list(zip(self.nodes, self.nodes[1:]))


def mesh_graph(sc, g: nx.Graph) -> nx.Graph:
    """Finish and check the graph of a mesh scenario (``sc.flows`` non-empty); ``g`` holds the nodes.

    Raises :class:`Located` (file, key, value) for: a link joining kinds it cannot join, a missing
    generator/link card/consumer, a consumer without a device, a flow from a non-generator, a
    generator not next to the card, a card without a route for the flow's function, a route that
    is not generator -> link card -> (pcie) -> consumer.
    """
    from twin.runtime.functions import lookup

    for kind in ("generator", "link_card", "consumer"):
        if not any(n.place == kind for n in sc.nodes):
            raise Located(("nodes",), f"<no {kind}>", f"a mesh needs at least one {kind}")
    add_links(sc, g, mesh=True)
    for i, n in enumerate(sc.nodes):
        if n.kind == "consumer" and n.device is None:
            raise Located(("nodes", i, "device"), "<missing>",
                          "a consumer needs a device (a consumer of the parameter set)")
        if n.routes and n.kind != "link_card":
            raise Located(("nodes", i, "routes"), n.routes, "only a link card routes by function id")
        for fname, target in (n.routes or {}).items():
            try:
                lookup(fname)
            except KeyError as e:
                raise Located(("nodes", i, "routes", fname), fname, str(e).strip("'\"")) from None
            if target not in g or g.nodes[target]["node"].kind != "consumer":
                raise Located(("nodes", i, "routes", fname), target, "not a consumer node")
    import networkx as nx
    pcie = nx.Graph((a, b) for a, b, k in g.edges(data="kind") if k == "pcie")  # once: a route per flow reads it
    g.graph["routes"] = [_route(sc, g, fi, pcie) for fi in range(len(sc.flows))]
    return g


def _route(sc, g: nx.Graph, fi: int, pcie: nx.Graph) -> Route:
    """Flow ``fi``'s route over ``g`` (``pcie``: its PCIe links alone)."""
    import networkx as nx

    from twin.runtime.functions import lookup

    f = sc.flows[fi]
    where = ("flows", fi)
    if f.a not in g or g.nodes[f.a]["node"].place != "generator":
        raise Located(where + ("from",), f.a, "not a generator node")
    try:
        lookup(f.function)
    except KeyError as e:
        raise Located(where + ("function",), f.function, str(e).strip("'\"")) from None
    cards = [v for v in g.neighbors(f.a) if g.nodes[v]["node"].kind == "link_card"]
    if f.via is not None:
        if f.via not in cards:
            raise Located(where + ("via",), f.via,
                          f"not a link card joined to {f.a} (have: {', '.join(cards) or 'none'})")
        card = f.via
    elif len(cards) == 1:
        card = cards[0]
    else:
        raise Located(where + ("from",), f.a, f"joined to {len(cards)} link cards; name one with via"
                      if cards else "not joined to a link card by an on_card or aurora link")
    routes = g.nodes[card]["node"].routes or {}
    if f.function not in routes:
        raise Located(where + ("function",), f.function, f"link card {card!r} has no route for it "
                      f"(routes: {', '.join(routes) or 'none'})")
    consumer = routes[f.function]
    if card not in pcie or consumer not in pcie or not nx.has_path(pcie, card, consumer):
        raise Located(where + ("function",), f.function, f"link card {card!r} routes it to {consumer!r}, "
                      "which it does not reach over pcie")
    path = nx.shortest_path(pcie, card, consumer)
    if len(path) != 2:
        raise Located(where + ("function",), f.function, f"the route {' -> '.join(path)} has hops between the card "
                      "and the consumer; a mesh route is control -> link card -> consumer")
    return Route(fi, f.a, card, consumer, f.function, (f.a, card, consumer))




def scenario_graph(sc) -> nx.Graph:
    """The graph of scenario ``sc`` (a :class:`twin.scenario.schema.Scenario`): nodes carry their
    ``Node``, edges their kind. Without flows: one generator and one link card; each consumer on
    pcie from the card, or reached over ethernet (RoCE). With flows: a mesh (:func:`mesh_graph`,
    routes in ``graph["routes"]``). Raises :class:`Located` naming the key of the first problem."""
    import networkx as nx
    return _checked(sc, nx.Graph())


def check_topology(sc) -> Graph:
    """:func:`scenario_graph`'s checks, the same errors in the same order; a loop scenario's on a
    :class:`Topology` (networkx imported only for a consumer reached over ethernet), a mesh's on
    the networkx graph (its routes searched). Returns that graph."""
    if sc.flows:
        return scenario_graph(sc)
    return _checked(sc, Topology())


def _checked(sc, g):
    """``g`` (empty) filled with ``sc``'s nodes and links and checked (:func:`scenario_graph`)."""
    for i, n in enumerate(sc.nodes):
        if n.name in g:
            raise Located(("nodes", i, "name"), n.name, "node name used twice")
        g.add_node(n.name, node=n, index=i)
    if sc.flows:
        return mesh_graph(sc, g)
    for kind in ("generator", "link_card"):
        idx = [i for i, n in enumerate(sc.nodes) if n.place == kind]
        if not idx:
            raise Located(("nodes",), f"<no {kind}>", f"the topology needs exactly one {kind}")
        if len(idx) > 1:
            raise Located(("nodes", idx[1], "kind"), kind, f"a second {kind}; the topology needs exactly one")
    if not any(n.kind == "consumer" for n in sc.nodes):
        raise Located(("nodes",), "<no consumer>", "the topology needs at least one consumer")
    add_links(sc, g, mesh=False)
    gen = next(n.name for n in sc.nodes if n.place == "generator")
    card = next(n.name for n in sc.nodes if n.kind == "link_card")
    if not g.has_edge(gen, card):
        raise Located(("nodes", g.nodes[gen]["index"], "name"), gen,
                      f"the generator must be joined to link card {card!r} by an on_card or aurora link")
    for i, n in enumerate(sc.nodes):
        if n.kind != "consumer":
            continue
        if n.device is None:
            raise Located(("nodes", i, "device"), "<missing>",
                          "a consumer needs a device (a consumer of the parameter set)")
        if not g.has_edge(card, n.name) and roce_route(g, card, n.name) is None:
            raise Located(("nodes", i, "name"), n.name, f"not joined to link card {card!r} by a pcie link"
                          + (" or through an RDMA NIC" if any(m.kind == "nic" for m in sc.nodes) else ""))
    for i, n in enumerate(sc.nodes):
        if n.kind in ("nic", "switch", "link_card") and n.routes:
            raise Located(("nodes", i, "routes"), n.routes, "routes by function id belong to a mesh (flows)")
    return g
