"""The figure of a scenario's topology: nodes by kind, links by kind, a mesh's flow routes."""
from __future__ import annotations

import re
from pathlib import Path

import networkx as nx

from twin.output.files import savefig_writer, write_file

LABEL_CHARS = 12
"""A node label's line is at most about this many characters (:func:`wrap_label`)."""


def wrap_label(text: str, width: int = LABEL_CHARS) -> str:
    """``text`` (a node or device name) on lines of at most ``width`` characters where it can break:
    after ``_``, ``-``, ``.`` or a space (``threadripper_core`` -> ``threadripper_`` / ``core``); a
    part longer than ``width`` with no such break stays whole. Nothing is cut."""
    parts = [p for p in re.split(r"(?<=[_\-. ])", text) if p]
    lines: list[str] = []
    for p in parts:
        if lines and len(lines[-1]) + len(p) <= width:
            lines[-1] += p
        else:
            lines.append(p)
    return "\n".join(line.rstrip() for line in lines)


def draw(sc, path: Path) -> None:
    """Draw the scenario's graph to exactly ``path`` (its suffix picks png, pdf or svg; none: png):
    nodes coloured by kind, edges labelled by link kind, and for a mesh each flow's route as a
    coloured arrow path. Written whole or not at all (:func:`twin.output.files.write_file`); raises
    its OutputError if it cannot write."""
    fig = figure(sc)
    write_file(path, savefig_writer(fig, Path(path).suffix.lower().lstrip(".") or "png"))


def figure(sc):
    """The topology figure of scenario ``sc`` (a matplotlib figure, :func:`draw`): each node's name
    (and its device, where it differs) under its disc in dark text, wrapped (:func:`wrap_label`), the
    whole drawing (labels included) inside the figure."""
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
    labels = {v: wrap_label(v) + (f"\n({wrap_label(d)})" if (d := g.nodes[v]["node"].device) and d != v else "")
              for v in g.nodes}
    flows = [f"flow {r.flow} ({r.function}): {' -> '.join(r.nodes)}" for r in g.graph.get("routes", [])]
    for i, text in enumerate(flows):
        ax.text(0.0, 1.0 - 0.045 * i, text, transform=ax.transAxes, ha="left", va="top", fontsize=7,
                color=f"C{i % 10}")
    for v, text in labels.items():  # under the disc (about 20 points in radius at node_size 1300)
        ax.annotate(text, pos[v], xytext=(0, -22), textcoords="offset points", ha="center", va="top", fontsize=7,
                    color="#222222")
    ax.set_title(f"{sc.name}: topology", fontsize=10)
    ax.legend(fontsize=7, loc="lower left", markerscale=0.4)
    ax.axis("off")
    ax.margins(0.15, 0.22)
    fig.tight_layout()
    return fig
