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
