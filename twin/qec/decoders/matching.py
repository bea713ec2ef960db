"""Minimum-weight perfect matching (PyMatching) as a registry decoder (``matching``)."""
from __future__ import annotations

import numpy as np
import stim

from twin.qec.decoders.base import Decoder, pack_bits


class MatchingDecoder(Decoder):
    """PyMatching on the decomposed detector error model of ``model`` (a ``stim.Circuit``, or a
    ``stim.DetectorErrorModel`` whose errors have at most two detectors a component). Raises
    ValueError (stim's or PyMatching's) when the model has no matching graph."""

    kind = "matching"

    def __init__(self, model: stim.Circuit | stim.DetectorErrorModel, name: str = "matching"):
        import pymatching
        dem = model.detector_error_model(decompose_errors=True) if isinstance(model, stim.Circuit) else model
        self.name = name
        self.n_detectors = dem.num_detectors
        self.n_observables = dem.num_observables
        self.matching = pymatching.Matching.from_detector_error_model(dem)

    def decode_shots_bit_packed(self, dets: np.ndarray) -> np.ndarray:
        """One ``Matching.decode_batch`` call on the bit-packed rows (no unpacking)."""
        return self.matching.decode_batch(np.ascontiguousarray(dets, np.uint8), bit_packed_shots=True,
                                          bit_packed_predictions=True)

    def reference(self, detectors: np.ndarray) -> np.ndarray:
        """``Matching.decode_batch`` on the unpacked events (PyMatching's other input path), packed."""
        d = np.asarray(detectors, dtype=bool)
        return pack_bits(self.matching.decode_batch(d.astype(np.uint8)).astype(bool))


STANDARD_MATCHING = {
    # name: (code, distance, rounds, p): the matching decoders served by function id (twin.runtime.functions)
    "surface5": ("surface", 5, 5, 1e-3),
}


def standard_matching(name: str) -> MatchingDecoder:
    """A bundled matching decoder (``surface5``: rotated surface code d=5, 5 rounds, circuit noise
    p = 1e-3), built on first use and cached. Raises KeyError for another name."""
    if name not in _MATCHING:
        from twin.qec.codes import memory_circuit
        code, d, r, p = STANDARD_MATCHING[name]
        _MATCHING[name] = MatchingDecoder(memory_circuit(code, d, r, p), name)
    return _MATCHING[name]


_MATCHING: dict[str, MatchingDecoder] = {}
