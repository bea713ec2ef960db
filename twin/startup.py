"""The program's start-up without the cyclic garbage collector (:func:`twin.launch.main` calls
:func:`begin` first and :func:`ending` last; the commands call :func:`started`).

The imports and the scenario's loading make some 50,000 long-lived objects, and the collections they
would trigger walk them again and again (about 0.09 CPU-s of a short ``twin run``, 2026-12-03, on a
2-core VM). :func:`begin` turns the collector off; :func:`started` ends the start-up: the objects made
so far are frozen (:func:`gc.freeze`, kept out of every later collection: the documented disable,
freeze, enable sequence) and the collector is on again; :func:`twin.commands.main` calls it before a
command runs, ``twin run`` once its scenario is loaded. :func:`ending` freezes the objects again when
the command returns: the process ends next, and the exit's collections would otherwise walk them all
(0.08-0.13 CPU-s); objects are still freed, files flushed and ``atexit`` handlers run as before. Only
the program calls :func:`begin`: a program that runs the commands in-process
(:func:`twin.commands.main`) keeps its own collector settings (:func:`started` does nothing then).

Imports only the standard library's ``gc``.
"""
from __future__ import annotations

import gc

_collector_off = False  # begin() turned the collector off for the start-up, until started()


def begin() -> None:
    """Turn the cyclic collector off for the start-up (if it is on)."""
    global _collector_off
    if gc.isenabled():
        gc.disable()
        _collector_off = True


def started() -> None:
    """The start-up is over: freeze the objects made so far and turn the cyclic collector on again,
    where :func:`begin` turned it off (else nothing)."""
    global _collector_off
    if _collector_off:
        _collector_off = False
        gc.freeze()
        gc.enable()


def ending() -> None:
    """The program ends next: :func:`started` if it was not yet, and every object frozen (the exit's
    collections skip them)."""
    started()
    gc.freeze()


__all__ = ["begin", "ending", "started"]
