"""The RoCE v2 path's fit: its parameter set (:class:`twin.calibration.roce.RoceParamSet`) fitted to a
published summary (min/p50/p99/p99.9, and a maximum where given) by simulating each consumer's closed
loop on the direct engine (:func:`simulate_roce`) with the card path's objective
(:mod:`twin.fitting.fit`). Numbers of the published summary: ``calibrations/measured/backline_roce.yaml``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from twin.calibration.params import (
    FitGroup,
)
from twin.calibration.roce import STAT_Q, RoceParamSet, load_roce_measured
from twin.devices.generator import TrafficParams
from twin.fitting.fit import Residual, fit_groups, miss
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
                   progress: Callable[[str, int, int], None] | None = None) -> RoceFitResult:
    """Fit ``prior``'s free parameters to its measurement file, group by group.

    Objective per consumer and fitted statistic: :func:`twin.fitting.fit.miss` (squared error
    in histogram bins plus squared rank distance), the same as the card path's; ``min`` is the 0th
    percentile. Search: differential evolution then the coordinate polish, with common random
    numbers (``fit.seed``). Raises ValueError when the prior has no fit section or a consumer has no
    measured row. ``progress``: :func:`twin.fitting.fit.fit_groups`'s.
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
            have = measured.consumers[c].stats_ps()
            for s in spec.stats:
                if s in have:
                    err += miss(rtt, STAT_Q[s], have[s], bin_ps)
        return err

    params, values, evaluations, objectives = fit_groups(
        prior, spec.groups, group_error, measured.consumers, spec.measured, seed=spec.seed, maxiter=maxiter,
        popsize=popsize, log=log, progress=progress)
    residuals = []
    for c, row in measured.consumers.items():
        if c not in params.consumers:
            continue
        rtt = simulate_roce(params, c, rounds, spec.seed, measured.frame_bytes, clk, spec.switch_hops)
        for s, v in row.stats_ps().items():
            residuals.append(Residual(c, s, v / 1000, percentile_ps(rtt, STAT_Q[s]) / 1000))
    return RoceFitResult(params, values, residuals, evaluations, objectives)


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
        "free_parameter_names": list(result.values),
        "validated_on": [],  # none held out by the fit
    }
    return data
