"""PennyLane front end: a tape with mid-circuit measurements, its conditionals decided by the loop.

This module is the quantum side of the ``twin.loop`` PennyLane device
(:mod:`twin.qec.pennylane_device`): it reads a tape into a program (:func:`parse`) and runs it on
``default.qubit``'s own kernels (``pennylane.devices.qubit``: initial state, ``apply_operation``,
``measure``, ``measure_with_samples``) over *paths*, the distinct histories of mid-circuit outcomes
and loop replies (:func:`walk`), breadth first, so that every conditional's requests leave together
as one stream through the loop.

Grouping: a conditional operation (``qml.cond``) reads the measurements of its MeasurementValue;
conditionals that read the same measurements (by the measurement's id, ``MidMeasure.meas_uid``, not by
object identity, so wire labels and wire maps change nothing) form one :class:`Group`, one request
per shot (or per path, analytic) sent when the first of them is reached. The request's payload holds
the measured bits, measurement ``i`` of the group (tape order) in bit ``i`` (the contract's syndrome
format); the consumer's reply (``ceil(k / 8)`` bytes) is the measurement-derived value the
conditions read: the bits themselves (identity) or a named function of them. Each conditional's own
classical function (PennyLane's ``MeasurementValue`` processing) is then evaluated by the control side
on the reply. Later conditionals on an answered group wait for nothing more.

Two modes. Analytic (``shots=None``): each measurement splits a path into its two outcomes with their
probabilities (exact), the loop answers one request per path, and expval / var / probs are the
probability-weighted mixture over the final paths. Per shot (finite shots; the tape PennyLane's
``dynamic_one_shot`` makes, one shot per bin): each shot's outcome is drawn from the path's state
(seeded), the loop answers one request per shot, and the final measurements are drawn per shot with
``measure_with_samples``; PennyLane's one-shot post-processing turns them into every return type.

Timing (:class:`Schedule`): an as-soon-as-possible schedule per wire in integer picoseconds, per shot
(or path): a gate takes ``gate_ps``, a measurement ``measure_ps``; a group's request leaves when its
last measurement ends and its reply is back after the loop's reaction time for that request; a
conditional operation starts no earlier than the reply. Its stall is the time its wires wait for the
reply; the program time is the last wire's end plus the final readout (``measure_ps``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class LoopAnswerError(RuntimeError):
    """A reply the loop delivered differs from the value computed from the simulated measurements."""


@dataclass
class Group:
    """Conditional operations that read the same mid-circuit measurements: one round trip per shot.

    index: order of first use; uids: the measurements' ids (tape order); labels: ``m<i>``, the
    measurement's place among the tape's mid-circuit measurements; ops: the conditional operations
    (``Conditional``) reading them. Filled by a run: ``bits`` (bool (R, k): the measured values sent,
    one row per request), ``replies`` (uint8 (R, ceil(k/8))), ``reaction_ps`` (int64 (R,): request
    sent -> reply at the control side), ``rtt_ps`` (int64 (R,): the card-boundary round trip),
    ``stall_ps`` (int64 (R,): the longest wait of the group's
    operations for the reply), ``wrong_replies`` (replies unequal to the expected value)."""

    index: int
    uids: tuple[str, ...]
    labels: tuple[str, ...]
    ops: list = field(default_factory=list)
    bits: np.ndarray | None = None
    replies: np.ndarray | None = None
    reaction_ps: np.ndarray | None = None
    rtt_ps: np.ndarray | None = None
    stall_ps: np.ndarray | None = None
    wrong_replies: int = 0

    @property
    def reply_bytes(self) -> int:
        """Bytes of a request's payload and of its reply: one bit per measurement read."""
        return (len(self.uids) + 7) // 8


@dataclass
class Program:
    """A tape as steps: ``("op", op)``, ``("measure", mcm)``, ``("cond", Conditional, Group)``;
    ``groups`` in order of first use; ``mcms`` the mid-circuit measurements in tape order;
    ``n_wires`` (the tape mapped to standard wires 0..n-1)."""

    steps: list
    groups: list
    mcms: list
    n_wires: int


