"""A machine study: load the scenario, run the model, and the results document (results.json).

:func:`run_machine` runs one machine; :func:`sweep_decoders` the same machine with K decoders per
pool for each K asked (the logical clock against the decoder count). Every figure is a model
output (a prediction from the measured decoder cost and the scenario's links), never a fit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from twin.machine.parts import MachineRun
from twin.machine.schema import MachineScenario
from twin.machine.windows import KIND_NAMES
from twin.stats import summary_ns

SCHEMA = "twin.machine/1"


@dataclass
class LoadedMachine:
    """A validated machine scenario and the file it came from."""
    sc: MachineScenario
    path: Path


def load_machine(path: str | Path) -> LoadedMachine:
    """Read and validate a machine scenario. Raises :class:`twin.config.ConfigError` (file, key, value)."""
    from twin.config import load_model
    path = Path(path)
    return LoadedMachine(load_model(path, MachineScenario), path)


def pool_specs(m, decoders: int | None = None) -> list[tuple]:
    """The engine's pool tuples of machine ``m``: (name, policy, [(node, device, count)], (first, end),
    queue, ensemble size); ``decoders``: every pool's decoder count set to it, split over its nodes
    (the first nodes one more where it does not divide). Raises ValueError for fewer decoders than
    a pool's nodes or its ensemble."""
    out = []
    for p in m.pools:
        nodes = [(n.name, n.device, n.decoders) for n in p.nodes]
        if decoders is not None:
            if decoders < len(nodes) or (p.ensemble is not None and decoders < p.ensemble.size):
                raise ValueError(f"--decoders {decoders}: pool {p.name} has {len(nodes)} nodes"
                                 + (f" and ensembles of {p.ensemble.size}" if p.ensemble else ""))
            q, r = divmod(decoders, len(nodes))
            nodes = [(n, dev, q + (i < r)) for i, (n, dev, _) in enumerate(nodes)]
        span = p.patches or (0, m.patches)
        out.append((p.name, p.policy, nodes, tuple(span), p.queue, p.ensemble.size if p.ensemble else 1))
    return out


def check_run(lm: LoadedMachine, cycles: int | None = None, sweeping: bool = False) -> None:
    """Before a run of ``lm`` (``cycles`` overriding the scenario's; ``sweeping``: with ``--decoders``): the
    cycles within the scenario's bound (:data:`twin.machine.schema.MAX_CYCLES`) and the run's estimated
    memory within what there is (:func:`twin.machine.memory.run_refusal`). Raises
    :class:`twin.config.ConfigError` naming the file, the key (``--cycles`` for cycles given) and its value."""
    from twin.config import ConfigError
    from twin.machine.memory import run_refusal
    from twin.machine.schema import MAX_CYCLES
    m = lm.sc.machine
    if cycles is not None and not 1 <= cycles <= MAX_CYCLES:
        raise ConfigError(lm.path, "--cycles", cycles, f"from 1 to {MAX_CYCLES:,} cycles (machine.cycles' bound)")
    why = run_refusal(m if cycles is None else m.model_copy(update={"cycles": cycles}), cycles or m.cycles, sweeping)
    if why:
        key, value, line = why
        raise ConfigError(lm.path, "--cycles" if key == "machine.cycles" and cycles is not None else key, value, line)


