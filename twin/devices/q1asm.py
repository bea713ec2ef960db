"""A Q1ASM timing interpreter: when a Qblox Q1 sequencer's program acquires, on its real-time timeline.

Q1ASM (the Qblox Q1 sequencer's assembly) has classical instructions, which the Q1 processor runs
ahead of time and which take no real-time, and real-time instructions, whose last argument is a
duration in ns that advances the sequencer's real-time timeline. This interpreter runs a program's
control flow (registers, loops, jumps) and keeps that timeline, recording every acquisition's start
instant. It models timing only: no waveforms, no NCO, no acquisition data.

A line is ``[label:] [op [args]] [# comment]``, read by one left-to-right scan (:func:`_split_line`,
no regular expression); an immediate is ASCII digits, ``0x`` hex or ``0b`` binary with an optional
``-`` (:func:`literal`), within [-2^31, 2^32 - 1] where it is a register value (refused, not wrapped).

Instructions (``R0``..``R63`` registers hold unsigned 32-bit values; ``@label`` targets)::

    classical (no real-time):  nop, stop, move a,Rd, add Ra,b,Rd, sub Ra,b,Rd, and/or/xor Ra,b,Rd,
                               not a,Rd, asl/asr Ra,b,Rd, jmp @l, jge Ra,imm,@l, jlt Ra,imm,@l,
                               loop Ra,@l (Ra -= 1; jump while Ra != 0), illegal
    parameter (no duration):   set_mrk, set_freq, reset_ph, set_ph, set_ph_delta, set_awg_gain,
                               set_awg_offs, set_cond, set_latch_en (two-argument form is timed), latch_rst
    real-time (last argument is the duration in ns): wait d, upd_param d, play w0,w1,d,
                               acquire i,b,d, acquire_weighed i,b,w0,w1,d, acquire_ttl i,b,en,d,
                               wait_trigger addr,d, wait_sync d, set_latch_en en,d, latch_rst d

Feedback (Qblox docs, "Feedback Trigger Handling", docs.qblox.com/en/main/products/architecture/
sequencers/trigger_handling.html): ``wait_trigger addr,d`` stops the real-time core until a trigger
arrives on address ``addr`` (1..15), then waits ``d``; the twin latches triggers per address, so one
that arrived before the sequencer reached ``wait_trigger`` lets it pass at once (each
``wait_trigger`` takes the next trigger on its address, in arrival order). ``set_cond
enable,mask,operator,else_ns`` makes every following real-time instruction (``play``, ``acquire*``,
``wait``, ``upd_param``) conditional: before each, the trigger counters of the addresses in
``mask`` (bit ``a - 1`` for address ``a``) are thresholded (a counter "exceeds its threshold" when
it counted at least one trigger: every address's threshold is 1) and combined by ``operator`` (0 OR,
1 NOR, 2 AND, 3 NAND, 4 XOR, 5 XNOR: quantify-scheduler's ``FeedbackTriggerOperator``); true: the
instruction runs, false: the core waits ``else_ns`` instead (an acquisition skipped so is not
made). ``set_cond 0,...`` ends it. Counters count only while ``set_latch_en 1,d`` has enabled
them (``set_latch_en 0,d`` holds them) and ``latch_rst d`` clears them. ``wait_trigger`` and
``wait_sync`` are never conditional. Triggers come from a :class:`Triggers` board the caller fills
(:mod:`twin.devices.qblox` puts each reply's answer on it); a program run alone
(:func:`run_cluster`) sees every trigger there at once and no answer trigger: the timing of an
infinitely fast loop whose answers are all 0.
A duration may be an
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

from bisect import bisect_right
from dataclasses import dataclass, field

MASK = 0xFFFF_FFFF
RT_MIN_NS, RT_MAX_NS = 4, 65535

_CLASSICAL = {"nop", "stop", "move", "add", "sub", "and", "or", "xor", "not", "asl", "asr", "jmp", "jge", "jlt",
              "loop", "illegal"}
_PARAM = {"set_mrk", "set_freq", "reset_ph", "set_ph", "set_ph_delta", "set_awg_gain", "set_awg_offs"}
_TIMED = {"wait": 1, "upd_param": 1, "play": 3, "acquire": 3, "acquire_weighed": 5, "acquire_ttl": 4,
          "wait_trigger": 2, "wait_sync": 1, "latch_rst": 1}
_ACQ = {"acquire", "acquire_weighed", "acquire_ttl"}
_CONDITIONAL = {"play", "acquire", "acquire_weighed", "acquire_ttl", "wait", "upd_param"}  # what set_cond gates
OPERATORS = ("OR", "NOR", "AND", "NAND", "XOR", "XNOR")  # set_cond's operator argument 0..5
ADDRESSES = range(1, 16)  # the trigger network's 15 addresses
_ALU = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "and": lambda x, y: x & y,
        "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y, "asl": lambda x, y: x << (y & 31),
        "asr": lambda x, y: x >> (y & 31)}  # before the 32-bit wrap
_NARGS = {"move": 2, "add": 3, "sub": 3, "and": 3, "or": 3, "xor": 3, "not": 2, "asl": 3, "asr": 3,
          "jmp": 1, "jge": 3, "jlt": 3, "loop": 2, "set_cond": 4} | _TIMED


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
    ``sync_points``: instants at which the program reached ``wait_sync`` (before synchronising);
    ``waits``: per ``wait_trigger`` passed, ``(reached_ns, trigger_arrival_ns, tag)``: its stall is
    ``max(0, arrival - reached)`` and ``tag`` the trigger's (a reply's sequence number);
    ``conditional``: per real-time instruction under ``set_cond``, ``(t_ns, op, ran, waits)``:
    whether its condition held and how many ``wait_trigger`` had passed before it.
    """

    acquisitions: list[int] = field(default_factory=list)
    durations: list[int] = field(default_factory=list)
    end_ns: int = 0
    steps: int = 0
    sync_points: list[int] = field(default_factory=list)
    waits: list[tuple[int, int, int]] = field(default_factory=list)
    conditional: list[tuple[int, str, bool, int]] = field(default_factory=list)

    def stall_ns(self) -> list[int]:
        """Per ``wait_trigger`` passed: the ns the sequencer stood still waiting for its trigger."""
        return [max(0, a - r) for r, a, _ in self.waits]


