"""``twin validate --leave-one-out CAL``: each fit target predicted by a refit that never saw it.

A fit's residuals are in-sample: with 9 free parameters for 10 measured numbers (the card path)
they say how well the search converged, not how well the model predicts. Here each *target* (a
measured consumer: its p50 and p90 on the card path, the fitted statistics of its published
summary on the RoCE path) is left out in turn and the prior refitted without it
(:func:`twin.fitting.fit.calibrate` / :func:`twin.fitting.roce.calibrate_roce` with
``leave_out``, the same search, seed and budget as the in-sample fit); the refitted set then
predicts the left-out numbers. A free parameter that no other target constrains cannot be fitted
without the left-out one: it is held at the prior's value for that refit, and the row says so
(``no other target constrains X``). Which targets a parameter constrains is measured, not assumed
(:func:`constraints`): the parameter is set to each end of its fit bounds (ties applied) and a
target constrains it when its simulated round trips change.

Shapes and units: every number in ns; ``error_pct`` = 100 (predicted - measured) / measured.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from twin.config import ConfigError, load_yaml


@dataclass
class LooRow:
    """One measured number of a left-out target: measured, the in-sample fit's value, the
    leave-one-out prediction (ns), and the parameters held at the prior for its refit."""

    consumer: str
    stat: str
    measured_ns: float
    in_sample_ns: float
    predicted_ns: float
    held: list[str] = field(default_factory=list)
    short: tuple[list[str], int, int] | None = None  # (other targets, their numbers, free parameters they share)

    @property
    def error_pct(self) -> float:
        """The prediction's error, 100 (predicted - measured) / measured."""
        return 100.0 * (self.predicted_ns - self.measured_ns) / self.measured_ns

    @property
    def in_sample_pct(self) -> float:
        """The in-sample fit's error, 100 (fit - measured) / measured."""
        return 100.0 * (self.in_sample_ns - self.measured_ns) / self.measured_ns

    @property
    def reason(self) -> str:
        """Why a prediction cannot be a fit's: the parameters no other target constrains (they keep the
        prior's value), and/or the other targets that set its parameters giving fewer numbers than the
        free parameters they depend on (not all can be fitted without this one); '' when neither."""
        out = []
        if self.held:
            out.append(f"no other target constrains {', '.join(self.held)}")
        if self.short:
            others, numbers, free = self.short
            out.append(f"{', '.join(others)} give {numbers} numbers for the {free} free parameters they share")
        return "; ".join(out)


@dataclass
class LeaveOneOut:
    """The leave-one-out of one prior: its rows (target order), the refits made, the free parameters."""

    prior_path: Path
    rows: list[LooRow]
    refits: int
    free: list[str]
    constrains: dict[str, list[str]]


def prior_of(cal: str | Path) -> Path:
    """The prior whose fit a leave-one-out repeats: ``cal`` itself when it has a ``fit`` section, else
    the prior its ``fitted.from`` names (as written: relative to the working folder or the project's
    root). Raises ConfigError naming ``cal`` when neither is there."""
    from twin.bundled import bundled_path
    cal = Path(cal)
    doc = load_yaml(cal)
    if isinstance(doc, dict) and isinstance(doc.get("fit"), dict):
        return cal
    fitted = doc.get("fitted") if isinstance(doc, dict) else None
    src = fitted.get("from") if isinstance(fitted, dict) else None
    if isinstance(src, str):
        for p in (Path(src), bundled_path(".") / src, cal.parent / Path(src).name, cal.parent.parent / Path(src).name):
            if p.is_file():
                return p
        raise ConfigError(cal, "fitted.from", src, "the prior it was fitted from is not there; name the prior")
    raise ConfigError(cal, "fit", None, "neither a fit section nor a fitted.from prior: nothing was fitted, "
                      "nothing to leave out")


@dataclass
class _Path:
    """What differs between the card path's fit and the RoCE path's: the fit, one consumer's
    simulated round trips (ps), the settle step after new values (ties), the targets."""

    prior: object
    calibrate: Callable
    simulate: Callable[[object, str, int], np.ndarray]
    settle: Callable
    targets: list[tuple[str, str]]


def _card(prior_path: Path) -> _Path:
    from twin.calibration.measured import load_measured
    from twin.calibration.params import load_params
    from twin.calibration.targets import prior_targets
    from twin.fitting.fit import _apply_ties, calibrate, derive_link_stage, simulate
    prior = load_params(prior_path)
    measured = load_measured(prior_path.parent / prior.fit.measured)
    frame, seed = measured.setup.frame_bytes, prior.fit.seed
    return _Path(_apply_ties(derive_link_stage(prior, measured)), calibrate,
                 lambda p, c, n: simulate(p, c, n, seed, frame), _apply_ties, prior_targets(prior.fit))


