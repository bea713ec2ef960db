"""A mesh partitioned across processes (``twin run MESH --processes N``): Dask's own costs, then the
speed-up and efficiency from 1 to N processes, printed as ratios measured in one run.

Dask's costs, on a local cluster of N worker processes (one thread each, TCP on 127.0.0.1, as
``--processes`` starts it, :func:`twin.engine.cluster.local_client`):
- the per-task dispatch round trip: ``client.submit`` of a no-op task and its ``result()``, one at a
  time (200, after 20 to warm up): median and p90;
- an all-reduce-like gather: one task pinned to each worker returning 8 bytes (or 1 MiB), the client
  gathering all N and summing them (what the parent does with the parts' results, the smallest and a
  part-sized payload): median of 30.

The speed-up: the 256-node mesh of benchmarks/engine_speed.py (:func:`engine_speed.mesh_scenario`:
128 controllers on their own clocks, 32 link cards each shared by 4 of them, each flow to its own EPYC
7282 core, open loop with Poisson gaps; 32 independent components of 4 flows), ``--rounds`` a flow,
run in one process (:func:`twin.studies.mesh.run_mesh`) and in N parts on a cluster started before
the clock starts (:func:`twin.studies.mesh_parts.run_mesh_parts`: placement, shipping the parts,
running them, fetching every round's records, assembling), the best of ``--repeats``; each parted
results.json checked byte-identical to the one process's first. Speed-up = one-process wall time /
N-part wall time, efficiency = speed-up / N; the cluster's start-up is printed apart (a ``twin run
--processes N`` pays it once a run). ``--reference``: every part on the simpy reference (the engine
where a round costs ~50x more: Python-defined nodes). The machine's cores bound N (default: 1 to
``os.cpu_count()``).

Usage: python benchmarks/partition_scale.py [--processes 1,2] [--rounds 10000] [--reference] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def _noop(x: int) -> int:
    return x


def _payload(nbytes: int) -> np.ndarray:
    return np.ones(nbytes // 8, np.int64)


def dask_costs(n: int) -> None:
    """Dispatch round trip and all-reduce-like gather on a local cluster of ``n`` workers."""
    from twin.engine.cluster import local_client
    t = time.perf_counter()
    with local_client(n) as client:
        start = time.perf_counter() - t
        workers = sorted(client.scheduler_info()["workers"])
        for i in range(20):
            client.submit(_noop, i, pure=False).result()
        rtt = []
        for i in range(200):
            t = time.perf_counter()
            client.submit(_noop, i, pure=False).result()
            rtt.append(time.perf_counter() - t)
        rtt.sort()
        print(f"dask, {n} workers: cluster start-up {start:.2f} s; per-task dispatch round trip (submit + result, "
              f"one at a time, 200) median {1e3 * statistics.median(rtt):.2f} ms, p90 {1e3 * rtt[179]:.2f} ms")
        for nbytes in (8, 1 << 20):
            times = []
            for _ in range(30):
                t = time.perf_counter()
                futs = [client.submit(_payload, nbytes, workers=[w], pure=False) for w in workers]
                total = sum(int(a.sum()) for a in client.gather(futs))
                times.append(time.perf_counter() - t)
                assert total == len(workers) * (nbytes // 8)
            print(f"dask, {n} workers: all-reduce-like gather (one task a worker returns {nbytes:,} B, the client "
                  f"gathers and sums all {n}) median {1e3 * statistics.median(times):.2f} ms of 30")


def _document(ld, res) -> str:
    from twin.commands.run_mesh import mesh_document
    return json.dumps(mesh_document(ld, res, ld.scenario.seed), sort_keys=False)


def speedup(ns: list[int], rounds: int, repeats: int) -> None:
    """One process against N parts on the 256-node mesh (see the module docstring)."""
    from engine_speed import mesh_scenario

    from twin.engine.cluster import local_client
    from twin.scenario import load_scenario
    from twin.studies.mesh import run_mesh
    from twin.studies.mesh_parts import run_mesh_parts
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mesh256.yaml"
        path.write_text(yaml.safe_dump(mesh_scenario(rounds, cards=32), sort_keys=False))
        ld = load_scenario(path)
        total = rounds * len(ld.scenario.flows)
        best1, doc1 = float("inf"), ""
        for _ in range(repeats):
            t = time.perf_counter()
            res = run_mesh(ld.scenario, ld.params)
            best1 = min(best1, time.perf_counter() - t)
            doc1 = doc1 or _document(ld, res)
        del res
        print(f"mesh: 128 controllers, 32 link cards (32 independent components of 4 flows), {total:,} rounds; "
              f"best of {repeats}, wall time")
        print(f"{'processes':>9s} {'wall s':>8s} {'rounds/s':>11s} {'speed-up':>9s} {'efficiency':>10s} "
              f"{'start-up s':>10s}  parts' CPU shares (measured / predicted)")
        print(f"{1:9d} {best1:8.3f} {total / best1:11,.0f} {1.0:9.2f} {1.0:10.2f} {0.0:10.2f}  one process")
        for n in (x for x in ns if x > 1):
            t = time.perf_counter()
            with local_client(n) as client:
                start = time.perf_counter() - t
                best = float("inf")
                for _ in range(repeats):
                    t = time.perf_counter()
                    pm = run_mesh_parts(ld.scenario, ld.params, n, lambda parts: nullcontext(client))
                    best = min(best, time.perf_counter() - t)
                    if _document(ld, pm.result) != doc1:
                        raise SystemExit(f"{n} processes: results.json differs from one process's")
                    cpu = sum(pm.cpu_s) or 1.0
                    shares = ", ".join(f"{100 * c / cpu:.0f}/{100 * p.events / sum(q.events for q in pm.parts):.0f} %"
                                       for c, p in zip(pm.cpu_s, pm.parts))
                    del pm
            s = best1 / best
            print(f"{n:9d} {best:8.3f} {total / best:11,.0f} {s:9.2f} {s / n:10.2f} {start:10.2f}  {shares}")
        print("results.json byte-identical to one process's for every N: yes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", default=",".join(str(i) for i in range(1, (os.cpu_count() or 1) + 1)),
                    help="comma-separated process counts (default 1 .. the CPU count)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds a flow (default 10000; 1000 with --reference)")
    ap.add_argument("--reference", action="store_true", help="the parts on the simpy reference")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    ns = sorted({int(x) for x in args.processes.split(",")})
    import twin.engine.event as E
    if args.reference:
        E.COMPILED = False  # this process's run; the parts follow it (run_mesh_parts asks event.COMPILED)
    rounds = args.rounds or (1000 if args.reference else 10_000)
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs, python "
          f"{platform.python_version()}; engine: {'simpy reference' if args.reference else 'compiled core'}; "
          f"{time.strftime('%Y-%m-%d')}")
    dask_costs(max(ns))
    speedup(ns, rounds, args.repeats)
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
