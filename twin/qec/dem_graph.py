"""A circuit's detector error model as a matching graph that windows are cut from.

The detector error model (stim's ``Circuit.detector_error_model(decompose_errors=True)``) is read
into its error components: each flips one detector (a boundary edge) or two (an edge) and a set
of logical observables, with its probability. A window is a subset of the detectors and a rule for
which components it keeps; :func:`sub_matching` builds PyMatching on the window's detectors
(an edge with one detector outside becomes a boundary edge), and :meth:`Window.matched` decodes a
window's syndrome to the components its matched edges stand for. Parallel components merge as
independent errors (as ``pymatching.Matching.from_detector_error_model`` does); a matched edge
stands for its most likely component. Windows in time (sliding, :mod:`twin.qec.window`; A/B
layers, :mod:`twin.qec.parallel_window`) and in space (:mod:`twin.qec.merge_patch`) are all cut
from this one graph by detector coordinates (stim's ``Circuit.get_detector_coordinates``).

Shapes: detectors D, components E, observables K.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import stim


def coordinate_index(circuit: stim.Circuit, axis: int) -> np.ndarray:
    """The rank (0-based) of every detector's coordinate ``axis`` among the distinct values, int64
    (D,): axis -1 is stim's time coordinate (the round), 0 the first space coordinate (x).
    Detectors without coordinates count as rank 0."""
    coords = circuit.get_detector_coordinates()
    v = np.array([c[axis] if len(c) else 0.0 for _, c in sorted(coords.items())])
    if not len(v):
        return np.zeros(0, np.int64)
    _, idx = np.unique(v, return_inverse=True)
    return idx.astype(np.int64)


def detector_rounds(circuit: stim.Circuit) -> np.ndarray:
    """Round index (0-based) of every detector, int64 (D,), from stim's time coordinate (the last
    coordinate of each detector); detectors without coordinates count as round 0."""
    return coordinate_index(circuit, -1)


class DemGraph:
    """The decomposed detector error model of ``circuit`` (module docstring; a
    ``stim.DetectorErrorModel`` is read as given, decomposed or not).

    Attributes: ``dets`` int64 (E, 2), the detectors each component flips (-1: none, for a
    boundary edge's second end); ``obs`` bool (E, K); ``p`` float (E,); ``n_detectors``,
    ``n_observables``. Raises ValueError when a component flips more than two detectors (no
    matching graph)."""

    def __init__(self, circuit: stim.Circuit | stim.DetectorErrorModel):
        self.n_detectors = circuit.num_detectors
        self.n_observables = circuit.num_observables
        dem = circuit if isinstance(circuit, stim.DetectorErrorModel) else circuit.detector_error_model(
            decompose_errors=True)
        dets, obs, ps = [], [], []
        for inst in dem.flattened():
            if inst.type != "error" or inst.args_copy()[0] <= 0:
                continue
            p = inst.args_copy()[0]
            ds: list[int] = []
            o = 0
            for tgt in inst.targets_copy() + [stim.DemTarget.separator()]:
                if tgt.is_separator():
                    if len(ds) > 2:
                        raise ValueError(f"an error component flips {len(ds)} detectors: not a matching graph")
                    if ds:
                        dets.append(ds + [-1] * (2 - len(ds)))
                        obs.append(o)
                        ps.append(p)
                    ds, o = [], 0
                elif tgt.is_relative_detector_id():
                    ds.append(tgt.val)
                elif tgt.is_logical_observable_id():
                    o ^= 1 << tgt.val
        self.dets = np.array(dets, np.int64).reshape(len(dets), 2)
        self.obs = np.array([[(o >> k) & 1 for k in range(self.n_observables)] for o in obs], bool) \
            .reshape(len(obs), self.n_observables)
        self.p = np.array(ps, float)

    def touches(self, det_mask: np.ndarray) -> np.ndarray:
        """Per component, whether it flips a detector in ``det_mask`` (bool (D,)): bool (E,)."""
        padded = np.append(np.asarray(det_mask, bool), False)  # index -1: no detector
        return np.asarray(padded[self.dets].any(axis=1), bool)

    def within(self, det_mask: np.ndarray) -> np.ndarray:
        """Per component, whether every detector it flips is in ``det_mask``: bool (E,)."""
        padded = np.append(np.asarray(det_mask, bool), True)
        return np.asarray(padded[self.dets].all(axis=1), bool)

    def lowest(self, rank: np.ndarray) -> np.ndarray:
        """Per component, the lowest ``rank`` (int (D,)) of the detectors it flips: int64 (E,)."""
        big = np.iinfo(np.int64).max
        padded = np.append(np.asarray(rank, np.int64), big)
        return padded[self.dets].min(axis=1)


@dataclass
class Window:
    """One window's matching problem: ``dets`` the global detectors it decodes (int64 (n,), local
    index = position), ``matching`` PyMatching on them, ``edge_error`` (local a, local b or -1) ->
    the component it stands for, ``commits`` bool (E,): which components a match commits."""

    dets: np.ndarray
    matching: Any
    edge_error: dict
    n_nodes: int
    commits: np.ndarray
    name: str = ""

    def matched(self, syndrome: np.ndarray) -> np.ndarray:
        """The components (int64 (m,)) the matched edges stand for, from the window's syndrome
        (bool (n,), in ``dets`` order). Raises ValueError for an event on a detector no component
        flips."""
        if not syndrome.any():
            return np.zeros(0, np.int64)
        if syndrome[self.n_nodes:].any():
            raise ValueError(f"window {self.name}: a detection event on a detector no error flips")
        edges = self.matching.decode_to_edges_array(syndrome[:self.n_nodes].astype(np.uint8))
        out = np.empty(len(edges), np.int64)
        for i, (a, b) in enumerate(edges):
            a, b = int(a), int(b)
            key = (min(a, b), max(a, b)) if a >= 0 and b >= 0 else (max(a, b), -1)
            out[i] = self.edge_error[key]
        return out

    def committed(self, syndrome: np.ndarray) -> np.ndarray:
        """:meth:`matched`, only the components this window commits (int64 (c,))."""
        m = self.matched(syndrome)
        return m[self.commits[m]]


def sub_matching(graph: DemGraph, det_mask: np.ndarray, keep: np.ndarray, commits: np.ndarray,
                 name: str = "") -> Window:
    """PyMatching on the detectors of ``det_mask`` (bool (D,)) with the components of ``keep``
    (bool (E,)) that flip one of them: an edge between two of them stays, an edge with one end
    outside becomes a boundary edge (weight log((1 - p) / p)). ``commits`` (bool (E,)) is kept as
    the window's commit rule."""
    import pymatching
    dets = np.flatnonzero(det_mask).astype(np.int64)
    local = np.full(graph.n_detectors + 1, -1, np.int64)  # index -1 (no detector) stays -1
    local[dets] = np.arange(len(dets))
    m = pymatching.Matching()
    best: dict = {}
    ids = np.flatnonzero(keep & graph.touches(det_mask))
    ab = local[graph.dets[ids]]
    lo, hi = ab.min(axis=1), ab.max(axis=1)
    a = np.where(lo >= 0, lo, hi)  # a boundary edge: (its one node, -1)
    b = np.where(lo >= 0, hi, -1)
    ps = graph.p[ids]
    for j, x, y, p, w in zip(ids.tolist(), a.tolist(), b.tolist(), ps.tolist(), np.log((1 - ps) / ps).tolist()):
        if y < 0:
            m.add_boundary_edge(x, weight=w, error_probability=p, merge_strategy="independent")
        else:
            m.add_edge(x, y, weight=w, error_probability=p, merge_strategy="independent")
        key = (x, y)
        if key not in best or p > graph.p[best[key]]:
            best[key] = j
    return Window(dets, m, best, m.num_detectors, np.asarray(commits, bool), name)
