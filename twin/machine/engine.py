"""The machine's discrete-event model: window jobs, boundaries, pools and the program's timing.

Integer picoseconds throughout. Every patch measures a syndrome round each QEC cycle ``T``; at each
tick (:meth:`twin.machine.windows.Geometry.tick_round`) the windows made ready are jobs
(:mod:`twin.machine.windows`). A job's life:

1. its new syndrome data crosses the pool's syndrome link (a :class:`twin.kernel.posted.Lane`:
   serialisation, latency, order) and *arrives* at the pool; a full pool holds it at the control
   system (:mod:`twin.machine.pool`);
2. it is *eligible* once every job it depends on is done (the previous streaming window; the two A
   windows of a B seam; both patches' windows of a spatial seam);
3. a decoder takes it (the policy's choice) and pulls each dependency's boundary from the node that
   decoded it: over the fabric lane between the two nodes, or ``local`` on one node; it decodes for
   its drawn time (:mod:`twin.machine.cost`);
4. when every job a commit unit needs is done, the correction crosses the node's correction link
   to the control system: the instant a T gate waiting on those rounds may proceed.

The program (:mod:`twin.machine.program`) runs on the control side: a patch's operations take
``d`` rounds; after a T gate the next operation starts at the first round boundary after the
correction of the gate's last round is back (the stall: the patch streams idle rounds); a merge
starts when both patches reach it. Events at one instant are handled in the order they were
scheduled (a sequence number), so the same seed gives the same run, byte for byte.

A model may run a subset of the patches (``patches``: those of some pools, :mod:`twin.machine.parts`):
its ticks make jobs for those only and its program runs those only. Run alone, a set of pools that no
merge couples to the others (no patch of theirs merges with one of another's) makes the same jobs at
the same instants as the whole machine: every job, lane, decoder and cost stream it touches is its
own, and its events keep their relative order (each handler schedules its own events in the same
order). A stop request (:func:`twin.engine.stop.take_stop`) is looked for at every tick: the run
then ends there (``stopped``), its jobs in flight left unfinished.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from twin.kernel.posted import Lane
from twin.kernel.streams import JitterStream
from twin.machine.layout import Layout
from twin.machine.pool import Pool
from twin.machine.program import MERGE, Program, T
from twin.machine.windows import SEAM, STREAM, A, B, Geometry

TICK, ARRIVE, DONE = 0, 1, 2


def make_wire(w):
    """The :mod:`twin.links` wire of a scenario link (:class:`twin.machine.schema.Wire`)."""
    lat = int(w.latency)
    if w.kind == "pcie":
        from twin.links import PcieLink
        return PcieLink(generation=4, lanes=16, latency_ps=lat)
    if w.kind == "aurora":
        from twin.links import Aurora64B66B
        return Aurora64B66B(link_stage_ps=lat)
    if w.kind == "roce":
        from twin.links import RoceV2Path
        return RoceV2Path(latency_ps=lat)
    from twin.links import NvlinkC2C
    return NvlinkC2C(latency_ps=lat)


@dataclass
class Jobs:
    """Every job's record, parallel lists indexed by job id (ps where timed; -1 not yet)."""
    patch: list = field(default_factory=list)
    kind: list = field(default_factory=list)
    rounds: list = field(default_factory=list)
    det: list = field(default_factory=list)
    pool: list = field(default_factory=list)
    ready: list = field(default_factory=list)
    arrive: list = field(default_factory=list)
    deadline: list = field(default_factory=list)
    deps: list = field(default_factory=list)
    left: list = field(default_factory=list)
    after: list = field(default_factory=list)
    units: list = field(default_factory=list)
    copies: list = field(default_factory=list)
    accepted: list = field(default_factory=list)
    start: list = field(default_factory=list)
    end: list = field(default_factory=list)
    node: list = field(default_factory=list)
    work: list = field(default_factory=list)

    def new(self, patch: int, kind: int, rounds: int, det: int, pool: int, ready: int) -> int:
        j = len(self.patch)
        self.patch.append(patch)
        self.kind.append(kind)
        self.rounds.append(rounds)
        self.det.append(det)
        self.pool.append(pool)
        self.ready.append(ready)
        for col in (self.arrive, self.deadline, self.start, self.end, self.node):
            col.append(-1)
        self.deps.append(())
        self.left.append(0)
        self.after.append([])
        self.units.append([])
        self.copies.append(())
        self.accepted.append(False)
        self.work.append(0)
        return j


