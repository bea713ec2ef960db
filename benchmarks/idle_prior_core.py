"""A mesh whose consumers pay their class's idle prior, as whole ``twin run`` processes: rounds per
CPU-second (user + sys of the child, start-up included: :func:`process_speed.child`), in one run.

The mesh is scenarios/mesh_two_controllers_one_gpu.yaml (two controllers on their own clocks, Poisson
arrivals of mean 20 µs, one MI210 shared): sparse traffic, so its GPU takes the class's idle prior
(docs/calibration.md, "Idle priors"). Cases, each from a scenario copy whose calibration (card_path.yaml)
says ``idle: prior`` or ``idle: none`` for every cpu and gpu explicitly (so a checkout where the prior is
not the default runs the same study):

- ``prior, core``: the idle prior on the compiled core (this checkout computes it: twin/engine/service_core.py);
- ``prior, simpy``: the same with ``TWIN_COMPILED=0``: where every such run went before the core computed
  an idle cost (the core refused it and the run fell to the simpy reference);
- ``none, core``: no idle cost, compiled core (what the prior itself costs the core);
- with ``--before CHECKOUT``: ``prior`` from that checkout (e.g. main before this change), as it runs it.

Prints rounds per CPU-second of each and the ratio core / simpy.

Usage: PYTHONPATH=. python benchmarks/idle_prior_core.py [--rounds N] [--simpy-rounds N] [--before CHECKOUT]
    [--repeat N]
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from process_speed import _load, child  # noqa: E402  (the whole-process timing, one copy)

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml"


def scenario_copy(tmp: Path, idle: str) -> Path:
    """A copy of :data:`SCENARIO` whose calibration says ``idle: <idle>`` for every cpu and gpu consumer."""
    sc = yaml.safe_load(SCENARIO.read_text())
    cal_path = (SCENARIO.parent / sc["calibration"]).resolve()
    cal = yaml.safe_load(cal_path.read_text())
    for c in cal["consumers"].values():
        if c["kind"] in ("cpu", "gpu"):
            c["idle"] = idle
    cal_copy = tmp / f"calibration_{idle}.yaml"  # its references are provenance strings only: any folder
    cal_copy.write_text(yaml.safe_dump(cal, sort_keys=False))
    sc["calibration"] = str(cal_copy)
    out = tmp / f"mesh_{idle}.yaml"
    out.write_text(yaml.safe_dump(sc, sort_keys=False))
    return out


def whole(checkout: Path, scenario: Path, rounds: int, flows: int, env: dict | None = None,
          repeat: int = 1) -> tuple[float, float]:
    """(CPU seconds, rounds per CPU-second) of ``twin run scenario --rounds rounds`` from ``checkout``, the
    best of ``repeat`` (a shared machine's noise is one-sided)."""
    best = min(_once(checkout, scenario, rounds, env) for _ in range(repeat))
    return best, rounds * flows / best


def _once(checkout: Path, scenario: Path, rounds: int, env: dict | None) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        saved = dict(os.environ)
        os.environ.update(env or {})
        try:
            cpu, _, _ = child([sys.executable, "-m", "twin", "run", str(scenario), "--rounds", str(rounds),
                               "--no-rounds", "--no-plot", "--quiet", "--out", f"{tmp}/o"], checkout)
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2_000_000, help="rounds per flow on the core (default 2e6)")
    ap.add_argument("--simpy-rounds", type=int, default=10_000, help="rounds per flow on simpy (default 1e4)")
    ap.add_argument("--before", type=Path, help="a checkout to run the prior case from too (e.g. main)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each, the best kept (default 2)")
    args = ap.parse_args()
    flows = len(yaml.safe_load(SCENARIO.read_text())["flows"])
    print(f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load average {_load()} at the start; {SCENARIO.name}, {flows} flows")
    with tempfile.TemporaryDirectory() as t:
        prior, none = scenario_copy(Path(t), "prior"), scenario_copy(Path(t), "none")
        k = args.repeat
        rows = [("prior, core", whole(ROOT, prior, args.rounds, flows, repeat=k)),
                ("prior, simpy", whole(ROOT, prior, args.simpy_rounds, flows, {"TWIN_COMPILED": "0"}, k)),
                ("none, core", whole(ROOT, none, args.rounds, flows, repeat=k))]
        if args.before is not None:
            rows.append((f"prior, {args.before}", whole(args.before.resolve(), prior, args.simpy_rounds, flows,
                                                        repeat=k)))
    for label, (cpu, rate) in rows:
        print(f"{label:24s} whole process {cpu:7.2f} CPU-s  {rate:12,.0f} rounds/CPU-s", flush=True)
    rate = dict((label, r) for label, (_, r) in rows)
    print(f"core / simpy with the prior: {rate['prior, core'] / rate['prior, simpy']:.1f}x; "
          f"prior / none on the core: {rate['prior, core'] / rate['none, core']:.2f}; load average {_load()}")


if __name__ == "__main__":
    main()
