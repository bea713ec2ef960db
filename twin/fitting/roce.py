"""The RoCE v2 path's fit: its parameter set (:class:`twin.calibration.roce.RoceParamSet`) fitted to a
published summary (min/p50/p99/p99.9, and a maximum where given) by simulating each consumer's closed
loop on the direct engine (:func:`simulate_roce`) with the card path's objective
(:mod:`twin.fitting.fit`). Numbers of the published summary: ``calibrations/measured/backline_roce.yaml``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Container

import numpy as np

from twin.calibration.params import (
    FitGroup,
)
from twin.calibration.roce import RoceParamSet, load_roce_measured
from twin.calibration.targets import prior_targets, targets_record
from twin.devices.generator import TrafficParams
from twin.fitting.fit import Residual, fit_groups, miss, narrowed
from twin.stats import percentile_ps
from twin.units import period_ps, time_ps


def simulate_roce(params: RoceParamSet, consumer: str, rounds: int, seed: int, frame_bytes: int,
                  clock_ps: int, switch_hops: int = 0) -> np.ndarray:
    """Round trips (ps) of one consumer, closed loop on the controller's clock (direct engine),
    with ``switch_hops`` switches on the route."""
    from twin.engine.direct import run_direct
    tr = TrafficParams(mode="closed_loop", rounds=rounds, frame_bytes=frame_bytes, clock_ps=clock_ps)
    from twin.scenario.compile import flow_spec
    return run_direct(flow_spec(params, consumer, tr, seed, switch_hops=switch_hops)).rtt_ps


@dataclass
class RoceFitResult:
    """The fitted set, its residuals and the bookkeeping of the fit."""

    params: RoceParamSet
    values: dict[str, float]
    residuals: list[Residual]
    evaluations: int
    group_objectives: list[float] = field(default_factory=list)


def calibrate_roce(prior: RoceParamSet, prior_path: Path, log: Callable[[str], None] = print,
                   rounds: int | None = None, maxiter: int | None = None,
                   popsize: int | None = None,
                   progress: Callable[[str, int, int], None] | None = None,
                   leave_out: Container[str] = (), hold: Container[str] = ()) -> RoceFitResult:
    """Fit ``prior``'s free parameters to its measurement file, group by group.

    Objective per consumer and fitted statistic: :func:`twin.fitting.fit.miss` (squared error
    in histogram bins plus squared rank distance), the same as the card path's; ``min`` is the 0th
    percentile. Search: differential evolution then the coordinate polish, with common random
    numbers (``fit.seed``); ``max`` at the published N (:meth:`RoceMeasuredRow.quantile`). Raises
    ValueError when the prior has no fit section or a consumer has no measured row, ConfigError when
    ``rounds`` is fewer than a fitted maximum's N. ``progress``: :func:`twin.fitting.fit.fit_groups`'s.
    ``leave_out``, ``hold``: :func:`twin.fitting.fit.narrowed` (a leave-one-out refit,
    :mod:`twin.fitting.loo`); the residuals are of every measured consumer, left out or not.
    """
    if prior.fit is None:
        raise ValueError(f"{prior_path}: no 'fit' section: nothing to calibrate")
    spec = prior.fit
    measured = load_roce_measured(Path(prior_path).parent / spec.measured)
    rounds = rounds or spec.rounds
    maxiter = maxiter or spec.maxiter
    popsize = popsize or spec.popsize
    bin_ps = time_ps(measured.bin)
    clk = period_ps(prior.controller.clock)

    def group_error(trial: RoceParamSet, group: FitGroup) -> float:
        err = 0.0
        for c in group.consumers:
            rtt = simulate_roce(trial, c, rounds, spec.seed, measured.frame_bytes, clk, spec.switch_hops)
            row = measured.consumers[c]
            have = row.stats_ps()
            for s in spec.stats:
                if s in have:
                    err += miss(rtt, row.quantile(s), have[s], bin_ps)
        return err

    for group in spec.groups:  # a maximum over N rounds is fitted at N: the fit's rounds must hold N draws
        for c in group.consumers:
            row = measured.consumers.get(c)
            if row is not None and "max" in spec.stats and row.max_samples and rounds < row.max_samples:
                from twin.config import ConfigError
                raise ConfigError(prior_path, "fit.rounds", rounds, f"fewer than the {row.max_samples:,} rounds "
                                  f"{c}'s published max was taken over (max_samples): fit at least that many "
                                  "(fit.rounds or --rounds)")

    params, values, evaluations, objectives = fit_groups(
        prior, narrowed(spec.groups, leave_out, hold), group_error, measured.consumers, spec.measured,
        seed=spec.seed, maxiter=maxiter, popsize=popsize, log=log, progress=progress)
    residuals = []
    for c, row in measured.consumers.items():
        if c not in params.consumers:
            continue
        rtt = simulate_roce(params, c, rounds, spec.seed, measured.frame_bytes, clk, spec.switch_hops)
        for s, v in row.stats_ps().items():
            residuals.append(Residual(c, s, v / 1000, percentile_ps(rtt, row.quantile(s)) / 1000))
    return RoceFitResult(params, values, residuals, evaluations, objectives)


def roce_targets(params: RoceParamSet, prior_path: Path) -> list[tuple[str, str]]:
    """``(consumer, stat)`` of every published number the RoCE prior's fit matches
    (:func:`twin.calibration.targets.prior_targets`: ``fit.stats`` that the measured row holds)."""
    if params.fit is None:
        return []
    measured = load_roce_measured(Path(prior_path).parent / params.fit.measured)
    return prior_targets(params.fit, {c: set(r.stats_ps()) for c, r in measured.consumers.items()})


def roce_fitted_document(result: RoceFitResult, prior_path: Path, measured_path: str) -> dict:
    """The fitted RoCE set as a YAML-ready mapping: values, provenance, residuals."""
    data = result.params.model_dump(exclude={"fit", "fitted"}, exclude_none=True)
    prov = dict(result.params.provenance)
    for key in result.values:
        prov[key] = f"fitted: twin calibrate to {measured_path}"
    data["provenance"] = prov
    data["fitted"] = {
        "from": str(prior_path), "measured": measured_path,
        "measured_numbers": len(result.residuals), "free_parameters": len(result.values),
        "evaluations": result.evaluations, "values": result.values,
        "residuals": [{"consumer": r.consumer, "stat": r.stat, "measured_ns": r.measured_ns,
                       "model_ns": r.model_ns, "error_pct": round(r.error_pct, 3)} for r in result.residuals],
        "targets": f"the percentiles of every consumer in {measured_path}",
        "fit_targets": targets_record(roce_targets(result.params, prior_path)),
        "free_parameter_names": list(result.values),
        "validated_on": [],  # none held out by the fit
    }
    return data
