"""QEC workloads: shots of a stim memory experiment packed into request frames.

A workload is what the control system would send: the detection events packed into request
payloads by the contract's byte specification for syndromes (the ``syndrome`` section of
``twin/exchange/contract.yaml``: detector ``i`` in bit ``i % 8`` of byte ``i // 8``,
:func:`twin.qec.lookup.decode_payload`), zero-padded to the frame size; and the
ground truth, the observable flips stim sampled with them. One request per shot (``per="shot"``:
all of the shot's detection events), or one per QEC round (``per="round"``: request ``g`` of a shot
holds only the detectors stim's time coordinate puts in round ``g``, at their own bit positions;
the final data-qubit readout is the last "round"), or one per sliding window (``per="window"``,
``window=(W, C)`` or a :class:`twin.qec.window.WindowSpec`: streaming, request ``k`` of a shot holds
the detectors of rounds ``[kC, kC + W)``, the last window those up to the shot's end,
:mod:`twin.qec.window`; parallel, the A and B windows in request order,
:mod:`twin.qec.parallel_window`). For per-round requests the consumer
keeps the shot's events so far (:meth:`Workload.cumulative_frames`) and answers every round with the
correction for what it has seen; the last round's reply is the shot's correction. For windows the
consumer decodes each window and answers with the correction committed so far.

The stream's timing: :meth:`Workload.ready_rounds` gives, per request, the round of the continuous
syndrome stream (shots back to back, one round per QEC cycle) whose measurement completes it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import stim

from twin.exchange import contract as C
from twin.qec.codes import memory_circuit
from twin.qec.lookup import syndrome_bytes
from twin.qec.window import WindowSpec, detector_rounds, request_windows


@dataclass(frozen=True)
class Workload:
    """Sampled shots of one memory experiment.

    name: label (e.g. ``"surface_d5_r5_p0.001"``); circuit: the ``stim.Circuit``;
    detectors: bool (shots, D); observables: bool (shots, K), the ground truth;
    frame_bytes: request payload size (>= ``syndrome_bytes(D)``); per: ``shot`` | ``round`` |
    ``window``; window: a :class:`twin.qec.window.WindowSpec` (streaming or parallel, commit C,
    buffer B; a ``(W, C)`` pair is a streaming window of W rounds committing C), ``per="window"``
    only. circuit may be ``None`` for workloads that do not come from stim (then ``per`` must be ``shot``).
    """

    name: str
    circuit: stim.Circuit | None
    detectors: np.ndarray
    observables: np.ndarray
    frame_bytes: int
    per: str = "shot"
    window: WindowSpec | tuple[int, int] | None = None

    def __post_init__(self):
        if self.per not in ("shot", "round", "window"):
            raise ValueError(f"per {self.per!r}: expected 'shot', 'round' or 'window'")
        if self.per != "shot" and self.circuit is None:
            raise ValueError(f"per {self.per!r} needs the stim circuit (its detectors' time coordinates)")
        if (self.per == "window") != (self.window is not None):
            raise ValueError("a window (rounds, commit) goes with per 'window' and only with it")
        if self.window is not None:
            object.__setattr__(self, "window", WindowSpec.of(self.window))  # raises for a bad W / C
            request_windows(self.n_rounds, self.window)

    @property
    def n_rounds(self) -> int:
        """Rounds per shot (distinct detector times; the final data readout is the last)."""
        return 1 if self.circuit is None or not self.n_detectors else int(self.detector_rounds().max()) + 1

    def windows(self) -> list[tuple[int, int, int]]:
        """The request windows ``(start, end, commit_end)`` in rounds: one per request of a shot (per
        shot: the whole shot; per round: each round alone)."""
        G = self.n_rounds
        if self.per == "window":
            return request_windows(G, self.window)[0]
        if self.per == "round":
            return [(r, r + 1, r + 1) for r in range(G)]
        return [(0, G, G)]

    @property
    def requests_per_shot(self) -> int:
        """Requests per shot: 1, the number of rounds for ``per="round"``, the number of windows for
        ``per="window"``."""
        return len(self.windows()) if self.per != "shot" else 1

    def ready_rounds(self) -> np.ndarray:
        """Per request (int64 (requests,)), the round of the continuous stream (shot ``s``'s round
        ``r`` is stream round ``s * n_rounds + r``) whose syndrome completes the request: the last
        round it carries."""
        if self.per == "window":
            ends = np.array(request_windows(self.n_rounds, self.window)[1], np.int64)
        else:
            ends = np.array([e - 1 for _, e, _ in self.windows()], np.int64)
        return (np.arange(self.shots, dtype=np.int64)[:, None] * self.n_rounds + ends[None, :]).ravel()

    @property
    def requests(self) -> int:
        """Requests in the stream: shots * requests_per_shot."""
        return self.shots * self.requests_per_shot

    def _pack(self, det: np.ndarray) -> np.ndarray:
        packed = np.packbits(det, axis=1, bitorder=C.SYNDROME_NUMPY_BITORDER)
        out = np.full((det.shape[0], self.frame_bytes), C.SYNDROME_PAD_VALUE, np.uint8)
        out[:, :packed.shape[1]] = packed
        return out

    def _rounds_of(self, cumulative: bool) -> np.ndarray:
        g = self.detector_rounds()
        win = self.windows()
        G = len(win)
        det = np.repeat(self.detectors, G, axis=0)  # request s*G + k
        lo = np.array([0 if cumulative else s for s, _, _ in win])
        hi = np.array([e for _, e, _ in win])
        mask = (g[None, :] >= lo[:, None]) & (g[None, :] < hi[:, None])  # (G, D)
        return det & np.tile(mask, (self.shots, 1))

    def request_detectors(self) -> np.ndarray:
        """The detection events each request carries, bool (requests, D)."""
        return self.detectors if self.per == "shot" else self._rounds_of(False)

    def cumulative_detectors(self) -> np.ndarray:
        """What the consumer decodes when it answers each request, bool (requests, D): the shot's
        detection events up to the request (per round), the window's (per window; the decoder
        keeps the flips its commits left), the shot's (per shot)."""
        if self.per == "window":
            return self.request_detectors()
        return self.detectors if self.per == "shot" else self._rounds_of(True)

    def cumulative_frames(self) -> np.ndarray:
        """:meth:`cumulative_detectors` packed like the frames, uint8 (requests, frame_bytes)."""
        return self._pack(self.cumulative_detectors())

    @property
    def shots(self) -> int:
        """Number of shots."""
        return int(self.detectors.shape[0])

    @property
    def n_detectors(self) -> int:
        """D, detectors per shot."""
        return int(self.detectors.shape[1])

    @property
    def n_observables(self) -> int:
        """K, logical observables per shot."""
        return int(self.observables.shape[1])

    @property
    def reply_bytes(self) -> int:
        """Bytes of a correction reply: ceil(K / 8)."""
        return syndrome_bytes(self.n_observables)

    def frames(self) -> np.ndarray:
        """Request payloads, uint8 (requests, frame_bytes): packed detection events, then zero
        padding; request ``s * requests_per_shot + r`` is shot ``s``'s round ``r``."""
        return self._pack(self.request_detectors())

    def truth_bytes(self) -> np.ndarray:
        """Ground-truth observable flips packed as replies, uint8 (shots, reply_bytes)."""
        return np.packbits(self.observables, axis=1, bitorder=C.SYNDROME_NUMPY_BITORDER)

    def detector_rounds(self) -> np.ndarray:
        """Round index (0-based) of every detector, int (D,), from stim's time coordinate (the last
        coordinate of each detector); detectors without coordinates count as round 0
        (:func:`twin.qec.window.detector_rounds`)."""
        return detector_rounds(self.circuit)


