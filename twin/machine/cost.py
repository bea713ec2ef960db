"""A decode job's time: fixed, or drawn from the decoder's measured per-call distribution.

``how: measured`` (the default) reads the decoder's shipped per-call file for the patch's code,
distance and noise (:func:`twin.qec.percall.shipped`: that workload's file, else the nearest
one), measured one request per call, warm, timer cost removed (:mod:`twin.qec.percall`). A job
draws one measured call (native, or through Python) and scales it by its detectors over the
file's: **an assumption**, that a matching decoder's time grows linearly with the detectors it
decodes at a fixed physical error rate (PyMatching's sparse blossom is close to linear in the
detection events, and those grow with the detectors: Higgott and Gidney, "Sparse Blossom:
correcting a million errors per core second with minimum-weight matching", Quantum 9, 1600
(2025), doi:10.22331/q-2025-01-20-1600). The time is then carried to the node's device class by
single-thread performance (:func:`twin.qec.percall.host_factor`, itself an assumption, said so in
the results). ``how: fixed``: every job takes ``fixed`` (a queueing study's S).

Times in integer picoseconds; draws deterministic for the run's seed and the pool: each pool draws
from its own stream (:meth:`JobCost.for_pool`, named by the pool), in the order its jobs start, so a
pool's draws do not depend on the other pools' (nor on which process runs them,
:mod:`twin.machine.parts`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from twin.kernel.sim import stream_rng

BLOCK = 65_536


class JobCost:
    """Per-node decoding times: :meth:`draw` ``(node, detectors) -> ps``.

    ``fixed_ps``: every job that long; else ``sample_ns`` (float64 (n,)) the measured calls,
    ``file_detectors`` the detectors of the file's requests, ``factors`` per node index the
    carrying factor. ``source``: what results.json says of where the numbers come from."""

    def __init__(self, seed: int, fixed_ps: int | None = None, sample_ns: np.ndarray | None = None,
                 file_detectors: int = 1, factors: list[float] | None = None, source: dict | None = None):
        self.fixed_ps = fixed_ps
        self.sample = None if sample_ns is None else np.sort(np.asarray(sample_ns, np.float64))
        self.file_detectors = max(1, int(file_detectors))
        self.factors = factors or []
        self.source = source or {}
        self.seed = seed
        self._rng = stream_rng(seed, "machine.cost")
        self._u: list[float] = []
        self._i = 0

    def for_pool(self, name: str) -> "JobCost":
        """The same costs drawn from pool ``name``'s own stream (``machine.cost.<name>`` of the seed)."""
        out = JobCost(self.seed, self.fixed_ps, None, self.file_detectors, self.factors, self.source)
        out.sample = self.sample
        out._rng = stream_rng(self.seed, f"machine.cost.{name}")
        return out

    def draw(self, node: int, detectors: int) -> int:
        """One job's decoding time (ps) on node ``node`` for ``detectors`` detectors (>= 1 ps)."""
        if self.fixed_ps is not None:
            return self.fixed_ps
        if self._i >= len(self._u):
            self._u = self._rng.random(BLOCK).tolist()
            self._i = 0
        u = self._u[self._i]
        self._i += 1
        s = self.sample
        ns = s[min(int(u * len(s)), len(s) - 1)]  # type: ignore[arg-type,index]
        return max(1, int(round(ns * 1000.0 * detectors / self.file_detectors * self.factors[node])))

    def mean_ps(self, node: int, detectors: int) -> float:
        """The mean decoding time (ps) of a job of ``detectors`` on ``node`` (the load a pool must carry)."""
        if self.fixed_ps is not None:
            return float(self.fixed_ps)
        return float(self.sample.mean()) * 1000.0 * detectors / self.file_detectors * self.factors[node]  # type: ignore[union-attr]


def job_cost(machine, path: Path, nodes: list, seed: int) -> JobCost:
    """The :class:`JobCost` of ``machine`` (:class:`twin.machine.schema.Machine`) read from scenario
    ``path``, for ``nodes`` (the pools' :class:`twin.machine.schema.Node`\\ s in engine order).
    Raises :class:`twin.config.ConfigError` naming ``machine.decoder.cost.file`` for a file that is
    not there or not a per-call file (one line, none of the file's content)."""
    c = machine.decoder.cost
    if c.how == "fixed":
        return JobCost(seed, fixed_ps=int(c.fixed), source={"how": "fixed", "fixed": str(c.fixed)})
    from twin.config import ConfigError, named_file
    from twin.qec.percall import FOLDER, file_name, host_factor, load_percall, shipped
    if c.file is not None:
        f: Path | None = named_file(path, "machine.decoder.cost.file", c.file)
        exact, shown = True, c.file
    else:
        want = file_name(machine.decoder.name, machine.code, machine.distance, machine.distance, machine.p, "circuit")
        f, exact = shipped(want, machine.decoder.name, machine.code, machine.distance, machine.distance, machine.p)
    if f is None:
        raise ConfigError(path, "machine.decoder.cost", "{how: measured}", f"no per-call file of decoder "
                          f"{machine.decoder.name} is shipped: give cost: {{fixed: ...}} or file:")
    if c.file is None:
        shown = str(FOLDER / f.name)  # as twin decode names a shipped file: the same on every install
    if c.file is None:
        pc = load_percall(f, shown)
    else:  # a file the scenario names: its errors name the scenario's key, none of the file's content
        from twin.config import named_input
        try:
            with named_input(path, f):
                pc = load_percall(f, shown)
        except ConfigError as e:
            raise ConfigError(path, "machine.decoder.cost.file", c.file, f"not a per-call file ({e})") from None
        if pc.doc["decoder"] != machine.decoder.name:
            raise ConfigError(path, "machine.decoder.cost.file", c.file, f"measured on a {pc.doc['decoder']} "
                              f"decoder; this machine's decoder is {machine.decoder.name}")
    wl = pc.doc["workload"]
    factors, hows = [], {}
    for n in nodes:
        k, how = host_factor(n.device, None, pc.doc["host_class"])
        factors.append(k)
        hows[n.device] = how
    source = {"how": "measured", "call": c.call, **pc.source(), "exact_workload": exact,
              "file_workload": {k: wl.get(k) for k in ("code", "distance", "rounds", "p", "detectors")},
              "scaling": "linear in the job's detectors over the file's (an assumption: twin/machine/cost.py)",
              "carried": hows}
    return JobCost(seed, sample_ns=pc.times(c.call), file_detectors=int(wl.get("detectors") or 1),
                   factors=factors, source=source)
