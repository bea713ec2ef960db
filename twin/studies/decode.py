"""``twin decode``: a decoder study from a scenario with a ``decode:`` block.

The scenario's schema is :mod:`twin.qec.schema` (its keys are listed there); a scenario is loaded by
:func:`twin.qec.load.load_decode` (the file, calibration and traffic through the run scenario's loader,
:func:`twin.scenario.load.read_scenario`, then the decode block); this module runs it
(:func:`run_decode_study`); :mod:`twin.reports.decode` prints and writes the result.

For every placement the study reports: corrections identical to the direct decode (same shots,
byte for byte), the card's mismatches, logical errors and rate with its interval for the loop,
for the direct decode and for stim+PyMatching run directly on the same shots (and, for windows,
the whole-shot decode of the same shots), the reaction time (a request's last syndrome round
measured -> its correction at the control system) and the card-boundary round trip, deadline
misses, the stream (throughput, the backlog: requests waiting anywhere for a decoder, its growth
per cycle against the expected ``1 - N T / S``, rho; a stream over K devices: rho = S / (K N T) and
each device's part, ``per_device``), and the decode throughput of the loop's
batched decode beside the direct decode's. Files: results.json, requests.parquet (every request),
queue_depth.csv; plots: latency vs request, backlog vs time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from twin.config import ConfigError
from twin.engine.stop import Interrupted
from twin.output.summary import Check, Latency, PlacementSummary, flow_summary
from twin.qec.load import LoadedDecode, build_decoder, check_shots, decode_circuit, workload_name
from twin.qec.schema import Decode, DecodeScenario, Placement
from twin.scenario.compile import is_roce
from twin.units import time_ps


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
    queues: per placement ``(t_ps, depth)``, the requests in the card at 200 instants (int64);
    tables: per placement ``(name, request table)`` (:func:`twin.qec.streaming.request_table`);
    backlogs: per placement ``(t_ps, backlog)``, the requests waiting anywhere for a decoder at 200
    instants (:func:`twin.qec.streaming.backlog`). interrupted: a stop request ended it early
    (``document["partial"]``: the placements run, the last one's whole shots so far).
    """

    document: dict
    runs: list
    queues: list
    tables: list | None = None
    backlogs: list | None = None
    interrupted: bool = False  # stopped by a signal: the document is partial (twin.engine.stop)
    failure: Exception | None = None  # a live endpoint's failure that ended it (node and round named; partial)


def run_decode_study(ld: LoadedDecode, shots: int | None = None, seed: int | None = None, progress=None,
                     engine: str = "auto", verify_rounds: int = 10_000, failed=None) -> DecodeStudy:
    """Run every placement; returns a :class:`DecodeStudy` (the results document, the per-request
    runs, the queue depths). ``engine`` and ``verify_rounds``: see :func:`twin.qec.loop.run_decode`.
    Raises :class:`ConfigError` for a placement whose model cannot stand there or a user decoder
    that fails. Asked to stop (:mod:`twin.engine.stop`), it ends after the placement running then,
    keeping its whole shots so far (``shots`` completed, ``shots_requested``; no placement entry if
    none completed); the study is ``interrupted`` and its document ``"partial": true``. A live
    endpoint that dies, hangs or cannot start (:class:`hw_bridge.contract.LiveFailure`) ends the
    study the same way (its whole shots so far kept, the placement's ``live.error``): the study's
    ``failure`` is it, with ``placement`` (its label) set, and ``failed(label, failure, requests
    completed)`` is called the moment it is caught, before any summary."""
    st = _Study(ld, shots, seed, progress, engine, verify_rounds)
    doc = st.document()
    st.check_models()
    out = _Kept(doc)
    stopped: Any = None
    failure: Any = None
    for pl in ld.sc.decode.placements:
        run = st.runner(pl)
        r, stopped = st.run_placement(run)
        if stopped is not None and not isinstance(stopped, Interrupted):  # a live endpoint's failure
            failure = stopped
            failure.placement = placement_label("+".join(pl.names), pl.mode)
            if failed:
                failed(failure.placement, failure, 0 if r is None else len(r.result.t_in))
        if stopped is not None:
            doc["partial"] = True
            if r is None or not r.workload.shots:  # not one whole shot: nothing of this placement to keep
                break
        stopped = st.keep(out, pl, r, run, stopped)
        if stopped is not None:
            break
    st.finish(doc, out.runs, stopped)
    return DecodeStudy(doc, out.runs, out.queues, out.tables, out.backlogs,
                       interrupted="partial" in doc and failure is None, failure=failure)


