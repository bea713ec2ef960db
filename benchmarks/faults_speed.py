"""Rounds per CPU-second of a run with faults, on the simpy reference and the compiled event core.

The loop of scenarios/faults_epyc7282.yaml (EPYC 7282 core on the card path, its corrupt pieces,
dropped frame, 200 us stall and 50 us reply timeout), and the same loop without faults, run on
both engines in this one process; it prints rounds per CPU-second, the compiled/simpy ratio and
the ratio to the hardware's rate (one round per 2.172 us on the EPYC 7282 core, the seeds' median:
about 460,000 rounds/s; amd-qblox-exchange-runtime.txt), and checks the two engines' rounds and
statistics identical. Compiled runs: best of 3.

Usage: python benchmarks/faults_speed.py [--rounds N] [--simpy-rounds N]
"""
from __future__ import annotations

import argparse
import platform
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

import twin.engine.event as E
from twin.scenario import load_scenario
from twin.scenario.compile import flow_spec

ROOT = Path(__file__).resolve().parent.parent
HARDWARE_ROUNDS_PER_S = 1e12 / 2_172_000


def _rate(spec, compiled: bool, tries: int):
    E.COMPILED = compiled
    try:
        best, res = 0.0, None
        for _ in range(tries):
            t = time.process_time()
            res = E.run_event(spec)
            best = max(best, spec.traffic.rounds / (time.process_time() - t))
        return best, res
    finally:
        E.COMPILED = True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=300_000, help="rounds, compiled core")
    ap.add_argument("--simpy-rounds", type=int, default=15_000, help="rounds, simpy reference (and the check)")
    a = ap.parse_args()
    loaded = load_scenario(ROOT / "scenarios" / "faults_epyc7282.yaml")
    sc = loaded.scenario
    node = next(iter(sc.consumers()))

    def spec(rounds: int, faults: bool):
        s = flow_spec(loaded.params, node.device, sc.traffic_params(rounds), sc.seed, slots=sc.slots,
                      encoding=None if sc.encoding == "default" else sc.encoding,
                      external_control=sc.external_control())
        return replace(s, faults=sc.faults.plan()) if faults else s

    print(f"{platform.processor() or platform.machine()}, {time.strftime('%Y-%m-%d')}, one core, CPU time")
    for faults in (True, False):
        simpy, ref = _rate(spec(a.simpy_rounds, faults), False, 1)
        _, got = _rate(spec(a.simpy_rounds, faults), True, 1)
        same = all(np.array_equal(getattr(ref, k), getattr(got, k)) for k in ("t_in", "t_have", "t_back", "ok"))
        same = same and {k: v for k, v in ref.stats.items() if k != "slot_wait_ps"} == \
            {k: v for k, v in got.stats.items() if k != "slot_wait_ps"}
        fast, _ = _rate(spec(a.rounds, faults), True, 3)
        print(f"{'faults' if faults else 'no faults':>9}: simpy {simpy:>9,.0f} rounds/CPU-s, compiled {fast:>11,.0f} "
              f"({fast / simpy:,.0f}x simpy, {fast / HARDWARE_ROUNDS_PER_S:.2f}x the hardware); "
              f"identical over {a.simpy_rounds:,} rounds: {same}; detected {ref.stats['faults']['detected']}")


if __name__ == "__main__":
    main()
