"""A machine study partitioned across processes (``twin machine SCENARIO --processes N`` / ``--cluster``).

**Where the machine is cut.** A decoder pool shares nothing with another pool except through a
lattice-surgery merge of a patch of one with a patch of the other: the merge's start waits for both
patches (the program, :mod:`twin.machine.program`), its spatial seam job (in the lower patch's pool)
depends on both patches' windows and pulls a boundary over the fabric from the other pool's node, and
both patches' commits wait for the seam. Those couplings take effect at the instant the other pool's
job ends (no lookahead: a seam is eligible at that instant, a commit completes at it), so pools that a
merge couples are kept in one part (:func:`pool_components`), never synchronised across processes;
parts share nothing and run with no synchronisation at all. A merge couples two pools when the
program (drawn per step from the seed, the same for any partition) pairs a patch of one with a patch
of the other at any step a patch can reach (``cycles // d + 1`` steps): a superset of the merges
that run, so the cut is exact. Every stream a part draws from is its own: a pool's decoding times
(``machine.cost.<pool>``, :meth:`twin.machine.cost.JobCost.for_pool`), its syndrome lane's, its
nodes' correction and fabric lanes' jitter (named by the lane), the program's steps (by step).

**Placement.** Components (sets of pools) are placed onto at most N parts balanced by expected
decoder load (:func:`expected_load`: the time jobs each pool's patches make over the run times the
mean decoding time of a job of that size on the pool's nodes, ps; seams are left out, they depend on
the run), largest first onto the least loaded part (:func:`twin.engine.partition.balance`).

**Results.** Each part runs the one-process model on its pools' patches
(:class:`twin.machine.engine.MachineModel` with ``patches``) and hands back what the results
document and the figure read, per pool (:class:`PoolRecord`) and per part (:class:`PartRecord`);
:func:`assemble` joins them, pools in the scenario's order and every per-event list sorted, into one
:class:`MachineRun` that stands for the model: the same for any number of parts, one part included
(which runs in this process).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from twin.engine.partition import balance
from twin.machine.windows import STREAM, A, B

COLUMNS = ("kind", "start", "end", "arrive", "deadline", "work")


def patch_pools(m, pools) -> np.ndarray:
    """Per patch the index of the pool serving it (int64, (patches,)), as the engine assigns them."""
    out = np.zeros(m.layout.rows * m.layout.cols, np.int64)
    for pi, spec in enumerate(pools):
        lo, hi = spec[3]
        out[lo:hi] = pi
    return out


def pool_components(m, pools, seed: int) -> list[tuple[int, ...]]:
    """The pools that merges couple (module docstring): tuples of pool indices (ascending), ordered by
    their first pool; every pool in exactly one."""
    from twin.machine.layout import Layout
    from twin.machine.program import Program
    owner = patch_pools(m, pools)
    prog = Program(Layout(m.layout.rows, m.layout.cols), m.program.t_rate, m.program.merge_rate, seed)
    root = list(range(len(pools)))

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i
    if m.program.merge_rate > 0:
        for k in range(m.cycles // m.distance + 1):
            _, partner = prog.step_ops(k)
            a = np.flatnonzero(partner >= 0)
            pa, pb = owner[a], owner[partner[a]]
            for x, y in {(int(x), int(y)) for x, y in zip(pa, pb) if x != y}:
                root[find(x)] = find(y)
            prog.forget_before(k + 1)
    comps: dict[int, list[int]] = {}
    for i in range(len(pools)):
        comps.setdefault(find(i), []).append(i)
    return sorted(tuple(c) for c in comps.values())


def expected_load(m, pools, cost) -> list[int]:
    """Per pool its expected decoder load (ps): each time job its patches make (:mod:`twin.machine.windows`,
    every tick) times the mean decoding time of a job of its detectors, averaged over the pool's nodes."""
    from twin.machine.windows import Geometry
    geo = Geometry(m.distance, m.window.kind, m.window.commit, m.window.buffer, m.cycles)
    ticks = geo.ticks()
    kinds = [(STREAM, 1, ticks)] if geo.kind == "streaming" else [(A, 1, ticks), (B, 1, max(0, ticks - 1))]
    out, node = [], 0
    for spec in pools:
        nodes = list(range(node, node + len(spec[2])))
        node += len(spec[2])
        lo, hi = spec[3]
        per_patch = sum(n * float(np.mean([cost.mean_ps(k, geo.detectors(kind, idx)) for k in nodes]))
                        for kind, idx, n in kinds)
        out.append(int(round((hi - lo) * per_patch)))
    return out


@dataclass(frozen=True)
class MachinePart:
    """One part of a machine's placement: ``index``, its ``components`` (indices into
    :func:`pool_components`' list), their ``pools`` (ascending), ``patches`` (how many) and ``load``
    (expected decoder load, ps: :func:`expected_load` summed)."""

    index: int
    components: tuple[int, ...]
    pools: tuple[int, ...]
    patches: int
    load: int


