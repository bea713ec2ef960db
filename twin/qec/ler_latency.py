"""The loop's latency as logical error: a feedback run's program metrics and the LER its stalls cost.

:func:`feedback_point` reads one decode run of a circuit whose gates wait for the loop
(:mod:`twin.qec.feedback`) the way the field reports it:

- ``reaction``: the loop's reaction time (a request's last syndrome round measured -> its
  correction back at the control system), ns percentiles;
- ``reaction_to_applied``: last syndrome measured -> correction applied (the gate's edge, after
  the stall), for the requests a gate waits for;
- ``stall``: the program idling before each waiting request (the gate's applied edge minus its
  scheduled one: ``max(0, reaction - slack)`` in whole generator cycles; the generator's
  ``program`` statistics), per cycle (mean over
  every request, ``stall_per_cycle_ns``), per shot (the sum over its requests) and per logical
  operation (a memory shot is one logical operation: a logical idle ended by a logical
  measurement, so it equals the per-shot figure);
- ``effective_cycle_ns``: the mean time between requests (the QEC cycle plus the mean stall);
- ``logical_errors``, ``ler``, ``ci``: the shots sampled again with each shot's stalls as idle
  noise on the idle qubits (:func:`twin.qec.feedback.resample_with_idle`), decoded by the same
  decoder built for the circuit's own noise.

:func:`timing_aware` counts a shot whose correction is wrong, or any of whose corrections came
back after the deadline, as a failure.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from twin.qec.decoders import direct_corrections
from twin.qec.feedback import FeedbackPlan, resample_with_idle
from twin.qec.idle_noise import IdleNoise
from twin.qec.workload import logical_errors
from twin.stats import summary_ns


def feedback_point(run, plan: FeedbackPlan, period_ps: int, slack_ps: int, noise: IdleNoise,
                   seed: int, ci, inject_ps: int = 0) -> dict:
    """One point of the LER vs latency curve from ``run`` (:class:`twin.qec.loop.DecodeRun` of a
    per-round workload whose traffic waits, :class:`twin.devices.generator.Waits`, for ``plan``'s
    gates at ``period_ps`` with the gate ``slack_ps`` after a round's syndrome). The stalls are the
    generator's own (results' ``program`` statistics, :func:`twin.devices.generator.program_stats`).
    ``ci(k, n) -> (lo, hi)``: the interval of ``k`` errors in ``n`` shots; ``inject_ps``: the
    latency that run added to the decoder's time. Returns the mapping described in the module
    docstring (ns; counts). Raises ValueError when the run's generator did not wait (no ``program``)."""
    w = run.workload
    t_send = np.asarray(run.result.t_send, np.int64)
    n, G = len(t_send), w.requests_per_shot
    shots = n // G
    if "program" not in run.result.stats:
        raise ValueError("a feedback point needs a run whose generator waits for corrections (traffic.waits)")
    st = np.asarray(run.result.stats["program"]["stall_ps"], np.int64)
    waits = np.array([bool(plan.waits[j % G]) for j in range(n)])
    latest = np.array([min(plan.waits[j % G]) if plan.waits[j % G] else 0 for j in range(n)], np.int64)
    idx = np.flatnonzero(waits & (np.arange(n) >= latest))
    applied = t_send[idx] - (period_ps - slack_ps)
    per_shot = st[:shots * G].reshape(shots, G)
    det, obs = resample_with_idle(w.circuit, plan, per_shot, noise, seed)
    wrong = logical_errors(direct_corrections(run.decoder, det), replace(w, detectors=det, observables=obs))
    k = int(wrong.sum())
    shot_sum = per_shot.sum(axis=1)
    return {"inject_ns": inject_ps / 1000,
            "reaction": summary_ns(run.result.t_back - run.result.t_send),
            "reaction_to_applied": summary_ns(applied - t_send[idx - latest[idx]]),
            "stall": summary_ns(st[idx]),
            "stall_per_cycle_ns": round(float(st.mean()) / 1000, 3),
            "stall_per_shot": summary_ns(shot_sum),
            "stall_per_logical_operation": summary_ns(shot_sum),
            "effective_cycle_ns": round(float(t_send[-1] - t_send[0]) / (n - 1) / 1000, 3) if n > 1 else None,
            "idle_ns_per_shot_mean": round(float(shot_sum.mean()) / 1000, 3),
            "logical_errors": k, "ler": k / shots if shots else 0.0, "ci": list(ci(k, shots)), "shots": shots}


def timing_aware(run, late: np.ndarray) -> np.ndarray:
    """Per shot (bool (shots,)), a failure: the loop's correction is wrong, or one of the shot's
    requests' corrections is late (``late``, bool (requests,), e.g. round trip > deadline)."""
    w = run.workload
    G = w.requests_per_shot
    wrong = logical_errors(run.final_corrections, w)
    return wrong | np.asarray(late, bool)[:w.shots * G].reshape(w.shots, G).any(axis=1)
