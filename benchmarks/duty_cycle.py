"""Duty cycle below the twin's floor: a live endpoint's service time against the idle time before each
request, the rounds paced in C (``hb_batch`` with a gap per round), so gaps from 0 (back to back)
up are exact; ``twin run`` cannot go below its own time between rounds (benchmarks/live_sweep.py).

One session per backend; for each point, rounds of 64-byte classic echo (every reply checked), round
i > 0 sent ``gap[i]`` after round i-1's reply was seen (fixed gaps, or exponential with that mean,
seeded). The first ``--warmup`` rounds of each point are dropped. ``--passes N`` interleaves the
points: N passes over them, each point taking 1/N of its rounds per pass (its own warm-up dropped
each time), so points compared with each other see the same slow drift of the machine (a level
that wanders over seconds; calibrations/measured/live/h200_duty_interleaved/README.md).
``--only P ...`` runs only those points. Writes ``OUT/<backend>.npz`` (per point:
``<point>.service_ns``, ``<point>.idle_ns`` measured: previous reply seen -> this request's first
byte written, ``<point>.gap_ns`` asked, ``<point>.pass_index``), ``OUT/duty_cycle.json`` (machine,
date, command, isolation, p50/p90/p99 per point and per pass) and prints one table.

Usage: PYTHONPATH=. python benchmarks/duty_cycle.py --backend shm --backend cuda --out DIR
       [--rounds 20000] [--cpu C --producer-cpu P] [--passes N] [--only POINT ...]
``--cpu`` / ``--producer-cpu``: the shm consumer's core and this process's core (both backends).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from hw_bridge.contract import BridgeSettings, open_endpoint
from twin.exchange.encoding import get_encoding

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bridge_overhead import frames  # noqa: E402  (the shm benchmark's request and reply images)
from live_sweep import isolation, machine  # noqa: E402

#: (label, gap in ns, exponential?, rounds cap): 0 is back to back
POINTS = [("back_to_back", 0, False, None), ("gap_1us", 1_000, False, None), ("gap_10us", 10_000, False, None),
          ("gap_30us", 30_000, False, None), ("gap_100us", 100_000, False, None),
          ("gap_1ms", 1_000_000, False, 5_000), ("gap_10ms", 10_000_000, False, 1_000),
          ("exp_100us", 100_000, True, None), ("exp_1ms", 1_000_000, True, 5_000)]


def sweep(backend: str, rounds: int, warmup: int, cpu: int | None, producer_cpu: int | None,
          seed: int, points: list = POINTS, passes: int = 1) -> dict[str, np.ndarray]:
    """Per point: service_ns, idle_ns, gap_ns, pass_index (after each segment's warm-up rounds) of
    one session of ``backend`` (shm: the consumer on ``cpu``; both: this process on
    ``producer_cpu`` while it runs); ``passes`` round-robin passes over ``points``."""
    enc = get_encoding("classic")
    slot = -(-enc.slot_bytes(64) // 16) * 16
    shm = backend == "shm"
    settings = BridgeSettings(backend, timeout_ns=2_000_000_000, cpu=cpu if shm else None,
                              producer_cpu=producer_cpu if shm else None)
    affinity = os.sched_getaffinity(0)
    if not shm and producer_cpu is not None:
        os.sched_setaffinity(0, {producer_cpu})
    ep = open_endpoint(settings)
    ep.open(slot, 16, "classic")
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    try:
        seq = 1
        parts: dict[str, list[np.ndarray]] = {}
        for k in range(passes):
            for label, gap, expo, cap in points:
                n = -(-(min(rounds, cap) if cap else rounds) // passes) + warmup
                n = -(-n // 16) * 16  # whole passes over the 16 slots: every batch starts on slot 0
                g = np.rint(rng.exponential(gap, n)).astype(np.int64) if expo else np.full(n, gap, np.int64)
                img, ln, exp, eln = frames(n, seq, 64, enc, slot)
                print(f"# {backend} {label} (pass {k + 1}/{passes}): {n:,} rounds", file=sys.stderr, flush=True)
                t0, t1, bad = ep.batch(img, ln, exp, eln, first_seq=seq, gaps_ns=g)
                if bad.any():
                    raise SystemExit(f"duty_cycle: {backend} {label}: {int(bad.sum())} wrong replies")
                idle = np.full(n, -1, np.int64)
                idle[1:] = t0[1:] - t1[:-1]
                for key, arr in (("service_ns", (t1 - t0)[warmup:]), ("idle_ns", idle[warmup:]),
                                 ("gap_ns", g[warmup:]), ("pass_index", np.full(n - warmup, k, np.int64))):
                    parts.setdefault(f"{label}.{key}", []).append(arr)
                seq += n
        out = {key: np.concatenate(v) for key, v in parts.items()}
    finally:
        ep.close()
        os.sched_setaffinity(0, affinity)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", action="append", choices=["shm", "cuda"], required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=20_000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--cpu", type=int)
    ap.add_argument("--producer-cpu", type=int)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--passes", type=int, default=1, help="interleave the points over N round-robin passes")
    ap.add_argument("--only", nargs="*", default=None, help="run only these points (labels)")
    a = ap.parse_args(argv)
    pts = [p for p in POINTS if a.only is None or p[0] in a.only]
    if not pts or a.passes < 1:
        ap.error(f"--only names no point of {', '.join(p[0] for p in POINTS)}, or --passes < 1")
    a.out.mkdir(parents=True, exist_ok=True)
    before = isolation([c for c in (a.cpu, a.producer_cpu) if c is not None])
    rows = []
    for b in a.backend:
        arrays = sweep(b, a.rounds, a.warmup, a.cpu, a.producer_cpu, a.seed, pts, a.passes)
        np.savez_compressed(a.out / f"{b}.npz", **arrays)
        for label, *_ in pts:
            s, i = arrays[f"{label}.service_ns"], arrays[f"{label}.idle_ns"]
            k = arrays[f"{label}.pass_index"]
            p = [float(x) for x in np.percentile(s, [50, 90, 99])]
            rows.append({"backend": b, "point": label, "rounds": len(s), "service_ns": p,
                         "idle_p50_ns": float(np.median(i[i >= 0])),
                         "pass_p50_ns": [float(np.median(s[k == j])) for j in range(a.passes)]})
    args = argv if argv is not None else sys.argv[1:]
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
            "command": shlex.join(["python", "benchmarks/duty_cycle.py", *args]),
            "isolation_before": before,
            "isolation_after": isolation([c for c in (a.cpu, a.producer_cpu) if c is not None]), "points": rows}
    (a.out / "duty_cycle.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"# duty cycle: {meta['machine'].get('cpu')}, {meta['machine'].get('gpu', 'no GPU')}, {meta['date']}; "
          f"64 B classic echo; pinned {before['pinned']}, load average {before['load_average']}")
    print(f"{'backend':<8}{'point':<14}{'rounds':>8}{'idle p50 ns':>13}{'p50 ns':>9}{'p90 ns':>9}{'p99 ns':>9}"
          f"{'pass p50 min..max ns':>22}")
    for r in rows:
        print(f"{r['backend']:<8}{r['point']:<14}{r['rounds']:>8}{r['idle_p50_ns']:>13.0f}"
              + "".join(f"{x:>9.0f}" for x in r["service_ns"])
              + f"{min(r['pass_p50_ns']):>13.0f}..{max(r['pass_p50_ns']):<7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
