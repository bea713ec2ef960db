"""PennyLane front end: a QNode with mid-circuit measurements and feed-forward as a twin workload.

Each feed-forward (a ``qml.cond`` on ``qml.measure`` results; consecutive conditional operations on
the same measurement value are one) is a loop round: the request payload holds the measured bits
it depends on (measurement ``i`` of the condition in bit ``i``, the contract's syndrome format),
the consumer runs the condition's classical function, and the reply (one byte, 0 or 1) says
whether to apply the operation. The quantum part runs on ``default.qubit``'s own kernels
(``pennylane.devices.qubit``: initial state, ``apply_operation``, ``measure``) over every branch
of the mid-circuit outcomes, exactly; the branch decisions are the loop's replies. So the result
equals PennyLane's own (deferred-measurement) execution of the QNode when, and only when, every
reply the loop delivered is right, and the twin adds the round-trip time of each feed-forward.

Timing: ``shots`` shots are drawn from the branch probabilities (seeded); each shot's requests go
through the loop of ``device`` (:func:`twin.qec.loop.run_decode`), one loop per feed-forward,
with the function's compute time from ``compute_ns`` (a fixed cost per request, stated in the
result). Before the shots, the loop answers one request per reachable branch, so every decision
the result uses came through it; those are counted apart (:attr:`FeedForward.branch_requests`)
and are not in the timing: :attr:`FeedForward.requests` is the shots' requests, the ones timed.
Supported final measurements: ``expval`` and ``probs`` (linear in the state, so a sum
over branches). PennyLane is imported only here (``pip install -e '.[pennylane]'``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from twin.bundled import bundled_path
from twin.qec.workload import Workload


@dataclass
class FeedForward:
    """One feed-forward: its index, the mid-circuit measurements it reads (tape order) and the
    conditional operations it gates; after a run, the loop's round-trip summary ``rtt`` (ns, and
    ``loop`` under Aurora control) over ``requests`` requests: one per shot (the ``shots`` asked
    for; with ``shots=0``, the branch requests). ``branch_requests``: the one request per reachable
    branch the loop answers first, so every decision the result uses came through the loop; they
    are not in the timing (unless ``shots=0``). ``wrong_replies``: over both."""

    index: int
    measurements: list
    meas_val: object
    ops: list = field(default_factory=list)
    rtt: dict = field(default_factory=dict)
    loop: dict = field(default_factory=dict)
    requests: int = 0
    branch_requests: int = 0
    wrong_replies: int = 0

    def decide(self, bits: tuple[int, ...]) -> bool:
        """PennyLane's own evaluation of the condition for the measured ``bits``."""
        return bool(self.meas_val.concretize(dict(zip(self.measurements, bits))))

    def function(self, payload: bytes) -> bytes:
        """The served classical function: measured bits in (little-endian), decision byte out."""
        v = int.from_bytes(bytes(payload[:(len(self.measurements) + 7) // 8]), "little")
        return bytes([int(self.decide(tuple((v >> i) & 1 for i in range(len(self.measurements)))))])


@dataclass
class TwinExecution:
    """The QNode run through the twin: ``value`` (the twin's result), ``reference`` (the QNode on
    ``default.qubit``), ``feed_forwards`` (with timing), ``branches`` (reachable mid-circuit outcomes:
    (probability, {"m<i>": bit}) with ``i`` the measurement's place in the circuit), ``device``, ``mode``,
    ``compute_ns``."""

    value: object
    reference: object
    feed_forwards: list
    branches: list
    device: str
    mode: str
    compute_ns: float

    @property
    def matches(self) -> bool:
        """The twin's result equals PennyLane's within 1e-10."""
        return bool(np.allclose(np.asarray(self.value, float), np.asarray(self.reference, float), atol=1e-10, rtol=0))


def _parse(tape):
    import pennylane as qml
    ffs: list[FeedForward] = []
    program = []
    for op in tape.operations:
        if isinstance(op, qml.ops.Conditional):
            mv = op.meas_val
            if ffs and program and program[-1][0] == "cond" and ffs[-1].meas_val is mv:
                ffs[-1].ops.append(op.base)
                continue
            ff = FeedForward(len(ffs), list(mv.measurements), mv, [op.base])
            ffs.append(ff)
            program.append(("cond", ff))
        elif isinstance(op, qml.ops.MidMeasure):
            if op.postselect is not None:
                raise ValueError(f"{op}: postselection has no counterpart in the loop (the twin runs every shot)")
            program.append(("measure", op))
        else:
            program.append(("op", op))
    for mp in tape.measurements:
        if not isinstance(mp, (qml.measurements.ExpectationMP, qml.measurements.ProbabilityMP)):
            raise ValueError(f"final measurement {mp}: the twin supports expval and probs")
        if getattr(mp, "mv", None) is not None:
            raise ValueError(f"final measurement {mp}: measuring mid-circuit values is not supported")
    return program, ffs


def _branches(tape, program, decide):
    """Every reachable branch: (probability, {MidMeasure: bit}, final state)."""
    import pennylane as qml
    from pennylane.devices.qubit import apply_operation, create_initial_state
    n = len(tape.wires)
    out = []

    def walk(i, state, p, record):
        while i < len(program):
            kind, x = program[i]
            if kind == "op":
                state = apply_operation(x, state)
            elif kind == "cond":
                bits = tuple(int(record[m]) for m in x.measurements)
                if decide(x, bits):
                    for op in x.ops:
                        state = apply_operation(op, state)
            else:  # a mid-circuit measurement: branch on both outcomes
                w = x.wires.toarray()[0]
                for b in (0, 1):
                    proj = np.zeros_like(state)
                    sl = [slice(None)] * n
                    sl[w] = b
                    proj[tuple(sl)] = state[tuple(sl)]
                    pb = float(np.real(np.vdot(proj, proj)))
                    if pb < 1e-14:
                        continue
                    s = proj / np.sqrt(pb)
                    if x.reset and b:
                        s = apply_operation(qml.X(w), s)
                    walk(i + 1, s, p * pb, {**record, x: b})
                return
            i += 1
        out.append((p, record, state))

    walk(0, create_initial_state(range(n)).astype(complex), 1.0, {})
    return out


def _result(tape, branches):
    from pennylane.devices.qubit import measure
    vals = []
    for mp in tape.measurements:
        vals.append(sum(p * np.asarray(measure(mp, s), float) for p, _, s in branches))
    return vals[0] if len(vals) == 1 else tuple(vals)


def run_on_twin(qnode, *args, device: str = "epyc7282", mode: str = "inline", shots: int = 1000, seed: int = 0,
                compute_ns: float = 20.0, calibration: str | Path | None = None, hosting: str | Path | None = None,
                control: str = "on_card", **kwargs) -> TwinExecution:
    """Run ``qnode(*args, **kwargs)`` with its feed-forward on the twin.

    device / mode: the consumer (of the card-path parameter set, default
    calibrations/fitted/card_path.yaml) and hosting mode (:mod:`twin.qec.hosting`; costs from
    calibrations/hosting.yaml) the classical functions run on; shots: shots drawn for timing
    (each reachable branch once more, so every decision the result uses came through the loop);
    compute_ns: the function's compute time per request; control: ``on_card`` or ``aurora``.
    Raises ValueError for circuits outside what the front end supports (postselection, final
    measurements other than expval/probs, a QNode with shots: the comparison is analytic) and RuntimeError if a
    reply the loop delivered differs from PennyLane's own evaluation of the condition.
    """
    import pennylane as qml

    from twin.calibration.params import load_params
    from twin.devices.generator import TrafficParams
    from twin.qec.cost import CostModel
    from twin.qec.decoders import FunctionDecoder
    from twin.qec.hosting import load_hosting
    from twin.qec.loop import run_decode
    from twin.stats import summary_ns

    reference = qnode(*args, **kwargs)
    tape = qml.workflow.construct_tape(qnode)(*args, **kwargs)
    tape = tape.map_to_standard_wires()
    program, ffs = _parse(tape)
    if tape.shots:
        raise ValueError(f"the QNode runs with {tape.shots}; the twin compares with PennyLane's analytic result: "
                         "use a QNode without shots (shots= here sets only the twin's timing samples)")
    exact = _branches(tape, program, lambda ff, bits: ff.decide(bits))
    params = load_params(calibration or bundled_path("calibrations/fitted/card_path.yaml"))
    hp, _ = load_hosting(hosting or bundled_path("calibrations/hosting.yaml"))
    rng = np.random.default_rng(seed)
    probs = np.array([p for p, _, _ in exact])
    picks = np.concatenate([np.arange(len(exact)), rng.choice(len(exact), size=shots, p=probs / probs.sum())])
    replies: dict[tuple[int, tuple], bool] = {}
    for ff in ffs:
        bits = np.array([[exact[j][1][m] for m in ff.measurements] for j in picks], bool)
        truth = np.array([[ff.decide(tuple(int(b) for b in row))] for row in bits], bool)
        w = Workload(f"pennylane_ff{ff.index}", None, bits, truth, 16)
        dec = FunctionDecoder(ff.function, len(ff.measurements), 1, name=f"feed_forward_{ff.index}")
        r = run_decode(params, device, w, dec, mode=mode, hosting=hp, cost=CostModel(fixed_ns=compute_ns),
                       traffic=TrafficParams(), seed=seed + ff.index, external_control=control == "aurora")
        got = np.unpackbits(r.corrections, axis=1, bitorder="little", count=1).astype(bool)
        ff.wrong_replies = int((got != truth).sum()) + r.result.mismatches
        if ff.wrong_replies:
            raise RuntimeError(f"feed-forward {ff.index}: {ff.wrong_replies} replies differ from PennyLane's condition")
        for row, g in zip(bits, got[:, 0]):
            replies[(ff.index, tuple(int(b) for b in row))] = bool(g)
        ff.requests = shots if shots else len(exact)  # the requests the timing summary is over
        ff.branch_requests = len(exact)
        ff.rtt = summary_ns(r.result.rtt_ps[len(exact):] if shots else r.result.rtt_ps)
        if control == "aurora":
            ff.loop = summary_ns(r.result.loop_ps[len(exact):] if shots else r.result.loop_ps)
    twin_branches = _branches(tape, program, lambda ff, bits: replies[(ff.index, bits)])
    value = _result(tape, twin_branches)
    order = [x for kind, x in program if kind == "measure"]
    records = [(p, {f"m{order.index(m)}": b for m, b in rec.items()}) for p, rec, _ in exact]
    return TwinExecution(value, reference, ffs, records, device, mode, compute_ns)
