"""A stim circuit file measured from its text, before stim parses, expands or flattens it.

``decode.circuit`` names a .stim file. stim's own parser recurses once per nested ``REPEAT``
(thousands of levels overflow the C stack: a SIGSEGV, not an exception), and a ``REPEAT`` of
10^9..10^12 iterations parses at once but then makes every sampler, the detector error model and
``Circuit.flattened()`` (the feedback analysis, :mod:`twin.qec.feedback`) walk or allocate every
iteration. :func:`measure_circuit_text` walks the text once, line by line, with the ``REPEAT``
blocks on an explicit stack: each instruction line is parsed alone by stim (one instruction has no
nesting, and a repeated line is parsed once), and its counts are multiplied by the product of the
enclosing repeat counts. What it refuses, each as a :class:`CircuitTextError` naming the line:

- nesting deeper than :data:`MAX_REPEAT_DEPTH`; a repeat count that is not ASCII digits, 0, or over
  :data:`MAX_REPEAT_COUNT`;
- (:func:`check_counts`, once stim has counted the measurements and detectors per shot, which it does
  through the blocks without unrolling them) more than :data:`MAX_FLAT_INSTRUCTIONS` instructions or
  :data:`MAX_FLAT_TARGETS` targets once every block is unrolled (what sampling and ``flattened()``
  cost);
- a ``rec[-k]`` target (a detector, an observable or a classically controlled gate) reaching before
  the first measurement: at a block's first iteration fewest measurements have been made, so
  checking it there checks every iteration;
- one measurement read by more than :data:`MAX_DETECTORS_PER_MEASUREMENT` detectors (its error
  would flip them all: one hyperedge of 10^5 detectors that no decoder's graph holds), counted with
  numpy over the unrolled detector targets, whose number is bounded first;
- an observable (``OBSERVABLE_INCLUDE(k)``, index below the circuit's number of observables) that
  no target ever enters: its logical error rate would be 0 whatever the decoder.

The result, :class:`CircuitCounts`, holds the unrolled totals. Stim's file format:
https://github.com/quantumlib/Stim/blob/main/doc/file_format_stim_circuit.md
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MAX_REPEAT_DEPTH = 16             # REPEAT blocks inside one another; real memory experiments nest 1 or 2
MAX_REPEAT_COUNT = 10**12         # one block's count (stim's own limit is 2^63): the products are bounded below
MAX_FLAT_INSTRUCTIONS = 2_000_000  # instructions once unrolled (the feedback analysis walks them in Python)
MAX_FLAT_TARGETS = 50_000_000     # gate targets once unrolled: a shot's work
MAX_DETECTOR_TARGETS = 8_000_000  # rec targets of the detectors once unrolled (counted per measurement)
MAX_DETECTORS_PER_MEASUREMENT = 64  # a measurement in a stabiliser code is read by one to a few detectors


class CircuitTextError(ValueError):
    """A circuit text refused before stim reads it: ``line`` (1-based, or 0 for the whole file) and
    ``problem``; ``str()`` is one line."""

    def __init__(self, line: int, problem: str):
        self.line, self.problem = line, problem
        super().__init__(f"line {line}: {problem}" if line else problem)


@dataclass
class CircuitCounts:
    """A circuit's totals once every block is unrolled: ``instructions`` (each iteration of a
    block counted as one too: an empty ``REPEAT`` still loops), ``targets``,
    ``measurements``, ``detectors``, ``observables`` (1 + the largest index), ``depth`` (deepest
    nesting of ``REPEAT``), ``detector_targets`` (rec targets of the detectors), ``most_read``
    and ``observed`` (the observables some target enters)."""

    instructions: int = 0
    targets: int = 0
    measurements: int = 0
    detectors: int = 0
    observables: int = 0
    depth: int = 0
    detector_targets: int = 0
    most_read: tuple[int, int] = (0, 0)  # (measurement, detectors reading it) of the most read one
    observed: set[int] = field(default_factory=set)  # observables some target enters


@dataclass
class _Line:
    """One instruction line parsed alone: its counts and the rec lookbacks (k of ``rec[-k]``) of
    its targets."""

    measurements: int
    detectors: int
    targets: int
    recs: list[int]              # the lookback k of each rec[-k] target
    detector_recs: list[int]     # a DETECTOR's lookbacks k
    observable: int | None       # OBSERVABLE_INCLUDE's index


@dataclass
class _Block:
    """A ``REPEAT`` block being read: its ``count``, the line it opened on, the measurements of one
    iteration so far, and the read offsets of its detectors relative to its iteration's start."""

    count: int
    line: int
    measurements: int = 0
    reads: list[np.ndarray] = field(default_factory=list)


