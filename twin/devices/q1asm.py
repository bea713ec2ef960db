"""A Q1ASM timing interpreter: when a Qblox Q1 sequencer's program acquires, on its real-time timeline.

Q1ASM (the Qblox Q1 sequencer's assembly) has classical instructions, which the Q1 processor runs
ahead of time and which take no real-time, and real-time instructions, whose last argument is a
duration in ns that advances the sequencer's real-time timeline. This interpreter runs a program's
control flow (registers, loops, jumps) and keeps that timeline, recording every acquisition's start
instant. It models timing only: no waveforms, no NCO, no acquisition data.

Instructions (``R0``..``R63`` registers hold unsigned 32-bit values; ``@label`` targets)::

    classical (no real-time):  nop, stop, move a,Rd, add Ra,b,Rd, sub Ra,b,Rd, and/or/xor Ra,b,Rd,
                               not a,Rd, asl/asr Ra,b,Rd, jmp @l, jge Ra,imm,@l, jlt Ra,imm,@l,
                               loop Ra,@l (Ra -= 1; jump while Ra != 0), illegal
    parameter (no duration):   set_mrk, set_freq, reset_ph, set_ph, set_ph_delta, set_awg_gain,
                               set_awg_offs, set_cond, set_latch_en (two-argument form is timed), latch_rst
    real-time (last argument is the duration in ns): wait d, upd_param d, play w0,w1,d,
                               acquire i,b,d, acquire_weighed i,b,w0,w1,d, acquire_ttl i,b,en,d,
                               wait_trigger addr,d, wait_sync d, set_latch_en en,d, latch_rst d

``wait_trigger`` counts as its duration only: trigger arrival from the network (feedback within a
program) is not modelled, nor is ``set_cond``'s conditional playback. A duration may be an
immediate or (``wait`` only) a register. Real-time durations must be whole
ns within [4, 65535] (the sequencer's timing limits); a zero-duration ``wait`` is refused too.
``wait_sync d`` waits until every sequencer of the cluster reaches its ``wait_sync``, then ``d``.
A program must end in ``stop``; the interpreter refuses one that runs more than ``max_steps``
instructions (an endless loop).

Checked against hand computation and against the ``q1simulator`` package's Q1 core (acquisition
times of the same programs agree exactly; ``tests/test_qblox.py``). That package is not used at run
time: its ``__init__`` imports a Qt GUI and fails without Qt bindings (docs/decisions.md).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

MASK = 0xFFFF_FFFF
RT_MIN_NS, RT_MAX_NS = 4, 65535

_CLASSICAL = {"nop", "stop", "move", "add", "sub", "and", "or", "xor", "not", "asl", "asr", "jmp", "jge", "jlt",
              "loop", "illegal"}
_PARAM = {"set_mrk", "set_freq", "reset_ph", "set_ph", "set_ph_delta", "set_awg_gain", "set_awg_offs", "set_cond"}
_TIMED = {"wait": 1, "upd_param": 1, "play": 3, "acquire": 3, "acquire_weighed": 5, "acquire_ttl": 4,
          "wait_trigger": 2, "wait_sync": 1, "latch_rst": 1}
_ACQ = {"acquire", "acquire_weighed", "acquire_ttl"}
_NARGS = {"move": 2, "add": 3, "sub": 3, "and": 3, "or": 3, "xor": 3, "not": 2, "asl": 3, "asr": 3,
          "jmp": 1, "jge": 3, "jlt": 3, "loop": 2} | _TIMED


class Q1AsmError(ValueError):
    """A Q1ASM program the interpreter cannot run: names the line and what is wrong."""


@dataclass(frozen=True)
class Instr:
    """One parsed instruction: ``line`` (1-based), ``op``, ``args`` (strings as written)."""

    line: int
    op: str
    args: tuple[str, ...]


@dataclass
class Timeline:
    """What a program did on its real-time timeline (ns from its start).

    ``acquisitions``: start instant of every acquisition in order; ``durations``: their duration
    argument; ``end_ns``: the timeline's end at ``stop``; ``steps``: instructions executed;
    ``sync_points``: instants at which the program reached ``wait_sync`` (before synchronising).
    """

    acquisitions: list[int] = field(default_factory=list)
    durations: list[int] = field(default_factory=list)
    end_ns: int = 0
    steps: int = 0
    sync_points: list[int] = field(default_factory=list)


_LINE = re.compile(r"^\s*(?:(?P<label>[A-Za-z_][\w]*)\s*:)?\s*(?P<op>[a-z_]+)?\s*(?P<args>[^#]*?)\s*(?:#.*)?$")


def parse(text: str) -> tuple[list[Instr], dict[str, int]]:
    """Parse Q1ASM text into instructions and a label -> index table. Raises :class:`Q1AsmError`."""
    instrs: list[Instr] = []
    labels: dict[str, int] = {}
    pending: list[str] = []
    for n, raw in enumerate(text.splitlines(), 1):
        stripped = raw.split("#", 1)[0].strip()
        if not stripped:
            continue
        m = _LINE.match(raw)
        if not m:
            raise Q1AsmError(f"line {n}: cannot read {raw.strip()!r}")
        if m.group("label"):
            if m.group("label") in labels or m.group("label") in pending:
                raise Q1AsmError(f"line {n}: label {m.group('label')!r} defined twice")
            pending.append(m.group("label"))
        op = m.group("op")
        if not op:
            continue
        if op not in _CLASSICAL | _PARAM | set(_TIMED) | {"set_latch_en"}:
            raise Q1AsmError(f"line {n}: unknown instruction {op!r}")
        args = tuple(a.strip() for a in m.group("args").split(",")) if m.group("args") else ()
        for lab in pending:
            labels[lab] = len(instrs)
        pending = []
        instrs.append(Instr(n, op, args))
    for lab in pending:
        labels[lab] = len(instrs)
    for ins in instrs:
        for a in ins.args:
            if a.startswith("@") and a[1:] not in labels:
                raise Q1AsmError(f"line {ins.line}: no label {a[1:]!r}")
    return instrs, labels


def _reg(ins: Instr, a: str) -> int:
    if not re.fullmatch(r"R([0-9]|[1-5][0-9]|6[0-3])", a):
        raise Q1AsmError(f"line {ins.line}: {ins.op}: expected a register R0..R63, got {a!r}")
    return int(a[1:])


class Sequencer:
    """Runs one program; :meth:`step_until_sync` and :meth:`resume` let a cluster line up
    ``wait_sync`` across sequencers. ``name`` names it in errors; ``max_steps`` bounds a run."""

    def __init__(self, name: str, program: str, max_steps: int = 5_000_000):
        self.name = name
        try:
            self.instrs, self.labels = parse(program)
        except Q1AsmError as e:
            raise Q1AsmError(f"sequencer {name!r}: {e}") from None
        if not any(i.op == "stop" for i in self.instrs):
            raise Q1AsmError(f"sequencer {name!r}: the program has no stop")
        self.R = [0] * 64
        self.pc = 0
        self.t = 0
        self.max_steps = max_steps
        self.tl = Timeline()
        self.done = False
        self.sync_duration = 0

    def _val(self, ins: Instr, a: str) -> int:
        if a.startswith("R"):
            return self.R[_reg(ins, a)]
        try:
            return int(a, 0) & MASK
        except ValueError:
            raise Q1AsmError(f"sequencer {self.name!r}: line {ins.line}: {ins.op}: cannot read {a!r}") from None

    def _err(self, ins: Instr, what: str) -> Q1AsmError:
        return Q1AsmError(f"sequencer {self.name!r}: line {ins.line}: {ins.op}: {what}")

    def _duration(self, ins: Instr, a: str) -> int:
        if a.startswith("R") and ins.op != "wait":
            raise self._err(ins, "the duration must be an immediate")
        if not a.startswith("R"):  # an immediate: judged as written, before any 32-bit wrap
            try:
                written = int(a, 0)
            except ValueError:
                raise self._err(ins, f"cannot read {a!r}") from None
            if written < 0:
                raise self._err(ins, f"duration {a} ns is negative (durations are {RT_MIN_NS} to {RT_MAX_NS} ns)")
            if not RT_MIN_NS <= written <= RT_MAX_NS:
                raise self._err(ins, f"duration {a} ns outside [{RT_MIN_NS}, {RT_MAX_NS}] ns")
        d = self._val(ins, a)
        if not RT_MIN_NS <= d <= RT_MAX_NS:
            raise self._err(ins, f"duration {d} ns (register {a}) outside [{RT_MIN_NS}, {RT_MAX_NS}] ns")
        return d

    def _target(self, ins: Instr, a: str) -> int:
        if not a.startswith("@"):
            raise self._err(ins, f"expected a @label, got {a!r}")
        return self.labels[a[1:]]

    def run_until_sync(self) -> bool:
        """Run until ``wait_sync`` (returns True; the duration is held in ``sync_duration``) or
        ``stop`` (returns False). Raises :class:`Q1AsmError` on a bad instruction or a runaway."""
        while True:
            if self.pc >= len(self.instrs):
                raise Q1AsmError(f"sequencer {self.name!r}: ran past the last instruction without stop")
            ins = self.instrs[self.pc]
            self.tl.steps += 1
            if self.tl.steps > self.max_steps:
                raise Q1AsmError(f"sequencer {self.name!r}: more than {self.max_steps:,} instructions "
                                 "(an endless loop?)")
            op, a = ins.op, ins.args
            self.pc += 1
            if op in _NARGS and len(a) != _NARGS[op]:
                raise self._err(ins, f"expected {_NARGS[op]} arguments, got {len(a)}")
            if op == "stop":
                self.done = True
                self.tl.end_ns = self.t
                return False
            if op == "illegal":
                raise self._err(ins, "illegal instruction reached")
            if op == "nop" or op in _PARAM:
                continue
            if op == "move":
                self.R[_reg(ins, a[1])] = self._val(ins, a[0])
            elif op in ("add", "sub", "and", "or", "xor", "asl", "asr"):
                x, y = self._val(ins, a[0]), self._val(ins, a[1])
                r = {"add": x + y, "sub": x - y, "and": x & y, "or": x | y, "xor": x ^ y,
                     "asl": x << (y & 31), "asr": x >> (y & 31)}[op]
                self.R[_reg(ins, a[2])] = r & MASK
            elif op == "not":
                self.R[_reg(ins, a[1])] = ~self._val(ins, a[0]) & MASK
            elif op == "jmp":
                self.pc = self._target(ins, a[0])
            elif op in ("jge", "jlt"):
                x, y = self._val(ins, a[0]), self._val(ins, a[1])
                if (x >= y) if op == "jge" else (x < y):
                    self.pc = self._target(ins, a[2])
            elif op == "loop":
                r = _reg(ins, a[0])
                self.R[r] = (self.R[r] - 1) & MASK
                if self.R[r] != 0:
                    self.pc = self._target(ins, a[1])
            elif op == "set_latch_en":
                if len(a) == 2:
                    self.t += self._duration(ins, a[1])
            elif op == "wait_sync":
                self.sync_duration = self._duration(ins, a[0])
                self.tl.sync_points.append(self.t)
                return True
            elif op in _TIMED:
                d = self._duration(ins, a[-1])
                if op in _ACQ:
                    self.tl.acquisitions.append(self.t)
                    self.tl.durations.append(d)
                self.t += d

    def resume_after_sync(self, t_sync: int) -> None:
        """Continue after ``wait_sync``: the timeline jumps to ``t_sync`` (>= its own), then the
        instruction's duration."""
        self.t = max(self.t, t_sync) + self.sync_duration


def run_cluster(programs: dict[str, str], max_steps: int = 5_000_000) -> dict[str, Timeline]:
    """Run the sequencers' programs together, lining up every ``wait_sync`` (each waits for all the
    others, as SYNQ makes them). Returns each sequencer's :class:`Timeline`. Raises
    :class:`Q1AsmError` for a bad program, or when sequencers do not reach ``wait_sync`` alike."""
    seqs = {n: Sequencer(n, p, max_steps) for n, p in programs.items()}
    while True:
        at_sync = {n: s.run_until_sync() for n, s in seqs.items() if not s.done}
        if not at_sync:
            break
        if any(at_sync.values()) and not all(at_sync.values()):
            waiting = sorted(n for n, v in at_sync.items() if v)
            stopped = sorted(n for n, v in at_sync.items() if not v)
            raise Q1AsmError(f"sequencers {', '.join(waiting)} wait_sync while {', '.join(stopped)} stopped")
        t_sync = max(seqs[n].t for n in at_sync)
        for n in at_sync:
            seqs[n].resume_after_sync(t_sync)
    return {n: s.tl for n, s in seqs.items()}