class Triggers:
    """The trigger network as one sequencer's trigger handler sees it: per address (1..15), the
    arrival instants (ns of the cluster's time, non-decreasing) and a tag each (a reply's sequence
    number). ``known_ns``: every trigger arriving at or before it is on the board (later ones may
    still come). ``instant``: a board for a program run alone: ``wait_trigger`` passes at once
    and no trigger is counted (an infinitely fast loop whose answers are all 0)."""

    def __init__(self, instant: bool = False):
        self.instant = instant
        self.arrivals: dict[int, list[int]] = {a: [] for a in ADDRESSES}
        self.tags: dict[int, list[int]] = {a: [] for a in ADDRESSES}
        self.known_ns = 1 << 62 if instant else -1

    def add(self, address: int, t_ns: int, tag: int = 0) -> None:
        """A trigger on ``address`` arrives at ``t_ns`` (not before the last one there)."""
        a = self.arrivals[address]
        if a and t_ns < a[-1]:
            raise ValueError(f"trigger address {address}: arrival {t_ns} ns before the previous {a[-1]} ns")
        a.append(t_ns)
        self.tags[address].append(tag)

    def count(self, address: int, start_ns: int, end_ns: int) -> int:
        """Triggers on ``address`` arriving in ``(start_ns, end_ns]``."""
        a = self.arrivals[address]
        return max(0, bisect_right(a, end_ns) - bisect_right(a, start_ns))


_OP_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz_")
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_CHARS = _NAME_START | frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
MAX_LITERAL_CHARS = 40  # an immediate as written: 0x + 8 hex digits is 10; anything longer is not a 32-bit value


