"""``twin components [KIND] [--format text|markdown|json]``: the declared node and wire kinds.

Each kind's parameters (unit, default, source), ports, statistics and registered models with what
they support (:mod:`twin.nodes.listing`; the declarations are in :mod:`twin.nodes.kinds`).
"""
from __future__ import annotations

import argparse
import sys

from twin.commands.common import UsageError
from twin.nodes.declare import LISTING_FORMATS as FORMATS  # light: the declarations load on first use


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``components`` to the ``twin`` subcommands (it sets ``handler``)."""
    p = subparsers.add_parser("components", help="list the node kinds: parameters (unit, default, source), "
                                                 "ports, statistics and registered models")
    p.add_argument("kind", nargs="?", help="one kind only (e.g. link_card, consumer, pcie)")
    p.add_argument("--format", choices=FORMATS, default="text", help="text (default), markdown (docs/components.md) "
                                                                     "or json")
    p.set_defaults(handler=cmd_components)
    return p


def cmd_components(args: argparse.Namespace, console=None) -> int:
    """Print the listing on stdout (exactly, without console markup); an unknown kind: one line on
    stderr naming it and the known kinds, exit 2."""
    from twin.nodes.listing import render

    try:
        text = render(args.kind, args.format)
    except KeyError as e:  # one line (twin.commands.main), exit 2
        raise UsageError(e.args[0]) from None
    sys.stdout.write(text)
    return 0
