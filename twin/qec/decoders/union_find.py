"""The union-find decoder (:mod:`twin.qec.union_find`) as a registry decoder (``union_find``)."""
from __future__ import annotations

import numpy as np

from twin.qec.decoders.base import Decoder
from twin.qec.union_find import UfGraph


class UnionFindDecoder(Decoder):
    """The union-find decoder (registry name ``union_find``) on a model's graph: each distinct
    syndrome of a batch decoded once by :meth:`UfGraph.decode_one`."""

    kind = "union_find"

    def __init__(self, graph: UfGraph, name: str = "union_find"):
        self.graph = graph
        self.name = name
        self.n_detectors = graph.n_detectors
        self.n_observables = graph.n_observables

    def decode_shots_bit_packed(self, dets: np.ndarray) -> np.ndarray:
        """uint8 (shots, ceil(D/8)) -> uint8 (shots, ceil(K/8)), little-endian bits."""
        d = np.ascontiguousarray(dets, np.uint8).reshape(len(dets), -1)
        rows, inv = np.unique(d, axis=0, return_inverse=True)
        events = np.unpackbits(rows, axis=1, bitorder="little", count=self.n_detectors)
        corr = np.array([self.graph.decode_one(r) for r in events], dtype="<u4")
        out = corr.view(np.uint8).reshape(len(rows), 4)[:, :self.reply_bytes]
        return np.ascontiguousarray(out[np.asarray(inv).reshape(-1)])
