"""``twin decode``: a decoder study from a scenario with a ``decode:`` block.

Schema (keys; optional keys show their default)::

    name: str
    description: ""
    calibration: path to a parameter set, relative to this file
    hosting: ../calibrations/hosting.yaml   # hosting-mode costs (twin hosting --fit writes it)
    seed: 0
    slots: 16
    encoding: default | classic | per_piece  # default: classic, as the seeds' sessions serving user functions
    control: on_card | aurora                # where the control system sits (aurora: across a cable)
    traffic: {mode: closed_loop | open_loop, period: "1 us", clock: card | independent,
              clock_period: "4 ns", ppm: 0.0, gap: "0 ns"}   # open loop: one shot per period
    deadline: null | "2 us"                  # per request: card has the correction before it
    decode:
      code: rep | steane | surface
      distance: 3
      rounds: 1                              # syndrome-extraction rounds per shot
      p: 0.001                               # physical error rate
      noise: circuit | code_capacity
      shots: 100000
      per: shot | round                      # one request per shot, or per QEC round of each shot
      frame_bytes: null                      # default: the syndrome in whole 16-byte pieces
      decoder: lookup | matching | function
      function: null | "package.module:callable" | a registered function name   # decoder: function
      cost: {how: model | host_timed, scale: 1.0, fixed: null | "300 ns"}   # scale: host_timed; fixed: model
      interval: wilson | clopper_pearson     # confidence interval of the logical error rate
      confidence: 0.95
      placements: [{device: <consumer in calibration>, mode: inline | worker | external_self |
            external_routed | chain}]        # one loop per placement

For every placement the study reports: corrections identical to the direct decode (same shots,
byte for byte), the card's mismatches, logical errors and rate with its interval for the loop,
for the direct decode and for stim+PyMatching run directly on the same shots, round-trip
percentiles, deadline misses, the largest backlog, and the decode throughput of the loop's
batched decode beside the direct decode's. Plots: round trip vs request, queue depth vs time.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from twin.calibration.params import ParamSet
from twin.config import ConfigError, Located, load_model
from twin.devices.qblox import QbloxCluster
from twin.engine.stop import Interrupted
from twin.qec.hosting import MODES, HostingParams, check_mode, load_hosting
from twin.scenario import Bridge, Traffic, _duration
from twin.stats import summary_ns
from twin.units import time_ps


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Cost(_Strict):
    """How the decoder's compute time is accounted (:class:`twin.qec.cost.CostModel`)."""

    how: Literal["model", "host_timed"] = "model"
    scale: float = Field(1.0, gt=0)
    fixed: str | None = None
    _d = field_validator("fixed", mode="before")(classmethod(lambda cls, v: _duration(v)))

    @model_validator(mode="after")
    def _applies(self):  # each would be silently ignored under the other ``how``
        if self.how == "model" and "scale" in self.model_fields_set and self.scale != 1.0:
            raise Located(("scale",), self.scale, "applies to how: host_timed only (it scales this host's timing); "
                          "under how: model give fixed, or use host_timed")
        if self.how == "host_timed" and self.fixed is not None:
            raise Located(("fixed",), self.fixed, "applies to how: model only (host_timed measures the decoder on "
                          "this host); give one of fixed and how: host_timed")
        return self


class Placement(_Strict):
    """Where the decoder runs: a consumer of the parameter set, a hosting mode, and the model that
    stands for the consumer (``sim``, ``code``, ``rtl``, ``live`` with its ``bridge``)."""

    device: str
    mode: Literal[MODES] = "inline"  # type: ignore[valid-type]
    model: Literal["sim", "code", "rtl", "live"] = "sim"
    bridge: Bridge | None = None

    @model_validator(mode="after")
    def _bridge(self):
        if self.model == "live" and self.bridge is None:
            raise Located(("bridge",), "<missing>", "model live needs a bridge block (backend: shm | cuda | udp)")
        if self.model != "live" and self.bridge is not None:
            raise Located(("bridge",), self.bridge.backend, f"a bridge block is for model live, not {self.model}")
        return self


