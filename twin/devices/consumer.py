"""A consumer that polls its request queue and answers through the reply queue."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from twin.exchange.contract import STATUS
from twin.exchange.encoding import Encoding, slot_offset
from twin.kernel import Kernel, MemoryRegion, Poller, PostedWritePath


@dataclass(frozen=True)
class ConsumerParams:
    """Timing of one consumer (all integer picoseconds).

    Parameters
    ----------
    kind: "cpu" | "gpu" | "fpga".
    poll_period_ps: time between two polls of the request queue.
    poll_phase_ps: the first poll instant (0 <= phase < period); a run draws it from its seed
        unless it is given.
    poll_cost_ps: from a poll's instant to having its answer (a load of the request slot).
    read_ps: classic encoding only: the dependent read of the payload after the publish word.
    piece_check_ps: per-piece encoding only: checking one 16-byte piece's sequence number.
    service_ps: the function body (the built-in echo) from having the request to issuing the
        reply's first write.
    fence_ps: classic encoding only: the release fence between reply data and ready word
        (0 where the device relies on posted-write order, as the V80 does).
    encoding: the encoding this consumer uses for the echo ("classic" | "per_piece").
    """

    kind: str
    poll_period_ps: int
    poll_cost_ps: int
    service_ps: int
    encoding: str
    read_ps: int = 0
    piece_check_ps: int = 0
    fence_ps: int = 0
    poll_phase_ps: int | None = None

    def __post_init__(self):
        if self.kind not in ("cpu", "gpu", "fpga"):
            raise ValueError(f"consumer kind must be cpu, gpu or fpga, got {self.kind!r}")
        if self.poll_period_ps <= 0:
            raise ValueError(f"poll_period_ps must be > 0, got {self.poll_period_ps}")
        for key in ("poll_cost_ps", "service_ps", "read_ps", "piece_check_ps", "fence_ps"):
            if getattr(self, key) < 0:
                raise ValueError(f"{key} must be >= 0, got {getattr(self, key)}")
        if self.poll_phase_ps is not None and not 0 <= self.poll_phase_ps < self.poll_period_ps:
            raise ValueError(f"poll_phase_ps must be in [0, poll_period_ps), got {self.poll_phase_ps}")

    def pre_service_ps(self, enc: Encoding, nbytes: int) -> int:
        """Time from a poll's answer to the start of the function body for one request."""
        if enc.per_piece:
            return enc.pieces(nbytes) * self.piece_check_ps
        return self.read_ps

    def with_phase(self, phase_ps: int) -> "ConsumerParams":
        """The same parameters with the poll phase set."""
        return replace(self, poll_phase_ps=int(phase_ps))


class PollingConsumer:
    """CPU core, GPU persistent kernel or FPGA logic serving one request queue.

    Ports: ``requests`` (its own :class:`MemoryRegion`: the request queue, ``slots`` slots of
    ``slot_bytes``), ``reply`` (a :class:`PostedWritePath` into the producer's reply queue).

    Behaviour per request: a poll sees the slot complete (publish word, or every piece); it
    reads the payload, runs the function, writes the reply (per-piece: one burst; classic: data,
    release fence, ready word last), then polls the next slot. The echo returns the request
    payload; other functions are looked up by function id by the runtime library.

    Statistics: ``served``, ``poller.polls``, ``poller.hits``.
    """

    def __init__(self, kernel: Kernel, name: str, params: ConsumerParams, encoding: Encoding,
                 requests: MemoryRegion, reply: PostedWritePath, slots: int, slot_bytes: int,
                 frame_bytes: int, functions: Callable[[int], Callable[[bytes], bytes] | None] | None = None,
                 tamper: Callable[[int, list], list] | None = None, stalls: tuple[tuple[int, int], ...] = ()):
        self.kernel = kernel
        self.name = name
        self.p = params
        self.enc = encoding
        self.requests = requests
        self.reply = reply
        self.slots = slots
        self.slot_bytes = slot_bytes
        self.frame_bytes = frame_bytes
        self.functions = functions or (lambda fid: (lambda b: bytes(b)) if fid == 0 else None)
        phase = params.poll_phase_ps or 0
        self.poller = Poller(kernel, requests, params.poll_period_ps, phase, params.poll_cost_ps, name=f"{name}.poll",
                             blackouts=stalls)
        self.tamper = tamper
        self.next_seq = 1
        self.served = 0

    def start(self) -> None:
        """Begin polling for the first request."""
        self._arm()

    def _arm(self) -> None:
        seq = self.next_seq
        base = slot_offset(seq, self.slots, self.slot_bytes)
        self.poller.arm(lambda: self.enc.ready(self.requests.buf, base, seq, self.slot_bytes),
                        lambda t: self._seen(seq, base))

    def answer(self, seq: int, base: int) -> list[tuple[int, bytes]]:
        """The reply's posted writes (offsets in the reply slot, in issue order) for the request
        in the slot at ``base``: the function named by its header runs on its payload; an unknown
        function id gets an empty reply with status ``unknown_function``, a function that raises
        ValueError on its payload an empty reply with status ``function_failed``, a reply too long
        for its slot an empty reply with status ``bad_length``. The ``code`` model
        overrides this with the C runtime library."""
        h = self.enc.header(self.requests.buf, base)
        fn = self.functions(h.function)
        if fn is None:
            return self.enc.writes(seq, b"", function=h.function, flags=STATUS["unknown_function"])
        try:
            reply = fn(self.enc.payload(self.requests.buf, base))
        except ValueError:  # the function refused its input (e.g. a payload shorter than a syndrome)
            return self.enc.writes(seq, b"", function=h.function, flags=STATUS["function_failed"])
        if self.enc.slot_bytes(len(reply)) > self.slot_bytes:  # would spill into the next slot
            return self.enc.writes(seq, b"", function=h.function, flags=STATUS["bad_length"])
        return self.enc.writes(seq, reply, function=h.function)

    def _seen(self, seq: int, base: int) -> None:
        t = self.kernel.now + self.p.pre_service_ps(self.enc, self.frame_bytes) + self.p.service_ps
        writes = self.answer(seq, base)
        if self.tamper:
            writes = self.tamper(seq, writes)
        k = self.kernel
        reply_base = base  # the reply uses its request's slot index; both queues share the geometry
        if self.enc.per_piece:
            k.at(t, self._post, reply_base, writes)
            t_free = t
        else:
            (o_data, data), (o_word, word) = writes
            k.at(t, self._post, reply_base, [(o_data, data)])
            t_free = t + self.p.fence_ps
            k.at(t_free, self._post, reply_base, [(o_word, word)])
        self.next_seq = seq + 1
        self.served += 1
        k.at(t_free, self._arm)

    def _post(self, base: int, writes: list[tuple[int, bytes]]) -> None:
        for off, data in writes:
            self.reply.write(base + off, data)