def place_pools(m, pools, comps: list[tuple[int, ...]], loads: list[int], n: int) -> list[MachinePart]:
    """``comps`` onto at most ``n`` parts balanced by their pools' ``loads`` (module docstring)."""
    weights = [sum(loads[p] for p in c) for c in comps]
    bins, members = balance(weights, n)
    out = []
    for i, mem in enumerate(members):
        ps = tuple(sorted(p for c in mem for p in comps[c]))
        out.append(MachinePart(i, tuple(mem), ps, sum(pools[p][3][1] - pools[p][3][0] for p in ps), bins[i]))
    return out


# -- what a part hands back ---------------------------------------------------------------------------------------
@dataclass
class PoolRecord:
    """One pool after a run: its scheduling figures and its jobs' columns (:data:`COLUMNS`, int64,
    (jobs,), creation order), its backlog at every tick."""

    index: int
    name: str
    policy: str
    k: int
    queue: int | None
    copies: int
    busy_ps: list[int]
    held_jobs: int
    held_ps: int
    waiting: int
    backlog: list[int]
    cols: dict[str, np.ndarray]


@dataclass
class PartRecord:
    """One part after a run: its pools' records, its patches' steps completed, the program's and
    the fabric's figures of its patches and nodes, its ticks' instants and whether a stop cut it."""

    pools: list[PoolRecord]
    steps: dict[int, int]
    t_reaction: list[int]
    t_stall: list[int]
    commit_latency: list[int]
    merge_count: int
    sync_wait_rounds: int
    fabric_transfers: int
    fabric_bytes: int
    fabric_busy_ps: int
    tick_times: list[int]
    ticks_done: int
    stopped: bool


def harvest(model, pools: tuple[int, ...]) -> PartRecord:
    """The record of a finished (or stopped) :class:`twin.machine.engine.MachineModel` run on ``pools``."""
    jp = np.asarray(model.jobs.pool, np.int64)
    cols = {c: np.asarray(getattr(model.jobs, c), np.int64) for c in COLUMNS}
    recs = []
    for pi in pools:
        p, sel = model.pools[pi], jp == pi
        recs.append(PoolRecord(pi, p.name, p.policy, p.k, p.queue, p.copies, list(p.busy_ps), p.held_jobs, p.held_ps,
                               p.waiting, list(model.backlog[pi]), {c: v[sel] for c, v in cols.items()}))
    return PartRecord(recs, {a: int(model.steps[a]) for a in model.mine}, list(model.t_reaction), list(model.t_stall),
                      list(model.commit_latency), model.merge_count, model.sync_wait_rounds, model.fabric_transfers,
                      model.fabric_bytes, sum(lane.busy_ps for lane in model.fabric.values()),
                      list(model.tick_times), len(model.tick_times), model.stopped)


@dataclass
class _Jobs:
    """Every job's columns of an assembled run (int64 arrays, pools in order)."""
    pool: np.ndarray
    kind: np.ndarray
    start: np.ndarray
    end: np.ndarray
    arrive: np.ndarray
    deadline: np.ndarray
    work: np.ndarray


@dataclass
class MachineRun:
    """An assembled run (:func:`assemble`), read as the model is by :func:`twin.machine.study.document`,
    :func:`twin.machine.report.machine_figure` and :func:`twin.machine.ler.step_ler`: ``pools`` the
    pools kept (:class:`PoolRecord`), ``pool_index`` their indices in the scenario, ``steps`` per kept
    patch (int64), ``jobs`` their columns; ``stopped`` (a stop cut some part)."""

    T: int
    d: int
    geo: Any
    cost: Any
    pools: list[PoolRecord]
    pool_index: list[int]
    steps: np.ndarray
    jobs: _Jobs
    backlog: list[list[int]]
    tick_times: list[int]
    t_reaction: list[int]
    t_stall: list[int]
    commit_latency: list[int]
    merge_count: int
    sync_wait_rounds: int
    fabric_transfers: int
    fabric_bytes: int
    fabric_busy_ps: int
    stopped: bool = False
    ler_stats: list = field(default_factory=list)


def assemble(m, cost, records: list[PartRecord]) -> MachineRun:
    """One :class:`MachineRun` of the parts' ``records`` (any order): pools in the scenario's order,
    patches in index order, every per-event list sorted, the counters summed; the ticks those of the
    part that ran the fewest (a stop cuts each part at its own tick)."""
    from twin.machine.windows import Geometry
    pools = sorted((p for r in records for p in r.pools), key=lambda p: p.index)
    steps = {a: s for r in records for a, s in r.steps.items()}
    ticks = min(records, key=lambda r: r.ticks_done).tick_times
    n = len(ticks)

    def cat(c: str) -> np.ndarray:
        return np.concatenate([p.cols[c] for p in pools] or [np.zeros(0, np.int64)]).astype(np.int64)

    jobs = _Jobs(np.concatenate([np.full(len(p.cols["kind"]), i, np.int64) for i, p in enumerate(pools)]
                                or [np.zeros(0, np.int64)]), *(cat(c) for c in COLUMNS))

    def joined(attr: str) -> list[int]:
        return sorted(x for r in records for x in getattr(r, attr))
    return MachineRun(int(m.cycle), m.distance, Geometry(m.distance, m.window.kind, m.window.commit, m.window.buffer,
                                                          m.cycles), cost, pools, [p.index for p in pools],
                      np.asarray([steps[a] for a in sorted(steps)], np.int64), jobs, [p.backlog[:n] for p in pools],
                      list(ticks), joined("t_reaction"), joined("t_stall"), joined("commit_latency"),
                      sum(r.merge_count for r in records), sum(r.sync_wait_rounds for r in records),
                      sum(r.fabric_transfers for r in records), sum(r.fabric_bytes for r in records),
                      sum(r.fabric_busy_ps for r in records), any(r.stopped for r in records))