@dataclass
class _Kept:
    """What a study keeps of its placements as they run (:class:`DecodeStudy`'s parts)."""

    document: dict
    runs: list = field(default_factory=list)
    queues: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    backlogs: list = field(default_factory=list)


class _Study:
    """One decode study's shared state and its jobs: the sampled workload, the decoder and the
    traffic (built once), the document's header, the placements' model check, each placement's run
    and summary, and the comparisons made once every placement ran."""

    def __init__(self, ld: LoadedDecode, shots: int | None, seed: int | None, progress, engine: str,
                 verify_rounds: int):
        from twin.qec.workload import sample_circuit
        self.ld, self.sc, self.d = ld, ld.sc, ld.sc.decode
        self.shots = shots or self.d.shots
        if shots is not None and shots != self.d.shots:  # the scenario's own were checked at load
            check_shots(ld, shots)
        self.seed = self.sc.seed if seed is None else seed
        self.progress, self.engine, self.verify_rounds = progress, engine, verify_rounds
        circuit = ld.circuit if ld.circuit is not None else decode_circuit(ld.path, self.d)
        self.w = sample_circuit(circuit, self.shots, seed=self.seed, frame_bytes=self.d.frame_bytes, per=self.d.per,
                                window=self.d.window_tuple(), name=workload_name(self.d, ld.path))
        self.decoder = build_decoder(ld, self.w)
        self.pm, self.pm_how = _pymatching_direct(self.w.circuit, self.w.detectors)
        self.pm_errors = None if self.pm is None else int((self.pm != self.w.observables).any(axis=1).sum())
        self.traffic = decode_traffic(ld, self.w)
        self.deadline_ps = time_ps(self.sc.deadline) if self.sc.deadline else None

    def ci(self, k: int, n: int) -> list[float]:
        """The scenario's confidence interval of ``k`` errors in ``n`` shots."""
        return list(interval(k, n, self.d.interval, self.d.confidence))

    def document(self) -> dict:
        """results.json before any placement ran: the scenario, workload, decoder, traffic, and
        stim+PyMatching on the same shots."""
        sc, d, w, ld, fb = self.sc, self.d, self.w, self.ld, self.d.feedback
        doc = {"schema": "twin.decode/1", "scenario": sc.name, "calibration": ld.params.name,
               "hosting": ld.hosting.__dict__, "seed": self.seed,
               "workload": {**workload_document(d),
                            "shots": self.shots, "detectors": w.n_detectors, "observables": w.n_observables,
                            "frame_bytes": w.frame_bytes, "requests": w.requests,
                            "per_request": PER_REQUEST[d.per],
                            **({"window": window_document(d.window.spec(), w.requests_per_shot)} if d.window else {})},
               "decoder": {"kind": d.decoder, "name": self.decoder.name, "function": d.function},
               "traffic": traffic_document(sc),
               "deadline_ns": self.deadline_ps / 1000 if self.deadline_ps else None,
               "interval": {"method": d.interval, "confidence": d.confidence},
               "feedback": None if fb is None else {
                   "slack_ns": time_ps(fb.slack) / 1000, "idle": fb.idle.noise().describe(), "qubits": fb.qubits,
                   "idle_qubits": list(ld.feedback.idle_qubits), "gates": ld.feedback.gates,
                   "waits": [list(x) for x in ld.feedback.waits], "inject_ns": [time_ps(x) / 1000 for x in fb.inject]},
               "stim_pymatching": None, "placements": []}
        if self.pm_errors is not None:
            lo, hi = self.ci(self.pm_errors, self.shots)
            doc["stim_pymatching"] = {"logical_errors": self.pm_errors, "ler": self.pm_errors / self.shots,
                                      "ci": [lo, hi], "how": self.pm_how}
        else:
            doc["stim_pymatching"] = {"logical_errors": None, "how": self.pm_how}
        return doc

    def check_models(self) -> None:
        """Before any loop runs: can each placement's model stand on each of its devices (the model
        registry's refusal, :func:`twin.nodes.models.refusal`)? Raises :class:`ConfigError`."""
        from twin.nodes.models import Situation, refusal
        from twin.qec.loop import session_function
        params = self.ld.params
        fn = session_function(self.decoder, self.w.name)
        for i, pl in enumerate(self.d.placements):
            for dev in pl.names:
                why = refusal("consumer", pl.model, Situation(
                    device_kind=params.consumers[dev].kind, path="roce" if is_roce(params) else "card",
                    frame_bytes=self.w.frame_bytes, function=fn, study="decode", hosting=pl.mode,
                    stages=2 if params.consumers[dev].handoff is not None else 1))
                if why:
                    raise ConfigError(self.ld.path, f"decode.placements[{i}].model", pl.model,
                                      why + (f" (device {dev})" if pl.shared else ""))

    def runner(self, pl):
        """``run(inject_ps=0)``: placement ``pl``'s run of the workload (:func:`twin.qec.loop.run_decode`),
        ``inject_ps`` added to its decoder's time; its runs share one :class:`twin.qec.cost.CostModel`
        (whose notes they add to)."""
        from twin.qec.load import cost_model
        cost = cost_model(self.ld, pl, self.seed)
        return lambda inject_ps=0: self.run(pl, cost, inject_ps)

    def run(self, pl, cost, inject_ps: int = 0):
        """Placement ``pl``'s run of the workload under ``cost``, ``inject_ps`` added to its decoder's time."""
        from twin.qec.loop import run_decode
        sc = self.sc
        name = "+".join(pl.names) + (f" +{inject_ps / 1e6:g} us" if inject_ps else "")
        cb = (lambda n: self.progress(name, n)) if self.progress else None
        return run_decode(self.ld.params, pl.where, self.w, self.decoder, mode=pl.mode, hosting=self.ld.hosting,
                          cost=cost, traffic=self.traffic, seed=self.seed, slots=sc.slots,
                          encoding="classic" if sc.encoding == "default" else sc.encoding,
                          external_control=sc.control == "aurora", progress=cb, engine=self.engine,
                          verify_rounds=self.verify_rounds, model=pl.model,
                          bridge=pl.bridge.settings() if pl.bridge else None, workers=pl.workers, order=pl.order,
                          inject_ps=inject_ps)

    def run_placement(self, run) -> tuple[Any, Any]:
        """``(run(), None)`` (``run``: :meth:`runner`), or after a stop request ``(the partial run or
        None, the stop)``. A user decoder's or the cost model's failure is the :class:`ConfigError`
        naming its key."""
        from twin.qec.cost import CostError
        from twin.qec.decoders import FunctionFailed
        from twin.qec.decoders.base import DecoderFailed
        d = self.d
        try:
            return run(), None
        except FunctionFailed as e:
            raise function_failure(self.ld, self.w, e) from None
        except DecoderFailed as e:  # a decoder answered with the wrong shape
            raise ConfigError(self.ld.path, "decode.decoder", d.decoder, str(e)) from None
        except CostError as e:  # what the cost model says this decoder costs here cannot be simulated
            raise ConfigError(self.ld.path, "decode.cost", d.cost.how, str(e)) from None
        except Interrupted as e:
            return e.partial, e
        except Exception as e:  # a live endpoint failed (dead, hung, refused): its whole shots so far
            if not getattr(e, "keeps_partial", False):
                raise
            return getattr(e, "partial", None), e

    def keep(self, out: _Kept, pl, r, run, stopped: Interrupted | None) -> Interrupted | None:
        """Add placement ``pl``'s run ``r`` to ``out``: its summary in the document, its request
        table, queue depth and backlog; the feedback study's further runs (``run``, when not stopped).
        Returns the stop request that ended it, or None."""
        from twin.qec.loop import queue_depth
        from twin.qec.streaming import backlog, request_table
        res = r.result
        out.runs.append(r)
        table = request_table(r)
        label = "+".join(pl.names)
        out.tables.append((placement_label(label, pl.mode, pl.workers, pl.order, pl.dispatch_used, pl.call), table))
        feedback = None
        if self.d.feedback is not None and stopped is None:
            feedback, stopped = feedback_points(self.ld, r, run, self.traffic, self.seed)
            if stopped is not None:
                out.document["partial"] = True
        tq = np.linspace(int(res.t_in.min()), int(res.t_have.max()), 200).astype(np.int64)
        w = self.w
        s = self.summary(pl, r, table, stopped, feedback=feedback,
                         queue_depth_max=int(queue_depth(res, np.sort(res.t_in)).max()),
                         throughput={"loop_decode_requests_per_s": w.requests / r.decode_wall_s if r.decode_wall_s
                                     else None,
                                     "direct_decode_requests_per_s": w.requests / r.direct_wall_s if r.direct_wall_s
                                     else None,
                                     "note": "wall clock of this machine; not part of the deterministic results"},
                         waited_for_rearm=int(r.extra["waited_for_rearm"]) if pl.mode == "chain" else None,
                         requested=None if stopped is None else (self.shots, w.requests))
        out.queues.append((tq, queue_depth(res, tq)))
        tb = np.linspace(int(table["arrival_ps"].min()), int(table["start_ps"].max()), 200).astype(np.int64)
        out.backlogs.append((tb, backlog(table["arrival_ps"], table["start_ps"], tb)))
        out.document["placements"].append(s.to_json())
        return stopped

    def cycle_ps(self) -> int | None:
        """The open-loop stream's period (the QEC cycle, ps), or None."""
        t = self.traffic
        return t.period_ps if t.mode == "open_loop" and t.period_ps else None

    def summary(self, pl, r, table, stopped=None, **kept: Any) -> PlacementSummary:
        """Placement ``pl``'s entry in results.json from its run ``r`` and request table: the
        corrections against the direct decode, the logical errors and rates (timing-aware with a
        deadline), the cost, the stream, the round trip and the timing blocks (its common part by
        :func:`twin.output.summary.flow_summary`); ``kept``: the fields :meth:`keep` adds (feedback
        points, queue depth, throughput, re-arm waits, what a stopped run asked)."""
        from twin.qec.streaming import device_summaries, stream_summary
        res, done, q = r.result, r.workload.shots, self.sc.qblox  # all of them, or those before a stop
        le_loop, le_direct = r.logical_errors_loop, r.logical_errors_direct
        aurora = self.sc.control == "aurora"
        timing = flow_summary(
            res, budget=not pl.shared and len(res.t_in) > 0, loop=res.loop_ps is not None and aurora,
            publish_extra_ns=None if q is None else q.result_latency_ns + q.trigger_network_ns,
            deadline_ps=self.deadline_ps, deadline_on="loop" if aurora else "rtt",
            program=lambda stats: decode_program_summary(stats, r.corrections, q))
        errors, ler, ci = ({"loop": le_loop, "direct": le_direct}, {"loop": le_loop / done, "direct": le_direct / done},
                           {"loop": self.ci(le_loop, done), "direct": self.ci(le_direct, done)})
        if self.deadline_ps is not None:
            lat = res.loop_ps if aurora else res.rtt_ps
            from twin.qec.ler_latency import timing_aware
            fail = int(timing_aware(r, lat > self.deadline_ps).sum())  # a late correction is a failure
            errors["timing_aware"], ler["timing_aware"], ci["timing_aware"] = fail, fail / done, self.ci(fail, done)
        timed = "base_ns" in r.cost  # the decoder's own time per request, beside the round trip
        return PlacementSummary(
            device="+".join(pl.names), mode=pl.mode,
            model=pl.model if pl.model != Placement.model_fields["model"].default else None,
            workers=(pl.workers, pl.order) if pl.workers > 1 else None,
            shared=(pl.names, pl.dispatch_used) if pl.shared else None,
            function={"id": r.function.id, "name": r.function.name},
            kind="+".join(self.ld.params.consumers[dev].kind for dev in pl.names), shots=done,
            requests=r.workload.requests, identical_corrections=int((r.corrections == r.direct).all(axis=1).sum()),
            check=Check(r.extra["engine"], int(r.extra["replies_checked"]), int(res.stats.get("mismatches", 0))),
            logical_errors=errors, ler=ler, ci=ci, cost=r.cost,
            compute_ns_mean=round(float(r.compute_ps.mean()) / 1000, 3) if timed else None,
            stream=stream_summary(table, self.cycle_ps(), pl.workers, len(pl.names), self.sc.slots), timing=timing,
            decoder_only=Latency.of(r.compute_ps) if timed else None,
            per_device=device_summaries(r, table, self.cycle_ps(), pl.workers, self.sc.slots) if pl.shared else None,
            live=self.live(r, stopped), **kept)

    def live(self, r, stopped) -> dict | None:
        """A paced live placement's ``live`` block (:func:`twin.qec.live_pace.live_block`: measured beside the
        same placement simulated), or None for any other placement."""
        if "simulated" not in r.extra:
            return None
        from twin.qec.live_pace import live_block
        failure = stopped if stopped is not None and not isinstance(stopped, Interrupted) else None
        return live_block(r, self.cycle_ps(), self.deadline_ps, "loop" if self.sc.control == "aurora" else "rtt",
                          self.sc.slots, failure)

    def finish(self, doc: dict, runs: list, stopped: Interrupted | None) -> None:
        """After the placements: stopped, PyMatching on the shots the last placement kept; windows,
        the windowed decode against whole-shot matching."""
        shots, pm_errors = self.shots, self.pm_errors
        if stopped is not None and runs and self.pm is not None:  # PyMatching on the shots the last one kept
            shots = runs[-1].workload.shots
            pm_errors = int((self.pm[:shots] != self.w.observables[:shots]).any(axis=1).sum())
            lo, hi = self.ci(pm_errors, shots)
            doc["stim_pymatching"].update(logical_errors=pm_errors, ler=pm_errors / shots if shots else 0.0,
                                          ci=[lo, hi], shots=shots)
        if self.d.per == "window" and runs and pm_errors is not None:  # windowed against whole-shot matching
            k, kept = runs[0].logical_errors_direct, runs[0].workload.shots  # (after a stop: its whole shots)
            lo, hi = doc["stim_pymatching"]["ci"]
            doc["windowed_vs_whole_shot"] = {
                "windowed": {"logical_errors": k, "ler": k / kept, "ci": self.ci(k, kept)},
                "whole_shot": {"logical_errors": pm_errors, "ler": pm_errors / shots, "ci": [lo, hi]},
                "windowed_within_whole_shot_ci": bool(lo <= k / kept <= hi)}


