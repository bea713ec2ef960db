"""``twin topology SCENARIO``: draw a scenario's graph (nodes by kind, links by kind, each mesh
flow's route) to a PNG."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console


def register(sub) -> None:
    """Add the ``topology`` subcommand to the ``twin`` parser's subparsers."""
    t = sub.add_parser("topology", help="draw a scenario's topology (and a mesh's routes) to a PNG")
    t.add_argument("scenario", help="scenario YAML")
    t.add_argument("--out", help="PNG to write (default runs/<scenario name>/topology.png)")


def cmd_topology(args: argparse.Namespace, console: Console) -> int:
    """Load the scenario (errors name file, key, value), draw it, print where. Returns 0."""
    from twin.mesh.topology import draw
    from twin.scenario import load_scenario

    loaded = load_scenario(Path(args.scenario))
    sc = loaded.scenario
    out = Path(args.out) if args.out else Path("runs") / sc.name / "topology.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    draw(sc, out)
    g = sc.graph()
    console.print(f"{sc.name}: {g.number_of_nodes()} nodes, {g.number_of_edges()} links"
                  + (f", {len(sc.flows)} flows" if sc.flows else ""))
    for r in g.graph.get("routes", []):
        console.print(f"  flow {r.flow}: {' -> '.join(r.nodes)} ({r.function})")
    console.print(f"wrote {out}")
    return 0
