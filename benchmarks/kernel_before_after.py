"""The simpy reference kernel before and after a change to twin/kernel/sim.py, measured in one run:
the kernel of another commit (``git show REV:twin/kernel/sim.py``, imported as a module of its own)
against this checkout's, alternated so that both see the same machine load.

Two measurements, each in events per CPU-second (``time.process_time``), best of ``--repeat``:

- ``chain``: the kernel alone: 4 callbacks rescheduling themselves (``at(now + d)``) until
  ``--events`` callbacks have run (the scheduling and dispatch of one event);
- ``reference``: the simpy event engine (:func:`twin.engine.event.run_topology`, the compiled core
  off) on every consumer of scenarios/card_path_64b.yaml, ``--rounds`` rounds each, with
  ``twin.engine.event.Kernel`` set to one kernel then the other (the same engine code around it);
  events are the run's ``stats["events"]`` (callbacks scheduled), which must agree between the two,
  as must every round's timestamps.

Usage: python benchmarks/kernel_before_after.py [--rev REV] [--events N] [--rounds N] [--repeat K]
"""
from __future__ import annotations

import argparse
import importlib.util
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import twin.engine.event as E
from twin.calibration.params import loop_spec
from twin.engine.topology import Topology
from twin.kernel import sim
from twin.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent


def kernel_of(rev: str, tmp: Path) -> type:
    """The ``Kernel`` class of twin/kernel/sim.py at commit ``rev``, loaded as a module of its own."""
    text = subprocess.run(["git", "show", f"{rev}:twin/kernel/sim.py"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout
    path = tmp / "kernel_before.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("kernel_before", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kernel_before"] = mod
    spec.loader.exec_module(mod)
    return mod.Kernel


def chain(kernel: type, n: int) -> float:
    """Events per CPU-second of ``n`` callbacks of 4 self-rescheduling chains."""
    k = kernel(0)
    left = [n]

    def tick(d: int) -> None:
        left[0] -= 1
        if left[0] > 0:
            k.at(k.now + d, tick, d)

    for i in range(4):
        k.at(i, tick, 7 + i)
    t0 = time.process_time()
    k.run()
    return n / (time.process_time() - t0)


def reference(kernel: type, specs: list) -> tuple[float, int, list]:
    """(events per CPU-second, events, per-flow t_back) of the simpy engine on ``specs`` with ``kernel``."""
    compiled = E.COMPILED
    setattr(E, "Kernel", kernel)  # the engine's one Kernel(seed) call makes this kernel
    E.COMPILED = False
    try:
        events, cpu, backs = 0, 0.0, []
        for spec in specs:
            t0 = time.process_time()
            res = E.run_topology(Topology.single(spec))[0]
            cpu += time.process_time() - t0
            events += res.stats["events"]
            backs.append(res.t_back)
        return events / cpu, events, backs
    finally:
        setattr(E, "Kernel", sim.Kernel)
        E.COMPILED = compiled


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="6b5966f", help="the commit whose kernel is 'before' (default: 6b5966f, "
                                                     "the last on simpy's private queue)")
    ap.add_argument("--events", type=int, default=300_000, help="callbacks of the chain measurement")
    ap.add_argument("--rounds", type=int, default=5_000, help="rounds per consumer, reference engine")
    ap.add_argument("--repeat", type=int, default=5, help="alternations (the best of each side is kept)")
    args = ap.parse_args()
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    loaded = load_scenario(ROOT / "scenarios" / "card_path_64b.yaml")
    sc = loaded.scenario
    specs = [loop_spec(loaded.params, str(node.device), sc.traffic_params(args.rounds), sc.seed, sc.slots)
             for node in sc.consumers()]
    with tempfile.TemporaryDirectory() as tmp:
        kernels = {"before": kernel_of(args.rev, Path(tmp)), "after": sim.Kernel}
        best: dict[str, dict[str, float]] = {s: {} for s in kernels}
        seen: dict[str, tuple] = {}
        for r in range(args.repeat):
            for side, kern in kernels.items():
                c = chain(kern, args.events)
                ref, events, backs = reference(kern, specs)
                seen.setdefault(side, (events, backs))
                print(f"  run {r + 1} {side:6s} chain {c:11,.0f}  reference {ref:11,.0f} events/CPU-s", flush=True)
                for what, v in (("chain", c), ("reference", ref)):
                    best[side][what] = max(best[side].get(what, 0.0), v)
    (eb, bb), (ea, ba) = seen["before"], seen["after"]
    if eb != ea or not all(np.array_equal(x, y) for x, y in zip(bb, ba)):
        raise SystemExit(f"kernel_before_after: the kernels disagree (events {eb} vs {ea}, or a round's t_back)")
    print(f"same results: {ea:,} events, every round's t_back equal")
    for what in ("chain", "reference"):
        b, a = best["before"][what], best["after"][what]
        print(f"{what:9s}: before {b:11,.0f}  after {a:11,.0f} events/CPU-s   ratio after/before {a / b:.3f}")


if __name__ == "__main__":
    main()
