"""The decoder's own time, measured call by call on this host and fitted (``decode.cost.how: fitted``).

Measuring (:func:`time_calls`): each workload's requests are sent one at a time through the decoder's
per-request entry point, :meth:`twin.qec.decoders.Decoder.decode_payload` (what a consumer does per
request; for PyMatching one ``decode_batch`` of one bit-packed shot from Python), each call timed with
``time.perf_counter_ns`` around it. Before the timed calls every workload is warmed up; the timer's own
cost (median of back-to-back ``perf_counter_ns`` pairs) is subtracted; the garbage collector is off
while timing (as ``timeit`` does). Several workloads are timed interleaved, in one shuffled order, so
that a change of load on a shared host falls on all of them alike. With ``stratify`` the calls are
spread evenly over the numbers of detection events the workload shows (each count with at least
``MIN_DISTINCT`` distinct shots), so the slope sees many events, not only the common few; without it
they follow the workload's own distribution (what a held-out measurement of a percentile needs).

Fitting (:func:`fit_calls`): a call takes ``overhead + per_event * events + residual``.

1. The median time of each number of events seen in at least ``min_group`` calls; Theil-Sen
   (``scipy.stats.theilslopes``) through those medians gives overhead (intercept) and per_event
   (slope): robust both to slow calls and to one odd event count.
2. Outliers (a call preempted, or slowed by another process on a shared host): residual above
   ``median + k * MAD`` of all residuals (``scipy.stats.median_abs_deviation``, unscaled; k = 10 by
   default). They are counted, their share and the largest is reported, and they are left out;
   step 1 is repeated without them.
3. The residuals of the calls kept, as empirical quantiles at :data:`LEVELS` (0, 0.01, ..., 0.99,
   0.995, 0.999, 1): the jitter a draw reproduces.

A draw (:meth:`DecoderFit.draw_ns`) for a request with ``e`` events is ``overhead + per_event * e +
Q(u)`` where ``Q`` interpolates the residual quantiles linearly and ``u`` is uniform from
``numpy.random.default_rng([seed, DRAW_STREAM])``: the same seed gives the same times.

Limits (also in docs/qec.md): the residual does not depend on the number of events (one
distribution for all); the line is straight (PyMatching's time per event grows slowly with the
events and the graph: at d = 7 above about ten events the medians rise faster than the line);
jitter beyond ``median + k MAD`` is excluded as the host's, not the decoder's; the residual tail is
only as fine as the quantile levels (p99.9 and the maximum are kept). The file is this host's:
``scale`` states the factor to a target device.
"""
from __future__ import annotations

import gc
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import Field, model_validator

from twin.config.strict import Strict
from twin.qec.decoders import Decoder
from twin.stats import percentile

LEVELS = tuple(np.round(np.concatenate([np.arange(100) / 100, [0.995, 0.999, 1.0]]), 4).tolist())
DRAW_STREAM = 0xDEC0DE  # the random stream of the residual draws, beside the scenario seed
MIN_DISTINCT = 5  # stratified calls: an event count needs this many distinct shots
SCHEMA = "twin.decoder_cost/1"


@dataclass
class CallTimes:
    """One workload's timed calls: ``events`` (int64 (n,), detection events of each request) and
    ``ns`` (int64 (n,), nanoseconds per call, the timer's own cost subtracted), in the order timed
    within the workload; ``label`` names the workload."""

    label: str
    events: np.ndarray
    ns: np.ndarray


def timer_overhead_ns(n: int = 20_000) -> int:
    """Median nanoseconds of two back-to-back ``time.perf_counter_ns`` calls on this host."""
    pc = time.perf_counter_ns
    t = np.empty(n, np.int64)
    for i in range(n):
        a = pc()
        t[i] = pc() - a
    return int(np.median(t))


