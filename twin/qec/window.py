"""Sliding-window decoding of a syndrome stream with minimum-weight perfect matching.

A hardware decoder cannot wait for the whole shot: it decodes the syndrome stream in overlapping
windows as the rounds arrive (overlapping recovery, Dennis, Kitaev, Landahl and Preskill,
"Topological quantum memory", J. Math. Phys. 43, 4452 (2002), sec. IV.D; sliding windows, as the
serial baseline of Skoric, Browne, Barnes, Gillespie and Campbell, "Parallel window decoding
enables scalable fault tolerant quantum computation", Nature Communications 14, 7040 (2023)).

A window covers ``W`` rounds ``[s, s + W)`` (rounds: stim's detector time coordinate, the final
data readout is the last round). The window's matching graph is the sub-graph of the circuit's
detector error model (decomposed into edges, as PyMatching takes it) on the window's detectors:

- an edge between two detectors in the window stays an edge;
- an edge from a detector in the window to one beyond its end (or a boundary edge) becomes a
  boundary edge: the future is open;
- an edge touching an earlier, committed round is left out: that part is decided.

PyMatching decodes the window's syndrome to its matched edges (``decode_to_edges_array``). The
edges with a detector in the first ``C`` rounds of the window are committed: their observable
flips are added to the shot's correction and the syndrome bits they touch (including those in
later rounds, beyond the window) are flipped; the window then slides by ``C``. The last window
(the first whose end reaches the shot's last round) commits everything. Parallel edges are merged
as independent errors (as ``pymatching.Matching.from_detector_error_model`` does); a matched edge
stands for its most likely error (the one whose effect is applied). With one window covering the
shot (``W`` >= the number of rounds) this is whole-shot matching.

Shapes: detectors bool (D,) per shot or (shots, D); corrections bool (K,) or (shots, K).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import stim


def detector_rounds(circuit: stim.Circuit) -> np.ndarray:
    """Round index (0-based) of every detector, int64 (D,), from stim's time coordinate (the last
    coordinate of each detector); detectors without coordinates count as round 0."""
    coords = circuit.get_detector_coordinates()
    t = np.array([c[-1] if len(c) else 0.0 for _, c in sorted(coords.items())])
    if not len(t):
        return np.zeros(0, np.int64)
    _, idx = np.unique(t, return_inverse=True)
    return idx.astype(np.int64)


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


@dataclass
class _Window:
    start: int
    end: int
    commit_end: int
    dets: np.ndarray        # global detector indices in the window, int64 (n,)
    matching: object        # pymatching.Matching on local indices 0..n-1
    edge_error: dict        # (a, b) local (b = -1: boundary) -> index of the error it stands for
    n_nodes: int


class SlidingWindowDecoder:
    """Sliding-window matching decoder for one memory circuit (see the module docstring).

    circuit: a ``stim.Circuit`` whose detector error model decomposes into edges; rounds: W,
    rounds per window; commit: C, rounds committed per window (1 <= C <= W). Raises ValueError
    for a model stim cannot decompose into a matching graph, or a bad W / C.

    Attributes: ``rounds_of`` (round of each detector, int (D,)), ``n_rounds``, ``windows``
    (``(start, end, commit_end)`` per window), ``n_detectors``, ``n_observables``.
    """

    def __init__(self, circuit: stim.Circuit, rounds: int, commit: int):
        import pymatching
        self.W, self.C = int(rounds), int(commit)
        self.rounds_of = detector_rounds(circuit)
        self.n_detectors = circuit.num_detectors
        self.n_observables = circuit.num_observables
        self.n_rounds = int(self.rounds_of.max()) + 1 if self.n_detectors else 1
        self.windows = window_starts(self.n_rounds, self.W, self.C)
        dem = circuit.detector_error_model(decompose_errors=True)
        errs_dets, errs_obs, errs_p = [], [], []
        for inst in dem.flattened():
            if inst.type != "error":
                continue
            p = inst.args_copy()[0]
            if p <= 0:
                continue
            dets, obs = [], 0
            for tgt in inst.targets_copy() + [stim.DemTarget.separator()]:
                if tgt.is_separator():
                    if len(dets) > 2:
                        raise ValueError(f"an error component flips {len(dets)} detectors: not a matching graph")
                    if dets:
                        errs_dets.append(tuple(dets))
                        errs_obs.append(obs)
                        errs_p.append(p)
                    dets, obs = [], 0
                elif tgt.is_relative_detector_id():
                    dets.append(tgt.val)
                elif tgt.is_logical_observable_id():
                    obs ^= 1 << tgt.val
        self.err_dets = errs_dets
        self.err_obs = np.array([[(o >> k) & 1 for k in range(self.n_observables)] for o in errs_obs], bool) \
            .reshape(len(errs_obs), self.n_observables)
        self.err_p = np.array(errs_p, float)
        self._win = [self._build(s, e, ce, pymatching) for s, e, ce in self.windows]

    def _build(self, s: int, e: int, ce: int, pymatching) -> _Window:
        r = self.rounds_of
        dets = np.flatnonzero((r >= s) & (r < e)).astype(np.int64)
        local = {int(d): i for i, d in enumerate(dets)}
        m = pymatching.Matching()
        best: dict = {}
        for j, ds in enumerate(self.err_dets):
            rd = r[list(ds)]
            if (rd < s).any():
                continue  # touches a committed round: decided
            inside = [local[d] for d in ds if s <= r[d] < e]
            if not inside:
                continue
            key = (min(inside), max(inside)) if len(inside) == 2 else (inside[0], -1)
            p = float(self.err_p[j])
            w = math.log((1 - p) / p)
            if key[1] < 0:
                m.add_boundary_edge(key[0], weight=w, error_probability=p, merge_strategy="independent")
            else:
                m.add_edge(key[0], key[1], weight=w, error_probability=p, merge_strategy="independent")
            if key not in best or p > self.err_p[best[key]]:
                best[key] = j
        return _Window(s, e, ce, dets, m, best, m.num_detectors)

    def _decode_window(self, w: _Window, residual: np.ndarray, obs: np.ndarray) -> None:
        """Decode window ``w`` of one shot's ``residual`` syndrome (bool (D,), updated in place),
        commit, and XOR the committed observable flips into ``obs`` (bool (K,))."""
        syn = residual[w.dets]
        if not syn.any():
            return
        n = w.n_nodes
        if syn[n:].any():
            raise ValueError(f"window [{w.start}, {w.end}): a detection event on a detector no error flips")
        edges = w.matching.decode_to_edges_array(syn[:n].astype(np.uint8))
        last = w.commit_end == w.end
        r = self.rounds_of
        for a, b in edges:
            a, b = int(a), int(b)
            if b >= 0 and a > b:
                a, b = b, a
            key = (a, b) if b >= 0 else (a, -1)
            if a < 0:
                key = (b, -1)
            j = w.edge_error[key]
            ds = self.err_dets[j]
            first = min(int(r[d]) for d in ds if w.start <= r[d] < w.end)
            if last or first < w.commit_end:
                obs ^= self.err_obs[j]
                residual[list(ds)] ^= True

    def decode_shot(self, detectors: np.ndarray) -> np.ndarray:
        """One shot's detection events bool (D,) -> its observable flips bool (K,), window by window."""
        residual = np.array(detectors, bool, copy=True)
        obs = np.zeros(self.n_observables, bool)
        for w in self._win:
            self._decode_window(w, residual, obs)
        return obs

    def decode_batch(self, detectors: np.ndarray, progress=None) -> np.ndarray:
        """Shots bool (shots, D) -> observable flips bool (shots, K). ``progress(n)`` every 10,000 shots."""
        det = np.asarray(detectors, bool)
        out = np.zeros((len(det), self.n_observables), bool)
        for i in np.flatnonzero(det.any(axis=1)):
            out[i] = self.decode_shot(det[i])
            if progress and i % 10_000 == 0:
                progress(int(i))
        return out

    def window_masks(self) -> np.ndarray:
        """Which detectors each window's request carries, bool (windows, D)."""
        return np.stack([(self.rounds_of >= s) & (self.rounds_of < e) for s, e, _ in self.windows])

    def stream(self) -> "WindowStream":
        """A stateful server of window requests (:class:`WindowStream`)."""
        return WindowStream(self)


