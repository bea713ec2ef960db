"""A live flow at the loop's own pace: ``hb_paced`` (``c/hb_producer.c``) driven from Python in
calls of many rounds, with no Python between the rounds of one call.

:class:`PacedFlow` holds one flow's per-round plan and record. The plan is ``at_ps`` (int64 ps of
simulated time, one per round): for a closed loop the time from the device's reply to round
``i - 1`` to round ``i``'s request in its memory (round 0: at once); for an open loop each request's
instant relative to round 0's. :meth:`PacedFlow.step` runs the next rounds (at most ``chunk``, at
most ``call_s`` of wall time, so the caller can look for a stop request between calls) on the
endpoint's own queues. The record, per round (ns, CLOCK_MONOTONIC): ``planned``, ``sent`` (just
before the request's first byte was written: ``sent - planned`` is the round's lateness),
``seen`` (its reply seen complete), and where the consumer stamps its rounds (the shm consumer,
:class:`hw_bridge.shm.ShmEndpoint` opened with ``stamps=True``) ``dev_in`` / ``dev_out`` (the
consumer's own clock: request seen landed, reply published; -1 when missing); ``bad`` (the reply's
bytes differ from the expected ones).

Pacing: a wait longer than ``spin_ns`` sleeps (``clock_nanosleep``, absolute) until ``spin_ns``
before the instant, then spins on the clock; a shorter one spins. A round sent more than
``late_ns`` after its instant is late: counted (``late_rounds``) and, in the record, named by its
lateness.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from hw_bridge.endpoint import LiveFailure

# the state words of hb_paced (hb_producer.c's enum, in order)
_WORDS = ("n", "done", "closed", "epoch", "last_seen", "timeout", "spin", "late", "late_rounds", "chunk", "status",
          "slot_bytes", "slots", "encoding", "stride", "until", "sent", "avail", "window")
W = {k: i for i, k in enumerate(_WORDS)}
OK, TIMEOUT, STOPPED = 0, 1, 2


@dataclass(frozen=True)
class Pacing:
    """How a paced flow keeps its instants: ``spin_ns`` (busy-wait below, sleep above), ``late_ns``
    (a round sent later than this after its instant is counted late), ``chunk`` (rounds per C call
    at most) and ``call_s`` (wall time per C call at most, s)."""

    spin_ns: int = 1_000_000
    late_ns: int = 1_000
    chunk: int = 65_536
    call_s: float = 0.05


FOREVER = (1 << 63) - 1  # st[W["until"]] of a call with no wall-time bound
STAMPS = 160  # the consumer's stamp ring (hb_shm_consumer.c HB_STAMPS): at most this many in flight


class PacedFlow:
    """One live flow of ``n`` rounds paced by ``at_ps`` on ``endpoint`` (a
    :class:`hw_bridge.producer.CProducerEndpoint`, opened, at its first round); see the module
    docstring. ``closed``: closed loop (else open). ``window``: an open loop's requests in flight at
    most (1: each request waits for the reply to the one before; more: a request is written at its
    instant while fewer than ``window`` await their replies, as a control system streams into the
    ring, at most the endpoint's slots). Raises ValueError for a plan that is not one non-negative
    int64 per round (open loop: non-decreasing from 0), or a window that is not 1 for a closed loop,
    or above the slots or :data:`STAMPS`."""

    def __init__(self, endpoint, at_ps: np.ndarray, closed: bool, pacing: Pacing = Pacing(), window: int = 1):
        at = np.ascontiguousarray(at_ps, np.int64)
        n = len(at)
        if at.ndim != 1 or (n and at.min() < 0):
            raise ValueError("at_ps must be one non-negative instant (ps) per round")
        if not closed and n and (at[0] != 0 or np.any(np.diff(at) < 0)):
            raise ValueError("an open loop's at_ps start at 0 and never go back")
        if endpoint.rounds:
            raise ValueError("a paced flow starts on a fresh session (round 1, slot 0)")
        if window < 1 or (closed and window > 1) or window > min(endpoint.slots, STAMPS):
            raise ValueError(f"window {window}: 1 for a closed loop; for an open loop 1 to "
                             f"min(slots {endpoint.slots}, {STAMPS})")
        self.window = window
        self.ep, self.n, self.at_ps, self.closed, self.pacing = endpoint, n, at, closed, pacing
        self.st = np.zeros(len(_WORDS), np.int64)
        st = self.st
        st[W["n"]], st[W["closed"]], st[W["timeout"]] = n, int(closed), endpoint.settings.timeout_ns
        st[W["spin"]], st[W["late"]], st[W["chunk"]] = pacing.spin_ns, pacing.late_ns, pacing.chunk
        st[W["slot_bytes"]], st[W["slots"]], st[W["encoding"]] = endpoint.slot_bytes, endpoint.slots, endpoint._enc
        st[W["window"]] = window
        self.planned, self.sent, self.seen = (np.zeros(n, np.int64) for _ in range(3))
        self.dev_in, self.dev_out = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        self.bad = np.zeros(n, np.uint8)
        self._stamps = endpoint.stamps_address()

    @property
    def done(self) -> int:
        """Rounds completed."""
        return int(self.st[W["done"]])

    @property
    def sent_rounds(self) -> int:
        """Requests written (``done`` plus those in flight)."""
        return int(self.st[W["sent"]]) if self.window > 1 else self.done

    @property
    def late_rounds(self) -> int:
        """Rounds sent more than ``pacing.late_ns`` after their instant."""
        return int(self.st[W["late_rounds"]])

    def step(self, images: np.ndarray, lengths: np.ndarray, expect: np.ndarray, expect_len: np.ndarray,
             replies: np.ndarray | None = None, whole: bool = False) -> int:
        """Run rounds ``done ..`` (at most ``len(images)``, ``pacing.chunk`` and ``pacing.call_s`` of
        wall time; ``whole``: all ``len(images)`` in this one call, with no chunk or wall-time bound,
        ended early only by a timeout or :meth:`stop` from another thread): ``images`` / ``expect``
        (m, stride) uint8 request and expected reply slot images
        of those rounds (sequence numbers done + 1 ..), ``lengths`` / ``expect_len`` (m,) their byte
        counts. With a window, requests may still be in flight when it returns (``sent`` > ``done``):
        the next call is given the images from ``done`` on as always (those in flight are not written
        again) and goes on with them; sends stop at the last image given. ``replies`` (None, or a
        C-contiguous (m, stride) uint8 array): row k gets the reply slot's bytes of round done + k as
        the producer saw them (the device's own answer). Returns
        the rounds this call completed (a stop, :meth:`stop`, ends it at a round boundary: fewer);
        raises :class:`LiveFailure` (``dead`` or ``hung``: the
        endpoint's) when a reply did not come within the timeout, ValueError for a ``replies`` of
        another shape."""
        ep, st, lib = self.ep, self.st, self.ep._lib
        images = np.ascontiguousarray(images, np.uint8)
        expect = np.ascontiguousarray(expect, np.uint8)
        lengths = np.ascontiguousarray(lengths, np.uint32)
        expect_len = np.ascontiguousarray(expect_len, np.uint32)
        if replies is not None and (replies.dtype != np.uint8 or replies.shape[1:] != images.shape[1:]
                                    or len(replies) < min(len(images), self.pacing.chunk)
                                    or not replies.flags["C_CONTIGUOUS"]):
            raise ValueError(f"replies must be C-contiguous uint8 ({len(images)}, {images.shape[1]}), "
                             f"not {replies.dtype} {replies.shape}")
        st[W["stride"]] = images.shape[1]
        st[W["chunk"]] = len(images) if whole else min(self.pacing.chunk, len(images))
        st[W["avail"]] = len(images)
        st[W["until"]] = FOREVER if whole else lib.hb_now_ns() + int(self.pacing.call_s * 1e9)
        before = self.done
        stop = getattr(ep, "_stop", None)
        r = lib.hb_paced(ep._req, ep._rep, self._stamps, st.ctypes.data, images.ctypes.data, lengths.ctypes.data,
                         expect.ctypes.data, expect_len.ctypes.data, self.at_ps.ctypes.data, self.planned.ctypes.data,
                         self.sent.ctypes.data, self.seen.ctypes.data, self.dev_in.ctypes.data,
                         self.dev_out.ctypes.data, self.bad.ctypes.data,
                         None if stop is None else ctypes.addressof(stop),
                         None if replies is None else replies.ctypes.data)
        done = self.done
        ep._t0.extend(self.sent[before:done].tolist())
        ep._t1.extend(self.seen[before:done].tolist())
        ep.rounds = done
        if r < 0:
            raise LiveFailure("error", done + 1, "bad arguments to the paced loop (hb_paced)", ep.backend)
        if st[W["status"]] == TIMEOUT:
            raise ep._batch_failure(done + 1)
        return done - before

    def stop(self) -> bool:
        """Ask a running :meth:`step` (on another thread) to end at the next round boundary: sets the
        endpoint's stop word, which ``hb_paced`` reads between rounds (a reply already asked for is
        still awaited, up to the timeout: a hung consumer is still named); the step returns. Returns
        False where the endpoint has no stop word (the call then runs to its end or its timeout)."""
        word = getattr(self.ep, "_stop", None)
        if word is None:
            return False
        word.value = 1
        return True

    def clear_stop(self) -> None:
        """Clear the endpoint's stop word (after a stopped step, before the session closes)."""
        word = getattr(self.ep, "_stop", None)
        if word is not None:
            word.value = 0

    def lateness_ns(self) -> np.ndarray:
        """Per completed round: sent - planned (ns)."""
        m = self.done
        return self.sent[:m] - self.planned[:m]

    def device_gaps_ns(self) -> tuple[np.ndarray, np.ndarray]:
        """``(seen, simulated)``: per completed round after the first, the gap the device saw on
        its own clock and the simulated gap (ns). Closed loop: its reply to the round before ->
        this request seen landed, against ``at_ps``; open loop: the previous request seen landed ->
        this one, against the difference of ``at_ps``. Rounds without both stamps are left out."""
        m = self.done
        if m < 2:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        din, dout = self.dev_in[:m], self.dev_out[:m]
        prev = dout[:-1] if self.closed else din[:-1]
        at = (self.at_ps[:m] + 500) // 1000  # the ns hb_paced planned with (rounded to the nearest)
        sim = at[1:] if self.closed else np.diff(at)
        ok = (din[1:] >= 0) & (prev >= 0)
        return (din[1:] - prev)[ok], sim[ok]
