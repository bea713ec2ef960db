"""Idle priors per device class: what idling costs a CPU core or a GPU by default, fitted from live runs.

``calibrations/priors/idle.yaml`` (:class:`IdlePriors`) holds one :class:`ClassPrior` per device class
(``cpu``, ``gpu``): an idle-cost table ``[[gap_ns, cost_ns], ...]`` (log-gap interpolation, flat
beyond the ends: :class:`twin.devices.service.IdleCost`), 0 at and below ``zero_below_ns`` by
construction, with the live folders it came from, the protocol, the fixed-gap points it was fitted
on (each source's cost, their spread across machine starts and passes) and the random-gap points
it was not fitted on. ``twin calibrate --idle-priors SPEC`` (:func:`fit_priors`) writes it from a
spec, ``calibrations/priors/idle_fit.yaml`` (:class:`PriorSpec`): per class the source folders
(globs, relative to the spec), the backend, the reference point (cost 0) and ``zero_below_ns``.

A source is a folder of ``benchmarks/duty_cycle.py`` (``<backend>.npz``: per point ``service_ns``,
``idle_ns``, ``pass_index``; rounds paced in C, exact gaps) or of ``benchmarks/live_sweep.py``
(``sweep.json`` and one point folder each, read by :func:`twin.fitting.live_runs.read_live_rounds`);
a sweep whose reference point idled longer than ``zero_below_ns`` (rounds driven from Python, which
cannot pace below its own time per round) is refused, one line naming it. Point names say the gap:
``back_to_back``, ``gap_<N><unit>`` or ``period_<N><unit>`` (fixed: fitted on), ``exp_<N><unit>``
(random: held out, never fitted on).

A point's cost is the median of its service minus the median of its source's reference point
(ns); the class table is, per fixed gap, the median over sources (the gap: the median of their
measured idle p50), negative costs clipped to 0. How a prior carries to another member of its
class (:func:`class_idle`): the same table, gaps and costs in absolute ns -- an assumption
(docs/calibration.md, "Idle priors").
"""
from __future__ import annotations

import functools
import glob
import json
import re
from pathlib import Path
from typing import Literal

import numpy as np