class WindowStream:
    """The decoder's side of a windowed syndrome stream: called with the shot's window requests in
    order (window ``k`` of every shot, ``len(decoder.windows)`` per shot), each the detection
    events of the window's rounds (bool (D,), other detectors ignored). It keeps the syndrome flips
    the committed edges leave for later rounds and the committed correction, and returns the
    correction committed so far after each window (the last window's is the shot's correction)."""

    def __init__(self, decoder: SlidingWindowDecoder):
        self.dec = decoder
        self.k = 0
        self.flips = np.zeros(decoder.n_detectors, bool)
        self.obs = np.zeros(decoder.n_observables, bool)

    def step(self, window_detectors: np.ndarray) -> np.ndarray:
        """Window ``k`` of the current shot -> the correction committed so far, bool (K,)."""
        dec = self.dec
        w = dec._win[self.k]
        raw = np.asarray(window_detectors, bool)[w.dets]
        residual = self.flips.copy()
        residual[w.dets] ^= raw
        dec._decode_window(w, residual, self.obs)
        residual[w.dets] ^= raw  # keep the flips only: the next window's request carries its rounds again
        self.flips = residual
        out = self.obs.copy()
        self.k += 1
        if self.k == len(dec.windows):
            self.k = 0
            self.flips[:] = False
            self.obs[:] = False
        return out
