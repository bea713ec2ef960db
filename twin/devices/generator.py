"""The control-side traffic generator: closed loop, or open loop at a fixed period."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from twin.kernel import Clock, Kernel
from twin.kernel.sim import stream_rng
from twin.nodes.protocol import NoTrace, ProgramStats

_WORD = struct.Struct("<Q")

GAP_KINDS = ("fixed", "uniform", "exponential", "file")


@dataclass(frozen=True)
class Gaps:
    """Random gaps between requests (integer ps), drawn per flow from its own random stream.

    kind: "fixed" (every gap ``a_ps``), "uniform" (uniform in [``a_ps``, ``b_ps``], whole ps),
    "exponential" (mean ``a_ps``, rounded to 1 ps: Poisson arrivals in open loop), or "file"
    (``values_ps`` in order, repeated when the run is longer than the file).
    """

    kind: str
    a_ps: int = 0
    b_ps: int = 0
    values_ps: tuple[int, ...] = ()

    def __post_init__(self):
        if self.kind not in GAP_KINDS:
            raise ValueError(f"gaps kind must be one of {', '.join(GAP_KINDS)}, got {self.kind!r}")
        if self.a_ps < 0 or self.b_ps < 0 or any(v < 0 for v in self.values_ps):
            raise ValueError("gaps must be >= 0 ps")
        if self.kind == "uniform" and self.b_ps < self.a_ps:
            raise ValueError(f"uniform gaps need min <= max, got {self.a_ps} > {self.b_ps} ps")
        if self.kind == "file" and not self.values_ps:
            raise ValueError("a gaps file needs at least one gap")

    def draw(self, seed: int, stream: str, n: int) -> np.ndarray:
        """``n`` gaps (int64 ps) from stream ``stream`` of ``seed``."""
        if self.kind == "fixed":
            return np.full(n, self.a_ps, np.int64)
        if self.kind == "file":
            return np.resize(np.asarray(self.values_ps, np.int64), n)
        rng = stream_rng(seed, stream)
        if self.kind == "uniform":
            return rng.integers(self.a_ps, self.b_ps + 1, size=n, dtype=np.int64)
        return np.rint(rng.exponential(self.a_ps, size=n)).astype(np.int64)


# A free-running clock's offset from nominal, in ppm: crystals are within +-100, PCIe's
# spread-spectrum clocking pulls down by 5,000; +-10,000 (1 %) bounds any real oscillator. Its drift,
# ppb per second: a crystal's is a few; +-10^7 (10 ppm a second) keeps a 1,000 s run within the bound above.
MAX_PPM = 10_000.0
MAX_DRIFT_PPB_PER_S = 1e7


@dataclass(frozen=True)
class Waits:
    """A generator program whose requests wait for earlier requests' corrections (scenario
    ``traffic.program.waits``; a stim circuit's classically controlled gates, :mod:`twin.qec.feedback`).
    The program counts its time in the generator clock's edges.

    pattern: per request of a shot (request ``i``, 0-based, takes ``pattern[i % len(pattern)]``), the
        offsets ``k >= 1`` of the requests whose corrections it waits for (empty: none; a request
        before 0 is not waited for, so a shot's first round or the first ``k`` requests wait for nothing).
    then_cycles: generator cycles from the dependent operation (applied once the last of those
        corrections is back) to the request leaving (the rest of the round).

    Request ``i`` leaves at edge ``max(e + period_cycles, b + then_cycles)``, ``e`` the edge of
    request ``i - 1`` and ``b`` the first edge at or after the last correction it waits for is back
    at the generator; ``e + period_cycles`` (the open-loop edge) without dependencies. The stall is
    the difference (:func:`program_stats`); every later request shifts with it. In a stim circuit's
    terms, a gate ``slack`` cycles after request ``i - 1`` is applied at ``max(e + slack, b)`` and
    the request leaves ``period - slack`` after it: ``then_cycles = period_cycles - slack``.
    Raises ValueError for an empty pattern, an offset below 1 or ``then_cycles < 0``."""

    pattern: tuple[tuple[int, ...], ...] = ((1,),)
    then_cycles: int = 0

    def __post_init__(self):
        if not self.pattern or any(k < 1 for w in self.pattern for k in w):
            raise ValueError(f"waits pattern {self.pattern}: one entry per request of a shot, offsets >= 1 "
                             "(an earlier request's correction)")
        if self.then_cycles < 0:
            raise ValueError(f"waits.then must be >= 0 cycles, got {self.then_cycles}")

    @classmethod
    def every_round(cls, for_round: int = -1, then_cycles: int = 0) -> Waits:
        """Every request waits for the correction of the request ``for_round`` before it (-1: the
        previous one; scenario ``traffic.program.waits: {for_round, then}``). Raises ValueError for
        ``for_round >= 0`` (a round cannot wait for its own correction or a later one)."""
        if for_round >= 0:
            raise ValueError(f"waits.for_round must be < 0 (an earlier round's correction), got {for_round}")
        return cls(((-for_round,),), then_cycles)

    def needs(self, i: int) -> tuple[int, ...]:
        """The requests (0-based) whose corrections request ``i`` waits for (none before 0)."""
        return tuple(i - k for k in self.pattern[i % len(self.pattern)] if i - k >= 0)

    def next_edge(self, clock: Clock, prev_edge: int, i: int, period_cycles: int,
                  back: Callable[[int], int]) -> tuple[int, int]:
        """``(open-loop edge, send edge)``: clock edge indices of request ``i`` (>= 1), request
        ``i - 1`` sent at edge ``prev_edge``; ``back(j)``: request ``j``'s correction back at the
        generator (ps), called for every request :meth:`needs` names. The one computation of the
        event and the direct engines."""
        nominal = prev_edge + period_cycles
        deps = self.needs(i)
        if not deps:
            return nominal, nominal
        return nominal, max(nominal, clock.index_at_or_after(max(back(j) for j in deps)) + self.then_cycles)


def program_stats(t_send: np.ndarray, nominal: np.ndarray) -> dict:
    """A waiting generator's statistics from its send instants and the open-loop instants each
    request would have had after the previous one (int64 ps arrays, one per request): ``stall_ps``
    per request (its send minus its open-loop instant), ``stall_total_ps``, ``period_ps`` (the gaps
    between requests: the effective cycle time, one fewer than the requests)."""
    stall = np.asarray(t_send, np.int64) - np.asarray(nominal, np.int64)
    return {"stall_ps": stall, "stall_total_ps": int(stall.sum()), "period_ps": np.diff(np.asarray(t_send, np.int64))}


@dataclass(frozen=True)
class Share:
    """This generator's part of one stream dispatched round robin over ``count`` flows: it sends
    the stream's requests ``index``, ``index + count``, ... of ``stream_rounds`` (0-based), each at
    the instant the whole stream would send it (the stream's period or gaps, walked exactly), as its
    own requests 1, 2, ... Flows with ``index`` 0 .. ``count - 1`` of one stream (one generator
    node: one oscillator) together send exactly the stream's instants. Raises ValueError for an
    index outside ``[0, count)`` or fewer than one flow."""

    index: int
    count: int
    stream_rounds: int

    def __post_init__(self):
        if self.count < 1 or not 0 <= self.index < self.count or self.stream_rounds <= self.index:
            raise ValueError(f"share {self.index} of {self.count} flows over {self.stream_rounds} requests: need "
                             "0 <= index < count and index < stream_rounds")

    @property
    def rounds(self) -> int:
        """This flow's requests: ``len(range(index, stream_rounds, count))``."""
        return len(range(self.index, self.stream_rounds, self.count))


@dataclass(frozen=True)
class TrafficParams:
    """What the control side sends and on which clock.

    mode: "closed_loop" — one request in flight; the next request leaves at the first edge of the
        generator's clock after the previous reply is back (the seeds' measurement: traffic
        generated on the link card's own FPGA, on the clock that times it). "open_loop" — one
        request every ``period_ps``.
    rounds: number of requests (> 0).
    frame_bytes: request payload size in bytes (> 0).
    period_ps: open loop only: request period, a whole number of generator clock cycles.
    clock: "card" (the generator runs on the card's clock: phase-locked) or "independent" (its
        own oscillator with ``ppm`` offset and a start phase drawn from the seed, e.g. a Qblox
        cluster across a cable).
    clock_ps: the generator clock's nominal period (default 4000 ps, 250 MHz).
    ppm: independent clock only: frequency offset in parts per million.
    gap_ps: closed loop only: extra time between a reply and the next request (default 0).
    drift_ppb_per_s: independent clock only: slow drift of its frequency offset, ppb per second
        (default 0; see :class:`twin.kernel.clock.DriftingClock`).
    offset_ps: independent clock only: a fixed delay added to every send instant (e.g. a Qblox
        cluster's first publish and its trigger network; default 0).
    in_flight: closed loop only: requests in flight (default 1, the seeds' measurement). The first
        ``in_flight`` requests leave at edge 0; each reply sends the next request.
    syndrome_bits: bits at the start of each frame that carry the round's acquisition results (a
        Qblox cluster: measurements x bits per measurement), the rest zero; 0 (default): the frame
        is the mixed counter words of :func:`payload_for`.
    gaps: random gaps (:class:`Gaps`) or None. Open loop: request k+1 leaves at the first
        generator edge at or after request k's send instant plus gap k (instead of a fixed
        ``period_ps``). Closed loop: the next request leaves at the first edge at or after the
        reply plus the gap (instead of a fixed ``gap_ps``).
    share: open loop only: this generator sends its :class:`Share` of a stream (``rounds`` is then
        its own request count, ``share.rounds``; the gaps are the stream's); None (default): all of it.
    waits: open loop at ``period_ps`` only: a :class:`Waits` (requests wait for earlier requests'
        corrections), or None (default).
    feedback: a control system whose program listens to the replies (a
        :class:`twin.devices.qblox.QbloxCluster` whose programs ``wait_trigger``/``set_cond``): the
        event engine builds its generator (``feedback.generator(...)``) instead of this module's;
        the direct engine refuses it. None (default).

    :attr:`listens` is the flag an engine checks: sends that depend on replies.
    """

    mode: str = "closed_loop"
    rounds: int = 100_000
    frame_bytes: int = 64
    period_ps: int = 0
    clock: str = "card"
    clock_ps: int = 4000
    ppm: float = 0.0
    gap_ps: int = 0
    drift_ppb_per_s: float = 0.0
    offset_ps: int = 0
    in_flight: int = 1
    gaps: Gaps | None = None
    syndrome_bits: int = 0
    share: Share | None = None
    waits: Waits | None = None
    feedback: object = None

    @property
    def listens(self) -> bool:
        """Whether the control side's sends depend on the replies (``waits`` or ``feedback``): an
        engine that cannot feed replies back to the generator must refuse such traffic."""
        return self.waits is not None or self.feedback is not None

    def __post_init__(self):
        if self.in_flight < 1 or (self.in_flight > 1 and self.mode != "closed_loop"):
            raise ValueError(f"in_flight must be >= 1 and applies to closed-loop traffic, got {self.in_flight}")
        if self.mode not in ("closed_loop", "open_loop"):
            raise ValueError(f"traffic mode must be 'closed_loop' or 'open_loop', got {self.mode!r}")
        if self.clock not in ("card", "independent"):
            raise ValueError(f"traffic clock must be 'card' or 'independent', got {self.clock!r}")
        if not 0 <= self.syndrome_bits <= 8 * self.frame_bytes:
            raise ValueError(f"syndrome_bits must be in [0, 8 * frame_bytes], got {self.syndrome_bits}")
        if self.share is not None and (self.mode != "open_loop" or self.rounds != self.share.rounds):
            raise ValueError(f"a share of a stream is open-loop traffic of its {self.share.rounds} requests, got "
                             f"{self.mode} with {self.rounds}")
        if self.rounds < 1 or self.frame_bytes < 1:
            raise ValueError(f"rounds and frame_bytes must be >= 1, got {self.rounds}, {self.frame_bytes}")
        if self.clock_ps <= 0 or self.gap_ps < 0:
            raise ValueError(f"clock_ps must be > 0 and gap_ps >= 0, got {self.clock_ps}, {self.gap_ps}")
        if self.gaps is not None and (self.gap_ps or (self.mode == "open_loop" and self.period_ps)):
            raise ValueError("random gaps replace the open-loop period and the closed-loop gap: give one")
        if self.waits is not None and (self.mode != "open_loop" or self.gaps is not None or self.share is not None):
            raise ValueError("waits apply to open-loop traffic at a fixed period, one flow (no gaps, no share)")
        if self.mode == "open_loop" and self.gaps is None and (self.period_ps <= 0 or self.period_ps % self.clock_ps):
            raise ValueError(f"open-loop period_ps must be a positive multiple of clock_ps ({self.clock_ps}), "
                             f"got {self.period_ps}")

    def make_clock(self, phase_ps: int) -> Clock:
        """The generator's clock: the card's (phase 0, no offset) or an independent one."""
        if self.clock == "card":
            return Clock(self.clock_ps, 0, 0)
        if self.drift_ppb_per_s:
            from twin.kernel.clock import DriftingClock
            return DriftingClock(self.clock_ps, int(round(self.ppm * 1000)), phase_ps + self.offset_ps,
                                 int(round(self.drift_ppb_per_s * 1000)))
        return Clock(self.clock_ps, int(round(self.ppm * 1000)), phase_ps + self.offset_ps)

    def gaps_array(self, seed: int, stream: str) -> np.ndarray | None:
        """This run's gaps (int64 ps, one per round; with a share, one per request of the whole
        stream) from ``stream``, or None without random gaps."""
        n = self.rounds if self.share is None else self.share.stream_rounds
        return None if self.gaps is None else self.gaps.draw(seed, stream, n)

    @property
    def period_cycles(self) -> int:
        """Open loop: the request period in generator clock cycles."""
        return self.period_ps // self.clock_ps


def payload_for(seq: int, nbytes: int, salt: int, syndrome_bits: int = 0) -> bytes:
    """Deterministic request payload for round ``seq``: a mixed counter word, repeated; with
    ``syndrome_bits`` only those leading bits (little-endian bit order, the contract's) are the
    mixed word's (the round's acquisition results) and the rest of the frame is zero padding."""
    word = _WORD.pack((seq * 0x9E3779B97F4A7C15 ^ salt) & 0xFFFFFFFFFFFFFFFF)
    full = (word * (-(-nbytes // 8)))[:nbytes]
    if not syndrome_bits:
        return full
    v = int.from_bytes(full, "little") & ((1 << syndrome_bits) - 1)
    return v.to_bytes(nbytes, "little")


class TrafficGenerator(NoTrace):
    """Issues requests and takes replies (the control system, or the card's own generator): a
    :class:`twin.nodes.protocol.ControlNode`.

    Ports: ``send(seq, payload)`` towards the card (a callable, called at the send instant);
    ``reply(seq)`` when a reply is back at the generator. ``payloads(seq)``, when given, supplies
    each request's payload (a workload's frames); otherwise :func:`payload_for` fills it.

    Statistics: ``sent``, ``received``; ``t_send`` (list of send instants, ps).
    """

    def __init__(self, kernel: Kernel, params: TrafficParams, clock: Clock,
                 send: Callable[[int, bytes], None], salt: int,
                 payloads: Callable[[int], bytes] | None = None, gaps_ps: np.ndarray | None = None):
        self.kernel = kernel
        self.payloads = payloads  # seq -> payload (e.g. a QEC workload's syndrome frames); None: payload_for
        self.p = params
        self.clock = clock
        self.send = send
        self.salt = salt
        self.sent = 0
        self.received = 0
        self.t_send: list[int] = []
        self.scheduled = 0  # closed loop: requests scheduled to leave (sent, or waiting for their edge)
        self.gaps = None if gaps_ps is None else gaps_ps.tolist()
        self.back: dict[int, int] = {}  # waits: correction instants by request (0-based)
        self.nominal: list[int] = []  # waits: each request's open-loop instant after the previous one
        self.awaiting = False  # waits: the next request waits for a correction not back yet
        self.edge = 0  # waits: clock edge index of the last send (Waits.next_edge)

    def setup(self) -> None:
        """Schedule the first request (at the generator clock's edge 0)."""
        if self.p.mode == "closed_loop":
            self.scheduled = min(self.p.in_flight, self.p.rounds)
            for _ in range(self.scheduled):
                self.kernel.at(self.clock.edge(0), self._send_next)
        elif self.p.waits is not None:
            self.nominal.append(self.clock.edge(0))
            self.kernel.at(self.clock.edge(0), self._send_waiting)
        else:
            j, t = 0, self.clock.edge(0)
            for _ in range(self.p.share.index if self.p.share else 0):  # to this share's first request
                t, j = self._stream_next(j, t), j + 1
            self.kernel.at(t, self._send_open, j)

    def _stream_next(self, j: int, t: int) -> int:
        """Open loop: the instant the stream sends its request ``j + 1`` (0-based), request ``j`` at ``t``."""
        if self.gaps is None:
            return self.clock.edge((j + 1) * self.p.period_cycles)
        return self.clock.at_or_after(t + self.gaps[j])

    def _send_next(self) -> None:
        self.sent += 1
        self.t_send.append(self.kernel.now)
        payload = (self.payloads(self.sent) if self.payloads is not None
                   else payload_for(self.sent, self.p.frame_bytes, self.salt, self.p.syndrome_bits))
        self.send(self.sent, payload)

    def _send_open(self, j: int) -> None:  # j: the request's index in the stream (0-based)
        self._send_next()
        if self.sent < self.p.rounds:
            t = self.kernel.now
            for _ in range(self.p.share.count if self.p.share else 1):  # the stream's instants up to our next
                t, j = self._stream_next(j, t), j + 1
            self.kernel.at(t, self._send_open, j)

    def _send_waiting(self) -> None:
        self._send_next()
        self._plan_waiting()

    def _plan_waiting(self) -> None:
        """Waits: schedule the next request, or wait for the corrections it depends on."""
        i = self.sent  # the next request, 0-based
        if i >= self.p.rounds:
            return
        w = self.p.waits
        assert w is not None  # only waiting traffic plans this way
        self.awaiting = any(j not in self.back for j in w.needs(i))
        if self.awaiting:
            return
        nominal, self.edge = w.next_edge(self.clock, self.edge, i, self.p.period_cycles, self.back.__getitem__)
        self.nominal.append(self.clock.edge(nominal))
        self.kernel.at(self.clock.edge(self.edge), self._send_waiting)

    def finish(self) -> ProgramStats:
        """Requests sent, replies received and the program's own section (:meth:`stats`); called once,
        at the end of the run."""
        return ProgramStats(self.sent, self.received, self.stats())

    def stats(self) -> dict:
        """The program's statistics (``waits``: :func:`program_stats`), or ``{}``."""
        if self.p.waits is None:
            return {}
        return {**program_stats(np.asarray(self.t_send, np.int64), np.asarray(self.nominal[:self.sent], np.int64)),
                "nominal_period_ps": self.p.period_ps}

    def reply(self, seq: int, payload: bytes | None = None) -> None:
        """A reply is back at the generator (now); ``payload``: its bytes (unused here)."""
        self.received += 1
        if self.p.waits is not None:
            self.back[seq - 1] = self.kernel.now
            if self.awaiting:
                self._plan_waiting()
        if self.p.mode == "closed_loop" and self.scheduled < self.p.rounds:
            # the next request is number scheduled + 1; counted now, since it leaves only at a later
            # clock edge (or after its gap) and another reply may come back before it has left
            gap = self.p.gap_ps if self.gaps is None else self.gaps[self.scheduled - 1]
            self.scheduled += 1
            self.kernel.at(self.clock.at_or_after(self.kernel.now + gap), self._send_next)


def build_control(ctx) -> TrafficGenerator:
    """The generator kind's registered factory: the control side of one flow from its
    :class:`twin.engine.event.NodeContext`: this module's generator, or a listening control
    program's own (``traffic.feedback.generator``: :class:`twin.devices.qblox.ListeningCluster`)."""
    tr = ctx.spec.traffic
    make = TrafficGenerator if tr.feedback is None else tr.feedback.generator
    return make(ctx.kernel, tr, tr.make_clock(ctx.gen_phase_ps), ctx.send, ctx.salt, ctx.workload.payloads,
                gaps_ps=ctx.gaps_ps)


if TYPE_CHECKING:  # mypy checks that these satisfy the node protocol (twin/nodes/protocol.py)
    from twin.nodes.protocol import ControlNode
    _trafficgenerator: type[ControlNode] = TrafficGenerator
