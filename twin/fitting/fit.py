"""Fit a parameter set's free parameters to measured percentiles (``twin calibrate``).

The objective for a group is, summed over its consumers and over p50 and p90, the squared error
of the percentile in units of the measurement's histogram bin (4 ns: every published percentile
is a bucket) plus the squared distance, in probability, from the percentile's rank to the range
of ranks the measured bucket holds in the model (zero once the percentile is in the bucket; it
tells the search how far off a miss is, at the resolution of one round). Each consumer is
simulated with the direct engine over ``fit.rounds`` rounds at ``fit.seed`` (common
random numbers, so the objective is a deterministic function of the parameters). Percentiles of
4 ns-quantised round trips are step functions of the parameters, so the search is
:func:`scipy.optimize.differential_evolution`, which needs no gradient. Groups are fitted in
order; ties are applied after each group, so a later group sees earlier results.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Container, TypeVar

import numpy as np

from twin.calibration.measured import Measured, load_measured
from twin.calibration.params import FitGroup, ParamSet, _DottedParams
from twin.calibration.targets import prior_targets, targets_record
from twin.devices.generator import TrafficParams
from twin.engine.direct import run_direct
from twin.stats import percentile_ps
from twin.units import time_ps

P = TypeVar("P", bound=_DottedParams)  # a parameter set: ParamSet or RoceParamSet


@dataclass
class Residual:
    """One measured number beside the fitted model's value."""

    consumer: str
    stat: str
    measured_ns: float
    model_ns: float

    @property
    def error_pct(self) -> float:
        """100 * (model - measured) / measured."""
        return 100.0 * (self.model_ns - self.measured_ns) / self.measured_ns


@dataclass
class FitResult:
    """The fitted parameter set, its residuals and the bookkeeping of the fit."""

    params: ParamSet
    values: dict[str, float]
    residuals: list[Residual]
    n_measured: int
    n_free: int
    n_tied: int
    evaluations: int
    group_objectives: list[float] = field(default_factory=list)


def simulate(params: ParamSet, consumer: str, rounds: int, seed: int, frame_bytes: int) -> np.ndarray:
    """Card-boundary round trips (ps) of one consumer, closed loop on the card clock."""
    tr = TrafficParams(mode="closed_loop", rounds=rounds, frame_bytes=frame_bytes)
    from twin.scenario.compile import flow_spec
    return run_direct(flow_spec(params, consumer, tr, seed)).rtt_ps


def predict(params: ParamSet, consumer: str, rounds: int, seed: int, frame_bytes: int) -> tuple[float, float]:
    """Simulated (p50, p90) in ns for one consumer, closed loop on the card clock."""
    rtt = simulate(params, consumer, rounds, seed, frame_bytes)
    return percentile_ps(rtt, 50) / 1000, percentile_ps(rtt, 90) / 1000


def miss(rtt_ps: np.ndarray, q: float, measured_ps: int, bin_ps: int) -> float:
    """Objective term for one measured percentile: (percentile error in bins)^2 plus (distance
    of rank ``q`` (percent) from the ranks the measured bucket holds in the model)^2."""
    srt = np.sort(rtt_ps)
    lo = measured_ps - measured_ps % bin_ps
    f_lo = np.searchsorted(srt, lo, side="left") / len(srt)
    f_hi = np.searchsorted(srt, lo + bin_ps, side="left") / len(srt)
    qf = q / 100
    dist = max(0.0, f_lo - qf, qf - f_hi)
    return ((percentile_ps(rtt_ps, q) - measured_ps) / bin_ps) ** 2 + dist ** 2


def _apply_ties(params: ParamSet) -> ParamSet:
    tie = params.fit.tie if params.fit else {}
    return params.with_values({dst: params.get(src) for dst, src in tie.items()}) if tie else params


def derive_link_stage(params: ParamSet, measured: Measured) -> ParamSet:
    """Set ``aurora.link_stage_ns`` so that a 64-byte frame and its reply spend the measured
    ``link_round_trip`` across the cable and both cards' link stages:
    ``stage = round_trip / 2 - serialisation(frame)``."""
    if "link_round_trip" not in measured.interconnect:
        return params
    link = params.aurora.model_copy(update={"link_stage_ns": 0.0}).link()
    ser_ps = link.serialise_ps(measured.setup.frame_bytes)
    stage_ps = measured.interconnect_ps("link_round_trip") / 2 - ser_ps
    if stage_ps < 0:
        raise ValueError("the measured link round trip is shorter than the frame's serialisation")
    return params.with_values({"aurora.link_stage_ns": round(stage_ps / 1000, 3)})


