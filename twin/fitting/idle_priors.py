"""Fitting the idle priors of :mod:`twin.calibration.idle_prior` from live runs (``twin calibrate
--idle-priors SPEC``): reading each source folder's points (:func:`source_points`), one class's
table from its sources (:func:`fit_class`) and the whole file (:func:`fit_priors`). What a source
is, how a point's cost is taken and how the table is made: the docstring of
:mod:`twin.calibration.idle_prior`."""
from __future__ import annotations

import glob
import json
from pathlib import Path

import numpy as np

from twin.calibration.idle_prior import ClassPrior, ClassSpec, IdlePriors, PriorSpec, gap_of
from twin.config import ConfigError, load_model


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


def _spread(x: np.ndarray) -> float:
    """The p10..p90 spread of a point's service (ns): what ``widen`` compares."""
    q10, q90 = np.quantile(np.asarray(x, np.float64), [0.1, 0.9])
    return float(q90 - q10)


def _pass_spread(p: dict[str, np.ndarray], ref_ns: float) -> float | None:
    """The spread (ns, highest minus lowest) of a point's per-pass service p50 (None: one pass)."""
    if "pass_index" not in p:
        return None
    meds = [_med(p["service_ns"][p["pass_index"] == k]) - ref_ns for k in np.unique(p["pass_index"])]
    return round(max(meds) - min(meds), 1) if len(meds) > 1 else None


def _same_gap(name: str, pts: dict) -> str | None:
    """The point of ``pts`` named ``name``, else the one of the same kind and nominal gap (a closed
    loop's ``gap_100us`` and an open loop's ``period_100us`` both leave the device 100 µs idle, less
    its own turnaround), else None."""
    if name in pts:
        return name
    want = gap_of(name)
    return next((n for n in pts if want is not None and gap_of(n) == want), None)


def _point_key(name: str) -> str:
    """The name points of the same kind and nominal gap share across sources (``fixed 100000 ns``)."""
    kind, gap = gap_of(name) or ("", 0.0)
    return name if not kind else f"{kind} {gap:.0f} ns"


def _source_rows(folder: Path, spec: ClassSpec) -> list[dict]:
    """Per point of one source: name, kind, measured idle p50, service p50, cost above the reference."""
    pts = source_points(folder, spec.backend)
    ref_name = _same_gap(spec.reference, pts)
    if ref_name is None:
        raise ConfigError(folder, "reference", spec.reference, f"no such point (have: {', '.join(pts)})")
    ref = pts[ref_name]
    ref_idle = _med(ref["idle_ns"][ref["idle_ns"] >= 0])
    if spec.reference == "back_to_back" and ref_idle > spec.zero_below_ns:
        raise ConfigError(folder, spec.reference, f"idle p50 {ref_idle / 1e3:.1f} µs",
                          f"idled longer than zero_below_ns ({spec.zero_below_ns / 1e3:g} µs): the host could not "
                          "pace back to back, so this source cannot anchor cost 0 (use a paced sweep)")
    ref_svc = _med(ref["service_ns"])
    ref_spread = _spread(ref["service_ns"])
    rows = []
    for name, p in pts.items():
        kind, _ = gap_of(name) or ("", 0.0)
        idle = p["idle_ns"][p["idle_ns"] >= 0]
        rows.append({"point": name, "kind": kind, "idle_p50_ns": round(_med(idle), 1),
                     "service_p50_ns": round(_med(p["service_ns"]), 1),
                     "cost_ns": round(_med(p["service_ns"]) - ref_svc, 1),
                     "widen": round(_spread(p["service_ns"]) / max(ref_spread, 1.0), 3),
                     "rounds": int(len(p["service_ns"])),
                     "pass_spread_ns": _pass_spread(p, ref_svc)})
    return rows


