"""The simulation kernel: a simpy environment whose clock is an integer number of picoseconds.

This module is the one adapter between twin and :mod:`simpy` (the reference kernel): it uses only
simpy's public API (``Environment`` and its ``now``, ``peek``, ``step``, ``run``, ``schedule``;
``Timeout`` and ``Event`` through their constructors, ``succeed`` and ``callbacks``;
``simpy.core.EmptySchedule``, ``StopSimulation`` and ``Infinity``). The rest of twin schedules work
through :class:`Kernel` and catches :data:`EmptySchedule` from here, never from simpy.
"""
from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import simpy
from simpy.core import EmptySchedule, Infinity, StopSimulation

__all__ = ["Kernel", "EmptySchedule", "Infinity", "stream_rng"]


class Kernel(simpy.Environment):
    """Discrete-event kernel on :mod:`simpy` with integer-picosecond time and named RNG streams: a
    ``simpy.Environment`` (nodes written as simpy processes run on it as they are; ``env`` is the
    kernel itself) with plain callbacks scheduled by :meth:`at` and :meth:`after`.

    Parameters
    ----------
    seed:
        Integer seed. Every random stream is derived from ``(seed, crc32(stream name))`` so the
        same seed gives the same run byte for byte, and adding a stream never shifts another.

    Callbacks scheduled for the same instant run in the order they were scheduled (simpy keeps
    insertion order for equal times and priorities), which is what keeps posted writes on one path
    in order. :meth:`step` (simpy's) processes the next event and raises :data:`EmptySchedule` when
    nothing is queued; ``events`` counts the callbacks scheduled by :meth:`at` and :meth:`after`.
    """

    def __init__(self, seed: int = 0):
        super().__init__(initial_time=0)
        self.env = self  # the simpy environment of the nodes written with simpy: this kernel
        self.seed = int(seed)
        self.events = 0
        self._late: dict[int, list[tuple[Callable[..., Any], tuple]]] = {}

    if TYPE_CHECKING:
        @property
        def now(self) -> int:
            """Current simulated time in picoseconds (simpy's ``now``: an int, every delay is one)."""

    def at(self, t_ps: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at absolute time ``t_ps`` (picoseconds, not in the past: ValueError)."""
        delay = t_ps - self.now
        if delay < 0:
            raise ValueError(f"cannot schedule in the past: t={t_ps} ps < now={self.now} ps")
        ev = _Call(self, delay)
        ev.fn, ev.args = fn, args
        ev.callbacks.append(_dispatch)
        self.events += 1

    def after(self, delay_ps: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` ``delay_ps`` picoseconds from now (not negative: ValueError)."""
        if delay_ps < 0:
            raise ValueError(f"cannot schedule in the past: t={self.now + delay_ps} ps < now={self.now} ps")
        ev = _Call(self, delay_ps)
        ev.fn, ev.args = fn, args
        ev.callbacks.append(_dispatch)
        self.events += 1

    def at_end_of(self, t_ps: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at ``t_ps`` after every other event of that instant (those scheduled
        for it meanwhile, by this call too, included): a model that must see the whole instant
        first (the RTL co-simulation). Several such calls for one instant run in the order they
        were made, each after the events the one before scheduled for that instant. Not counted
        in ``events``. ValueError for an instant in the past."""
        if t_ps < self.now:
            raise ValueError(f"cannot schedule in the past: t={t_ps} ps < now={self.now} ps")
        calls = self._late.get(t_ps)
        if calls is None:
            self._late[t_ps] = calls = []
            _Late(self, t_ps - self.now, t_ps)
        calls.append((fn, args))

    def _late_call(self, t: int) -> None:
        """The sentinel of instant ``t`` (a plain event): when nothing else of ``t`` is queued, run
        the first end-of-instant call, the sentinel queued again (behind what it scheduled) for the
        next; otherwise queued again behind the rest of ``t``."""
        if self.peek() == t:
            _Late(self, 0, t)
            return
        calls = self._late[t]
        fn, args = calls.pop(0)
        if calls:
            _Late(self, 0, t)
        else:
            del self._late[t]
        fn(*args)

    def idle(self) -> bool:
        """Whether nothing is queued (:meth:`step` would raise :data:`EmptySchedule`)."""
        return self.peek() == Infinity

    def rng(self, name: str) -> np.random.Generator:
        """Independent random generator for the stream ``name`` (deterministic for the seed)."""
        return stream_rng(self.seed, name)

    def run(self, until_ps: int | None = None) -> None:  # type: ignore[override]
        """Process events until the schedule is empty or simulated time reaches ``until_ps``."""
        super().run(until=until_ps)

    def stop(self) -> None:
        """Stop :meth:`run` after the current event (drops nothing: pending events stay queued)."""
        ev = simpy.Event(self)
        ev.callbacks.append(_raise_stop)
        ev.succeed()


class _Call(simpy.Timeout):
    """The kernel's unit of work: a simpy ``Timeout`` (triggered, NORMAL priority, ordered by
    simpy's queue of (time, priority, id)) whose one callback runs ``fn(*args)``."""

    fn: Callable[..., Any]
    args: tuple


def _dispatch(ev: _Call) -> None:
    ev.fn(*ev.args)


class _Late(simpy.Timeout):
    """The sentinel of an instant's end-of-instant calls (:meth:`Kernel.at_end_of`)."""

    def __init__(self, k: Kernel, delay: int, t: int):
        super().__init__(k, delay, t)
        self.callbacks.append(_late)


def _late(ev: _Late) -> None:
    ev.env._late_call(ev.value)  # type: ignore[attr-defined]


def _raise_stop(_e: Any) -> None:
    raise StopSimulation(None)


def stream_rng(seed: int, name: str) -> np.random.Generator:
    """The random generator for stream ``name`` under ``seed`` (PCG64, SeedSequence-derived)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), zlib.crc32(name.encode())])))
