"""The one decoder interface: bit-packed detection events in, bit-packed observable flips out.

Every decoder implements :meth:`Decoder.decode_shots_bit_packed`: uint8 (shots, ceil(D / 8)) ->
uint8 (shots, ceil(K / 8)), detector ``i`` in bit ``i % 8`` of byte ``i // 8`` and observable ``k``
in bit ``k % 8`` of byte ``k // 8`` (numpy ``bitorder="little"``). That is the layout of stim's
``compile_detector_sampler().sample(bit_packed=True)``, of sinter's
``CompiledDecoder.decode_shots_bit_packed`` and of the contract's ``syndrome`` section
(``twin/exchange/contract.yaml``), so the same array goes to all three without conversion.

The consumer side's entry points are thin adapters over it, not a second decoding path:
:meth:`Decoder.decode_frames` (request frames uint8 (n, frame_bytes): the syndrome bytes are cut
out and the bits at and above D cleared) and :meth:`Decoder.decode_payload` (one payload, bytes).
"""
from __future__ import annotations

import numpy as np

from twin.exchange import contract as C
from twin.qec.lookup import syndrome_bytes


class DecoderFailed(ValueError):
    """A decoder answered a batch with an array of the wrong shape (a user's or a sinter decoder):
    :func:`twin.studies.decode.run_decode_study` turns it into a ConfigError naming ``decode.decoder``."""


class Decoder:
    """Base class. ``name``; ``n_detectors`` D; ``n_observables`` K; ``kind`` (the cost-model key,
    :data:`twin.qec.cost.MODEL_NS`: ``lookup`` | ``matching`` | ``function`` | ``bposd`` | ...).

    A subclass implements :meth:`decode_shots_bit_packed` only (it must be deterministic in the
    syndrome: the loop decodes a stream's distinct syndromes once). It may override
    :meth:`reference` with an independent path on boolean events (the lookup table and PyMatching
    do), which the card checks the loop's replies against."""

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

    def decode_shots_bit_packed(self, dets: np.ndarray) -> np.ndarray:
        """THE interface: uint8 (shots, ceil(D/8)) -> uint8 (shots, ceil(K/8)), bits little-endian
        within a byte; bits at and above D are zero."""
        raise NotImplementedError

    def decode_frames(self, frames: np.ndarray) -> np.ndarray:
        """Frames uint8 (n, frame_bytes >= ceil(D/8)) -> replies uint8 (n, reply_bytes): the
        syndrome bytes of each frame (padding bits cleared) through :meth:`decode_shots_bit_packed`.
        Raises ValueError for frames too short for the syndrome."""
        out = np.ascontiguousarray(self.decode_shots_bit_packed(self._syndromes(frames)), dtype=np.uint8)
        if out.shape != (len(frames), self.reply_bytes):
            raise DecoderFailed(f"decoded {len(frames)} shots into an array of shape {out.shape}, expected "
                                f"({len(frames)}, {self.reply_bytes}): one row of ceil(K/8) bytes per shot")
        return out

    def decode_payload(self, payload: bytes) -> bytes:
        """One request payload -> its reply bytes (:meth:`decode_frames` of one frame). Raises
        ValueError for a payload shorter than the syndrome."""
        if len(payload) < self.syndrome_bytes:
            raise ValueError(f"{self.name}: payload of {len(payload)} bytes, the syndrome needs {self.syndrome_bytes}")
        return self.decode_frames(np.frombuffer(bytes(payload), np.uint8)[None, :])[0].tobytes()

    def reference(self, detectors: np.ndarray) -> np.ndarray:
        """The decoder run directly on stim's boolean detection events, bool (shots, D) -> replies
        uint8 (shots, reply_bytes). Default: packed and given to :meth:`decode_shots_bit_packed`."""
        d = np.asarray(detectors, dtype=bool)
        packed = np.packbits(d, axis=1, bitorder=C.SYNDROME_NUMPY_BITORDER)
        out = np.ascontiguousarray(self.decode_shots_bit_packed(packed), dtype=np.uint8)
        if out.shape != (len(d), self.reply_bytes):
            raise DecoderFailed(f"decoded {len(d)} shots into an array of shape {out.shape}, expected "
                                f"({len(d)}, {self.reply_bytes}): one row of ceil(K/8) bytes per shot")
        return out

    def syndromes(self, frames: np.ndarray) -> np.ndarray:
        """The syndrome rows :meth:`decode_frames` gives the decoder: uint8 (n, ceil(D/8)) cut from
        frames uint8 (n, frame_bytes), bits at and above D cleared. Raises ValueError for short frames."""
        return self._syndromes(frames)

    def _syndromes(self, frames: np.ndarray) -> np.ndarray:
        f = np.ascontiguousarray(frames, dtype=np.uint8)
        if f.ndim != 2 or f.shape[1] < self.syndrome_bytes:
            raise ValueError(f"{self.name}: frames of shape {f.shape}; each needs {self.syndrome_bytes} syndrome bytes")
        s = f[:, :self.syndrome_bytes].copy()
        tail = self.n_detectors % 8
        if tail:
            s[:, -1] &= (1 << tail) - 1  # bits at and above D are padding
        return s


def pack_bits(flips: np.ndarray) -> np.ndarray:
    """bool (shots, K) -> uint8 (shots, ceil(K/8)), observable ``k`` in bit ``k % 8`` of byte ``k // 8``."""
    return np.packbits(np.asarray(flips, dtype=bool), axis=1, bitorder=C.SYNDROME_NUMPY_BITORDER)


def unpack_bits(packed: np.ndarray, count: int) -> np.ndarray:
    """uint8 (shots, ceil(count/8)) -> uint8 0/1 (shots, count): the inverse of :func:`pack_bits`."""
    return np.unpackbits(np.asarray(packed, np.uint8), axis=1, bitorder=C.SYNDROME_NUMPY_BITORDER, count=count)
