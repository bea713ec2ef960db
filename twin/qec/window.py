"""Sliding-window decoding of a syndrome stream with minimum-weight perfect matching.

A hardware decoder cannot wait for the whole shot: it decodes the syndrome stream in overlapping
windows as the rounds arrive (overlapping recovery, Dennis, Kitaev, Landahl and Preskill,
"Topological quantum memory", J. Math. Phys. 43, 4452 (2002), sec. IV.D; sliding windows, as the
serial baseline of Skoric, Browne, Barnes, Gillespie and Campbell, "Parallel window decoding
enables scalable fault tolerant quantum computation", Nature Communications 14, 7040 (2023)).
Each round is decoded by the windows that hold it and committed once; nothing before the commit
cut is decoded again (``per: round`` re-decodes the shot so far instead).

A window covers ``W = C + B`` rounds ``[s, s + W)`` (rounds: stim's detector time coordinate, the
final data readout is the last round): ``C`` commit rounds and ``B`` buffer rounds. Its matching
graph is the sub-graph of the circuit's decomposed detector error model
(:class:`twin.qec.dem_graph.DemGraph`) on the window's detectors:

- an edge between two detectors in the window stays an edge;
- an edge from a detector in the window to one beyond its end (or a boundary edge) becomes a
  boundary edge: the future is open;
- an edge touching an earlier, committed round is left out: that part is decided.

PyMatching decodes the window's syndrome to its matched edges (``decode_to_edges_array``). The
edges with a detector in the first ``C`` rounds of the window are committed: their observable
flips are added to the shot's correction, and the detectors beyond the cut they flip go to the
next window as its boundary (:class:`twin.qec.window_boundary.Boundary`, one bit per detector of
the :class:`~twin.qec.window_boundary.BoundaryLink`); the window then slides by ``C``. The last
window (the first whose end reaches the shot's last round) commits everything. With one window
covering the shot (``W`` >= the number of rounds) this is whole-shot matching.

Shapes: detectors bool (D,) per shot or (shots, D); corrections bool (K,) or (shots, K).
"""
from __future__ import annotations

from dataclasses import dataclass

import stim

from twin.qec.dem_graph import detector_rounds, sub_matching
from twin.qec.parallel_window import ParallelWindowDecoder, parallel_requests
from twin.qec.window_base import WindowedDecoder, WindowStream
from twin.qec.window_boundary import BoundaryLink

__all__ = ["SlidingWindowDecoder", "WindowSpec", "WindowedDecoder", "WindowStream", "detector_rounds", "window_starts",
           "window_decoder", "request_windows"]


@dataclass(frozen=True)
class WindowSpec:
    """How a shot is cut into windows: ``kind`` streaming (sliding windows of ``commit + buffer``
    rounds, this module) or parallel (A/B layers, :mod:`twin.qec.parallel_window`), ``commit`` C
    and ``buffer`` B in rounds. Raises ValueError for C < 1 or B < 0."""

    kind: str = "streaming"
    commit: int = 1
    buffer: int = 0

    def __post_init__(self):
        if self.kind not in ("streaming", "parallel"):
            raise ValueError(f"window kind {self.kind!r}: expected 'streaming' or 'parallel'")
        if self.commit < 1 or self.buffer < 0:
            raise ValueError(f"window commit {self.commit}, buffer {self.buffer}: need commit >= 1, buffer >= 0")

    @classmethod
    def of(cls, window) -> "WindowSpec":
        """A spec from a spec or a ``(W, C)`` pair (streaming, buffer W - C)."""
        if isinstance(window, WindowSpec):
            return window
        W, C = (int(x) for x in window)
        if not 1 <= C <= W:
            raise ValueError(f"window of {W} rounds committing {C}: need 1 <= commit <= rounds")
        return cls("streaming", C, W - C)

    @property
    def rounds(self) -> int:
        """W = C + B: the rounds of a streaming window (a parallel A window holds C + 2 B)."""
        return self.commit + self.buffer


