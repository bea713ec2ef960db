"""Decoders behind one interface (:mod:`.base`): bit-packed detection events in, bit-packed
observable flips out, uint8 (shots, ceil(D/8)) -> uint8 (shots, ceil(K/8)), as stim samples them and
sinter's ``CompiledDecoder.decode_shots_bit_packed`` takes them.

- :mod:`.registry`: the named decoders (``lookup``, ``matching``, ``function``, ``bposd``,
  ``tesseract``, ``relay_bp``; ``sinter:pkg.module:Class`` for any ``sinter.Decoder``).
- :mod:`.lookup` (exact table), :mod:`.matching` (PyMatching), :mod:`.function` (a user's Python
  or C function), :mod:`.sinter_adapter` (any ``sinter.Decoder``: BP+OSD, Tesseract, Relay-BP).

:func:`direct_corrections` is the reference the loop is checked against: the decoder run directly on
stim's boolean detection events (:meth:`Decoder.reference`), not on the frames.
"""
from __future__ import annotations

import numpy as np
import stim

from twin.qec.decoders.base import Decoder
from twin.qec.decoders.function import FunctionDecoder, FunctionFailed, c_function
from twin.qec.decoders.lookup import LookupDecoder
from twin.qec.decoders.matching import STANDARD_MATCHING, MatchingDecoder, standard_matching
from twin.qec.decoders.registry import REGISTRY, build, names, register
from twin.qec.decoders.sinter_adapter import SinterDecoder

__all__ = ["Decoder", "FunctionDecoder", "FunctionFailed", "LookupDecoder", "MatchingDecoder", "SinterDecoder",
           "REGISTRY", "STANDARD_MATCHING", "build", "c_function", "direct_corrections", "make_decoder", "names",
           "register", "standard_matching"]


def make_decoder(kind: str, model: stim.Circuit | stim.DetectorErrorModel, name: str = "", **kw) -> Decoder:
    """The registry's decoder ``kind`` built for ``model`` (:func:`twin.qec.decoders.registry.build`).
    Raises ValueError for an unknown name or a decoder that cannot be built (e.g. a table too large)."""
    return build(kind, model, name or kind, **kw)


def direct_corrections(decoder: Decoder, detectors: np.ndarray) -> np.ndarray:
    """The reference: ``decoder`` run directly on stim's boolean detection events (bool (shots, D)),
    not on the frames (:meth:`Decoder.reference`). Returns uint8 (shots, reply_bytes)."""
    return decoder.reference(detectors)
