"""The simulation kernel: a simpy environment whose clock is an integer number of picoseconds."""
from __future__ import annotations

import zlib
from heapq import heappop, heappush
from typing import Any, Callable

import numpy as np
import simpy
from simpy.events import NORMAL


class Kernel:
    """Discrete-event kernel on :mod:`simpy` with integer-picosecond time and named RNG streams.

    Parameters
    ----------
    seed:
        Integer seed. Every random stream is derived from ``(seed, crc32(stream name))`` so the
        same seed gives the same run byte for byte, and adding a stream never shifts another.

    Callbacks scheduled for the same instant run in the order they were scheduled (simpy keeps
    insertion order for equal times), which is what keeps posted writes on one path in order.
    """

    def __init__(self, seed: int = 0):
        self.env = simpy.Environment(initial_time=0)
        self.seed = int(seed)
        self.events = 0

    @property
    def now(self) -> int:
        """Current simulated time in picoseconds."""
        return self.env._now  # int: all delays are ints

    def at(self, t_ps: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at absolute time ``t_ps`` (picoseconds, not in the past)."""
        env = self.env
        delay = t_ps - env._now
        if delay < 0:
            raise ValueError(f"cannot schedule in the past: t={t_ps} ps < now={env._now} ps")
        heappush(env._queue, (t_ps, NORMAL, next(env._eid), _Call(env, fn, args)))  # = env.schedule(ev, NORMAL, delay)
        self.events += 1

    def step(self) -> None:
        """Process the next event: a kernel callback directly, any other simpy event (a process
        of a node written with simpy) through simpy. Same order as ``env.step()``: simpy's queue
        of (time, priority, id). Raises ``simpy.core.EmptySchedule`` when nothing is queued."""
        env = self.env
        queue = env._queue
        if queue and type(queue[0][3]) is _Call:
            env._now, _, _, ev = heappop(queue)
            ev.callbacks = None
            ev._fn(*ev._args)
        else:
            env.step()

    def after(self, delay_ps: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` ``delay_ps`` picoseconds from now."""
        self.at(self.env._now + delay_ps, fn, *args)

    def rng(self, name: str) -> np.random.Generator:
        """Independent random generator for the stream ``name`` (deterministic for the seed)."""
        return stream_rng(self.seed, name)

    def run(self, until_ps: int | None = None) -> None:
        """Process events until the schedule is empty or simulated time reaches ``until_ps``."""
        self.env.run(until=until_ps)

    def stop(self) -> None:
        """Stop :meth:`run` after the current event (drops nothing: pending events stay queued)."""
        ev = simpy.Event(self.env)
        ev.succeed()
        ev.callbacks.append(_raise_stop)


class _Call(simpy.Event):
    """A triggered simpy event that runs one plain callback: the kernel's unit of work (lighter
    than a Timeout with a closure; same ordering: simpy's queue of (time, priority, id))."""

    __slots__ = ("_fn", "_args")

    def __init__(self, env: simpy.Environment, fn: Callable[..., Any], args: tuple):
        self.env = env
        self._ok = True
        self._value = None
        self._fn = fn
        self._args = args
        self.callbacks = _DISPATCH


def _dispatch(ev: _Call) -> None:
    ev._fn(*ev._args)


_DISPATCH = [_dispatch]  # every kernel callback's callback list (simpy swaps it out, never appends to it)


def _raise_stop(_e: Any) -> None:
    raise simpy.core.StopSimulation(None)


def stream_rng(seed: int, name: str) -> np.random.Generator:
    """The random generator for stream ``name`` under ``seed`` (PCG64, SeedSequence-derived)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), zlib.crc32(name.encode())])))
