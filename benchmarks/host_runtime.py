"""A dispatcher-queue-worker real-time decoding host, measured live: writes its measured file.

Runs ``hw_bridge/c/hb_host_runtime.c`` (built with the system C compiler on first use) for each wake
mode (spin, block) at each gap after a reply (back to back, 10 µs, 100 µs, 1 ms by default), every
reply checked against the decoder's Python twin, and writes the measured file (schema
``twin.host_runtime/1``: machine, kernel, date, protocol, per-stage quantiles and the per-request
stage times compressed; :mod:`hw_bridge.host_runtime`), then prints a markdown table of the host's
stages (enqueue, wake, decode, hand-back; ns). A scenario's consumer uses the file with
``host_runtime: {file: ..., wake: spin|block}`` (docs/live.md).

Usage (from the repository root, no network):
  PYTHONPATH=. python benchmarks/host_runtime.py --out calibrations/measured/host_runtime/NAME.yaml
      [--func rep3|steane7] [--requests 5000] [--spin-requests N] [--gaps-us 0 10 100 1000] [--wake spin block]
      [--cores P D W] [--conditions TEXT] [--overwrite]
``--cores``: pin the producer, dispatcher and worker threads (spin needs three free cores to mean
anything: on fewer, its spinning threads share cores and its wake-up is the scheduler's time slice).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import twin.qec.functions  # noqa: E402,F401  (registers the decoders the replies are checked against)
from hw_bridge.host_runtime import DEFAULT_GAPS_NS, FUNCS, WAKES, markdown_table, measure  # noqa: E402


def _gap_us(text: str) -> float:
    """A request gap in µs: a number >= 0 (argparse refuses anything else in one line)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a gap in µs, a number >= 0") from None
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a gap in µs, a number >= 0")
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="measured file to write (YAML)")
    ap.add_argument("--func", choices=tuple(FUNCS), default="rep3")
    ap.add_argument("--requests", type=int, default=5000, help="timed requests per point (default 5000)")
    ap.add_argument("--spin-requests", type=int, help="timed requests per spin point (default --requests: on a "
                    "machine with fewer than three free cores each spin request waits for a time slice)")
    ap.add_argument("--warmup", type=int, default=500, help="untimed requests first, per point (default 500)")
    ap.add_argument("--gaps-us", type=_gap_us, nargs="+", default=[g / 1000 for g in DEFAULT_GAPS_NS])
    ap.add_argument("--wake", choices=WAKES, nargs="+", default=list(WAKES))
    ap.add_argument("--cores", type=int, nargs=3, metavar=("P", "D", "W"), help="producer, dispatcher, worker cores")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--conditions", default="", help="what else ran on the machine (recorded in the file)")
    ap.add_argument("--overwrite", action="store_true")
    a = ap.parse_args(argv)
    out = Path(a.out)
    if out.exists() and not a.overwrite:
        print(f"--out {out}: exists (pass --overwrite to replace it)", file=sys.stderr)
        return 2
    if a.requests < 2:
        print(f"--requests {a.requests}: needs at least 2", file=sys.stderr)
        return 2
    doc = measure(a.func, tuple(a.wake), tuple(int(round(g * 1000)) for g in a.gaps_us), a.requests,
                  warmup=a.warmup, seed=a.seed, cores=tuple(a.cores) if a.cores else None, conditions=a.conditions,
                  requests={"spin": a.spin_requests} if a.spin_requests else None,
                  progress=lambda s: print(f"  {s}", file=sys.stderr, flush=True))
    doc["command"] = "PYTHONPATH=. python benchmarks/host_runtime.py " + " ".join(argv or sys.argv[1:])
    out.parent.mkdir(parents=True, exist_ok=True)
    head = ("# A dispatcher-queue-worker decoding host measured live (benchmarks/host_runtime.py,\n"
            "# hw_bridge/c/hb_host_runtime.c): machine, date, protocol and per-stage quantiles below.\n")
    out.write_text(head + yaml.safe_dump(doc, sort_keys=False, width=120))
    m = doc["machine"]
    print(f"{m['cpu']}, {m['logical_cpus']} cpus, kernel {m['kernel']}, {doc['measured_at']}, load "
          f"{m['load_average_1_5_15_before']} -> {m['load_average_1_5_15']}; {a.requests} requests per point, ns\n")
    print(markdown_table(doc))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
