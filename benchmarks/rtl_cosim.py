"""Co-simulation speed of the RTL V80 node: RTL cycles per wall second inside the twin's event
timeline, beside the same Verilated model clocked natively by a C++ loop.

Three numbers, one run each on this machine:
  native      qrt_native_echo: a C++ loop clocks the V80 model every cycle with a producer in C++
              (64-byte classic echo, a fixed path latency), no Python in the loop;
  co-sim/all  the twin's event model (link card sim, V80 rtl), the RTL clocked every cycle
              (skip_idle off): batches between the timeline's events, as native does the work;
  co-sim      the same with idle cycles skipped (the default): cycles on the timeline per second.
Ratios are against native. Usage: python benchmarks/rtl_cosim.py [rounds]
"""
from __future__ import annotations

import ctypes
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from twin.engine import event as E  # noqa: E402
from twin.kernel import Kernel, MemoryRegion  # noqa: E402
from twin.rtl import build as B  # noqa: E402
from twin.rtl import cosim  # noqa: E402
from twin.scenario import load_scenario  # noqa: E402
from twin.scenario.compile import flow_spec  # noqa: E402


def native(lib_path, cycles: int) -> tuple[float, int]:
    lib = cosim.load_library(lib_path)
    lib.qrt_native_echo.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint32,
                                    ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64)]
    lib.qrt_native_echo.restype = ctypes.c_uint64
    region = MemoryRegion("req", "v80", 16 * 128)
    node = cosim.RtlConsumer(Kernel(0), "v80", lib_path, E.get_encoding("classic"), region, None, 16, 128,
                             4000, 0, 7)
    rounds = ctypes.c_uint64()
    t = time.perf_counter()
    lib.qrt_native_echo(node.h, cycles, 300, 128, 16, ctypes.byref(rounds))  # ~1.2 us each way
    dt = time.perf_counter() - t
    node.shutdown()
    return cycles / dt, rounds.value


def cosim_run(rounds: int, skip_idle: bool) -> tuple[float, float, int, int]:
    ld = load_scenario(ROOT / "scenarios" / "card_path_64b.yaml")
    spec = dataclasses.replace(flow_spec(ld.params, "v80", ld.scenario.traffic_params(rounds), 1, slots=16),
                               model="rtl")
    cosim.RtlNode.skip_idle = skip_idle
    t = time.perf_counter()
    res = E.run_event(spec)
    dt = time.perf_counter() - t
    cosim.RtlNode.skip_idle = True
    st = res.stats["rtl"]["v80"]
    return st["cycles"] / dt, st["evaluated"] / dt, st["cycles"], rounds


def main() -> None:
    rounds = int(float(sys.argv[1])) if len(sys.argv) > 1 else 20_000
    lib = B.build(B.consumer_sources())
    cosim_run(200, True)  # warm-up: imports, tables
    n_rate, n_rounds = native(lib, 5_000_000)
    all_tl, all_ev, all_cycles, _ = cosim_run(rounds, False)
    sk_tl, sk_ev, sk_cycles, _ = cosim_run(rounds, True)
    print(f"V80 RTL node, {rounds:,} rounds of the card-path loop (64-byte echo), 250 MHz clock")
    print(f"{'':28s}{'cycles/s':>14s}{'vs native':>11s}")
    print(f"{'native C++ loop':28s}{n_rate:14,.0f}{1.0:10.2f}x   ({n_rounds:,} rounds in 5e6 cycles)")
    print(f"{'co-sim, every cycle':28s}{all_ev:14,.0f}{all_ev / n_rate:10.2f}x   ({all_cycles:,} cycles)")
    print(f"{'co-sim, idle skipped':28s}{sk_tl:14,.0f}{sk_tl / n_rate:10.2f}x   (timeline cycles; "
          f"{sk_ev:,.0f} evaluated/s)")


if __name__ == "__main__":
    main()