def _combine(per_source: dict[str, list[dict]], spec: ClassSpec) -> tuple[list[dict], list[dict], list[str]]:
    """Fixed-gap points (fitted on) and random-gap points (held out) over the sources, by kind and
    nominal gap (a point's name: its sources' names, ``gap_100us/period_100us`` where they differ)."""
    keys = sorted({_point_key(r["point"]) for rows in per_source.values() for r in rows},
                  key=lambda k: (min(gap_of(r["point"]) or ("", 0.0) for rs in per_source.values() for r in rs
                                     if _point_key(r["point"]) == k)[1], k))
    fixed, held, notes = [], [], []
    ref_key = _point_key(spec.reference)
    for key in keys:
        rows = {s: r for s, rs in per_source.items() for r in rs if _point_key(r["point"]) == key}
        n = "/".join(sorted({r["point"] for r in rows.values()}))
        costs = [r["cost_ns"] for r in rows.values()]
        row = {"point": n, "gap_ns": round(_med(np.array([r["idle_p50_ns"] for r in rows.values()])), 1),
               "cost_ns": round(_med(np.array(costs)), 1),
               "widen": round(_med(np.array([r["widen"] for r in rows.values()])), 3),
               "spread_ns": round(max(costs) - min(costs), 1) if len(costs) > 1 else None,
               "per_source": {s: {k: r[k] for k in ("idle_p50_ns", "service_p50_ns", "cost_ns", "widen", "rounds",
                                                     "pass_spread_ns")} for s, r in rows.items()}}
        (held if rows[next(iter(rows))]["kind"] == "random" else fixed).append(row)
        if key != ref_key and row in fixed and row["gap_ns"] <= spec.zero_below_ns * 1.05:
            notes.append(f"{n}: measured {row['cost_ns']:+.1f} ns at {row['gap_ns'] / 1e3:g} µs, not carried (at or "
                         f"below zero_below_ns {spec.zero_below_ns / 1e3:g} µs: cost 0 by construction)")
    return fixed, held, notes


def fit_class(spec: ClassSpec, base: Path, spec_path: Path | None = None, key: str = "sources") -> ClassPrior:
    """One class's prior from its sources (globs relative to ``base``, sorted; a pattern may match
    nothing, said in the prior's ``notes``). Raises ConfigError naming ``spec_path`` (default ``base``)
    and ``key`` for a named folder that is not there, or a source that does not read (:func:`source_points`)."""
    folders: list[Path] = []
    unmatched: list[str] = []
    for g in spec.sources:
        hit = sorted(Path(p) for p in glob.glob(str(base / g)) if Path(p).is_dir())
        if not hit and not glob.has_magic(g):
            raise ConfigError(spec_path or base, key, g, "no such folder")
        if not hit:  # a pattern for runs still to come may match nothing yet: said, not silent
            unmatched.append(f"source pattern {g!r} matched no folder: not part of this fit")
        folders += [h for h in hit if h not in folders]
    per_source = {str(f.relative_to(base) if f.is_relative_to(base) else f): _source_rows(f, spec) for f in folders}
    fixed, held, notes = _combine(per_source, spec)
    notes = unmatched + notes
    table = [(float(spec.zero_below_ns), 0.0)]
    widen = [(float(spec.zero_below_ns), 1.0)]
    ref_key = _point_key(spec.reference)
    for r in fixed:
        beyond = r["gap_ns"] > spec.zero_below_ns * 1.05 and r["gap_ns"] > table[-1][0]
        if _point_key(r["point"].split("/")[0]) != ref_key and beyond:
            if r["cost_ns"] < 0:
                notes.append(f"{r['point']}: measured {r['cost_ns']:+.1f} ns, clipped to 0")
            table.append((r["gap_ns"], max(0.0, r["cost_ns"])))
            widen.append((r["gap_ns"], max(1.0, r["widen"])))
    return ClassPrior(table=table, widen=widen, zero_below_ns=spec.zero_below_ns, reference=spec.reference,
                      sources=list(per_source), protocol=spec.protocol, carry=spec.carry, points=fixed,
                      held_out=held, notes=notes)


def fit_priors(spec_path: Path, command: str = "") -> IdlePriors:
    """Every class of the spec at ``spec_path`` (:func:`fit_class`), as the file to write."""
    import datetime
    spec = load_model(spec_path, PriorSpec)
    classes = {k: fit_class(c, spec_path.parent, spec_path, f"classes.{k}.sources") for k, c in spec.classes.items()}
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return IdlePriors(name=spec.name, description=spec.description, classes=classes,
                      fitted={"command": command or f"twin calibrate --idle-priors {spec_path}", "date": when,
                              "spec": str(spec_path)})
