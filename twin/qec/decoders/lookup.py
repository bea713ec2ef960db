"""The exact maximum-likelihood table (:mod:`twin.qec.lookup`) as a registry decoder (``lookup``)."""
from __future__ import annotations

import numpy as np

from twin.qec.decoders.base import Decoder, pack_bits
from twin.qec.lookup import LookupTable


class LookupDecoder(Decoder):
    """A :class:`twin.qec.lookup.LookupTable` as a decoder (D <= 20, K <= 32)."""

    kind = "lookup"

    def __init__(self, table: LookupTable):
        self.table = table
        self.name = table.name
        self.n_detectors = table.n_detectors
        self.n_observables = table.n_observables

    def decode_shots_bit_packed(self, dets: np.ndarray) -> np.ndarray:
        """Each row's syndrome bytes as one little-endian index into the table; the entry's low
        ``reply_bytes`` bytes, little-endian."""
        d = np.asarray(dets, np.uint8)
        idx = np.zeros(len(d), np.uint32)
        for j in range(d.shape[1]):
            idx |= d[:, j].astype(np.uint32) << np.uint32(8 * j)
        idx &= np.uint32((1 << self.n_detectors) - 1)
        flips = self.table.table[idx].astype("<u4")
        return np.ascontiguousarray(flips.view(np.uint8).reshape(len(d), 4)[:, :self.reply_bytes])

    def reference(self, detectors: np.ndarray) -> np.ndarray:
        """:meth:`LookupTable.decode` on the boolean events (the table's own path), packed."""
        return pack_bits(self.table.decode(np.asarray(detectors, dtype=bool)))