def parse(tape) -> Program:
    """The program of ``tape`` (already mapped to standard wires). Conditionals are grouped by the
    measurements their MeasurementValue reads (:class:`Group`). Raises ValueError for a conditional
    reading a measurement the tape does not make."""
    import pennylane as qml
    steps, groups, mcms = [], {}, []
    for op in tape.operations:
        if isinstance(op, qml.ops.Conditional):
            order = {m.meas_uid: i for i, m in enumerate(mcms)}
            uids = tuple(sorted({m.meas_uid for m in op.meas_val.measurements}, key=lambda u: order.get(u, -1)))
            if any(u not in order for u in uids):
                raise ValueError(f"{op}: its condition reads a measurement made after it or not in the circuit")
            g = groups.get(uids)
            if g is None:
                g = groups[uids] = Group(len(groups), uids, tuple(f"m{order[u]}" for u in uids))
            g.ops.append(op)
            steps.append(("cond", op, g))
        elif isinstance(op, qml.ops.MidMeasure):
            mcms.append(op)
            steps.append(("measure", op))
        else:
            steps.append(("op", op))
    return Program(steps, list(groups.values()), mcms, len(tape.wires))


@dataclass
class Path:
    """One history of outcomes and replies: ``state`` (default.qubit's (2,)*n array), ``weight``
    (probability, analytic), ``shots`` (int64 shot indices, per shot; ``None`` analytic), ``bits``
    (measurement uid -> 0/1), ``replies`` (group index -> reply value, the reply bytes little-endian),
    timing arrays per shot (length 1 analytic): ``ready`` (wire -> ps the wire is free), ``done``
    (measurement uid -> ps it ended), ``back`` (group index -> ps its reply is at the control side),
    ``rows`` (group index -> each row's request, a row of the group's ``bits``)."""

    state: np.ndarray
    weight: float
    shots: np.ndarray | None
    bits: dict
    replies: dict
    ready: list
    done: dict
    back: dict
    rows: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        """Timing rows: its shots, or 1 (analytic)."""
        return 1 if self.shots is None else len(self.shots)

    def take(self, mask: np.ndarray, state=None, weight=None, **update) -> "Path":
        """The sub-path of the rows in ``mask`` (bool (size,)), with ``state``/``weight``/dicts updated."""
        return Path(self.state if state is None else state, self.weight if weight is None else weight,
                    None if self.shots is None else self.shots[mask],
                    {**self.bits, **update.get("bits", {})}, {**self.replies, **update.get("replies", {})},
                    [r[mask] for r in self.ready], {k: v[mask] for k, v in self.done.items()},
                    {k: v[mask] for k, v in self.back.items()}, {k: v[mask] for k, v in self.rows.items()})


@dataclass(frozen=True)
class Schedule:
    """Durations of the quantum program, integer ps: ``gate_ps`` per gate, ``measure_ps`` per
    mid-circuit measurement and for the final readout. Zero (the default of the device) times the
    loop alone: every conditional then stalls for its whole reaction time."""

    gate_ps: int = 0
    measure_ps: int = 0


def _project(state: np.ndarray, wire: int, bit: int) -> tuple[np.ndarray, float]:
    """The state projected on ``wire`` = ``bit`` (unnormalised) and its probability."""
    proj = np.zeros_like(state)
    sl = [slice(None)] * state.ndim
    sl[wire] = bit
    proj[tuple(sl)] = state[tuple(sl)]
    return proj, float(np.real(np.vdot(proj, proj)))


