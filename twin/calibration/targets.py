"""Which measured numbers a parameter set was fitted to: its *fit targets*, and every other
measured number's role, *held out*.

A prior's ``fit`` section names them (:func:`prior_targets`: each fit group's consumers, and the
statistics the path's objective matches: p50 and p90 on the card path, ``fit.stats`` on the RoCE
path); a fit writes them into the fitted set as ``fitted.fit_targets`` (``[{consumer, stat}]``)
beside ``fitted.measured`` (the measurement file, relative to the prior's folder) and
``fitted.from`` (the prior). A live fit (``twin calibrate --from-live``) records the run folders it
was fitted on (``fitted.fitted_on[].run``); a measured row that summarises a run names it
(``run``, relative to the measurement file), so its numbers are fit targets when that run is one
of them. :func:`role` answers, for a measured number a table prints, ``"fit"`` when the set was
fitted to that number of that file (or to the run it summarises), ``"held out"`` when not, and
``"unrecorded"`` when the set's record cannot tell (a fitted set written before the record existed,
a row of a live fit that names no run).
"""
from __future__ import annotations

from pathlib import Path

FIT = "fit"
HELD_OUT = "held out"
UNRECORDED = "unrecorded"

CARD_STATS = ("p50", "p90")  # what the card path's objective matches (twin.fitting.fit.calibrate)


def prior_targets(fit, published: dict[str, set[str]] | None = None) -> list[tuple[str, str]]:
    """``(consumer, stat)`` of every number a prior's fit section ``fit`` matches, in group order:
    each group's consumers, with ``fit.stats`` (RoCE: only those ``published[consumer]`` holds) or,
    when the section has no ``stats``, the card path's p50 and p90."""
    stats = tuple(getattr(fit, "stats", CARD_STATS))
    out = []
    for group in fit.groups:
        for c in group.consumers:
            have = published.get(c, set()) if published is not None else set(stats)
            out += [(c, s) for s in stats if s in have and (c, s) not in out]
    return out


def targets_record(targets: list[tuple[str, str]]) -> list[dict]:
    """The ``fitted.fit_targets`` list a fitted document holds."""
    return [{"consumer": c, "stat": s} for c, s in targets]


def _resolve(fitted: dict, cal_path: Path | None) -> list[Path]:
    """Where the fitted set's measurement file may be: beside its prior (``fitted.from``, as written:
    relative to the working folder or the project's root) or beside the set itself."""
    from twin.bundled import bundled_path
    measured = fitted.get("measured")
    if not isinstance(measured, str):
        return []
    out = []
    prior = fitted.get("from")
    if isinstance(prior, str):
        base = Path(prior).parent / measured
        out += [base.resolve(), (bundled_path(".") / base).resolve()]
    if cal_path is not None:
        out += [(Path(cal_path).parent / measured).resolve(), (Path(cal_path).parent.parent / measured).resolve()]
    return out


def fitted_runs(fitted) -> set[Path]:
    """The run folders a live fit's ``fitted.fitted_on[].run`` names (as written: relative to the
    working folder or to the project's root), resolved; empty when it names none."""
    from twin.bundled import bundled_path
    rows = fitted.get("fitted_on") if isinstance(fitted, dict) else None
    out = set()
    for row in rows if isinstance(rows, list) else []:
        run = row.get("run") if isinstance(row, dict) else None
        if isinstance(run, str):
            out |= {Path(run).resolve(), (bundled_path(".") / run).resolve()}
    return out


def _live_role(fitted: dict, measured_path: Path, consumer: str) -> str:
    """A live fit's role for ``consumer``'s row of ``measured_path``: FIT when the row's ``run`` (the
    run folder it summarises, relative to the file) is, holds or lies inside a run the set was fitted
    on, HELD_OUT when it names another run, UNRECORDED when it names none."""
    from twin.config import ConfigError, load_yaml
    try:
        doc = load_yaml(measured_path)
    except ConfigError:
        return UNRECORDED
    row = (doc.get("consumers") or {}).get(consumer) if isinstance(doc, dict) else None
    run = row.get("run") if isinstance(row, dict) else None
    if not isinstance(run, str) or not run:
        return UNRECORDED
    here = (measured_path.parent / run).resolve()
    fit = any(here == f or f in here.parents or here in f.parents for f in fitted_runs(fitted))
    return FIT if fit else HELD_OUT


def role(params, cal_path: str | Path | None, measured_path: str | Path | None, consumer: str, stat: str) -> str:
    """The role of measured number ``stat`` of ``consumer`` in the file ``measured_path`` for the
    parameter set ``params`` (its ``fitted`` record; ``cal_path``: the file it was loaded from):
    :data:`FIT`, :data:`HELD_OUT` or :data:`UNRECORDED`. A set with no ``fitted`` record was fitted
    to nothing (a prior, a hand-written set): every number is held out."""
    fitted = getattr(params, "fitted", None)
    if not isinstance(fitted, dict):
        return HELD_OUT
    if measured_path is None:
        return HELD_OUT
    rows = fitted.get("fit_targets")
    if not isinstance(rows, list):
        return _live_role(fitted, Path(measured_path), consumer) if fitted.get("fitted_on") else UNRECORDED
    same = Path(measured_path).resolve() in _resolve(fitted, None if cal_path is None else Path(cal_path))
    hit = any(isinstance(r, dict) and r.get("consumer") == consumer and r.get("stat") == stat for r in rows)
    return FIT if same and hit else HELD_OUT


def roles(params, cal_path: str | Path | None, measured_path: str | Path | None, consumer: str,
          stats) -> dict[str, str]:
    """:func:`role` of each of ``stats``."""
    return {s: role(params, cal_path, measured_path, consumer, s) for s in stats}


def role_label(by_stat: dict[str, str]) -> str:
    """One cell for a row's numbers: ``fit`` / ``held out`` when all share a role, else each stat's
    (``p50 fit, max held out``)."""
    kinds = set(by_stat.values())
    if len(kinds) == 1:
        return kinds.pop()
    return ", ".join(f"{s} {r}" for s, r in by_stat.items())
