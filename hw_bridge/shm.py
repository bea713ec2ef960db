"""Backend ``shm``: a consumer process running the device runtime library over POSIX shared memory.

The session creates one shared-memory object (``/dev/shm/twin-hb-<pid>-<n>``): a 4096-byte control
block, the request queue and the reply queue (each ``slots * slot_bytes``, page aligned). The
consumer is a separate process (``c/hb_shm_consumer.c``): a loop on ``qrt_dispatch_one`` with the
C functions of ``twin/runtime/c/qrt_functions.c`` in its dispatch table, as a CPU core serves the
exchange layer. The producer side of each round is C too (``c/hb_producer.c`` through ctypes,
:class:`hw_bridge.producer.CProducerEndpoint`:
``hb_exchange`` writes the request, publishes it last, spins on the reply's ready word and takes
both timestamps), so no Python runs inside a measured round.

Pinning: ``settings.cpu`` pins the consumer (``sched_setaffinity`` in the child),
``settings.producer_cpu`` this process while the session is open (restored by :meth:`close`). A core
outside ``os.sched_getaffinity(0)``, or a pin that fails, stops the session start (LiveFailure
``error``, naming the key); nothing runs unpinned while the results say pinned.

Statistics (``close()``): ``served`` by the consumer, ``state``, ``exit`` (its exit status).
"""
from __future__ import annotations

import itertools
import os
import signal
import subprocess
import threading
import time
from multiprocessing import shared_memory

import numpy as np

from hw_bridge.build import consumer_program, producer_library
from hw_bridge.endpoint import BridgeSettings, LiveFailure, LiveReply
from hw_bridge.producer import CProducerEndpoint
from twin.runtime.native import ENCODINGS

CONTROL_BYTES = 4096
STAMP_OFFSET = 64  # the consumer's per-round stamps in the control block (hb_shm_consumer.c)
MAGIC = 0x51425348
_STATE = {0: "starting", 1: "serving", 2: "stopped", 3: "failed"}
_counter = itertools.count()


