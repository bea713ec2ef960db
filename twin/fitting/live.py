"""``twin calibrate --from-live RUN [RUN ...] [--validate RUN ...]``: fit a consumer model to live runs.

The run folder (written by ``twin run`` on a scenario with a ``model: live`` node) holds
``results.json`` and ``live_rounds.npz`` (per-round card-boundary round trips of the live node);
:mod:`twin.fitting.live_runs` reads it (or a point measured in passes).
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

Several runs (:func:`calibrate_from_live`): the shape (poll period, jitter) and the service time
are fitted as above on the first run; on every other run the service time that fits it is the
first run's plus the translation of the simulated round trips that minimises W1
(:func:`twin.calibration.distribution.best_shift_ps`). Those service times are then explained:
over the runs whose simulated idle gap is short (back to back, under :data:`IDLE_GAP_NS`), by least squares
on frame bytes, reply bytes and one term per function other than the echo (a term the runs cannot
tell apart from another -- reply bytes of an echo are its frame bytes -- is left at 0 and said so);
over the runs with longer gaps, by an idle-cost table (the service above the back-to-back
prediction at each run's median idle gap, log-gap interpolated; the gap the device had on the wall
clock where the run recorded it, ``<node>.idle_ns``, else the simulated one). A histogram of the first run with
more than one mode adds its extra modes (:func:`twin.calibration.distribution.extra_modes`).
Stalled rounds and those queued behind them (:func:`twin.devices.isolation.find_live_stalls`) are
left out of every fit and check. With ``idle_prior`` the idle cost and the widening after a gap are
the device class's prior instead (:func:`_prior_terms`). Every simulated run keeps as many requests
in flight as the live run had (:func:`as_measured`: one on the paced loop).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import differential_evolution
from scipy.stats import wasserstein_distance

from twin.calibration.distribution import Comparison, best_shift_ps, compare, extra_modes, service_table
from twin.calibration.params import ParamSet, reply_bytes
from twin.config import ConfigError
from twin.engine.direct import run_direct
from twin.fitting.live_runs import LiveRun, load_run, plain_name
from twin.scenario import load_scenario
from twin.scenario.compile import flow_spec
from twin.units import PS_PER_NS

IDLE_GAP_NS = 10_000.0  # a run whose median idle gap is under 10 us is back to back for the service fit


@dataclass
class LiveFit:
    """The outcome: the fitted parameter set, the new consumer's name, the free values (ns),
    the comparison rows on the first run (stat, measured ns, predicted ns), W1 (ns), KS statistic,
    evaluations; ``checks``: (run, :class:`Comparison`, role "fitted" | "held out") for every run;
    ``notes``: what the runs could not tell apart, the modes found, the stalled rounds left out."""

    params: ParamSet
    consumer: str
    values: dict[str, float]
    rows: list[tuple[str, float, float]]
    w1_ns: float
    ks: float
    evaluations: int
    measured_rounds: int
    checks: list[tuple[LiveRun, Comparison, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    free: list[str] = field(default_factory=list)  # what the fit set from the runs (keys of the consumer, how)
    targets: str = ""  # what the fit matched, in words




def _default_name(run: LiveRun) -> str:
    """The fitted set's name for a run: ``<scenario>_<node>_fitted``, both read from the run folder
    (shared data) and each a plain name (:func:`twin.fitting.live_runs.plain_name`: no separator,
    no leading dot, so the file stays in the folder it is written to). Raises ConfigError naming
    results.json, the key and the value otherwise."""
    res = run.path / "results.json"
    for key, value in (("scenario", run.doc.get("scenario")), ("node", run.summary.get("node"))):
        try:
            plain_name(value if isinstance(value, str) else "")
        except ValueError as e:
            raise ConfigError(res, key, value if value is not None else "<missing>", str(e)) from None
    return f"{run.doc['scenario']}_{run.summary['node']}_fitted"


def load_run_scenario(run: LiveRun, given: bool = False):
    """The scenario ``run`` came from, loaded (:func:`twin.scenario.load_scenario`). Unless the user
    named it (``given``), its path is one the run folder recorded, so an error on it or a file it names
    shows none of their content (:func:`twin.config.named_input`: a shared run folder may record any
    readable file)."""
    if given:
        return load_scenario(run.scenario)
    from twin.config import named_input
    with named_input(run.path / "results.json", run.scenario):
        return load_scenario(run.scenario)


def as_measured(res, in_flight: int | None):
    """``res`` (a :class:`twin.engine.spec.LoopResult` of one consumer) as a live flow with
    ``in_flight`` requests in flight at most measures it. 1 (the paced loop of ``twin run``): a
    request that lands while the consumer still serves the one before is, live, written only when
    that reply is seen, and its round trip runs from then (``twin.engine.paced``: the flow's
    ``t_send``/``t_in`` follow the instant the request was written); so round ``k``'s ``t_send`` and
    ``t_in`` move by ``max(0, publish[k-1] - land[k])`` (ps). The consumer's own instants (hops) are
    unchanged: a single server takes request ``k`` after publishing ``k - 1`` either way, so the idle
    gaps the device had, and the service drawn after them, are the same. None: ``res`` unchanged."""
    from dataclasses import replace
    h = res.hops
    if in_flight != 1 or h is None or len(h.land) < 2:
        return res
    wait = np.zeros(len(h.land), np.int64)
    wait[1:] = np.maximum(0, np.asarray(h.publish[:-1], np.int64) - np.asarray(h.land[1:], np.int64))
    if not wait.any():
        return res
    return replace(res, t_send=res.t_send + wait, t_in=res.t_in + wait)


def simulate_run(ps: ParamSet, consumer: str, run: LiveRun, rounds: int, seed: int):
    """The direct engine's loop result for ``consumer`` of ``ps`` standing where ``run``'s live node
    stood: the run's scenario (slots, traffic and its gaps, control), frame bytes, function and
    encoding, over ``rounds`` rounds at ``seed``, with as many requests in flight as the run had
    (:attr:`LiveRun.in_flight`, :func:`as_measured`)."""
    from dataclasses import replace

    from twin.runtime.functions import lookup
    sc = load_run_scenario(run).scenario
    traffic = replace(sc.traffic_params(rounds), frame_bytes=run.frame_bytes)
    fid = lookup(run.function).id
    spec = flow_spec(ps, consumer, traffic, seed, slots=sc.slots, encoding=run.encoding,
                     external_control=sc.external_control(), function=fid)
    res = run_direct(spec, reply_bytes=None if fid == 0 else reply_bytes(fid, run.frame_bytes))
    return as_measured(res, run.in_flight)


def idle_gaps_ps(res, cost_ps: int) -> np.ndarray:
    """Per round (from the second): the consumer's idle gap, from its thread free after the previous
    reply (publish) to the poll that took the request (start minus the poll cost)."""
    h = res.hops
    return h.start[1:] - cost_ps - h.publish[:-1]


def _live_set(base: ParamSet, device: str, node: str, encoding: str, v: dict[str, float],
              set_name: str = "", extra: dict | None = None) -> ParamSet:
    """``base`` plus ``<node>_fitted_host`` and ``<node>_fitted`` with the fitted values ``v``
    (poll_period_ns, service_ns, jitter_ns) and ``extra`` consumer keys (service terms, idle, modes);
    without an ``idle`` of its own the stand-in says ``idle: none`` (its measured service already paid
    what idling cost the live device: the class prior would count it twice)."""
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
         "piece_check_ns": 0.0, "fence_ns": 0.0,
         # the live service measured is what the device paid, idling included: no class prior on top (a
         # Python-paced run idles tens of us a round); an idle of the fit's own (extra) replaces it
         "idle": "none"}
    if dev["kind"] == "cpu":
        c["poll_cost_ns"] = 0.0
    elif dev["kind"] == "fpga":
        c = {**c, "kind": "gpu"}  # a live FPGA behind the bridge is fitted as a polling device
    c.update(extra or {})
    data["consumers"][cname] = c
    data["fit"] = None
    data["fitted"] = None
    data["name"] = set_name or f"{base.name}_{node}_fitted"
    data["description"] = f"{base.description}; plus {cname}, fitted to a live run"
    return ParamSet.model_validate(data)



def _service_terms(runs: list[LiveRun], service: list[float], notes: list[str]) -> dict:
    """Least squares of the runs' service times (ns) on [1, frame bytes, reply bytes, function terms]
    (module docstring); returns the consumer keys service_ns, service_per_*_byte_ns, function_ns."""
    from twin.runtime.functions import lookup
    fns = sorted({r.function for r in runs} - {"echo"})
    cols = [("service_ns", lambda r: 1.0), ("service_per_frame_byte_ns", lambda r: float(r.frame_bytes)),
            ("service_per_reply_byte_ns", lambda r: float(reply_bytes(lookup(r.function).id, r.frame_bytes)))]
    cols += [(f"function_ns.{f}", lambda r, f=f: float(r.function == f)) for f in fns]
    keep: list[int] = []
    X = np.array([[c(r) for _, c in cols] for r in runs])
    for j in range(len(cols)):  # a column adds only what the earlier ones cannot already say
        if np.linalg.matrix_rank(X[:, keep + [j]]) > len(keep):
            keep.append(j)
        else:
            notes.append(f"{cols[j][0]}: not told apart by these runs (left at 0)")
    coef, *_ = np.linalg.lstsq(X[:, keep], np.asarray(service), rcond=None)
    out: dict = {"function_ns": {}}
    for j, v in zip(keep, coef):
        name = cols[j][0]
        if name.startswith("service_per") and v < 0:
            notes.append(f"{name}: fitted {v:.5f} ns/B < 0, set to 0")
            v = 0.0
        if name.startswith("function_ns."):
            out["function_ns"][name.split(".", 1)[1]] = round(float(v), 3)
        else:
            out[name] = round(float(v), 5 if name.startswith("service_per") else 3)
    out["service_ns"] = max(0.0, out.get("service_ns", 0.0))
    if not out["function_ns"]:
        del out["function_ns"]
    return out


def _idle_mix(table: list[dict], floor: float, runs: list[LiveRun], gaps: list[float], short_gap: float,
              notes: list[str]) -> dict:
    """The long-idle blocks and ``idle_mix`` of a service quantile table: the longest-gap run's
    measured service quantiles at the table's probabilities (blocks above ``floor``, ns) and, per
    run in order of gap, the fraction of the way from the back-to-back quantiles to those that
    fits its own quantiles best (least squares; 1 for the longest), 0 at ``short_gap``."""
    from twin.calibration.distribution import TABLE_U
    qa = np.array([floor + m["offset_ns"] for m in table] + [floor + table[-1]["offset_ns"] + table[-1]["width_ns"]])
    qs = [np.quantile(r.service_ns[~r.stalls.mask].astype(np.float64), TABLE_U) for r in runs]
    qb = qs[-1]
    modes = [{**m, "long_offset_ns": round(max(0.0, float(qb[k] - floor)), 3),
              "long_width_ns": round(max(0.0, float(qb[k + 1] - qb[k])), 3)} for k, m in enumerate(table)]
    d = qb - qa
    mix = [(round(short_gap, 3), 0.0)]
    for q, g in zip(qs, gaps):
        f = 1.0 if q is qb else float(np.clip(np.dot(q - qa, d) / max(np.dot(d, d), 1e-9), 0, 1))
        if g > mix[-1][0]:
            mix.append((round(g, 3), round(f, 4)))
    notes.append(f"idle mix (gap ns, fraction of the way to {runs[-1].path.name}'s service quantiles): {mix}")
    return {"service_modes": modes, "idle_mix": mix}


def calibrate_from_live(run: str | Path | list, scenario: str | Path | None = None, node: str | None = None,
                        rounds: int = 20_000, rounds_check: int = 100_000, maxiter: int = 30, popsize: int = 8,
                        fit_seed: int = 1, log=print, validate: list | tuple = (),
                        progress=None, shape: str = "service", idle_prior: str | Path | None = None) -> LiveFit:
    """Fit the live node of ``run`` (a folder, or a list of folders: module docstring) and check the
    fitted set on every run and on each ``validate`` folder (held out: not fitted). ``scenario``:
    the scenario file the runs came from (default: the one each recorded, :func:`run_scenario`).
    ``log`` gets the plan and the time estimate before the fit; ``progress(label, done, total)``
    each generation. ``shape``: "service" (default: the first run's measured service distribution
    as a quantile table, :func:`twin.calibration.distribution.service_table`, behind a consumer that
    notices at once, as the live node did) or "poll" (poll period, service and jitter by
    differential evolution on W1). ``idle_prior``: a priors file (:mod:`twin.calibration.idle_prior`):
    the runs must all be back to back and the stand-in's idle cost is its class's prior re-based at
    their median measured idle gap (:meth:`ClassPrior.rebased`). Raises ConfigError for a folder that
    is not a live run, ValueError for another shape or a longer-gap run with ``idle_prior``."""
    if shape not in ("service", "poll"):
        raise ValueError(f"shape {shape!r}: expected service or poll")
    paths = [Path(r) for r in (run if isinstance(run, (list, tuple)) else [run])]
    runs = [load_run(p, scenario, node) for p in paths]
    held = [load_run(Path(p), scenario, node) for p in validate]
    ref = runs[0]
    loaded = load_run_scenario(ref, given=scenario is not None)
    sc, base = loaded.scenario, loaded.params
    device, node_name = ref.summary["name"], ref.summary["node"]
    if device not in base.consumers:  # the run folder names the device; the scenario's parameter set must hold it
        raise ConfigError(ref.path / "results.json", "consumers.name", device, f"not a consumer of the scenario's "
                          f"parameter set {base.name!r} (have: {', '.join(base.consumers)})")
    cname = f"{node_name}_fitted"
    make = partial(_live_set, base, device, node_name, ref.encoding)
    notes = [f"{r.path}: {r.stalls.count:,} stalled round(s) of {len(r.rtt_ps):,} left out (service > "
             f"{r.stalls.threshold_ns / 1000:.3f} µs), {r.stalls.queued:,} queued behind them"
             for r in runs + held if r.stalls.count]
    notes += [r.pass_note() for r in runs + held if r.passes]
    measured = ref.clean_rtt_ps.astype(np.float64)
    plan = f"{len(runs)} run(s) fitted, {len(held)} held out"
    table_shape = shape == "service" and len(ref.service_ns) == len(ref.rtt_ps)
    if table_shape:
        values, extra, table_floor = _table_shape(base, device, ref)
        evaluations = 0
        log(f"fitting {cname} to {len(measured):,} live rounds of {ref.path}: its measured service as a "
            f"{len(extra['service_modes'])}-block quantile table; {plan}: "
            f"{len(runs) + len(held)} model runs of {rounds_check:,} rounds")
    else:
        values, evaluations = _poll_shape(make, cname, ref, measured, rounds, fit_seed, maxiter, popsize,
                                          len(runs), plan, log, progress)
        extra, table_floor = {}, 0.0

    service, gaps, asked = _run_services(make(values, extra=extra), cname, runs, values["service_ns"], rounds,
                                         fit_seed)
    short = [i for i, g in enumerate(asked) if g < IDLE_GAP_NS] or [int(np.argmin(asked))]
    extra.update(_service_terms([runs[i] for i in short], [service[i] for i in short], notes))
    values["service_ns"] = extra["service_ns"]
    fitted = make(values, f"{sc.name}_{node_name}_fitted", extra)
    if idle_prior is not None:
        _prior_terms(extra, Path(idle_prior), base.consumers[device].kind, runs, short, gaps, notes)
    else:
        _idle_terms(extra, fitted.consumers[cname], runs, short, service, gaps, table_floor, notes)
    modes = extra_modes(measured) if "service_modes" not in extra else []
    if modes:
        extra["service_modes"] = modes
        notes.append(f"{len(modes) + 1} modes in {ref.path}'s histogram: extra modes {modes}")
    fitted = make(values, f"{sc.name}_{node_name}_fitted", extra)
    checks = []
    for lr, role in [(x, "fitted") for x in runs] + [(x, "held out") for x in held]:
        res = simulate_run(fitted, cname, lr, rounds_check, fit_seed + 1000)
        checks.append((lr, compare(lr.clean_rtt_ps, res.rtt_ps), role))
    first = checks[0][1]
    free = _free_parameters(table_shape, ref, values, extra, modes, notes)
    return LiveFit(fitted, cname, {**values, **{k: v for k, v in extra.items() if isinstance(v, float)}},
                   first.rows, first.w1_ns, first.ks, evaluations, len(measured), checks, notes,
                   [str(x.path) for x in runs], [f"consumers.{cname}.{f}" for f in free],
                   ("the first run's measured service distribution (stalled rounds left out)" if table_shape
                    else "W1 distance of the card-boundary round trip to "
                    "the first run's (stalled rounds left out)") + "; each other run's W1-best service shift of its "
                   "round trips, explained by frame/reply bytes, function and idle gap")


def _table_shape(base: ParamSet, device: str, ref: LiveRun) -> tuple[dict[str, float], dict, float]:
    """The "service" shape: the live node noticed each request the moment it landed and took the
    measured service, so the stand-in does the same (a 1 ps poll, no poll cost) with the service
    drawn from ``ref``'s measured one (stalled rounds left out). Returns the values (ns), the extra
    consumer keys (``service_modes``: the quantile table) and the table's floor (ns: its offsets
    are from it; the fit may shift service_ns)."""
    dev = base.consumers[device]
    floor, table = service_table(ref.service_ns[~ref.stalls.mask])
    values = {"poll_period_ns": 0.001, "service_ns": floor,
              "jitter_ns": base.hosts[dev.host].path(dev.path).jitter_ns}
    return values, {"service_modes": table}, floor


def _poll_shape(make, cname: str, ref: LiveRun, measured: np.ndarray, rounds: int, fit_seed: int, maxiter: int,
                popsize: int, n_runs: int, plan: str, log, progress) -> tuple[dict[str, float], int]:
    """The "poll" shape: poll period, service and jitter (ns) by differential evolution on the W1
    distance (ns) of ``rounds`` simulated round trips to ``measured`` (ps). ``make(values)``: the
    parameter set with the stand-in; ``log`` gets the plan and time estimate, ``progress(label, done,
    total)`` each generation. Returns the values and the number of evaluations."""
    med = float(np.median(measured)) / PS_PER_NS
    bounds = [(1.0, max(50.0, med)), (0.0, med), (0.0, max(50.0, med / 4))]
    names = ("poll_period_ns", "service_ns", "jitter_ns")
    count = [0]

    def objective(x) -> float:
        count[0] += 1
        res = simulate_run(make(dict(zip(names, x))), cname, ref, rounds, fit_seed)
        return wasserstein_distance(res.rtt_ps, measured) / PS_PER_NS

    t0 = time.perf_counter()
    objective(np.mean(bounds, axis=1))
    per = time.perf_counter() - t0
    total = (maxiter + 1) * popsize * len(names) + n_runs - 1
    log(f"fitting {cname} to {len(measured):,} live rounds of {ref.path} (W1 objective, {rounds:,} simulated "
        f"rounds per evaluation; {plan}): at most {total:,} evaluations "
        f"x {per:.2f} s = about {total * per / 60:.1f} min")
    gen = [0]

    def step(xk, convergence=None):
        gen[0] += 1
        if progress:
            progress(cname, gen[0], maxiter)

    r = differential_evolution(objective, bounds, seed=fit_seed, maxiter=maxiter, popsize=popsize, tol=1e-3,
                               polish=False, callback=step)
    return {k: float(v) for k, v in zip(names, r.x)}, count[0]


def _run_services(shaped: ParamSet, cname: str, runs: list[LiveRun], service_ns: float, rounds: int,
                  fit_seed: int) -> tuple[list[float], list[float], list[float]]:
    """Per run: its own service time (ns: ``service_ns`` of the shape plus the W1-best shift of its
    round trips), the idle gap the device had (ns) and the one the run asked (ns: its simulated gaps)."""
    cost_ps = shaped.consumers[cname].params().poll_cost_ps
    service, gaps, asked = [], [], []
    for lr in runs:
        res = simulate_run(shaped, cname, lr, rounds, fit_seed)
        d = best_shift_ps(lr.clean_rtt_ps, res.rtt_ps) / PS_PER_NS  # ~0 for the first run, not exactly
        service.append(service_ns + d)
        # back to back or not is what the run asked (its simulated gaps); the table's gap is the one the
        # device had, measured on the wall clock where recorded (a live host cannot pace below its own
        # time per round, tens of us), else the simulated one
        sim_gap = float(np.median(idle_gaps_ps(res, cost_ps))) / PS_PER_NS
        asked.append(sim_gap)
        idle = lr.measured_idle_ns
        gaps.append(float(np.median(idle)) if idle is not None else sim_gap)
    return service, gaps, asked


def _idle_terms(extra: dict, c, runs: list[LiveRun], short: list[int], service: list[float], gaps: list[float],
                table_floor: float, notes: list[str]) -> None:
    """What the runs with longer idle gaps than the back-to-back ones (``short``) add to ``extra``:
    with a service quantile table, its long-idle blocks and ``idle_mix`` (:func:`_idle_mix`); else
    the ``idle`` cost table (gap ns, the service above what consumer ``c``'s back-to-back terms predict)."""
    long_ = sorted((gaps[i], i) for i in range(len(runs)) if i not in short)
    if not long_:
        return
    g0 = max(1.0, float(np.median([gaps[i] for i in short])))
    if "service_modes" in extra:  # the service distribution after idling, quantile by quantile
        extra.update(_idle_mix(extra["service_modes"], table_floor, [runs[i] for _, i in long_],
                               [g for g, _ in long_], g0, notes))
        return
    from twin.runtime.functions import lookup
    table = [(round(g0, 3), 0.0)]
    for g, i in long_:
        lr = runs[i]
        pred = c.service_total_ns(lr.frame_bytes, reply_bytes(lookup(lr.function).id, lr.frame_bytes), lr.function)
        if g > table[-1][0]:
            table.append((round(g, 3), round(max(0.0, service[i] - pred), 3)))
    extra["idle"] = [{"mechanism": "idle gap (cache refill, clock and power-state exit, scheduling together)",
                      "table": table, "source": "fitted: " + ", ".join(str(runs[i].path) for _, i in long_)}]
    notes.append(f"idle cost table (gap ns, cost ns): {table}")


def _prior_terms(extra: dict, path: Path, kind: str, runs: list[LiveRun], short: list[int], gaps: list[float],
                 notes: list[str]) -> None:
    """The stand-in's ``idle``: class ``kind``'s prior from ``path`` re-based at the back-to-back runs'
    median idle gap (ns). Raises ValueError when a run is not back to back (its gap would be fitted
    on) or the file has no prior for ``kind``."""
    from twin.calibration.idle_prior import IdlePriors
    from twin.config import load_model
    if len(short) != len(runs):
        raise ValueError("--idle-prior: every --from-live run must be back to back (the prior is fitted on other "
                         f"gaps); {', '.join(str(runs[i].path) for i in range(len(runs)) if i not in short)} is not")
    prior = load_model(path, IdlePriors).classes.get(kind)  # type: ignore[call-overload]
    if prior is None:
        raise ValueError(f"--idle-prior {path}: no prior for class {kind!r}")
    g0 = float(np.median([gaps[i] for i in short]))
    table = prior.rebased(g0)
    extra["idle"] = [{"mechanism": f"{kind} class idle prior re-based at {g0 / 1e3:.1f} µs", "table": table,
                      "source": f"prior: {path} (classes.{kind}; not fitted to these runs)"}]
    notes.append(f"idle: the {kind} class prior of {path}, re-based at the runs' idle gap {g0 / 1e3:.1f} µs: {table}")
    if "service_modes" in extra:
        _prior_widen(extra, prior, g0, notes)


def _table_median(table: list[dict]) -> float:
    """The median (ns above the floor) of a service quantile table (blocks of ``weight``, ``offset_ns``,
    ``width_ns``; a uniform draw in each)."""
    cum = 0.0
    total = sum(m["weight"] for m in table)
    for m in table:
        if cum + m["weight"] >= total / 2:
            return m["offset_ns"] + m["width_ns"] * (total / 2 - cum) / max(m["weight"], 1e-12)
        cum += m["weight"]
    return table[-1]["offset_ns"] + table[-1]["width_ns"]


def _prior_widen(extra: dict, prior, g0: float, notes: list[str]) -> None:
    """The prior's ``widen`` on a stand-in's measured service table (``extra["service_modes"]``, fitted
    after ``g0`` ns of idling): each block's long-idle form is the block spread about the table's median
    by ``W = widen(last gap) / widen(g0)`` (edges ``m + W (e - m)``, none below the floor), and
    ``idle_mix`` takes a round ``(widen(gap) / widen(g0) - 1) / (W - 1)`` of the way there, so the
    spread after a gap is the prior's and the median stays where the prior's cost puts it. Nothing is
    added where the prior has no widen past ``g0`` (a file fitted before it, or a class that does not
    widen)."""
    pts = [(g, w) for g, w in prior.widen if g > g0]
    w0 = prior.widen_at(g0)
    big = pts[-1][1] / w0 if pts else 1.0
    if big <= 1.0 + 1e-6:
        return
    table = extra["service_modes"]
    m = _table_median(table)
    edges = [b["offset_ns"] for b in table] + [table[-1]["offset_ns"] + table[-1]["width_ns"]]
    wide = [max(0.0, m + big * (e - m)) for e in edges]
    extra["service_modes"] = [{**b, "long_offset_ns": round(wide[k], 3),
                               "long_width_ns": round(wide[k + 1] - wide[k], 3)} for k, b in enumerate(table)]
    mix = [(round(max(g0, 1.0), 3), 0.0)]
    mix += [(round(g, 3), round(float(np.clip((w / w0 - 1) / (big - 1), 0, 1)), 4)) for g, w in pts]
    extra["idle_mix"] = mix
    notes.append(f"widen: the prior's service spread after a gap, re-based at {g0 / 1e3:.1f} µs (x{big:.2f} at "
                 f"{pts[-1][0] / 1e3:g} µs), as the table's long-idle blocks about its median; idle mix {mix}")


def _free_parameters(table_shape: bool, ref: LiveRun, values: dict, extra: dict, modes: list,
                     notes: list[str]) -> list[str]:
    """The consumer keys the fit set from the runs, each with how (and, for the table shape, a note
    of what it held fixed)."""
    if table_shape:
        free = ["service_ns (least squares over the back-to-back runs' W1-best service)",
                f"service_modes[].offset_ns, width_ns (the {len(extra['service_modes'])}-block quantile table of "
                f"{ref.path.name}'s measured service)"]
        notes.append(f"fixed, not fitted: poll_period_ns {values['poll_period_ns']} (notices at once, as the live node "
                     f"did), the path's jitter_ns {values['jitter_ns']} (the base set's)")
    else:
        free = ["poll_period_ns, service_ns, jitter_ns (differential evolution on W1 to the first run)"]
        if modes:
            free.append("service_modes (extra histogram modes of the first run)")
    free += [f"{k} (least squares over the back-to-back runs)" for k in extra
             if k.startswith("service_per_") or k == "function_ns"]
    prior = "idle" in extra and str(extra["idle"][0].get("source", "")).startswith("prior:")
    if "idle_mix" in extra:
        free.append("idle_mix, service_modes[].long_offset_ns, long_width_ns " + (
            "(the class prior's widen about the table's median: fitted on the prior's fixed-gap sources)" if prior
            else "(the longer-gap runs' service quantiles)"))
    if "idle" in extra:
        free.append("idle (" + ("the class prior's cost table re-based at the runs' gap: fitted on the prior's "
                                "fixed-gap sources, not on these runs)" if prior
                                else "cost table at the longer-gap runs' idle gaps)"))
    return free

def _run_row(r: LiveRun, c: Comparison) -> dict:
    """A run's row in a fitted set's ``fitted_on`` / ``validated_on``: the folder, frame bytes,
    function, the comparison, and for a point measured in passes their number and each pass's clean
    round-trip p50 (ns)."""
    extra = {"passes": len(r.passes), "pass_p50_ns": [round(x, 3) for x in r.pass_p50_ns()]} if r.passes else {}
    return {"run": str(r.path), "frame_bytes": r.frame_bytes, "function": r.function, **extra, **c.as_dict()}


def fitted_section(fit: LiveFit, command: str) -> dict:
    """The ``fitted`` section of a calibration file written from live runs: the command, the fit
    targets, the free parameters, the runs fitted and validated on with their errors, the notes."""
    return {"command": command,
            "targets": fit.targets or "W1 distance of the card-boundary round trip to the first run's (stalled rounds "
                                      "left out); each other run's W1-best service shift, explained by frame/reply "
                                      "bytes, function and idle gap",
            "free_parameters": fit.free or [f"consumers.{fit.consumer}.{k}" for k in fit.values],
            "fitted_on": [_run_row(r, c) for r, c, role in fit.checks if role == "fitted"],
            "validated_on": [_run_row(r, c) for r, c, role in fit.checks if role == "held out"],
            "evaluations": fit.evaluations, "notes": fit.notes}


def write_fitted(fit: LiveFit, out: Path, run: Path | list, command: str = "") -> None:
    """Write the fitted parameter set (YAML, like ``twin calibrate`` writes; whole or not at all:
    :func:`twin.output.files.write_file`) with its ``fitted`` section (:func:`fitted_section`)."""
    runs = run if isinstance(run, (list, tuple)) else [run]
    doc = fit.params.model_dump(exclude_none=True, exclude={"fit", "fitted"})
    doc["provenance"] = {**doc.get("provenance", {}),
                         fit.consumer: f"fitted by `twin calibrate --from-live {' '.join(map(str, runs))}` to "
                                       f"{fit.measured_rounds} live rounds (W1 {fit.w1_ns:.1f} ns on a fresh seed)"}
    doc["fitted"] = fitted_section(fit, command or f"twin calibrate --from-live {' '.join(map(str, runs))}")
    doc = json.loads(json.dumps(doc, default=float))  # plain lists and floats (tuples, numpy scalars) for YAML
    from twin.output.files import write_file
    write_file(out, "# Written by `twin calibrate --from-live`; do not edit by hand.\n"
               + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