def schedule(events: np.ndarray, calls: int, rng: np.random.Generator, stratify: bool) -> np.ndarray:
    """Which of a workload's requests to send, ``calls`` indices into ``events`` (int (shots,)).
    ``stratify``: evenly over the event counts with at least :data:`MIN_DISTINCT` requests (each
    count's requests cycled), else drawn from the workload as it comes (without replacement while
    it lasts). Raises ValueError for calls < 1 or no requests."""
    ev = np.asarray(events)
    if calls < 1 or len(ev) == 0:
        raise ValueError(f"calls {calls} of {len(ev)} requests: need at least one of each")
    if not stratify:
        reps = -(-calls // len(ev))
        return np.concatenate([rng.permutation(len(ev)) for _ in range(reps)])[:calls]
    counts = [k for k in np.unique(ev) if (ev == k).sum() >= MIN_DISTINCT] or list(np.unique(ev))
    per, extra = divmod(calls, len(counts))
    out = []
    for j, k in enumerate(counts):
        idx = rng.permutation(np.flatnonzero(ev == k))
        m = per + (1 if j < extra else 0)
        out.append(np.resize(idx, m))
    return rng.permutation(np.concatenate(out))


def time_calls(jobs: list[tuple[str, Decoder, list[bytes], np.ndarray]], calls: int, *, warmup: int = 500,
               seed: int = 0, stratify: bool | list[bool] = True, progress=None) -> tuple[list[CallTimes], int]:
    """Time ``calls`` single requests of each job ``(label, decoder, payloads, events)`` through
    ``decoder.decode_payload``, interleaved in one seeded shuffled order (see module docstring).
    ``stratify``: for all jobs, or one flag per job.
    ``payloads``: the request payloads (bytes, one per shot); ``events``: int (shots,).
    ``progress(done, total)`` is called every 1,000 calls. Returns (one :class:`CallTimes` per job,
    the timer overhead subtracted, ns). Raises ValueError for calls < 1."""
    rng = np.random.default_rng([seed, 0x7113])
    flags = stratify if isinstance(stratify, list) else [stratify] * len(jobs)
    picks = [schedule(ev, calls, rng, st) for (_, _, _, ev), st in zip(jobs, flags)]
    order = rng.permutation(np.repeat(np.arange(len(jobs)), calls))
    total = len(order) + warmup * len(jobs)
    done = 0
    for _, dec, payloads, _ in jobs:  # warm-up: caches, branch predictors, lazy initialisation
        for i in range(warmup):
            dec.decode_payload(payloads[i % len(payloads)])
        done += warmup
        if progress:
            progress(done, total)
    timer = timer_overhead_ns()
    out = [np.empty(calls, np.int64) for _ in jobs]
    pos = [0] * len(jobs)
    pc = time.perf_counter_ns
    calls_of = [(dec.decode_payload, payloads, p) for (_, dec, payloads, _), p in zip(jobs, picks)]
    was = gc.isenabled()
    gc.disable()
    try:
        for n, j in enumerate(order):
            f, payloads, p = calls_of[j]
            payload = payloads[p[pos[j]]]
            t0 = pc()
            f(payload)
            t1 = pc()
            out[j][pos[j]] = t1 - t0 - timer
            pos[j] += 1
            if progress and n % 1000 == 999:
                progress(done + n + 1, total)
    finally:
        if was:
            gc.enable()
    if progress:
        progress(total, total)
    res = [CallTimes(label, np.asarray(ev)[p].astype(np.int64), t) for (label, _, _, ev), p, t in zip(jobs, picks, out)]
    return res, timer


@dataclass
class DecoderFit:
    """A fitted decoder cost (see module docstring): ``overhead_ns``, ``per_event_ns``,
    ``levels`` / ``residual_ns`` (quantiles of the residual, ns, same length, levels 0..1),
    ``outliers`` (rule, k_mad, threshold_ns: the residual above which a call is one, count, fraction,
    max_ns: the slowest call), ``groups`` (event count ->
    [calls, median ns] of the calls kept), ``n_calls``; ``decoder``: the decoder kind measured;
    ``meta``: what the file says about where and how it was measured (machine, versions, date,
    workloads, ...); ``outlier_mask``: after :func:`fit_calls`, which calls were left out."""

    overhead_ns: float
    per_event_ns: float
    levels: np.ndarray
    residual_ns: np.ndarray
    outliers: dict
    groups: dict
    n_calls: int
    decoder: str = "matching"
    meta: dict = field(default_factory=dict)
    outlier_mask: np.ndarray | None = None  # after fit_calls: bool (n,), the calls left out (not in the file)

    def draw_ns(self, events: np.ndarray, seed: int) -> np.ndarray:
        """One time per request, float64 ns (n,), for requests with ``events`` detection events
        (int (n,)): overhead + per_event * events + a residual drawn from the quantiles; never
        below 0. Deterministic for ``seed``."""
        ev = np.asarray(events, np.float64)
        u = np.random.default_rng([seed, DRAW_STREAM]).random(len(ev))
        r = np.interp(u, self.levels, self.residual_ns)
        return np.maximum(self.overhead_ns + self.per_event_ns * ev + r, 0.0)

    def describe(self) -> dict:
        """The fit's numbers for results (ns)."""
        q = {f"p{lv * 100:g}".replace(".", ""): round(float(np.interp(lv, self.levels, self.residual_ns)), 1)
             for lv in (0.5, 0.99, 0.999)}
        return {"overhead_ns": round(self.overhead_ns, 1), "per_event_ns": round(self.per_event_ns, 1),
                "residual_ns": q, "calls": self.n_calls, "outliers": self.outliers["count"],
                "measured_on": self.meta.get("machine", {}).get("cpu"), "measured_at": self.meta.get("measured_at"),
                "workloads": [w["label"] for w in self.meta.get("workloads", [])]}


def _line(events: np.ndarray, ns: np.ndarray, min_group: int) -> tuple[float, float, dict]:
    """Theil-Sen through the per-event-count medians of groups with >= min_group calls (all
    groups if none is that large): (intercept, slope, {events: [calls, median]})."""
    from scipy.stats import theilslopes
    ks, counts = np.unique(events, return_counts=True)
    keep = ks[counts >= min_group] if (counts >= min_group).any() else ks
    med = np.array([np.median(ns[events == k]) for k in keep])
    groups = {int(k): [int((events == k).sum()), round(float(m), 1)] for k, m in zip(keep, med)}
    if len(keep) == 1:
        return float(med[0]), 0.0, groups
    slope, intercept, _, _ = theilslopes(med, keep.astype(np.float64))
    return float(intercept), float(slope), groups


def fit_calls(events: np.ndarray, ns: np.ndarray, *, k_mad: float = 10.0, min_group: int = 20) -> DecoderFit:
    """Fit overhead + per-event slope + residual quantiles to timed calls (``events`` int (n,),
    ``ns`` (n,) nanoseconds), with outliers above ``median + k_mad * MAD`` of the residuals flagged
    and left out (module docstring). Raises ValueError for fewer than 2 calls or k_mad <= 0."""
    from scipy.stats import median_abs_deviation
    ev = np.asarray(events, np.int64)
    t = np.asarray(ns, np.float64)
    if len(ev) != len(t) or len(t) < 2:
        raise ValueError(f"{len(ev)} event counts and {len(t)} times: need the same number, at least 2")
    if not k_mad > 0:
        raise ValueError(f"k_mad {k_mad}: must be > 0")
    a, b, _ = _line(ev, t, min_group)
    r = t - (a + b * ev)
    med, mad = float(np.median(r)), float(median_abs_deviation(r))
    threshold = med + k_mad * mad
    out = r > threshold
    kept = ~out
    a, b, groups = _line(ev[kept], t[kept], min_group)
    rk = t[kept] - (a + b * ev[kept])
    levels = np.array(LEVELS)
    resid = np.quantile(rk, levels)
    outliers = {"rule": f"residual > median + {k_mad:g} MAD", "k_mad": k_mad,
                "threshold_ns": round(threshold, 1), "count": int(out.sum()),
                "fraction": round(float(out.mean()), 5), "max_ns": round(float(t[out].max()), 1) if out.any() else None}
    return DecoderFit(a, b, levels, resid, outliers, groups, int(len(t)), outlier_mask=out)


# -- the calibration file --------------------------------------------------------------------------

def machine() -> dict:
    """This host: CPU model (``/proc/cpuinfo``: name, family and model), logical CPUs, hypervisor
    flag, OS, Python and the versions of the packages a decoder's time depends on (None: not installed)."""
    from importlib.metadata import PackageNotFoundError, version
    cpu = platform.processor() or platform.machine()
    hyper, fam = False, {}
    try:
        text = Path("/proc/cpuinfo").read_text()
        lines = text.splitlines()
        cpu = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), cpu)
        hyper = any(ln.startswith("flags") and " hypervisor" in ln for ln in lines)
        for key, name in (("cpu family", "family"), ("model", "model")):
            v = next((ln.split(":", 1)[1].strip() for ln in lines if ln.split(":")[0].strip() == key), None)
            if v is not None and v.isdigit():
                fam[name] = int(v)
    except OSError:
        pass
    pk = {}
    for name in ("pymatching", "stim", "numpy", "scipy", "ldpc", "stimbposd", "tesseract-decoder", "relay-bp"):
        try:
            pk[name] = version(name)
        except PackageNotFoundError:
            pk[name] = None
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    return {"cpu": cpu, **({"cpu_family_model": [fam["family"], fam["model"]]} if len(fam) == 2 else {}),
            "logical_cpus": os.cpu_count(), "virtual_machine": hyper, "os": platform.platform(),
            "python": platform.python_version(), "packages": pk, "load_average_1_5_15": load}