def _page(n: int) -> int:
    return -(-n // 4096) * 4096


def _cores(cores: set[int]) -> str:
    return ", ".join(str(c) for c in sorted(cores))


def check_cores(settings: BridgeSettings) -> None:
    """Raise :class:`LiveFailure` (kind ``error``, one line naming ``bridge.cpu`` or
    ``bridge.producer_cpu`` and its value) when a core to pin to is not one this process may run
    on (``os.sched_getaffinity(0)``): a pin there would fail, and the consumer would run unpinned."""
    if not hasattr(os, "sched_getaffinity"):
        return
    allowed = os.sched_getaffinity(0)
    for key, core in (("cpu", settings.cpu), ("producer_cpu", settings.producer_cpu)):
        if core is not None and core not in allowed:
            raise LiveFailure("error", 0, f"bridge.{key}: {core}: not a core this process may run on "
                              f"(allowed: {_cores(allowed)})", settings.backend)


class ShmEndpoint(CProducerEndpoint):
    """A live CPU consumer in its own process over POSIX shared memory (see module docstring)."""

    backend = "shm"

    def __init__(self, settings: BridgeSettings):
        super().__init__(settings)
        self._shm: shared_memory.SharedMemory | None = None
        self._mem: np.ndarray | None = None
        self.proc: subprocess.Popen | None = None
        self._affinity: set[int] | None = None
        self._stamped = False
        self.freezes = 0

    # -- session --------------------------------------------------------------------------
    def open(self, slot_bytes: int, slots: int, encoding: str, stamps: bool = False) -> None:
        """Create the shared memory, start and (optionally) pin the consumer, wait until it serves
        (at most 10 s). ``stamps``: the consumer stamps every round with its own clock in the control
        block (``c/hb_shm_consumer.c``; :meth:`stamps_address`). Raises :class:`LiveFailure` kind
        ``error``."""
        self.slot_bytes, self.slots, self.encoding = slot_bytes, slots, encoding
        check_cores(self.settings)
        self._enc = ENCODINGS[encoding]
        self._lib = producer_library()
        prog = consumer_program()
        self._qbytes = _page(slot_bytes * slots)
        name = f"twin-hb-{os.getpid()}-{next(_counter)}"
        self._shm = shared_memory.SharedMemory(name=name, create=True, size=CONTROL_BYTES + 2 * self._qbytes)
        self._mem = np.frombuffer(self._shm.buf, np.uint8)
        self._mem[:] = 0
        self._ctl = self._mem[:CONTROL_BYTES].view(np.uint32)
        self._ctl[0] = MAGIC
        self._ctl[7] = int(stamps)  # read by the consumer once, at its start
        self._stamped = stamps
        self._base = self._mem.ctypes.data
        self._req = self._base + CONTROL_BYTES
        self._rep = self._req + self._qbytes
        args = [str(prog), "/" + name, str(slot_bytes), str(slots), str(self._enc),
                str(-1 if self.settings.cpu is None else self.settings.cpu)]
        if self.settings.fault:
            args += ["FAULT", self.settings.fault[0], str(self.settings.fault[1])]
        # its own process group: a Ctrl-C at the terminal reaches the twin (which stops at a round
        # boundary and closes the session), not the consumer in the middle of a round
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, process_group=0)
        # the producer is pinned after the consumer starts: a child inherits its parent's cores, and a
        # consumer without its own pin (cpu: null) would take turns with the producer on its one core
        if self.settings.producer_cpu is not None and hasattr(os, "sched_setaffinity"):
            self._affinity = os.sched_getaffinity(0)
            try:
                os.sched_setaffinity(0, {self.settings.producer_cpu})
            except OSError as e:
                self._affinity = None
                self.close()
                raise LiveFailure("error", 0, f"bridge.producer_cpu: {self.settings.producer_cpu}: cannot pin the "
                                  f"producer there ({e.strerror})", "shm") from None
        deadline = time.monotonic() + 10
        while self._ctl[1] == 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read().decode(errors="replace").strip() if self.proc.poll() is not None else ""
                self.close()
                raise LiveFailure("error", 0, f"the consumer did not start ({err or 'no answer in 10 s'})", "shm")
            time.sleep(0.001)
        if self._ctl[1] != 1:
            code = int(self._ctl[3].view(np.int32))
            self.close()
            raise LiveFailure("error", 0, f"the consumer's runtime library refused the queues (error {code})", "shm")

    def close(self) -> dict:
        """Ask the consumer to stop (kill it after 2 s), unlink the shared memory, restore pinning."""
        stats = {"served": 0, "state": "closed", "exit": None, "freezes": self.freezes}
        if self._mem is not None:
            stats["served"] = int(self._mem[16:24].view(np.uint64)[0])
            stats["state"] = _STATE.get(int(self._ctl[1]), "?")
            self._ctl[2] = 1
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.kill(self.proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                try:
                    self.proc.wait(2)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            stats["exit"] = self.proc.returncode
            if self.proc.stderr:
                self.proc.stderr.close()
            self.proc = None
        if self._shm is not None:
            self._mem = self._ctl = None
            try:
                self._shm.close()
            except BufferError:
                pass
            try:
                self._shm.unlink()
            except FileNotFoundError:
                pass
            self._shm = None
        if self._affinity is not None:
            os.sched_setaffinity(0, self._affinity)
            self._affinity = None
        return stats

    def describe(self) -> str:
        """Backend, consumer pid and cores."""
        pid = self.proc.pid if self.proc else None
        where = lambda c: "unpinned" if c is None else f"on core {c}"  # noqa: E731
        return (f"shm: consumer process {pid} (qrt.h, qrt_dispatch_one) {where(self.settings.cpu)}, producer "
                f"{where(self.settings.producer_cpu)}; {os.cpu_count()} cores online")

    @property
    def consumer_pid(self) -> int | None:
        """The consumer process's id (None when not running)."""
        return self.proc.pid if self.proc else None

    # -- rounds ---------------------------------------------------------------------------
    def _finish(self, seq: int, r: int, off: int, timeout: int) -> LiveReply:
        if r == 1:
            n = self._nb.value
            if n > self.slot_bytes:
                raise LiveFailure("wrong", seq, f"reply header claims {n} bytes, the slot holds {self.slot_bytes}",
                                  "shm")
            data = self._mem[CONTROL_BYTES + self._qbytes + off:CONTROL_BYTES + self._qbytes + off + n].tobytes()
            self._record(self._t[0], self._t[1])
            return LiveReply(seq, data, self._t[0], self._t[1])
        if r < 0:
            raise LiveFailure("error", seq, "bad slot geometry for the reply wait", "shm")
        raise self._no_reply(seq, timeout)

    def _no_reply(self, seq: int, timeout: int) -> LiveFailure:
        """No reply to ``seq`` within ``timeout`` ns: the consumer process is gone (``dead``, how)
        or not answering (``hung``, with the requests it served)."""
        code = self.proc.poll() if self.proc else None
        if code is not None:
            how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
            return LiveFailure("dead", seq, f"the consumer process {how}; no reply to request {seq}", "shm")
        return LiveFailure("hung", seq, f"no reply within {timeout / 1e6:g} ms (consumer alive, "
                                        f"{int(self._mem[16:24].view(np.uint64)[0])} requests served)", "shm")

    # -- host freeze ----------------------------------------------------------------------
    def freeze(self, duration_s: float) -> threading.Timer:
        """Freeze the consumer process now (SIGSTOP) and resume it after ``duration_s`` (SIGCONT
        from a timer thread): the live half of the host-freeze test. Returns the timer."""
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.freezes += 1
        pid = self.proc.pid

        def resume():
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

        t = threading.Timer(duration_s, resume)
        t.daemon = True
        t.start()
        return t

    def stamps_address(self) -> int | None:
        """The consumer's stamp block (control block byte 64; ``c/hb_shm_consumer.c``) when the
        session was opened with ``stamps=True``, else None."""
        return self._base + STAMP_OFFSET if self._mem is not None and self._stamped else None

    def _batch_failure(self, seq: int) -> LiveFailure:
        """A batch's (or a paced flow's) reply did not come: :meth:`_no_reply`."""
        return self._no_reply(seq, self.settings.timeout_ns)
