"""A mesh partitioned across processes (``twin run MESH --processes N``): Dask's own costs, then the
speed-up and efficiency from 1 to N processes on a mesh of ``--nodes`` nodes, printed as a markdown
table measured in one run.

Dask's costs, on a local cluster of N worker processes (one thread each, TCP on 127.0.0.1, as
``--processes`` starts it, :func:`twin.engine.cluster.local_client`):
- the per-task dispatch round trip: ``client.submit`` of a no-op task and its ``result()``, one at a
  time (200, after 20 to warm up): median and p90;
- an all-reduce-like gather: one task pinned to each worker returning 8 bytes (or 1 MiB), the client
  gathering all N and summing them (what the parent does with the parts' results): median of 30.

The mesh (:func:`mesh_doc`, the function mesh of benchmarks/engine_speed.py grown to ``--nodes``):
controllers on their own clocks (ppm spread over -20 .. +20), each behind an Aurora cable into a link
card shared by 4 of them, each flow to its own EPYC 7282 core over PCIe, open loop with Poisson gaps
(mean 2 us), ``--rounds`` a flow (default 10^4); nodes = controllers + cards + cores (9 a card), the
smallest such mesh of at least ``--nodes``. Each card and its 4 flows is one independent component
(:func:`twin.engine.partition.components`): the parts share nothing, so they run with no
synchronisation at all and the only costs beside the engine are dispatch (placing, shipping each part's
topology), the parts' results coming back, and the parent assembling them.

Each point is a run as ``twin run MESH --no-rounds --no-plot`` makes it, timed from the topology to
the results.json document (:func:`twin.commands.run_mesh.mesh_document`): one process
(:func:`twin.studies.mesh.run_mesh`, every round kept, the document from the rounds) or N parts on a
cluster started before the clock (:func:`twin.studies.mesh_parts.run_mesh_parts`; each part ships its
flows' statistics, :mod:`twin.studies.mesh_reduce`; ``--keep-rounds``: every round, as with a
per-round file), best of ``--repeats``; each parted document checked byte-identical to the one
process's. Columns: speed-up = one-process wall / N-part wall; efficiency = speed-up / N; overhead =
N-part wall - the slowest part's wall on its worker (dispatch, shipping back, assembling: what the
parts do not run in parallel); CPU s: one process's CPU seconds, or the parts' engine and reduction
CPU seconds summed and the largest part's (on a loaded machine a part's wall exceeds its CPU time);
balance = the largest part over the mean part, predicted (expected events: rounds) and measured (the
parts' engine CPU seconds). The cluster's start-up is printed apart (a ``twin run --processes N``
pays it once a run). ``--reference``: the simpy reference engine.

``--steps``: only the one-process engine, advanced as before the whole step (9 replies a component a
step, one core call a component) and as now (:data:`twin.engine.compiled.WINDOW` replies a component,
the whole step in one call): CPU seconds and their ratio.

``--whole``: each point is instead a whole ``twin run MESH --no-csv --no-plot [--processes N]`` process,
launch to exit (start-up, loading the scenario while the cluster starts, placing, the parts, writing):
wall and CPU seconds (of every process it waited for: its workers), speed-up and efficiency, the
largest process's memory, the parts' CPU seconds and the serial rest, the balance predicted and
measured (the run's own part lines); progress on stderr every 10 s.

Memory: one process keeps every round (about 160 B a round: 7 GB for the 10,000-node mesh at 10^4
rounds a flow); the parts keep theirs only until reduced.

Usage (from the repository root): PYTHONPATH=. python benchmarks/partition_scale.py [--nodes 10000]
[--processes 1,2,4,8,16] [--rounds 10000] [--repeats 1] [--keep-rounds] [--reference] [--no-dask-costs]
[--whole | --steps]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
PER_CARD = 4


def say(text: str) -> None:
    """A progress line (stderr, at once): the table on stdout stays whole."""
    print(text, file=sys.stderr, flush=True)


def _noop(x: int) -> int:
    return x


def _payload(nbytes: int) -> np.ndarray:
    return np.ones(nbytes // 8, np.int64)


def dask_costs(n: int) -> list[str]:
    """Markdown rows: cluster start-up, dispatch round trip and all-reduce-like gather on ``n`` workers."""
    from twin.engine.cluster import local_client
    say(f"dask costs on {n} local workers ...")
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
        rows = [f"| Dask, {n} local workers | |", "|---|---:|", f"| cluster start-up | {start:.2f} s |",
                "| per-task dispatch round trip (submit + result, one at a time), median / p90 of 200 | "
                f"{1e3 * statistics.median(rtt):.2f} / {1e3 * rtt[179]:.2f} ms |"]
        for nbytes in (8, 1 << 20):
            times = []
            for _ in range(30):
                t = time.perf_counter()
                futs = [client.submit(_payload, nbytes, workers=[w], pure=False) for w in workers]
                total = sum(int(a.sum()) for a in client.gather(futs))
                times.append(time.perf_counter() - t)
                assert total == len(workers) * (nbytes // 8)
            rows.append(f"| all-reduce-like gather, {nbytes:,} B a worker ({n} tasks, gathered and summed: a "
                        f"window's barrier), median of 30 | {1e3 * statistics.median(times):.2f} ms |")
    return rows


def shape(nodes: int) -> tuple[int, int]:
    """(controllers, cards) of the smallest mesh of :data:`PER_CARD` flows a card with at least
    ``nodes`` nodes (controllers + cards + cores)."""
    cards = max(1, math.ceil(nodes / (2 * PER_CARD + 1)))
    return PER_CARD * cards, cards


def mesh_doc(nodes: int, rounds: int) -> dict:
    """The mesh scenario document of the module docstring (:func:`engine_speed.mesh_scenario`'s
    layout and traffic)."""
    from engine_speed import mesh_scenario
    controllers, cards = shape(nodes)
    doc = mesh_scenario(rounds, controllers=controllers, cards=cards)
    doc["name"] = f"mesh{controllers + cards + controllers}_shared_cards"
    doc["description"] = (f"{controllers} controllers, {cards} link cards shared by {PER_CARD}, {controllers} "
                          "EPYC 7282 cores (benchmarks/partition_scale.py)")
    return doc


def _document(ld, res) -> str:
    from twin.commands.run_mesh import mesh_document
    return json.dumps(mesh_document(ld, res, ld.scenario.seed), sort_keys=False)


def one_process(ld, repeats: int) -> tuple[float, float, str]:
    """Best wall time of the one-process run and its document, its CPU seconds, and that document."""
    from twin.studies.mesh import run_mesh
    best, cpu, doc = float("inf"), 0.0, ""
    for k in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        res = run_mesh(ld.scenario, ld.params)
        text = _document(ld, res)
        if time.perf_counter() - t < best:
            best, cpu = time.perf_counter() - t, time.process_time() - c
        doc = doc or text
        del res
        say(f"  1 process, run {k + 1}/{repeats}: {best:.2f} s best so far")
    return best, cpu, doc


def parted(ld, n: int, repeats: int, keep: bool, doc1: str) -> dict:
    """The best of ``repeats`` N-part runs on a local cluster of ``n`` workers (see the module docstring)."""
    from twin.engine.cluster import local_client
    from twin.studies.mesh_parts import run_mesh_parts
    t = time.perf_counter()
    with local_client(n) as client:
        start = time.perf_counter() - t
        best: dict = {"wall": float("inf")}
        for k in range(repeats):
            t = time.perf_counter()
            pm = run_mesh_parts(ld.scenario, ld.params, n, lambda parts: nullcontext(client), keep_rounds=keep)
            text = _document(ld, pm.result)
            wall = time.perf_counter() - t
            if text != doc1:
                raise SystemExit(f"{n} processes: results.json differs from one process's")
            if wall < best["wall"]:
                events = [p.events for p in pm.parts]
                best = {"wall": wall, "start": start, "parts": len(pm.parts), "slowest": max(pm.wall_s),
                        "finish": max(pm.finish_s), "predicted": max(events) / statistics.mean(events),
                        "cpu": sum(pm.cpu_s), "cpu_max": max(pm.cpu_s),
                        "measured": max(pm.cpu_s) / statistics.mean(pm.cpu_s)}
            del pm
            say(f"  {n} processes, run {k + 1}/{repeats}: {wall:.2f} s")
    return best


def table(ld, ns: list[int], repeats: int, keep: bool, engine: str) -> list[str]:
    """The markdown table of one process against N parts (see the module docstring)."""
    flows = len(ld.scenario.flows)
    total = sum(f.rounds or ld.scenario.rounds for f in ld.scenario.flows)
    say(f"point 1/{len(ns)}: 1 process ({total:,} rounds) ...")
    best1, cpu1, doc1 = one_process(ld, repeats)
    rows = ["| engine | rounds | processes | parts | wall s | rounds/s | speed-up | efficiency | "
            "CPU s (parts: all / slowest) | overhead s | slowest part s | statistics s (most in a part) | "
            "balance predicted / measured | cluster start-up s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
            f"| {engine} | {total:,} | 1 | 1 | {best1:.3f} | {total / best1:,.0f} | 1.00 | 1.00 | {cpu1:.2f} "
            "| | | | | |"]
    say(f"  1 process: {best1:.2f} s ({flows:,} flows)")
    for k, n in enumerate((x for x in ns if x > 1), start=2):
        say(f"point {k}/{len(ns)}: {n} processes ...")
        b = parted(ld, n, repeats, keep, doc1)
        s = best1 / b["wall"]
        rows.append(f"| {engine} | {total:,} | {n} | {b['parts']} | {b['wall']:.3f} | {total / b['wall']:,.0f} | "
                    f"{s:.2f} | {s / n:.2f} | {b['cpu']:.2f} / {b['cpu_max']:.2f} | {b['wall'] - b['slowest']:.3f} | "
                    f"{b['slowest']:.3f} | "
                    f"{b['finish']:.3f} | {b['predicted']:.3f} / {b['measured']:.3f} | {b['start']:.2f} |")
        say(f"  {n} processes: {b['wall']:.2f} s, speed-up {s:.2f}, efficiency {s / n:.2f}")
    return rows


PART_LINE = re.compile(r"^part (\d+): CPU ([\d.]+) s, measured ([\d.]+) % of the parts' CPU time, "
                       r"predicted ([\d.]+) %", re.M)
"""A part's measured line of ``twin run --processes N`` (twin.commands.run_parts.share_lines)."""
BEAT_S = 10.0


