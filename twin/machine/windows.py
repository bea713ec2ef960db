"""The decode jobs a patch's syndrome stream makes: windows in time, seams in space.

A rotated surface-code patch of distance ``d`` measures ``d^2 - 1`` stabilisers a round. Its
stream is decoded in windows (:mod:`twin.qec.window`, :mod:`twin.qec.parallel_window`), each a
job for a decoder; a job is *ready* when its last round is measured, *eligible* once the jobs it
depends on have handed it their boundary (:mod:`twin.machine.engine`):

- ``streaming`` (commit C, buffer B): window ``j`` decodes rounds ``[jC, (j+1)C + B)`` and commits
  ``[jC, (j+1)C)``; it is ready when round ``(j+1)C + B - 1`` ends and depends on window ``j - 1``
  (the committed boundary: one round layer of detectors). Sequential per patch.
- ``parallel`` (P = C + B): A window ``k`` decodes ``[kP - B, kP + C + B)`` and commits its core
  ``[kP, kP + C)``, independently of every other; B window ``k`` commits the seam ``[kP + C, (k+1)P)``
  once A windows ``k`` and ``k + 1`` have handed it their boundaries; it is ready with A ``k + 1``.
- a merge of patches ``a < b`` over rounds ``[s, s + d)``: every time window of ``a`` whose commit
  range meets the merge has a spatial seam job (the merged region between the two patches, ``d``
  rows by ``2 min(B, d) + 1`` columns of stabilisers per round: the geometry of
  :mod:`twin.qec.merge_patch`), which depends on the same window of both patches (each hands it
  ``rounds x d`` boundary detectors) and which both patches' commits of that window wait for.

Sizes: a job's detectors set its decoding time (:mod:`twin.machine.cost`); bytes (bit-packed
detectors) what crosses the links: a window's new syndrome rounds (control system -> pool), the
boundaries (between decoders), the correction (``d^2`` data-qubit bits, decoder -> control).
"""
from __future__ import annotations

from dataclasses import dataclass

STREAM, A, B, SEAM = 0, 1, 2, 3
KIND_NAMES = ("stream", "A", "B", "seam")


@dataclass(frozen=True)
class Geometry:
    """The window geometry of a machine: distance ``d``, ``kind`` streaming | parallel, ``commit``
    C and ``buffer`` B (rounds), ``cycles`` the stream's length (rounds)."""
    d: int
    kind: str
    commit: int
    buffer: int
    cycles: int

    @property
    def stabilisers(self) -> int:
        return self.d * self.d - 1

    @property
    def period(self) -> int:
        """Rounds between ticks: C (streaming) or C + B (parallel)."""
        return self.commit if self.kind == "streaming" else self.commit + self.buffer

    def tick_round(self, w: int) -> int:
        """The round whose end makes tick ``w``'s windows ready (exclusive end of their data)."""
        return (w + 1) * self.commit + self.buffer if self.kind == "streaming" else \
            w * self.period + self.commit + self.buffer

    def ticks(self) -> int:
        """The ticks whose windows are ready within the stream: ``tick_round(w) <= cycles`` (closed form:
        ``(cycles - B) // C`` streaming, ``cycles // (C + B)`` parallel, at least 0)."""
        if self.kind == "streaming":
            return max(0, (self.cycles - self.buffer) // self.commit)
        return self.cycles // self.period

    def time_jobs(self, w: int) -> list[tuple[int, int, int, int]]:
        """Tick ``w``'s time jobs of one patch: (kind, index, commit_lo, commit_hi) rounds."""
        C = self.commit
        if self.kind == "streaming":
            return [(STREAM, w, w * C, (w + 1) * C)]
        P = self.period
        out = [(A, w, w * P, w * P + C)]
        if w >= 1:
            out.append((B, w - 1, (w - 1) * P + C, w * P))
        return out

    def decoded_rounds(self, kind: int, index: int) -> int:
        """Rounds a time job decodes (its commit range with its buffers)."""
        C, Bf = self.commit, self.buffer
        if kind == STREAM:
            return C + Bf
        if kind == A:
            return C + Bf + (Bf if index > 0 else 0)
        return Bf

    def detectors(self, kind: int, index: int) -> int:
        """The detectors a job decodes (a seam job: of the time job it pairs, ``index`` its rounds)."""
        if kind == SEAM:
            return index * self.d * (2 * min(self.buffer, self.d) + 1 if self.buffer else 1)
        return self.decoded_rounds(kind, index) * self.stabilisers

    def syndrome_bytes(self, kind: int, index: int) -> int:
        """Bytes of new syndrome rounds a time job brings from the control system."""
        rounds = self.commit if kind in (STREAM, A) else self.buffer
        return -(-rounds * self.stabilisers // 8)

    def time_boundary_bytes(self) -> int:
        """A time boundary: one round layer of detectors, bit-packed."""
        return -(-self.stabilisers // 8)

    def space_boundary_bytes(self, rounds: int) -> int:
        """A patch's boundary into a spatial seam: ``rounds x d`` detectors, bit-packed."""
        return -(-rounds * self.d // 8)

    def correction_bytes(self) -> int:
        """A committed correction: one bit per data qubit."""
        return -(-self.d * self.d // 8)

    def unit_of_round(self, r: int) -> tuple[int, int]:
        """The commit unit (kind, index) holding round ``r``'s correction."""
        if self.kind == "streaming":
            return STREAM, r // self.commit
        k, off = divmod(r, self.period)
        return (A, k) if off < self.commit else (B, k)

    def unit_tick(self, kind: int, index: int) -> int:
        """The tick that creates the time job of commit unit (kind, index)."""
        return index + 1 if kind == B else index
