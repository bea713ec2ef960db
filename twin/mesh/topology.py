"""Topologies with several control systems, link cards and consumers: validation, routes, drawing.

A mesh scenario has ``flows``: each flow leaves a generator (a control system), enters a link card
next to it (``via`` when there are several) and is routed by the card to a consumer by function id
(the card's ``routes``: function name -> consumer node). The route is computed on the graph
(:func:`networkx.shortest_path` from the card to the consumer over pcie links), so two flows whose
routes share an edge share that link (its wire serialises both) and two flows routed to one
consumer share it (one thread serves both queues).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from twin.config import Located


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
    from twin.scenario import check_link_ends

    for kind in ("generator", "link_card", "consumer"):
        if not any(n.kind == kind for n in sc.nodes):
            raise Located(("nodes",), f"<no {kind}>", f"a mesh needs at least one {kind}")
    for j, link in enumerate(sc.links):
        for key, end in (("from", link.a), ("to", link.b)):
            if end not in g:
                raise Located(("links", j, key), end, "no node of that name")
        if g.has_edge(link.a, link.b):
            raise Located(("links", j, "to"), link.b, f"a second link between {link.a} and {link.b}")
        if link.kind == "ethernet":
            raise Located(("links", j, "kind"), link.kind, "RoCE (ethernet) routes are modelled one loop at a time, "
                          "not in a mesh (no flows)")
        check_link_ends(g, link, j)
        g.add_edge(link.a, link.b, kind=link.kind, index=j)
    for i, n in enumerate(sc.nodes):
        if n.kind == "consumer" and n.device is None:
            raise Located(("nodes", i, "device"), "<missing>", "a consumer needs a device (a consumer of the parameter set)")
        if n.routes and n.kind != "link_card":
            raise Located(("nodes", i, "routes"), n.routes, "only a link card routes by function id")
        for fname, target in (n.routes or {}).items():
            try:
                lookup(fname)
            except KeyError as e:
                raise Located(("nodes", i, "routes", fname), fname, str(e).strip("'\"")) from None
            if target not in g or g.nodes[target]["node"].kind != "consumer":
                raise Located(("nodes", i, "routes", fname), target, "not a consumer node")
    g.graph["routes"] = [_route(sc, g, fi) for fi in range(len(sc.flows))]
    return g


def _route(sc, g: nx.Graph, fi: int) -> Route:
    from twin.runtime.functions import lookup

    f = sc.flows[fi]
    where = ("flows", fi)
    if f.a not in g or g.nodes[f.a]["node"].kind != "generator":
        raise Located(where + ("from",), f.a, "not a generator node")
    try:
        lookup(f.function)
    except KeyError as e:
        raise Located(where + ("function",), f.function, str(e).strip("'\"")) from None
    cards = [v for v in g.neighbors(f.a) if g.nodes[v]["node"].kind == "link_card"]
    if f.via is not None:
        if f.via not in cards:
            raise Located(where + ("via",), f.via, f"not a link card joined to {f.a} (have: {', '.join(cards) or 'none'})")
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
    pcie = nx.Graph((a, b) for a, b, k in g.edges(data="kind") if k == "pcie")
    if card not in pcie or consumer not in pcie or not nx.has_path(pcie, card, consumer):
        raise Located(where + ("function",), f.function, f"link card {card!r} routes it to {consumer!r}, "
                      "which it does not reach over pcie")
    path = nx.shortest_path(pcie, card, consumer)
    if len(path) != 2:
        raise Located(where + ("function",), f.function, f"the route {' -> '.join(path)} has hops between the card "
                      "and the consumer; a mesh route is control -> link card -> consumer")
    return Route(fi, f.a, card, consumer, f.function, (f.a, card, consumer))


def draw(sc, path: Path) -> None:
    """Draw the scenario's graph to exactly ``path`` (its suffix picks png, pdf or svg; none: png):
    nodes coloured by kind, edges labelled by link kind, and for a mesh each flow's route as a
    coloured arrow path. Raises OSError if it cannot write."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = sc.graph()
    layers = {"generator": 0, "link_card": 1, "switch": 2, "nic": 3, "consumer": 4}
    for v in g.nodes:
        g.nodes[v]["layer"] = layers[g.nodes[v]["node"].kind]
    pos = nx.multipartite_layout(g, subset_key="layer")
    colours = {"generator": "#7a4fb0", "link_card": "#3b6ea8", "switch": "#888888", "nic": "#50a0a0",
               "consumer": "#c06030"}
    fig, ax = plt.subplots(figsize=(9, 5.5))
    ax.margins(0.12)
    nx.draw_networkx_edges(g, pos, ax=ax, edge_color="#bbbbbb", width=2)
    nx.draw_networkx_edge_labels(g, pos, ax=ax, font_size=7,
                                 edge_labels={(a, b): k for a, b, k in g.edges(data="kind")})
    for i, r in enumerate(g.graph.get("routes", [])):
        nx.draw_networkx_edges(nx.DiGraph(r.edges()), pos, ax=ax, edge_color=f"C{i % 10}", width=1.2,
                               arrows=True, arrowstyle="-|>", connectionstyle=f"arc3,rad={0.08 * (i + 1)}",
                               label=f"flow {i}: {r.generator} {r.function} -> {r.consumer}")
    for kind, col in colours.items():
        nodes = [v for v in g.nodes if g.nodes[v]["node"].kind == kind]
        nx.draw_networkx_nodes(g, pos, nodelist=nodes, node_color=col, node_size=1300, ax=ax, label=kind)
    labels = {v: v + (f"\n{d}" if (d := g.nodes[v]["node"].device) and d != v else "") for v in g.nodes}
    flows = [f"flow {r.flow} ({r.function}): {' -> '.join(r.nodes)}" for r in g.graph.get("routes", [])]
    for i, text in enumerate(flows):
        ax.text(0.0, 1.0 - 0.045 * i, text, transform=ax.transAxes, ha="left", va="top", fontsize=7,
                color=f"C{i % 10}")
    nx.draw_networkx_labels(g, pos, labels=labels, font_size=7, font_color="white", ax=ax)
    ax.set_title(f"{sc.name}: topology", fontsize=10)
    ax.legend(fontsize=7, loc="lower left", markerscale=0.4)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110, format=Path(path).suffix.lower().lstrip(".") or "png")
    plt.close(fig)