def window_document(spec, per_shot: int) -> dict:
    """results.json's window: kind, commit, buffer, the rounds of a streaming window (C + B) or of
    an A window (C + 2 B), and the requests per shot."""
    rounds = spec.rounds if spec.kind == "streaming" else spec.commit + 2 * spec.buffer
    return {"kind": spec.kind, "rounds": rounds, "commit": spec.commit, "buffer": spec.buffer,
            "windows_per_shot": per_shot}


PER_REQUEST = {"shot": "one shot's detection events",
               "round": "one QEC round's detection events (the consumer decodes the shot's events so far)",
               "window": "one window's detection events (the consumer decodes the window and commits: a sliding "
                         "window its first rounds, an A window its core, a B window its seam)"}


def decode_traffic(ld: LoadedDecode, w):
    """The control side's :class:`~twin.devices.generator.TrafficParams` for workload ``w``: the
    scenario's traffic or the Qblox cluster's programs; with ``decode.feedback`` the circuit's gates
    wait for the loop (the program's time, :mod:`twin.qec.feedback`)."""
    from twin.scenario import traffic_params
    q, fb = ld.sc.qblox, ld.sc.decode.feedback
    traffic = (q.traffic(w.requests, w.frame_bytes, carry_syndrome=False) if q is not None
               else traffic_params(ld.sc.traffic, w.requests, w.frame_bytes))
    if fb is None:
        return traffic
    from dataclasses import replace

    from twin.devices.generator import Waits
    then = (traffic.period_ps - time_ps(fb.slack)) // traffic.clock_ps  # the gate, then the rest of the cycle
    return replace(traffic, waits=Waits(ld.feedback.waits, then))


