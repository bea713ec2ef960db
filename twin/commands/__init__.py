"""The ``twin`` command line: one module per command, each with ``register(sub)`` (its parser, whose
``handler`` default is the command function) and the command itself.

``twin run`` (:mod:`.run`), ``decode`` (:mod:`.decode`), ``hosting`` (:mod:`.hosting`), ``calibrate``
(:mod:`.calibrate`), ``gen`` (:mod:`.gen`), ``topology`` (:mod:`.topology`), ``sweep``
(:mod:`.sweep`), ``scenarios`` (:mod:`.scenarios`), ``components`` (:mod:`.components`); shared helpers in
:mod:`.common`. Commands import
the library; the library never imports the commands (what library code needs of them lives in
:mod:`twin.usage` and :mod:`twin.bundled`). ``python -m twin`` and the ``twin`` script both call
:func:`main`.
"""
from __future__ import annotations

import argparse
import sys

from rich.console import Console

from twin import __version__
from twin.commands import calibrate, components, decode, gen, hosting, run, scenarios, sweep, topology
from twin.commands.common import UsageError
from twin.config import ConfigError
from twin.engine.direct import DirectNotApplicable
from twin.rtl.build import RtlError

COMMANDS = (run, calibrate, gen, decode, hosting, topology, sweep, scenarios, components)  # `twin --help` order


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for ``twin``."""
    p = argparse.ArgumentParser(prog="twin", description="Digital twin of the real-time QEC loop.")
    p.add_argument("--version", action="version", version=f"twin {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (2 for bad input, with one line on stderr; 130 after Ctrl-C,
    one line)."""
    args = build_parser().parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=120)
    try:
        return args.handler(args, console)
    except RtlError as e:
        print(f"twin: error: model rtl: {e}", file=sys.stderr)
        return 2
    except (ConfigError, UsageError) as e:
        print(f"twin: error: {e}", file=sys.stderr)
        return 2
    except DirectNotApplicable as e:
        print(f"twin: error: --engine direct: {e}; use --engine auto or event", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"twin: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C in a command without a round boundary to stop at (run, decode and
        print("twin: interrupted", file=sys.stderr)  # sweep stop at one: twin.commands.interrupt)
        return 130


__all__ = ["build_parser", "main", "COMMANDS"]
