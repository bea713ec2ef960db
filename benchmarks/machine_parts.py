"""A machine study across processes: ``twin machine SCENARIO --processes N`` for each N asked, its wall
time (start-up of the local Dask cluster included), speed-up and efficiency over one process, and
whether results.json is byte-identical to the one-process run's; printed as a markdown table.

Two machines by default: the scenario as shipped (scenarios/machine_1000q_d15.yaml: its merges join
patches of neighbouring pools, so its ten pools form one component and run in one part whatever N:
twin/machine/parts.py) and the same machine without merges (``program.merge_rate: 0``, written to a
temporary copy: ten pools that share nothing, ten parts at most).

Usage (from the repository root): PYTHONPATH=. python benchmarks/machine_parts.py [--processes 1,2,4,8,16]
[--scenario NAME] [--cycles N] [--only shipped|independent]
"""
from __future__ import annotations

import argparse
import hashlib
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _run(scenario: Path, n: int, out: Path, cycles: int | None) -> tuple[float, float, str, int]:
    """One ``twin machine`` process: (wall s, its CPU s with its children's, results.json's sha256, parts)."""
    cmd = [sys.executable, "-m", "twin", "machine", str(scenario), "--out", str(out), "--no-plot", "--quiet",
           "--overwrite"]
    if n > 1:
        cmd += ["--processes", str(n)]
    if cycles:
        cmd += ["--cycles", str(cycles)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    t0 = time.perf_counter()
    before = os.times()
    p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = os.times()
    if p.returncode != 0:
        raise SystemExit(f"twin machine --processes {n} failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    parts = sum(1 for line in p.stdout.splitlines() if line.startswith("part ") and "predicted" in line
                and "CPU" in line) or 1
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu, hashlib.sha256((out / "results.json").read_bytes()).hexdigest(), parts


def independent_copy(path: Path, folder: Path) -> Path:
    """The scenario without merges (``program.merge_rate: 0``), named ``<name>_no_merges``."""
    doc = yaml.safe_load(path.read_text())
    doc["name"] = f"{doc['name']}_no_merges"
    doc["machine"]["program"]["merge_rate"] = 0.0
    out = folder / f"{doc['name']}.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def table(label: str, scenario: Path, counts: list[int], cycles: int | None, tmp: Path) -> list[str]:
    """The markdown rows of one machine at each process count."""
    rows = [f"**{label}** (`{scenario.name}`{f', --cycles {cycles}' if cycles else ''})", "",
            "| processes | parts | wall s | CPU s (all processes) | speed-up | efficiency "
            "| results.json as 1 process |",
            "|---:|---:|---:|---:|---:|---:|---|"]
    base: tuple[float, str] | None = None
    for n in counts:
        wall, cpu, digest, parts = _run(scenario, n, tmp / f"{scenario.stem}_{n}", cycles)
        if base is None:
            base = (wall, digest)
        speed = base[0] / wall
        rows.append(f"| {n} | {parts} | {wall:.1f} | {cpu:.1f} | {speed:.2f} | {100 * speed / n:.0f} % | "
                    f"{'identical' if digest == base[1] else 'DIFFERENT'} |")
        print(rows[-1], flush=True)
    return rows + [""]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", default="1,2", help="comma-separated process counts (the first is the baseline)")
    ap.add_argument("--scenario", default="machine_1000q_d15")
    ap.add_argument("--cycles", type=int, default=None, help="QEC cycles (default: the scenario's)")
    ap.add_argument("--only", choices=("shipped", "independent"), default=None)
    a = ap.parse_args()
    counts = [int(x) for x in a.processes.split(",")]
    path = Path(a.scenario) if a.scenario.endswith(".yaml") else ROOT / "scenarios" / f"{a.scenario}.yaml"
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, load average {os.getloadavg()[0]:.2f}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    out: list[str] = []
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        if a.only in (None, "shipped"):
            out += table("as shipped (merges couple the pools)", path, counts, a.cycles, tmp)
        if a.only in (None, "independent"):
            out += table("without merges (pools share nothing)", independent_copy(path, tmp), counts, a.cycles, tmp)
    print(f"load average at the end {os.getloadavg()[0]:.2f}\n")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
