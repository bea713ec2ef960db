"""What a consumer's response costs beyond its constant body: idling and a mixture of service modes.

Both are per round and both loop engines compute them with these functions (the event model in
:meth:`twin.devices.consumer.PollingConsumer._seen`, the direct engine inline), so their timestamps
stay identical (``tests/test_duty_cycle.py``).

- **Idle cost** (:class:`IdleCost`): the time the serving thread sat idle before a request -- the
  *idle gap*, from the instant it was free (polling again after its previous request) to the poll
  that sees the request -- costs extra service time, per mechanism (cache refill of the queue
  lines, clock/power-state exit, GPU wave re-scheduling): either a saturating cost
  ``c(gap) = cost * (1 - exp(-gap / tau))`` or a table of (gap, cost) points interpolated linearly in
  log(gap) and flat beyond its ends. Back to back the gap is under one poll period.
- **Service modes** (:class:`ServiceMode`): with probability ``weight`` a round's service takes
  ``offset`` plus a uniform draw in ``[0, width)`` more (a second mode of a histogram: a GPU warp
  re-scheduled, a poll loop caught in another phase; a rare tail). The draws come from the loop's
  random stream ``<loop>.consumer.modes``, one per round, so a seed gives the same rounds.

Defaults are empty (no cost): every scenario without them is unchanged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from twin.kernel.sim import stream_rng

IDLE_KINDS = ("saturating", "table")


@dataclass(frozen=True)
class IdleCost:
    """One idle mechanism (integer picoseconds).

    mechanism: what it stands for (free text, e.g. "cache refill").
    kind: "saturating" (``cost_ps``, ``tau_ps``) or "table" (``points``: ((gap_ps, cost_ps), ...),
        gaps strictly increasing and > 0).
    Raises ValueError for an unknown kind, a negative cost, tau <= 0 or a bad table.
    """

    mechanism: str
    kind: str = "saturating"
    cost_ps: int = 0
    tau_ps: int = 1
    points: tuple[tuple[int, int], ...] = ()

    def __post_init__(self):
        if self.kind not in IDLE_KINDS:
            raise ValueError(f"idle cost kind must be one of {', '.join(IDLE_KINDS)}, got {self.kind!r}")
        if self.kind == "saturating" and (self.cost_ps < 0 or self.tau_ps <= 0):
            raise ValueError(f"idle cost {self.mechanism!r}: cost must be >= 0 and tau > 0")
        if self.kind == "table":
            gaps = [g for g, _ in self.points]
            if not self.points or gaps[0] <= 0 or any(b <= a for a, b in zip(gaps, gaps[1:])):
                raise ValueError(f"idle cost {self.mechanism!r}: a table needs gaps > 0, strictly increasing")

    def at(self, gap_ps: int) -> float:
        """The extra service time (ps, a float) after an idle gap of ``gap_ps`` (< 0 counts as 0)."""
        g = max(0, gap_ps)
        if self.kind == "saturating":
            return self.cost_ps * -math.expm1(-g / self.tau_ps)
        pts = self.points
        if g <= pts[0][0]:
            return float(pts[0][1])
        for (g0, c0), (g1, c1) in zip(pts, pts[1:]):
            if g <= g1:
                f = math.log(g / g0) / math.log(g1 / g0)
                return c0 + f * (c1 - c0)
        return float(pts[-1][1])


@dataclass(frozen=True)
class ServiceMode:
    """One extra mode of the service time: ``weight`` (probability, 0 < weight <= 1), ``offset_ps``
    (>= 0) and ``width_ps`` (a uniform spread above the offset, >= 0)."""

    weight: float
    offset_ps: int
    width_ps: int = 0

    def __post_init__(self):
        if not 0 < self.weight <= 1 or self.offset_ps < 0 or self.width_ps < 0:
            raise ValueError("a service mode needs 0 < weight <= 1, offset >= 0 and width >= 0")


def idle_ps(idle: tuple[IdleCost, ...], gap_ps: int) -> int:
    """The idle cost of every mechanism together after ``gap_ps`` of idling, rounded to whole ps."""
    return int(round(sum(m.at(gap_ps) for m in idle))) if idle else 0


def mode_draws(modes: tuple[ServiceMode, ...], seed: int, stream: str, n: int) -> np.ndarray:
    """``n`` extra service times (int64 ps), one per round, from stream ``stream`` of ``seed``:
    each round falls in mode k with probability ``modes[k].weight`` (else 0 extra) and takes its
    offset plus a uniform draw in [0, width); weights summing to 1 leave no main mode (a measured
    service distribution as a quantile table). Raises ValueError when the weights sum to more than 1."""
    if not modes:
        return np.zeros(n, np.int64)
    w = np.array([m.weight for m in modes])
    if w.sum() > 1 + 1e-9:
        raise ValueError(f"service modes' weights sum to {w.sum():g}: must be <= 1 (the rest is the main mode)")
    rng = stream_rng(seed, stream)
    u, v = rng.random(n), rng.random(n)
    cum = np.cumsum(w)
    if cum[-1] > 1 - 1e-9:  # the modes are the whole distribution (a quantile table): no main mode left
        cum[-1] = 1.0
    k = np.searchsorted(cum, u, side="right")  # == len(modes): the main mode
    off = np.array([m.offset_ps for m in modes] + [0], np.int64)
    wid = np.array([m.width_ps for m in modes] + [0], np.float64)
    return off[k] + np.floor(v * wid[k]).astype(np.int64)
