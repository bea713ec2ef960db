"""Parallel window decoding in A/B layers, in time (rounds) or in space (columns of a patch).

Skoric, Browne, Barnes, Gillespie and Campbell, "Parallel window decoding enables scalable fault
tolerant quantum computation", Nat. Commun. 14, 7040 (2023), doi:10.1038/s41467-023-42482-1, and
Tan, Niu, Gidney, "Scalable surface code decoders with parallelization in time", PRX Quantum 4,
040344 (2023): the axis is cut into cores of ``C`` slices separated by seams of ``B`` slices
(a slice: a round, from stim's time coordinate; or a column, from the first space coordinate,
:func:`twin.qec.dem_graph.coordinate_index`):

- an A window decodes its core with ``B`` buffer slices on each side (the neighbouring seams),
  independently of every other A window (their order does not matter; they can run at once). Its
  sub-graph keeps every error that flips one of its detectors; an edge leaving the window becomes
  a boundary edge (both sides open). It commits the matched errors that flip a detector of its
  core (an error across two cores, possible only with ``B = 0``: the earlier core's), and sends
  each neighbouring seam a :class:`twin.qec.window_boundary.Boundary`: the seam detectors its
  commits flip;
- a B window decodes one seam once both neighbouring A windows have sent theirs: its detection
  events XOR the two boundaries, on the sub-graph of the errors that flip only seam detectors
  (an error touching a core is decided), and commits all it matches.

With ``B = 0`` there are no seams: the cores abut, each A window treats the cut as an open boundary
and nothing reconciles the two sides (no overlap; measurably worse, by design of the check).
Every core is committed once, every seam once. The request order (one decoder serving them in
turn) is A0, A1, B0, A2, B1, ...; a B window is ready when its later neighbour is.

Shapes as :mod:`twin.qec.window`.
"""
from __future__ import annotations

import numpy as np
import stim

from twin.qec.dem_graph import coordinate_index, sub_matching
from twin.qec.window_base import WindowedDecoder
from twin.qec.window_boundary import BoundaryLink


def ab_layout(n: int, commit: int, buffer: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Cores and seams of an axis of ``n`` slices: cores ``[k P, k P + C)`` (P = C + B, the last cut
    at ``n``) and the seams ``[k P + C, (k + 1) P)`` between them (the last one may end the axis).
    Returns ``(cores, seams)``, half-open slice ranges. Raises ValueError for C < 1 or B < 0."""
    if commit < 1 or buffer < 0:
        raise ValueError(f"commit {commit}, buffer {buffer}: need commit >= 1, buffer >= 0")
    cores, seams, P = [], [], commit + buffer
    for lo in range(0, n, P):
        cores.append((lo, min(lo + commit, n)))
        if lo + commit < n and buffer:
            seams.append((lo + commit, min(lo + P, n)))
    return cores, seams


def _order(cores: int, seams: int) -> list[tuple[str, int]]:
    """Request order: every A window, each seam right after its later neighbour (A0 A1 B0 A2 B1 ...)."""
    out: list[tuple[str, int]] = []
    for k in range(cores):
        out.append(("A", k))
        if k >= 1 and k - 1 < seams:
            out.append(("B", k - 1))
    out += [("B", j) for j in range(cores - 1, seams)]  # a seam that ends the axis: after its one neighbour
    return out


def parallel_requests(n_rounds: int, commit: int, buffer: int) -> tuple[list[tuple[int, int, int]], list[int]]:
    """The A/B windows of a shot of ``n_rounds`` rounds cut in time, in request order
    (:func:`_order`): per request the rounds it carries ``(start, end, commit_end)`` (an A window
    its core and buffers, ``commit_end`` its core's end; a B window its seam) and the last round it
    needs (a B window: its later neighbour's)."""
    cores, seams = ab_layout(n_rounds, commit, buffer)
    order = _order(len(cores), len(seams))
    span = {}
    for kind, k in order:
        lo, hi = cores[k] if kind == "A" else seams[k]
        b = buffer if kind == "A" else 0
        span[(kind, k)] = (max(0, lo - b), min(n_rounds, hi + b), hi)
    ready = {key: e - 1 for key, (_, e, _) in span.items()}
    for j in range(len(seams)):  # a seam waits for both neighbouring A windows
        ready[("B", j)] = max(ready[("A", j)], ready.get(("A", j + 1), -1))
    return [span[key] for key in order], [ready[key] for key in order]


class ParallelWindowDecoder(WindowedDecoder):
    """A/B parallel window matching decoder (module docstring).

    circuit: a ``stim.Circuit`` whose detector error model decomposes into edges; commit: C,
    slices per core (>= 1); buffer: B, slices per seam and per A window's buffer on each side
    (>= 0); axis: the detector coordinate cut (-1: time, rounds; 0: x, columns). Raises ValueError
    for a model with no matching graph, or C < 1, B < 0.

    Attributes: ``slice_of`` (the slice of each detector, int64 (D,)), ``cores``, ``seams``
    (slice ranges), ``order`` (``("A" | "B", index)`` per request), ``windows`` (per request, the
    rounds it carries ``(start, end, commit_end)``; space: the whole shot), ``ready`` (per request,
    the last round it needs), ``links`` (every A-to-B :class:`BoundaryLink`).
    """

    def __init__(self, circuit: stim.Circuit, commit: int, buffer: int, axis: int = -1):
        super().__init__(circuit)
        self.C, self.B, self.axis = int(commit), int(buffer), int(axis)
        g = self.graph
        x = self.slice_of = coordinate_index(circuit, axis)
        n = int(x.max()) + 1 if len(x) else 1
        self.cores, self.seams = ab_layout(n, self.C, self.B)
        core_of = np.full(n, -1, np.int64)
        for k, (lo, hi) in enumerate(self.cores):
            core_of[lo:hi] = k
        in_core = core_of[x] >= 0
        owner = np.append(core_of, -1)[g.lowest(np.where(in_core, x, n))]  # core of the lowest core detector
        self.order = _order(len(self.cores), len(self.seams))
        index = {key: i for i, key in enumerate(self.order)}
        seam_mask = [(x >= lo) & (x < hi) for lo, hi in self.seams]
        a_commits = []
        for k, (lo, hi) in enumerate(self.cores):
            a_commits.append(owner == k)
        self._out = [[] for _ in self.order]
        for i, (kind, k) in enumerate(self.order):
            if kind == "A":
                lo, hi = self.cores[k]
                mask = (x >= lo - self.B) & (x < hi + self.B)
                self._win.append(sub_matching(g, mask, np.ones(len(g.p), bool), a_commits[k], name=f"A{k}"))
                for j in (k - 1, k):
                    if 0 <= j < len(self.seams):
                        self._out[i].append((BoundaryLink.between(g, f"A{k}", a_commits[k], f"B{j}", seam_mask[j]),
                                             index[("B", j)]))
            else:
                keep = g.within(seam_mask[k])
                self._win.append(sub_matching(g, seam_mask[k], keep, keep, name=f"B{k}"))
        if axis == -1:
            self.windows, self.ready = parallel_requests(self.n_rounds, self.C, self.B)
        else:  # cut in space: every window needs the whole shot
            G = self.n_rounds
            self.windows, self.ready = [(0, G, G)] * len(self.order), [G - 1] * len(self.order)
