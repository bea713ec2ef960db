"""Memory-experiment circuits for the codes the twin decodes (stim's generated circuits).

Codes: ``rep`` (repetition code, stim ``repetition_code:memory``), ``steane`` (the Steane [[7,1,3]]
code as stim's distance-3 ``color_code:memory_xyz``) and ``surface`` (``surface_code:rotated_memory_z``);
and the bivariate bicycle qLDPC codes ``bb72`` ... ``bb288`` (:mod:`twin.qec.bb`, phenomenological or
code-capacity noise only).
"""
from __future__ import annotations

import stim

CODES = {"rep": "repetition_code:memory", "steane": "color_code:memory_xyz",
         "surface": "surface_code:rotated_memory_z"}


def code_names() -> list[str]:
    """Every code :func:`memory_circuit` builds: stim's generated ones, then the BB codes."""
    from twin.qec.bb import BB_CODES
    return [*CODES, *BB_CODES]


def memory_circuit(code: str, distance: int, rounds: int, p: float, noise: str = "circuit") -> stim.Circuit:
    """A noisy memory experiment.

    code: ``rep`` | ``steane`` | ``surface`` | a BB code (``bb72``, ``bb90``, ``bb108``, ``bb144``,
    ``bb288``: :func:`twin.qec.bb.bb_memory_circuit`, whose distance is the code's own; ``distance``
    is not used; noise ``phenomenological`` or ``code_capacity``); distance: code distance (``steane`` needs 3);
    rounds: syndrome-extraction rounds (stim's color code needs >= 2); p: physical error rate
    (0 <= p < 0.5). noise: ``circuit`` (depolarizing after every Clifford and on data before each
    round, flips before measurement and after reset, all at p) or ``code_capacity`` (data
    depolarization before each round only).
    Raises ValueError naming the bad argument.
    """
    from twin.qec.bb import BB_CODES, bb_memory_circuit
    if code in BB_CODES:
        return bb_memory_circuit(code, rounds, p, noise)
    if code not in CODES:
        raise ValueError(f"code {code!r}: expected one of {', '.join(code_names())}")
    if code == "steane" and distance != 3:
        raise ValueError(f"distance {distance}: the Steane code has distance 3")
    if distance < 2 or rounds < 1:
        raise ValueError(f"distance {distance}, rounds {rounds}: need distance >= 2 and rounds >= 1")
    if not 0 <= p < 0.5:
        raise ValueError(f"p {p}: physical error rate must be in [0, 0.5)")
    if noise not in ("circuit", "code_capacity"):
        raise ValueError(f"noise {noise!r}: stim's generated {code} circuits take 'circuit' or 'code_capacity'")
    kw = dict(before_round_data_depolarization=p)
    if noise == "circuit":
        kw.update(after_clifford_depolarization=p, before_measure_flip_probability=p, after_reset_flip_probability=p)
    return stim.Circuit.generated(CODES[code], distance=distance, rounds=rounds, **kw)
