"""``twin calibrate --from-live RUN``: fit a consumer model to a live run's rounds.

The run folder (written by ``twin run`` on a scenario with a ``model: live`` node) holds
``results.json`` and ``live_rounds.npz`` (per-round card-boundary round trips of the live node).
The fit gives the live node a simulated stand-in: a new host ``<node>_fitted_host`` (a copy of the
device's host) and a new consumer ``<node>_fitted`` of the device's kind, on the same path and
encoding as the run, whose free parameters are

- ``poll_period_ns``: the consumer's poll period (a uniform wait for the request),
- ``service_ns``: a constant from seeing the request to the reply's first write,
- the host path's ``jitter_ns``: the scale of the exponential extra delay of each posted write.

Objective: the Wasserstein-1 distance between the simulated round trips (the direct engine,
``rounds`` rounds, seed ``fit_seed``) and the live ones, minimised by scipy's differential
evolution (seeded, so the fit is reproducible). The fitted set is validated on a fresh seed and
``rounds_check`` rounds: the table gives measured vs predicted p50/p90/p99, the Wasserstein-1
distance and the two-sample KS statistic. Other consumers and hosts are unchanged.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import differential_evolution
from scipy.stats import ks_2samp, wasserstein_distance

from twin.calibration.params import ParamSet, loop_spec
from twin.config import ConfigError
from twin.engine.direct import run_direct
from twin.output.live import NPZ
from twin.scenario import load_scenario
from twin.units import PS_PER_NS


@dataclass
class LiveFit:
    """The outcome: the fitted parameter set, the new consumer's name, the free values (ns),
    the comparison rows (stat, measured ns, predicted ns), W1 (ns), KS statistic, evaluations."""

    params: ParamSet
    consumer: str
    values: dict[str, float]
    rows: list[tuple[str, float, float]]
    w1_ns: float
    ks: float
    evaluations: int
    measured_rounds: int


def load_live_run(run: Path, node: str | None = None) -> tuple[dict, dict, np.ndarray]:
    """(results.json document, the live node's summary, its per-round rtt in ps). Raises
    ConfigError naming the file when the run has no live node (or not ``node``)."""
    res_path, npz_path = run / "results.json", run / NPZ
    for p in (res_path, npz_path):
        if not p.is_file():
            raise ConfigError(run, "RUN", str(run), f"not a live run folder: {p.name} is missing")
    doc = json.loads(res_path.read_text())
    live = [c for c in doc.get("consumers", []) if c.get("live")]
    if node is not None:
        live = [c for c in live if c["node"] == node]
    if not live:
        raise ConfigError(res_path, "consumers", node or "<any>", "no live consumer in this run")
    s = live[0]
    with np.load(npz_path) as z:
        key = f"{s['node']}.rtt_ps"
        if key not in z:
            raise ConfigError(npz_path, key, "<missing>", "no round trips for this node")
        rtt = z[key].astype(np.int64)
    if len(rtt) < 100:
        raise ConfigError(npz_path, f"{s['node']}.rtt_ps", len(rtt), "needs at least 100 rounds to fit")
    return doc, s, rtt


def run_scenario(run: Path, doc: dict, summary: dict) -> Path:
    """The scenario file a live run came from: the path ``twin run`` recorded (``live.scenario_file``
    in results.json), or for a run that recorded none ``scenarios/<name>.yaml`` beside the working
    folder or the source tree. Raises ConfigError (naming results.json) saying to pass SCENARIO when
    the recorded file is gone or there is none to find."""
    from twin.bundled import local_or_bundled
    res = run / "results.json"
    rec = summary.get("live", {}).get("scenario_file")
    if rec:
        if Path(rec).is_file():
            return Path(rec)
        raise ConfigError(res, "live.scenario_file", rec, "the run's scenario file is gone; pass SCENARIO "
                          "(twin calibrate --from-live RUN SCENARIO)")
    guess = local_or_bundled(f"scenarios/{doc['scenario']}.yaml")
    if not guess.is_file():
        raise ConfigError(res, "scenario", doc["scenario"], f"the run recorded no scenario file and there is no "
                          f"{guess}; pass SCENARIO (twin calibrate --from-live RUN SCENARIO)")
    return guess


def _live_set(base: ParamSet, device: str, node: str, encoding: str, v: dict[str, float],
              set_name: str = "") -> ParamSet:
    data = base.model_dump()
    dev = data["consumers"][device]
    host = dict(data["hosts"][dev["host"]])
    host["description"] = f"{dev['host']} with the {node} path fitted to a live run"
    path = dict(host[dev["path"]])
    path["jitter_ns"] = round(v["jitter_ns"], 3)
    host[dev["path"]] = path
    hname, cname = f"{node}_fitted_host", f"{node}_fitted"
    data["hosts"][hname] = host
    c = {"kind": dev["kind"], "device": f"{node}: live device, fitted", "host": hname, "path": dev["path"],
         "encoding": encoding, "poll_period_ns": round(v["poll_period_ns"], 3), "service_ns": round(v["service_ns"], 3),
         "piece_check_ns": 0.0, "fence_ns": 0.0}
    if dev["kind"] == "cpu":
        c["poll_cost_ns"] = 0.0
    elif dev["kind"] == "fpga":
        c = {**c, "kind": "gpu"}  # a live FPGA behind the bridge is fitted as a polling device
    data["consumers"][cname] = c
    data["fit"] = None
    data["fitted"] = None
    data["name"] = set_name or f"{base.name}_{node}_fitted"
    data["description"] = f"{base.description}; plus {cname}, fitted to a live run"
    return ParamSet.model_validate(data)


def calibrate_from_live(run: str | Path, scenario: str | Path | None = None, node: str | None = None,
                        rounds: int = 20_000, rounds_check: int = 100_000, maxiter: int = 30, popsize: int = 8,
                        fit_seed: int = 1, log=print) -> LiveFit:
    """Fit the live node of ``run`` (see module docstring). ``scenario``: the scenario file the run
    came from (default: the one the run recorded, :func:`run_scenario`)."""
    run = Path(run)
    doc, s, rtt = load_live_run(run, node)
    if scenario is None:
        scenario = run_scenario(run, doc, s)
    loaded = load_scenario(scenario)
    sc = loaded.scenario
    base = loaded.params
    device, node_name = s["name"], s["node"]
    encoding = s["encoding"]
    measured = rtt.astype(np.float64)
    traffic = sc.traffic_params(rounds)
    med = float(np.median(measured)) / PS_PER_NS
    bounds = [(1.0, max(50.0, med)), (0.0, med), (0.0, max(50.0, med / 4))]
    names = ("poll_period_ns", "service_ns", "jitter_ns")
    count = [0]

    def simulate(v: dict[str, float], n_traffic, seed) -> np.ndarray:
        ps = _live_set(base, device, node_name, encoding, v)
        spec = loop_spec(ps, f"{node_name}_fitted", n_traffic, seed, sc.slots, encoding, sc.external_control())
        return run_direct(spec).rtt_ps

    def objective(x) -> float:
        count[0] += 1
        sim = simulate(dict(zip(names, x)), traffic, fit_seed)
        return wasserstein_distance(sim, measured) / PS_PER_NS

    log(f"fitting {node_name}_fitted to {len(measured):,} live rounds of {run} (W1 objective, "
        f"{rounds:,} simulated rounds per evaluation)")
    r = differential_evolution(objective, bounds, seed=fit_seed, maxiter=maxiter, popsize=popsize, tol=1e-3,
                               polish=False)
    values = {k: float(v) for k, v in zip(names, r.x)}
    fitted = _live_set(base, device, node_name, encoding, values, f"{sc.name}_{node_name}_fitted")
    check = simulate(values, sc.traffic_params(rounds_check), fit_seed + 1000)
    rows = [(k, float(np.percentile(measured, q)) / 1000, float(np.percentile(check, q)) / 1000)
            for k, q in (("p50", 50), ("p90", 90), ("p99", 99))]
    return LiveFit(fitted, f"{node_name}_fitted", values, rows, wasserstein_distance(check, measured) / 1000,
                   float(ks_2samp(check, measured).statistic), count[0], len(measured))


def write_fitted(fit: LiveFit, out: Path, run: Path) -> None:
    """Write the fitted parameter set (YAML, like ``twin calibrate`` writes; whole or not at all:
    :func:`twin.output.files.write_file`)."""
    doc = fit.params.model_dump(exclude_none=True, exclude={"fit", "fitted"})
    doc["provenance"] = {**doc.get("provenance", {}),
                         fit.consumer: f"fitted by `twin calibrate --from-live {run}` to {fit.measured_rounds} "
                                       f"live rounds (W1 {fit.w1_ns:.1f} ns on a fresh seed)"}
    from twin.output.files import write_file
    write_file(out, "# Written by `twin calibrate --from-live`; do not edit by hand.\n"
               + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