def feedback_points(ld: LoadedDecode, r, run, traffic, seed: int) -> tuple[list[dict], Interrupted | None]:
    """The LER vs latency points of one placement (:func:`twin.qec.ler_latency.feedback_point`):
    its own run ``r`` first, then ``run(inject_ps)`` once per ``decode.feedback.inject``; and the
    stop request that ended them early (the points so far kept), or None."""
    from twin.qec.ler_latency import feedback_point
    d = ld.sc.decode
    fb = d.feedback
    if fb is None:
        raise ValueError(f"{ld.path}: feedback points need decode.feedback")
    noise = fb.idle.noise()

    def ci(k, n):
        return interval(k, n, d.interval, d.confidence)

    def point(run_, inject_ps):
        return feedback_point(run_, ld.feedback, traffic.period_ps, time_ps(fb.slack), noise, seed, ci, inject_ps)
    out = [point(r, 0)]
    for x in fb.inject:
        try:
            out.append(point(run(time_ps(x)), time_ps(x)))
        except Interrupted as e:
            return out, e
    return out, None


def workload_document(d: Decode) -> dict:
    """The code part of results.json's ``workload``: code, distance, rounds, p, noise (the BB codes'
    distance is their own; noise with its default); for a circuit file ``code: null`` and
    ``circuit``: the file as the scenario names it (the file fixes the rest, given as null)."""
    if d.circuit is not None:
        return {"code": None, "circuit": d.circuit, "distance": None, "rounds": None, "p": None, "noise": None}
    from twin.qec.bb import BB_CODES
    dist = BB_CODES[d.code].d if d.code in BB_CODES else d.distance
    return {"code": d.code, "distance": dist, "rounds": d.rounds, "p": d.p, "noise": d.noise_model}


