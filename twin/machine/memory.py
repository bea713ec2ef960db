"""What a machine run's memory grows with, estimated before it runs, and refused where it cannot fit.

The same way as ``twin run`` (:mod:`twin.engine.memory`: the process's :data:`~twin.engine.memory.BASE_BYTES`,
the memory there is, one line naming file, key and value): a machine keeps every decode job's record
until its results are written (:class:`twin.machine.engine.Jobs`), then decodes its ``ler:`` sample
case by case (each case's detection events of every shot, its decoding graph) and its ``check:``
sample. Estimated from the scenario before the run:

- jobs: per patch, one time job a tick streaming (two, A and B, parallel) and the seams of its merges,
  at most ``merge_rate / 2 x (1 + period / d)`` of the time jobs (a merge of ``d`` rounds meets at
  most ``d / period + 1`` windows of a kind, one seam a pair); each :data:`JOB_BYTES`. With
  ``--decoders`` the machine's model is kept while each sweep point runs: twice the jobs.
- ``ler:`` the largest case (``d`` rounds before the run; after it, ``d`` plus the p99 stall, checked
  again before the sample is drawn): its detectors ``(d^2 - 1) x rounds`` times ``shots x``
  :data:`SAMPLE_BYTES` plus :data:`GRAPH_BYTES`.
- ``check:`` ``max(calls, 2000)`` shots of a window's detectors, :data:`SAMPLE_BYTES` each, its graph,
  and :data:`CHECK_CALL_BYTES` a call.

Measured by ``benchmarks/machine_memory.py`` (peak RSS slope between two sizes, whole process, on a
2-core shared VM on 2026-12-03; BENCHMARKS.md, "twin machine's memory"), rounded up: 804 B a job
(machine_1000q_d15 at 3,000 and 10,000 cycles: 206,147 and 687,413 jobs, 309 and 679 MiB), 1.9 B a
shot-detector (a d = 9 sample of 2e4 and 8e4 shots), 3,443 B a detector with 200 shots (d = 9 and
25), 506 B a check call of a 240-detector window (2,000 and 20,000 calls). The job count itself is an
upper bound (machine_1000q_d15: 865,000 estimated, 687,413 made), so the estimate errs high.
"""
from __future__ import annotations

from twin.machine.windows import Geometry

JOB_BYTES = 1_000  # a decode job's record and its results' columns (measured 804)
SAMPLE_BYTES = 3  # a shot's detector in a decoded sample: stim's bool sample and its copies (measured 1.9)
GRAPH_BYTES = 4_000  # a detector of the sample's circuit: its detector error model and PyMatching's graph (~3,060)
CHECK_CALL_BYTES = 200  # a timed call of check with its shot, beside the shot's detectors (measured 506 in all)
CHECK_MIN_SHOTS = 2_000  # the check samples at least this many shots (twin.machine.check)


def memory_detectors(d: int, rounds: int) -> int:
    """The detectors of a rotated surface-code memory experiment of distance ``d`` over ``rounds``."""
    return (d * d - 1) * rounds


def expected_jobs(m, cycles: int) -> int:
    """At most about how many decode jobs machine ``m`` (:class:`twin.machine.schema.Machine`) makes
    in ``cycles`` cycles (module docstring)."""
    geo = Geometry(m.distance, m.window.kind, m.window.commit, m.window.buffer, cycles)
    n = geo.ticks()
    per_patch = n if geo.kind == "streaming" else max(0, 2 * n - 1)
    time_jobs = m.patches * per_patch
    return int(time_jobs * (1 + m.program.merge_rate / 2 * (1 + geo.period / m.distance)))


def ler_bytes(m, rounds: int) -> int:
    """The memory of decoding one ``ler:`` case of ``rounds`` rounds of machine ``m`` (bytes)."""
    dets = memory_detectors(m.distance, rounds)
    return dets * (m.ler.shots * SAMPLE_BYTES + GRAPH_BYTES)


def check_bytes(m) -> int:
    """The memory of machine ``m``'s ``check:`` (bytes)."""
    geo = Geometry(m.distance, m.window.kind, m.window.commit, m.window.buffer, m.cycles)
    dets = geo.detectors(0 if geo.kind == "streaming" else 1, 1)
    return dets * (max(m.check.calls, CHECK_MIN_SHOTS) * SAMPLE_BYTES + GRAPH_BYTES) + m.check.calls * CHECK_CALL_BYTES


def run_refusal(m, cycles: int, sweeping: bool = False) -> tuple[str, object, str] | None:
    """Why a run of machine ``m`` over ``cycles`` cycles would not fit in the memory there is, as
    (key, value, one line) for the key to blame (``machine.cycles``, ``machine.ler.shots``,
    ``machine.check.calls``), or None (it fits, or the memory cannot be read)."""
    from twin.engine.memory import BASE_BYTES, memory_refusal
    jobs = expected_jobs(m, cycles) * (2 if sweeping else 1)
    engine = jobs * JOB_BYTES
    both = " (the machine's and a sweep point's)" if sweeping else ""
    why = memory_refusal(BASE_BYTES + engine, f"{jobs:,} decode jobs{both} x {JOB_BYTES:,} B",
                         "ask for fewer cycles or patches")
    if why:
        return "machine.cycles", cycles, why
    if m.check is not None:
        why = memory_refusal(BASE_BYTES + engine + check_bytes(m), f"the jobs ({engine / 2**30:,.2f} GiB) and check's "
                             f"{max(m.check.calls, CHECK_MIN_SHOTS):,} shots of a window", "ask for fewer calls")
        if why:
            return "machine.check.calls", m.check.calls, why
    if m.ler is not None:
        return ler_refusal(m, m.distance, engine)
    return None


def ler_refusal(m, rounds: int, held: int = 0) -> tuple[str, object, str] | None:
    """Why machine ``m``'s ``ler:`` case of ``rounds`` rounds would not fit (with ``held`` bytes estimated
    already held), as :func:`run_refusal` says it, or None."""
    from twin.engine.memory import BASE_BYTES, memory_refusal
    dets = memory_detectors(m.distance, rounds)
    why = memory_refusal(BASE_BYTES + held + ler_bytes(m, rounds), (f"the jobs ({held / 2**30:,.2f} GiB) and " if held
                                                                    else "") +
                         f"a decoded case of {m.ler.shots:,} shots x {dets:,} detectors ({rounds:,} rounds) x "
                         f"{SAMPLE_BYTES} B and its graph", "ask for fewer shots")
    return None if why is None else ("machine.ler.shots", m.ler.shots, why)
