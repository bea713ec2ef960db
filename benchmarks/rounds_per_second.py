"""Simulated rounds per wall-clock second for the default scenario, on one core.

Runs each consumer loop of scenarios/card_path_64b.yaml with the direct engine and with the
event model, and prints rounds/s for each and the ratios measured in this one run: direct vs
event, and both vs the real hardware's rate (one round every 2.172 µs on the EPYC 7282 core,
the seeds' median: about 460,000 rounds/s; amd-qblox-exchange-runtime.txt).

Usage: python benchmarks/rounds_per_second.py [--rounds N] [--event-rounds N]
"""
from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

from twin.engine.direct import run_direct
from twin.engine.event import run_event
from twin.scenario import load_scenario
from twin.scenario.compile import flow_spec
from twin.studies.run import run_study

ROOT = Path(__file__).resolve().parent.parent
HARDWARE_ROUNDS_PER_S = 1e12 / 2_172_000  # one round per 2.172 µs (EPYC 7282 core p50)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200_000, help="rounds per consumer, direct engine")
    ap.add_argument("--event-rounds", type=int, default=40_000, help="rounds per consumer, event model")
    ap.add_argument("--study-rounds", type=int, default=100_000, help="rounds per consumer, whole study")
    args = ap.parse_args()
    loaded = load_scenario(ROOT / "scenarios" / "card_path_64b.yaml")
    sc = loaded.scenario
    totals = {"direct": [0, 0.0], "event": [0, 0.0]}
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    print(f"{'consumer':10s} {'direct r/s':>12s} {'event r/s':>12s}")
    for node in sc.consumers():
        rates = {}
        for engine, n, fn in (("direct", args.rounds, run_direct), ("event", args.event_rounds, run_event)):
            spec = flow_spec(loaded.params, node.device, sc.traffic_params(n), sc.seed, slots=sc.slots)
            t0 = time.perf_counter()
            fn(spec)
            dt = time.perf_counter() - t0
            totals[engine][0] += n
            totals[engine][1] += dt
            rates[engine] = n / dt
        print(f"{node.device:10s} {rates['direct']:12,.0f} {rates['event']:12,.0f}")
    d = totals["direct"][0] / totals["direct"][1]
    e = totals["event"][0] / totals["event"][1]
    print(f"{'all':10s} {d:12,.0f} {e:12,.0f}")
    print(f"ratio direct/event: {d / e:.2f}")
    print(f"ratio direct/hardware ({HARDWARE_ROUNDS_PER_S:,.0f} rounds/s): {d / HARDWARE_ROUNDS_PER_S:.3f}")
    print(f"ratio event/hardware: {e / HARDWARE_ROUNDS_PER_S:.3f}")
    print(f"ratio direct/target (150,000 rounds/s): {d / 150_000:.2f}")
    rates = {}
    for model in ("sim", "code"):
        spec = flow_spec(loaded.params, "epyc7282", sc.traffic_params(args.event_rounds), sc.seed,
                         slots=sc.slots, model=model)
        t0 = time.perf_counter()
        run_event(spec)
        rates[model] = args.event_rounds / (time.perf_counter() - t0)
    print(f"event model, epyc7282, model sim: {rates['sim']:,.0f} rounds/s; model code (C runtime library "
          f"via ctypes): {rates['code']:,.0f} rounds/s; ratio code/sim: {rates['code'] / rates['sim']:.2f}")
    t0 = time.perf_counter()
    run_study(loaded, rounds=args.study_rounds)
    dt = time.perf_counter() - t0
    s = len(sc.consumers()) * args.study_rounds / dt
    print(f"whole study as `twin run` does it (direct engine + event model over 10,000 rounds per consumer, "
          f"no file output): {s:,.0f} rounds/s; ratio study/target: {s / 150_000:.2f}")


if __name__ == "__main__":
    main()
