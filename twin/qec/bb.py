"""Bivariate bicycle (BB) qLDPC codes and their memory experiments as stim circuits.

The codes of Bravyi et al., "High-threshold and low-overhead fault-tolerant quantum memory", Nature
627, 778 (2024), Table 3: with ``x = S_l (x) I_m`` and ``y = I_l (x) S_m`` (``S_k`` the k x k cyclic
shift), ``A`` and ``B`` sums of three monomials, the CSS code has ``H_X = [A | B]`` and
``H_Z = [B^T | A^T]`` on ``n = 2 l m`` data qubits. Built here from the published polynomials
(not with the ``qldpc`` package, which pulls in cvxpy, galois and sympy); ``k`` is checked against
the published value when a code is built (GF(2) ranks from ``ldpc.mod2``).

The memory experiment (:func:`bb_memory_circuit`) is NOT the paper's depth-8 syndrome-extraction
circuit: it is a phenomenological noise model. Data qubits start in ``|0>``; each of ``rounds``
rounds applies ``DEPOLARIZE1(p)`` to every data qubit and then measures every Z check directly with
``MPP`` whose result flips with probability ``p``; the data are read out with ``M`` flipping with
probability ``p``. Detectors: round 0 each Z check alone (deterministic from ``|0>``), later rounds
each check against its previous round, and the final readout's parity of each check against its
last measurement. Observables: a basis of the logical Z operators (``k`` of them: kernel of ``H_X``
less the row space of ``H_Z``). X checks are not measured (in a Z-basis memory they only see Z
errors, which flip no Z observable). Detector coordinates ``(check, 0, round)``: the last is the
round, as :meth:`twin.qec.workload.Workload.detector_rounds` reads it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import stim


@dataclass(frozen=True)
class BBCode:
    """A bivariate bicycle code. l, m: the two cyclic dimensions; a, b: the monomials of A and B as
    (power of x, power of y); n, k, d: the published parameters [[n, k, d]]."""

    name: str
    l: int  # noqa: E741 (the paper's name)
    m: int
    a: tuple
    b: tuple
    n: int
    k: int
    d: int


X3_Y_Y2 = ((3, 0), (0, 1), (0, 2))   # A = x^3 + y + y^2
Y3_X_X2 = ((0, 3), (1, 0), (2, 0))   # B = y^3 + x + x^2
BB_CODES = {  # Bravyi et al. 2024, Table 3
    "bb72": BBCode("bb72", 6, 6, X3_Y_Y2, Y3_X_X2, 72, 12, 6),
    "bb90": BBCode("bb90", 15, 3, ((9, 0), (0, 1), (0, 2)), ((0, 0), (2, 0), (7, 0)), 90, 8, 10),
    "bb108": BBCode("bb108", 9, 6, X3_Y_Y2, Y3_X_X2, 108, 8, 10),
    "bb144": BBCode("bb144", 12, 6, X3_Y_Y2, Y3_X_X2, 144, 12, 12),   # the "gross" code
    "bb288": BBCode("bb288", 12, 12, ((3, 0), (0, 2), (0, 7)), Y3_X_X2, 288, 12, 18),
}


def _mono(code: BBCode, px: int, py: int) -> np.ndarray:
    sx = np.roll(np.eye(code.l, dtype=np.uint8), px, axis=1)
    sy = np.roll(np.eye(code.m, dtype=np.uint8), py, axis=1)
    return np.kron(sx, sy)


def check_matrices(code: BBCode) -> tuple[np.ndarray, np.ndarray]:
    """``(H_X, H_Z)``, uint8 0/1 of shape (l m, 2 l m) each."""
    A = sum(_mono(code, *t) for t in code.a) % 2
    B = sum(_mono(code, *t) for t in code.b) % 2
    return np.hstack([A, B]).astype(np.uint8), np.hstack([B.T, A.T]).astype(np.uint8)


def logical_z(code: BBCode) -> np.ndarray:
    """A basis of the logical Z operators, uint8 (k, n): vectors of the kernel of ``H_X`` that are
    independent of the rows of ``H_Z``. Raises ValueError when their number is not the published k."""
    from ldpc.mod2 import nullspace, rank
    hx, hz = check_matrices(code)
    ker = nullspace(hx).toarray().astype(np.uint8) % 2
    rows, r = hz.copy(), rank(hz)
    out = []
    for v in ker:
        trial = np.vstack([rows, v])
        if rank(trial) > r:
            rows, r = trial, r + 1
            out.append(v)
    if len(out) != code.k:
        raise ValueError(f"{code.name}: found {len(out)} logical qubits, the paper says {code.k}")
    return np.array(out, np.uint8)


def bb_memory_circuit(name: str, rounds: int, p: float, noise: str = "phenomenological") -> stim.Circuit:
    """The Z-basis memory experiment of BB code ``name`` (module docstring). rounds >= 1; p in
    [0, 0.5); noise: ``phenomenological`` (data depolarization and measurement flips, both p) or
    ``code_capacity`` (data depolarization only; measurements exact). Raises ValueError naming the
    bad argument."""
    if name not in BB_CODES:
        raise ValueError(f"code {name!r}: expected one of {', '.join(BB_CODES)}")
    if rounds < 1 or not 0 <= p < 0.5:
        raise ValueError(f"rounds {rounds}, p {p}: need rounds >= 1 and 0 <= p < 0.5")
    if noise not in ("phenomenological", "code_capacity"):
        raise ValueError(f"noise {noise!r}: a BB code is built with 'phenomenological' or 'code_capacity' "
                         "noise (no circuit-level syndrome extraction)")
    code = BB_CODES[name]
    _, hz = check_matrices(code)
    lz = logical_z(code)
    q = p if noise == "phenomenological" else 0.0
    nz, n = hz.shape
    c = stim.Circuit()
    c.append("R", range(n))
    mpp = []
    for row in hz:
        qs = np.flatnonzero(row)
        for j, qb in enumerate(qs):
            if j:
                mpp.append(stim.target_combiner())
            mpp.append(stim.target_z(int(qb)))
    for r in range(rounds):
        c.append("DEPOLARIZE1", range(n), p)
        c.append("MPP", mpp, q)
        for i in range(nz):
            recs = [stim.target_rec(-nz + i)] + ([stim.target_rec(-2 * nz + i)] if r else [])
            c.append("DETECTOR", recs, [i, 0, r])
    c.append("M", range(n), q)
    for i in range(nz):
        recs = [stim.target_rec(-n + int(qb)) for qb in np.flatnonzero(hz[i])]
        c.append("DETECTOR", recs + [stim.target_rec(-n - nz + i)], [i, 0, rounds])
    for k, row in enumerate(lz):
        c.append("OBSERVABLE_INCLUDE", [stim.target_rec(-n + int(qb)) for qb in np.flatnonzero(row)], k)
    return c
