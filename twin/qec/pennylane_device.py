"""The ``twin.loop`` PennyLane device: a QNode's mid-circuit feedback decided by the twin's loop.

``qml.device("twin.loop", wires=..., ...)`` (registered through PennyLane's ``pennylane.plugins``
entry point in pyproject.toml) runs a QNode with mid-circuit measurements (``qml.measure``) on
``default.qubit``'s kernels (:mod:`twin.qec.pennylane_frontend`), and every ``qml.cond`` is decided by
a reply that came through one loop of the twin's engine (:func:`twin.qec.loop.run_decode`: control
side -> link card -> consumer memory -> hosted function -> reply): conditionals are grouped by the
measurements they read, each group is one request per shot (or per path, analytic) whose payload holds
the measured bits, the consumer answers with the measurement-derived value (the identity, or the
function a scenario or ``function=`` names) and the conditional operation waits for that reply. Each
reply is checked against the value computed from the simulated measurements
(:class:`~twin.qec.pennylane_frontend.LoopAnswerError` when one differs, besides the card's own check).

Results are PennyLane's usual ones for every return type: analytic (``shots=None``: exact over every
branch; expval, var, probs, and those of measurement values) or per shot (finite shots: PennyLane's
``dynamic_one_shot`` splits the tape into one-shot bins, the device runs them as one stream and
PennyLane's one-shot post-processing gives expval, var, probs, sample, counts, of observables and of
measurement values, tuples of them, shot vectors, postselection). Circuits without mid-circuit
measurements run on ``default.qubit``'s ``simulate``.

Timing: ``dev.last_run`` (a list of :class:`LoopRecord`, one per tape of the latest execution) and
``dev.tracker`` (PennyLane's keys, ``batches``, ``batch_len``, ``simulations``, ``executions``, ``shots``,
``results``, and the loop's ``round_trips``, ``program_time_ns``). Options:

- ``scenario``: a decode scenario (``twin decode``'s schema, :mod:`twin.qec.schema`); the device reads its
  loop: ``calibration``, ``hosting``, ``seed``, ``slots``, ``encoding``, ``control``, ``deadline``, the
  closed-loop ``traffic`` (clock, ppm, gap or gaps between requests, in_flight) and
  ``decode.placements[placement]`` (device, mode, model, bridge, workers, order), with
  ``decode.decoder: function`` its ``decode.function`` and ``decode.cost`` (with another decoder and
  ``function=``, the compute time is ``compute``: the scenario's cost is its stim decoder's). Refused in one line naming
  file, key and value: another decoder (it decodes a stim circuit's detection events; give
  ``function=``), an open-loop traffic block (a conditional waits for its reply: closed loop), a qblox
  block, a placement shared over several devices. The decode block's workload keys (code, circuit,
  distance, rounds, p, noise, shots, per, window, frame_bytes, interval, confidence) describe twin
  decode's stim workload; the QNode is the workload here.
- or the loop directly: ``calibration`` (default calibrations/fitted/card_path.yaml), ``hosting``
  (calibrations/hosting.yaml), ``consumer`` (default ``epyc7282``), ``mode`` (``inline``), ``control``
  (``on_card`` | ``aurora``), ``compute`` (the function's time per request, default ``"20 ns"``, stated,
  not measured), ``deadline`` (``None`` or ``"2 us"``: reactions past it are counted).
- always: ``function`` (``None``: the scenario's or the identity; ``"identity"``; a registered function
  name, ``"package.module:callable"`` or a callable ``bytes -> bytes`` of ``ceil(k/8)`` bytes: the
  conditions read its reply as the measurements' values), ``seed`` (default 0, or the scenario's:
  sampling and the loop's draws; same seed, same results and timing), ``gate_time`` and
  ``measure_time`` (quantity strings, default ``"0 ns"``: the quantum program's durations for its
  schedule; zero times the loop alone).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pennylane as qml
from pennylane.devices import Device, ExecutionConfig
from pennylane.devices.default_qubit import (
    ALL_DQ_GATES_PLUS_MCM,
    accepted_analytic_measurement,
    accepted_sample_measurement,
    allow_mcms_stopping_condition,
)
from pennylane.devices.preprocess import (
    decompose,
    device_resolve_dynamic_wires,
    validate_device_wires,
    validate_measurements,
)
from pennylane.exceptions import DeviceError
from pennylane.transforms import broadcast_expand, dynamic_one_shot
from pennylane.transforms.core import CompilePipeline

from twin.bundled import bundled_path
from twin.qec import pennylane_frontend as fe
from twin.stats import summary_ns
from twin.units import time_ps


@dataclass
class GroupRecord:
    """One group's loop round: ``measurements`` (``m<i>`` labels), ``ops`` (the conditional operations'
    names), ``requests`` (one per shot, or per path analytic), ``rtt`` (card-boundary round trip
    summary, ns), ``reaction`` (request sent -> reply at the control side: the round trip, or the loop
    time under ``control: aurora``), ``stall`` (the longest wait of the group's operations for the reply,
    ns summary), ``deadline_misses`` (reactions past the deadline; ``None`` without one),
    ``wrong_replies`` (0: a wrong one raises), and per request (shot order, or path order analytic):
    ``bits`` (bool (R, k), the measured values sent), ``reaction_ps`` and ``stall_ps`` (int64 ps)."""

    index: int
    measurements: tuple
    ops: list
    requests: int
    rtt: dict
    reaction: dict
    stall: dict
    deadline_misses: int | None
    wrong_replies: int
    bits: np.ndarray = field(repr=False)
    reaction_ps: np.ndarray = field(repr=False)
    stall_ps: np.ndarray = field(repr=False)


@dataclass
class LoopRecord:
    """One tape through the loop: ``groups`` (:class:`GroupRecord`), ``round_trips`` (requests of all
    groups), ``round_trips_per_shot`` (groups: every shot asks each once), ``program_ps`` (int64 per shot,
    or per final path analytic: the schedule's end, :func:`twin.qec.pennylane_frontend.program_ps`),
    ``program`` (its ns summary), ``shots`` (``None`` analytic), ``consumer``, ``mode``, ``control``,
    ``function`` (``identity`` or the function's name)."""

    groups: list
    round_trips: int
    round_trips_per_shot: int
    program_ps: np.ndarray = field(repr=False)
    program: dict = field(default_factory=dict)
    shots: int | None = None
    consumer: str = ""
    mode: str = ""
    control: str = ""
    function: str = "identity"


@dataclass
class LoopConfig:
    """The loop a device's requests go through (what :func:`twin.qec.loop.run_decode` takes)."""

    params: object
    hosting: object
    consumer: str
    mode: str = "inline"
    model: str = "sim"
    bridge: object = None
    workers: int = 1
    order: str = "in_order"
    control: str = "on_card"
    slots: int = 16
    encoding: str | None = "classic"
    cost: object = None
    deadline_ps: int | None = None
    function: object = None  # None: identity
    function_name: str = "identity"
    traffic: object = None  # TrafficParams, closed loop (None: the default, one request in flight)


_LOOP_KEYS = ("calibration", "hosting", "consumer", "mode", "control", "compute", "deadline")


def _from_scenario(path: Path, placement: int, function, compute: str | None) -> tuple[LoopConfig, int]:
    """The loop of decode scenario ``path`` (placement ``placement``) and its seed; raises ConfigError.
    ``function`` (given to the device) replaces the scenario's; the compute time is ``decode.cost`` with
    ``decoder: function``, else (its cost is the stim decoder's) ``compute`` (default 20 ns)."""
    from twin.config import ConfigError
    from twin.qec.cost import CostModel
    from twin.qec.load import load_decode
    ld = load_decode(path)
    sc, d = ld.sc, ld.sc.decode
    if sc.traffic.mode != "closed_loop":
        raise ConfigError(path, "traffic.mode", sc.traffic.mode, "a conditional operation waits for its reply: "
                          "the twin.loop device runs the loop closed (one request in flight)")
    if sc.qblox is not None:
        raise ConfigError(path, "qblox", "{...}", "the twin.loop device's control side is the QNode's program; "
                          "a Qblox cluster's Q1ASM programs run in twin decode and twin run")
    if not 0 <= placement < len(d.placements):
        raise ConfigError(path, "decode.placements", f"[{placement}]", f"the scenario has {len(d.placements)} "
                          "placements (the device's placement= picks one, from 0)")
    pl = d.placements[placement]
    if pl.shared:
        raise ConfigError(path, f"decode.placements[{placement}].devices", pl.names, "a QNode's conditionals "
                          "wait for each reply in turn: one consumer per device (device: NAME)")
    if function is None and d.decoder != "function":
        raise ConfigError(path, "decode.decoder", d.decoder, "decodes a stim circuit's detection events; the "
                          "twin.loop device serves the measured bits (function='identity') or a function "
                          "(decoder: function, or the device's function=)")
    fn, fname = None, "identity"
    if function is None:
        from twin.qec.load import resolve_function
        fn, fname = resolve_function(d.function, path), d.function
    if d.decoder == "function":
        if compute is not None:
            raise ValueError(f"twin.loop: compute={compute!r} with scenario={path}, whose decode.cost times its "
                             "function: give one of them")
        from twin.qec.load import cost_model
        cost = cost_model(ld, pl, sc.seed)
    else:
        cost = CostModel(fixed_ns=time_ps(compute or "20 ns") / 1000)
    cfg = LoopConfig(ld.params, ld.hosting, pl.names[0], pl.mode, pl.model,
                     pl.bridge.settings() if pl.bridge else None, pl.workers, pl.order, sc.control, sc.slots,
                     "classic" if sc.encoding == "default" else sc.encoding, cost,
                     time_ps(sc.deadline) if sc.deadline else None, fn, fname)
    from twin.scenario import traffic_params
    cfg.traffic = traffic_params(sc.traffic, 1, 16)  # closed loop: its clock, gap(s), in_flight; rounds per group
    return cfg, sc.seed


def _resolve_function(function) -> tuple[object, str]:
    """``function=`` as (callable or None for the identity, its name)."""
    if function is None or function == "identity":
        return None, "identity"
    if callable(function):
        return function, getattr(function, "__name__", "function")
    from twin.qec.load import resolve_function
    return resolve_function(str(function)), str(function)


class TwinLoopDevice(Device):
    """``qml.device("twin.loop", wires=None, shots=None, *, scenario=None, placement=0, calibration=None,
    hosting=None, consumer=None, mode=None, control=None, compute=None, deadline=None, function=None,
    seed=None, gate_time="0 ns", measure_time="0 ns")``: see the module's docstring for each option.

    Raises :class:`twin.config.ConfigError` for a scenario the device cannot run (one line: file, key,
    value), ValueError for options given twice (scenario and a loop keyword) or malformed, and at
    execution :class:`~twin.qec.pennylane_frontend.LoopAnswerError` when a reply differs from the value
    of the simulated measurements, DeviceError for ``mcm_method="deferred"`` / ``"tree-traversal"`` (the
    loop would decide nothing: PennyLane would turn the conditionals into gates on its own)."""

    _name = "twin.loop"

    @property
    def name(self) -> str:
        """``twin.loop``."""
        return self._name

    def __init__(self, wires=None, shots=None, *, scenario: str | Path | None = None, placement: int = 0,
                 calibration=None, hosting=None, consumer: str | None = None, mode: str | None = None,
                 control: str | None = None, compute: str | None = None, deadline: str | None = None,
                 function=None, seed: int | None = None, gate_time: str = "0 ns", measure_time: str = "0 ns"):
        super().__init__(wires=wires, shots=shots)
        given = dict(calibration=calibration, hosting=hosting, consumer=consumer, mode=mode, control=control,
                     compute=compute, deadline=deadline)
        if scenario is not None:
            both = [k for k in _LOOP_KEYS if given[k] is not None and k != "compute"]
            if both:
                raise ValueError(f"twin.loop: give a scenario or the loop keywords, not both ({', '.join(both)} "
                                 f"with scenario={scenario})")
            self.loop, sc_seed = _from_scenario(Path(scenario), placement, function, compute)
            if function is not None:
                self.loop.function, self.loop.function_name = _resolve_function(function)
            seed = sc_seed if seed is None else seed
        else:
            if placement != 0:
                raise ValueError("twin.loop: placement= picks one of a scenario's placements; give scenario=")
            self.loop = self._keywords(**given)
            self.loop.function, self.loop.function_name = _resolve_function(function)
        self.seed = 0 if seed is None else int(seed)
        self.schedule = fe.Schedule(time_ps(gate_time), time_ps(measure_time))
        self._rng = np.random.default_rng(self.seed)
        self._executions = 0
        self.last_run: list[LoopRecord] = []

    @staticmethod
    def _keywords(calibration, hosting, consumer, mode, control, compute, deadline) -> LoopConfig:
        from twin.calibration.params import load_params
        from twin.qec.cost import CostModel
        from twin.qec.hosting import check_mode, load_hosting
        params = load_params(calibration or bundled_path("calibrations/fitted/card_path.yaml"))
        hp, _ = load_hosting(hosting or bundled_path("calibrations/hosting.yaml"))
        consumer = consumer or "epyc7282"
        if consumer not in params.consumers:
            raise ValueError(f"twin.loop: consumer {consumer!r} is not in {params.name} "
                             f"(have: {', '.join(params.consumers)})")
        mode = mode or "inline"
        check_mode(mode, params.consumers[consumer].kind, consumer)
        control = control or "on_card"
        if control not in ("on_card", "aurora"):
            raise ValueError(f"twin.loop: control {control!r}: expected 'on_card' or 'aurora'")
        return LoopConfig(params, hp, consumer, mode, control=control,
                          cost=CostModel(fixed_ns=time_ps(compute or "20 ns") / 1000),
                          deadline_ps=time_ps(deadline) if deadline else None)

    # --- PennyLane's device interface ---------------------------------------------------------------

    def setup_execution_config(self, config: ExecutionConfig | None = None, circuit=None) -> ExecutionConfig:
        """Mid-circuit measurements are the device's own: ``mcm_method`` None, ``"device"`` or
        ``"one-shot"`` (finite shots) runs them through the loop; deferred and tree-traversal are refused."""
        config = config or ExecutionConfig()
        method = config.mcm_config.mcm_method
        if method not in (None, "device", "one-shot"):
            raise DeviceError(f"twin.loop: mcm_method={method!r} has PennyLane resolve the conditionals itself, "
                              "so the loop would decide none; use mcm_method=None (or 'device')")
        shots = bool(circuit is not None and circuit.shots)
        if method == "one-shot" and not shots:
            raise DeviceError("twin.loop: mcm_method='one-shot' needs finite shots")
        mcm = replace(config.mcm_config, mcm_method="one-shot" if shots else "device")
        return replace(config, mcm_config=mcm, gradient_method=None if config.gradient_method in ("best", None)
                       else config.gradient_method)

    def preprocess_transforms(self, execution_config: ExecutionConfig | None = None) -> CompilePipeline:
        """default.qubit's own checks with mid-circuit measurements kept (decompose to its gates plus
        MidMeasure, wires, measurements), broadcasts expanded, and with shots ``dynamic_one_shot``."""
        config = execution_config or ExecutionConfig()
        program = CompilePipeline()
        program.add_transform(decompose, stopping_condition=allow_mcms_stopping_condition, device_wires=self.wires,
                              target_gates=ALL_DQ_GATES_PLUS_MCM, name=self.name)
        program.add_transform(device_resolve_dynamic_wires, wires=self.wires, allow_resets=True)
        program.add_transform(validate_device_wires, self.wires, name=self.name)
        program.add_transform(validate_measurements, analytic_measurements=accepted_analytic_measurement,
                              sample_measurements=accepted_sample_measurement, name=self.name)
        program.add_transform(broadcast_expand)
        if config.mcm_config.mcm_method == "one-shot":
            program.add_transform(dynamic_one_shot, postselect_mode=config.mcm_config.postselect_mode)
        return program

    def execute(self, circuits, execution_config: ExecutionConfig | None = None):
        """Run each tape (:meth:`run_tape`); ``last_run`` holds their :class:`LoopRecord` (``None`` for a
        tape without mid-circuit measurements)."""
        single = isinstance(circuits, qml.tape.QuantumScript)
        tapes = [circuits] if single else list(circuits)
        self.last_run = []
        results = tuple(self.run_tape(t) for t in tapes)
        if self.tracker.active:
            self._track(tapes, results)
        return results[0] if single else results

    def _track(self, tapes, results) -> None:
        """PennyLane's device tracking (``qml.devices.modifiers.simulator_tracking``, "Simulator style
        tracking", https://docs.pennylane.ai/en/stable/code/api/pennylane.devices.modifiers.simulator_tracking.html):
        one record ``batches=1, batch_len`` per :meth:`execute`, then one per tape with ``simulations=1``,
        ``executions`` (the circuits hardware would run), ``results``, ``shots`` (finite shots) and the
        loop's ``round_trips`` and ``program_time_ns`` (a tape with mid-circuit measurements)."""
        from pennylane.devices.qubit.sampling import get_num_shots_and_executions
        self.tracker.update(batches=1, batch_len=len(tapes))
        self.tracker.record()
        for tape, result, rec in zip(tapes, results, self.last_run):
            executions, shots = get_num_shots_and_executions(tape)
            info = {"simulations": 1, "executions": executions, "results": result}
            if tape.shots:
                info["shots"] = shots
            if rec is not None:
                info.update(round_trips=rec.round_trips, program_time_ns=rec.program["mean_ns"])
            self.tracker.update(**info)
            self.tracker.record()

    # --- the run ---------------------------------------------------------------------------------

    def run_tape(self, tape):
        """One tape: with mid-circuit measurements through :func:`twin.qec.pennylane_frontend.walk` with the
        loop answering each group; without, on default.qubit's ``simulate``. Appends to ``last_run``."""
        from pennylane.devices.qubit import simulate
        if not any(isinstance(op, qml.ops.MidMeasure) for op in tape.operations):
            self.last_run.append(None)
            return simulate(tape, rng=self._rng)
        tape = tape.map_to_standard_wires()
        prog = fe.parse(tape)
        shots = tape.shots.total_shots if tape.shots else None
        if shots is not None and any(s.shots != 1 for s in tape.shots.shot_vector):
            raise DeviceError("twin.loop: a tape with mid-circuit measurements and shots runs as one-shot bins "
                              "(mcm_method 'one-shot', which the device sets)")
        self._executions += 1
        paths = fe.walk(prog, shots, self._rng, lambda g, ps: self._answer(g, ps, shots), self.schedule)
        rows = shots if shots is not None else len(paths)
        prog_ps = fe.program_ps(paths, self.schedule, rows)
        self.last_run.append(self._record(prog, prog_ps, shots))
        if shots is None:
            return fe.analytic_results(tape, paths)
        return fe.shot_results(tape, paths, shots, self._rng)

    def served_function(self, group: fe.Group):
        """The consumer's function for ``group``: payload (``ceil(k/8)`` bytes) -> reply, same length."""
        fn = self.loop.function
        return (lambda payload: bytes(payload)) if fn is None else fn

    def expected(self, group: fe.Group, payloads: np.ndarray) -> np.ndarray:
        """The value each reply must have, computed here from the simulated bits (uint8 (R, nb))."""
        fn = self.loop.function
        if fn is None:
            return payloads
        return np.array([np.frombuffer(bytes(fn(r.tobytes())), np.uint8) for r in payloads], np.uint8)

    def _answer(self, g: fe.Group, paths: list, shots: int | None) -> list:
        """Group ``g``'s loop round for every path: requests (one per shot, or per path), the loop's replies
        checked, paths split by reply, each path's reply instants set."""
        k = len(g.uids)
        if shots is None:
            rows = [np.array([i]) for i in range(len(paths))]
            bits = np.array([[p.bits[u] for u in g.uids] for p in paths], bool).reshape(len(paths), k)
        else:
            rows = [p.shots for p in paths]
            bits = np.zeros((shots, k), bool)
            for p in paths:
                bits[p.shots] = [p.bits[u] for u in g.uids]
        payloads = fe.pack_bits(bits)
        replies, reaction, rtt, mismatches = self._loop(g, bits)
        expect = self.expected(g, payloads)
        if expect.shape != replies.shape:
            raise fe.LoopAnswerError(f"group {g.labels}: the function answers {expect.shape[1]} bytes; the "
                                     f"conditions read {g.reply_bytes} (one bit per measurement)")
        wrong = (replies != expect).any(axis=1)
        g.bits, g.replies, g.reaction_ps, g.rtt_ps = bits, replies, reaction, rtt
        g.wrong_replies = int(wrong.sum()) + int(mismatches)
        if g.wrong_replies:
            i = int(np.flatnonzero(wrong)[0]) if wrong.any() else 0
            raise fe.LoopAnswerError(f"conditional group on {', '.join(g.labels)}: {g.wrong_replies} of "
                                     f"{len(bits)} loop replies differ from the value of the simulated "
                                     f"measurements (request {i}: sent {payloads[i].tobytes().hex()}, expected "
                                     f"{expect[i].tobytes().hex()}, got {replies[i].tobytes().hex()})")
        value = np.zeros(len(replies), np.int64)
        for j in range(replies.shape[1]):
            value |= replies[:, j].astype(np.int64) << (8 * j)
        out = []
        for p, r in zip(paths, rows):
            vals = value[r]
            for v in np.unique(vals):
                mask = vals == v
                kid = p.take(mask, replies={g.index: int(v)})
                kid.rows[g.index] = r[mask]
                sent = np.max([kid.done[u] for u in g.uids], axis=0)
                kid.back[g.index] = sent + reaction[r[mask]]
                out.append(kid)
        return out

    def _loop(self, g: fe.Group, bits: np.ndarray):
        """The group's requests through the loop (:func:`twin.qec.loop.run_decode`, closed loop, one
        request in flight, in request order): replies uint8 (R, nb), reaction ps, rtt ps, the card's
        mismatches."""
        from twin.devices.generator import TrafficParams
        from twin.qec.decoders import FunctionDecoder
        from twin.qec.loop import run_decode
        from twin.qec.workload import Workload
        c = self.loop
        k = len(g.uids)
        w = Workload(f"pennylane_g{g.index}", None, bits, bits, max(16, -(-g.reply_bytes // 16) * 16))
        dec = FunctionDecoder(self.served_function(g), k, k, name=f"pennylane_{'_'.join(g.labels)}")
        self._check_consumer(dec, w)
        seed = int(np.random.SeedSequence([self.seed, self._executions, g.index]).generate_state(1)[0])
        r = run_decode(c.params, c.consumer, w, dec, mode=c.mode, hosting=c.hosting, cost=c.cost,
                       traffic=c.traffic or TrafficParams(), seed=seed, slots=c.slots, encoding=c.encoding,
                       external_control=c.control == "aurora", model=c.model, bridge=c.bridge,
                       workers=c.workers, order=c.order)
        res = r.result
        reaction = res.loop_ps if c.control == "aurora" else res.rtt_ps
        return r.corrections, np.asarray(reaction, np.int64), np.asarray(res.rtt_ps, np.int64), res.mismatches

    def _check_consumer(self, dec, w) -> None:
        """Refuse (DeviceError) a consumer that cannot serve the group's function: a user function on an
        FPGA (FPGA logic echoes the bits, it runs no Python), or what the model registry refuses."""
        from twin.nodes.registry import Situation, refusal
        from twin.qec.loop import session_function
        c = self.loop
        kind = c.params.consumers[c.consumer].kind
        if kind == "fpga" and c.function is not None:
            raise DeviceError(f"twin.loop: function {c.function_name} on {c.consumer}: a Python function does not "
                              "run in FPGA logic (the identity, the measured bits echoed, does)")
        why = refusal("consumer", c.model, Situation(
            device_kind=kind, path=c.params.path,
            frame_bytes=w.frame_bytes, function=session_function(dec, w.name), study="decode", hosting=c.mode))
        if why:
            raise DeviceError(f"twin.loop: model {c.model} on {c.consumer}: {why}")

    def _record(self, prog: fe.Program, prog_ps: np.ndarray, shots: int | None) -> LoopRecord:
        groups = []
        for g in prog.groups:
            miss = None if self.loop.deadline_ps is None else int((g.reaction_ps > self.loop.deadline_ps).sum())
            groups.append(GroupRecord(g.index, g.labels, [op.base.name for op in g.ops], len(g.bits),
                                      summary_ns(g.rtt_ps), summary_ns(g.reaction_ps), summary_ns(g.stall_ps), miss,
                                      g.wrong_replies, g.bits, g.reaction_ps, g.stall_ps))
        c = self.loop
        return LoopRecord(groups, sum(x.requests for x in groups), len(groups), prog_ps, summary_ns(prog_ps), shots,
                          c.consumer, c.mode, c.control, c.function_name)