class MachineModel:
    """One run of a machine (:class:`twin.machine.schema.Machine` ``m``): build, :meth:`run`, then
    read :attr:`jobs`, :attr:`pools`, the program's records. ``cost``: a
    :class:`twin.machine.cost.JobCost`; ``pools``: per pool (name, policy, [(node name, device,
    decoders)], (first, end), queue, ensemble size)."""

    def __init__(self, m, cost, pools, seed: int, progress=None, patches: list[int] | None = None):
        self.T, self.N, self.d = int(m.cycle), m.cycles, m.distance
        self.geo = Geometry(m.distance, m.window.kind, m.window.commit, m.window.buffer, m.cycles)
        self.layout = Layout(m.layout.rows, m.layout.cols)
        self.program = Program(self.layout, m.program.t_rate, m.program.merge_rate, seed)
        self.deadline = None if m.deadline is None else int(m.deadline)
        self.cost, self.seed, self.progress = cost, seed, progress
        self.mine = list(range(self.layout.patches)) if patches is None else sorted(patches)
        self.stopped = False
        self.local = int(m.links.local)
        self._wires = {k: (make_wire(getattr(m.links, k)), getattr(m.links, k).jitter) for k in
                       ("syndrome", "correction", "fabric")}
        self._build_pools(pools)
        self.jobs = Jobs()
        self.heap: list = []
        self.seq = 0
        self.units: dict = {}
        self.waiters: dict = {}
        self.merges: list[list] = [[] for _ in range(self.layout.patches)]
        self.merge_wait: dict = {}
        self.last_time_job: list = [None] * self.layout.patches
        self.prev_a: list = [None] * self.layout.patches
        self.steps = np.zeros(self.layout.patches, np.int64)
        self.t_reaction: list[int] = []
        self.t_stall: list[int] = []
        self.merge_count = 0
        self.sync_wait_rounds = 0
        self.commit_latency: list[int] = []
        self.backlog: list[list[int]] = [[] for _ in self.pools]
        self.tick_times: list[int] = []
        self.fabric_bytes = 0
        self.fabric_transfers = 0
        self.ler_stats: list = []  # the decoded sample's sinter rows (twin.machine.ler), set by the study

    # -- set-up -----------------------------------------------------------------------------------------
    def _lane(self, kind: str, name: str) -> Lane:
        wire, jitter = self._wires[kind]
        return Lane(name, wire, JitterStream(self.seed, f"machine.{name}", 0 if jitter is None else int(jitter)))

    def _build_pools(self, pools) -> None:
        self.pools: list[Pool] = []
        self.node_names: list[str] = []
        self.patch_pool = np.zeros(self.layout.patches, np.int64)
        self.decoder_ids: list[tuple[int, int]] = []  # global decoder -> (pool, decoder)
        self.gid: list[list[int]] = []
        self.draws: list = []  # per pool its cost stream
        for pi, (name, policy, nodes, span, queue, ens) in enumerate(pools):
            lo, hi = span
            self.patch_pool[lo:hi] = pi
            owner = []
            for nname, _device, count in nodes:
                owner += [len(self.node_names)] * count
                self.node_names.append(nname)
            self.pools.append(Pool(name, policy, owner, lo, queue, ens))
            self.gid.append([len(self.decoder_ids) + i for i in range(len(owner))])
            self.draws.append(self.cost.for_pool(name))
            self.decoder_ids += [(pi, i) for i in range(len(owner))]
        self.running: list = [None] * len(self.decoder_ids)  # global decoder -> (job, token, take, decode start)
        self.syndrome = [self._lane("syndrome", f"syndrome.{p.name}") for p in self.pools]
        self.correction = [self._lane("correction", f"correction.{n}") for n in self.node_names]
        self.fabric: dict[tuple[int, int], Lane] = {}

    def _push(self, t: int, kind: int, a, b=None) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, a, b))

    # -- the run ----------------------------------------------------------------------------------------
    def run(self) -> "MachineModel":
        """Run the whole stream and drain the jobs in flight; returns self."""
        from twin.engine.stop import take_stop
        self.ticks = self.geo.ticks()
        for a in self.mine:
            self._advance(a, 0, 0)
        if self.ticks:
            self._push(self.geo.tick_round(0) * self.T, TICK, 0)
        heap = self.heap
        while heap:
            t, _, kind, a, b = heapq.heappop(heap)
            if kind == DONE:
                self._done(t, a, b)
            elif kind == ARRIVE:
                self._arrive(t, a)
            elif take_stop():
                self.stopped = True
                break
            else:
                self._tick(t, a)
        return self

    def _tick(self, t: int, w: int) -> None:
        """Tick ``w`` at ``t``: every patch's windows made ready now, and the seams of merged pairs."""
        geo = self.geo
        spans = geo.time_jobs(w)
        earliest = min(lo for _, _, lo, _ in spans)
        made: dict = {}
        for a in self.mine:
            for kind, idx, lo, hi in spans:
                made[(a, kind)] = self._time_job(t, a, kind, idx, hi, made.get((a, A)))
            if geo.kind == "parallel":
                self.prev_a[a] = made[(a, A)]
        seams = []
        for a in self.mine:
            ms = self.merges[a]
            while ms and ms[0][0] + self.d <= earliest:
                ms.pop(0)  # merges wholly before this tick's commits
            for s, b in ms:
                for kind, _idx, lo, hi in spans:
                    if s < hi and s + self.d > lo:
                        seams.append(self._seam_job(t, a, made[(a, kind)], made[(b, kind)]))
        for j in [*made.values(), *seams]:
            self._send(t, j)
        for pi, p in enumerate(self.pools):
            self.backlog[pi].append(p.waiting + len(p.held))
        self.tick_times.append(t)
        if self.progress is not None:
            self.progress(w + 1, self.ticks)
        if w + 1 < self.ticks:
            self._push(geo.tick_round(w + 1) * self.T, TICK, w + 1)

    def _time_job(self, t: int, a: int, kind: int, idx: int, hi: int, a_now: int | None) -> int:
        """Patch ``a``'s time job (kind, idx) committing rounds up to ``hi`` (exclusive); ``a_now``
        this tick's A window of the patch (a B window's later neighbour)."""
        geo, jobs = self.geo, self.jobs
        j = jobs.new(a, kind, geo.decoded_rounds(kind, idx), geo.detectors(kind, idx), int(self.patch_pool[a]), t)
        if kind == STREAM:
            deps: tuple = () if self.last_time_job[a] is None else (self.last_time_job[a],)
            self.last_time_job[a] = j
        elif kind == B:
            deps = (self.prev_a[a], a_now)
        else:
            deps = ()
        self._depend(j, deps)
        key = (a, kind, idx)
        self.units[key] = [1, 0, 0, hi * self.T]  # jobs left, last end, its node, the last round's end
        jobs.units[j].append(key)
        return j

    def _depend(self, j: int, deps) -> None:
        jobs = self.jobs
        jobs.deps[j] = tuple(deps)
        left = 0
        for dj in deps:
            if jobs.end[dj] < 0:
                jobs.after[dj].append(j)
                left += 1
        jobs.left[j] = left

    def _seam_job(self, t: int, a: int, ja: int, jb: int) -> int:
        """The spatial seam between patch ``a``'s time job ``ja`` and its merge partner's ``jb``."""
        jobs = self.jobs
        rounds = jobs.rounds[ja]
        j = jobs.new(a, SEAM, rounds, self.geo.detectors(SEAM, rounds), int(self.patch_pool[a]), t)
        self._depend(j, (ja, jb))
        for jt in (ja, jb):
            key = jobs.units[jt][0]
            self.units[key][0] += 1
            jobs.units[j].append(key)
        return j

    def _send(self, t: int, j: int) -> None:
        """Job ``j``'s new syndrome data over its pool's syndrome link: it arrives when landed."""
        jobs = self.jobs
        k = jobs.kind[j]
        nbytes = self.geo.syndrome_bytes(k, 0) if k != SEAM else self.geo.space_boundary_bytes(jobs.rounds[j])
        self._push(self.syndrome[jobs.pool[j]].plan(t, nbytes), ARRIVE, j)

    # -- arrival, eligibility, starts -------------------------------------------------------------------
    def _arrive(self, t: int, j: int) -> None:
        jobs = self.jobs
        jobs.arrive[j] = t
        if self.deadline is not None:
            jobs.deadline[j] = t + self.deadline
        p = self.pools[jobs.pool[j]]
        if p.full():
            p.held.append((j, t))
            p.held_jobs += 1
            return
        self._accept(t, j)

    def _accept(self, t: int, j: int) -> None:
        jobs = self.jobs
        p = self.pools[jobs.pool[j]]
        patch = jobs.patch[j]
        jobs.copies[j] = tuple(p.assign(patch))
        jobs.accepted[j] = True
        if jobs.left[j] == 0:
            self._eligible(t, j)

    def _eligible(self, t: int, j: int) -> None:
        jobs = self.jobs
        pi = jobs.pool[j]
        p = self.pools[pi]
        key = jobs.deadline[j] if jobs.deadline[j] >= 0 else jobs.arrive[j]
        targets = jobs.copies[j] or (None,)
        for dec in targets:
            p.eligible(j, dec, key, j)
            for free in p.idle_decoders_for(dec):
                self._start_next(t, pi, free)

    def _dead(self, j: int) -> bool:
        return self.jobs.end[j] >= 0

    def _start_next(self, t: int, pi: int, dec: int) -> None:
        p = self.pools[pi]
        j = p.next_for(dec, self._dead)
        if j is None:
            return
        self._start(t, pi, dec, j)

    def _start(self, t: int, pi: int, dec: int, j: int) -> None:
        jobs, p = self.jobs, self.pools[pi]
        p.mark_busy(dec)
        if jobs.start[j] < 0:
            jobs.start[j] = t  # first copy's take (the job's wait ends)
            p.started_job()
            while p.held and not (p.queue is not None and p.waiting >= p.queue):
                hj, ht = p.held.popleft()
                p.held_ps += t - ht
                self._accept(t, hj)
        node = p.node_of[dec]
        begin = t
        for dj in jobs.deps[j]:
            land = self._boundary(t, jobs.node[dj], node, self._boundary_bytes(j, dj))
            if land > begin:
                begin = land
        end = begin + self.draws[pi].draw(node, jobs.det[j])
        g = self.gid[pi][dec]
        self.seq += 1
        self.running[g] = (j, self.seq, t, begin)
        heapq.heappush(self.heap, (end, self.seq, DONE, g, self.seq))

    def _boundary_bytes(self, j: int, dj: int) -> int:
        if self.jobs.kind[j] == SEAM:
            return self.geo.space_boundary_bytes(self.jobs.rounds[j])
        return self.geo.time_boundary_bytes()

    def _boundary(self, t: int, src: int, dst: int, nbytes: int) -> int:
        """When a boundary of ``nbytes`` pulled at ``t`` from node ``src`` lands on node ``dst``."""
        if src == dst:
            return t + self.local
        lane = self.fabric.get((src, dst))
        if lane is None:
            lane = self.fabric[(src, dst)] = self._lane("fabric", f"fabric.{self.node_names[src]}"
                                                                    f".{self.node_names[dst]}")
        self.fabric_bytes += nbytes
        self.fabric_transfers += 1
        return lane.plan(t, nbytes)

    # -- completions --------------------------------------------------------------------------------------
    def _done(self, t: int, g: int, token: int) -> None:
        run = self.running[g]
        if run is None or run[1] != token:
            return  # a cancelled copy
        j, _, t0, begin = run
        self.running[g] = None
        pi, dec = self.decoder_ids[g]
        p, jobs = self.pools[pi], self.jobs
        p.busy_ps[dec] += t - t0
        p.finished_copy(dec)
        jobs.end[j] = t
        jobs.node[j] = p.node_of[dec]
        jobs.work[j] += t - begin  # decoding time (the wait for boundaries is occupancy, not work)
        for other in jobs.copies[j]:
            if other != dec:
                self._cancel(t, pi, other, j)
        for key in jobs.units[j]:
            self._unit_part(t, key, jobs.node[j])
        for dj in jobs.after[j]:
            jobs.left[dj] -= 1
            if jobs.left[dj] == 0 and jobs.accepted[dj]:
                self._eligible(t, dj)
        jobs.after[j] = []
        p.mark_idle(dec)
        self._start_next(t, pi, dec)

    def _cancel(self, t: int, pi: int, dec: int, j: int) -> None:
        """Copy of job ``j`` on decoder ``dec`` cancelled at ``t`` (running: the decoder is free)."""
        g = self.gid[pi][dec]
        run = self.running[g]
        p = self.pools[pi]
        if run is not None and run[0] == j:
            self.running[g] = None
            p.busy_ps[dec] += t - run[2]
            self.jobs.work[j] += max(0, t - run[3])
            p.finished_copy(dec)
            p.mark_idle(dec)
            self._start_next(t, pi, dec)
        elif run is None or run[0] != j:
            p.finished_copy(dec)  # a queued copy: dropped when its decoder reaches it

    def _unit_part(self, t: int, key, node: int) -> None:
        u = self.units[key]
        u[0] -= 1
        if t >= u[1]:
            u[1], u[2] = t, node
        if u[0]:
            return
        del self.units[key]
        tc = self.correction[u[2]].plan(u[1], self.geo.correction_bytes())
        self.commit_latency.append(tc - u[3])
        w = self.waiters.pop(key, None)
        if w is not None:
            a, k, gate_end = w
            ready = max(gate_end, -(-tc // self.T))
            self.t_reaction.append(tc - gate_end * self.T)
            self.t_stall.append(ready - gate_end)
            self._advance(a, k + 1, ready)

    # -- the program ----------------------------------------------------------------------------------------
    def _advance(self, a: int, k: int, r: int) -> None:
        """Run patch ``a``'s program from step ``k`` at round ``r`` as far as it goes without waiting."""
        stack = [(a, k, r)]
        d, geo = self.d, self.geo
        while stack:
            a, k, r = stack.pop()
            while True:
                if r + d > self.N:
                    self.steps[a] = k
                    break
                ops, partner = self.program.step_ops(k)
                op = ops[a]
                if op == T:
                    kind, idx = geo.unit_of_round(r + d - 1)
                    if geo.unit_tick(kind, idx) >= self.ticks:
                        self.steps[a] = k
                        break
                    self.waiters[(a, kind, idx)] = (a, k, r + d)
                    self.steps[a] = k
                    break
                if op == MERGE:
                    b = int(partner[a])
                    got = self.merge_wait.pop((b, k), None)
                    if got is None:
                        self.merge_wait[(a, k)] = r
                        self.steps[a] = k
                        break
                    s = max(r, got)
                    self.sync_wait_rounds += abs(r - got)
                    self.merge_count += 1
                    if s + d <= self.N:
                        self.merges[min(a, b)].append((s, max(a, b)))
                    stack.append((b, k + 1, s + d))
                    r, k = s + d, k + 1
                    continue
                r, k = r + d, k + 1
