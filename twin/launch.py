"""The ``twin`` program's first instructions: SIGINT and SIGTERM handled before anything heavy loads.

The console script (``[project.scripts]`` in pyproject.toml) and ``python -m twin``
(``twin/__main__.py``) both call :func:`main`, whose first instruction installs :func:`_starting`
for SIGINT and SIGTERM; only then are the commands imported (:func:`twin.commands.main`). A signal
before a command installs its own handlers (:mod:`twin.commands.interrupt`: a run stops at a round
boundary and keeps its rounds) ends the program with one line on stderr and exit :data:`EXIT`: no
traceback from inside an import, no silent SIGTERM death. The commands restore this handler when
they end. A signal the parent set to be ignored (``nohup``, a background job of a shell without job
control) stays ignored.

The cyclic garbage collector is off while the program starts (:func:`main` turns it off first): the
imports and the scenario's loading make some 50,000 long-lived objects, and the collections they
would trigger walk them again and again (about 0.09 CPU-s of a short ``twin run``, 2026-12-03, on a
2-core VM). :func:`started` ends the start-up: the objects made so far are frozen (:func:`gc.freeze`,
kept out of every later collection: the documented disable, freeze, enable sequence) and the
collector is on again; :func:`twin.commands.main` calls it before a command runs, ``twin run`` once
its scenario is loaded. When the command returns, the objects are frozen again: the process ends
next, and the exit's collections would otherwise walk them all (0.08-0.13 CPU-s); objects are still
freed, files flushed and ``atexit`` handlers run as before. Only :func:`main` touches the collector:
a program that runs the commands in-process (:func:`twin.commands.main`) keeps its own settings.

This module imports only the standard library's ``gc``, ``os``, ``signal`` and ``sys`` (a library
user who imports :mod:`twin` gets no handler: only :func:`main` installs it).
"""
from __future__ import annotations

import gc
import os
import signal
import sys

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


_collector_off = False  # main turned the collector off for the start-up, until started()


def started() -> None:
    """The start-up is over: freeze the objects made so far and turn the cyclic collector on again,
    where :func:`main` turned it off (else nothing)."""
    global _collector_off
    if _collector_off:
        _collector_off = False
        gc.freeze()
        gc.enable()


def main(argv: list[str] | None = None) -> int:
    """The ``twin`` program: :func:`install` and the collector off for the start-up, then
    :func:`twin.commands.main` (its exit status); the collector's objects frozen after it (module
    docstring: the process ends next)."""
    global _collector_off
    install()
    if gc.isenabled():
        gc.disable()
        _collector_off = True
    try:
        from twin.commands import main as run
        return run(argv)
    finally:
        started()
        gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
