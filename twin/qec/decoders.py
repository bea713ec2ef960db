"""Decoders as served functions: syndrome bytes in, correction bytes out.

Every decoder here takes request payloads in the contract's syndrome format
(:func:`twin.qec.lookup.decode_payload`: detector ``i`` in bit ``i % 8`` of byte ``i // 8``, bits
at and above D ignored) and returns the observable flips in ``ceil(K / 8)`` bytes. Each has two
entry points that must agree: :meth:`Decoder.decode_payload` (one frame, what a consumer does per
request) and :meth:`Decoder.decode_frames` (a batch of frames, uint8 (n, frame_bytes) ->
uint8 (n, reply_bytes); the loop engine decodes a stream's frames this way, so a matching decoder
runs PyMatching's C++ ``decode_batch`` once rather than once per shot from Python).

- :class:`LookupDecoder`: an exact maximum-likelihood table (:mod:`twin.qec.lookup`).
- :class:`MatchingDecoder`: minimum-weight perfect matching (PyMatching) on the circuit's
  detector error model.
- :class:`FunctionDecoder`: any Python function ``bytes -> bytes``.

:func:`direct_corrections` is the reference the loop is checked against: the same shots decoded
directly from stim's boolean detection events (not from the frames), with the table or with
``pymatching.Matching.decode_batch``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import stim

from twin.exchange import contract as C
from twin.qec.lookup import LookupTable, decode_payload, for_circuit, syndrome_bytes


class Decoder:
    """Base class. ``name``; ``n_detectors`` D; ``n_observables`` K; ``kind`` (cost-model key:
    ``lookup`` | ``matching`` | ``function``)."""

    name: str = "decoder"
    kind: str = "function"
    n_detectors: int = 0
    n_observables: int = 1

    @property
    def reply_bytes(self) -> int:
        """Bytes of one reply: ceil(K / 8)."""
        return syndrome_bytes(self.n_observables)

    @property
    def syndrome_bytes(self) -> int:
        """Bytes of the packed syndrome at the start of each request payload: ceil(D / 8)."""
        return syndrome_bytes(self.n_detectors)

    def decode_payload(self, payload: bytes) -> bytes:
        """One request payload -> its reply bytes. Raises ValueError for a short payload."""
        raise NotImplementedError

    def decode_frames(self, frames: np.ndarray) -> np.ndarray:
        """Frames uint8 (n, frame_bytes) -> replies uint8 (n, reply_bytes). Default: one call of
        :meth:`decode_payload` per frame."""
        out = np.zeros((len(frames), self.reply_bytes), np.uint8)
        for i, f in enumerate(frames):
            out[i] = np.frombuffer(self.decode_payload(f.tobytes()), np.uint8)
        return out

    def _syndromes(self, frames: np.ndarray) -> np.ndarray:
        f = np.ascontiguousarray(frames, dtype=np.uint8)
        if f.ndim != 2 or f.shape[1] < self.syndrome_bytes:
            raise ValueError(f"{self.name}: frames of shape {f.shape}; each needs {self.syndrome_bytes} syndrome bytes")
        s = f[:, :self.syndrome_bytes].copy()
        tail = self.n_detectors % 8
        if tail:
            s[:, -1] &= (1 << tail) - 1  # bits at and above D are padding
        return s


class LookupDecoder(Decoder):
    """A :class:`twin.qec.lookup.LookupTable` as a decoder."""

    kind = "lookup"

    def __init__(self, table: LookupTable):
        self.table = table
        self.name = table.name
        self.n_detectors = table.n_detectors
        self.n_observables = table.n_observables

    def decode_payload(self, payload: bytes) -> bytes:
        """See :func:`twin.qec.lookup.decode_payload`."""
        return decode_payload(self.table, payload)

    def decode_frames(self, frames: np.ndarray) -> np.ndarray:
        """Vectorised table lookup on the frames' syndrome bytes."""
        s = self._syndromes(frames).astype(np.uint32)
        idx = (s << (8 * np.arange(s.shape[1], dtype=np.uint32))).sum(axis=1, dtype=np.uint64).astype(np.int64)
        flips = self.table.table[idx]
        return np.stack([(flips >> (8 * b)) & 0xFF for b in range(self.reply_bytes)], axis=1).astype(np.uint8)


class MatchingDecoder(Decoder):
    """Minimum-weight perfect matching with PyMatching on ``circuit``'s detector error model
    (decomposed errors). Raises ValueError if the model is not decomposable into a graph."""

    kind = "matching"

    def __init__(self, circuit: stim.Circuit, name: str = "matching"):
        import pymatching
        self.name = name
        self.n_detectors = circuit.num_detectors
        self.n_observables = circuit.num_observables
        self.matching = pymatching.Matching.from_detector_error_model(
            circuit.detector_error_model(decompose_errors=True))

    def decode_payload(self, payload: bytes) -> bytes:
        """One frame through ``Matching.decode`` (slow path: one Python call per shot)."""
        if len(payload) < self.syndrome_bytes:
            raise ValueError(f"{self.name}: payload of {len(payload)} bytes, the syndrome needs {self.syndrome_bytes}")
        s = self._syndromes(np.frombuffer(bytes(payload), np.uint8)[None, :])
        return self.matching.decode_batch(s, bit_packed_shots=True, bit_packed_predictions=True)[0].tobytes()

    def decode_frames(self, frames: np.ndarray) -> np.ndarray:
        """All frames in one ``decode_batch`` call on the bit-packed syndrome bytes as they sit in
        the frames (no unpacking)."""
        s = self._syndromes(frames)
        return np.ascontiguousarray(self.matching.decode_batch(s, bit_packed_shots=True,
                                                               bit_packed_predictions=True), dtype=np.uint8)