def run_machine(lm: LoadedMachine, *, cycles: int | None = None, seed: int | None = None,
                decoders: int | None = None, progress=None, parted=None) -> tuple[MachineRun, dict]:
    """Run machine scenario ``lm`` (``cycles``, ``seed``, ``decoders`` override the scenario's);
    returns the run (:class:`twin.machine.parts.MachineRun`, as the model reads) and the results
    document. ``parted(m, cost, pools, seed)``: runs the machine instead of this process and returns
    its :class:`twin.machine.parts.PartedMachine` (``twin machine --processes``); the document is
    the same for any number of parts (:mod:`twin.machine.parts`)."""
    from twin.machine.cost import job_cost
    from twin.machine.parts import run_machine_parts
    check_run(lm, cycles)
    sc = lm.sc
    m = sc.machine if cycles is None else sc.machine.model_copy(update={"cycles": cycles})
    seed = sc.seed if seed is None else seed
    pools = pool_specs(m, decoders)
    from types import SimpleNamespace
    nodes = [SimpleNamespace(name=n, device=dev) for p in pools for n, dev, _ in p[2]]
    cost = job_cost(m, lm.path, nodes, seed)
    if parted is None:
        model = run_machine_parts(m, cost, pools, seed, 1, progress=progress).run
    else:
        model = parted(m, cost, pools, seed).run
    doc = document(sc, m, seed, model, pools)
    if m.check is not None:
        from twin.machine.check import cost_check
        doc["check"] = cost_check(m, cost, m.check.calls, seed)
    if m.ler is not None:
        from twin.machine.ler import stall_cases, step_ler
        _check_ler(lm, m, max(r for _, r in stall_cases(model)))
        doc["ler"], model.ler_stats = step_ler(m, model, m.ler.shots, seed)
    return model, doc


def _check_ler(lm: LoadedMachine, m, rounds: int) -> None:
    """The ``ler:`` sample's largest case (``rounds``, the stalls now known) fits in the memory there is
    (:func:`twin.machine.memory.ler_refusal`); raises :class:`twin.config.ConfigError` naming machine.ler.shots."""
    from twin.config import ConfigError
    from twin.machine.memory import ler_refusal
    why = ler_refusal(m, rounds)
    if why:
        raise ConfigError(lm.path, why[0], why[1], why[2])


def document(sc: MachineScenario, m, seed: int, model: MachineRun, pools) -> dict:
    """The results document of a finished run (docs/results.md, "twin machine")."""
    T = model.T
    span_ps = m.cycles * T
    steps = model.steps
    mean_steps = float(steps.mean()) if steps.size else 0.0
    cols = {k: np.asarray(getattr(model.jobs, k), np.int64) for k in ("pool", "start", "end", "arrive", "deadline",
                                                                     "work")}
    doc = {
        "schema": SCHEMA, "scenario": sc.name, "seed": seed,
        "patches": m.patches, "code": m.code, "distance": m.distance, "p": m.p,
        "cycle_ns": T / 1000, "cycles": m.cycles,
        "window": m.window.model_dump(), "program": m.program.model_dump(),
        "logical_clock": _clock(model, mean_steps, span_ps),
        "t_gates": _t_gates(model),
        "merges": {"count": model.merge_count, "sync_wait_rounds": model.sync_wait_rounds},
        "commit_latency": summary_ns(np.asarray(model.commit_latency, np.int64)) if model.commit_latency else None,
        "pools": [_pool(model, i, pools[k], span_ps, cols) for i, k in enumerate(model.pool_index)],
        "fabric": {"transfers": model.fabric_transfers, "bytes": model.fabric_bytes,
                   "busy_ns": model.fabric_busy_ps / 1000},
        "cost": model.cost.source,
        "jobs_by_kind": _by_kind(model),
    }
    return doc


def _clock(model: MachineRun, mean_steps: float, span_ps: int) -> dict:
    ideal = model.d * model.T
    eff = span_ps / mean_steps if mean_steps else None
    return {"steps_completed_mean": round(mean_steps, 3), "ideal_step_ns": ideal / 1000,
            "effective_step_ns": None if eff is None else round(eff / 1000, 3),
            "slowdown": None if eff is None else round(eff / ideal, 4)}


def _t_gates(model: MachineRun) -> dict:
    r = np.asarray(model.t_reaction, np.int64)
    st = np.asarray(model.t_stall, np.int64)
    return {"count": int(r.size), "reaction": summary_ns(r) if r.size else None,
            "stall_rounds_mean": round(float(st.mean()), 4) if st.size else 0.0,
            "stall_rounds_max": int(st.max()) if st.size else 0}


