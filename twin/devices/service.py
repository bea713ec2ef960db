"""What a consumer's response costs beyond its constant body: idling and a mixture of service modes.

Both are per round and both loop engines compute them with these functions (the event model in
:meth:`twin.devices.consumer.PollingConsumer._seen`, the direct engine inline; the compiled core the same
arithmetic in C: :mod:`twin.engine.service_core`), so their timestamps
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
  A mode may also say what it becomes after a long idle (``long_offset_ps``, ``long_width_ps``): a
  round then takes its block moved by ``f(gap)`` of the way there, ``f`` from the consumer's
  ``idle_mix`` table (gap -> fraction 0..1, log-gap interpolation, flat beyond the ends): the
  measured service distribution after idling, quantile by quantile.

Defaults are empty (no cost): every scenario without them is unchanged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

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
    (>= 0) and ``width_ps`` (a uniform spread above the offset, >= 0); ``long_offset_ps`` and
    ``long_width_ps``: the block after a long idle (None: the same)."""

    weight: float
    offset_ps: int
    width_ps: int = 0
    long_offset_ps: int | None = None
    long_width_ps: int | None = None

    def __post_init__(self):
        if not 0 < self.weight <= 1 or self.offset_ps < 0 or self.width_ps < 0:
            raise ValueError("a service mode needs 0 < weight <= 1, offset >= 0 and width >= 0")
        if (self.long_offset_ps is None) != (self.long_width_ps is None) or min(
                self.long_offset_ps or 0, self.long_width_ps or 0) < 0:
            raise ValueError("a service mode's long-idle block needs both offset and width, >= 0")


def idle_ps(idle: tuple[IdleCost, ...], gap_ps: int) -> int:
    """The idle cost of every mechanism together after ``gap_ps`` of idling, rounded to whole ps (the
    mechanisms added left to right in double, as the compiled core adds them: not ``sum``, whose
    compensated float sum since Python 3.12 rounds otherwise)."""
    if not idle:
        return 0
    s = 0.0
    for m in idle:
        s += m.at(gap_ps)
    return int(round(s))


def pick_blocks(modes: tuple[ServiceMode, ...], seed: int,
                stream: str) -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
    """``next(m)``: the picks of the next ``m`` rounds from stream ``stream`` of ``seed`` as (mode index per
    round, int64, ``len(modes)`` for the main mode; uniform draw in [0, 1) per round, float64); blocks
    taken one after another are the rounds of one run, whatever their sizes (a streamed run draws its
    batches so). Raises ValueError when the weights sum to more than 1."""
    w = np.array([m.weight for m in modes])
    if w.sum() > 1 + 1e-9:
        raise ValueError(f"service modes' weights sum to {w.sum():g}: must be <= 1 (the rest is the main mode)")
    rng = stream_rng(seed, stream)
    cum = np.cumsum(w)
    if cum[-1] > 1 - 1e-9:  # the modes are the whole distribution (a quantile table): no main mode left
        cum[-1] = 1.0

    def take(m: int) -> tuple[np.ndarray, np.ndarray]:
        # two draws per round, round by round: round i's pick does not depend on how many rounds the
        # run has (the event model's check over the first rounds draws the same picks as the whole run)
        u, v = rng.random((m, 2)).T
        return np.searchsorted(cum, u, side="right").astype(np.int64), np.ascontiguousarray(v)
    return take


def _picks(modes: tuple[ServiceMode, ...], seed: int, stream: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(mode index per round, ``len(modes)`` for the main mode; uniform draw in [0, 1) per round)."""
    return pick_blocks(modes, seed, stream)(n)


def mode_draws(modes: tuple[ServiceMode, ...], seed: int, stream: str, n: int) -> np.ndarray:
    """``n`` extra service times (int64 ps), one per round, from stream ``stream`` of ``seed``:
    each round falls in mode k with probability ``modes[k].weight`` (else 0 extra) and takes its
    offset plus a uniform draw in [0, width); weights summing to 1 leave no main mode (a measured
    service distribution as a quantile table). Raises ValueError when the weights sum to more than 1."""
    if not modes:
        return np.zeros(n, np.int64)
    k, v = _picks(modes, seed, stream, n)
    off = np.array([m.offset_ps for m in modes] + [0], np.int64)
    wid = np.array([m.width_ps for m in modes] + [0], np.float64)
    return off[k] + np.floor(v * wid[k]).astype(np.int64)


def mode_pick_arrays(modes: tuple[ServiceMode, ...], seed: int, stream: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`mode_picks` as two arrays of ``n``: the mode (int64; ``len(modes)`` the main mode) and the
    uniform draw (float64) of each round (the compiled core's tables: :mod:`twin.engine.service_core`)."""
    if not modes:
        return np.zeros(n, np.int64), np.zeros(n, np.float64)
    return _picks(modes, seed, stream, n)


def mode_picks(modes: tuple[ServiceMode, ...], seed: int, stream: str, n: int) -> list[tuple[int, float]]:
    """Per round (``n``): (the mode it falls in, ``len(modes)`` for the main mode; its uniform draw
    in [0, 1)), from stream ``stream`` of ``seed`` -- the same draws :func:`mode_draws` uses."""
    if not modes:
        return [(0, 0.0)] * n
    k, v = _picks(modes, seed, stream, n)
    return list(zip(k.tolist(), v.tolist()))


def mix_fraction(points: tuple[tuple[int, float], ...], gap_ps: int) -> float:
    """The ``idle_mix`` fraction (0..1) after ``gap_ps`` of idling: log-gap interpolation between the
    (gap_ps, fraction) points, flat beyond the ends; 0 without points."""
    if not points:
        return 0.0
    g = max(1, gap_ps)
    if g <= points[0][0]:
        return points[0][1]
    for (g0, f0), (g1, f1) in zip(points, points[1:]):
        if g <= g1:
            return f0 + (f1 - f0) * math.log(g / g0) / math.log(g1 / g0)
    return points[-1][1]


def mode_extra_ps(modes: tuple[ServiceMode, ...], pick: tuple[int, float], f: float) -> int:
    """One round's extra service (ps) for its ``pick`` (:func:`mode_picks`) at idle fraction ``f``."""
    k, v = pick
    if k >= len(modes):
        return 0
    m = modes[k]
    off, wid = float(m.offset_ps), float(m.width_ps)
    if f and m.long_offset_ps is not None:
        off += f * (m.long_offset_ps - off)
        wid += f * (m.long_width_ps - wid)
    return int(off + math.floor(v * wid)) if not f else int(round(off + v * wid))
