"""Idle priors per device class: what idling costs a CPU core or a GPU by default, fitted from live runs.

``calibrations/priors/idle.yaml`` (:class:`IdlePriors`) holds one :class:`ClassPrior` per device class
(``cpu``, ``gpu``): an idle-cost table ``[[gap_ns, cost_ns], ...]`` (log-gap interpolation, flat
beyond the ends: :class:`twin.devices.service.IdleCost`), 0 at and below ``zero_below_ns`` by
construction, with the live folders it came from, the protocol, the fixed-gap points it was fitted
on (each source's cost, their spread across machine starts and passes) and the random-gap points
it was not fitted on. ``twin calibrate --idle-priors SPEC``
(:func:`twin.fitting.idle_priors.fit_priors`) writes it from a spec,
``calibrations/priors/idle_fit.yaml`` (:class:`PriorSpec`): per class the source folders (globs,
relative to the spec), the backend, the reference point (cost 0) and ``zero_below_ns``.

A source is a folder of ``benchmarks/duty_cycle.py`` (``<backend>.npz``: per point ``service_ns``,
``idle_ns``, ``pass_index``; rounds paced in C, exact gaps) or of ``benchmarks/live_sweep.py``
(``sweep.json`` and one point folder each, read by :func:`twin.fitting.live_runs.read_live_rounds`);
a sweep whose reference point idled longer than ``zero_below_ns`` (rounds driven from Python, which
cannot pace below its own time per round) is refused, one line naming it. Point names say the gap:
``back_to_back``, ``gap_<N><unit>`` or ``period_<N><unit>`` (fixed: fitted on), ``exp_<N><unit>``
(random: held out, never fitted on).

A point's cost is the median of its service minus the median of its source's reference point
(ns); the class table is, per fixed gap, the median over sources (the gap: the median of their
measured idle p50), negative costs clipped to 0. A point's ``widen`` is its service's p10..p90
spread over the reference point's (the same source), the class's the median over sources, at least
1: after a long idle the shm consumer's whole distribution widens, not only its median (H200 host,
2026-12-03, calibrations/measured/live/h200_host_shm_duty_paced: p10..p90 213 ns back to back, 667 ns
after 1 ms, 1,723 ns after 10 ms), which a cost added to every round cannot carry; a stand-in with
a measured service distribution widens it about its median by that factor
(:func:`twin.fitting.live._prior_terms`). How a prior carries to another member of its
class (:func:`class_idle`): the same table, gaps and costs in absolute ns -- an assumption
(docs/calibration.md, "Idle priors").
"""
from __future__ import annotations

import functools
import math
import re
from typing import Literal

from twin.config import load_model
from twin.config.strict import Strict
from twin.devices.service import IdleCost
from twin.units import PS_PER_NS

PRIORS_FILE = "calibrations/priors/idle.yaml"
PRIOR_MECHANISM = "class idle prior (docs/calibration.md, Idle priors)"  # the IdleCost a prior attaches
_GAP = re.compile(r"^(back_to_back|(gap|period|exp)_(\d+(?:\.\d+)?)(ns|us|ms|s))$")
_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


class ClassSpec(Strict):
    """What one class's prior is fitted from: ``sources`` (globs relative to the spec file),
    ``backend`` (``shm``, ``cuda``: the live backend standing for the class), ``reference`` (the point
    whose service is cost 0), ``zero_below_ns`` (the table is 0 at and below it), ``protocol`` (words)."""

    sources: list[str]
    backend: str
    reference: str = "back_to_back"
    zero_below_ns: float
    protocol: str = ""
    carry: str = ""


class PriorSpec(Strict):
    """The spec ``twin calibrate --idle-priors`` reads (``calibrations/priors/idle_fit.yaml``)."""

    name: str
    description: str = ""
    classes: dict[Literal["cpu", "gpu"], ClassSpec]


