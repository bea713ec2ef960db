"""Bytes a ``twin machine`` run grows by, measured: the whole process's peak RSS (``ru_maxrss`` of the
child, ``os.wait4``) at two sizes, the slope, against the constants of the machine's load-time
memory estimate (:mod:`twin.machine.memory`).

Cases:

- ``jobs``: scenarios/machine_1000q_d15.yaml (``--no-plot``) at two ``--cycles``: bytes per decode job
  (:data:`twin.machine.memory.JOB_BYTES`);
- ``ler shots``: a decoded sample (``ler:``) of a d = 9 patch (no stalls: every case d rounds) at two shot
  counts: bytes per shot-detector (:data:`twin.machine.memory.SAMPLE_BYTES`, per case decoded);
- ``ler detectors``: the same with 200 shots at d = 9 and d = 25: bytes per detector of the decoding
  graph (:data:`twin.machine.memory.GRAPH_BYTES`);
- ``check calls``: ``check:`` of a d = 5 window (240 detectors) at two call counts: bytes per call
  and shot (:data:`twin.machine.memory.CHECK_CALL_BYTES`, with its shots' detectors).

Prints one row per case and the ratio estimate / measured (>= 1: the estimate does not undercount).

Usage: PYTHONPATH=. python benchmarks/machine_memory.py
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def peak_rss(argv: list[str], cwd: Path) -> int:
    """Peak RSS (bytes) of ``python -m twin ARGV`` run to its end in ``cwd``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "twin", *argv, "--quiet", "--no-plot", "--overwrite"], cwd=cwd,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(p.pid, 0)
    err = p.stderr.read().decode() if p.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"twin {' '.join(argv)} failed:\n{err[-2000:]}")
    return usage.ru_maxrss * 1024


def small(here: Path, name: str, **machine) -> Path:
    """A one-patch machine (fixed cost, no T gates: no stalls) with ``machine`` keys over it."""
    m = {"cycle": "1 us", "cycles": 60, "distance": 9, "layout": {"rows": 1, "cols": 1},
         "window": {"kind": "streaming", "commit": 9, "buffer": 9}, "decoder": {"cost": {"fixed": "1 us"}},
         "links": {k: {"kind": "aurora", "latency": "0 ns"} for k in ("syndrome", "correction", "fabric")} | {
             "local": "0 ns"},
         "pools": [{"name": "p", "nodes": [{"name": "n", "device": "epyc9755", "decoders": 4}]}]}
    m.update(machine)
    p = here / f"{name}.yaml"
    p.write_text(yaml.safe_dump({"name": name, "seed": 1, "machine": m}))
    return p


def row(case: str, sizes: tuple, peaks: list[int], unit: float, estimate: float) -> None:
    per = (peaks[1] - peaks[0]) / unit
    print(f"{case:16s} {sizes[0]:>12,} -> {sizes[1]:<12,} {peaks[0] / 2**20:>7.0f} -> {peaks[1] / 2**20:<7.0f} "
          f"{per:>10.1f} {estimate:>10.1f} {estimate / per if per > 0 else float('inf'):>8.2f}")


def main() -> int:
    from twin.machine import memory as M
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}")
    print(f"{'case':16s} {'size':>27s} {'peak MiB':>17s} {'B/unit':>10s} {'estimate':>10s} {'est/meas':>8s}")
    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        jobs, peaks = [], []
        for cycles in (3000, 10000):
            out = here / f"j{cycles}"
            peaks.append(peak_rss(["machine", "machine_1000q_d15", "--cycles", str(cycles), "--out", str(out)], ROOT))
            jobs.append(sum(p["jobs"] for p in json.loads((out / "results.json").read_text())["pools"]))
        row("jobs", tuple(jobs), peaks, jobs[1] - jobs[0], M.JOB_BYTES)
        dets = 80 * 9
        shots = (20_000, 80_000)
        peaks = [peak_rss(["machine", str(small(here, f"s{s}", p=0.001, ler={"shots": s})), "--out",
                           str(here / "o")], here) for s in shots]
        row("ler shots", shots, peaks, (shots[1] - shots[0]) * dets, M.SAMPLE_BYTES)
        ds = (9, 25)
        peaks = [peak_rss(["machine", str(small(here, f"d{d}", p=0.001, distance=d, ler={"shots": 200},
                                                window={"kind": "streaming", "commit": d, "buffer": d},
                                                cycles=3 * d)), "--out", str(here / "o")], here) for d in ds]
        n = [M.memory_detectors(d, d) for d in ds]
        row("ler detectors", tuple(n), peaks, n[1] - n[0], M.GRAPH_BYTES + 200 * M.SAMPLE_BYTES)
        calls = (2_000, 20_000)
        peaks = [peak_rss(["machine", str(small(here, f"c{c}", p=0.001, distance=5, check={"calls": c},
                                                window={"kind": "streaming", "commit": 5, "buffer": 5},
                                                decoder={"cost": {"how": "measured"}})), "--out", str(here / "o")],
                          here) for c in calls]
        row("check calls", calls, peaks, calls[1] - calls[0], M.CHECK_CALL_BYTES + 240 * M.SAMPLE_BYTES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
