"""Verilated nodes on the twin's event timeline.

An :class:`RtlNode` is one Verilated model (built by :mod:`twin.rtl.build`, loaded with ctypes)
clocked at ``period_ps`` with edge ``c`` at ``phase_ps + c * period_ps``. Its own memory is the
twin's :class:`~twin.kernel.MemoryRegion` (the harness reads the region's buffer in place), so the
bytes other nodes' posted writes land are exactly what the RTL reads.

Scheduling (conservative, no roll-back): the node runs in a kernel event of lower priority than
every ordinary event, so at its instant every landing of that instant has happened. From its next
unevaluated edge it runs the clock in one batch up to (not including) the next pending event of
the timeline -- nothing can reach it before that -- and stops early at the first edge that issues
something the timeline must see (a posted write complete, a reply handed back), which is then
scheduled at that edge's instant. When the RTL says it is idle (polling memory that has not
changed, no frame offered) the node stops and the clock's idle cycles are skipped: they cannot
change its state; a landing in its region or a frame offered wakes it at the first edge at or
after that instant. So a landing is seen by the first edge at or after it, as a poller's poll is.

Statistics: ``cycles`` (edges on the timeline, skipped idle ones included), ``evaluated`` (edges
the model was clocked), ``steps`` (calls into the model).
"""
from __future__ import annotations

import ctypes
import hashlib
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from twin.exchange.encoding import HEADER, Encoding
from twin.kernel import Kernel, MemoryRegion, PostedWritePath
from twin.kernel.sim import Infinity
from twin.nodes.protocol import CardStats, ConsumerStats, RtlCounters
from twin.rtl.boundary import WriteHops
from twin.rtl.build import RtlError

MAX_BATCH = 1 << 20  # cycles per call when nothing else is pending
WATCHDOG_CYCLES = 1 << 22  # busy this long (16.8 ms at 250 MHz) with no output and no idle: a hung node
MAX_PAYLOAD = 180    # bytes; the RTL's slot image is 256 bytes (qrt_card.v / qrt_v80.v MAXP)
SLOT_BYTES_MAX = 256


class _Event(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("addr", ctypes.c_uint32), ("nbytes", ctypes.c_uint32),
                ("pad", ctypes.c_uint32), ("cycle", ctypes.c_uint64)]


class _Step(ctypes.Structure):
    _fields_ = [("why", ctypes.c_int32), ("nevents", ctypes.c_int32), ("cycles", ctypes.c_uint64),
                ("ev", _Event * 2)]


_LIBS: dict[str, ctypes.CDLL] = {}


def load_library(path: Path) -> ctypes.CDLL:
    """Load a built node library once per process and declare its functions."""
    key = str(path)
    if key in _LIBS:
        return _LIBS[key]
    lib = ctypes.CDLL(key)
    p, u32, u64, i64, i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64, ctypes.c_int
    lib.qrt_create.restype = p
    lib.qrt_create.argtypes = [p, u32, i64, i64]
    lib.qrt_destroy.argtypes = [p]
    lib.qrt_reset.argtypes = [p, u32, u32, u32, u32, u32, u32]
    lib.qrt_trace_open.argtypes = [p, ctypes.c_char_p]
    lib.qrt_trace_open.restype = i32
    lib.qrt_trace_on.argtypes = [p, i32]
    lib.qrt_set_cycle.argtypes = [p, u64]
    lib.qrt_cycle.argtypes = [p]
    lib.qrt_cycle.restype = u64
    lib.qrt_evaluated.argtypes = [p]
    lib.qrt_evaluated.restype = u64
    lib.qrt_push_frame.argtypes = [p, ctypes.c_char_p, u32]
    lib.qrt_pop_accepted.argtypes = [p, ctypes.POINTER(i32)]
    lib.qrt_pop_accepted.restype = u64
    lib.qrt_write_data.argtypes = [p]
    lib.qrt_write_data.restype = ctypes.POINTER(ctypes.c_uint8)
    lib.qrt_reply_data.argtypes = [p]
    lib.qrt_reply_data.restype = ctypes.POINTER(ctypes.c_uint8)
    lib.qrt_counter.argtypes = [p, i32]
    lib.qrt_counter.restype = u32
    lib.qrt_step.argtypes = [p, u64, ctypes.POINTER(_Step), i32]
    lib.qrt_step.restype = i32
    _LIBS[key] = lib
    return lib


class TraceWindow:
    """Waveforms for rounds ``first..last`` (1-based, inclusive) into ``path`` (VCD)."""

    def __init__(self, path: Path, first: int, last: int):
        if first < 1 or last < first:
            raise ValueError(f"trace window must be 1 <= first <= last, got {first}..{last}")
        self.path = Path(path)
        self.first = first
        self.last = last