class ClassPrior(Strict):
    """One device class's idle prior: ``table`` ([[gap_ns, cost_ns], ...], gaps increasing, the first
    ``[zero_below_ns, 0]``), ``widen`` ([[gap_ns, factor], ...], the same gaps, the first
    ``[zero_below_ns, 1]``: how much wider the service's p10..p90 spread is after that gap than the
    reference point's, the median over sources, at least 1; empty in a file fitted before it), its
    sources, protocol, the fitted-on ``points`` (per fixed gap: gap, cost, widen, each source's
    cost, spreads), the ``held_out`` random-gap points, ``carry`` and ``notes``."""

    table: list[tuple[float, float]]
    widen: list[tuple[float, float]] = []  # [[gap_ns, factor], ...]: the service's spread after a gap (fitted)
    zero_below_ns: float
    reference: str
    sources: list[str]
    protocol: str = ""
    carry: str = ""
    points: list[dict] = []
    held_out: list[dict] = []
    notes: list[str] = []

    def costs(self) -> tuple[IdleCost, ...]:
        """The table as one :class:`IdleCost` (integer ps)."""
        pts = tuple((max(1, round(g * PS_PER_NS)), max(0, round(c * PS_PER_NS))) for g, c in self.table)
        return (IdleCost(PRIOR_MECHANISM, "table", points=pts),)

    def at_ns(self, gap_ns: float) -> float:
        """The prior's cost (ns) after ``gap_ns`` of idling."""
        return self.costs()[0].at(round(gap_ns * PS_PER_NS)) / PS_PER_NS

    def rebased(self, gap0_ns: float) -> list[tuple[float, float]]:
        """The table for a device whose service was measured after ``gap0_ns`` of idling (a stand-in
        fitted to a run that already paid the cost at that gap): ``[[max(gap0, zero), 0]]`` and every
        later point less the cost at ``gap0_ns`` (>= 0)."""
        g0 = max(gap0_ns, self.zero_below_ns)
        c0 = self.at_ns(g0)
        return [(round(g0, 3), 0.0)] + [(g, round(max(0.0, c - c0), 3)) for g, c in self.table if g > g0]


    def widen_at(self, gap_ns: float) -> float:
        """The ``widen`` factor after ``gap_ns`` of idling: log-gap interpolation between the points,
        flat beyond the ends (as the cost table); 1 without points."""
        pts = self.widen
        if not pts or gap_ns <= pts[0][0]:
            return float(pts[0][1]) if pts else 1.0
        for (g0, w0), (g1, w1) in zip(pts, pts[1:]):
            if gap_ns <= g1:
                return w0 + (w1 - w0) * math.log(gap_ns / g0) / math.log(g1 / g0)
        return float(pts[-1][1])


class IdlePriors(Strict):
    """The file ``twin calibrate --idle-priors`` writes: its ``name``, ``description``, one
    :class:`ClassPrior` per class and the ``fitted`` section (command, date)."""

    name: str
    description: str = ""
    classes: dict[Literal["cpu", "gpu"], ClassPrior]
    fitted: dict = {}


def gap_of(point: str) -> tuple[str, float] | None:
    """(``fixed`` | ``random``, nominal gap ns) of a point name (``back_to_back``: fixed, 0); None for
    a name that says no gap."""
    m = _GAP.match(point)
    if m is None:
        return None
    if m.group(1) == "back_to_back":
        return "fixed", 0.0
    return ("random" if m.group(2) == "exp" else "fixed"), float(m.group(3)) * _UNIT_NS[m.group(4)]


@functools.lru_cache(maxsize=4)
def bundled_priors(path: str = PRIORS_FILE) -> IdlePriors:
    """The bundled idle priors (read once)."""
    from twin.bundled import bundled_path
    return load_model(bundled_path(path), IdlePriors)


def class_idle(kind: str) -> ClassPrior | None:
    """The bundled prior of device class ``kind`` (None for a class without one, e.g. fpga)."""
    return bundled_priors().classes.get(kind)  # type: ignore[call-overload]


def may_idle_past(traffic, zero_below_ns: float) -> bool:
    """Whether ``traffic`` (:class:`twin.devices.generator.TrafficParams`) can leave a consumer idle
    longer than ``zero_below_ns``: random gaps, or a period or closed-loop gap of at least half of it
    (a loop's own turnaround, reply to next request, is a few µs in every bundled path: under half of
    the smallest class zero, 10 µs). Below that the prior's cost is 0 and is not attached, so a
    back-to-back loop keeps the compiled core and the decode study's hosting modes."""
    asked = traffic.period_ps if traffic.mode == "open_loop" else traffic.gap_ps
    return traffic.gaps is not None or asked >= zero_below_ns * PS_PER_NS / 2


def without_prior(params):
    """``params`` (:class:`twin.devices.consumer.ConsumerParams`) without an idle cost that is only its
    class's prior (the decode study keeps a constant body per request: its decoder's measured per-call
    cost is the service); an idle of the set's own is kept (and refused where it cannot apply)."""
    from dataclasses import replace
    if params.idle and all(m.mechanism == PRIOR_MECHANISM for m in params.idle):
        return replace(params, idle=())
    return params