def _roce(prior_path: Path) -> _Path:
    from twin.calibration.roce import load_roce_params
    from twin.fitting.roce import calibrate_roce, roce_targets, simulate_roce
    from twin.units import period_ps
    prior = load_roce_params(prior_path)
    from twin.calibration.roce import load_roce_measured
    measured = load_roce_measured(prior_path.parent / prior.fit.measured)
    clk, spec = period_ps(prior.controller.clock), prior.fit
    return _Path(prior, calibrate_roce,
                 lambda p, c, n: simulate_roce(p, c, n, spec.seed, measured.frame_bytes, clk, spec.switch_hops),
                 lambda p: p, roce_targets(prior, prior_path))


def constraints(path: _Path, rounds: int = 2000) -> dict[str, list[str]]:
    """For each free parameter of the prior's fit groups, the target consumers whose simulated round
    trips (``rounds`` rounds, the fit's seed) differ between the parameter at the low and the high end
    of its bounds, every other value the prior's (ties applied)."""
    consumers = list(dict.fromkeys(c for c, _ in path.targets))
    out: dict[str, list[str]] = {}
    for group in path.prior.fit.groups:  # type: ignore[attr-defined]
        for key, bounds in group.free.items():
            lo = path.settle(path.prior.with_values({key: group.snap(key, bounds[0])}))  # type: ignore[attr-defined]
            hi = path.settle(path.prior.with_values({key: group.snap(key, bounds[1])}))  # type: ignore[attr-defined]
            out[key] = [c for c in consumers
                        if not np.array_equal(path.simulate(lo, c, rounds), path.simulate(hi, c, rounds))]
    return out


def underdetermined(c: str, deps: dict[str, list[str]], targets: list[tuple[str, str]],
                    held: list[str]) -> tuple[list[str], int, int] | None:
    """Without target ``c``: the targets connected to ``c``'s fitted parameters (those ``deps`` says
    act on ``c``, less ``held``) through shared parameters, their measured numbers and the free
    parameters they depend on, when the numbers are fewer (a necessary condition fails: those
    parameters cannot all be fitted without ``c``); None when they are not."""
    free = {k: set(v) - {c} for k, v in deps.items() if k not in held}
    params = {k for k, v in deps.items() if c in v and k in free}
    others: set[str] = set()
    while True:
        grown = others | {t for k in params for t in free[k]}
        params |= {k for k, v in free.items() if v & grown}
        if grown == others:
            break
        others = grown
    numbers = sum(1 for t, _ in targets if t in others)
    if not others or numbers >= len(params):
        return None
    return [t for t in dict.fromkeys(t for t, _ in targets) if t in others], numbers, len(params)


def leave_one_out(cal: str | Path, *, rounds: int | None = None, maxiter: int | None = None,
                  popsize: int | None = None, log: Callable[[str], None] = print,
                  progress: Callable[[str, int, int], None] | None = None) -> LeaveOneOut:
    """The in-sample fit of ``cal``'s prior (:func:`prior_of`), then one refit per target consumer
    without it (module docstring); ``rounds``/``maxiter``/``popsize`` override the prior's (all fits
    alike). ``progress(label, done, total)``: the fit's generations, ``label`` naming the refit.
    Raises ConfigError (a file that does not load, no prior) or ValueError (the fit's)."""
    from twin.calibration.roce import is_roce_file
    prior_path = prior_of(cal)
    path = (_roce if is_roce_file(prior_path) else _card)(prior_path)
    deps = constraints(path, min(rounds or 2000, 2000))
    free = list(deps)
    consumers = list(dict.fromkeys(c for c, _ in path.targets))
    n = len(consumers) + 1

    def fit(i: int, label: str, leave_out=(), hold=()):
        log(f"fit {i}/{n}: {label}")
        prog = (lambda g, d, t: progress(f"{i}/{n} {label}, {g}", d, t)) if progress else None
        return path.calibrate(path.prior, prior_path, log=lambda s: log(f"  {s}"), rounds=rounds, maxiter=maxiter,
                              popsize=popsize, progress=prog, leave_out=leave_out, hold=hold)

    def at(result, c: str, s: str) -> float:
        return next(r.model_ns for r in result.residuals if r.consumer == c and r.stat == s)

    full = fit(1, "in sample (every target)")
    rows = []
    for i, c in enumerate(consumers, 2):
        held = [k for k in free if set(deps[k]) <= {c}]
        short = underdetermined(c, deps, path.targets, held)
        out = fit(i, f"without {c}", leave_out={c}, hold=set(held))
        for tc, s in path.targets:
            if tc == c:
                measured = next(r.measured_ns for r in full.residuals if r.consumer == c and r.stat == s)
                rows.append(LooRow(c, s, measured, at(full, c, s), at(out, c, s), held, short))
    return LeaveOneOut(prior_path, rows, n - 1, free, deps)