class _Workload(Strict):
    label: str
    code: str
    distance: int
    rounds: int
    p: float
    noise: str
    calls: int = Field(gt=0)
    outliers: int = Field(ge=0)
    events: dict
    measured_ns: dict


class _Outliers(Strict):
    rule: str
    k_mad: float = Field(gt=0)
    threshold_ns: float
    count: int = Field(ge=0)
    fraction: float = Field(ge=0, le=1)
    max_ns: float | None = None


class _Residual(Strict):
    levels: list[float] = Field(min_length=2)
    ns: list[float] = Field(min_length=2)

    @model_validator(mode="after")
    def _shape(self):
        from twin.config import Located
        lv = np.array(self.levels)
        if len(self.levels) != len(self.ns):
            raise Located(("ns",), f"{len(self.ns)} values", f"one per level ({len(self.levels)} levels)")
        if lv[0] != 0 or lv[-1] != 1 or (np.diff(lv) <= 0).any():
            raise Located(("levels",), "[...]", "increasing from 0 to 1")
        if (np.diff(self.ns) < 0).any():
            raise Located(("ns",), "[...]", "quantiles never decrease")
        return self


class _Fit(Strict):
    method: str
    overhead_ns: float
    per_event_ns: float
    min_group: int = Field(gt=0)
    groups: dict[int, list[float]]


