"""The compiled event core before and after a change, alternated in one process: rounds per CPU-second
of engine_speed.py's event-core rows on this checkout and on another (e.g. main before the change).

The other checkout's ``twin/engine/compiled.py`` is loaded beside this one's (it imports the rest of
twin from this checkout, so the comparison is of changes to compiled.py and core.c) and its
``twin/engine/c/core.c`` built into the cache by its build id, as :func:`twin.engine.native.core`
builds a private copy. Each row runs before, then after, ``--repeat`` times, so that both see the
same machine load; the first pair's results must be identical (timestamps, hops, checks, every
statistic and the reply digest), else the benchmark stops. CPU time is ``time.process_time``.

Rows: the default scenario's EPYC 7282 card path, closed loop, 5e5 rounds; two flows of 8 in flight
on one shared consumer, 2.5e5 rounds each; the 256-node mesh of engine_speed.py (128 flows, open
loop), 2e5 rounds in all.

Usage: python benchmarks/event_core_before_after.py BEFORE_CHECKOUT [--repeat K] [--quick]
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import importlib.util
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from engine_speed import mesh  # noqa: E402

from twin.devices.generator import TrafficParams  # noqa: E402
from twin.engine import compiled, native  # noqa: E402
from twin.engine.topology import Flow, Topology  # noqa: E402
from twin.runtime.native import build_shared  # noqa: E402
from twin.scenario import load_scenario  # noqa: E402
from twin.scenario.compile import flow_spec  # noqa: E402


def before_side(checkout: Path):
    """(compiled module, core library) of the other checkout."""
    src = checkout / "twin" / "engine" / "compiled.py"
    spec = importlib.util.spec_from_file_location("twin.engine._compiled_before", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    core = checkout / "twin" / "engine" / "c" / "core.c"
    bid = hashlib.sha256(core.read_bytes()).hexdigest()[:16]
    path = build_shared("twin-core", "the engine's compiled core", bid, [core], [],
                        [f'-DTWIN_CORE_BUILD_ID="{bid}"', "-O3"], native.CoreUnavailable)
    lib = ctypes.CDLL(str(path))
    try:
        native._declare(lib)
    except AttributeError:  # a core from before twin_event_columns (declared last; its compiled.py does not call it)
        pass
    return mod, lib


def timed(mod, lib, topo):
    native._LIB = lib
    t0 = time.process_time()
    res = mod.run(topo)
    dt = time.process_time() - t0
    return sum(len(r.t_in) for r in res) / dt, res


def identical(ref, got, row):
    for a, b in zip(ref, got, strict=True):
        for f in ("t_send", "t_in", "t_have", "t_back", "ok"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f"{row}: {f} differs"
        for f in ("issue", "land", "seen", "start", "reply", "publish", "rland"):
            assert np.array_equal(getattr(a.hops, f), getattr(b.hops, f)), f"{row}: hop {f} differs"
        sa, sb = dict(a.stats), dict(b.stats)
        assert np.array_equal(sa.pop("slot_wait_ps"), sb.pop("slot_wait_ps")), f"{row}: slot waits differ"
        assert sa == sb, f"{row}: statistics differ"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path, help="the other checkout (its twin/engine/compiled.py and c/core.c)")
    ap.add_argument("--repeat", type=int, default=5, help="alternations per row (default 5)")
    ap.add_argument("--quick", action="store_true", help="a tenth of the rounds (a smoke run)")
    args = ap.parse_args()
    q = 10 if args.quick else 1
    loaded = load_scenario(ROOT / "scenarios" / "card_path_64b.yaml")
    sc = loaded.scenario

    def spec_of(tr):
        return flow_spec(loaded.params, "epyc7282", tr, sc.seed, slots=sc.slots)

    def closed(n, **kw):
        return TrafficParams("closed_loop", n, sc.frame_bytes, **kw)

    def contention(n):
        s = [replace(spec_of(closed(n, in_flight=8)), name=f"q{j}") for j in range(2)]
        return Topology("contention", sc.seed, tuple(Flow(x, f"gen{j}", "card", "shared") for j, x in enumerate(s)))

    old, old_lib = before_side(args.before)
    new_lib = native.core()
    rows = (("compiled event core, closed loop", Topology.single(spec_of(closed(500_000 // q)))),
            ("compiled event core, 2 x 8 in flight, shared consumer", contention(250_000 // q)),
            ("mesh, 256 nodes (128 flows)", mesh(spec_of, 256, 200_000 // q)))
    print(f"before: {args.before}, after: {ROOT}; {args.repeat} alternations per row; "
          f"load average at start {os.getloadavg()[0]:.2f}")
    print(f"{'row':56s} {'before med':>11s} {'after med':>11s} {'before best':>12s} {'after best':>11s} "
          f"{'after/before':>12s}")
    for name, topo in rows:
        rb, ra = [], []
        for k in range(args.repeat):
            b, res_b = timed(old, old_lib, topo)
            a, res_a = timed(compiled, new_lib, topo)
            if k == 0:
                identical(res_b, res_a, name)
            rb.append(b)
            ra.append(a)
        print(f"{name:56s} {statistics.median(rb):11,.0f} {statistics.median(ra):11,.0f} {max(rb):12,.0f} "
              f"{max(ra):11,.0f} {statistics.median(ra) / statistics.median(rb):12.2f}", flush=True)
    native._LIB = new_lib
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