def _polish(objective: Callable[[np.ndarray], float], x: list[float], bounds: list[tuple[float, float]],
            fun: float, passes: int = 2) -> tuple[list[float], float]:
    """Coordinate search on a step-function objective: for each parameter try moves of 1, 2, 4,
    ... 64 small steps (1/4000 of its range) either way and keep any that lowers the objective.
    Differential evolution finds the basin; this lands on a plateau inside it (a percentile
    moving into the measured 4 ns bucket is a plateau a population rarely samples)."""
    x = list(x)
    for _ in range(passes):
        improved = False
        for i, (lo, hi) in enumerate(bounds):
            step = (hi - lo) / 4000
            for k in (1, 2, 4, 8, 16, 32, 64):
                for sign in (1, -1):
                    trial = list(x)
                    trial[i] = min(max(x[i] + sign * k * step, lo), hi)
                    f = objective(np.array(trial))
                    if f < fun:
                        x, fun, improved = trial, f, True
        if not improved or fun == 0:
            break
    return x, fun


def fit_estimate(params: P, groups: list[FitGroup], group_error: Callable[[P, FitGroup], float],
                 settle: Callable[[P], P], maxiter: int, popsize: int) -> str:
    """The fit's time estimate, one line, before it starts: each group's objective evaluated twice, the second
    timed (at its bounds' midpoint, on this machine: the engine speed for the fit's rounds) times the most
    evaluations the search makes, ``(maxiter + 1) x population`` (differential evolution; its Sobol
    start rounds ``popsize x free`` up to a power of two) plus
    ``2 x 14 x free`` (:func:`_polish`). The timed evaluations are not the fit's (its results stay the
    same: the objective is deterministic)."""
    import time
    most, seconds = 0, 0.0
    for group in groups:
        free = len(group.free)
        trial = settle(params.with_values({k: group.snap(k, (b[0] + b[1]) / 2) for k, b in group.free.items()}))
        group_error(trial, group)  # the first call warms caches (compiled engine, tables): not timed
        t0 = time.perf_counter()
        group_error(trial, group)
        per = time.perf_counter() - t0
        population = 1 << max(0, (popsize * free - 1).bit_length())  # a Sobol start: a power of two
        n = (maxiter + 1) * population + 2 * 14 * free
        most, seconds = most + n, seconds + n * per
    took = f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.1f} s"
    return (f"{len(groups)} fit group(s), at most {most:,} model evaluations (maxiter {maxiter}, popsize "
            f"{popsize}); one evaluation timed per group: about {took} on this machine")


def fit_groups(params: P, groups: list[FitGroup], group_error: Callable[[P, FitGroup], float],
               measured_consumers: Container[str], measured_name: str, *, seed: int, maxiter: int, popsize: int,
               settle: Callable[[P], P] = lambda p: p,
               log: Callable[[str], None] = print,
               progress: Callable[[str, int, int], None] | None = None) -> tuple[P, dict[str, float], int, list[float]]:
    """Fit ``groups`` in order, each group's free parameters by differential evolution (seed
    ``seed + group index``, ``maxiter``, ``popsize``, Sobol start, no scipy polish) then
    :func:`_polish`; a later group starts from the earlier groups' results. ``group_error(trial,
    group)`` is the objective for a trial parameter set (common random numbers make it
    deterministic); each trial's values are snapped to the group's steps and passed through
    ``settle`` (e.g. applying ties). Fitted values are rounded to 3 decimals. Used by
    :func:`calibrate` (card path) and :func:`twin.fitting.roce.calibrate_roce`.

    ``progress(label, generations done, maxiter)`` after each generation of a group's search
    (``label`` "group i/n: consumers"; done = maxiter when the search ends, converged or not).

    Returns ``(fitted params, {dotted path: value}, objective evaluations, final objective per
    group)``. Raises ValueError when a group's consumer is not in ``measured_consumers`` (named
    by ``measured_name``)."""
    values: dict[str, float] = {}
    evaluations = 0
    objectives = []
    log(fit_estimate(params, groups, group_error, settle, maxiter, popsize))
    for gi, group in enumerate(groups):
        keys = list(group.free)
        bounds = [tuple(group.free[k][:2]) for k in keys]
        for c in group.consumers:
            if c not in measured_consumers:
                raise ValueError(f"fit group {gi}: consumer {c!r} has no measured row in {measured_name}")

        def objective(x: np.ndarray, keys=keys, group=group) -> float:
            nonlocal evaluations
            evaluations += 1
            return group_error(settle(params.with_values({k: group.snap(k, v) for k, v in zip(keys, x)})), group)

        log(f"fitting group {gi + 1}/{len(groups)}: {', '.join(group.consumers)} ({len(keys)} free)")
        label = f"group {gi + 1}/{len(groups)}: {', '.join(group.consumers)}"
        generations = [0]

        def generation(*_, label=label) -> None:  # returns None: never stops the search
            generations[0] += 1
            progress(label, generations[0], maxiter)
        from scipy.optimize import differential_evolution  # here: `twin run` imports this module, never fits
        res = differential_evolution(objective, bounds, seed=seed + gi, maxiter=maxiter, popsize=popsize,
                                     tol=1e-10, polish=False, init="sobol", callback=generation if progress else None)
        if progress:
            progress(label, maxiter, maxiter)
        x, fun = _polish(objective, list(res.x), bounds, float(res.fun))
        log(f"  objective {res.fun:.3e} after {res.nfev} evaluations; {fun:.3e} after polishing")
        best = {k: round(group.snap(k, v), 3) for k, v in zip(keys, x)}
        values.update(best)
        params = settle(params.with_values(best))
        objectives.append(fun)
    return params, values, evaluations, objectives


