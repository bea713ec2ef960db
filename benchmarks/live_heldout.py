"""Held-out random gaps of the paced live sweeps (issues 26 item 4, 30's acceptance): the fitted sets
``calibrations/fitted/h200_host_shm_duty_paced.yaml`` and ``h200_cuda_duty_paced.yaml`` (each a
stand-in fitted on one fixed-gap point plus its class's idle prior, itself fitted on fixed gaps only)
predict the exponential-gap runs at means 10 µs, 100 µs and 1 ms of the same sweep, none of which
any fit saw. Prints the markdown table docs/live.md and BENCHMARKS.md record
(:func:`twin.fitting.validate.heldout_rows`: ``twin validate``'s comparison, seed 7).

Usage: PYTHONPATH=. python benchmarks/live_heldout.py (committed data only, no device; about 10 s)
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETS = {"H200 host core (shm)": ("h200_host_shm_duty_paced.yaml", "h200_host_shm_duty_paced"),
        "H200 (cuda)": ("h200_cuda_duty_paced.yaml", "h200_cuda_duty_paced")}
HELD_OUT = ("exp_10us", "exp_100us", "exp_1ms")


def tables() -> dict[str, list[dict]]:
    """Device label -> held-out rows (:func:`twin.fitting.validate.heldout_rows`)."""
    from twin.fitting.validate import heldout_rows
    out = {}
    for device, (cal, sweep) in SETS.items():
        runs = [ROOT / "calibrations/measured/live" / sweep / p for p in HELD_OUT]
        out[device] = heldout_rows(ROOT / "calibrations/fitted" / cal, runs,
                                   progress=lambda i, n, d=device: print(f"{d}: {i}/{n}", file=sys.stderr))
    return out


def main() -> int:
    from twin.fitting.validate import heldout_markdown
    print(heldout_markdown(tables()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
