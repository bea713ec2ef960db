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
import importlib
import os
import select
import signal
import sys

from twin import __version__
from twin.commands.common import UsageError
from twin.output.files import OutputError

COMMANDS = ("run", "calibrate", "validate", "gen", "decode", "machine", "hosting", "topology", "sweep", "scenarios",
            "components")
"""The commands in ``twin --help`` order, each the module ``twin.commands.<name>`` with ``register(sub)``."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose usage error stays on one line whatever the user typed (the
    subcommands' parsers are of this class too: argparse makes them of their parent's)."""

    def error(self, message: str):
        super().error(one_line(message))


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser for ``twin``. Every command's own parser, or, when ``argv`` (the arguments
    to be parsed) starts with a command's name, only that command's (its module alone imported; the
    others stand as bare names, which is all a parse of that command reads of them: their order
    and names make the usage line)."""
    p = _Parser(prog="twin", description="Digital twin of the real-time QEC loop.")
    p.add_argument("--version", action="version", version=f"twin {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    only = argv[0] if argv and argv[0] in COMMANDS else None
    for name in COMMANDS:
        if only is None or name == only:
            importlib.import_module(f"twin.commands.{name}").register(sub)
        else:
            sub.add_parser(name)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (2 for bad input, with one line on stderr; 130 after Ctrl-C,
    one line)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    args.argv = ["twin", *argv]  # recorded in a run folder's manifest.json
    from twin.output.table import make_console
    console = make_console(getattr(args, "table", "text"))  # piped: COLUMNS, else 120 wide; tables fold, never cut
    from contextlib import nullcontext

    from twin.commands.interrupt import stops_at_once
    from twin.config.trust import allow, announcing
    from twin.startup import started
    try:
        allow(getattr(args, "allow_code", None) or [])
    except ValueError as e:
        return _error(str(e))
    if not getattr(args, "starts_itself", False):  # twin run ends its start-up itself, once its scenario is loaded
        started()
    try:  # run, decode and sweep stop at a round boundary instead (their own handlers: interruptible)
        with nullcontext() if getattr(args, "stops_at_a_round", False) else stops_at_once(), announcing():
            return args.handler(args, console)
    except (UsageError, OutputError) as e:  # OutputError: cannot write PATH: reason (the previous file is intact)
        return _error(str(e))
    except BrokenPipeError as e:  # `twin scenarios | head -1`: the reader of our output left; end quietly
        if not _stdout_gone():
            return _error(_one_line_error(e))
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush must not fail again
        return 128 + signal.SIGPIPE
    except _loaded("twin.engine.stop", "Interrupted"):  # a stop taken by an engine inside a fit or a check
        print("twin: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        line = _one_line_error(e)
        if line is None:
            raise
        return _error(line)
    except KeyboardInterrupt:  # Ctrl-C in a command without a round boundary to stop at (run, decode and
        print("twin: interrupted", file=sys.stderr)  # sweep stop at one: twin.commands.interrupt)
        return 130


def _stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (poll reports an error on it)."""
    try:
        p = select.poll()
        p.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in p.poll(0))
    except (OSError, ValueError, AttributeError):  # no fileno (captured output), no poll on this platform
        return False


def _loaded(module: str, name: str) -> type:
    """Class ``name`` of ``module`` if that module is imported (an exception it defines can only
    have been raised if it is), else a class nothing is an instance of. Keeps ``twin --help`` and
    the parser from importing the engine, pydantic or the RTL builder. (An Exception subclass, so
    that an ``except`` clause may name it.)"""
    return getattr(sys.modules.get(module), name, None) or type("_NotLoaded", (Exception,), {})


def _one_line_error(e: Exception) -> str | None:
    """The one line for an error the user can act on, ``None`` for a bug (it propagates)."""
    if isinstance(e, _loaded("twin.rtl.build", "RtlError")):
        return f"model rtl: {e}"
    if isinstance(e, _loaded("twin.config.errors", "ConfigError")):
        return str(e)
    if isinstance(e, _loaded("twin.engine.direct", "DirectNotApplicable")):
        return f"--engine direct: {e}; use --engine auto or event"
    if isinstance(e, OSError):
        return (f"{e.filename}: " if e.filename else "") + str(e.strerror or e)
    return None


def _error(text: str, code: int = 2) -> int:
    """Print ``twin: error: TEXT`` as one line and return ``code``: a character that is not
    printable inside a value the user gave (a file name with a newline, a form feed, U+2028, ...)
    is shown escaped, as Python writes it (``\\n``, ``\\x1e``), never as a line break."""
    print("twin: error: " + one_line(text), file=sys.stderr)
    return code


def one_line(text: str) -> str:
    """``text`` with every non-printable character escaped (``repr`` style); spaces kept; a word
    (a path, name or value it quotes) longer than a key may be cut as a key is
    (:func:`twin.config.errors.cut_words`)."""
    from twin.config.errors import cut_words
    return cut_words("".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text))

__all__ = ["build_parser", "main", "COMMANDS"]