def _parse_line(text: str, n: int) -> _Line:
    import stim
    try:
        c = stim.Circuit(text)
    except Exception as e:  # noqa: BLE001 (stim raises ValueError with its reason; say it in one line)
        raise CircuitTextError(n, f"stim cannot parse it: {(str(e).strip().splitlines() or [''])[0][:160]}") from None
    if len(c) != 1 or isinstance(c[0], stim.CircuitRepeatBlock):
        raise CircuitTextError(n, "expected one instruction on a line")
    op = c[0]
    targets = op.targets_copy()
    recs = [-t.value for t in targets if t.is_measurement_record_target]  # a measuring gate takes none
    obs = int(op.gate_args_copy()[0]) if op.name == "OBSERVABLE_INCLUDE" and op.gate_args_copy() else None
    return _Line(c.num_measurements, c.num_detectors, len(targets), recs,
                 recs if op.name == "DETECTOR" else [], obs)


def _repeat_count(rest: str, n: int) -> int:
    words = rest.split()
    if len(words) != 2 or words[1] != "{":
        raise CircuitTextError(n, "expected REPEAT COUNT {")
    digits = words[0]
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 13:
        raise CircuitTextError(n, f"REPEAT {digits[:20]!r}: expected a count of ASCII digits, 1 to "
                               f"{MAX_REPEAT_COUNT:,}")
    count = int(digits)
    if not 1 <= count <= MAX_REPEAT_COUNT:
        raise CircuitTextError(n, f"REPEAT {count:,}: expected a count of 1 to {MAX_REPEAT_COUNT:,}")
    return count


class _Walk:
    """The single pass of :func:`measure_circuit_text`."""

    def __init__(self):
        self.counts = CircuitCounts()
        self.stack: list[_Block] = [_Block(1, 0)]
        self.factor = 1          # product of the enclosing counts
        self.made = 0            # measurements made before this point at every block's first iteration
        self.cache: dict[str, _Line] = {}

    def open(self, rest: str, n: int) -> None:
        count = _repeat_count(rest, n)
        if len(self.stack) > MAX_REPEAT_DEPTH:
            raise CircuitTextError(n, f"REPEAT blocks nested more than {MAX_REPEAT_DEPTH} deep")
        self.stack.append(_Block(count, n))
        self.factor *= count
        self.counts.instructions += self.factor  # each iteration costs a step, empty or not (REPEAT 10^12 {})
        self.counts.depth = max(self.counts.depth, len(self.stack) - 1)

    def close(self, n: int) -> None:
        if len(self.stack) == 1:
            raise CircuitTextError(n, "a } that closes no REPEAT block")
        b = self.stack.pop()
        self.factor //= b.count
        self.made += b.measurements * (b.count - 1)
        parent = self.stack[-1]
        if b.reads and self.counts.detector_targets <= MAX_DETECTOR_TARGETS:  # bounded: tiling costs that many
            one = np.concatenate(b.reads)
            tiled = (np.arange(b.count, dtype=np.int64)[:, None] * b.measurements + one[None, :]).ravel()
            parent.reads.append(tiled + parent.measurements)
        parent.measurements += b.measurements * b.count

    def instruction(self, text: str, n: int) -> None:
        line = self.cache.get(text)
        if line is None:
            line = self.cache[text] = _parse_line(text, n)
        c, f, top = self.counts, self.factor, self.stack[-1]
        for k in line.recs:
            if k > self.made:
                raise CircuitTextError(n, f"rec[-{k}] reaches before the first measurement ({self.made:,} made "
                                       "before it)")
        c.instructions += f
        c.targets += f * line.targets
        c.measurements += f * line.measurements
        c.detectors += f * line.detectors
        if line.observable is not None:
            c.observables = max(c.observables, line.observable + 1)
            if line.recs or line.targets:
                c.observed.add(line.observable)
        if line.detector_recs:
            c.detector_targets += f * len(line.detector_recs)
            if c.detector_targets <= MAX_DETECTOR_TARGETS:  # past it nothing more is kept (check_counts refuses)
                top.reads.append(top.measurements - np.asarray(line.detector_recs, np.int64))
            else:
                for b in self.stack:
                    b.reads.clear()
        top.measurements += line.measurements
        self.made += line.measurements

    def finish(self) -> CircuitCounts:
        if len(self.stack) > 1:
            raise CircuitTextError(self.stack[-1].line, "a REPEAT block that is never closed")
        reads = self.stack[0].reads
        if reads and self.counts.detector_targets <= MAX_DETECTOR_TARGETS:
            where, per = np.unique(np.concatenate(reads), return_counts=True)
            worst = int(per.argmax())
            self.counts.most_read = (int(where[worst]), int(per[worst]))
        return self.counts


