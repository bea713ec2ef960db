"""Fault injection: what goes wrong on purpose in a run, and how the twin notices it.

- ``corrupt_piece``: one data byte of the request (path ``request``) or reply (path ``reply``) of
  the given rounds is flipped on its way over PCIe. The card checks every reply against the
  reference answer, so each one shows up as a mismatch; the sequence words are left intact, so the
  run goes on.
- ``drop_frame``: the control system's first frame of the given rounds is lost on the Aurora link.
  The control side notices that no reply came within ``timeout`` and sends the frame again
  (``resent_frames``). Closed loop only (one request in flight), where a resend cannot overtake.
- ``stall``: the consumer stops polling during ``[at, at + duration)`` (a descheduled thread, a
  frozen host). The card counts replies overdue by ``timeout`` (``reply_timeouts``) and the study
  counts rounds over the ``deadline``.

- ``host_freeze``: the host stops (every host thread, as when the seeds froze the host process):
  a CPU consumer, being a host thread, stops polling for the window; GPU and FPGA consumers keep
  answering (no host code is on their frame path). A live ``shm`` consumer is stopped with
  SIGSTOP and resumed with SIGCONT. Stalled rounds show as ``reply_timeouts``.

A run with faults uses the event model (the direct engine has no notion of them): the compiled event
core injects them as the simpy reference does (:func:`twin.engine.features.fault_refusals` says what
it refuses: a dropped frame outside a closed loop, which the reference refuses too). A scenario takes
drop_frame with one request in flight only; a :class:`twin.engine.spec.LoopSpec` built in Python may
have several, where a resent frame enters the card behind later rounds on both engines (and a full
card can then wait for ever: both run dry).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FaultPlan:
    """Faults for one loop. Rounds are 1-based sequence numbers; times integer picoseconds."""

    corrupt_rounds: frozenset[int] = frozenset()
    corrupt_path: str = "request"
    drop_rounds: frozenset[int] = frozenset()
    stalls: tuple[tuple[int, int], ...] = ()
    timeout_ps: int = 0
    host_freezes: tuple[tuple[int, int], ...] = ()

    def __post_init__(self):
        if self.corrupt_path not in ("request", "reply"):
            raise ValueError(f"corrupt_path must be 'request' or 'reply', got {self.corrupt_path!r}")
        if (self.drop_rounds or self.stalls or self.host_freezes) and self.timeout_ps <= 0:
            raise ValueError("drop_frame, stall and host_freeze faults need a timeout > 0")
        for s, e in self.stalls + self.host_freezes:
            if not 0 <= s < e:
                raise ValueError(f"stall interval must have 0 <= start < end, got ({s}, {e})")

    @property
    def active(self) -> bool:
        """True when any fault is planned."""
        return bool(self.corrupt_rounds or self.drop_rounds or self.stalls or self.host_freezes)

    def consumer_stalls(self, kind: str) -> tuple[tuple[int, int], ...]:
        """Windows in which a consumer of ``kind`` (cpu | gpu | fpga) does not poll: its stalls,
        plus the host freezes for a CPU consumer (a host thread)."""
        return self.stalls + (self.host_freezes if kind == "cpu" else ())

    def tamper(self, path: str, per_piece: bool):
        """A function ``(seq, writes) -> writes`` that corrupts the chosen rounds on ``path``,
        or ``None``. It flips all bits of the first payload byte: in a classic message the byte
        after the 16-byte header (slot offset 16), in a per-piece message the first data byte of
        piece 1 (slot offset 20). Sequence words are never touched."""
        if path != self.corrupt_path or not self.corrupt_rounds:
            return None
        rounds = self.corrupt_rounds
        target = 20 if per_piece else 16

        def tamper(seq: int, writes: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
            if seq not in rounds:
                return writes
            off, data = writes[0]
            at = target - off
            if not 0 <= at < len(data):
                return writes
            b = bytearray(data)
            b[at] ^= 0xFF
            return [(off, bytes(b))] + list(writes[1:])

        return tamper


def freeze_report(rtt_ps, t_in_ps, windows: tuple[tuple[int, int], ...], timeout_ps: int) -> dict:
    """What the producer saw around host freezes (arrays: per-round int64 ps, in round order).

    ``stalled_rounds``: rounds whose round trip exceeded ``timeout_ps`` anywhere in the run;
    ``longest_stall_ns``: the longest round trip. Per window: ``stalled_rounds`` (over the timeout
    and in flight during the window), ``first_round_in_window`` (1-based), and
    ``recovered_after_rounds``: 0 when no round stalled in the window, else how many rounds after
    the last stalled one the round trip was back within ``normal_p99_ns`` (the p99 of the rounds
    before the first window); None if it never was."""
    import numpy as np

    from twin.stats import percentile_ps
    rtt = np.asarray(rtt_ps)
    t_in = np.asarray(t_in_ps)
    t_have = t_in + rtt
    out = {"stalled_rounds": int((rtt > timeout_ps).sum()),
           "longest_stall_ns": float(rtt.max()) / 1000 if len(rtt) else 0.0, "windows": []}
    if not len(rtt) or not windows:
        return out
    before = rtt[t_in < windows[0][0]]
    normal = float(percentile_ps(before if len(before) else rtt, 99))  # a round's own round trip
    out["normal_p99_ns"] = normal / 1000
    for start, end in windows:
        first = int(np.searchsorted(t_in, start))
        hit = np.nonzero((t_in < end) & (t_have > start) & (rtt > timeout_ps))[0]
        rec: int | None = 0
        if len(hit):
            last = int(hit[-1])
            ok = np.nonzero(rtt[last + 1:] <= normal)[0]
            rec = int(ok[0]) + 1 if len(ok) else None
        out["windows"].append({"at_ns": start / 1000, "duration_ns": (end - start) / 1000,
                               "first_round_in_window": first + 1 if first < len(rtt) else None,
                               "stalled_rounds": int(len(hit)), "recovered_after_rounds": rec})
    return out