def whole_run(path: Path, n: int, out: Path, reference: bool = False) -> dict:
    """``twin run MESH --no-csv --no-plot`` (with ``--processes n`` for ``n`` > 1) as a new process, as a
    user runs it: its wall seconds from launch to exit and the CPU seconds of it and every process it
    waited for (its cluster's workers: os.wait4's rusage), each part's CPU seconds and predicted share
    of the events (its measured lines), its results.json's bytes and exit code (``reference``: on the
    simpy reference, ``TWIN_COMPILED=0``). A line on stderr every :data:`BEAT_S` while it runs."""
    cmd = [sys.executable, "-m", "twin", "run", str(path), "--no-csv", "--no-plot", "--out", str(out), "--overwrite"]
    cmd += ["--processes", str(n)] if n > 1 else []
    env = {**os.environ, "COLUMNS": "250", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           **({"TWIN_COMPILED": "0"} if reference else {})}
    env["PYTHONUNBUFFERED"] = "1"  # each line as printed: the timeline below
    log = out.with_suffix(".log")
    lines: list[tuple[float, str]] = []
    t = time.perf_counter()
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=ROOT, text=True)
        reader = threading.Thread(target=_timestamped, args=(proc.stdout, t, lines, f), daemon=True)
        reader.start()
        beat = t + BEAT_S
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.05)
            if time.perf_counter() > beat:
                beat += BEAT_S
                say(f"    {n} process{'es' * (n > 1)}: {time.perf_counter() - t:.0f} s so far")
        wall = time.perf_counter() - t
        reader.join()
    text = log.read_text()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {code}:\n{text[-2000:]}")
    parts = [(int(k), float(cpu), float(pred)) for k, cpu, _, pred in PART_LINE.findall(text)]
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_gb": ru.ru_maxrss / 2**20,
            "parts": parts, "doc": (out / "results.json").read_bytes(), "timeline": timeline(lines, wall)}