from twin.config import ConfigError, load_model
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
    ``[zero_below_ns, 0]``), its sources, protocol, the fitted-on ``points`` (per fixed gap: gap, cost,
    each source's cost, spreads), the ``held_out`` random-gap points, ``carry`` and ``notes``."""

    table: list[tuple[float, float]]
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


def _npz_points(folder: Path, backend: str) -> dict[str, dict[str, np.ndarray]]:
    """A duty_cycle.py folder's points: name -> {service_ns, idle_ns, pass_index?}."""
    f = folder / f"{backend}.npz"
    with np.load(f) as z:
        names = sorted({k.split(".")[0] for k in z.files})
        return {n: {k.split(".", 1)[1]: z[k] for k in z.files if k.split(".")[0] == n} for n in names}


def _sweep_points(folder: Path) -> dict[str, dict[str, np.ndarray]]:
    """A live_sweep.py folder's points (stalled rounds and those queued behind them left out)."""
    from twin.devices.isolation import find_live_stalls
    from twin.fitting.live_runs import read_live_rounds
    out = {}
    for point in sorted(p for p in folder.iterdir() if p.is_dir() and gap_of(p.name)):
        _, _, a, _ = read_live_rounds(point)
        st = find_live_stalls(a["service_ns"], a["rtt_ps"])
        keep = ~st.mask if len(st.mask) == len(a["rtt_ps"]) else np.ones(len(a["rtt_ps"]), bool)
        pts = {k: np.asarray(v)[keep] for k, v in a.items() if k in ("service_ns", "idle_ns", "pass_index")}
        out[point.name] = pts
    return out


def source_points(folder: Path, backend: str) -> dict[str, dict[str, np.ndarray]]:
    """The points of one source folder for ``backend`` (module docstring). Raises ConfigError for a
    folder that is neither kind, or a sweep of another backend."""
    if (folder / f"{backend}.npz").is_file():
        return _npz_points(folder, backend)
    sweep = folder / "sweep.json"
    if sweep.is_file():
        got = json.loads(sweep.read_text()).get("backend")
        if got != backend:
            raise ConfigError(sweep, "backend", got, f"a {backend} prior's source must be a {backend} sweep")
        return _sweep_points(folder)
    raise ConfigError(folder, "source", str(folder), f"neither {backend}.npz (benchmarks/duty_cycle.py) nor sweep.json "
                      "(benchmarks/live_sweep.py)")


def _med(x: np.ndarray) -> float:
    return float(np.median(np.asarray(x, np.float64)))


def _pass_spread(p: dict[str, np.ndarray], ref_ns: float) -> float | None:
    """The spread (ns, highest minus lowest) of a point's per-pass service p50 (None: one pass)."""
    if "pass_index" not in p:
        return None
    meds = [_med(p["service_ns"][p["pass_index"] == k]) - ref_ns for k in np.unique(p["pass_index"])]
    return round(max(meds) - min(meds), 1) if len(meds) > 1 else None


def _source_rows(folder: Path, spec: ClassSpec) -> list[dict]:
    """Per point of one source: name, kind, measured idle p50, service p50, cost above the reference."""
    pts = source_points(folder, spec.backend)
    if spec.reference not in pts:
        raise ConfigError(folder, "reference", spec.reference, f"no such point (have: {', '.join(pts)})")
    ref = pts[spec.reference]
    ref_idle = _med(ref["idle_ns"][ref["idle_ns"] >= 0])
    if spec.reference == "back_to_back" and ref_idle > spec.zero_below_ns:
        raise ConfigError(folder, spec.reference, f"idle p50 {ref_idle / 1e3:.1f} µs",
                          f"idled longer than zero_below_ns ({spec.zero_below_ns / 1e3:g} µs): the host could not "
                          "pace back to back, so this source cannot anchor cost 0 (use a paced sweep)")
    ref_svc = _med(ref["service_ns"])
    rows = []
    for name, p in pts.items():
        kind, _ = gap_of(name) or ("", 0.0)
        idle = p["idle_ns"][p["idle_ns"] >= 0]
        rows.append({"point": name, "kind": kind, "idle_p50_ns": round(_med(idle), 1),
                     "service_p50_ns": round(_med(p["service_ns"]), 1),
                     "cost_ns": round(_med(p["service_ns"]) - ref_svc, 1), "rounds": int(len(p["service_ns"])),
                     "pass_spread_ns": _pass_spread(p, ref_svc)})
    return rows


def _combine(per_source: dict[str, list[dict]], spec: ClassSpec) -> tuple[list[dict], list[dict], list[str]]:
    """Fixed-gap points (fitted on) and random-gap points (held out) over the sources, by name."""
    names = sorted({r["point"] for rows in per_source.values() for r in rows},
                   key=lambda n: (gap_of(n) or ("", 0.0))[1])
    fixed, held, notes = [], [], []
    for n in names:
        rows = {s: r for s, rs in per_source.items() for r in rs if r["point"] == n}
        costs = [r["cost_ns"] for r in rows.values()]
        row = {"point": n, "gap_ns": round(_med(np.array([r["idle_p50_ns"] for r in rows.values()])), 1),
               "cost_ns": round(_med(np.array(costs)), 1),
               "spread_ns": round(max(costs) - min(costs), 1) if len(costs) > 1 else None,
               "per_source": {s: {k: r[k] for k in ("idle_p50_ns", "service_p50_ns", "cost_ns", "rounds",
                                                     "pass_spread_ns")} for s, r in rows.items()}}
        (held if rows[next(iter(rows))]["kind"] == "random" else fixed).append(row)
        if n != spec.reference and row in fixed and row["gap_ns"] <= spec.zero_below_ns * 1.05:
            notes.append(f"{n}: measured {row['cost_ns']:+.1f} ns at {row['gap_ns'] / 1e3:g} µs, not carried (at or "
                         f"below zero_below_ns {spec.zero_below_ns / 1e3:g} µs: cost 0 by construction)")
    return fixed, held, notes


def fit_class(spec: ClassSpec, base: Path) -> ClassPrior:
    """One class's prior from its sources (globs relative to ``base``, sorted; a pattern may match
    nothing). Raises ConfigError for a named folder that is not there or a source that does not read
    (:func:`source_points`)."""
    folders: list[Path] = []
    for g in spec.sources:
        hit = sorted(Path(p) for p in glob.glob(str(base / g)) if Path(p).is_dir())
        if not hit and not glob.has_magic(g):  # a pattern for runs still to come may match nothing yet
            raise ConfigError(base, "sources", g, "no such folder")
        folders += [h for h in hit if h not in folders]
    per_source = {str(f.relative_to(base) if f.is_relative_to(base) else f): _source_rows(f, spec) for f in folders}
    fixed, held, notes = _combine(per_source, spec)
    table = [(float(spec.zero_below_ns), 0.0)]
    for r in fixed:
        if r["point"] != spec.reference and r["gap_ns"] > spec.zero_below_ns * 1.05 and r["gap_ns"] > table[-1][0]:
            if r["cost_ns"] < 0:
                notes.append(f"{r['point']}: measured {r['cost_ns']:+.1f} ns, clipped to 0")
            table.append((r["gap_ns"], max(0.0, r["cost_ns"])))
    return ClassPrior(table=table, zero_below_ns=spec.zero_below_ns, reference=spec.reference,
                      sources=list(per_source), protocol=spec.protocol, carry=spec.carry, points=fixed,
                      held_out=held, notes=notes)


def fit_priors(spec_path: Path, command: str = "") -> IdlePriors:
    """Every class of the spec at ``spec_path`` (:func:`fit_class`), as the file to write."""
    import datetime
    spec = load_model(spec_path, PriorSpec)
    classes = {k: fit_class(c, spec_path.parent) for k, c in spec.classes.items()}
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return IdlePriors(name=spec.name, description=spec.description, classes=classes,
                      fitted={"command": command or f"twin calibrate --idle-priors {spec_path}", "date": when,
                              "spec": str(spec_path)})


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
