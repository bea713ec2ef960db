"""Ctrl-C and SIGTERM in the long commands (``twin run``, ``twin decode``, ``twin sweep``).

Inside :func:`interruptible`, the first SIGINT or SIGTERM only asks the engine to stop
(:func:`twin.engine.stop.request_stop`): it stops at its next round boundary and raises
:class:`twin.engine.stop.Interrupted` with the whole rounds so far, which the command writes
(results marked ``"partial": true``) before it prints :func:`twin.usage.interrupted_line` and exits with
:data:`EXIT`. A second signal ends the command at once: one line on stderr, exit :data:`EXIT`
(a :class:`SystemExit`, so open live sessions are still closed on the way out), no traceback.
"""
from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass

from twin.usage import INTERRUPTED_EXIT as EXIT
from twin.usage import interrupted_before_any, interrupted_line


@dataclass
class Signals:
    """What :func:`interruptible` has seen: ``count`` signals, the first one's ``name``."""

    count: int = 0
    name: str = ""


@contextmanager
def _handling(handler):
    """``handler`` for SIGINT and SIGTERM during the block, the previous handlers restored after it.
    Yields whether it installed them: not outside the main thread, where Python cannot set them."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield True
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextmanager
def interruptible():
    """Install the SIGINT/SIGTERM handlers for the block (see the module docstring) and restore the
    previous ones after it; yields the :class:`Signals` seen. A stop request nobody took (the run
    ended first) is forgotten on the way out. Outside the main thread (where Python cannot set
    handlers) it installs nothing."""
    from twin.engine.stop import clear_stop, request_stop  # the engine loads with the command, not the parser

    seen = Signals()

    def handler(signum, frame):
        seen.count += 1
        if seen.count == 1:
            seen.name = signal.Signals(signum).name
            request_stop()
            return
        print(f"twin: interrupted again ({signal.Signals(signum).name}): stopped at once; nothing more is saved",
              file=sys.stderr, flush=True)
        raise SystemExit(EXIT)

    with _handling(handler) as installed:
        try:
            yield seen
        finally:
            if installed:
                clear_stop()


@contextmanager
def stops_at_once():
    """Ctrl-C and SIGTERM for a command without rounds to keep (``twin calibrate``, ``hosting``,
    ``validate``...): the signal raises :class:`KeyboardInterrupt` at once and also asks any engine
    running inside the command to stop (:func:`twin.engine.stop.request_stop`), so a signal whose
    KeyboardInterrupt a library swallows (one raised inside a finaliser is only printed) still ends
    the command at the engine's next check (:class:`twin.engine.stop.Interrupted`). The command
    line prints one line and exits :data:`EXIT` either way. Restores the previous handlers after
    the block; outside the main thread it installs nothing."""
    def engine_stop():  # only an engine already imported can be running (light commands never load it)
        return sys.modules.get("twin.engine.stop")

    def handler(signum, frame):
        if engine_stop() is not None:
            engine_stop().request_stop()
        raise KeyboardInterrupt

    with _handling(handler) as installed:
        try:
            yield
        finally:
            if installed and engine_stop() is not None:
                engine_stop().clear_stop()


def __getattr__(name: str):
    """``Interrupted`` (:class:`twin.engine.stop.Interrupted`), imported on first use: importing the
    commands (``twin --help``) does not load the engine."""
    if name == "Interrupted":
        from twin.engine.stop import Interrupted
        return Interrupted
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["EXIT", "Signals", "interruptible", "stops_at_once", "interrupted_line", "interrupted_before_any"]