def measure_circuit_text(text: str) -> CircuitCounts:
    """The unrolled totals of the stim circuit ``text`` (see the module docstring; :func:`check_counts`
    judges them). Raises :class:`CircuitTextError` (naming the line) for a nesting deeper than
    :data:`MAX_REPEAT_DEPTH`, a bad repeat count, unbalanced braces, a line stim cannot parse alone,
    or a ``rec[-k]`` before the first measurement. Linear in the text: the unrolled counts are
    products, never an unrolled walk (only the detectors' targets are tiled, and only while at most
    :data:`MAX_DETECTOR_TARGETS`)."""
    walk = _Walk()
    for n, raw in enumerate(text.splitlines(), 1):
        s = raw.split("#", 1)[0].strip()
        if not s:
            continue
        head, _, rest = s.partition(" ")
        name = head.split("[", 1)[0].split("(", 1)[0].upper()  # an instruction may carry a tag: REPEAT[t] 5 {
        if name == "REPEAT":
            walk.open(rest, n)
        elif s == "}":
            walk.close(n)
        elif "{" in s or "}" in s:
            raise CircuitTextError(n, "a brace outside REPEAT COUNT { ... } (one instruction a line)")
        else:
            walk.instruction(s, n)
    return walk.finish()


def check_counts(c: CircuitCounts) -> None:
    """Refuse (:class:`CircuitTextError`) a circuit whose unrolled totals ``c`` are more than
    :data:`MAX_FLAT_INSTRUCTIONS` instructions, :data:`MAX_FLAT_TARGETS` gate targets or
    :data:`MAX_DETECTOR_TARGETS` detector targets, a measurement read by more than
    :data:`MAX_DETECTORS_PER_MEASUREMENT` detectors, or an observable no target enters."""
    for what, got, most in (("instructions", c.instructions, MAX_FLAT_INSTRUCTIONS),
                            ("gate targets", c.targets, MAX_FLAT_TARGETS),
                            ("detector targets", c.detector_targets, MAX_DETECTOR_TARGETS)):
        if got > most:
            raise CircuitTextError(0, f"{got:,} {what} once its REPEAT blocks are unrolled (at most {most:,})")
    where, count = c.most_read
    if count > MAX_DETECTORS_PER_MEASUREMENT:
        raise CircuitTextError(0, f"{count:,} detectors read measurement {where:,} (at most "
                               f"{MAX_DETECTORS_PER_MEASUREMENT}: one error there would flip them all)")
    missing = sorted(set(range(c.observables)) - c.observed)
    if missing:
        raise CircuitTextError(0, f"observable {missing[0]} has no target (OBSERVABLE_INCLUDE({missing[0]}) with "
                               "no measurement record): its logical error rate would be 0 whatever the decoder")


def certain_errors(dem) -> int:
    """How many errors of the detector error model ``dem`` (a ``stim.DetectorErrorModel``) have
    probability 1 (a deterministic flip, not an error), counted through its REPEAT blocks."""
    import stim
    n = 0
    for inst in dem:
        if isinstance(inst, stim.DemRepeatBlock):
            n += inst.repeat_count * certain_errors(inst.body_copy())
        elif inst.type == "error" and inst.args_copy()[0] >= 1.0:
            n += 1
    return n
