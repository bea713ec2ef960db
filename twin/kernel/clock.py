"""Clocks: a period, a frequency offset and a phase, with exact integer-picosecond edges."""
from __future__ import annotations

from dataclasses import dataclass

PPB = 1_000_000_000


@dataclass(frozen=True)
class Clock:
    """A free-running clock whose edge ``k`` is at ``phase_ps + floor(k * period_ps * (1 + ppb/1e9))``.

    period_ps: nominal period (> 0), e.g. 4000 for 250 MHz.
    ppb: frequency offset of this oscillator against the reference, in parts per billion
        (positive = slower clock, longer period); 0 for the card's own clock.
    phase_ps: time of edge 0 (>= 0).

    Two devices on the same clock share every edge (phase-locked); a device on an independent
    clock has its own phase and offset, so its edges sweep through the other's cycle.
    """

    period_ps: int
    ppb: int = 0
    phase_ps: int = 0

    def __post_init__(self):
        if self.period_ps <= 0:
            raise ValueError(f"clock period must be > 0 ps, got {self.period_ps}")
        if self.ppb <= -PPB:
            raise ValueError(f"clock offset must be > -1e9 ppb, got {self.ppb}")
        if self.phase_ps < 0:
            raise ValueError(f"clock phase must be >= 0 ps, got {self.phase_ps}")

    @property
    def _scaled(self) -> int:
        return self.period_ps * (PPB + self.ppb)

    def edge(self, k: int) -> int:
        """Time (ps) of edge ``k`` (k >= 0)."""
        return self.phase_ps + (k * self._scaled) // PPB

    def index_at_or_after(self, t_ps: int) -> int:
        """Index of the first edge at or after ``t_ps``."""
        if t_ps <= self.phase_ps:
            return 0
        k = -((self.phase_ps - t_ps) * PPB // self._scaled)  # ceil, exact for ppb == 0
        while k > 0 and self.edge(k - 1) >= t_ps:
            k -= 1
        while self.edge(k) < t_ps:
            k += 1
        return k

    def at_or_after(self, t_ps: int) -> int:
        """Time (ps) of the first edge at or after ``t_ps``."""
        return self.edge(self.index_at_or_after(t_ps))


@dataclass(frozen=True)
class DriftingClock(Clock):
    """A free-running oscillator whose frequency offset drifts slowly: ``ppb`` at edge 0, changing
    by ``drift_ppt_per_s`` parts per trillion per second of elapsed time (a crystal wandering with
    temperature). Edge ``k`` is at ``phase + floor(k T (1 + ppb/1e9)) + floor((k T)^2 d / 2e24)``
    with ``T`` the nominal period in ps and ``d`` the drift in ppt/s (exact integers)."""

    drift_ppt_per_s: int = 0

    def edge(self, k: int) -> int:
        """Time (ps) of edge ``k`` (k >= 0), drift included."""
        kt = k * self.period_ps
        return self.phase_ps + (k * self._scaled) // PPB + (kt * kt * self.drift_ppt_per_s) // (2 * 10**24)
