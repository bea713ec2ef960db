"""``twin validate CAL RUN ...``: a calibration's predictions against live runs it was not fitted on.

For each run folder (a ``twin run`` output with a live node: results.json + live_rounds.npz), the
calibration's consumer (``--consumer``, default ``<node>_fitted``) stands where the live node stood:
the run's scenario (slots, traffic and its gaps, control), frame bytes, function and encoding
(:func:`twin.fitting.live.simulate_run`), as many rounds as the run kept (at least
:data:`MIN_ROUNDS`), seed ``seed``. The comparison (:func:`twin.calibration.distribution.compare`):
p50/p90/p99 error, W1 (ns and % of p50), KS and the number of histogram modes, on the run's round
trips with its stalled rounds left out (:func:`twin.devices.isolation.find_stalls`; their count
is reported).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from twin.calibration.distribution import Comparison, compare
from twin.calibration.params import ParamSet, load_params
from twin.config import ConfigError
from twin.fitting.live import simulate_run
from twin.fitting.live_runs import LiveRun, load_run

MIN_ROUNDS = 20_000


@dataclass
class Validation:
    """One run checked: the run, the consumer, the comparison, the predicted round trips (ps)."""

    run: LiveRun
    consumer: str
    comparison: Comparison
    predicted_ps: np.ndarray


def pick_consumer(params: ParamSet, run: LiveRun, consumer: str | None, cal: Path) -> str:
    """``consumer`` or the run node's ``<node>_fitted``; raises ConfigError naming CAL when absent."""
    name = consumer or f"{run.summary['node']}_fitted"
    if name not in params.consumers:
        raise ConfigError(cal, "consumers", name, f"no such consumer (have: {', '.join(params.consumers)}); "
                          "pass --consumer")
    return name


VALIDATE_HINT = "pass it (twin validate CAL RUN --scenario SCENARIO)"


def prepare(cal: str | Path, runs: list, consumer: str | None = None, scenario: str | Path | None = None
            ) -> tuple[ParamSet, list[LiveRun], list[str]]:
    """Everything that can be refused before a prediction: calibration ``cal`` loaded, each run
    folder of ``runs`` loaded (:func:`twin.fitting.live_runs.load_run`) and the consumer that stands
    for its live node (:func:`pick_consumer`). Raises ConfigError."""
    cal = Path(cal)
    params = load_params(cal)
    loaded = [load_run(Path(path), scenario, hint=VALIDATE_HINT) for path in runs]
    return params, loaded, [pick_consumer(params, lr, consumer, cal) for lr in loaded]


def validate(cal: str | Path, runs: list, consumer: str | None = None, scenario: str | Path | None = None,
             seed: int = 7, rounds: int | None = None, progress=None, prepared=None) -> list[Validation]:
    """Check calibration ``cal`` on every run folder of ``runs`` (module docstring); ``progress(i,
    n)`` after each run; ``prepared``: :func:`prepare`'s answer for these arguments, when the caller
    loaded them already. Raises ConfigError for a calibration or run that does not load."""
    params, loaded, names = prepared or prepare(cal, runs, consumer, scenario)
    out = []
    for i, (lr, name) in enumerate(zip(loaded, names)):
        n = rounds or max(MIN_ROUNDS, len(lr.clean_rtt_ps))
        pred = simulate_run(params, name, lr, n, seed).rtt_ps
        out.append(Validation(lr, name, compare(lr.clean_rtt_ps, pred), pred))
        if progress:
            progress(i + 1, len(loaded))
    return out


P50_GOAL_PCT = 3.0  # issue 30's acceptance for a held-out live run: p50 within 3 % ...
W1_GOAL_PCT = 2.0  # ... and W1 at most 2 % of the measured p50


def heldout_rows(cal: str | Path, runs: list, seed: int = 7, progress=None) -> list[dict]:
    """The held-out table of calibration ``cal`` on live ``runs`` (:func:`validate`, seed ``seed``):
    per run its folder's name, measured and predicted card-boundary p50 (ns), p50 error (%), W1 (% of
    the measured p50) and whether each meets :data:`P50_GOAL_PCT` / :data:`W1_GOAL_PCT`. Every row is
    a prediction: the caller passes runs ``cal`` was not fitted on (its ``fitted.validated_on``)."""
    rows = []
    for v in validate(cal, runs, seed=seed, progress=progress):
        c = v.comparison
        err = c.error_pct("p50")
        rows.append({"run": v.run.path.name, "p50_measured_ns": round(c.p50_ns, 1),
                     "p50_predicted_ns": round(c.rows[0][2], 1), "p50_error_pct": round(err, 2),
                     "w1_pct": round(c.w1_pct, 2), "p50_met": abs(err) <= P50_GOAL_PCT,
                     "w1_met": c.w1_pct <= W1_GOAL_PCT})
    return rows


def heldout_markdown(tables: dict[str, list[dict]]) -> str:
    """``tables`` (device label -> :func:`heldout_rows`) as one markdown table (µs, %, met or not)."""
    out = ["| device | held-out run | p50 measured → predicted | p50 error | W1/p50 | p50 ≤ 3 % | W1 ≤ 2 % |",
           "|---|---|---|---:|---:|---|---|"]
    for device, rows in tables.items():
        for r in rows:
            p50 = f"{r['p50_measured_ns'] / 1e3:.3f} → {r['p50_predicted_ns'] / 1e3:.3f} µs"
            out.append(f"| {device} | {r['run']} | {p50} | {r['p50_error_pct']:+.2f} % | {r['w1_pct']:.2f} % "
                       f"| {'met' if r['p50_met'] else 'not met'} | {'met' if r['w1_met'] else 'not met'} |")
    return "\n".join(out)
