"""``twin topology SCENARIO``: draw a scenario's graph (nodes by kind, links by kind, each mesh
flow's route) to a PNG, PDF or SVG (the drawing itself: :func:`twin.output.topology_figure.draw`)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from twin.commands.common import UsageError, _file_name, add_figure_format, add_overwrite, check_out_folder
from twin.output.files import check_file

if TYPE_CHECKING:
    from rich.console import Console


def register(sub) -> None:
    """Add the ``topology`` subcommand to the ``twin`` parser's subparsers."""
    t = sub.add_parser("topology", help="draw a scenario's topology (and a mesh's routes) to a PNG")
    t.add_argument("scenario", type=_file_name, help="scenario YAML")
    t.add_argument("--out", help="image to write: a .png, .pdf or .svg file, or a folder to write "
                                 "topology.png in (default runs/<scenario name>/topology.png; "
                                 "--figure-format pdf: topology.pdf)")
    add_figure_format(t, "topology; default: --out's suffix, else png", default=None)
    add_overwrite(t, "the image at --out if one is there")
    t.set_defaults(handler=cmd_topology)


FORMATS = (".png", ".pdf", ".svg")


def out_path(value: str | None, name: str, fmt: str | None = None) -> Path:
    """The file ``twin topology --out VALUE --figure-format FMT`` writes: ``runs/NAME/topology.FMT``
    by default, ``VALUE/topology.FMT`` for an existing folder (FMT None: png), else ``VALUE`` itself,
    which must end in .png, .pdf or .svg (and in ``.FMT`` when FMT is given). Raises
    :class:`twin.usage.UsageError` naming ``--out`` and the value."""
    file = f"topology.{fmt or 'png'}"
    if not value:
        return Path("runs") / name / file
    out = Path(value)
    if out.is_dir():
        return out / file
    if out.suffix.lower() not in FORMATS:
        raise UsageError(f"--out {value}: name a .png, .pdf or .svg file, or an existing folder "
                         f"(got {'no extension' if not out.suffix else repr(out.suffix)})")
    if fmt and out.suffix.lower() != "." + fmt:
        raise UsageError(f"--out {value}: a {out.suffix.lower()} file, while --figure-format says {fmt}: "
                         "give one of the two, or both alike")
    return out


def cmd_topology(args: argparse.Namespace, console: Console) -> int:
    """Load the scenario (errors name file, key, value), draw it, print the file written. Returns 0;
    raises :class:`twin.usage.UsageError` for an ``--out`` that cannot be written or is there (without
    ``--overwrite``), :class:`twin.output.files.OutputError` for a write that failed."""
    from twin.output.topology_figure import draw
    from twin.scenario import load_scenario

    loaded = load_scenario(Path(args.scenario))
    sc = loaded.scenario
    out = out_path(args.out, sc.name, getattr(args, "figure_format", None))
    check_out_folder(out.parent, shown=args.out or out)
    check_file(out, args.overwrite, "--out")
    draw(sc, out)
    g = sc.graph()
    console.print(f"{sc.name}: {g.number_of_nodes()} nodes, {g.number_of_edges()} links"
                  + (f", {len(sc.flows)} flows" if sc.flows else ""))
    for r in g.graph.get("routes", []):
        console.print(f"  flow {r.flow}: {' -> '.join(r.nodes)} ({r.function})")
    console.print(f"wrote {out}")
    return 0
