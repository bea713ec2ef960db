"""Stopping a run early, at a round boundary (Ctrl-C, SIGTERM).

The engines never look at signals. A signal handler (``twin.commands.interrupt``) calls
:func:`request_stop`; the engines call :func:`take_stop` between batches of rounds (the direct
engine every ``chunk_rounds`` rounds, the event engine every :data:`CHECK_REPLIES` replies: no
check inside a round's arithmetic) and, when it says yes, raise :class:`Interrupted` carrying the
whole rounds computed so far. Taking the request clears it, so what runs after the stop (the
summaries, a ``live`` node's simulated side-by-side) runs to its end; a stop asked for during that
work waits (:func:`deferred`).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from twin.picklable import Picklable

if TYPE_CHECKING:
    from twin.engine.spec import LoopResult

CHECK_REPLIES = 256
"""The event engine looks for a stop request every this many replies (all flows): a few hundred
rounds of a loop, well under a second even for a Verilated (``rtl``) node."""

_requested = threading.Event()
_deferred = [0]  # depth of the deferred() blocks under way


def request_stop() -> None:
    """Ask the running engine to stop at its next check (safe to call from a signal handler)."""
    _requested.set()


def stop_requested() -> bool:
    """Whether a stop was asked for and no engine has taken it yet (False inside :func:`deferred`)."""
    return _requested.is_set() and not _deferred[0]


def take_stop() -> bool:
    """True (and the request cleared) when a stop was asked for; False otherwise, and inside
    :func:`deferred`."""
    if _requested.is_set() and not _deferred[0]:
        _requested.clear()
        return True
    return False


@contextmanager
def deferred():
    """A block whose engines run to their end: inside it no engine sees a stop request (one made
    before or during it stays, for the next check after it). For the work that follows the rounds
    kept, which a stop must not cut: a study's summaries of a loop already ended (a live node's
    simulated side-by-side runs a loop of its own)."""
    _deferred[0] += 1
    try:
        yield
    finally:
        _deferred[0] -= 1


def clear_stop() -> None:
    """Forget a stop request nobody took (the run ended first)."""
    _requested.clear()


class Interrupted(Picklable, RuntimeError):
    """A run stopped early because it was asked to (:func:`request_stop`).

    ``partial``: the :class:`twin.engine.spec.LoopResult` of the whole rounds completed (its first
    ``len(partial.t_in)`` rounds), set by the engine that stopped; ``results``: the event engine's
    one result per flow (a mesh), each cut at its own rounds completed. Like
    :class:`hw_bridge.contract.LiveFailure` it ``keeps_partial``: a study keeps the rounds so far.
    ``outcome``: set by :func:`twin.studies.run.run_one` to (result, replies checked, mismatches, engine
    used) of the rounds kept.
    """

    keeps_partial = True
    kind = "interrupted"

    def __init__(self, where: str = ""):
        # what was completed, in the type of the layer that stopped: an engine's LoopResult, a mesh study's
        # MeshResult (twin.studies.mesh), a sweep's rows (twin.studies.sweep); None until that layer sets it
        self.partial: Any = None
        self.results: list[LoopResult] | None = None
        self.outcome: tuple[LoopResult, int, int, str] | None = None
        self.node: str | None = None  # the node whose run it stopped, set by the study
        super().__init__(f"interrupted{' ' + where if where else ''}")


__all__ = ["CHECK_REPLIES", "Interrupted", "request_stop", "stop_requested", "take_stop", "clear_stop", "deferred"]
