"""How quiet a pinned, spinning core is: the interruptions a paced live loop cannot avoid.

``PYTHONPATH=. python benchmarks/core_quiet.py [--cores 2,4] [--seconds 2] [--threshold-ns 1000]``

Per core: benchmarks/core_quiet.c (built here with ``cc -O2``) pins itself there and reads
CLOCK_MONOTONIC back to back for ``--seconds``; every interval between two reads longer than the
threshold is time the spinning thread lost (a timer tick, an interrupt, a hypervisor exit, another
thread on the core). Printed: interruptions per second, their length p50 / p99 / max, the share of
time lost, whether they are phase-locked to a 1 ms grid (the Rayleigh statistic R of their instants
modulo 1 ms: 1 locked, near 0 uniform; with the median interval between them), the core's local
timer interrupts per second over the run (``LOC`` of /proc/interrupts, where the kernel has it),
and whether the kernel runs that core tickless (``nohz_full=`` / ``isolcpus=`` in /proc/cmdline).

Why it matters (issue 26): a paced producer that spins to a request's instant is late by one
interruption whenever one falls just before that instant, and a consumer that spins on its queue
notices a request late by one when one falls as it lands; with a 1 kHz tick costing several µs,
about (round time x tick rate) of rounds meet one, so a gap error within 1 µs at p99 needs fewer
than 1 % of rounds to meet a tick: rounds shorter than about 10 µs, or a tickless core.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SRC = Path(__file__).with_name("core_quiet.c")


def build(work: Path) -> Path:
    """Compile core_quiet.c into ``work``; its path. Raises SystemExit (one line) without a C compiler."""
    exe = work / "core_quiet"
    done = subprocess.run(["cc", "-O2", "-o", str(exe), str(SRC)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"core_quiet: cc failed: {done.stderr.strip().splitlines()[-1:]}")
    return exe


def local_timer(cpu: int) -> int | None:
    """The ``LOC`` (local timer interrupts) count of ``cpu`` in /proc/interrupts, or None."""
    try:
        lines = Path("/proc/interrupts").read_text().splitlines()
    except OSError:
        return None
    head = lines[0].split()
    for ln in lines[1:]:
        f = ln.split()
        if f and f[0] == "LOC:" and f"CPU{cpu}" in head:
            return int(f[1 + head.index(f"CPU{cpu}")])
    return None


def tickless(cpu: int) -> str:
    """What /proc/cmdline says of ``cpu``: the nohz_full / isolcpus lists naming it, or 'ticking'."""
    try:
        cmd = Path("/proc/cmdline").read_text()
    except OSError:
        return "unknown"
    said = [m.group(0) for m in re.finditer(r"\b(nohz_full|isolcpus)=\S+", cmd)]
    return ", ".join(said) if said else "ticking (no nohz_full / isolcpus)"


def measure(exe: Path, cpu: int, seconds: float, thr: int) -> dict:
    """One core's interruptions (ns): rate, lengths, time lost, 1 ms phase lock, timer interrupts."""
    loc0 = local_timer(cpu)
    done = subprocess.run([str(exe), str(cpu), str(int(seconds * 1e9)), str(thr)], capture_output=True, text=True)
    loc1 = local_timer(cpu)
    if done.returncode != 0:
        raise SystemExit(f"core_quiet: core {cpu}: exit {done.returncode} (a pin outside this process's cores?)")
    lines = done.stdout.splitlines()
    tail = lines[-1].split()
    span = int(tail[3])
    ev = np.array([[int(a) for a in ln.split()] for ln in lines[:-1]], np.int64).reshape(-1, 2)
    at, ln_ = ev[:, 0], ev[:, 1]
    r = float(abs(np.exp(2j * np.pi * (at % 1_000_000) / 1e6).mean())) if len(at) else 0.0
    q = (lambda p: float(np.percentile(ln_, p))) if len(ln_) else (lambda p: 0.0)
    return {"cpu": cpu, "per_s": len(at) / (span / 1e9), "p50": q(50), "p99": q(99),
            "max": float(ln_.max()) if len(ln_) else 0.0, "lost": float(ln_.sum()) / span,
            "R1ms": r, "dt_med": float(np.median(np.diff(at))) if len(at) > 1 else 0.0,
            "loc_per_s": None if loc0 is None or loc1 is None else (loc1 - loc0) / (span / 1e9)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", default=None, help="comma-separated cores (default: every core this process may use)")
    ap.add_argument("--seconds", type=float, default=2.0, help="spin time per core (s)")
    ap.add_argument("--threshold-ns", type=int, default=1000, help="an interval longer than this is an interruption")
    a = ap.parse_args(argv)
    allowed = sorted(os.sched_getaffinity(0))
    try:
        cores = [int(c) for c in a.cores.split(",")] if a.cores else allowed
    except ValueError:
        raise SystemExit(f"core_quiet: --cores takes comma-separated integers, got {a.cores!r}") from None
    if a.seconds <= 0 or a.threshold_ns <= 0:
        raise SystemExit("core_quiet: --seconds and --threshold-ns must be > 0")
    print(f"# core quiet: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, kernel "
          f"{platform.release()}, load average {os.getloadavg()[0]:.2f}; {a.seconds:g} s a core, interruption > "
          f"{a.threshold_ns} ns; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{'core':>5}{'per s':>9}{'len p50':>9}{'len p99':>9}{'max':>9}{'lost %':>8}{'R 1ms':>7}{'dt med us':>10}"
          f"{'LOC/s':>8}  tick")
    with tempfile.TemporaryDirectory() as d:
        exe = build(Path(d))
        for i, c in enumerate(cores):
            print(f"# core {c} ({i + 1}/{len(cores)})", file=sys.stderr, flush=True)
            m = measure(exe, c, a.seconds, a.threshold_ns)
            loc = "-" if m["loc_per_s"] is None else f"{m['loc_per_s']:.0f}"
            print(f"{c:>5}{m['per_s']:>9.1f}{m['p50']:>9.0f}{m['p99']:>9.0f}{m['max']:>9.0f}{100 * m['lost']:>8.3f}"
                  f"{m['R1ms']:>7.2f}{m['dt_med'] / 1e3:>10.1f}{loc:>8}  {tickless(c)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