def window_starts(n_rounds: int, rounds: int, commit: int) -> list[tuple[int, int, int]]:
    """The windows of a shot of ``n_rounds`` rounds: ``(start, end, commit_end)`` per window, in
    rounds (end and commit_end exclusive). Windows start at 0, ``commit``, 2 ``commit``, ... until
    one reaches the last round; that one commits everything (``commit_end == end == n_rounds``).
    Raises ValueError unless 1 <= commit <= rounds."""
    if not 1 <= commit <= rounds:
        raise ValueError(f"window of {rounds} rounds committing {commit}: need 1 <= commit <= rounds")
    out, s = [], 0
    while s + rounds < n_rounds:
        out.append((s, s + rounds, s + commit))
        s += commit
    out.append((s, n_rounds, n_rounds))
    return out


def request_windows(n_rounds: int, window) -> tuple[list[tuple[int, int, int]], list[int]]:
    """A shot's window requests for ``window`` (a :class:`WindowSpec` or a ``(W, C)`` pair) over
    ``n_rounds`` rounds, in request order: ``(start, end, commit_end)`` (the rounds each carries)
    and the last round each needs (it leaves once that round is measured)."""
    spec = WindowSpec.of(window)
    if spec.kind == "parallel":
        return parallel_requests(n_rounds, spec.commit, spec.buffer)
    win = window_starts(n_rounds, spec.rounds, spec.commit)
    return win, [e - 1 for _, e, _ in win]


class SlidingWindowDecoder(WindowedDecoder):
    """Sliding-window matching decoder for one memory circuit (see the module docstring).

    circuit: a ``stim.Circuit`` whose detector error model decomposes into edges; rounds: W,
    rounds per window; commit: C, rounds committed per window (1 <= C <= W). Raises ValueError
    for a model stim cannot decompose into a matching graph, a bad W / C, or an error whose
    detectors span more than the next window (its boundary would skip a window).

    Attributes: ``rounds_of`` (round of each detector, int (D,)), ``n_rounds``, ``windows``
    (``(start, end, commit_end)`` per window), ``links`` (the :class:`BoundaryLink` window ``k``
    sends window ``k + 1``), ``ready`` (per window, the last round it needs), ``n_detectors``,
    ``n_observables``.
    """

    def __init__(self, circuit: stim.Circuit, rounds: int, commit: int):
        super().__init__(circuit)
        self.W, self.C = int(rounds), int(commit)
        g, r = self.graph, self.rounds_of
        self.windows = window_starts(self.n_rounds, self.W, self.C)
        self.ready = [e - 1 for _, e, _ in self.windows]
        low = g.lowest(r)
        for k, (s, e, ce) in enumerate(self.windows):
            keep = ~g.touches(r < s)  # touching a committed round: decided
            commits = keep & (low < ce) & g.touches((r >= s) & (r < e))
            self._win.append(sub_matching(g, (r >= s) & (r < e), keep, commits, name=f"S{k}"))
            self._out.append([])
            if k + 1 < len(self.windows):
                nxt = self.windows[k + 1]
                beyond = BoundaryLink.between(g, f"S{k}", commits, "later", r >= max(nxt[1], ce))
                if len(beyond.detectors):
                    raise ValueError(f"window S{k}: a committed error flips detectors beyond window S{k + 1}")
                self._out[k].append((BoundaryLink.between(g, f"S{k}", commits, f"S{k + 1}", r >= ce), k + 1))


def window_decoder(circuit: stim.Circuit, window):
    """The decoder of ``window`` (a :class:`WindowSpec` or a ``(W, C)`` pair) for ``circuit``: a
    :class:`SlidingWindowDecoder` (streaming) or a :class:`twin.qec.parallel_window.ParallelWindowDecoder`."""
    spec = WindowSpec.of(window)
    if spec.kind == "parallel":
        return ParallelWindowDecoder(circuit, spec.commit, spec.buffer)
    return SlidingWindowDecoder(circuit, spec.rounds, spec.commit)
