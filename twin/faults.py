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

A run with faults uses the event model (the direct engine has no notion of them).
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

    def __post_init__(self):
        if self.corrupt_path not in ("request", "reply"):
            raise ValueError(f"corrupt_path must be 'request' or 'reply', got {self.corrupt_path!r}")
        if (self.drop_rounds or self.stalls) and self.timeout_ps <= 0:
            raise ValueError("drop_frame and stall faults need a timeout > 0")
        for s, e in self.stalls:
            if not 0 <= s < e:
                raise ValueError(f"stall interval must have 0 <= start < end, got ({s}, {e})")

    @property
    def active(self) -> bool:
        """True when any fault is planned."""
        return bool(self.corrupt_rounds or self.drop_rounds or self.stalls)

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
