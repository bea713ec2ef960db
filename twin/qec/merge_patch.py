"""The merged patch of a lattice-surgery merge of two distance-d surface-code patches, as a stim circuit.

Two d x d rotated surface-code patches side by side, joined by one column of seam data qubits,
are one rotated patch of ``d`` rows and ``2 d + 1`` columns while merged (Horsman, Fowler, Devitt
and Van Meter, "Surface code quantum computing by lattice surgery", New J. Phys. 14, 123011
(2012), doi:10.1088/1367-2630/14/12/123011). :func:`merged_memory_circuit` builds that patch's
memory experiment in the Z basis under the same circuit noise as stim's generated
``surface_code:rotated_memory_z`` (depolarizing ``p`` after every H and CX, on the data before
each round, flips ``p`` before each measurement and after each reset), so the merged region's
decoding problem is the one a decoder of the merge faces for its rounds: X-error chains run
between the top and bottom boundaries (distance ``d``) and the logical Z observable is the row
of ``2 d + 1`` data qubits across both halves and the seam, so every logical chain the decoder
must catch crosses the cut between the halves' decoders (spatially parallel decoding in the
style of arXiv 2403.01353: :class:`twin.qec.parallel_window.ParallelWindowDecoder` with
``axis=0``). Not modelled: the merge and split operations themselves (the seam's initialisation
and the ZZ outcome read from the seam's stabilizers); the patch is merged for all its rounds.

Qubit coordinates: data ``(2 c + 1, 2 r + 1)`` for column c, row r; measure qubits at the grid
corners ``(2 i, 2 j)``. Detector coordinates ``(x, y, round)``.
"""
from __future__ import annotations

import stim

_X_ORDER = ((-1, -1), (0, -1), (-1, 0), (0, 0))  # data offsets of an X check, CX layer by layer
_Z_ORDER = ((-1, -1), (-1, 0), (0, -1), (0, 0))  # a Z check's: hooks run along the logical they cannot shorten


def _checks(width: int, height: int) -> list[tuple[int, int, str]]:
    """The patch's checks ``(i, j, "X" | "Z")`` at grid corners: every interior corner (X when
    i + j is even), X half-checks on the top and bottom edges, Z ones on the left and right."""
    out = []
    for j in range(height + 1):
        for i in range(width + 1):
            kind = "X" if (i + j) % 2 == 0 else "Z"
            top_bottom, left_right = j in (0, height), i in (0, width)
            if top_bottom and left_right:
                continue
            if (top_bottom and kind != "X") or (left_right and kind != "Z"):
                continue
            out.append((i, j, kind))
    return out


def rectangle_memory_circuit(width: int, height: int, rounds: int, p: float) -> stim.Circuit:
    """A Z-basis memory experiment of a rotated surface-code patch of ``width`` x ``height`` data
    qubits (X distance ``height``), ``rounds`` rounds, circuit noise ``p`` (module docstring).
    Raises ValueError for a side below 2, rounds below 1 or p outside [0, 0.5)."""
    if width < 2 or height < 2 or rounds < 1 or not 0 <= p < 0.5:
        raise ValueError(f"patch {width} x {height}, {rounds} rounds, p {p}: need sides >= 2, rounds >= 1, "
                         "0 <= p < 0.5")
    data = {(c, r): r * width + c for r in range(height) for c in range(width)}
    checks = _checks(width, height)
    anc = {(i, j): len(data) + k for k, (i, j, _) in enumerate(checks)}
    xs = [anc[(i, j)] for i, j, t in checks if t == "X"]
    all_anc = [anc[(i, j)] for i, j, _ in checks]
    c = stim.Circuit()
    for (col, row), q in data.items():
        c.append("QUBIT_COORDS", [q], [2 * col + 1, 2 * row + 1])
    for i, j, _ in checks:
        c.append("QUBIT_COORDS", [anc[(i, j)]], [2 * i, 2 * j])
    dq = list(data.values())
    c.append("R", dq + all_anc)
    c.append("X_ERROR", dq + all_anc, p)
    for t in range(rounds):
        c.append("DEPOLARIZE1", dq, p)
        c.append("H", xs)
        c.append("DEPOLARIZE1", xs, p)
        for layer in range(4):
            pairs = []
            for i, j, kind in checks:
                dx, dy = (_X_ORDER if kind == "X" else _Z_ORDER)[layer]
                dat = data.get((i + dx, j + dy))
                if dat is not None:
                    pairs += [anc[(i, j)], dat] if kind == "X" else [dat, anc[(i, j)]]
            c.append("CX", pairs)
            c.append("DEPOLARIZE2", pairs, p)
        c.append("H", xs)
        c.append("DEPOLARIZE1", xs, p)
        c.append("X_ERROR", all_anc, p)
        c.append("MR", all_anc)
        c.append("X_ERROR", all_anc, p)
        n = len(all_anc)
        for k, (i, j, kind) in enumerate(checks):
            now = stim.target_rec(k - n)
            if t == 0 and kind == "Z":
                c.append("DETECTOR", [now], [2 * i, 2 * j, t])
            elif t > 0:
                c.append("DETECTOR", [now, stim.target_rec(k - 2 * n)], [2 * i, 2 * j, t])
    c.append("X_ERROR", dq, p)
    c.append("M", dq)
    nd, n = len(dq), len(all_anc)
    for k, (i, j, kind) in enumerate(checks):
        if kind != "Z":
            continue
        recs = [stim.target_rec(data[(i + dx, j + dy)] - nd) for dx, dy in _Z_ORDER if (i + dx, j + dy) in data]
        c.append("DETECTOR", recs + [stim.target_rec(k - n - nd)], [2 * i, 2 * j, rounds])
    c.append("OBSERVABLE_INCLUDE", [stim.target_rec(data[(col, 0)] - nd) for col in range(width)], 0)
    return c


def merged_memory_circuit(distance: int, rounds: int, p: float) -> stim.Circuit:
    """The merged region of two distance-``distance`` patches: a ``distance`` x ``2 distance + 1``
    patch (:func:`rectangle_memory_circuit`)."""
    return rectangle_memory_circuit(2 * distance + 1, distance, rounds, p)