class RtlNode:
    """One Verilated node on the kernel's timeline (see the module docstring).

    Parameters: ``kernel``; ``name``; ``library`` (path of the built node); ``region`` (the node's
    own memory, read by the RTL in place); ``period_ps`` and ``phase_ps`` of its clock;
    ``trace`` (a :class:`TraceWindow` path for this node, or ``None``).
    Subclasses handle the events in :meth:`_write` and :meth:`_reply`. ``skip_idle`` (class
    attribute, default True): False clocks every cycle (benchmarks/rtl_cosim.py's like-for-like
    mode); results are the same, only slower.
    """

    skip_idle = True

    def __init__(self, kernel: Kernel, name: str, library: Path, region: MemoryRegion, period_ps: int,
                 phase_ps: int, trace: Path | None = None):
        self.kernel = kernel
        self.name = name
        self.lib = load_library(library)
        self.region = region
        self.period_ps = int(period_ps)
        self.phase_ps = int(phase_ps)
        self._mem = (ctypes.c_uint8 * region.size_bytes).from_buffer(region.buf)
        self.h: ctypes.c_void_p | None = ctypes.c_void_p(self.lib.qrt_create(self._mem, region.size_bytes,
                                                                              self.phase_ps, self.period_ps))
        self._step = _Step()
        self._next = 0            # next cycle to evaluate
        self._busy_since = 0      # first cycle of the current stretch with no output and no idle
        self._scheduled = False
        self.steps = 0
        self.tracing = False
        if trace is not None:
            if not self.lib.qrt_trace_open(self.h, str(trace).encode()):
                raise RuntimeError(f"{name}: this build has no waveform support (build with trace=True)")
            self.tracing = True
        region.watch(self.wake)

    def shutdown(self) -> None:
        """Free the model (and close its waveform file); idempotent; its counters stay readable."""
        if self.h:
            self._closed = ([int(self.lib.qrt_counter(self.h, i)) for i in range(5)],
                            int(self.lib.qrt_evaluated(self.h)))
            self.lib.qrt_destroy(self.h)
            self.h = None

    def counter(self, which: int) -> int:
        """One of the RTL's counters (see the harness's qrt_counter)."""
        if self.h is None:
            return self._closed[0][which]
        return int(self.lib.qrt_counter(self.h, which))

    def trace(self, on: bool) -> None:
        """Dump waveforms from now on (``on``) or stop."""
        if self.tracing and self.h is not None:
            self.lib.qrt_trace_on(self.h, int(on))

    def edge(self, c: int) -> int:
        """Instant (ps) of edge ``c``."""
        return self.phase_ps + c * self.period_ps

    def cycle_at_or_after(self, t_ps: int) -> int:
        """Index of the first edge at or after ``t_ps``."""
        return max(0, -((self.phase_ps - t_ps) // self.period_ps))

    @property
    def cycles(self) -> int:
        """Edges on the timeline so far (evaluated or skipped while idle)."""
        return self._next

    @property
    def evaluated(self) -> int:
        """Edges the model was clocked."""
        return self._closed[1] if self.h is None else int(self.lib.qrt_evaluated(self.h))

    def counters(self, errors: dict[str, int] | None = None) -> RtlCounters:
        """Its counters as a record (``errors``: a card's error counters)."""
        return RtlCounters(self.cycles, self.evaluated, self.steps, errors)

    def wake(self) -> None:
        """Something may have changed for the RTL (a landing in its region, a frame offered)."""
        if self._scheduled or self.h is None:
            return
        c = max(self._next, self.cycle_at_or_after(self.kernel.now))
        if c != self._next:
            self._next = c
            self.lib.qrt_set_cycle(self.h, c)
        self._schedule(self.edge(c))

    def _schedule(self, t: int) -> None:
        self._scheduled = True
        self.kernel.at_end_of(t, self._run)  # after every ordinary event of its instant

    def _run(self) -> None:
        self._scheduled = False
        now = self.kernel.now
        horizon = self.kernel.peek()
        t0 = self.edge(self._next)
        if horizon == Infinity:
            n = MAX_BATCH
        else:
            n = max(1, -((t0 - horizon) // self.period_ps))  # edges in [t0, horizon), at least the one at now
            n = min(n, MAX_BATCH)
        if t0 < now:
            raise RuntimeError(f"{self.name}: RTL edge {t0} ps is behind the timeline ({now} ps)")
        st = self._step
        why = self.lib.qrt_step(self.h, n, ctypes.byref(st), int(self.skip_idle or horizon == Infinity))
        self.steps += 1
        self._next += st.cycles
        if why != 0 or not self.skip_idle:
            self._busy_since = self._next
        elif self._next - self._busy_since > WATCHDOG_CYCLES:
            raise RtlError(f"{self.name}: the RTL ran {self._next - self._busy_since:,} cycles without issuing "
                               "anything or going idle (a function core that never asserts done?)")
        for i in range(st.nevents):
            ev = st.ev[i]
            t = self.edge(ev.cycle)
            if ev.kind == 1:
                data = ctypes.string_at(self.lib.qrt_write_data(self.h), ev.nbytes)
                self.kernel.at(t, self._write, ev.addr, data)
            else:
                data = ctypes.string_at(self.lib.qrt_reply_data(self.h), ev.nbytes)
                self.kernel.at(t, self._reply, data)
        if why != 1:  # busy: come back at the next edge
            self._schedule(self.edge(self._next))

    def _write(self, addr: int, data: bytes) -> None:
        raise NotImplementedError

    def _reply(self, data: bytes) -> None:
        raise NotImplementedError


class RtlConsumer(RtlNode):
    """The V80 consumer logic in RTL (``qrt_v80.v`` with its function core).

    Same ports as :class:`twin.devices.consumer.PollingConsumer`: ``requests`` (its own region,
    read by the RTL), ``reply`` (a :class:`PostedWritePath` into the card's reply queue; the RTL's
    posted writes go there in the order and at the edges it issues them). ``answer_cycles``: cycles
    from the poll that saw a request to the last beat of its reply data (seeds: 28 ns = 7 at
    250 MHz). Statistics (:meth:`finish`): ``served``, ``polls`` (edges on the timeline: the logic
    polls once a cycle), the RTL counters.
    """

    keeps_partial = False

    def __init__(self, kernel: Kernel, name: str, library: Path, encoding: Encoding, requests: MemoryRegion,
                 reply: PostedWritePath, slots: int, slot_bytes: int, period_ps: int, phase_ps: int,
                 answer_cycles: int, trace: Path | None = None):
        if slot_bytes > SLOT_BYTES_MAX:
            raise ValueError(f"{name}: model rtl holds slots of at most {SLOT_BYTES_MAX} bytes, got {slot_bytes}")
        super().__init__(kernel, name, library, requests, period_ps, phase_ps, trace)
        self.enc = encoding
        self.reply = reply
        self.lib.qrt_reset(self.h, slots, slot_bytes, encoding.value, 0, answer_cycles, 0)
        self.writes = WriteHops(encoding, slots, slot_bytes, "reply", "publish", "rland")  # .hops: the flow's

    @property
    def polls(self) -> int:
        """Edges on the timeline (the logic polls once a cycle)."""
        return self.cycles

    @property
    def served(self) -> int:
        """Requests answered by the RTL."""
        return self.counter(0)

    def setup(self) -> None:
        """Begin polling (the model idles until its region changes)."""
        self.wake()

    def finish(self) -> ConsumerStats:
        """Edges on the timeline as polls, requests answered, the RTL's counters."""
        return ConsumerStats(self.polls, self.served, rtl=self.counters())

    def _write(self, addr: int, data: bytes) -> None:
        self.writes.mark(addr, data, self.kernel.now, self.reply.write(addr, data))


class RtlLinkCard(RtlNode):
    """The U55C exchange engine in RTL (``qrt_card.v``), with the interface of
    :class:`twin.devices.linkcard.LinkCard` that the event model uses.

    ``submit(seq, payload)`` offers a frame on the link side (512-bit words, valid/ready); the RTL
    writes it into the consumer's request queue through ``requests`` (a PostedWritePath) and polls
    its own ``replies`` region. Each reply it hands back is checked here against ``reference`` (byte
    for byte, status ok) and reported to ``on_reply(seq, t_in_ps, t_have_ps, ok)``: ``t_in`` is the
    edge at which the RTL accepted the frame's first word, ``t_have`` the edge of the reply's last
    word. ``land_cycles``: last frame word accepted -> last beat of the request data: the bridge
    cycle plus the seeds' 10 ns landing, rounded up to the clock (14 ns -> 4 cycles: the first edge
    at or after the instant the behavioural card issues). ``read_cycles``: poll that saw the reply
    -> last reply word (seeds: 40 ns = 10 cycles).

    Statistics as LinkCard: ``issued``, ``replies_seen``, ``mismatches``, ``backlog_max`` (frames
    offered while every slot held an unanswered request),
    ``reply_timeouts`` (0: no timeout in RTL), ``reply_digest``; ``errors()`` gives the RTL's
    counters; :meth:`finish` all of them as a :class:`twin.nodes.protocol.CardStats`.
    """

    def __init__(self, kernel: Kernel, name: str, library: Path, encoding: Encoding, requests: PostedWritePath,
                 replies: MemoryRegion, slots: int, slot_bytes: int, function: int,
                 reference: Callable[[bytes], bytes], on_reply: Callable[[int, int, int, bool], None],
                 period_ps: int, land_cycles: int, read_cycles: int, trace: Path | None = None):
        if slot_bytes > SLOT_BYTES_MAX:
            raise ValueError(f"{name}: model rtl holds slots of at most {SLOT_BYTES_MAX} bytes, got {slot_bytes}")
        super().__init__(kernel, name, library, replies, period_ps, 0, trace)
        self.enc = encoding
        self.requests = requests
        self.slot_bytes = slot_bytes
        self.reference = reference
        self.on_reply = on_reply
        self.slots = slots
        self.lib.qrt_reset(self.h, slots, slot_bytes, encoding.value, function, land_cycles, read_cycles)
        self._pending: deque[tuple[int, bytes]] = deque()
        self._accepted: deque[int] = deque()
        self.reply_digest = hashlib.sha256()
        self.replies_seen = 0
        self.mismatches = 0
        self.backlog_max = 0
        self.reply_timeouts = 0
        self.kept_replies: list[bytes] | None = None  # a list: every reply payload, by sequence number
        self.writes = WriteHops(encoding, slots, slot_bytes, "issue", None, "land")  # .hops: the flow's recorder

    @property
    def polls(self) -> int:
        """Edges on the timeline."""
        return self.cycles

    @property
    def issued(self) -> int:
        """Requests written into the consumer's queue."""
        return self.counter(0)

    def errors(self) -> dict:
        """The RTL's error counters."""
        return {"frame": self.counter(2), "status": self.counter(3),
                "length": self.counter(4)}

    def setup(self) -> None:
        """Nothing to arm: the RTL acts on the frames offered."""

    def kept_reply(self, seq: int) -> bytes:
        """Reply ``seq``'s payload as the RTL handed it back (a flow that keeps its replies)."""
        if self.kept_replies is None:
            raise RuntimeError(f"{self.name}: this flow keeps no replies")
        return self.kept_replies[seq - 1]

    def finish(self) -> CardStats:
        """Its statistics, with the RTL's counters and error counters."""
        return CardStats(self.mismatches, self.backlog_max, self.polls, self.reply_digest.hexdigest(),
                         self.reply_timeouts, replies=self.kept_replies, rtl=self.counters(self.errors()))

    def submit(self, seq: int, payload: bytes) -> None:
        """Offer a frame now. Raises ValueError if it does not fit a slot or the RTL's 180 bytes."""
        if self.enc.slot_bytes(len(payload)) > self.slot_bytes or len(payload) > MAX_PAYLOAD:
            raise ValueError(f"request {seq} of {len(payload)} bytes does not fit a {self.slot_bytes}-byte "
                             f"{self.enc.name} slot of the RTL card (payload at most {MAX_PAYLOAD} bytes)")
        if not payload:
            raise ValueError(f"request {seq}: an empty frame carries no word")
        self._pending.append((seq, bytes(payload)))
        self.backlog_max = max(self.backlog_max, len(self._pending) - self.slots)  # found every slot busy
        self.lib.qrt_push_frame(self.h, payload, len(payload))
        self.wake()

    def _write(self, addr: int, data: bytes) -> None:
        self.writes.mark(addr, data, self.kernel.now, self.requests.write(addr, data))

    def _reply(self, data: bytes) -> None:
        seq, function, length, flags, _ = HEADER.unpack_from(data, 0)
        got = data[16:16 + length]
        want_seq, payload = self._pending.popleft()
        ok_flag = ctypes.c_int()
        c = self.lib.qrt_pop_accepted(self.h, ctypes.byref(ok_flag))
        if not ok_flag.value:
            raise RuntimeError(f"{self.name}: a reply came back for a frame the RTL never accepted")
        t_in = self.edge(c)
        ok = seq == (want_seq - 1) % (2**32 - 1) + 1 and got == self.reference(payload) and flags == 0
        self.reply_digest.update(seq.to_bytes(4, "little") + flags.to_bytes(4, "little") + got)
        self.replies_seen += 1
        if self.kept_replies is not None:
            self.kept_replies.extend([b""] * (want_seq - len(self.kept_replies)))
            self.kept_replies[want_seq - 1] = bytes(got)
        if not ok:
            self.mismatches += 1
        self.on_reply(want_seq, t_in, self.kernel.now, ok)


if TYPE_CHECKING:  # mypy checks that these satisfy the node protocol (twin/nodes/protocol.py)
    from twin.nodes.protocol import CardNode, ConsumerNode
    _rtlconsumer: type[ConsumerNode] = RtlConsumer
    _rtllinkcard: type[CardNode] = RtlLinkCard
