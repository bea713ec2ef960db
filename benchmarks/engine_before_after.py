"""Engine speed before and after a change, measured in one run: the same rounds of the default
scenario on this checkout and on another checkout (e.g. the commit before the change), alternated
so that both see the same machine load.

Each measurement runs in a fresh interpreter with the checkout first on the import path: the direct
engine and the event model over every consumer of scenarios/card_path_64b.yaml, one core; the ratio
printed is after/before (> 1: faster now). ``--reference`` runs both sides with the compiled core off
(``TWIN_COMPILED=0``): the direct engine's Python recurrence and the simpy event engine, the
reference kernel (twin/kernel/sim.py).

Usage: python benchmarks/engine_before_after.py BEFORE_CHECKOUT [--rounds N] [--event-rounds N] [--repeat K]
[--reference]
(the BEFORE checkout needs its runtime extension built in place: ``python setup.py build_ext --inplace``).
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import json, sys, time
from pathlib import Path
root = Path(sys.argv[1]); n_direct = int(sys.argv[2]); n_event = int(sys.argv[3])
import importlib
try:
    importlib.import_module("twin.engine.direct")
    pkg, build = "twin.engine", "twin.calibration.params"
except ImportError:  # a checkout from before the one engine
    pkg, build = "twin.loop", "twin.loop.build"
try:  # the compile step's one entry to the spec builders
    from twin.scenario.compile import flow_spec
    loop_spec = lambda params, device, tr, seed, slots: flow_spec(params, device, tr, seed, slots=slots)
except ImportError:  # a checkout from before it
    loop_spec = importlib.import_module(build).loop_spec
run_direct = importlib.import_module(pkg + ".direct").run_direct
run_event = importlib.import_module(pkg + ".event").run_event
from twin.scenario import load_scenario
loaded = load_scenario(root / "scenarios" / "card_path_64b.yaml")
sc = loaded.scenario
out = {}
for engine, n, fn in (("direct", n_direct, run_direct), ("event", n_event, run_event)):
    total = 0.0
    for node in sc.consumers():
        spec = loop_spec(loaded.params, node.device, sc.traffic_params(n), sc.seed, sc.slots)
        t0 = time.process_time(); fn(spec); total += time.process_time() - t0
    out[engine] = len(sc.consumers()) * n / total
print(json.dumps(out))
"""


def measure(tree: Path, n_direct: int, n_event: int, reference: bool = False) -> dict:
    """Rounds per CPU-second of both engines on checkout ``tree`` (a fresh interpreter; ``reference``:
    with the compiled core off)."""
    import os
    path = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {"PYTHONPATH": path, "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
           **({"TWIN_COMPILED": "0"} if reference else {})}
    r = subprocess.run([sys.executable, "-c", PROBE, str(tree), str(n_direct), str(n_event)], env=env, cwd=tree,
                       capture_output=True, text=True, check=False)
    if r.returncode:
        raise SystemExit(f"engine_before_after: the probe failed in {tree}:\n{r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path, help="the other checkout (built in place)")
    ap.add_argument("--rounds", type=int, default=100_000, help="rounds per consumer, direct engine")
    ap.add_argument("--event-rounds", type=int, default=20_000, help="rounds per consumer, event model")
    ap.add_argument("--repeat", type=int, default=3, help="alternations (best of each side is kept)")
    ap.add_argument("--reference", action="store_true", help="the compiled core off on both sides (TWIN_COMPILED=0)")
    args = ap.parse_args()
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    best = {"before": {}, "after": {}}
    for k in range(args.repeat):
        for side, tree in (("before", args.before.resolve()), ("after", ROOT)):
            m = measure(tree, args.rounds, args.event_rounds, args.reference)
            print(f"  run {k + 1} {side:6s} direct {m['direct']:10,.0f}  event {m['event']:9,.0f} rounds/CPU-s",
                  flush=True)
            for e, v in m.items():
                best[side][e] = max(best[side].get(e, 0.0), v)
    for e in ("direct", "event"):
        b, a = best["before"][e], best["after"][e]
        print(f"{e:6s}: before {b:10,.0f}  after {a:10,.0f} rounds/CPU-s   ratio after/before {a / b:.3f}")


if __name__ == "__main__":
    main()