def sample(code: str, distance: int, rounds: int, p: float, shots: int, seed: int = 0,
           noise: str = "circuit", frame_bytes: int | None = None, per: str = "shot",
           window: WindowSpec | tuple[int, int] | None = None) -> Workload:
    """Sample ``shots`` shots of :func:`twin.qec.codes.memory_circuit` with stim (seeded).

    frame_bytes: request payload size; default the packed syndrome rounded up to a whole 16-byte
    piece (at least 16). Raises ValueError for bad arguments (naming them) or a frame too small
    for the syndrome.
    """
    circuit = memory_circuit(code, distance, rounds, p, noise)
    return sample_circuit(circuit, shots, seed, frame_bytes, per, name=f"{code}_d{distance}_r{rounds}_p{p:g}",
                          window=window)


def sample_circuit(circuit: stim.Circuit, shots: int, seed: int = 0, frame_bytes: int | None = None,
                   per: str = "shot", name: str = "circuit",
                   window: WindowSpec | tuple[int, int] | None = None) -> Workload:
    """Sample ``shots`` shots of any stim circuit with detectors and observables (a user's file,
    feedback such as ``CX rec[-1] 0`` included) with stim's detector sampler (seeded).
    frame_bytes, per, window: as :func:`sample`. Raises ValueError for fewer than one shot or a frame too
    small for the syndrome."""
    if shots < 1:
        raise ValueError(f"shots {shots}: need at least 1")
    det, obs = circuit.compile_detector_sampler(seed=seed).sample(shots, separate_observables=True)
    need = syndrome_bytes(circuit.num_detectors)
    if frame_bytes is None:
        frame_bytes = max(16, -(-need // 16) * 16)
    if frame_bytes < need:
        raise ValueError(f"frame_bytes {frame_bytes}: the syndrome of {circuit.num_detectors} detectors needs {need}")
    return Workload(name, circuit, det.astype(bool), obs.astype(bool), frame_bytes, per, window)


def logical_errors(corrections: np.ndarray, workload: Workload) -> np.ndarray:
    """Per shot, True where the shot's correction (uint8 reply bytes (shots, reply_bytes), or bool
    (shots, K); for per-round workloads the last round's reply) does not undo the sampled
    observable flips (any observable wrong)."""
    c = np.asarray(corrections)
    if c.dtype != bool:
        c = np.unpackbits(c, axis=1, bitorder=C.SYNDROME_NUMPY_BITORDER, count=workload.n_observables).astype(bool)
    return (c != workload.observables).any(axis=1)