def walk(program: Program, shots: int | None, rng: np.random.Generator, answer, schedule: Schedule) -> list[Path]:
    """Run ``program`` over paths; returns the final paths (their weights sum to 1 analytic, to
    ``shots`` per shot, less any postselected away analytic).

    answer(group, paths) -> list of paths: the loop round of ``group`` for every path (it sets each
    path's ``replies[group.index]`` and ``back[group.index]``, splitting a path whose rows got
    different replies). Mid-circuit measurements draw from ``rng`` per shot; analytic, both outcomes
    are kept with their probabilities (a postselected one only with its postselected outcome).
    """
    import pennylane as qml
    from pennylane.devices.qubit import apply_operation, create_initial_state
    n = program.n_wires
    rows = 1 if shots is None else shots
    zeros = np.zeros(rows, np.int64)
    state = create_initial_state(range(n)).astype(complex)
    paths = [Path(state, 1.0 if shots is None else float(shots), None if shots is None else np.arange(shots),
                  {}, {}, [zeros.copy() for _ in range(n)], {}, {})]
    answered = set()
    for step in program.steps:
        kind, op = step[0], step[1]
        if kind == "op":
            for p in paths:
                p.state = apply_operation(op, p.state)
                _occupy(p, op.wires, schedule.gate_ps)
        elif kind == "measure":
            w = int(op.wires[0])
            out = []
            for p in paths:
                start = p.ready[w]
                kids = []
                for b in (0, 1):
                    proj, pb = _project(p.state, w, b)
                    kids.append((b, proj, pb))
                if shots is None:
                    masks = [np.ones(1, bool) if pb > 1e-14 and (op.postselect is None or op.postselect == b)
                             else None for b, _, pb in kids]
                else:
                    p1 = kids[1][2] / (kids[0][2] + kids[1][2])
                    one = rng.random(p.size) < p1
                    masks = [~one if (~one).any() else None, one if one.any() else None]
                for (b, proj, pb), mask in zip(kids, masks):
                    if mask is None:
                        continue
                    s = proj / np.sqrt(pb)
                    if op.reset and b:
                        s = apply_operation(qml.X(w), s)
                    weight = p.weight * pb if shots is None else float(mask.sum())
                    kid = p.take(mask, state=s, weight=weight, bits={op.meas_uid: b})
                    kid.done[op.meas_uid] = start[mask] + schedule.measure_ps
                    kid.ready[w] = kid.done[op.meas_uid].copy()
                    out.append(kid)
            paths = out
        else:  # a conditional: its group's reply first (one loop round per group), then the decision
            g = step[2]
            if g.index not in answered:
                answered.add(g.index)
                paths = answer(g, paths)
                g.stall_ps = np.zeros(len(g.bits), np.int64)
            for p in paths:
                wires = [int(x) for x in op.wires]
                free = np.max([p.ready[x] for x in wires], axis=0)
                back = p.back[g.index]
                wait = np.maximum(back - free, 0)
                rows = p.rows[g.index]
                g.stall_ps[rows] = np.maximum(g.stall_ps[rows], wait)
                for x in wires:
                    p.ready[x] = np.maximum(p.ready[x], back)
                if decide(op, g, p.replies[g.index]):
                    p.state = apply_operation(op.base, p.state)
                    _occupy(p, op.wires, schedule.gate_ps)
    return paths


def _occupy(p: Path, wires, dur_ps: int) -> None:
    """A gate on ``wires``: it starts when all are free and holds them ``dur_ps``."""
    ws = [int(x) for x in wires]
    if not ws:
        return
    end = np.max([p.ready[x] for x in ws], axis=0) + dur_ps
    for x in ws:
        p.ready[x] = end.copy()


def reply_bits(group: Group, value: int) -> dict:
    """The reply read as the group's measurement values: uid -> bit ``i`` of ``value``."""
    return {u: (value >> i) & 1 for i, u in enumerate(group.uids)}


def decide(cond, group: Group, value: int) -> bool:
    """The conditional ``cond``'s own condition (PennyLane's MeasurementValue processing) on the reply."""
    bits = reply_bits(group, value)
    return bool(cond.meas_val.concretize({m: bits[m.meas_uid] for m in cond.meas_val.measurements}))


def pack_bits(bits: np.ndarray) -> np.ndarray:
    """bool (R, k) -> uint8 (R, ceil(k/8)): measurement ``i`` in bit ``i`` (little-endian bit order)."""
    return np.packbits(np.asarray(bits, bool), axis=1, bitorder="little")


def program_ps(paths: list[Path], schedule: Schedule, rows: int) -> np.ndarray:
    """Each row's program time (int64 ps): the last wire's end plus the final readout, in shot order
    (analytic: one row per final path)."""
    out = np.zeros(rows, np.int64)
    for i, p in enumerate(paths):
        end = np.max(p.ready, axis=0) if p.ready else np.zeros(p.size, np.int64)
        out[p.shots if p.shots is not None else [i]] = end + schedule.measure_ps
    return out


def _mv_values(mp, bits: dict, cast=float) -> object:
    """A measurement-value measurement's value(s) for the measured ``bits`` (uid -> bit), each ``cast``."""
    mvs = mp.mv if isinstance(mp.mv, list) else [mp.mv]
    vals = [cast(v.concretize({m: bits[m.meas_uid] for m in v.measurements})) for v in mvs]
    return vals if isinstance(mp.mv, list) else vals[0]


