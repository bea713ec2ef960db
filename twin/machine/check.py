"""The cost draw checked against real decodes: a job-sized memory experiment timed per call here.

A machine job's decoding time is a call of the shipped per-call file scaled by detectors
(:mod:`twin.machine.cost`, an assumption). ``check: {calls: N}`` tests that assumption on this
host: a memory experiment of the patch's code and distance over a window's rounds (the machine's
most frequent job: a streaming window, or an A window) is sampled by stim and decoded by the same
decoder one request per call, warm, timer cost removed, natively and through Python
(:func:`twin.qec.percall.measure`), and its quantiles are printed beside the model's draw for that
job on the measuring host class (no carrying factor). The ratio says how far the linear scaling
carries from the file's workload to the job's.
"""
from __future__ import annotations

import numpy as np

from twin.machine.windows import STREAM, A


def cost_check(m, cost, calls: int, seed: int, progress=None) -> dict:
    """Measure ``calls`` decodes of machine ``m``'s window (module docstring) and compare them with
    ``cost`` (:class:`twin.machine.cost.JobCost`, measured). Returns the check's document."""
    from twin.machine.windows import Geometry
    from twin.qec import percall as P
    from twin.qec.decoders import make_decoder
    from twin.qec.workload import sample
    geo = Geometry(m.distance, m.window.kind, m.window.commit, m.window.buffer, m.cycles)
    kind = STREAM if geo.kind == "streaming" else A
    rounds = geo.decoded_rounds(kind, 1)
    w = sample(m.code, m.distance, rounds, m.p, max(calls, 2000), seed=seed)
    decoder = make_decoder(m.decoder.name, w.circuit, name=f"machine_check_{m.decoder.name}")
    events = w.cumulative_detectors().sum(axis=1).astype(np.int64)
    s = P.measure(decoder, decoder.syndromes(w.frames()), events, calls, warmup=min(1000, calls), seed=seed,
                  progress=progress)
    det = geo.detectors(kind, 1)
    measured = s.native_ns if m.decoder.cost.call == "native" else s.python_ns.astype(np.float64)
    model = cost.sample * det / cost.file_detectors
    q = (50, 90, 99)
    got = {f"p{k}_ns": round(float(np.percentile(measured, k)), 1) for k in q}
    want = {f"p{k}_ns": round(float(np.percentile(model, k)), 1) for k in q}
    return {"job": {"kind": "streaming window" if kind == STREAM else "A window", "rounds": rounds,
                    "detectors": det}, "calls": calls, "call": m.decoder.cost.call,
            "measured_here": got, "model": want,
            "model_over_measured_p50": round(want["p50_ns"] / got["p50_ns"], 3) if got["p50_ns"] else None,
            "binding_ns_p50": round(float(np.percentile(s.binding_ns, 50)), 1)}
