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
from twin.output.files import OutputError
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
    """Entry point; returns the exit code (2 for bad input, with one line on stderr)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = ["twin", *argv]  # recorded in a run folder's manifest.json
    console = Console() if sys.stdout.isatty() else Console(width=120)
    try:
        return args.handler(args, console)
    except RtlError as e:
        return _error(f"model rtl: {e}")
    except (ConfigError, UsageError) as e:
        return _error(str(e))
    except DirectNotApplicable as e:
        return _error(f"--engine direct: {e}; use --engine auto or event")
    except OutputError as e:  # cannot write PATH: reason (the previous file, if any, is intact)
        return _error(str(e))
    except OSError as e:
        return _error((f"{e.filename}: " if e.filename else "") + str(e.strerror or e))


def _error(text: str, code: int = 2) -> int:
    """Print ``twin: error: TEXT`` as one line (a newline inside a value the user gave, a file
    name say, is shown as ``\\n``) and return ``code``."""
    print("twin: error: " + text.replace("\r", "\\r").replace("\n", "\\n"), file=sys.stderr)
    return code

__all__ = ["build_parser", "main", "COMMANDS"]
