"""Event-driven pollers: a period, a phase and a cost per poll, with no event per empty poll."""
from __future__ import annotations

from typing import Callable

from twin.kernel.memory import MemoryRegion
from twin.kernel.sim import Kernel
from twin.units import ceil_to_grid


class Poller:
    """A loop that reads its own memory at ``phase + k*period`` and reacts to what it finds.

    Parameters (integer picoseconds): ``period_ps`` (> 0), ``phase_ps`` (0 <= phase < period),
    ``cost_ps`` (>= 0: a poll issued at instant ``t`` sees memory as it is at ``t`` and has its
    answer at ``t + cost``).

    The poller is armed with a readiness test and a callback. Instead of an event per poll, it
    listens for landings in its region; when the test passes it schedules exactly one event, at
    the first poll instant at or after the landing plus the cost. A write that lands exactly on
    a poll instant is seen by that poll. Empty polls are counted arithmetically.

    ``blackouts``: intervals ``(start_ps, end_ps)`` in which the loop does not poll (a stalled
    thread, a frozen host); the first poll after one is the first grid instant at or after its end.

    Statistics: ``hits`` (polls that found work), ``polls`` (all polls, including empty ones,
    while armed; polls skipped in a blackout are counted too).
    """

    def __init__(self, kernel: Kernel, region: MemoryRegion, period_ps: int, phase_ps: int = 0,
                 cost_ps: int = 0, name: str = "", blackouts: tuple[tuple[int, int], ...] = ()):
        if period_ps <= 0:
            raise ValueError(f"poller {name!r}: period must be > 0 ps, got {period_ps}")
        if not 0 <= phase_ps < period_ps:
            raise ValueError(f"poller {name!r}: phase must be in [0, period), got {phase_ps}")
        if cost_ps < 0:
            raise ValueError(f"poller {name!r}: cost must be >= 0 ps, got {cost_ps}")
        self.kernel = kernel
        self.region = region
        self.period_ps = int(period_ps)
        self.phase_ps = int(phase_ps)
        self.cost_ps = int(cost_ps)
        self.name = name
        self.blackouts = tuple(sorted(blackouts))
        self._ready: Callable[[], bool] | None = None
        self._on_seen: Callable[[int], None] | None = None
        self._armed_at = 0
        self._pending = False
        self.hits = 0
        self.polls = 0
        region.watch(self._landed)

    def first_poll(self, t_ps: int) -> int:
        """The first poll instant at or after ``t_ps`` (outside any blackout)."""
        t = ceil_to_grid(t_ps, self.period_ps, self.phase_ps)
        for start, end in self.blackouts:
            if start <= t < end:
                t = ceil_to_grid(end, self.period_ps, self.phase_ps)
        return t

    def arm(self, ready: Callable[[], bool], on_seen: Callable[[int], None]) -> None:
        """Start polling now for ``ready()``; call ``on_seen(t)`` when a poll has seen it
        (``t`` = poll instant + cost). Raises if already armed."""
        if self._on_seen is not None:
            raise RuntimeError(f"poller {self.name!r} armed twice")
        self._ready = ready
        self._on_seen = on_seen
        self._armed_at = self.first_poll(self.kernel.now)
        if ready():
            self._schedule()

    def _landed(self) -> None:
        ready = self._ready  # set and cleared with _on_seen: not None while armed
        if ready is not None and not self._pending and ready():
            self._schedule()

    def _schedule(self) -> None:
        self._pending = True
        t_poll = self.first_poll(self.kernel.now)
        self.polls += (t_poll - self._armed_at) // self.period_ps + 1
        self.kernel.at(t_poll + self.cost_ps, self._fire)

    def _fire(self) -> None:
        cb = self._on_seen
        if cb is None:  # _schedule runs only while armed, and one event is pending at a time
            raise RuntimeError(f"poller {self.name!r} fired while not armed")
        self._on_seen = None
        self._ready = None
        self._pending = False
        self.hits += 1
        cb(self.kernel.now)