def narrowed(groups: list[FitGroup], leave_out: Container[str] = (), hold: Container[str] = ()) -> list[FitGroup]:
    """The fit groups of a refit without the consumers ``leave_out`` (their measured numbers are
    not in the objective) and with the free parameters ``hold`` not fitted (they keep the prior's
    value); a group left with no consumer or no free parameter is dropped. The groups themselves when
    both are empty (the ordinary fit)."""
    out = []
    for g in groups:
        consumers = [c for c in g.consumers if c not in leave_out]
        free = {k: v for k, v in g.free.items() if k not in hold}
        if consumers and free:
            out.append(g.model_copy(update={"consumers": consumers, "free": free}))
    return out


def calibrate(prior: ParamSet, prior_path: Path, log: Callable[[str], None] = print,
              rounds: int | None = None, maxiter: int | None = None, popsize: int | None = None,
              progress: Callable[[str, int, int], None] | None = None,
              leave_out: Container[str] = (), hold: Container[str] = ()) -> FitResult:
    """Fit ``prior``'s free parameters to the measurement file its ``fit.measured`` names
    (relative to ``prior_path``'s folder). ``rounds``/``maxiter``/``popsize`` override the
    file's settings (smaller values for a quick check); ``progress``: :func:`fit_groups`'s.
    ``leave_out``, ``hold``: :func:`narrowed` (a leave-one-out refit, :mod:`twin.fitting.loo`);
    the residuals are of every measured consumer, left out or not. Returns a :class:`FitResult`."""
    if prior.fit is None:
        raise ValueError(f"{prior_path}: no 'fit' section: nothing to calibrate")
    spec = prior.fit
    measured = load_measured(Path(prior_path).parent / spec.measured)
    rounds = rounds or spec.rounds
    maxiter = maxiter or spec.maxiter
    popsize = popsize or spec.popsize
    frame = measured.setup.frame_bytes
    bin_ps = time_ps(measured.setup.bin)
    params = _apply_ties(derive_link_stage(prior, measured))

    def group_error(trial: ParamSet, group: FitGroup) -> float:
        err = 0.0
        for c in group.consumers:
            row = measured.consumers[c]
            rtt = simulate(trial, c, rounds, spec.seed, frame)
            err += miss(rtt, 50, row.p50_ps, bin_ps) + miss(rtt, 90, row.p90_ps, bin_ps)
        return err

    params, values, evaluations, objectives = fit_groups(
        params, narrowed(spec.groups, leave_out, hold), group_error, measured.consumers, spec.measured,
        seed=spec.seed, maxiter=maxiter, popsize=popsize, settle=_apply_ties, log=log, progress=progress)
    residuals = []
    for c, row in measured.consumers.items():
        if c not in params.consumers:
            continue
        p50, p90 = predict(params, c, rounds, spec.seed, frame)
        residuals += [Residual(c, "p50", row.p50_ps / 1000, p50), Residual(c, "p90", row.p90_ps / 1000, p90)]
    return FitResult(params=params, values=values, residuals=residuals, n_measured=len(residuals),
                     n_free=len(values), n_tied=len(spec.tie), evaluations=evaluations,
                     group_objectives=objectives)


def fitted_document(result: FitResult, prior_path: Path, measured_path: str) -> dict:
    """The fitted parameter set as a YAML-ready mapping: values, provenance, residuals."""
    p = result.params
    data = p.model_dump(exclude={"fit", "fitted"}, exclude_none=True)
    prov = dict(p.provenance)
    for key, v in result.values.items():
        prov[key] = f"fitted: twin calibrate to {measured_path}"
    if p.fit:
        for dst, src in p.fit.tie.items():
            prov[dst] = f"tied: equal to {src} (see the tie in {prior_path})"
    prov["aurora.link_stage_ns"] = f"derived: link_round_trip / 2 - serialisation(64 B frame), {measured_path}"
    data["provenance"] = prov
    data["fitted"] = {
        "from": str(prior_path),
        "measured": measured_path,
        "measured_numbers": result.n_measured,
        "free_parameters": result.n_free,
        "tied_parameters": result.n_tied,
        "evaluations": result.evaluations,
        "values": result.values,
        "residuals": [{"consumer": r.consumer, "stat": r.stat, "measured_ns": r.measured_ns,
                       "model_ns": r.model_ns, "error_pct": round(r.error_pct, 3)} for r in result.residuals],
        "targets": f"p50 and p90 of every consumer in {measured_path} (4 ns buckets), squared errors in bins",
        "fit_targets": targets_record(prior_targets(p.fit)) if p.fit else [],
        "free_parameter_names": list(result.values),
        "validated_on": [],  # none held out by the fit: `twin validate CAL RUN ...` checks it on runs
    }
    return data