# -- running the parts ----------------------------------------------------------------------------------------
def patches_of(pools, which: tuple[int, ...]) -> list[int]:
    """The patches served by pools ``which`` (ascending)."""
    return sorted(a for p in which for a in range(*pools[p][3]))


def run_part(arg: tuple, progress: Callable[[int], None] | None) -> tuple[PartRecord, int, bool]:
    """A part's work (:func:`twin.engine.parts.run_task`, or in this process): ``arg`` = (machine,
    cost, pool specs, seed, pools of the part); the model on their patches, ``progress(ticks done)``.
    Returns (record, ticks done, stopped)."""
    from twin.machine.engine import MachineModel
    m, cost, pools, seed, which = arg
    prog = None if progress is None else (lambda done, _n: progress(done))
    model = MachineModel(m, cost, pools, seed, prog, patches=patches_of(pools, which)).run()
    rec = harvest(model, which)
    return rec, rec.ticks_done, rec.stopped


@dataclass
class PartedMachine:
    """A partitioned machine run: ``run`` (the pools kept: every pool unless a part was lost), the
    ``parts`` and ``components`` placed, per part ``cpu_s``, ``lost`` (per lost part index, why),
    ``here`` (one part, run in this process)."""

    run: MachineRun
    parts: list[MachinePart]
    components: list[tuple[int, ...]]
    cpu_s: list[float]
    lost: dict[int, str] = field(default_factory=dict)
    here: bool = False


class PartsLost(RuntimeError):
    """Every part was lost: nothing to save. ``lost``: per part index, why."""

    def __init__(self, lost: dict[int, str], parts: list[MachinePart]):
        self.lost, self.parts = lost, parts
        super().__init__("; ".join(f"part {k}: {why}" for k, why in lost.items()))


def run_machine_parts(m, cost, pools, seed: int, n: int, client_of: Callable | None = None,
                      progress: Callable[[int, int], None] | None = None,
                      placed: Callable[[list[MachinePart], list[tuple[int, ...]]], None] | None = None,
                      timeout_s: float = 20.0, on_lost=None, on_start=None) -> PartedMachine:
    """Run machine ``m`` (its ``cost``, pool specs ``pools``, ``seed``) in at most ``n`` parts (module
    docstring). ``client_of(parts)``: a context manager giving the Dask client (called for two parts
    or more); ``placed(parts, components)`` before anything runs; ``progress(done, total)`` in ticks
    of all parts; ``timeout_s``, ``on_lost``, ``on_start``: :func:`twin.engine.parts.run_parts`'s.
    Raises :class:`PartsLost` when every part was lost."""
    comps = pool_components(m, pools, seed)
    parts = place_pools(m, pools, comps, expected_load(m, pools, cost), n)
    if placed:
        placed(parts, comps)
    from twin.machine.windows import Geometry
    ticks = Geometry(m.distance, m.window.kind, m.window.commit, m.window.buffer, m.cycles).ticks()
    total = ticks * len(parts)
    tell = (lambda d: progress(d, total)) if progress else None
    if len(parts) == 1 or client_of is None:
        recs, cpus = [], []
        for p in parts:
            cpu = time.thread_time()
            recs.append(run_part((m, cost, pools, seed, p.pools), tell)[0])
            cpus.append(time.thread_time() - cpu)
        return PartedMachine(assemble(m, cost, recs), parts, comps, cpus, here=True)
    from twin.engine.parts import run_tasks
    with client_of(parts) as client:
        runs = run_tasks(client, [(p, run_part, (m, cost, pools, seed, p.pools)) for p in parts], tell, timeout_s,
                         on_lost, on_start)
    lost = {r.part.index: r.lost for r in runs if r.lost is not None}
    recs = [r.results for r in runs if r.results is not None]
    if not recs:
        raise PartsLost(lost, parts)
    return PartedMachine(assemble(m, cost, recs), parts, comps, [r.cpu_s for r in runs], lost)


__all__ = ["MachinePart", "MachineRun", "PartRecord", "PartedMachine", "PartsLost", "PoolRecord", "assemble",
           "expected_load", "harvest", "place_pools", "pool_components", "run_machine_parts"]
