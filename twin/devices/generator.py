"""The control-side traffic generator: closed loop, or open loop at a fixed period."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

import numpy as np

from twin.kernel import Clock, Kernel
from twin.kernel.sim import stream_rng

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
class GateWaits:
    """An open-loop program whose gates wait for corrections (a stim circuit's classically
    controlled gates, :mod:`twin.qec.feedback`): the program counts its time in generator clock
    edges. Request ``i`` (0-based) normally leaves ``period_cycles`` edges after request ``i - 1``;
    when ``waits[i % len(waits)]`` names offsets ``k`` (>= 1), a gate ``slack_cycles`` edges after
    request ``i - 1`` needs the corrections of requests ``i - k``: it is applied at the first edge at
    or after both that instant and the last of those corrections back at the generator, and request
    ``i`` leaves ``period_cycles - slack_cycles`` edges after it. The program idles meanwhile (the
    stall: the applied edge minus the scheduled one). Raises ValueError for a slack outside
    ``[0, period]`` cycles or an offset below 1."""

    waits: tuple[tuple[int, ...], ...]
    slack_cycles: int

    def __post_init__(self):
        if not self.waits or any(k < 1 for w in self.waits for k in w):
            raise ValueError(f"gate waits {self.waits}: one entry per request of a shot, offsets >= 1")
        if self.slack_cycles < 0:
            raise ValueError(f"gate-wait slack {self.slack_cycles} cycles: must be >= 0")

    def needs(self, i: int) -> tuple[int, ...]:
        """The requests (0-based) whose corrections request ``i``'s gate waits for (none before 0)."""
        return tuple(i - k for k in self.waits[i % len(self.waits)] if i - k >= 0)

    def next_edge(self, clock: Clock, prev_edge: int, i: int, period_cycles: int, back) -> int:
        """The edge index of request ``i``'s send, request ``i - 1`` sent at edge ``prev_edge``;
        ``back(j)``: request ``j``'s correction back at the generator (ps), known for every request
        :meth:`needs` names. One computation for the event and the direct engines."""
        deps = self.needs(i)
        if not deps:
            return prev_edge + period_cycles
        sched = prev_edge + self.slack_cycles
        applied = max(sched, clock.index_at_or_after(max(back(j) for j in deps)))
        return applied + period_cycles - self.slack_cycles


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
    gate_waits: open loop at ``period_ps`` only: the program waits for corrections (:class:`GateWaits`);
        None (default): every request one period after the last.
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
    gate_waits: GateWaits | None = None

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
        if self.mode == "open_loop" and self.gaps is None and (self.period_ps <= 0 or self.period_ps % self.clock_ps):
            raise ValueError(f"open-loop period_ps must be a positive multiple of clock_ps ({self.clock_ps}), "
                             f"got {self.period_ps}")
        if self.gate_waits is not None and (self.mode != "open_loop" or self.gaps is not None
                                            or self.share is not None
                                            or self.gate_waits.slack_cycles > self.period_cycles):
            raise ValueError("gate waits are open-loop traffic at a period (no gaps, no share), its slack at most one "
                             "period")

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


class TrafficGenerator:
    """Issues requests and takes replies (the control system, or the card's own generator).

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
        self.gate_back: dict[int, int] = {}  # gate waits: request (0-based) -> its correction back (ps)
        self.gate_waiting = None        # gate waits: (request, edge of the one before) waiting for corrections
        self.gate_edge = 0              # gate waits: the program's edge of the last request sent

    def start(self) -> None:
        """Schedule the first request (at the generator clock's edge 0)."""
        if self.p.mode == "closed_loop":
            self.scheduled = min(self.p.in_flight, self.p.rounds)
            for _ in range(self.scheduled):
                self.kernel.at(self.clock.edge(0), self._send_next)
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
        if self.p.gate_waits is not None:
            if self.sent < self.p.rounds:
                self.gate_waiting = (j + 1, self.gate_edge)
                self._gate_next()
            return
        if self.sent < self.p.rounds:
            t = self.kernel.now
            for _ in range(self.p.share.count if self.p.share else 1):  # the stream's instants up to our next
                t, j = self._stream_next(j, t), j + 1
            self.kernel.at(t, self._send_open, j)

    def _gate_next(self) -> None:
        """Schedule the waiting request once every correction its gate needs is back."""
        i, prev = self.gate_waiting
        if any(j not in self.gate_back for j in self.p.gate_waits.needs(i)):
            return
        self.gate_waiting = None
        self.gate_edge = self.p.gate_waits.next_edge(self.clock, prev, i, self.p.period_cycles,
                                                     self.gate_back.__getitem__)
        self.kernel.at(self.clock.edge(self.gate_edge), self._send_open, i)

    def reply(self, seq: int) -> None:
        """A reply is back at the generator (now)."""
        self.received += 1
        if self.p.gate_waits is not None:
            self.gate_back[seq - 1] = self.kernel.now
            if self.gate_waiting is not None:
                self._gate_next()
        if self.p.mode == "closed_loop" and self.scheduled < self.p.rounds:
            # the next request is number scheduled + 1; counted now, since it leaves only at a later
            # clock edge (or after its gap) and another reply may come back before it has left
            gap = self.p.gap_ps if self.gaps is None else self.gaps[self.scheduled - 1]
            self.scheduled += 1
            self.kernel.at(self.clock.at_or_after(self.kernel.now + gap), self._send_next)