def _split_line(code: str) -> tuple[str | None, str | None, str]:
    """``code`` (a line without its comment) as (label, op, args text), each part found by one
    left-to-right scan (no regular expression, so no backtracking: a line of 64,000 spaces costs
    64,000 steps). Raises ValueError for a line that is not ``[label:] [op [args]]``."""
    label = None
    head, colon, tail = code.partition(":")
    if colon:
        label = head.strip()
        if not label or label[0] not in _NAME_START or any(ch not in _NAME_CHARS for ch in label):
            raise ValueError(code)
        code = tail
    code = code.strip()
    i = 0
    while i < len(code) and code[i] in _OP_CHARS:
        i += 1
    if i == 0:
        if code:
            raise ValueError(code)
        return label, None, ""
    return label, code[:i], code[i:].strip()


def literal(a: str) -> int:
    """An immediate as Q1ASM writes it: ASCII decimal digits, ``0x`` hex or ``0b`` binary, with an
    optional ``-``; at most :data:`MAX_LITERAL_CHARS` characters. Raises ValueError for anything else
    (Python's ``int`` would also take Arabic-Indic or full-width digits and ``7_00``)."""
    if not a or len(a) > MAX_LITERAL_CHARS or not a.isascii():
        raise ValueError(a)
    body = a[1:] if a[0] == "-" else a
    low = body.lower()
    if low.startswith("0x") and len(body) > 2 and all(ch in _HEX for ch in body[2:]):
        v = int(body[2:], 16)
    elif low.startswith("0b") and len(body) > 2 and all(ch in "01" for ch in body[2:]):
        v = int(body[2:], 2)
    elif body.isdigit():
        v = int(body, 10)
    else:
        raise ValueError(a)
    return -v if a[0] == "-" else v


def parse(text: str) -> tuple[list[Instr], dict[str, int]]:
    """Parse Q1ASM text into instructions and a label -> index table. Raises :class:`Q1AsmError`."""
    instrs: list[Instr] = []
    labels: dict[str, int] = {}
    pending: list[str] = []
    for n, raw in enumerate(text.splitlines(), 1):
        stripped = raw.split("#", 1)[0].strip()
        if not stripped:
            continue
        try:
            label, op, rest = _split_line(stripped)
        except ValueError:
            raise Q1AsmError(f"line {n}: cannot read {_cut(stripped)!r}") from None
        if label:
            if label in labels or label in pending:
                raise Q1AsmError(f"line {n}: label {_cut(label)!r} defined twice")
            pending.append(label)
        if not op:
            continue
        if op not in _KNOWN:
            raise Q1AsmError(f"line {n}: unknown instruction {_cut(op)!r}")
        args = tuple(a.strip() for a in rest.split(",")) if rest else ()
        for lab in pending:
            labels[lab] = len(instrs)
        pending = []
        instrs.append(Instr(n, op, args))
    for lab in pending:
        labels[lab] = len(instrs)
    for ins in instrs:
        for a in ins.args:
            if a.startswith("@") and a[1:] not in labels:
                raise Q1AsmError(f"line {ins.line}: no label {_cut(a[1:])!r}")
    return instrs, labels


def _cut(text: str, most: int = 60) -> str:
    return text if len(text) <= most else text[:most - 3] + "..."


_REGISTERS = {f"R{i}": i for i in range(64)}
_KNOWN = _CLASSICAL | _PARAM | set(_TIMED) | {"set_latch_en", "set_cond"}


def _reg(ins: Instr, a: str) -> int:
    r = _REGISTERS.get(a)
    if r is None:
        raise Q1AsmError(f"line {ins.line}: {ins.op}: expected a register R0..R63, got {_cut(a)!r}")
    return r


