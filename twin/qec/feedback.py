"""A stim circuit's feedback timed by the loop, and the idle time it costs turned into logical error.

A classically controlled gate (``CX rec[-1] 3``: a gate with a measurement-record target) is a
point where the quantum program waits for the decoder: the twin treats its condition as the
decoder's answer for the request carrying the syndrome it depends on (the earliest round whose
detectors read that measurement; per round, one request per QEC round). The gate precedes the
first request whose detectors read a measurement made after it. :func:`analyse` finds, per
request of a shot, the requests its gates wait for (as offsets: the pattern of a
:class:`twin.devices.generator.Waits`) and where in the circuit the program idles; the generator
then sends each such request only once the corrections are back (the program's time, in its
clock's edges; one computation for the event and direct engines, :meth:`Waits.next_edge`; its
stalls are the generator's :func:`twin.devices.generator.program_stats`).

The stall (the program idling at the gate: correction back after the gate's scheduled instant,
``slack`` after the previous round's syndrome was measured) is idle time on the data qubits.
:func:`resample_with_idle` samples the circuit again with stim's :class:`stim.FlipSimulator`,
inserting at each gate's place, shot by shot, the Pauli error the idle-noise model
(:mod:`twin.qec.idle_noise`) draws for that shot's stall there; the decoder built for the
circuit's own noise then decodes those shots: the logical error rate with the loop's latency.

Data qubits (``qubits: data``): the qubits the circuit measures at most once (a memory
experiment reads its data once, at the end, and its ancillas every round); ``all``: every qubit
an instruction touches.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import stim

from twin.kernel.sim import stream_rng
from twin.qec.idle_noise import IdleNoise, draw_paulis
from twin.qec.window import detector_rounds

ANNOTATIONS = ("DETECTOR", "OBSERVABLE_INCLUDE")


class FeedbackError(ValueError):
    """A circuit whose feedback the loop cannot time (the message says why)."""


@dataclass(frozen=True)
class FeedbackPlan:
    """Where a circuit's program waits (:func:`analyse`).

    waits: per request of a shot (index = round), the offsets ``k >= 1`` of the requests whose
    corrections its gates need (empty: none); insert_after: per request that waits, the flattened
    instruction index after which the program idles (after its last gate); gates: number of
    classically controlled instructions; idle_qubits: the qubits that idle (sorted)."""

    waits: tuple[tuple[int, ...], ...]
    insert_after: dict[int, int]
    gates: int
    idle_qubits: tuple[int, ...]

    @property
    def waiting_requests(self) -> list[int]:
        """The requests of a shot (rounds) before which the program waits."""
        return [j for j, w in enumerate(self.waits) if w]


def _measured_qubits(op: stim.CircuitInstruction) -> list[int]:
    return [t.qubit_value for t in op.targets_copy() if t.qubit_value is not None]


def analyse(circuit: stim.Circuit, qubits: str = "data") -> FeedbackPlan:
    """The feedback of ``circuit`` (flattened: REPEAT blocks unrolled) for per-round requests.
    Raises :class:`FeedbackError` when it has no classically controlled gate, when a gate reads a
    measurement no detector reads (its answer is not the decoder's), or when a gate needs the
    correction of a request that itself needs measurements after the gate (the program would wait
    forever)."""
    if qubits not in ("data", "all"):
        raise FeedbackError(f"idle qubits {qubits!r}: expected 'data' or 'all'")
    flat = circuit.flattened()
    scan = _scan(flat)
    if not scan.gates:
        raise FeedbackError("the circuit has no classically controlled gate (e.g. CX rec[-1] 3): nothing waits "
                            "for the decoder")
    waits, insert_after = _gate_waits(flat, detector_rounds(circuit), scan)
    if qubits == "data":
        idle = tuple(sorted(q for q in scan.touched if scan.measured.get(q, 0) <= 1))
    else:
        idle = tuple(sorted(scan.touched))
    return FeedbackPlan(tuple(tuple(sorted(w)) for w in waits), insert_after, len(scan.gates), idle)


@dataclass
class _Scan:
    """One pass over a flattened circuit (:func:`_scan`): per detector, the absolute indices of the
    measurements it reads; per classically controlled instruction, ``(instruction index,
    measurements read, measurements before it)``; per qubit, how often it is measured; the qubits
    an instruction touches."""

    det_meas: list[list[int]] = field(default_factory=list)
    gates: list[tuple[int, list[int], int]] = field(default_factory=list)
    measured: dict[int, int] = field(default_factory=dict)
    touched: set[int] = field(default_factory=set)


def _scan(flat: stim.Circuit) -> _Scan:
    """The detectors, the classically controlled gates and the measured and touched qubits of ``flat``."""
    s = _Scan()
    m_count = 0
    for i, op in enumerate(flat):
        name = op.name
        targets = op.targets_copy()
        if name == "DETECTOR":
            s.det_meas.append([m_count + t.value for t in targets if t.is_measurement_record_target])
            continue
        if name in ANNOTATIONS or name in ("TICK", "QUBIT_COORDS", "SHIFT_COORDS"):
            continue
        s.touched.update(t.qubit_value for t in targets if t.qubit_value is not None)
        recs = [m_count + t.value for t in targets if t.is_measurement_record_target]
        if recs:
            s.gates.append((i, recs, m_count))
        if stim.gate_data(name).produces_measurements:
            for q in _measured_qubits(op):
                s.measured[q] = s.measured.get(q, 0) + 1
            m_count += stim.Circuit(str(op)).num_measurements
    return s


def _gate_waits(flat: stim.Circuit, rounds: np.ndarray, scan: _Scan) -> tuple[list[set[int]], dict[int, int]]:
    """Per request (round, ``rounds``: each detector's), the offsets of the requests whose
    corrections its gates wait for, and after which instruction the program idles for them: a
    gate precedes the first request reading a measurement made after it, and waits for the
    earliest round whose detectors read each measurement it reads. Raises :class:`FeedbackError`
    (see :func:`analyse`)."""
    G = int(rounds.max()) + 1 if len(rounds) else 1
    first_round: dict[int, int] = {}  # measurement -> the earliest round whose detectors read it
    last_meas = np.array([max(ms) if ms else -1 for ms in scan.det_meas], np.int64)
    for d, ms in enumerate(scan.det_meas):
        for m in ms:
            first_round[m] = min(first_round.get(m, G), int(rounds[d]))
    waits: list[set[int]] = [set() for _ in range(G)]
    insert_after: dict[int, int] = {}
    for i, recs, before in scan.gates:
        after = rounds[last_meas >= before]  # requests reading a measurement made after the gate
        if not len(after):
            continue  # after the last detector's measurements: no request waits behind it
        j = int(after.min())
        for m in recs:
            if m not in first_round:
                raise FeedbackError(f"instruction {i} ({flat[i].name}) reads measurement {m}, which no detector reads: "
                                    "its condition is not the decoder's answer")
            dep = first_round[m]
            if dep >= j:
                raise FeedbackError(f"instruction {i} ({flat[i].name}) waits for round {dep}'s correction, but round "
                                    f"{dep}'s syndrome needs measurements after it: the program would wait forever")
            waits[j].add(j - dep)
        insert_after[j] = max(insert_after.get(j, -1), i)
    return waits, insert_after

def resample_with_idle(circuit: stim.Circuit, plan: FeedbackPlan, stall_ps: np.ndarray, noise: IdleNoise,
                       seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sample ``circuit`` again, shot ``s`` idling ``stall_ps[s, j]`` (int64 ps, (shots, requests per
    shot)) at the place of request ``j``'s gates: stim's :class:`stim.FlipSimulator` runs the
    flattened circuit segment by segment and, between them, applies to every idle qubit of every
    shot the Pauli :func:`twin.qec.idle_noise.draw_paulis` draws for its stall
    (``broadcast_pauli_errors`` with a per-shot mask). Returns ``(detectors, observables)``, bool
    (shots, D) and (shots, K). Same seed, same shots."""
    shots = stall_ps.shape[0]
    flat = circuit.flattened()
    sim = stim.FlipSimulator(batch_size=shots, num_qubits=circuit.num_qubits, seed=seed % 2**64)
    rng = stream_rng(seed, "idle_noise")
    cuts = sorted((i, j) for j, i in plan.insert_after.items())
    start = 0
    q = np.asarray(plan.idle_qubits, np.int64)
    for i, j in cuts:
        seg = stim.Circuit()
        for op in flat[start:i + 1]:
            seg.append(op)
        sim.do(seg)
        start = i + 1
        t = np.broadcast_to(stall_ps[:, j], (len(q), shots))
        if not t.any():
            continue
        pauli = draw_paulis(noise, t, rng)
        for code, name in ((1, "X"), (2, "Y"), (3, "Z")):
            mask = np.zeros((circuit.num_qubits, shots), bool)
            mask[q] = pauli == code
            if mask.any():
                sim.broadcast_pauli_errors(pauli=name, mask=mask)
    seg = stim.Circuit()
    for op in flat[start:]:
        seg.append(op)
    sim.do(seg)
    return sim.get_detector_flips().T.copy(), sim.get_observable_flips().T.copy()

