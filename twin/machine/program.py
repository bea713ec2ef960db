"""The logical program over a layout: per logical step, each patch's operation.

Operations (one per patch per step; a step is ``d`` QEC cycles of the patch):

- ``IDLE`` (memory): the patch streams ``d`` rounds;
- ``T``: a T-type gate (a magic state consumed by lattice surgery, ``d`` rounds); its outcome needs
  the correction of those rounds before the patch's next operation may start (the reaction: the
  patch stalls, streaming idle rounds, until the correction is back at the control system);
- ``MERGE``: a lattice-surgery merge with a neighbour for ``d`` rounds (then split): both patches
  start it together (the earlier one waits for the other), and the merged region is decoded as one
  problem (a spatial seam between the two patches' windows, :mod:`twin.machine.windows`).

Steps are drawn per step index from the run's seed (:func:`step_ops`), the same for any
partition or order of evaluation: a patch draws T with probability ``t_rate``, a merge with
``merge_rate``; those that draw a merge are paired, in a random order, with a random neighbour that
drew one too and is not paired yet; an unpaired one idles.
"""
from __future__ import annotations

import numpy as np

from twin.kernel.sim import stream_rng
from twin.machine.layout import Layout

IDLE, T, MERGE = 0, 1, 2


class Program:
    """The random program of rates ``t_rate`` and ``merge_rate`` over ``layout`` (module docstring),
    drawn step by step, each step's operations kept once drawn."""

    def __init__(self, layout: Layout, t_rate: float, merge_rate: float, seed: int):
        self.layout, self.t_rate, self.merge_rate, self.seed = layout, t_rate, merge_rate, seed
        self._steps: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._nb = [layout.neighbours(i) for i in range(layout.patches)]

    def step_ops(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Step ``k``'s (ops, partner): int8 (patches,) of IDLE/T/MERGE and int32 (patches,) the
        merge partner (-1 for none). Deterministic for (seed, k)."""
        got = self._steps.get(k)
        if got is None:
            got = self._steps[k] = self._draw(k)
        return got

    def forget_before(self, k: int) -> None:
        """Drop the steps before ``k`` (every patch is past them): memory stays bounded."""
        for j in [j for j in self._steps if j < k]:
            del self._steps[j]

    def _draw(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        n = self.layout.patches
        rng = stream_rng(self.seed, f"machine.program.{k}")
        u = rng.random(n)
        ops = np.where(u < self.t_rate, T, np.where(u < self.t_rate + self.merge_rate, MERGE, IDLE)).astype(np.int8)
        partner = np.full(n, -1, np.int32)
        want = np.flatnonzero(ops == MERGE)
        for i in rng.permutation(want):
            if partner[i] >= 0:
                continue
            free = [j for j in self._nb[i] if ops[j] == MERGE and partner[j] < 0 and j != i]
            if free:
                j = free[int(rng.integers(len(free)))]
                partner[i], partner[j] = j, i
        ops[(ops == MERGE) & (partner < 0)] = IDLE
        return ops, partner
