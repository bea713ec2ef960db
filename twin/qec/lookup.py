"""Lookup-table decoders built exactly from a detector error model.

For a model with D detectors and K observables the table has 2**D entries: entry ``s`` (detector
``i`` is bit ``i`` of ``s``) holds the observable flips (observable ``k`` is bit ``k``) that are most
likely given syndrome ``s``. The probabilities are exact: every error mechanism is independent, so
the joint distribution of (syndrome, observable flips) over all 2**(D+K) outcomes is built one
mechanism at a time (``P'[x] = (1-p) P[x] + p P[x ^ flips]``), and the table keeps, per syndrome,
the observable pattern of highest probability (ties and unreachable syndromes: the smallest pattern,
so the table is deterministic). This is maximum-likelihood decoding, which is what a lookup table in
hardware can hold for small codes (the seeds' V80 decoded repetition-3 and Steane-7 this way).

The same table feeds the Python decoder (:meth:`LookupTable.decode`), the C runtime's table function
and the RTL decoder's ROM (:meth:`LookupTable.readmemh`), so all three return the same corrections.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.exchange import contract as C

# decode_payload reads a syndrome as one little-endian integer (detector i = bit i), which is the
# contract's layout only while its syndrome bit order is lsb_first, 8 bits a byte
if (C.SYNDROME_BIT_ORDER, C.SYNDROME_BITS_PER_BYTE) != ("lsb_first", 8):
    raise ImportError(f"twin.qec.lookup implements the lsb_first syndrome layout; the contract says "
                      f"{C.SYNDROME_BIT_ORDER!r}, {C.SYNDROME_BITS_PER_BYTE} bits a byte")

MAX_DETECTORS = 20  # 2**20 entries x 4 bytes: 4 MiB; beyond this a lookup table is the wrong decoder


@dataclass(frozen=True)
class LookupTable:
    """A decoder table.

    n_detectors: D; n_observables: K (<= 32); table: uint32 array of shape (2**D,), the observable
    flips per syndrome index; name: a label (e.g. ``"rep3"``).
    """

    name: str
    n_detectors: int
    n_observables: int
    table: np.ndarray

    @staticmethod
    def pack(detectors: np.ndarray) -> np.ndarray:
        """Syndrome indices (uint32, shape (shots,)) from detection events (bool, shape (shots, D))."""
        d = np.asarray(detectors, dtype=bool)
        if d.ndim != 2:
            raise ValueError(f"detectors must be 2-D (shots, detectors), got shape {d.shape}")
        weights = (np.uint32(1) << np.arange(d.shape[1], dtype=np.uint32))
        return (d.astype(np.uint32) * weights).sum(axis=1, dtype=np.uint64).astype(np.uint32)

    def decode(self, detectors: np.ndarray) -> np.ndarray:
        """Predicted observable flips (bool, shape (shots, K)) for detection events (bool, (shots, D)).

        Raises ValueError when the number of detectors differs from the table's.
        """
        d = np.asarray(detectors, dtype=bool)
        if d.ndim != 2 or d.shape[1] != self.n_detectors:
            raise ValueError(f"table {self.name!r} decodes {self.n_detectors} detectors, got shape {d.shape}")
        flips = self.table[self.pack(d)]
        return ((flips[:, None] >> np.arange(self.n_observables, dtype=np.uint32)) & 1).astype(bool)

    def readmemh(self) -> str:
        """The table as a Verilog ``$readmemh`` file: one hex word per syndrome, address order."""
        width = max(1, (self.n_observables + 3) // 4)
        return "".join(f"{int(v):0{width}x}\n" for v in self.table)


def from_dem(dem, name: str = "lookup") -> LookupTable:
    """Build the maximum-likelihood table of a ``stim.DetectorErrorModel``.

    Works on the undecomposed model (``circuit.detector_error_model(decompose_errors=False)``);
    ``^`` separators in decomposed models are folded into one mechanism. Raises ValueError when the
    model has more than ``MAX_DETECTORS`` detectors or more than 32 observables.
    """
    D, K = dem.num_detectors, dem.num_observables
    if D > MAX_DETECTORS:
        raise ValueError(f"{name}: {D} detectors; a lookup table holds at most {MAX_DETECTORS} (use matching)")
    if K > 32:
        raise ValueError(f"{name}: {K} observables; at most 32")
    prob = np.zeros(1 << (D + K))
    prob[0] = 1.0
    idx = np.arange(prob.size)
    for inst in dem.flattened():
        if inst.type != "error":
            continue
        p = inst.args_copy()[0]
        flip = 0
        for t in inst.targets_copy():
            if t.is_relative_detector_id():
                flip ^= 1 << t.val
            elif t.is_logical_observable_id():
                flip ^= 1 << (D + t.val)
        if flip == 0 or p == 0:
            continue
        prob = (1 - p) * prob + p * prob[idx ^ flip]
    joint = prob.reshape(1 << K, 1 << D)  # [observables, syndrome]
    table = np.argmax(joint, axis=0).astype(np.uint32)  # argmax takes the first (smallest) on ties
    return LookupTable(name, D, K, table)


def for_circuit(circuit, name: str = "lookup") -> LookupTable:
    """The table for a ``stim.Circuit``'s detector error model."""
    return from_dem(circuit.detector_error_model(decompose_errors=False), name)


def syndrome_bytes(n_detectors: int) -> int:
    """Bytes a packed syndrome of ``n_detectors`` bits takes in a request payload (the contract's
    ``syndrome_bytes``: ceil(n / 8); also the bytes of a reply of ``n`` observables)."""
    return C.syndrome_bytes(n_detectors)


def decode_payload(table: LookupTable, payload: bytes) -> bytes:
    """The decoder as a served function: syndrome bytes in, correction bytes out.

    The layout is the contract's ``syndrome`` section (``twin/exchange/contract.yaml``). Request
    payload: the first ``syndrome_bytes(D)`` bytes hold the syndrome, detector ``i`` in bit
    ``i % 8`` of byte ``i // 8`` (numpy ``packbits(..., bitorder="little")``); bits at and above D
    and any further bytes are frame padding and ignored. Reply: the observable flips, observable
    ``k`` in bit ``k``, in ``syndrome_bytes(K)`` bytes, little-endian. Raises ValueError when the
    payload is shorter than the syndrome.
    """
    nb = syndrome_bytes(table.n_detectors)
    if len(payload) < nb:
        raise ValueError(f"{table.name}: payload of {len(payload)} bytes, the syndrome needs {nb}")
    s = int.from_bytes(bytes(payload[:nb]), "little") & ((1 << table.n_detectors) - 1)
    return int(table.table[s]).to_bytes(syndrome_bytes(table.n_observables), "little")


STANDARD = {
    # name: (code, distance, rounds, p): the tables the runtime, the RTL and the loop share
    "rep3": ("rep", 3, 1, 1e-3),
    "steane7": ("steane", 3, 2, 1e-3),
}


def standard_table(name: str) -> LookupTable:
    """One of the bundled tables (``rep3``: repetition-3, one round; ``steane7``: Steane [[7,1,3]],
    two rounds; both for circuit noise at p = 1e-3), built on first use and cached.
    Raises KeyError for another name."""
    if name not in _CACHE:
        from twin.qec.codes import memory_circuit
        code, d, r, p = STANDARD[name]
        _CACHE[name] = for_circuit(memory_circuit(code, d, r, p), name)
    return _CACHE[name]


_CACHE: dict[str, LookupTable] = {}
