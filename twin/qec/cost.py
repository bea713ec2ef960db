"""How long a decoder computes on a device: its measured per-call distribution, a cost model per
device kind, or host timing scaled.

The ways, stated in every result (``CostModel.describe()``):

- ``measured`` (default; deterministic for the seed): on a CPU, each request draws a call of the
  decoder's per-call measurement for the workload (:mod:`twin.qec.percall`: one request per call,
  warm, timer cost removed), native or through Python as the placement says (``call``), carried
  from the measuring host class to the placement's CPU by :func:`twin.qec.percall.host_factor` (an
  assumption, stated), times ``scale``. The file is the one shipped for this workload
  (``calibrations/measured/decoders/``), else the nearest one of the same decoder (said so in the
  results), or ``file``. On an FPGA no CPU measurement applies: a lookup table costs what
  ``model`` says there, other decoders are refused as under ``model``. On a GPU (under ``measured``
  and ``model`` alike) a decoder costs its measurement in a persistent kernel
  (:mod:`twin.qec.gpu_cost`: the runtime's C function of it, over the echo, on an H200); one that
  nothing measured there is refused, unless ``fixed`` gives its time.
- ``model`` (deterministic): per decoder kind and device kind, a time per request of
  ``base + per_event * (detection events in the request)``:

  ========  ==========================  ==========================  ==========================
  decoder   cpu (one core)              gpu (one persistent kernel)  fpga (logic)
  ========  ==========================  ==========================  ==========================
  lookup    10 ns (table load, L1/L2)   measured (twin.qec.gpu_cost) 1 cycle of the logic clock
                                                                    (a ROM read)
  matching  70 ns + 130 ns per event    not served                  not served
  union_f.  not served                  measured (twin.qec.gpu_cost) not served
  function  ``function_ns`` (given)     ``function_ns`` (given)     not served
  ========  ==========================  ==========================  ==========================

  Sources: the matching row is our own measurement of PyMatching 2.4.0 ``decode_batch`` on the
  rotated surface code d=5, 5 rounds (2-core AMD EPYC VM, Python 3.11.7, 2026-11-29: 67 ns with no
  detection event, about 110-150 ns more per event up to 10 events, p = 1e-3..5e-3): a batch's cost
  amortised per shot, not what one real-time call pays (``measured`` is that). The lookup
  rows are assumptions (a table of at most 4 MiB held where the consumer reads fastest); the V80's
  28 ns (amd-qblox-exchange-runtime.txt) already holds its exchange logic, the ROM read is added.
- ``host_timed``: the decoder is timed on this host (``time.perf_counter``, batches grouped by
  number of detection events, least-squares ``base + per_event * events``) and multiplied by
  ``scale`` (the device's speed against this host; 1.0 = as fast). Not deterministic across
  machines; the fitted numbers are written into the results.
- ``fitted``: a calibration file written by ``twin calibrate decoder`` (:mod:`twin.qec.cost_fit`):
  the decoder timed call by call on a host, fitted as ``overhead + per_event * events`` plus an
  empirical residual distribution. Each request draws ``overhead + per_event * events + residual``
  (residual from the file's quantiles, deterministic for the seed), times ``scale`` (the stated
  factor from the measuring host to the target device; 1.0 = the same).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from twin.qec.cost_fit import DecoderFit
from twin.qec.decoders import Decoder

MODEL_NS = {
    # (decoder kind, device kind): (base_ns, per_event_ns); None: derived from the device
    ("lookup", "cpu"): (10.0, 0.0),
    ("lookup", "fpga"): None,   # one cycle of the logic clock
    ("matching", "cpu"): (70.0, 130.0),
}


def _bounded(per_ps: np.ndarray) -> np.ndarray:
    """Per-request compute times (float ps) as int64 ps; CostError when the stream's decoding would run
    past the engine's simulated horizon (:data:`twin.scenario.schema.MAX_HORIZON_PS`, about 53 days):
    one request over 1,000 s, or all of them together over half the horizon."""
    from twin.scenario.schema import MAX_DURATION_PS, MAX_HORIZON_PS
    per = np.rint(np.asarray(per_ps, np.float64))
    if len(per) and (not np.isfinite(per).all() or per.max() > MAX_DURATION_PS
                     or float(per.sum()) > MAX_HORIZON_PS / 2):
        raise CostError(f"the decoder's time per request (up to {per.max() / 1e12:.4g} s, "
                        f"{float(per.sum()) / 1e12:.4g} s over the {len(per):,} requests) would run past the "
                        f"simulated horizon (1,000 s a request, {MAX_HORIZON_PS / 2e12:,.0f} s in all)")
    return per.astype(np.int64)


class CostError(ValueError):
    """A decoder that the chosen device kind cannot serve under the cost model."""


@dataclass
class CostModel:
    """Per-request compute time of a decoder on a device.

    how: ``measured`` | ``model`` | ``host_timed`` | ``fitted``; scale: all but model, device time =
    host time * scale; fit: the :class:`twin.qec.cost_fit.DecoderFit` of ``fitted`` (``file`` its
    path, for the results); percall: the :class:`twin.qec.percall.PerCall` of ``measured`` (None:
    no file for this decoder, which a CPU placement refuses), ``exact``: whether it was measured on
    this workload (else the nearest, ``wanted`` names the file that would be); call: ``native`` |
    ``python``; seed: the draws of ``measured`` and ``fitted``;
    function_ns: the time of a user function under ``model`` (required for kind ``function``);
    fixed_ns: under ``model``, this time for every request of any decoder (overrides the table).
    After :meth:`per_request_ps`, ``base_ns`` and ``per_event_ns`` hold the numbers used.
    """

    how: str = "model"
    scale: float = 1.0
    percall: Any = None
    exact: bool = True
    wanted: str | None = None
    call: str = "native"
    function_ns: float | None = None
    fixed_ns: float | None = None
    fit: DecoderFit | None = None
    file: str | None = None
    seed: int = 0
    base_ns: float = 0.0
    per_event_ns: float = 0.0
    notes: list = field(default_factory=list)
    carried: str | None = None  # measured: how the file's times were carried to this device
    factor: float = 1.0         # measured: the factor applied (carried x scale)
    gpu_kernel: dict | None = None  # a GPU placement: the persistent-kernel measurement used (twin.qec.gpu_cost)

    def __post_init__(self):
        if self.how not in ("measured", "model", "host_timed", "fitted"):
            raise ValueError(f"cost {self.how!r}: expected 'measured', 'model', 'host_timed' or 'fitted'")
        if self.call not in ("native", "python"):
            raise ValueError(f"cost call {self.call!r}: expected 'native' or 'python'")
        if (self.how == "fitted") != (self.fit is not None):
            raise ValueError("cost: how fitted needs a fit, and only it takes one")
        if not self.scale > 0:
            raise ValueError(f"cost scale {self.scale}: must be > 0")

    def per_request_ps(self, decoder: Decoder, device_kind: str, frames: np.ndarray, events: np.ndarray,
                       clock_ps: int = 4000, device: str = "", host: str | None = None
                       ) -> np.ndarray:
        """Compute time per request, int64 ps (n,), for ``frames`` (uint8 (n, B)) whose syndromes
        hold ``events`` detection events each (int (n,)), on ``device`` (a consumer name) of ``host``
        (its host; both for ``measured``'s carrying). Raises :class:`CostError` when the device kind
        does not serve this decoder kind, a CPU has no per-call measurement of it, nothing measured it
        in a GPU's persistent kernel (a GPU placement, no ``fixed``), or a fit is of another decoder kind."""
        if self.how == "measured" and device_kind == "cpu":
            return self._measured(decoder, events, device, host)
        if device_kind == "gpu" and self.how in ("measured", "model") and self.fixed_ns is None \
                and decoder.kind != "function":
            return self._gpu(decoder, events, device)
        if self.how == "measured":
            self.notes.append(f"a {device_kind}: the per-call files are CPU measurements; the cost model's time")
        if self.how == "fitted":
            if self.fit.decoder != decoder.kind:
                raise CostError(f"decoder {decoder.name!r} ({decoder.kind}): the cost file {self.file} was "
                                f"measured on a {self.fit.decoder} decoder")
            self.base_ns = self.fit.overhead_ns * self.scale
            self.per_event_ns = self.fit.per_event_ns * self.scale
            self.notes.append(f"fitted per call on {self.fit.meta.get('machine', {}).get('cpu')}, residual drawn "
                              f"from its quantiles (seed {self.seed}), scaled x{self.scale:g}")
            return _bounded(self.fit.draw_ns(events, self.seed) * self.scale * 1000)
        if self.how == "host_timed":
            self.base_ns, self.per_event_ns = time_on_host(decoder, frames, events)
            self.base_ns *= self.scale
            self.per_event_ns *= self.scale
            self.notes.append(f"timed on this host, scaled x{self.scale:g}")
        elif self.fixed_ns is not None:
            self.base_ns, self.per_event_ns = float(self.fixed_ns), 0.0
            self.notes.append("fixed time per request")
        elif decoder.kind == "function":
            if self.function_ns is None:
                raise CostError(f"decoder {decoder.name!r}: a user function needs cost.function_ns under model cost")
            if device_kind == "fpga":
                raise CostError(f"decoder {decoder.name!r}: a Python function does not run in FPGA logic")
            self.base_ns, self.per_event_ns = float(self.function_ns), 0.0
        else:
            key = (decoder.kind, device_kind)
            if key not in MODEL_NS:
                raise CostError(f"decoder {decoder.name!r} ({decoder.kind}) is not served on a {device_kind} "
                                f"under the cost model (served: {', '.join(f'{a} on {b}' for a, b in MODEL_NS)})")
            v = MODEL_NS[key]
            if v is None:
                v = (clock_ps / 1000, 0.0)
            self.base_ns, self.per_event_ns = v
        return _bounded((self.base_ns + self.per_event_ns * np.asarray(events, np.float64)) * 1000)

    def _measured(self, decoder: Decoder, events: np.ndarray, device: str, host: str | None) -> np.ndarray:
        """``measured`` on a CPU: the per-call draws, carried and scaled (int64 ps)."""
        from twin.qec.percall import host_factor
        pc = self.percall
        if pc is None:
            raise CostError(f"decoder {decoder.name!r} ({decoder.kind}): no per-call measurement of it "
                            f"(calibrations/measured/decoders has none); measure it (twin calibrate decoder "
                            f"SCENARIO) and give decode.cost.file, or give decode.cost {{how: model, fixed: ...}}")
        if pc.doc["decoder"] != decoder.kind:
            raise CostError(f"decoder {decoder.name!r} ({decoder.kind}): the per-call file {pc.file} was measured on "
                            f"a {pc.doc['decoder']} decoder")
        factor, self.carried = host_factor(device, host, pc.doc["host_class"])
        self.factor = factor * self.scale
        lines = pc.doc["per_event"][self.call]
        self.base_ns, self.per_event_ns = lines["intercept_ns"] * self.factor, lines["slope_ns"] * self.factor
        what = "this workload" if self.exact else \
            f"another workload (the nearest file; none for this one, {self.wanted})"
        self.notes.append(f"measured per call ({self.call}) on {pc.doc['machine'].get('cpu')} ({pc.doc['host_class']}, "
                          f"{pc.doc['measured_at']}) for {what}: {pc.file}; drawn by detection events (seed "
                          f"{self.seed}); {self.carried}" + (f"; scaled x{self.scale:g}" if self.scale != 1 else ""))
        return _bounded(pc.draw_ns(events, self.call, self.seed) * self.factor * 1000)

    def _gpu(self, decoder: Decoder, events: np.ndarray, device: str) -> np.ndarray:
        """A decoder on a GPU: its persistent-kernel measurement (:mod:`twin.qec.gpu_cost`), times
        ``scale`` (int64 ps); CostError when nothing measured it there."""
        from twin.qec.gpu_cost import gpu_service
        try:
            s = gpu_service(decoder)
        except ValueError as e:
            raise CostError(str(e)) from None
        self.base_ns = s.over_echo_ns * self.scale
        self.per_event_ns = s.per_event_ns * self.scale
        self.gpu_kernel = {"line": s.describe(device) + (f"; scaled x{self.scale:g}" if self.scale != 1 else ""),
                           "function": s.function, "file": s.file, "gpu": s.gpu, "measured_at": s.measured_at,
                           "over_echo_p50_ns": s.over_echo_ns, "over_echo_p99_ns": s.p99_ns}
        self.notes.append(self.gpu_kernel["line"])
        return _bounded(s.per_request_ns(events) * self.scale * 1000)

    def describe(self) -> dict:
        """What was used, for results.json (fitted: also the file and the fit's numbers; measured on
        a CPU: the file, where and when it was measured, the call and how it was carried)."""
        doc = {"how": self.how, "scale": self.scale, "base_ns": round(self.base_ns, 3),
               "per_event_ns": round(self.per_event_ns, 3), "notes": list(self.notes)}
        if self.fit is not None:
            doc.update(file=self.file, fit=self.fit.describe())
        if self.gpu_kernel is not None:
            doc["gpu_kernel"] = dict(self.gpu_kernel)
        if self.percall is not None and self.carried is not None:
            src = self.percall.source()
            q = self.percall.doc[f"{self.call}_ns"]
            doc.update(call=self.call, source=src, exact_workload=self.exact, carried=self.carried,
                       factor=round(self.factor, 4),
                       measured_ns={k: q[k] for k in ("p50", "p90", "p99", "p99.9", "mean")},
                       measured_ci95_ns=q["ci95"])
            if not self.exact:
                doc["wanted_file"] = self.wanted
        return doc


def time_on_host(decoder: Decoder, frames: np.ndarray, events: np.ndarray, min_batch: int = 2000,
                 repeats: int = 5) -> tuple[float, float]:
    """Time ``decoder.decode_frames`` on this host per request, grouped by detection events;
    returns the least-squares (base_ns, per_event_ns) (per_event >= 0). Each group is repeated up to
    ``min_batch`` frames and timed ``repeats`` times, the groups taken in turn (so a slow spell of a
    shared host falls on every group in some repeat, not on all repeats of one group); the minimum
    of each group is kept."""
    ev = np.asarray(events)
    ks = np.unique(ev)
    batches = []
    for k in ks:
        sel = frames[ev == k]
        batches.append(np.repeat(sel, max(1, -(-min_batch // len(sel))), axis=0))
    best = [float("inf")] * len(ks)
    for _ in range(repeats):
        for i, batch in enumerate(batches):
            best[i] = min(best[i], _timed(decoder, batch))
    xs = [float(k) for k in ks]
    ys = [b / len(batch) * 1e9 for b, batch in zip(best, batches)]
    ws = [float((ev == k).sum()) for k in ks]
    x, y, w = np.array(xs), np.array(ys), np.sqrt(np.array(ws))
    if len(x) == 1:
        return float(y[0]), 0.0
    A = np.stack([np.ones_like(x), x], axis=1) * w[:, None]
    base, slope = np.linalg.lstsq(A, y * w, rcond=None)[0]
    if slope < 0:
        return float(np.average(y, weights=w)), 0.0
    return float(max(base, 0.0)), float(slope)


def _timed(decoder: Decoder, batch: np.ndarray) -> float:
    t = time.perf_counter()
    decoder.decode_frames(batch)
    return time.perf_counter() - t
