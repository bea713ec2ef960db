"""The boundary data one decoding window hands the next: the committed errors' effect across a cut.

A window that commits a correction has decided the errors on its side of a cut; an error it
commits that also flips detectors on the other side (an edge across the cut) leaves those
detectors flipped for the window that decodes them (the "artificial defects" of Skoric, Browne,
Barnes, Gillespie and Campbell, "Parallel window decoding enables scalable fault tolerant quantum
computation", Nat. Commun. 14, 7040 (2023), doi:10.1038/s41467-023-42482-1). Which detectors can
be flipped is fixed by the graph before any shot (:class:`BoundaryLink`: the detectors across the
cut that a component the sender commits flips); each shot's message is one bit per such detector
(:class:`Boundary`), so its size in bytes is known before the run: what a link between two
decoder nodes carries (``BoundaryLink.nbytes``), the interface for modelling that transfer.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.qec.dem_graph import DemGraph


@dataclass(frozen=True)
class BoundaryLink:
    """A window-to-window message's shape: ``sender`` and ``receiver`` (window names),
    ``detectors`` the global detector indices (int64 (n,), sorted) across the cut the sender's
    commits can flip. ``nbytes``: ceil(n / 8), one bit per detector."""

    sender: str
    receiver: str
    detectors: np.ndarray

    @property
    def nbytes(self) -> int:
        return -(-len(self.detectors) // 8)

    @classmethod
    def between(cls, graph: DemGraph, sender: str, commits: np.ndarray, receiver: str,
                receiver_mask: np.ndarray) -> "BoundaryLink":
        """The link from a window committing ``commits`` (bool (E,)) to one decoding the detectors
        of ``receiver_mask`` (bool (D,)): the receiver's detectors that a committed component flips."""
        d = graph.dets[np.asarray(commits, bool)].ravel()
        d = d[d >= 0]
        d = np.unique(d[np.asarray(receiver_mask, bool)[d]])
        return cls(sender, receiver, d.astype(np.int64))

    def message(self, flips: np.ndarray) -> "Boundary":
        """The boundary of one shot from the sender's flips (bool (D,): the detectors its committed
        components flip, XOR-ed)."""
        return Boundary(self, np.asarray(flips, bool)[self.detectors])


@dataclass(frozen=True)
class Boundary:
    """One shot's boundary message on ``link``: ``bits`` bool (n,), which of the link's detectors
    the sender's commits flipped."""

    link: BoundaryLink
    bits: np.ndarray

    def pack(self) -> bytes:
        """The message's bytes (``link.nbytes``; bit ``i % 8`` of byte ``i // 8`` is detector
        ``link.detectors[i]``)."""
        return np.packbits(self.bits, bitorder="little").tobytes()

    @classmethod
    def unpack(cls, link: BoundaryLink, data: bytes) -> "Boundary":
        """The message of ``link`` from its bytes. Raises ValueError for the wrong length."""
        if len(data) != link.nbytes:
            raise ValueError(f"boundary {link.sender}->{link.receiver}: {len(data)} bytes, expected {link.nbytes}")
        bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little", count=len(link.detectors))
        return cls(link, bits.astype(bool))

    def apply(self, syndrome: np.ndarray) -> None:
        """Flip the receiver's detectors the sender's commits flipped, in ``syndrome`` (bool (D,))."""
        syndrome[self.link.detectors[self.bits]] ^= True
