"""The logical error rate of a machine's step with its stalls, decoded for real on a sample.

A patch that stalls after a T gate does not stop its error correction: it streams rounds until the
correction is back (:mod:`twin.machine.engine`), so a stall costs the logical error of those extra
rounds. Each case is a memory experiment of the patch's code, distance and circuit noise
(:func:`twin.qec.codes.memory_circuit`) sampled by stim and decoded by PyMatching, shot by shot:

- ``step``: one logical step, ``d`` rounds (no stall);
- ``step+mean stall``: ``d`` plus the run's mean stall per logical step (every T gate's stall over
  every step completed), rounded to whole rounds;
- ``T step+p99 stall``: ``d`` plus the 99th percentile of the T gates' stalls.

Returns the rows with their logical error rate per step and its Wilson 95 % interval
(``scipy.stats.binomtest``), and the same as ``sinter.TaskStats`` (stats.csv, sinter's format).
"""
from __future__ import annotations

import hashlib
import json
import time

import numpy as np


def stall_cases(model) -> list[tuple[str, int]]:
    """(case, rounds) of the decoded sample for a finished run ``model`` (module docstring)."""
    d = model.d
    st = np.asarray(model.t_stall, np.int64)
    steps = int(model.steps.sum())
    mean = int(round(st.sum() / steps)) if steps else 0
    p99 = int(np.percentile(st, 99, method="inverted_cdf")) if st.size else 0
    return [("step", d), ("step+mean stall", d + mean), ("T step+p99 stall", d + p99)]


def step_ler(m, model, shots: int, seed: int) -> tuple[list[dict], list]:
    """The decoded sample of machine ``m`` after run ``model``: (rows, sinter rows)."""
    import pymatching
    import sinter
    from scipy.stats import binomtest

    from twin.qec.codes import memory_circuit
    rows, stats = [], []
    for i, (case, rounds) in enumerate(stall_cases(model)):
        circuit = memory_circuit(m.code, m.distance, rounds, m.p)
        det, obs = circuit.compile_detector_sampler(seed=(seed * 7919 + i) % 2**63).sample(
            shots, separate_observables=True)
        matching = pymatching.Matching.from_detector_error_model(circuit.detector_error_model(decompose_errors=True))
        t0 = time.perf_counter()
        errors = int((matching.decode_batch(det) != obs).any(axis=1).sum())
        seconds = time.perf_counter() - t0
        ci = binomtest(errors, shots).proportion_ci(confidence_level=0.95, method="wilson")
        rows.append({"case": case, "rounds": rounds, "shots": shots, "errors": errors, "ler": errors / shots,
                     "ci": [float(ci.low), float(ci.high)]})
        meta = {"code": m.code, "d": m.distance, "rounds": rounds, "p": m.p, "noise": "circuit", "case": case}
        sid = hashlib.sha256(json.dumps({"circuit": str(circuit), "decoder": "pymatching", "json_metadata": meta},
                                        sort_keys=True).encode()).hexdigest()
        stats.append(sinter.TaskStats(strong_id=sid, decoder="pymatching", json_metadata=meta, shots=shots,
                                      errors=errors, discards=0, seconds=seconds))
        del det, obs, matching  # one case's sample and graph at a time (twin.machine.memory estimates one)
    return rows, stats