class Sequencer:
    """Runs one program; :meth:`run` goes until the program must wait (``wait_sync``, a trigger,
    or trigger knowledge), :meth:`resume_after_sync` lines ``wait_sync`` up across sequencers.
    ``name`` names it in errors; ``max_steps`` bounds a run."""

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
        self.cond: tuple[int, int, int] | None = None  # set_cond: (mask, operator, else_ns) while enabled
        self.latch_on: int | None = None  # set_latch_en 1: counters count from this instant
        self.latch_from = 0  # counters count triggers arriving after this (latch_rst / enable)
        self.latch_held: dict[int, int] = {}  # counts held by set_latch_en 0
        self.taken = {a: 0 for a in ADDRESSES}  # triggers taken by wait_trigger, per address
        self.blocked: tuple[str, int] | None = None  # ("trigger", address) or ("time", t_ns) after run()
        self._consts: dict[str, int] = {}  # immediates as read
        self._durations: dict[str, int] = {}  # immediate durations, judged once
        self._dispatch = self._plan()

    def listens(self) -> bool:
        """Whether the program waits for triggers or branches on them."""
        return any(i.op in ("wait_trigger", "set_cond") for i in self.instrs)

    def _val(self, ins: Instr, a: str) -> int:
        if a[0] == "R":
            return self.R[_reg(ins, a)]
        v = self._consts.get(a)
        if v is None:
            try:
                written = literal(a)
            except ValueError:
                raise self._err(ins, f"cannot read {_cut(a)!r} (an immediate: ASCII digits, 0x.. or 0b..)") from None
            if not -(1 << 31) <= written <= MASK:
                raise self._err(ins, f"immediate {_cut(a)} outside the 32-bit range [-2147483648, 4294967295]")
            v = self._consts[a] = written & MASK
        return v

    def _err(self, ins: Instr, what: str) -> Q1AsmError:
        return Q1AsmError(f"sequencer {self.name!r}: line {ins.line}: {ins.op}: {what}")

    def _duration(self, ins: Instr, a: str) -> int:
        d = self._durations.get(a)
        if d is not None:  # an immediate already judged
            return d
        if a.startswith("R") and ins.op != "wait":
            raise self._err(ins, "the duration must be an immediate")
        if not a.startswith("R"):  # an immediate: judged as written, before any 32-bit wrap
            try:
                written = literal(a)
            except ValueError:
                raise self._err(ins, f"cannot read {_cut(a)!r} (an immediate: ASCII digits, 0x.. or 0b..)") from None
            if written < 0:
                raise self._err(ins, f"duration {a} ns is negative (durations are {RT_MIN_NS} to {RT_MAX_NS} ns)")
            if not RT_MIN_NS <= written <= RT_MAX_NS:
                raise self._err(ins, f"duration {a} ns outside [{RT_MIN_NS}, {RT_MAX_NS}] ns")
        d = self._val(ins, a)
        if not RT_MIN_NS <= d <= RT_MAX_NS:
            raise self._err(ins, f"duration {d} ns (register {a}) outside [{RT_MIN_NS}, {RT_MAX_NS}] ns")
        if a[0] != "R":
            self._durations[a] = d
        return d

    def _imm(self, ins: Instr, a: str, lo: int, hi: int, what: str) -> int:
        try:
            v = literal(a)
        except ValueError:
            raise self._err(ins, f"{what}: cannot read {_cut(a)!r} (an immediate)") from None
        if not lo <= v <= hi:
            raise self._err(ins, f"{what} {_cut(a)} outside [{lo}, {hi}]")
        return v

    def _target(self, ins: Instr, a: str) -> int:
        if not a.startswith("@"):
            raise self._err(ins, f"expected a @label, got {_cut(a)!r}")
        return self.labels[a[1:]]

    def _counted(self, board: Triggers, address: int, t: int) -> int:
        """The trigger counter of ``address`` at ``t`` (latched triggers since the last reset)."""
        if self.latch_on is None:
            return self.latch_held.get(address, 0)
        return self.latch_held.get(address, 0) + board.count(address, max(self.latch_from, self.latch_on) - 1, t)

    def _condition(self, board: Triggers, cond: tuple[int, int, int], t: int) -> bool:
        """Whether ``set_cond``'s ``cond`` (mask, operator, else_ns) holds at ``t``."""
        mask, op, _ = cond
        bits = [self._counted(board, a, t) >= 1 for a in ADDRESSES if mask >> (a - 1) & 1]
        n = sum(bits)
        return (n > 0, n == 0, n == len(bits), n < len(bits), n % 2 == 1, n % 2 == 0)[op]

    def _plan(self) -> list[tuple]:
        """Per instruction: ``(handler, gate, nargs)``: the bound method that executes it, the one
        that first decides whether it may run now (or None), and the argument count it must have
        (or None). Built once; :meth:`run` dispatches on it."""
        ops = {"stop": self._stop, "illegal": self._illegal, "nop": self._nop, "move": self._move,
               "not": self._not, "jmp": self._jmp, "jge": self._branch, "jlt": self._branch, "loop": self._loop,
               "set_cond": self._set_cond, "set_latch_en": self._set_latch_en, "latch_rst": self._latch_rst,
               "wait_sync": self._wait_sync, "wait_trigger": self._wait_trigger}
        ops |= {op: self._nop for op in _PARAM} | {op: self._alu for op in _ALU}
        ops |= {op: self._realtime for op in _CONDITIONAL}
        gates = {"wait_trigger": self._gate_trigger, "set_latch_en": self._gate_latch}
        gates |= {op: self._gate_condition for op in _CONDITIONAL}
        return [(ops[i.op], gates.get(i.op), _NARGS.get(i.op)) for i in self.instrs]

    def run(self, board: Triggers | None = None) -> str:
        """Run until ``wait_sync`` (returns ``"sync"``; the duration is held in ``sync_duration``),
        ``stop`` (``"stop"``), or a point that needs triggers not yet on ``board`` (``"blocked"``;
        ``blocked`` says which: ``("trigger", address)`` or ``("time", t_ns)``, the instant up to
        which the board must be known). Fill the board and call again to continue. Without a board
        every trigger is there at once (:class:`Triggers` ``instant``). Raises :class:`Q1AsmError`
        on a bad instruction or a runaway."""
        board = board or Triggers(instant=True)
        self.blocked = None
        instrs, plan, tl = self.instrs, self._dispatch, self.tl
        while True:
            pc = self.pc
            if pc >= len(instrs):
                raise Q1AsmError(f"sequencer {self.name!r}: ran past the last instruction without stop")
            ins = instrs[pc]
            a = ins.args
            handler, gate, nargs = plan[pc]
            if nargs is not None and len(a) != nargs:
                raise self._err(ins, f"expected {nargs} arguments, got {len(a)}")
            ran = True if gate is None else gate(ins, a, board)
            if ran is None:
                return "blocked"
            tl.steps += 1
            if tl.steps > self.max_steps:
                raise Q1AsmError(f"sequencer {self.name!r}: more than {self.max_steps:,} instructions "
                                 "(an endless loop?)")
            self.pc = pc + 1
            outcome = handler(ins, a, board, ran)
            if outcome is not None:
                return outcome

    # Gates: whether the instruction at pc may run with what the board knows. None: blocked (and
    # ``blocked`` says on what); otherwise whether a conditional instruction's condition held.

    def _block_on_time(self, board: Triggers) -> bool:
        """Whether the board is not yet known up to now (then ``blocked`` names the instant)."""
        if self.t > board.known_ns:
            self.blocked = ("time", self.t)
            return True
        return False

    def _gate_trigger(self, ins: Instr, a: tuple[str, ...], board: Triggers) -> bool | None:
        """``wait_trigger``: its address read, blocked until the next trigger there is on the board."""
        addr = self._imm(ins, a[0], 1, 15, "trigger address")
        if not board.instant and self.taken[addr] >= len(board.arrivals[addr]):
            self.blocked = ("trigger", addr)
            return None
        return True

    def _gate_latch(self, ins: Instr, a: tuple[str, ...], board: Triggers) -> bool | None:
        """``set_latch_en 0`` while counting: holding the counts needs every trigger up to now."""
        if self.latch_on is not None and a and a[0].strip() == "0" and self._block_on_time(board):
            return None
        return True

    def _gate_condition(self, ins: Instr, a: tuple[str, ...], board: Triggers) -> bool | None:
        """A real-time instruction under ``set_cond``: whether its condition holds (known up to now)."""
        cond = self.cond
        if cond is None:
            return True
        if self._block_on_time(board):
            return None
        return not board.instant and self._condition(board, cond, self.t)

    # Handlers: ``(ins, args, board, ran) -> None`` to go on, or what :meth:`run` returns.

    def _stop(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> str:
        self.done = True
        self.tl.end_ns = self.t
        return "stop"

    def _illegal(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> None:
        raise self._err(ins, "illegal instruction reached")

    def _nop(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> None:
        """``nop`` and the parameter instructions: no register, no real-time."""

    def _move(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> None:
        self.R[_reg(ins, a[1])] = self._val(ins, a[0])

    def _alu(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> None:
        """``add``/``sub``/``and``/``or``/``xor``/``asl``/``asr`` ``a,b,Rd``: 32-bit wrapped."""
        self.R[_reg(ins, a[2])] = _ALU[ins.op](self._val(ins, a[0]), self._val(ins, a[1])) & MASK

    def _not(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> None:
        self.R[_reg(ins, a[1])] = ~self._val(ins, a[0]) & MASK

    def _jmp(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> None:
        self.pc = self._target(ins, a[0])

    def _branch(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> None:
        """``jge``/``jlt`` ``Ra,imm,@l``."""
        x, y = self._val(ins, a[0]), self._val(ins, a[1])
        if (x >= y) if ins.op == "jge" else (x < y):
            self.pc = self._target(ins, a[2])

    def _loop(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> None:
        """``loop Ra,@l``: ``Ra -= 1``; jump while it is not 0."""
        r = _reg(ins, a[0])
        self.R[r] = (self.R[r] - 1) & MASK
        if self.R[r] != 0:
            self.pc = self._target(ins, a[1])

    def _set_cond(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> None:
        """``set_cond enable,mask,operator,else_ns``: gate the following real-time instructions."""
        en = self._imm(ins, a[0], 0, 1, "enable")
        mask = self._imm(ins, a[1], 0, 0x7FFF, "mask")
        oper = self._imm(ins, a[2], 0, len(OPERATORS) - 1, "operator")
        self.cond = (mask, oper, self._duration(ins, a[3])) if en else None

    def _set_latch_en(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> None:
        """``set_latch_en en[,d]``: the trigger counters count (1) or hold their counts (0)."""
        if len(a) not in (1, 2):
            raise self._err(ins, f"expected 1 or 2 arguments, got {len(a)}")
        en = self._imm(ins, a[0], 0, 1, "enable")
        if en and self.latch_on is None:
            self.latch_on = self.t
        elif not en and self.latch_on is not None:  # hold the counts so far
            self.latch_held = {x: self._counted(board, x, self.t) for x in ADDRESSES}
            self.latch_on = None
        if len(a) == 2:
            self.t += self._duration(ins, a[1])

    def _latch_rst(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> None:
        self.latch_held = {}
        self.latch_from = self.t + 1  # triggers arriving from now on count
        self.t += self._duration(ins, a[0])

    def _wait_sync(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> str:
        self.sync_duration = self._duration(ins, a[0])
        self.tl.sync_points.append(self.t)
        return "sync"

    def _wait_trigger(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> None:
        """``wait_trigger addr,d``: take the next trigger on ``addr`` (its gate saw it there)."""
        d = self._duration(ins, a[1])
        if board.instant:
            self.t += d
            return
        addr = self._imm(ins, a[0], 1, 15, "trigger address")
        k = self.taken[addr]
        self.taken[addr] = k + 1
        arrival = board.arrivals[addr][k]
        self.tl.waits.append((self.t, arrival, board.tags[addr][k]))
        self.t = max(self.t, arrival) + d

    def _realtime(self, ins: Instr, a: tuple[str, ...], board: Triggers, ran: bool) -> None:
        """``wait``, ``upd_param``, ``play``, ``acquire*``: the duration, or ``else_ns`` when
        ``set_cond`` skips it; an acquisition that runs is recorded."""
        d = self._duration(ins, a[-1])
        if self.cond is not None:
            self.tl.conditional.append((self.t, ins.op, ran, len(self.tl.waits)))
            if not ran:
                self.t += self.cond[2]
                return
        if ins.op in _ACQ:
            self.tl.acquisitions.append(self.t)
            self.tl.durations.append(d)
        self.t += d

    def run_until_sync(self) -> bool:
        """:meth:`run` alone (every trigger there at once): True at ``wait_sync``, False at ``stop``."""
        return self.run() == "sync"

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
