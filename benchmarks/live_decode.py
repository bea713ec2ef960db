"""A live decoder at a 1 µs syndrome stream (issue 26, item 3): ``scenarios/decode_live_rep3_1us.yaml``
(repetition-3, the runtime library's C lookup decoder in a live shm consumer, consumer on core 1 and
producer on core 0 where the machine has them, 16 requests in flight at most, 10 µs deadline) run
through ``twin decode``'s study, ``--repeats`` times.

Per repeat: the corrections that differ from the direct decode; live requests per wall-second (the
first request to the last reply: the stream's 1,000,000 per second where the device keeps up); the
live decoder's own capacity, ``drain/s``: one over the median time between two consecutive replies
published (the consumer's clock) while requests waited for it (request k landed before reply k - 1
was published), what it serves back to back; the requests sent more than 1 µs after their instant
(late); the measured and the simulated deadline misses, backlog max and reaction p50 / p99 of the
same placement; the stalls: gaps of more than 1 ms between two consecutive replies (the consumer or
the producer held off its core), the longest, and their sum against the wall time from the first
reply to the last. The load average before and after each repeat is
printed with the machine.

Usage: PYTHONPATH=. python benchmarks/live_decode.py [--shots 100000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "decode_live_rep3_1us.yaml"


def one(shots: int) -> dict:
    """One run of the live placement (and its simulated prediction): the row's numbers."""
    from twin.qec.load import load_decode
    from twin.studies.decode import run_decode_study
    ld = load_decode(SCENARIO)
    before = os.getloadavg()[0]
    study = run_decode_study(ld, shots=shots)
    after = os.getloadavg()[0]
    s = study.document["placements"][0]
    r = study.runs[0]
    st = r.result.stats
    dout = st["device_out_ns"]
    sent = st["planned_ns"] + st["lateness_ns"]
    queued = np.nonzero((sent[1:] < dout[:-1]) & (dout[1:] > 0) & (dout[:-1] > 0))[0] + 1
    gaps = dout[queued] - dout[queued - 1]
    allg = np.diff(dout[dout > 0])
    lv = s["live"]
    m, sim = lv["measured"], lv["simulated"]
    return {"load": (before, after), "requests": s["requests"],
            "differ": s["requests"] - s["identical_corrections"], "mismatches": s["card_mismatches"],
            "rps": lv["pace"]["rounds_per_s"], "drain": 1e9 / float(np.median(gaps)) if len(gaps) else None,
            "queued": len(queued), "late": lv["pace"]["late_rounds"],
            "misses": (m["deadline_misses"], sim["deadline_misses"]),
            "backlog": (m["backlog"]["max"], sim["backlog"]["max"]),
            "reaction": (m["reaction"]["p50_ns"], m["reaction"]["p99_ns"], sim["reaction"]["p50_ns"],
                         sim["reaction"]["p99_ns"]),
            "stalls": int((allg > 1_000_000).sum()), "longest_ms": float(allg.max()) / 1e6 if len(allg) else 0.0,
            "stalled_s": float(allg[allg > 1_000_000].sum()) / 1e9,
            "wall_s": float(dout.max() - dout[dout > 0].min()) / 1e9,
            "endpoint": lv["endpoint"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shots", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, Python {platform.python_version()}")
    print("| repeat | load before / after | requests | differ / mism. | live req/s | drain/s (queued) | late > 1 µs "
          "| misses live / sim | backlog live / sim | reaction p50 / p99 live | sim | stalls > 1 ms (longest) "
          "| stalled / wall s |")
    print("|---|---|---:|---|---:|---|---:|---|---|---|---|---|---|")
    for i in range(a.repeats):
        x = one(a.shots)
        rx = x["reaction"]
        drain = "n/a" if x["drain"] is None else f"{x['drain']:,.0f} ({x['queued']:,})"
        print(f"| {i + 1} | {x['load'][0]:.2f} / {x['load'][1]:.2f} | {x['requests']:,} | {x['differ']} / "
              f"{x['mismatches']} | {x['rps']:,.0f} | {drain} | {x['late']:,} | {x['misses'][0]:,} / "
              f"{x['misses'][1]:,} | {x['backlog'][0]:,} / {x['backlog'][1]:,} | {rx[0] / 1e3:,.3f} / "
              f"{rx[1] / 1e3:,.3f} µs | {rx[2] / 1e3:.3f} / {rx[3] / 1e3:.3f} µs | {x['stalls']} "
              f"({x['longest_ms']:.1f} ms) | {x['stalled_s']:.3f} / {x['wall_s']:.3f} |", flush=True)
    print(f"endpoint: {x['endpoint']}")


if __name__ == "__main__":
    main()