def decode_program_summary(stats: dict, corrections: np.ndarray, q) -> dict:
    """A decode placement's ``program`` block (:func:`twin.output.program.program_summary`); for a
    Qblox program that branches (``set_cond``), ``conditional.against_corrections``: the requests
    whose conditional pulse ran as the decoder's correction bit (``feedback.answer_bit`` of the
    reply the card read) says (``agree``) and those where it did not (``disagree``)."""
    from twin.output.program import program_summary
    out = program_summary(stats)
    c = stats.get("conditional")
    if c is not None and q is not None:
        byte, bit = divmod(q.fb().answer_bit, 8)
        want = (corrections[:, byte] >> bit & 1).astype(bool) if byte < corrections.shape[1] else \
            np.zeros(len(corrections), bool)
        seqs = np.asarray(stats["reply_seqs"], np.int64)
        seqs = seqs[seqs <= len(want)]
        ran = np.asarray(c["ran_by_reply"], bool)[:len(seqs)]
        agree = int((ran == want[seqs - 1]).sum())
        out["conditional"]["against_corrections"] = {"agree": agree, "disagree": int(len(seqs) - agree)}
    return out


def traffic_document(sc: DecodeScenario) -> dict:
    """The ``traffic`` mapping of a decode study's results.json: the control side's traffic (mode,
    period, clock, where it sits; in_flight and gaps when set), or the Qblox cluster's."""
    q, t = sc.qblox, sc.traffic
    if q is not None:
        return {"mode": "open_loop", "period_ns": q.period_ns(), "clock": q.clock, "ppm": q.ppm,
                "control": "qblox cluster (aurora)", "device": q.device,
                **({"feedback": q.fb().model_dump()} if q.listens() else {})}
    doc: dict[str, Any] = {"mode": t.mode, "period_ns": time_ps(t.period) / 1000 if t.period else None,
                           "clock": t.clock, "control": sc.control}
    if t.in_flight != 1:
        doc["in_flight"] = t.in_flight
    if t.gaps is not None:
        doc["gaps"] = t.gaps.model_dump(exclude_none=True)
    if t.program is not None:
        doc["program"] = t.program.model_dump()
    return doc


def placement_label(device: str, mode: str, workers: int = 1, order: str = "in_order",
                    dispatch: str | None = None, call: str = "native") -> str:
    """A placement's name in the files and plots: ``device:mode``, with ``:xN:order`` for N > 1 workers,
    ``:dispatch`` for a stream shared over devices (``device`` is then ``a+b``) and ``:python`` for a
    decoder called through its Python binding."""
    return (f"{device}:{mode}" + (f":x{workers}:{order}" if workers > 1 else "") + (f":{dispatch}" if dispatch else "")
            + (":python" if call == "python" else ""))
