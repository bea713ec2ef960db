"""The bridge contract's types: what a live endpoint implements so that a real device can stand
where a simulated consumer stood. The backends (:mod:`hw_bridge.shm`, :mod:`hw_bridge.cuda`,
:mod:`hw_bridge.udp`) build on this module; :mod:`hw_bridge.contract` (above them) re-exports these
names and opens a backend by name (:func:`hw_bridge.contract.open_endpoint`).

A session (:meth:`LiveEndpoint.open`) allocates and maps the request and reply queues in the
memory the backend needs (POSIX shared memory, pinned host memory the GPU maps, or a UDP socket
to a board), installs the dispatch table (every function of :mod:`twin.runtime.functions` with a
C implementation; id 0 is the runtime's built-in echo) and starts the consumer. Each round the
twin hands the endpoint the exact bytes its link card landed in the consumer's request slot
(:meth:`deliver`), then waits for the reply slot's bytes (:meth:`wait_reply`) within a timeout;
the endpoint records when it wrote the first request byte and when it saw the reply complete
(CLOCK_MONOTONIC nanoseconds, :meth:`timestamps`). :meth:`close` stops the consumer and frees
everything; it is safe to call twice.

Failures are one exception, :class:`LiveFailure`, with the round (the request's sequence
number), what happened (``dead``: the consumer is gone; ``hung``: no reply within the timeout;
``wrong``: a reply that is not the contract's answer to the request; ``error``: the session
could not start) and, once the twin has it, the rounds completed so far (``partial``).
"""
from __future__ import annotations

import abc
import time
from dataclasses import dataclass
from typing import Self

import numpy as np

#: Failure kinds of :class:`LiveFailure`.
FAILURE_KINDS = ("dead", "hung", "wrong", "error")


class LiveFailure(RuntimeError):
    """A live endpoint failed. ``kind`` one of :data:`FAILURE_KINDS`, ``round`` the sequence number
    of the request it failed on (0 before the first), ``detail`` one line. ``partial`` is set by
    the event model to the :class:`twin.engine.spec.LoopResult` of the rounds completed before it."""

    keeps_partial = True  # twin.engine.event attaches the rounds so far

    def __init__(self, kind: str, round: int, detail: str, backend: str = ""):
        if kind not in FAILURE_KINDS:
            raise ValueError(f"failure kind must be one of {FAILURE_KINDS}, got {kind!r}")
        self.kind = kind
        self.round = round
        self.detail = detail
        self.backend = backend
        self.partial = None
        where = f"round {round}" if round else "session start"
        super().__init__(f"live {backend or 'endpoint'} {kind} at {where}: {detail}")

    def __reduce__(self):
        """Pickled with its own arguments (and ``partial``), so a worker process's failure reaches
        the parent whole (Python's default calls ``LiveFailure(message)``)."""
        return type(self), (self.kind, self.round, self.detail, self.backend), dict(self.__dict__)


@dataclass(frozen=True)
class LiveReply:
    """One round's answer: ``seq``, the reply slot's bytes ``data`` (header + payload classic,
    whole pieces per-piece), ``t_deliver_ns`` (just before the request's first byte was written)
    and ``t_reply_ns`` (the reply seen complete), both CLOCK_MONOTONIC ns."""

    seq: int
    data: bytes
    t_deliver_ns: int
    t_reply_ns: int

    @property
    def service_ns(self) -> int:
        """The live device's time for this round: request written -> reply seen, in ns."""
        return self.t_reply_ns - self.t_deliver_ns