class DecoderCostFile(Strict):
    """A decoder-cost calibration file (``calibrations/measured/decoders/*.yaml``, schema
    ``twin.decoder_cost/1``), written by ``twin calibrate decoder``."""

    schema_: str = Field(alias="schema", pattern=r"^twin\.decoder_cost/1$")
    description: str = ""
    decoder: str
    implementation: str
    entry_point: str
    machine: dict
    measured_at: str
    command: str
    seed: int
    warmup: int = Field(ge=0)
    stratified: bool
    timer_overhead_ns: float = Field(ge=0)
    calls: int = Field(gt=0)
    workloads: list[_Workload] = Field(min_length=1)
    outliers: _Outliers
    fit: _Fit
    residual_quantiles: _Residual


def fit_document(fit: DecoderFit, meta: dict) -> dict:
    """The YAML mapping of a calibration file for ``fit``: ``meta`` gives description, decoder,
    implementation, entry_point, machine, measured_at, command, seed, warmup, stratified,
    timer_overhead_ns, workloads and min_group."""
    m = dict(meta)
    min_group = m.pop("min_group")
    return {"schema": SCHEMA, **m, "calls": fit.n_calls, "outliers": fit.outliers,
            "fit": {"method": f"Theil-Sen (scipy.stats.theilslopes) through the median time of each number of "
                              f"detection events seen in >= {min_group} calls, outliers left out",
                    "overhead_ns": round(fit.overhead_ns, 2), "per_event_ns": round(fit.per_event_ns, 2),
                    "min_group": min_group, "groups": fit.groups},
            "residual_quantiles": {"levels": [float(x) for x in fit.levels],
                                   "ns": [round(float(x), 1) for x in fit.residual_ns]}}


