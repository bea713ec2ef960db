"""``twin gen [--check]``: generate the C header, the Python dtypes and the Verilog include from
``twin/exchange/contract.yaml`` (the generator: :mod:`twin.exchange.gen`)."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def register(sub) -> None:
    """Add ``gen`` to the ``twin`` subcommands."""
    g = sub.add_parser("gen", help="generate the C header, Python dtypes and Verilog include from "
                                   "twin/exchange/contract.yaml")
    g.add_argument("--check", action="store_true", help="write nothing; exit 1 if a generated file is stale")
    g.set_defaults(handler=cmd_gen)


def cmd_gen(args: argparse.Namespace, console: Console) -> int:
    """Write the generated files, or with ``--check`` report stale ones (exit 1)."""
    from twin.exchange.gen import main as gen_main
    return gen_main(["--check"] if args.check else [])
