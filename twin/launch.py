"""The ``twin`` program's first instructions: SIGINT and SIGTERM handled before anything heavy loads.

The console script (``[project.scripts]`` in pyproject.toml) and ``python -m twin``
(``twin/__main__.py``) both call :func:`main`, whose first instruction installs :func:`_starting`
for SIGINT and SIGTERM; only then are the commands imported (:func:`twin.commands.main`). A signal
before a command installs its own handlers (:mod:`twin.commands.interrupt`: a run stops at a round
boundary and keeps its rounds) ends the program with one line on stderr and exit :data:`EXIT`: no
traceback from inside an import, no silent SIGTERM death. The commands restore this handler when
they end. A signal the parent set to be ignored (``nohup``, a background job of a shell without job
control) stays ignored.

The cyclic garbage collector is off while the program starts (:mod:`twin.startup`: :func:`main`
turns it off first, the commands on again once their start-up is done, every object frozen before
the exit).

This module imports only the standard library's ``os``, ``signal`` and ``sys``, and
:mod:`twin.startup` (``gc`` alone) (a library user who imports :mod:`twin` gets no handler: only
:func:`main` installs it).
"""
from __future__ import annotations

import os
import signal
import sys

from twin import startup

EXIT = 130
"""Exit status after a signal: 128 + SIGINT, as :data:`twin.usage.INTERRUPTED_EXIT` (also for SIGTERM)."""

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _starting(signum: int, frame) -> None:
    """SIGINT/SIGTERM outside a command's own handling: one line (written straight to the file
    descriptor: a handler may run inside a ``print``) and :class:`SystemExit` (``EXIT``), which ends
    an import under way as well, without a traceback."""
    try:
        os.write(2, f"twin: interrupted ({signal.Signals(signum).name})\n".encode())
    except OSError:
        pass
    raise SystemExit(EXIT)


def install() -> None:
    """Handle SIGINT and SIGTERM with :func:`_starting`, unless the signal is ignored (``SIG_IGN``
    from the parent). Main thread only (Python's rule for handlers)."""
    for s in SIGNALS:
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, _starting)


def main(argv: list[str] | None = None) -> int:
    """The ``twin`` program: :func:`install` and the collector off for the start-up, then
    :func:`twin.commands.main` (its exit status); the collector's objects frozen after it (module
    docstring: the process ends next)."""
    install()
    startup.begin()
    try:
        from twin.commands import main as run
        return run(argv)
    finally:
        startup.ending()


if __name__ == "__main__":
    sys.exit(main())
