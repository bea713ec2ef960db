"""QEC workloads: shots of a stim memory experiment packed into request frames.

A workload is what the control system would send: per shot, the detection events packed into a
request payload by the contract's byte specification for syndromes (detector ``i`` in bit ``i % 8``
of byte ``i // 8``, :func:`twin.qec.lookup.decode_payload`), zero-padded to the frame size; and the
ground truth, the observable flips stim sampled with them. One request per shot (``per: shot``),
or per syndrome-extraction round (``per: round``: the detectors stim's coordinates place in one
round, for streams at the QEC cycle time; the last round's request carries the final data-qubit
detectors too).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import stim

from twin.qec.codes import memory_circuit
from twin.qec.lookup import syndrome_bytes


@dataclass(frozen=True)
class Workload:
    """Sampled shots of one memory experiment.

    name: label (e.g. ``"surface_d5_r5_p0.001"``); circuit: the ``stim.Circuit``;
    detectors: bool (shots, D); observables: bool (shots, K), the ground truth;
    frame_bytes: request payload size (>= ``syndrome_bytes(D)``).
    """

    name: str
    circuit: stim.Circuit
    detectors: np.ndarray
    observables: np.ndarray
    frame_bytes: int

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
        """Request payloads, uint8 (shots, frame_bytes): packed syndrome, then zero padding."""
        packed = np.packbits(self.detectors, axis=1, bitorder="little")
        out = np.zeros((self.shots, self.frame_bytes), np.uint8)
        out[:, :packed.shape[1]] = packed
        return out

    def truth_bytes(self) -> np.ndarray:
        """Ground-truth observable flips packed as replies, uint8 (shots, reply_bytes)."""
        return np.packbits(self.observables, axis=1, bitorder="little")

    def detector_rounds(self) -> np.ndarray:
        """Round index (0-based) of every detector, int (D,), from stim's time coordinate (the last
        coordinate of each detector); detectors without coordinates count as round 0."""
        coords = self.circuit.get_detector_coordinates()
        t = np.array([c[-1] if len(c) else 0.0 for _, c in sorted(coords.items())])
        _, idx = np.unique(t, return_inverse=True)
        return idx.astype(np.int64)


def sample(code: str, distance: int, rounds: int, p: float, shots: int, seed: int = 0,
           noise: str = "circuit", frame_bytes: int | None = None) -> Workload:
    """Sample ``shots`` shots of :func:`twin.qec.codes.memory_circuit` with stim (seeded).

    frame_bytes: request payload size; default the packed syndrome rounded up to a whole 16-byte
    piece (at least 16). Raises ValueError for bad arguments (naming them) or a frame too small
    for the syndrome.
    """
    if shots < 1:
        raise ValueError(f"shots {shots}: need at least 1")
    circuit = memory_circuit(code, distance, rounds, p, noise)
    det, obs = circuit.compile_detector_sampler(seed=seed).sample(shots, separate_observables=True)
    need = syndrome_bytes(circuit.num_detectors)
    if frame_bytes is None:
        frame_bytes = max(16, -(-need // 16) * 16)
    if frame_bytes < need:
        raise ValueError(f"frame_bytes {frame_bytes}: the syndrome of {circuit.num_detectors} detectors needs {need}")
    name = f"{code}_d{distance}_r{rounds}_p{p:g}"
    return Workload(name, circuit, det.astype(bool), obs.astype(bool), frame_bytes)


def logical_errors(corrections: np.ndarray, workload: Workload) -> np.ndarray:
    """Per shot, True where the correction (uint8 reply bytes (shots, reply_bytes), or bool
    (shots, K)) does not undo the sampled observable flips (any observable wrong)."""
    c = np.asarray(corrections)
    if c.dtype != bool:
        c = np.unpackbits(c, axis=1, bitorder="little", count=workload.n_observables).astype(bool)
    return (c != workload.observables).any(axis=1)