def analytic_results(tape, paths: list[Path]) -> tuple:
    """The tape's final measurements over the analytic paths: the probability-weighted mixture of each
    path's ``measure`` (expval, probs; var as E[O^2] - E[O]^2 of the mixture), renormalised to the
    paths kept (postselection). Measurement values: expval, var and probs of them from the outcomes.
    Raises ValueError for measurements a mixture of paths does not define (state, density matrix, ...)."""
    import pennylane as qml
    from pennylane.devices.qubit import measure
    total = sum(p.weight for p in paths)
    if total <= 0:
        raise ValueError("no outcome satisfies the postselection")
    out = []
    for mp in tape.measurements:
        w = [p.weight / total for p in paths]
        if getattr(mp, "mv", None) is not None:
            vals = [_mv_values(mp, p.bits) for p in paths]
            if isinstance(mp, qml.measurements.ExpectationMP):
                out.append(np.float64(sum(wi * v for wi, v in zip(w, vals))))
            elif isinstance(mp, qml.measurements.VarianceMP):
                mean = sum(wi * v for wi, v in zip(w, vals))
                out.append(np.float64(sum(wi * v * v for wi, v in zip(w, vals)) - mean * mean))
            elif isinstance(mp, qml.measurements.ProbabilityMP):
                eig = np.asarray(mp.eigvals(), float) if not isinstance(mp.mv, list) else None
                if eig is None:  # a list of raw measurements: joint outcomes, the first most significant
                    probs = np.zeros(2 ** len(mp.mv))
                    for wi, v in zip(w, vals):
                        probs[int("".join(str(int(x)) for x in v), 2)] += wi
                else:
                    probs = np.array([sum(wi for wi, v in zip(w, vals) if v == e) for e in eig])
                out.append(probs)
            else:
                raise ValueError(f"final measurement {mp}: analytic results of a measurement value are expval, "
                                 "var and probs (sample and counts need shots)")
        elif isinstance(mp, (qml.measurements.ExpectationMP, qml.measurements.ProbabilityMP)):
            out.append(sum(wi * np.asarray(measure(mp, p.state), float) for wi, p in zip(w, paths)))
        elif isinstance(mp, qml.measurements.VarianceMP):
            e = [float(np.real(measure(qml.expval(mp.obs), p.state))) for p in paths]
            v = [float(np.real(measure(mp, p.state))) for p in paths]
            mean = sum(wi * ei for wi, ei in zip(w, e))
            out.append(np.float64(sum(wi * (vi + ei * ei) for wi, vi, ei in zip(w, v, e)) - mean * mean))
        else:
            raise ValueError(f"final measurement {mp}: after mid-circuit measurements the state is a mixture of "
                             "outcomes; the device returns expval, var and probs analytic (sample and counts "
                             "with shots)")
    return tuple(out) if len(out) != 1 else out[0]


def shot_results(tape, paths: list[Path], shots: int, rng: np.random.Generator) -> tuple:
    """Per-shot results of a one-shot tape (``shots`` bins of one shot, as PennyLane's
    ``dynamic_one_shot`` makes it): for each shot, a tuple over the tape's measurements (the bare
    result if one), the terminal ones drawn from the shot's final state by ``measure_with_samples``
    and ``sample(m)`` of a mid-circuit measurement its drawn value."""
    from pennylane.devices.qubit.sampling import measure_with_samples
    from pennylane.measurements import Shots
    per = [None] * shots
    plain = [mp for mp in tape.measurements if getattr(mp, "mv", None) is None]
    for p in paths:
        k = len(p.shots)
        drawn = measure_with_samples(plain, p.state, Shots([1] * k), rng=rng) if plain else [()] * k
        if plain and k == 1:  # one bin is not a shot vector: the result is that bin's tuple itself
            drawn = (drawn,)
        for j, s in enumerate(p.shots):
            it = iter(drawn[j])  # bin j: a tuple over the terminal measurements
            row = []
            for mp in tape.measurements:
                if getattr(mp, "mv", None) is None:
                    row.append(next(it))
                else:
                    row.append(np.array(_mv_values(mp, p.bits, cast=lambda v: v)))  # its own type
            per[s] = tuple(row) if len(row) != 1 else row[0]
    return tuple(per)
