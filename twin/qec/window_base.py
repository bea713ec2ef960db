"""What every window decoder shares: windows in request order, their boundary links, one shot's decode.

The sliding (streaming) window is :mod:`twin.qec.window`, the A/B parallel windows
:mod:`twin.qec.parallel_window`; both set the windows (:class:`twin.qec.dem_graph.Window`, each
with its commit rule) and the links (:class:`twin.qec.window_boundary.BoundaryLink`) and inherit
the decode from :class:`WindowedDecoder`; :class:`WindowStream` is the consumer's side of a
stream of window requests.

Shapes: detectors bool (D,) per shot or (shots, D); corrections bool (K,) or (shots, K).
"""
from __future__ import annotations

import numpy as np
import stim

from twin.qec.dem_graph import DemGraph, Window, detector_rounds
from twin.qec.window_boundary import Boundary, BoundaryLink


def commit_flips(graph: DemGraph, committed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The detectors (bool (D,)) and observables (bool (K,)) the components ``committed``
    (int (c,)) flip together (XOR)."""
    d = graph.dets[committed].ravel()
    d = d[d >= 0]
    flips = (np.bincount(d, minlength=graph.n_detectors) & 1).astype(bool)
    obs = (graph.obs[committed].sum(axis=0) & 1).astype(bool)
    return flips, obs


class WindowedDecoder:
    """What every window decoder shares (sliding windows here, A/B layers in
    :mod:`twin.qec.parallel_window`): windows in request order (``_win``, each a
    :class:`twin.qec.dem_graph.Window` with its commit rule) and the boundary links between them
    (``_out[k]``: the :class:`BoundaryLink` and receiver index of each message window ``k``
    sends). A window decodes its detection events XOR the boundaries it received, commits, adds the
    committed observable flips to the correction and sends each link its :class:`Boundary`.

    Subclasses set ``windows`` (``(start, end, commit_end)`` per request, in rounds: the rounds a
    request carries), ``ready`` (per request, the last round it needs), ``_win`` and ``_out``.
    """

    def __init__(self, circuit: stim.Circuit):
        self.graph = DemGraph(circuit)
        self.rounds_of = detector_rounds(circuit)
        self.n_detectors, self.n_observables = self.graph.n_detectors, self.graph.n_observables
        self.n_rounds = int(self.rounds_of.max()) + 1 if self.n_detectors else 1
        self.windows: list[tuple[int, int, int]] = []
        self.ready: list[int] = []
        self._win: list[Window] = []
        self._out: list[list[tuple[BoundaryLink, int]]] = []

    @property
    def links(self) -> list[BoundaryLink]:
        """Every boundary message of a shot (sender, receiver, detectors, bytes), in send order."""
        return [link for out in self._out for link, _ in out]

    def _decode_window(self, k: int, detectors: np.ndarray, inbox: dict, obs: np.ndarray) -> list[Boundary]:
        """Decode window ``k`` of one shot: its detection events (``detectors`` bool (D,), only the
        window's are read) XOR the boundaries in ``inbox[k]`` (bool (D,), taken out), XOR the
        committed observable flips into ``obs`` (bool (K,)) and put the messages it sends into the
        receivers' ``inbox`` entries; returns those messages."""
        w = self._win[k]
        syn = np.asarray(detectors, bool)[w.dets]
        got = inbox.pop(k, None)
        if got is not None:
            syn = syn ^ got[w.dets]
        flips, o = commit_flips(self.graph, w.committed(syn))
        obs ^= o
        sent = []
        for link, r in self._out[k]:
            msg = link.message(flips)
            msg.apply(inbox.setdefault(r, np.zeros(self.n_detectors, bool)))
            sent.append(msg)
        return sent

    def decode_shot(self, detectors: np.ndarray) -> np.ndarray:
        """One shot's detection events bool (D,) -> its observable flips bool (K,), window by window."""
        det = np.asarray(detectors, bool)
        inbox: dict = {}
        obs = np.zeros(self.n_observables, bool)
        for k in range(len(self._win)):
            self._decode_window(k, det, inbox, obs)
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
    events of the window's detectors (bool (D,), other detectors ignored). It keeps the boundaries
    the earlier windows of the shot sent and the committed correction, and returns the correction
    committed so far after each window (the last window's is the shot's correction).
    ``decoder``: a :class:`WindowedDecoder`."""

    def __init__(self, decoder: WindowedDecoder):
        self.dec = decoder
        self.k = 0
        self.inbox: dict = {}  # receiver window -> the boundaries it got so far, XOR-ed (bool (D,))
        self.obs = np.zeros(decoder.n_observables, bool)

    def step(self, window_detectors: np.ndarray) -> np.ndarray:
        """Window ``k`` of the current shot -> the correction committed so far, bool (K,)."""
        self.dec._decode_window(self.k, window_detectors, self.inbox, self.obs)
        out = self.obs.copy()
        self.k += 1
        if self.k == len(self.dec._win):
            self.k = 0
            self.inbox = {}
            self.obs[:] = False
        return out
