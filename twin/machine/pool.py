"""A decoder pool: K decoders on nodes, a scheduling policy, back-pressure, ensembles.

The pool places each job when its data arrives (:meth:`Pool.assign`: its decoders, or none under
EDF), queues it once the jobs it depends on are done (:meth:`Pool.eligible`) and gives a free
decoder its next job (:meth:`Pool.next_for`); :class:`twin.machine.engine.MachineModel` drives it.
Policies:

- ``static``: a patch's jobs always go to the same decoder (patch index within the pool, modulo K;
  a spatial seam to its lower patch's decoder); each decoder serves its own jobs in the order they
  become eligible;
- ``least_loaded``: a job goes, when it arrives, to the decoder with the fewest jobs assigned and
  not finished (the lowest index on a tie); then as ``static``;
- ``edf``: one shared queue; a free decoder takes the eligible job of the earliest deadline (its
  arrival plus the machine's ``deadline``; arrival order on a tie, and with no deadline).

Back-pressure: at most ``queue`` jobs wait in the pool (accepted, not started; an ensemble's job
once); a job that arrives to a full pool is held at the control system, in order, until a start
frees a place (counted: jobs held, the time they were held). Ensembles (``size`` m, static or
least loaded): a job's m copies go to m decoders; the first copy to finish is the job's answer and
every other copy is cancelled at that instant (a waiting one is dropped, a running one frees its
decoder then).
"""
from __future__ import annotations

import heapq
from collections import deque


class Pool:
    """The scheduling state of one pool (module docstring). ``nodes``: per decoder its node index
    (engine numbering); ``first``: the pool's first patch."""

    def __init__(self, name: str, policy: str, nodes: list[int], first: int, queue: int | None,
                 ensemble: int = 1):
        self.name, self.policy, self.first = name, policy, first
        self.node_of = nodes
        self.k = len(nodes)
        self.queue, self.copies = queue, ensemble
        self.idle = list(range(self.k))  # free decoders: a heap (lowest index first), lazily pruned
        self.idle_set = set(self.idle)
        self.outstanding = [0] * self.k
        self.fifo: list[deque] = [deque() for _ in range(self.k)]
        self.heap: list = []
        self.held: deque = deque()
        self.waiting = 0
        self.busy_ps = [0] * self.k
        self.held_jobs = 0
        self.held_ps = 0
        self.started = 0
        self.accepted = 0

    # -- arrival ---------------------------------------------------------------------------------------
    def full(self) -> bool:
        """Whether a job arriving now is held (``queue`` jobs wait already, or others are held)."""
        return self.queue is not None and (self.waiting >= self.queue or bool(self.held))

    def assign(self, patch: int) -> list[int]:
        """The decoders of a job of ``patch`` (``size`` of them for an ensemble); none for edf."""
        self.waiting += 1
        self.accepted += 1
        if self.policy == "edf":
            return []
        if self.policy == "static":
            base = (patch - self.first) % self.k
            chosen = [(base + i) % self.k for i in range(self.copies)]
        elif self.copies == 1:
            out = self.outstanding
            chosen = [min(range(self.k), key=out.__getitem__)]
        else:
            chosen = sorted(range(self.k), key=self.outstanding.__getitem__)[:self.copies]
        for d in chosen:
            self.outstanding[d] += 1
        return chosen

    # -- eligible jobs and free decoders -----------------------------------------------------------------
    def eligible(self, job: int, decoder: int | None, deadline: int, seq: int) -> None:
        """Job ``job`` (a copy on ``decoder``; None under edf) may start: queue it."""
        if decoder is None:
            heapq.heappush(self.heap, (deadline, seq, job))
        else:
            self.fifo[decoder].append(job)

    def next_for(self, decoder: int, dead) -> int | None:
        """The job free decoder ``decoder`` takes next (None: nothing eligible for it); ``dead(job)``
        says whether a queued copy was cancelled meanwhile."""
        if self.policy == "edf":
            while self.heap:
                job = heapq.heappop(self.heap)[2]
                if not dead(job):
                    return job
            return None
        q = self.fifo[decoder]
        while q:
            job = q.popleft()
            if not dead(job):
                return job
        return None

    def idle_decoders_for(self, decoder: int | None) -> list[int]:
        """The idle decoders that could take a job just queued for ``decoder`` (None: any)."""
        if decoder is None:
            idle, free = self.idle, self.idle_set
            while idle and idle[0] not in free:
                heapq.heappop(idle)
            return idle[:1]
        return [decoder] if decoder in self.idle_set else []

    def mark_busy(self, decoder: int) -> None:
        self.idle_set.discard(decoder)  # its heap entry goes when it reaches the top

    def mark_idle(self, decoder: int) -> None:
        if decoder not in self.idle_set:
            self.idle_set.add(decoder)
            heapq.heappush(self.idle, decoder)

    def started_job(self) -> None:
        """A job's first copy started: a place in the pool is free."""
        self.waiting -= 1
        self.started += 1

    def finished_copy(self, decoder: int) -> None:
        if self.policy != "edf":
            self.outstanding[decoder] -= 1