class FunctionFailed(ValueError):
    """A user decoder function failed on one request: it raised, or its reply is not ``reply_bytes``
    bytes. ``payload``: the request payload it was given (bytes); ``problem``: what went wrong (one
    line). A ValueError, so a consumer in the event model answers it with status ``function_failed``
    as the runtime library does; :func:`twin.qec.study.run_decode_study` turns it into a ConfigError
    naming ``decode.function`` and the shot."""

    def __init__(self, payload: bytes, problem: str):
        self.payload, self.problem = bytes(payload), problem
        super().__init__(problem)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:160]}" if text else type(e).__name__


class FunctionDecoder(Decoder):
    """A user function ``fn(payload: bytes) -> bytes`` (syndrome bytes in, correction bytes out)
    for a code with ``n_detectors`` detectors and ``n_observables`` observables. The reply may be
    any bytes-like object (bytes, bytearray, memoryview, a uint8 array) of exactly ``reply_bytes``
    bytes. Raises :class:`FunctionFailed` (from :meth:`decode_payload`) when the function raises or
    its reply is None, a str, a number, or of the wrong length."""

    kind = "function"

    def __init__(self, fn: Callable[[bytes], bytes], n_detectors: int, n_observables: int, name: str | None = None):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "function")
        self.n_detectors = n_detectors
        self.n_observables = n_observables

    def decode_payload(self, payload: bytes) -> bytes:
        """``fn(payload)``, checked: bytes-like, ``reply_bytes`` long. Raises :class:`FunctionFailed`."""
        payload = bytes(payload)
        try:
            r = self.fn(payload)
        except Exception as e:  # the user's code: any exception is its failure on this request
            raise FunctionFailed(payload, f"it raised {_first_line(e)}") from e
        if r is None or isinstance(r, (str, int, float, complex)):
            return self._bad_type(payload, r)
        try:
            r = bytes(memoryview(r).cast("B")) if not isinstance(r, (bytes, bytearray)) else bytes(r)
        except (TypeError, ValueError):
            return self._bad_type(payload, r)
        if len(r) != self.reply_bytes:
            raise FunctionFailed(payload, f"it returned {len(r)} bytes, expected {self._expected} "
                                          f"(one bit per logical observable, {self.n_observables})")
        return r

    def _bad_type(self, payload: bytes, r) -> bytes:
        text = repr(r)
        text = text if len(text) <= 40 else text[:37] + "..."
        got = "None" if r is None else f"{type(r).__name__} {text}"
        raise FunctionFailed(payload, f"it returned {got}, expected bytes ({self._expected})")

    @property
    def _expected(self) -> str:
        return f"{self.reply_bytes} byte" + ("s" if self.reply_bytes != 1 else "")


def make_decoder(kind: str, circuit: stim.Circuit, name: str = "") -> Decoder:
    """``lookup`` (exact table; D <= 20) or ``matching`` (PyMatching) for ``circuit``.
    Raises ValueError for another kind or a table too large."""
    if kind == "lookup":
        return LookupDecoder(for_circuit(circuit, name or "lookup"))
    if kind == "matching":
        return MatchingDecoder(circuit, name or "matching")
    raise ValueError(f"decoder {kind!r}: expected 'lookup' or 'matching'")


def direct_corrections(decoder: Decoder, detectors: np.ndarray) -> np.ndarray:
    """The reference: ``decoder``'s algorithm run directly on stim's boolean detection events
    (bool (shots, D)), not on the frames: ``LookupTable.decode`` for a table,
    ``Matching.decode_batch`` on unpacked events for matching, the function per shot otherwise.
    Returns replies packed like the loop's, uint8 (shots, reply_bytes)."""
    d = np.asarray(detectors, dtype=bool)
    if isinstance(decoder, LookupDecoder):
        flips = decoder.table.decode(d)
    elif isinstance(decoder, MatchingDecoder):
        flips = decoder.matching.decode_batch(d.astype(np.uint8)).astype(bool)
    else:
        packed = np.packbits(d, axis=1, bitorder=C.SYNDROME_NUMPY_BITORDER)
        return np.stack([np.frombuffer(decoder.decode_payload(row.tobytes()), np.uint8) for row in packed])
    return np.packbits(flips, axis=1, bitorder=C.SYNDROME_NUMPY_BITORDER)


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