def _pool(model: MachineRun, i: int, spec, span_ps: int, cols: dict) -> dict:
    p = model.pools[i]
    ids = np.flatnonzero(cols["pool"] == i)
    start, end, arrive, deadline = (cols[k][ids] for k in ("start", "end", "arrive", "deadline"))
    work = int(cols["work"][ids].sum())
    done = end >= 0
    bl = np.asarray(model.backlog[i], np.float64)
    growth = _growth(bl, np.asarray(model.tick_times, np.float64), model.T)
    arrivals_per_cycle = len(ids) / (len(model.tick_times) * model.geo.period) if model.tick_times else 0.0
    out = {"name": p.name, "policy": p.policy, "decoders": p.k,
           "nodes": [{"name": n, "device": dev, "decoders": c} for n, dev, c in spec[2]],
           "patches": list(spec[3]), "queue": p.queue, "ensemble": p.copies,
           "jobs": int(len(ids)), "done": int(done.sum()),
           "busy_fraction": round(sum(p.busy_ps) / (p.k * max(1, int(end.max(initial=0)))), 4),
           "backlog_max": int(bl.max(initial=0)), "backlog_end": int(bl[-1]) if bl.size else 0,
           "backlog_growth_per_cycle": None if growth is None else round(growth, 4),
           "growth_per_arrival": None if growth is None else
           round(growth / arrivals_per_cycle, 4) if arrivals_per_cycle else 0.0,
           "held_jobs": p.held_jobs, "held_ns": p.held_ps / 1000,
           "decoders_needed": math.ceil(work / span_ps) if span_ps else 0,
           "wait": summary_ns((start - arrive)[done]) if done.any() else None,
           "latency": summary_ns((end - arrive)[done]) if done.any() else None}
    if (deadline >= 0).any():
        met = int(((end <= deadline) & done).sum())
        out["deadline_met"], out["deadline_missed"] = met, int(len(ids)) - met
    return out


MIN_GROWTH_TICKS = 4
"""The ticks a run needs for its backlog's growth: a slope over the second half's :data:`MIN_GROWTH_TICKS` // 2
or more ticks; a shorter run's growth is None (results.json null, printed "too short to tell")."""


def _growth(backlog: np.ndarray, t: np.ndarray, cycle: int) -> float | None:
    """The backlog's growth in jobs per cycle: the least-squares slope over the run's second half
    (the first half holds the start-up), clipped at 0; None for fewer than :data:`MIN_GROWTH_TICKS`
    ticks (it cannot be told)."""
    n = len(backlog)
    if n < MIN_GROWTH_TICKS:
        return None
    h = n // 2
    slope = np.polyfit(t[h:] / cycle, backlog[h:], 1)[0]
    return float(max(0.0, slope))


def _summed(values) -> float | None:
    """The sum of ``values``, None if one is None (a growth too short to tell)."""
    out = 0.0
    for v in values:
        if v is None:
            return None
        out += v
    return out


def _by_kind(model: MachineRun) -> dict:
    k = np.asarray(model.jobs.kind, np.int64)
    return {KIND_NAMES[i]: int((k == i).sum()) for i in range(len(KIND_NAMES)) if (k == i).any()}


def sweep_decoders(lm: LoadedMachine, counts: list[int], *, cycles=None, seed=None, progress=None) -> list[dict]:
    """One run per decoder count of ``counts`` (every pool at that many): per point the logical clock,
    the T gates' reaction p99, the pools' backlog growth and deadlines met."""
    rows = []
    for k in counts:
        _, doc = run_machine(lm, cycles=cycles, seed=seed, decoders=k,
                             progress=None if progress is None else (lambda d, n, k=k: progress(k, d, n)))
        pools = doc["pools"]
        rows.append({"decoders": k, "effective_step_ns": doc["logical_clock"]["effective_step_ns"],
                     "slowdown": doc["logical_clock"]["slowdown"],
                     "t_reaction_p99_ns": (doc["t_gates"]["reaction"] or {}).get("p99_ns"),
                     "backlog_growth_per_cycle": _summed(p["backlog_growth_per_cycle"] for p in pools),
                     "deadline_missed": sum(p.get("deadline_missed", 0) for p in pools)})
    return rows
