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
    from twin.exchange.gen import OUTPUTS, generate, rel, stale
    if args.check:
        bad = stale()
        for p in bad:
            print(f"stale: {rel(p)} (run `twin gen`)")
        return 1 if bad else 0
    from twin.output.files import write_file
    for key, text in generate().items():
        write_file(OUTPUTS[key], text)  # whole or not at all: a generated file is never torn
        print(f"wrote {rel(OUTPUTS[key])}")
    return 0
