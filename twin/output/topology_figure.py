"""The figure of a scenario's topology: nodes by kind, links by kind, a mesh's flow routes."""
from __future__ import annotations

from pathlib import Path

import networkx as nx

from twin.output.files import savefig_writer, write_file


def draw(sc, path: Path) -> None:
    """Draw the scenario's graph to exactly ``path`` (its suffix picks png, pdf or svg; none: png):
    nodes coloured by kind, edges labelled by link kind, and for a mesh each flow's route as a
    coloured arrow path. Written whole or not at all (:func:`twin.output.files.write_file`); raises
    its OutputError if it cannot write."""
    import matplotlib
    matplotlib.use("Agg")  # networkx's drawing imports pyplot: never a window's backend

    from twin.output.figure import new_figure
    g = sc.graph()
    layers = {"generator": 0, "link_card": 1, "switch": 2, "nic": 3, "consumer": 4}
    for v in g.nodes:
        g.nodes[v]["layer"] = layers[g.nodes[v]["node"].place]
    pos = nx.multipartite_layout(g, subset_key="layer")
    colours = {"generator": "#7a4fb0", "link_card": "#3b6ea8", "switch": "#888888", "nic": "#50a0a0",
               "consumer": "#c06030"}
    fig = new_figure(9, 5.5)
    ax = fig.subplots()
    ax.margins(0.12)
    nx.draw_networkx_edges(g, pos, ax=ax, edge_color="#bbbbbb", width=2)
    nx.draw_networkx_edge_labels(g, pos, ax=ax, font_size=7,
                                 edge_labels={(a, b): k for a, b, k in g.edges(data="kind")})
    for i, r in enumerate(g.graph.get("routes", [])):
        nx.draw_networkx_edges(nx.DiGraph(r.edges()), pos, ax=ax, edge_color=f"C{i % 10}", width=1.2,
                               arrows=True, arrowstyle="-|>", connectionstyle=f"arc3,rad={0.08 * (i + 1)}",
                               label=f"flow {i}: {r.generator} {r.function} -> {r.consumer}")
    for kind, col in colours.items():
        nodes = [v for v in g.nodes if g.nodes[v]["node"].place == kind]
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
    write_file(path, savefig_writer(fig, Path(path).suffix.lower().lstrip(".") or "png"))
