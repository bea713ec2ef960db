"""The producer side of a round in C, shared by the backends whose queues this process maps
(:mod:`hw_bridge.shm`: POSIX shared memory; :mod:`hw_bridge.cuda`: pinned, mapped host memory).

:class:`CProducerEndpoint` implements :meth:`deliver`, :meth:`wait_reply` and :meth:`exchange`
with ``c/hb_producer.c`` through ctypes (``hb_deliver``, ``hb_wait``, ``hb_exchange``), and
:meth:`batch` (``hb_batch``: whole rounds in one C loop, for measurements; a live flow at its
simulated pace is :class:`hw_bridge.paced.PacedFlow`, ``hb_paced``): the C code
writes the request, publishes it last, spins on the reply's ready word and takes both timestamps
(CLOCK_MONOTONIC ns), so no Python runs inside a measured round.
"""
from __future__ import annotations

import abc
import ctypes

import numpy as np

from hw_bridge.endpoint import BridgeSettings, LiveEndpoint, LiveFailure, LiveReply


class CProducerEndpoint(LiveEndpoint):
    """A :class:`LiveEndpoint` whose rounds run in ``hb_producer.c``.

    The subclass's :meth:`open` sets ``_lib`` (:func:`hw_bridge.build.producer_library`), ``_enc``
    (the encoding's number) and ``_req`` / ``_rep`` (addresses of the request and reply queues,
    ``slots * slot_bytes`` each); it implements :meth:`_finish`, which turns the C result into a
    :class:`LiveReply` or a :class:`LiveFailure`. ``_t`` holds the round's two timestamps (ns) and
    ``_nb`` the reply's byte count; ``_stop`` the stop word ``hb_paced`` reads between its waits (set
    from another thread to end a running paced call: :meth:`hw_bridge.paced.PacedFlow.stop`).
    """

    def __init__(self, settings: BridgeSettings):
        super().__init__(settings)
        self._stop = ctypes.c_uint32(0)
        self._t = (ctypes.c_int64 * 2)()
        self._nb = ctypes.c_uint32(0)

    def deliver(self, seq: int, image: bytes) -> None:
        """Land the request slot image in its slot (C, publish last); LiveFailure ``error`` when
        the image is not a whole message."""
        off = self.slot_index(seq) * self.slot_bytes
        self._t[0] = self._lib.hb_now_ns()
        if self._lib.hb_deliver(self._req + off, image, len(image), self._enc) != 0:
            raise LiveFailure("error", seq, f"request image of {len(image)} bytes is not a whole message", self.backend)

    def wait_reply(self, seq: int, timeout_ns: int | None = None) -> LiveReply:
        """Spin (in C, ``hb_wait``) on the reply's ready word; on timeout :meth:`_finish` raises
        :class:`LiveFailure` ``dead`` (the consumer is gone) or ``hung``."""
        off = self.slot_index(seq) * self.slot_bytes
        timeout = self.settings.timeout_ns if timeout_ns is None else timeout_ns
        t1 = ctypes.c_int64(0)
        r = self._lib.hb_wait(self._rep + off, self.slot_bytes, self._enc, seq, self._t[0] + timeout,
                              ctypes.byref(t1), ctypes.byref(self._nb), None)
        self._t[1] = t1.value
        return self._finish(seq, r, off, timeout)

    def exchange(self, seq: int, image: bytes, idle_ns: int = 0) -> LiveReply:
        """Deliver and wait in one C call (``hb_exchange``), not before ``idle_ns`` after the
        previous reply was seen (the C side spins on the clock)."""
        off = self.slot_index(seq) * self.slot_bytes
        r = self._lib.hb_exchange(self._req + off, self._rep + off, self.slot_bytes, self._enc, image, len(image),
                                  self.settings.timeout_ns, self._t, ctypes.byref(self._nb), None,
                                  self.not_before_ns(idle_ns))
        return self._finish(seq, r, off, self.settings.timeout_ns)

    def batch(self, images: np.ndarray, lengths: np.ndarray, expect: np.ndarray, expect_len: np.ndarray,
              first_seq: int = 1, gaps_ns: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Run ``len(images)`` rounds in one C loop (``hb_batch``): images/expect are (n, stride)
        uint8 arrays of request and expected reply slot images for sequence numbers first_seq..;
        the session's next message must be ``first_seq`` (== 1 + rounds so far). ``gaps_ns`` (n,
        int64; None: back to back): round i > 0 waits gaps_ns[i] after round i-1's reply was seen.
        Returns (t0 ns, t1 ns, bad) per round; raises :class:`LiveFailure` when a reply times out."""
        n = len(images)
        if first_seq != self.rounds + 1 or (first_seq - 1) % self.slots:
            raise ValueError("batch must start where the session is, on slot 0")
        t0 = np.zeros(n, np.int64)
        t1 = np.zeros(n, np.int64)
        bad = np.zeros(n, np.uint8)
        images = np.ascontiguousarray(images, np.uint8)
        expect = np.ascontiguousarray(expect, np.uint8)
        lengths = np.ascontiguousarray(lengths, np.uint32)
        expect_len = np.ascontiguousarray(expect_len, np.uint32)
        gaps = None if gaps_ns is None else np.ascontiguousarray(gaps_ns, np.int64)
        if gaps is not None and gaps.shape != (n,):
            raise ValueError(f"gaps_ns must hold one gap per round ({n}), got shape {gaps.shape}")
        done = self._lib.hb_batch(self._req, self._rep, self.slot_bytes, self.slots, self._enc,
                                  images.ctypes.data, lengths.ctypes.data, expect.ctypes.data, expect_len.ctypes.data,
                                  images.shape[1], n, self.settings.timeout_ns, t0.ctypes.data, t1.ctypes.data,
                                  bad.ctypes.data, None if gaps is None else gaps.ctypes.data)
        self._t0.extend(t0[:max(done, 0)].tolist())
        self._t1.extend(t1[:max(done, 0)].tolist())
        self.rounds += max(done, 0)
        if done != n:
            raise self._batch_failure(first_seq + max(done, 0))
        return t0, t1, bad.astype(bool)

    def stamps_address(self) -> int | None:
        """The address of the consumer's stamp block (its own clock per round, read by ``hb_paced``:
        :mod:`hw_bridge.paced`), or None where the consumer writes none."""
        return None

    @abc.abstractmethod
    def _batch_failure(self, seq: int) -> LiveFailure:
        """The failure to raise when a batch's reply to ``seq`` did not come within the timeout."""

    @abc.abstractmethod
    def _finish(self, seq: int, r: int, off: int, timeout: int) -> LiveReply:
        """The round's outcome from ``hb_wait``/``hb_exchange``'s result ``r`` (1: reply complete,
        ``_nb`` bytes at reply offset ``off``; otherwise no reply within ``timeout`` ns)."""