def _timestamped(stream, t0: float, lines: list[tuple[float, str]], log) -> None:
    """Each line of ``stream`` (a run's stdout) with its seconds since ``t0``, into ``lines`` and ``log``."""
    for line in stream:
        lines.append((time.perf_counter() - t0, line))
        log.write(line)


def timeline(lines: list[tuple[float, str]], wall: float) -> str:
    """Where a whole run's wall seconds went, from its printed lines' instants: launch to the
    placement lines (start-up, loading, the topology), to the last part's first heartbeat (the
    cluster's start, the parts shipped), to the results table (the parts' runs, their results
    back, assembling, results.json written), to ``wrote`` (the files committed) and to exit (the
    cluster's close, the interpreter's end): ``a / b / c / d / e`` seconds; for one process
    ``c / d / e`` alone (launch to the table)."""
    def first(pattern: str) -> float | None:
        return next((s for s, line in lines if re.search(pattern, line)), None)
    placed = first(r"^(part \d+ \(components|--processes)")
    started = [s for s, line in lines if re.search(r"^part \d+: running on", line)]
    table_at, wrote = first(r": mesh, [\d,]+ flows, seed"), first(r"^wrote ")
    if table_at is None or wrote is None:
        return ""
    tail = f"{wrote - table_at:.2f} / {wall - wrote:.2f}"
    if placed is None or not started:
        return f"{table_at:.2f} / {tail}"
    return f"{placed:.2f} / {max(started) - placed:.2f} / {table_at - max(started):.2f} / {tail}"