def load_fit(path: str | Path) -> DecoderFit:
    """Read a decoder-cost calibration file; raises :class:`twin.config.ConfigError` naming the
    file, key and value."""
    from twin.config import load_model
    doc = load_model(Path(path), DecoderCostFile)
    o = doc.outliers
    return DecoderFit(doc.fit.overhead_ns, doc.fit.per_event_ns, np.array(doc.residual_quantiles.levels),
                      np.array(doc.residual_quantiles.ns), o.model_dump(),
                      {k: v for k, v in doc.fit.groups.items()}, doc.calls, doc.decoder,
                      {"machine": doc.machine, "measured_at": doc.measured_at,
                       "workloads": [w.model_dump() for w in doc.workloads], "file": str(path)})


# -- a held-out check --------------------------------------------------------------------------------

def surface_job(distance: int, p: float, shots: int, seed: int) -> tuple[str, Decoder, list[bytes], np.ndarray]:
    """A timing job: the rotated surface code memory experiment at ``distance`` (as many rounds),
    circuit noise ``p``, ``shots`` shots from stim, decoded by PyMatching
    (:class:`twin.qec.decoders.MatchingDecoder`): (label, decoder, payloads, events)."""
    from twin.qec.decoders import make_decoder
    from twin.qec.workload import sample
    w = sample("surface", distance, distance, p, shots, seed=seed)
    return (f"surface d={distance} r={distance} p={p:g}", make_decoder("matching", w.circuit),
            [f.tobytes() for f in w.frames()], w.detectors.sum(axis=1).astype(np.int64))


@dataclass
class HeldOut:
    """A fit from some distances checked on another: ``fit`` (from the fit distances' calls);
    ``measured`` and ``predicted``: p50/p99/p99.9 ns of the held-out distance's calls and of the
    fit's draws for the same requests; ``measured_kept``: the same measured percentiles without
    the held-out calls above the fit's outlier threshold (``held_out_outliers`` of them);
    ``error_p50``: predicted / measured - 1 (all calls); ``times``: the timed calls."""

    fit: DecoderFit
    measured: dict
    measured_kept: dict
    predicted: dict
    held_out_outliers: int
    error_p50: float
    times: list


def held_out(fit_distances=(3, 5), held=7, p: float = 1e-3, calls: int = 20_000, *, seed: int = 0,
             warmup: int = 1000, k_mad: float = 10.0, progress=None) -> HeldOut:
    """Time PyMatching per call on the surface code at ``fit_distances`` (stratified by events) and
    at ``held`` (its own event distribution), ``calls`` each, all interleaved in one order (both
    sides see the same load of a shared host); fit on the former, predict the latter's percentiles
    from its requests' events with the fit's draws (seed ``seed``)."""
    jobs = [surface_job(d, p, max(calls, 20_000), seed + i) for i, d in enumerate((*fit_distances, held))]
    times, _ = time_calls(jobs, calls, warmup=warmup, seed=seed, stratify=[True] * len(fit_distances) + [False],
                          progress=progress)
    fit = fit_calls(np.concatenate([t.events for t in times[:-1]]), np.concatenate([t.ns for t in times[:-1]]),
                    k_mad=k_mad)
    h = times[-1]
    pred = fit.draw_ns(h.events, seed)
    resid = h.ns - (fit.overhead_ns + fit.per_event_ns * h.events)
    out = resid > fit.outliers["threshold_ns"]

    def pct(x):
        return {k: round(float(percentile(x, q)), 1) for k, q in (("p50", 50), ("p99", 99), ("p99.9", 99.9))}
    m, pr = pct(h.ns), pct(pred)
    return HeldOut(fit, m, pct(h.ns[~out]), pr, int(out.sum()), pr["p50"] / m["p50"] - 1, times)