@dataclass(frozen=True)
class BridgeSettings:
    """A resolved ``bridge:`` block (see :class:`twin.scenario.Bridge`).

    backend: "shm" | "cuda" | "udp". timeout_ns: the longest wait for one reply (ns).
    cpu / producer_cpu: cores to pin the consumer and the producer to (shm; None: no pinning).
    host, port: the UDP agent's address. fault: consumer fault injection for tests, ``(kind,
    round)`` with kind die | hang | wrong (shm only), or None. device: GPU ordinal (cuda).
    pace: the paced loop (:mod:`hw_bridge.paced`: True, the shm default where the flow allows it,
    ``twin.engine.paced``), the round-by-round path (False) or the default (None). late_ns: a paced
    round sent later than this after its instant is counted late; spin_ns: a paced wait shorter
    than this is spun, a longer one slept (clock_nanosleep) until spin_ns before the instant.
    """

    backend: str
    timeout_ns: int = 1_000_000_000
    cpu: int | None = None
    producer_cpu: int | None = None
    host: str = "127.0.0.1"
    port: int = 0
    fault: tuple[str, int] | None = None
    device: int = 0
    pace: bool | None = None
    late_ns: int = 1_000
    spin_ns: int = 1_000_000


class LiveEndpoint(abc.ABC):
    """A live consumer behind the bridge contract (see the module docstring).

    Subclasses implement :meth:`open`, :meth:`deliver`, :meth:`wait_reply`, :meth:`close`
    and :meth:`describe`; :meth:`exchange` may be overridden to do both halves of a round in one
    native call. Statistics: ``rounds`` completed, ``timestamps()``.
    """

    backend = "?"

    def __init__(self, settings: BridgeSettings):
        self.settings = settings
        self.slot_bytes = 0
        self.slots = 0
        self.encoding = "classic"
        self._t0: list[int] = []
        self._t1: list[int] = []
        self.rounds = 0

    # -- session --------------------------------------------------------------------------
    @abc.abstractmethod
    def open(self, slot_bytes: int, slots: int, encoding: str) -> None:
        """Allocate and map both queues (``slots`` slots of ``slot_bytes``, ``encoding``), install
        the function table, start the consumer and wait until it serves. Raises
        :class:`LiveFailure` (kind ``error``) when it cannot."""

    @abc.abstractmethod
    def close(self) -> dict:
        """Stop the consumer, free the queues; returns the backend's counters. Idempotent."""

    @abc.abstractmethod
    def describe(self) -> str:
        """One line: the backend, the device and where the consumer runs."""

    # -- rounds ---------------------------------------------------------------------------
    @abc.abstractmethod
    def deliver(self, seq: int, image: bytes) -> None:
        """Write request ``seq``'s slot bytes (the twin's exact frame) into its slot, publishing
        it last as the contract says."""

    @abc.abstractmethod
    def wait_reply(self, seq: int, timeout_ns: int | None = None) -> LiveReply:
        """Wait for request ``seq``'s reply; raises :class:`LiveFailure` (``dead`` or ``hung``)
        when it does not come within ``timeout_ns`` (default: the settings')."""

    def exchange(self, seq: int, image: bytes, idle_ns: int = 0) -> LiveReply:
        """One round: :meth:`deliver` then :meth:`wait_reply`, the request not written before
        ``idle_ns`` after the previous round's reply was seen (wall clock, CLOCK_MONOTONIC; the
        consumer idles that long: a duty cycle)."""
        until = self.not_before_ns(idle_ns)
        while time.monotonic_ns() < until:
            pass
        self.deliver(seq, image)
        return self.wait_reply(seq)

    def not_before_ns(self, idle_ns: int) -> int:
        """The CLOCK_MONOTONIC instant (ns) ``idle_ns`` after the previous reply was seen; 0 when
        there is none to wait for."""
        return self._t1[-1] + idle_ns if idle_ns > 0 and self._t1 else 0

    def slot_index(self, seq: int) -> int:
        """The slot message ``seq`` uses (messages take slots in order from 0)."""
        return (seq - 1) % self.slots

    def _record(self, t0: int, t1: int) -> None:
        self._t0.append(t0)
        self._t1.append(t1)
        self.rounds += 1

    def timestamps(self) -> tuple[np.ndarray, np.ndarray]:
        """Per completed round, int64 ns: (request's first byte written, reply seen complete)."""
        return np.asarray(self._t0, np.int64), np.asarray(self._t1, np.int64)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