def whole_table(path: Path, ns: list[int], tmp: Path, repeats: int = 1, reference: bool = False) -> list[str]:
    """The markdown table of ``--whole``: one row a process count (see :func:`whole_run`, the best of
    ``repeats`` by wall): wall, CPU,
    speed-up (one process's wall over N's), efficiency, the largest process's memory, the parts' CPU
    (all, largest), serial seconds (N's wall less its largest part's CPU: start-up, loading, placing,
    shipping, assembling and writing, what does not run in parallel), balance (largest part over the
    mean: predicted from the expected events, measured from the parts' CPU seconds), the timeline
    (:func:`timeline`); results.json checked byte-identical to one process's."""
    rows = ["| processes | parts | wall s | CPU s (all processes) | speed-up | efficiency | largest RSS GB | "
            "parts' CPU s (all / largest) | serial s | balance predicted / measured | timeline s |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    first = None
    for k, n in enumerate(ns, start=1):
        say(f"point {k}/{len(ns)}: twin run, {n} process{'es' * (n > 1)} ...")
        r = min((whole_run(path, n, tmp / f"run{n}", reference) for _ in range(repeats)), key=lambda x: x["wall"])
        if first is None:
            first = r
        elif r["doc"] != first["doc"]:
            raise SystemExit(f"{n} processes: results.json differs from one process's")
        s = first["wall"] / r["wall"]
        cpus = [c for _, c, _ in r["parts"]]
        pred = [w for _, _, w in r["parts"]]
        parts = (f"{sum(cpus):.2f} / {max(cpus):.2f}", f"{r['wall'] - max(cpus):.2f}",
                 f"{max(pred) / statistics.mean(pred):.3f} / {max(cpus) / statistics.mean(cpus):.3f}") \
            if cpus else ("", "", "1 / 1")
        rows.append(f"| {n} | {max(1, len(cpus))} | {r['wall']:.2f} | {r['cpu']:.2f} | {s:.2f} | {s / n:.2f} | "
                    f"{r['rss_gb']:.2f} | {' | '.join(parts)} | {r['timeline']} |")
        say(f"  {n} process{'es' * (n > 1)}: {r['wall']:.2f} s wall, {r['cpu']:.2f} CPU-s, speed-up {s:.2f}")
    return rows


def steps_table(ld, repeats: int) -> list[str]:
    """``--steps``: the one-process engine on the mesh (:func:`twin.engine.event.run_topology`, compiled
    core) advanced as before the whole step (9 replies a component a step, one core call a component:
    what a 10,000-reply progress step over 1,112 components gave) and as now (a window of
    :data:`twin.engine.compiled.WINDOW` replies a component, the whole step in one call); CPU and wall
    seconds, best of ``repeats``, every flow's rounds checked identical; markdown rows."""
    from twin.engine import compiled
    from twin.engine.event import run_topology
    from twin.studies.mesh import mesh_topology
    topo = mesh_topology(ld.scenario, ld.params)
    old_window = max(1, 10_000 // len(compiled.components(topo)))
    ways = [(f"one call a component, {old_window} replies a component a step", False, old_window),
            (f"the whole step in one call, {compiled.WINDOW} replies a component", True, compiled.WINDOW)]
    rows = ["| engine steps | wall s | CPU s | rounds / CPU-s | speed-up (CPU) |", "|---|---:|---:|---:|---:|"]
    first, ref = None, None
    window = compiled.WINDOW
    for label, whole, win in ways:
        compiled.WHOLE_STEP, compiled.WINDOW = whole, win
        best = (float("inf"), float("inf"))
        for k in range(repeats):
            say(f"  steps: {label}, run {k + 1}/{repeats} ...")
            t, c = time.perf_counter(), time.process_time()
            res = run_topology(topo)
            best = min(best, (time.process_time() - c, time.perf_counter() - t))
            if ref is None:
                ref = [r.t_back for r in res]
            elif not all(np.array_equal(a, r.t_back) for a, r in zip(ref, res)):
                raise SystemExit(f"{label}: the rounds differ")
            del res
        first = first or best[0]
        total = sum(f.spec.traffic.rounds for f in topo.flows)
        rows.append(f"| {label} | {best[1]:.2f} | {best[0]:.2f} | {total / best[0]:,.0f} | {first / best[0]:.2f} |")
    compiled.WHOLE_STEP, compiled.WINDOW = True, window
    return rows


def _core_or_why() -> str:
    """``compiled core``, or why the runs fall back to the simpy reference (the core not built here:
    ``python setup.py build_ext --inplace``), said at once on stderr."""
    from twin.engine.native import CoreUnavailable, core
    try:
        core()
    except CoreUnavailable as e:
        say(f"warning: the compiled core is not available ({e}); the runs use the simpy reference")
        return "simpy reference (no compiled core)"
    return "compiled core"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=288, help="nodes of the mesh, at least (default 288: 128 "
                    "controllers, 32 cards, 128 cores; the acceptance's: 10000)")
    ap.add_argument("--processes", default=",".join(str(i) for i in range(1, (os.cpu_count() or 1) + 1)),
                    help="comma-separated process counts (default 1 .. the CPU count)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds a flow (default 10000; 1000 with --reference)")
    ap.add_argument("--repeats", type=int, default=1, help="runs a point, the best kept (default 1)")
    ap.add_argument("--keep-rounds", action="store_true", help="the parts ship every round (as with a per-round "
                    "file or histograms) instead of their flows' statistics")
    ap.add_argument("--reference", action="store_true", help="the simpy reference engine")
    ap.add_argument("--no-dask-costs", action="store_true", help="skip the dispatch and gather measurements")
    ap.add_argument("--steps", action="store_true", help="only the one-process engine's steps before and after the "
                    "whole step in one core call")
    ap.add_argument("--whole", action="store_true", help="time whole `twin run MESH --no-csv --no-plot [--processes "
                    "N]` processes instead (launch to exit: start-up, loading, the cluster, writing)")
    args = ap.parse_args()
    if args.whole and args.keep_rounds:
        ap.error("--keep-rounds: the in-process runs' parts shipping every round; --whole runs twin run --no-csv")
    ns = sorted({int(x) for x in args.processes.split(",")} | {1})
    import twin.engine.event as E
    if args.reference:
        E.COMPILED = False  # this process's run; the parts follow it (run_mesh_parts asks event.COMPILED)
    rounds = args.rounds or (1000 if args.reference else 10_000)
    engine = "simpy reference" if args.reference else _core_or_why()
    from twin.scenario import load_scenario
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mesh.yaml"
        doc = mesh_doc(args.nodes, rounds)
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        say(f"loading the mesh: {len(doc['nodes']):,} nodes, {len(doc['flows']):,} flows ...")
        ld = load_scenario(path)
        costs = [] if args.no_dask_costs or args.steps else dask_costs(max(ns))
        if args.steps:
            rows = steps_table(ld, args.repeats)
        elif args.whole:
            rows = whole_table(path, ns, Path(tmp), args.repeats, args.reference)
        else:
            rows = table(ld, ns, args.repeats, args.keep_rounds, engine)
    controllers, cards = shape(args.nodes)
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs, python "
          f"{platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M %Z')}; load average (1 min) at the end "
          f"{os.getloadavg()[0]:.2f}")
    print(f"mesh: {len(doc['nodes']):,} nodes ({controllers:,} controllers, {cards:,} link cards each shared by "
          f"{PER_CARD}, {controllers:,} cores; {cards:,} independent components), {rounds:,} rounds a flow; "
          + (f"one process, the engine alone ({engine}); best of {args.repeats}; every flow's rounds identical: yes"
             if args.steps else
             (f"whole `twin run --no-csv --no-plot` processes, {engine}; " if args.whole else
              f"parts ship {'every round' if args.keep_rounds else 'their flows statistics'}; best of {args.repeats}; ")
             + "results.json byte-identical to one process's for every N: yes; the parts share nothing, so no window "
             "is synchronised (the gather below is what one window's barrier would cost)"))
    print()
    for line in costs + ([""] if costs else []) + rows:
        print(line)


if __name__ == "__main__":
    main()