class Decode(_Strict):
    """The workload, the decoder and its placements."""

    code: Literal["rep", "steane", "surface"]
    distance: int = Field(3, ge=2, le=25, strict=True)
    rounds: int = Field(1, ge=1, le=100, strict=True)
    p: float = Field(1e-3, ge=0, lt=0.5)
    noise: Literal["circuit", "code_capacity"] = "circuit"
    shots: int = Field(100_000, gt=0, le=10_000_000, strict=True)
    per: Literal["shot", "round"] = "shot"
    frame_bytes: int | None = Field(None, gt=0, le=65_535)
    decoder: Literal["lookup", "matching", "function"] = "lookup"
    function: str | None = None
    cost: Cost = Cost()
    interval: Literal["wilson", "clopper_pearson"] = "wilson"
    confidence: float = Field(0.95, gt=0, lt=1)
    placements: list[Placement] = Field(min_length=1)


class DecodeScenario(_Strict):
    """A decoder study (see module docstring)."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
    description: str = ""
    calibration: str
    hosting: str = "../calibrations/hosting.yaml"
    seed: int = Field(0, ge=0, strict=True)
    slots: int = Field(16, gt=0, le=65_536, strict=True)
    encoding: Literal["default", "classic", "per_piece"] = "default"
    control: Literal["on_card", "aurora"] = "on_card"
    traffic: Traffic = Traffic()
    qblox: QbloxCluster | None = None  # the control system is a Qblox cluster: its programs time the requests
    deadline: str | None = None
    decode: Decode

    @model_validator(mode="after")
    def _horizon(self):
        from twin.scenario.schema import check_horizon
        d = self.decode
        check_horizon(self.traffic, d.shots * (d.rounds if d.per == "round" else 1), ("traffic",))
        return self

    @model_validator(mode="after")
    def _qblox(self):
        if self.qblox is not None:
            if "traffic" in self.model_fields_set:
                raise Located(("traffic",), "<set>", "a Qblox cluster's requests are timed by its programs (qblox); "
                              "leave traffic out")
            if self.control != "aurora":
                raise Located(("control",), self.control, "a Qblox cluster reaches the link card across a cable: "
                              "control: aurora")
            if self.qblox.bits_per_measurement != 1:
                raise Located(("qblox", "bits_per_measurement"), self.qblox.bits_per_measurement,
                              "a decode study's requests carry its detection events, one bit per detector (the "
                              "contract's syndrome section); the cluster's programs time them: 1 bit per measurement")
        return self
    _dl = field_validator("deadline", mode="before")(classmethod(lambda cls, v: _duration(v)))


@dataclass
class LoadedDecode:
    """A validated decode scenario with its parameter sets loaded."""

    path: Path
    sc: DecodeScenario
    params: ParamSet
    hosting: HostingParams
    hosting_path: Path


def load_decode(path: str | Path) -> LoadedDecode:
    """Load a decode scenario; raises :class:`ConfigError` naming file, key and value."""
    path = Path(path)
    from twin.config.errors import load_yaml
    data = load_yaml(path)
    if isinstance(data, dict) and "nodes" in data and "decode" not in data:
        raise ConfigError(path, "nodes", "[...]", f"this is a loop scenario (nodes, no decode block); run it "
                          f"with `twin run {path}`")
    sc = load_model(path, DecodeScenario, data=data)
    from twin.calibration.roce import RoceParamSet
    from twin.scenario.load import load_calibration
    cal, params = load_calibration(path, sc.calibration)
    if isinstance(params, RoceParamSet) and sc.control != "on_card":
        raise ConfigError(path, "control", sc.control, "a RoCE parameter set's controller is the FPGA itself "
                          "(its ERNIC sends the requests): control: on_card")
    from twin.scenario.load import resolve_gaps_file
    requests = sc.decode.shots * (sc.decode.rounds if sc.decode.per == "round" else 1)
    resolve_gaps_file(path, "traffic", sc.traffic, requests)
    for i, pl in enumerate(sc.decode.placements):
        if pl.device not in params.consumers:
            raise ConfigError(path, f"decode.placements[{i}].device", pl.device,
                              f"not a consumer of {cal.name} (have: {', '.join(params.consumers)})")
        try:
            check_mode(pl.mode, params.consumers[pl.device].kind, pl.device)
        except ValueError as e:
            raise ConfigError(path, f"decode.placements[{i}].mode", pl.mode, str(e)) from None
    hp_path = (path.parent / sc.hosting).resolve()
    if not hp_path.is_file():
        raise ConfigError(path, "hosting", sc.hosting, f"no such file ({hp_path})")
    hosting, _ = load_hosting(hp_path)
    d = sc.decode
    if d.decoder == "function":
        if not d.function:
            raise ConfigError(path, "decode.function", "<missing>", "decoder: function needs a function "
                              "('package.module:callable' or a registered function name)")
        resolve_function(d.function, path)
        for i, pl in enumerate(d.placements):
            if params.consumers[pl.device].kind == "fpga":
                raise ConfigError(path, f"decode.placements[{i}].device", pl.device,
                                  "a Python function does not run in FPGA logic")
        if d.cost.how == "model" and d.cost.fixed is None:
            raise ConfigError(path, "decode.cost.fixed", "<missing>", "a user function has no entry in the cost "
                              "model: give its time (fixed: '50 ns') or use how: host_timed")
    elif d.function:
        raise ConfigError(path, "decode.function", d.function, f"only for decoder: function (decoder is {d.decoder})")
    if "cost" in d.model_fields_set and all(pl.model in ("rtl", "live") for pl in d.placements):
        raise ConfigError(path, "decode.cost", "{...}", "no placement uses it: an rtl placement's time is the "
                          "Verilog's own cycles, a live one's is measured; cost applies to sim and code placements")
    if d.cost.how == "model" and d.cost.fixed is None and d.decoder != "function":
        from twin.qec.cost import MODEL_NS
        for i, pl in enumerate(d.placements):
            kind = params.consumers[pl.device].kind
            if (d.decoder, kind) not in MODEL_NS:
                raise ConfigError(path, f"decode.placements[{i}].device", pl.device,
                                  f"the cost model has no {d.decoder} decoder on a {kind}: give decode.cost.fixed "
                                  "or use how: host_timed")
    if d.code == "steane" and d.distance != 3:
        raise ConfigError(path, "decode.distance", d.distance, "the Steane code has distance 3")
    from twin.qec.codes import memory_circuit
    from twin.qec.lookup import MAX_DETECTORS, syndrome_bytes
    try:
        circuit = memory_circuit(d.code, d.distance, d.rounds, d.p, d.noise)
    except ValueError as e:  # stim's own limits, e.g. the color code needs two rounds
        raise ConfigError(path, "decode.rounds", d.rounds, str(e).splitlines()[0]) from None
    if d.decoder == "lookup" and circuit.num_detectors > MAX_DETECTORS:
        raise ConfigError(path, "decode.decoder", d.decoder, f"{circuit.num_detectors} detectors; a lookup table "
                          f"holds at most {MAX_DETECTORS} (use matching)")
    if d.frame_bytes is not None and d.frame_bytes < syndrome_bytes(circuit.num_detectors):
        need = syndrome_bytes(circuit.num_detectors)
        raise ConfigError(path, "decode.frame_bytes", d.frame_bytes,
                          f"the syndrome of {circuit.num_detectors} detectors needs {need}")
    return LoadedDecode(path, sc, params, hosting, hp_path)


def function_roots(path: Path | None) -> list[Path]:
    """Where ``decode.function``'s module is looked for, in order: the scenario's own folder, its
    parent (the repository root for a bundled scenario, so ``examples.rep3_rule`` resolves), then
    the current directory; duplicates dropped. After these, the ordinary import path (an installed
    package)."""
    roots = [path.resolve().parent, path.resolve().parent.parent] if path is not None else []
    roots.append(Path.cwd().resolve())
    out: list[Path] = []
    for r in roots:
        if r not in out:
            out.append(r)
    return out


def _module_file(root: Path, mod: str) -> Path | None:
    base = root.joinpath(*mod.split("."))
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def _import_from(mod: str, roots: list[Path]):
    """Import ``mod`` from the first of ``roots`` that holds its file (the root is on sys.path only
    during the import), else from the ordinary import path. Returns (module, where it was found)
    or raises ImportError listing the places looked in."""
    import importlib
    import sys
    for root in roots:
        if _module_file(root, mod) is None:
            continue
        cached = sys.modules.get(mod.split(".")[0])
        if cached is not None:
            homes = [getattr(cached, "__file__", None)] + list(getattr(cached, "__path__", []))
            homes = [Path(h).resolve() for h in homes if h]
            if homes and not any(h.is_relative_to(root) for h in homes):
                raise ImportError(f"{root} holds it, but a module {cached.__name__!r} is already imported "
                                  f"from {homes[0]}; give the decoder's module a name of its own")
        sys.path.insert(0, str(root))
        try:
            return importlib.import_module(mod), root
        finally:
            try:
                sys.path.remove(str(root))
            except ValueError:
                pass
    try:
        return importlib.import_module(mod), None
    except ModuleNotFoundError as e:
        if e.name and not (mod == e.name or mod.startswith(e.name + ".")):
            raise  # the module exists but something it imports does not
        where = ", ".join(str(r) for r in roots)
        raise ImportError(f"no module {mod!r} in {where} or on the import path") from None


def resolve_function(spec: str, path: Path | None = None):
    """The callable named by ``spec``: ``package.module:callable`` or a registered function's name.

    The module is imported from the first of :func:`function_roots` that holds it (the scenario's
    folder, its parent, the current directory; each on ``sys.path`` only while importing), else from
    the ordinary import path. The callable must take one positional argument (the request payload,
    bytes). Raises ConfigError naming ``decode.function`` and its value: no such module (listing
    where it looked), importing it raised, no such attribute, not callable, wrong signature."""
    import inspect

    from twin.runtime.functions import lookup
    where = path or "<scenario>"
    if ":" not in spec:
        try:
            return lookup(spec).python
        except KeyError as e:
            raise ConfigError(where, "decode.function", spec, str(e).strip("'\"")) from None
    mod, _, attr = spec.partition(":")
    if not mod or not attr:
        raise ConfigError(where, "decode.function", spec, "expected 'package.module:callable'")
    try:
        module, _root = _import_from(mod, function_roots(path))
    except ImportError as e:
        raise ConfigError(where, "decode.function", spec, f"cannot import it ({e})") from None
    except Exception as e:
        raise ConfigError(where, "decode.function", spec, f"importing {mod} raised {type(e).__name__}: "
                          f"{(str(e).splitlines() or [''])[0][:160]}") from None
    try:
        fn = getattr(module, attr)
    except AttributeError:
        raise ConfigError(where, "decode.function", spec, f"module {mod} ({getattr(module, '__file__', '?')}) "
                          f"has no {attr!r}") from None
    if not callable(fn):
        raise ConfigError(where, "decode.function", spec, f"is a {type(fn).__name__}, not a function")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn  # a builtin without a signature: checked when called
    try:
        sig.bind(b"")
    except TypeError:
        raise ConfigError(where, "decode.function", spec, f"takes {sig}; a decoder takes one positional "
                          "argument, the request payload (bytes)") from None
    return fn


def function_failure(ld: "LoadedDecode", w, e) -> ConfigError:
    """A :class:`twin.qec.decoders.FunctionFailed` as the ConfigError naming ``decode.function``,
    the first shot (and round, for per-round requests) whose payload made it fail, and the payload."""
    g = w.requests_per_shot
    frames = w.cumulative_frames() if g > 1 else w.frames()
    sb = min(len(e.payload), frames.shape[1])
    hits = np.flatnonzero((frames[:, :sb] == np.frombuffer(e.payload[:sb], np.uint8)).all(axis=1))
    if len(hits):
        j = int(hits[0])
        at = f"shot {j // g}" + (f", round {j % g} of {g}" if g > 1 else "")
    else:
        at = "a request"
    return ConfigError(ld.path, "decode.function", ld.sc.decode.function,
                       f"failed at {at} (payload {e.payload.hex()}): {e.problem}")


def interval(k: int, n: int, method: str, confidence: float) -> tuple[float, float]:
    """Confidence interval of a binomial rate k/n: ``wilson`` or ``clopper_pearson`` (exact),
    from ``scipy.stats.binomtest``."""
    from scipy.stats import binomtest
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence,
                                       method="wilson" if method == "wilson" else "exact")
    return float(ci.low), float(ci.high)


def _pymatching_direct(circuit, detectors: np.ndarray) -> tuple[np.ndarray | None, str]:
    """stim + PyMatching on the same shots, or None with the reason when the model has no graph."""
    import pymatching
    try:
        m = pymatching.Matching.from_detector_error_model(circuit.detector_error_model(decompose_errors=True))
    except Exception as e:  # stim raises ValueError for hyperedges it cannot decompose
        return None, f"not decomposable into a matching graph ({str(e).splitlines()[0][:80]})"
    pred = m.decode_batch(detectors.astype(np.uint8)).astype(bool)
    return pred, "pymatching.Matching.decode_batch on stim's detection events"


@dataclass
class DecodeStudy:
    """A decode study's outcome.

    document: the results.json mapping (deterministic for a seed; each placement's ``throughput``
    is the wall clock of this machine and is printed, not written); runs: one
    :class:`twin.qec.loop.DecodeRun` per placement (per-request timestamps, corrections, hops);
    queues: per placement ``(t_ps, depth)``, the requests in the card at 200 instants (int64).
    interrupted: a stop request ended it early (``document["partial"]``: the placements run, the
    last one's whole shots so far).
    """

    document: dict
    runs: list
    queues: list
    interrupted: bool = False  # stopped by a signal: the document is partial (twin.engine.stop)


def run_decode_study(ld: LoadedDecode, shots: int | None = None, seed: int | None = None, progress=None,
                     engine: str = "auto", verify_rounds: int = 10_000) -> dict:
    """Run every placement; returns a :class:`DecodeStudy` (the results document, the per-request
    runs, the queue depths). ``engine`` and ``verify_rounds``: see :func:`twin.qec.loop.run_decode`.
    Raises :class:`ConfigError` for a placement whose model cannot stand there or a user decoder
    that fails. Asked to stop (:mod:`twin.engine.stop`), it ends after the placement running then,
    keeping its whole shots so far (``shots`` completed, ``shots_requested``; no placement entry if
    none completed); the study is ``interrupted`` and its document ``"partial": true``."""
    from twin.qec.cost import CostModel
    from twin.qec.decoders import FunctionDecoder, FunctionFailed, make_decoder
    from twin.qec.loop import queue_depth, run_decode
    from twin.qec.workload import sample

    sc, d = ld.sc, ld.sc.decode
    shots = shots or d.shots
    seed = sc.seed if seed is None else seed
    w = sample(d.code, d.distance, d.rounds, d.p, shots, seed=seed, noise=d.noise, frame_bytes=d.frame_bytes,
               per=d.per)
    if d.decoder == "function":
        decoder = FunctionDecoder(resolve_function(d.function, ld.path), w.n_detectors, w.n_observables,
                                  name=d.function)
    else:
        from twin.qec.lookup import STANDARD
        std = next((n for n, key in STANDARD.items() if key == (d.code, d.distance, d.rounds, d.p)), None)
        # the bundled table's own name, so the loop serves it under its contract id (16, 17): the id a
        # code, rtl or live consumer knows it by
        name = std if std and d.decoder == "lookup" and d.noise == "circuit" else f"{w.name}_{d.decoder}"
        decoder = make_decoder(d.decoder, w.circuit, name=name)
    pm, pm_how = _pymatching_direct(w.circuit, w.detectors)
    pm_errors = None if pm is None else int((pm != w.observables).any(axis=1).sum())
    t = ld.sc.traffic
    from twin.scenario import traffic_params
    q = ld.sc.qblox
    traffic = (q.traffic(w.requests, w.frame_bytes, carry_syndrome=False) if q is not None
               else traffic_params(t, w.requests, w.frame_bytes))
    deadline_ps = time_ps(sc.deadline) if sc.deadline else None
    doc = {"schema": "twin.decode/1", "scenario": sc.name, "calibration": ld.params.name,
           "hosting": ld.hosting.__dict__, "seed": seed,
           "workload": {"code": d.code, "distance": d.distance, "rounds": d.rounds, "p": d.p, "noise": d.noise,
                        "shots": shots, "detectors": w.n_detectors, "observables": w.n_observables,
                        "frame_bytes": w.frame_bytes, "requests": w.requests,
                        "per_request": "one shot's detection events" if d.per == "shot" else
                        "one QEC round's detection events (the consumer decodes the shot's events so far)"},
           "decoder": {"kind": d.decoder, "name": decoder.name, "function": d.function},
           "traffic": traffic_document(sc),
           "deadline_ns": deadline_ps / 1000 if deadline_ps else None,
           "interval": {"method": d.interval, "confidence": d.confidence},
           "stim_pymatching": None, "placements": []}
    if pm_errors is not None:
        lo, hi = interval(pm_errors, shots, d.interval, d.confidence)
        doc["stim_pymatching"] = {"logical_errors": pm_errors, "ler": pm_errors / shots, "ci": [lo, hi],
                                  "how": pm_how}
    else:
        doc["stim_pymatching"] = {"logical_errors": None, "how": pm_how}
    runs = []
    queues = []
    from twin.calibration.roce import RoceParamSet
    from twin.nodes.models import Situation, refusal
    from twin.qec.loop import session_function
    fn = session_function(decoder, w.name)
    for i, pl in enumerate(d.placements):  # before any loop runs: can each model stand there?
        why = refusal("consumer", pl.model, Situation(
            device_kind=ld.params.consumers[pl.device].kind,
            path="roce" if isinstance(ld.params, RoceParamSet) else "card", frame_bytes=w.frame_bytes,
            function=fn, study="decode", hosting=pl.mode))
        if why:
            from twin.config import ConfigError
            raise ConfigError(ld.path, f"decode.placements[{i}].model", pl.model, why)
    for pl in d.placements:
        cost = CostModel(how=d.cost.how, scale=d.cost.scale,
                         fixed_ns=time_ps(d.cost.fixed) / 1000 if d.cost.fixed else None)
        cb = (lambda n, name=pl.device: progress(name, n)) if progress else None
        stopped = None
        try:
            r = run_decode(ld.params, pl.device, w, decoder, mode=pl.mode, hosting=ld.hosting, cost=cost,
                           traffic=traffic, seed=seed, slots=sc.slots,
                           encoding="classic" if sc.encoding == "default" else sc.encoding,
                           external_control=sc.control == "aurora", progress=cb, engine=engine,
                           verify_rounds=verify_rounds, model=pl.model,
                           bridge=pl.bridge.settings() if pl.bridge else None)
        except FunctionFailed as e:
            raise function_failure(ld, w, e) from None
        except Interrupted as e:
            stopped, r = e, e.partial
            doc["partial"] = True
            if r is None or not r.workload.shots:  # not one whole shot: nothing of this placement to keep
                break
        runs.append(r)
        res = r.result
        le_loop, le_direct = r.logical_errors_loop, r.logical_errors_direct
        done = r.workload.shots  # all of them, or those before a stop
        s = {"device": pl.device, "mode": pl.mode, **({"model": pl.model} if pl.model != "sim" else {}),
             "function": {"id": r.function.id, "name": r.function.name},
             "kind": ld.params.consumers[pl.device].kind, "shots": done, "requests": r.workload.requests,
             "identical_corrections": int((r.corrections == r.direct).all(axis=1).sum()),
             "card_mismatches": int(res.stats.get("mismatches", 0)), "engine": r.extra["engine"],
             "replies_checked": int(r.extra["replies_checked"]),
             "logical_errors": {"loop": le_loop, "direct": le_direct},
             "ler": {"loop": le_loop / done, "direct": le_direct / done},
             "ci": {"loop": list(interval(le_loop, done, d.interval, d.confidence)),
                    "direct": list(interval(le_direct, done, d.interval, d.confidence))},
             "cost": r.cost, "compute_ns_mean": round(float(r.compute_ps.mean()) / 1000, 3) if "base_ns" in r.cost
             else None,
             "backlog_max": int(res.stats.get("backlog_max", 0)),
             "rtt": summary_ns(res.rtt_ps)}
        if res.loop_ps is not None and sc.control == "aurora":
            s["loop"] = summary_ns(res.loop_ps)
            if q is not None:  # from a round's last acquisition integrated to the correction back at the link
                extra = q.result_latency_ns + q.trigger_network_ns
                s["publish_to_reply"] = {k: round(v + extra, 3) for k, v in s["loop"].items()}
        if deadline_ps is not None:
            lat = res.loop_ps if sc.control == "aurora" else res.rtt_ps
            s["deadline_misses"] = int((lat > deadline_ps).sum())
        tq = np.linspace(int(res.t_in.min()), int(res.t_have.max()), 200).astype(np.int64)
        s["queue_depth_max"] = int(queue_depth(res, np.sort(res.t_in)).max())
        s["throughput"] = {"loop_decode_requests_per_s": w.requests / r.decode_wall_s if r.decode_wall_s else None,
                           "direct_decode_requests_per_s": w.requests / r.direct_wall_s if r.direct_wall_s else None,
                           "note": "wall clock of this machine; not part of the deterministic results"}
        if pl.mode == "chain":
            s["waited_for_rearm"] = int(r.extra["waited_for_rearm"])
        queues.append((tq, queue_depth(res, tq)))
        if stopped is not None:
            s["shots_requested"], s["requests_requested"] = shots, w.requests
        doc["placements"].append(s)
        if stopped is not None:
            break
    return DecodeStudy(doc, runs, queues, interrupted="partial" in doc)


def traffic_document(sc: DecodeScenario) -> dict:
    """The ``traffic`` mapping of a decode study's results.json: the control side's traffic (mode,
    period, clock, where it sits; in_flight and gaps when set), or the Qblox cluster's."""
    q, t = sc.qblox, sc.traffic
    if q is not None:
        return {"mode": "open_loop", "period_ns": q.period_ns(), "clock": q.clock, "ppm": q.ppm,
                "control": "qblox cluster (aurora)", "device": q.device}
    doc = {"mode": t.mode, "period_ns": time_ps(t.period) / 1000 if t.period else None, "clock": t.clock,
           "control": sc.control}
    if t.in_flight != 1:
        doc["in_flight"] = t.in_flight
    if t.gaps is not None:
        doc["gaps"] = t.gaps.model_dump(exclude_none=True)
    return doc


def print_decode(study: DecodeStudy, console) -> None:
    """The terminal table of a decode study."""
    from rich.table import Table
    doc = study.document
    w = doc["workload"]
    tb = Table(title=f"{doc['scenario']}: {w['code']} d={w['distance']} rounds={w['rounds']} p={w['p']:g}, "
                     f"{w['shots']} shots, {w['requests']} requests, {doc['decoder']['kind']} decoder")
    for col in ("device", "mode", "differ", "mism.", "LER loop [CI]", "LER direct", "p50", "p99",
                "misses", "backlog"):
        tb.add_column(col, justify="left" if col in ("device", "mode") else "right")
    for s in doc["placements"]:
        lo, hi = s["ci"]["loop"]
        tb.add_row(s["device"], s["mode"], str(s["requests"] - s["identical_corrections"]), str(s["card_mismatches"]),
                   f"{s['ler']['loop']:.2e} [{lo:.1e},{hi:.1e}]", f"{s['ler']['direct']:.2e}",
                   f"{s['rtt']['p50_ns'] / 1000:.3f} µs", f"{s['rtt']['p99_ns'] / 1000:.3f} µs",
                   str(s.get("deadline_misses", "-")), str(s["backlog_max"]))
    console.print(tb)
    pm = doc["stim_pymatching"]
    if pm["logical_errors"] is not None:
        console.print(f"stim+PyMatching direct on the same shots: {pm['logical_errors']} logical errors, "
                      f"LER {pm['ler']:.2e} [{pm['ci'][0]:.1e}, {pm['ci'][1]:.1e}] "
                      f"({doc['interval']['method']}, {doc['interval']['confidence']:.0%})")
    else:
        console.print(f"stim+PyMatching direct: n/a, {pm['how']}")
    for s in doc["placements"]:
        tp = {k: (v or float("nan")) for k, v in s["throughput"].items()}
        c = s["cost"]
        compute = (f"compute {c['how']} {c['base_ns']:g} ns + {c['per_event_ns']:g} ns per detection event (mean "
                   f"{s['compute_ns_mean']:g} ns)") if "base_ns" in c else f"compute: {c['how']}"
        console.print(f"{s['device']} ({s['mode']}): {compute}; decoding in the loop "
                      f"{tp['loop_decode_requests_per_s']:,.0f} requests/s, direct "
                      f"{tp['direct_decode_requests_per_s']:,.0f} requests/s (this machine); engine {s['engine']}, "
                      f"{s['replies_checked']:,} replies checked byte for byte by the card")


def write_decode_outputs(study: DecodeStudy, out: Path) -> list[Path]:
    """results.json (deterministic for a seed: no wall-clock numbers), queue_depth.csv (requests
    in the card at 200 instants per placement: placement, t_ps, depth), latency_vs_round.png,
    backlog_vs_time.png. Returns the paths written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out.mkdir(parents=True, exist_ok=True)
    doc = study.document
    clean = dict(doc)
    clean["placements"] = [{k: v for k, v in s.items() if k != "throughput"} for s in doc["placements"]]
    paths = [out / "results.json", out / "latency_vs_round.png", out / "backlog_vs_time.png"]
    paths[0].write_text(json.dumps(clean, indent=2, sort_keys=True, default=float) + "\n")
    paths.insert(1, out / "queue_depth.csv")
    with paths[1].open("w") as f:
        f.write("placement,t_ps,depth\n")
        for s, (tq, depth) in zip(doc["placements"], study.queues):
            f.writelines(f"{s['device']}:{s['mode']},{int(t)},{int(d)}\n" for t, d in zip(tq, depth))
    fig, ax = plt.subplots(figsize=(8, 4))
    for s, r in zip(doc["placements"], study.runs):
        rtt = r.result.rtt_ps / 1e6
        ax.plot(np.arange(1, len(rtt) + 1), rtt, ".", ms=1, label=f"{s['device']} ({s['mode']})")
    if doc["deadline_ns"]:
        ax.axhline(doc["deadline_ns"] / 1000, color="r", lw=1, label="deadline")
    ax.set_xlabel("request")
    ax.set_ylabel("round trip (µs)")
    ax.set_title(f"{doc['scenario']}: latency vs round")
    ax.legend(markerscale=8, fontsize=8)
    fig.tight_layout()
    fig.savefig(paths[2], dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(8, 4))
    for s, (tq, depth) in zip(doc["placements"], study.queues):
        ax.step((tq - tq[0]) / 1e6, depth, where="post", label=f"{s['device']} ({s['mode']})")
    ax.set_xlabel("time (µs)")
    ax.set_ylabel("requests in the card (queue depth)")
    ax.set_title(f"{doc['scenario']}: backlog vs time")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(paths[3], dpi=120)
    plt.close(fig)
    return paths
