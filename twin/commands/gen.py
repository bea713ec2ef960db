"""``twin gen [--check]``: generate the files written from one source each: the C header, the
Python dtypes and the Verilog include from ``twin/exchange/contract.yaml`` (:mod:`twin.exchange.gen`),
the compiled core's C header and Python tables from ``twin/engine/core_interface.yaml``
(:mod:`twin.engine.gen_core`), the lookup decoders' C tables (:mod:`twin.qec.gen_lookup`) and the
union-find decoder's C graph (:mod:`twin.qec.gen_uf`).

The generated files are part of the source checkout: outside one (an installed wheel, whose files lie
in site-packages) ``twin gen`` refuses to write, with one line; ``--check`` reads only and runs anywhere."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def register(sub) -> None:
    """Add ``gen`` to the ``twin`` subcommands."""
    g = sub.add_parser("gen", help="generate the C header, Python dtypes and Verilog include from "
                                   "twin/exchange/contract.yaml, and the compiled core's index tables from "
                                   "twin/engine/core_interface.yaml (in a source checkout only)")
    g.add_argument("--check", action="store_true", help="write nothing; exit 1 if a generated file is stale")
    g.set_defaults(handler=cmd_gen)


def _generators():
    """Each generator module (``generate()``, ``stale()``, ``OUTPUTS``), in the order they are written."""
    from twin.engine import gen_core
    from twin.exchange import gen
    from twin.qec import gen_lookup, gen_uf
    return (gen, gen_core, gen_lookup, gen_uf)


def cmd_gen(args: argparse.Namespace, console: Console) -> int:
    """Write the generated files, or with ``--check`` report stale ones (exit 1)."""
    from twin.exchange.gen import rel
    if args.check:
        bad = [p for g in _generators() for p in g.stale()]
        for p in bad:
            print(f"stale: {rel(p)} (run `twin gen`)")
        return 1 if bad else 0
    from twin import bundled
    if not bundled.in_checkout():  # a wheel: the files are the installer's, in site-packages
        from twin.usage import UsageError
        raise UsageError(f"gen: the generated files are part of the source checkout, not of an installed "
                         f"package ({bundled.PACKAGE}); run `twin gen` in a clone of the repository")
    from twin.output.files import write_file
    for g in _generators():
        for key, text in g.generate().items():
            write_file(g.OUTPUTS[key], text)  # whole or not at all: a generated file is never torn
            print(f"wrote {rel(g.OUTPUTS[key])}")
    return 0
