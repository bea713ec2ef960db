"""The bridge's own overhead: hw_bridge's live shm round trip vs the minimal C ping-pong.

Both are two processes exchanging a 64-byte payload through shared memory, one request in flight,
timed with CLOCK_MONOTONIC in C around each round, producer on core 0 and consumer on core 1
(where sched_setaffinity allows). The ping-pong (benchmarks/pingpong.c) moves the payload and a
sequence word and nothing else. The bridge runs the whole contract: the twin's exact request slot
(16-byte header + payload, classic, sequence word last), the consumer process's qrt_dispatch_one
(claim, dispatch table, echo, complete with release fence and ready word), the producer's reply
check (qrt_peek) and a byte-for-byte comparison with the expected reply. Modes of the bridge:

- ``batch``: the producer's round loop in C (``ShmEndpoint.batch``: one ctypes call per batch);
- ``per-round``: one ctypes call per round (``ShmEndpoint.exchange``), as ``twin run`` drives it.

The three are interleaved ``--repeats`` times in one run and the medians of each pooled.
Usage: PYTHONPATH=. python benchmarks/bridge_overhead.py [--rounds 100000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from hw_bridge.contract import BridgeSettings
from hw_bridge.shm import ShmEndpoint
from twin.exchange.encoding import get_encoding

HERE = Path(__file__).resolve().parent


def frames(n: int, first: int, payload: int, enc, slot_bytes: int):
    """Request and expected-reply slot images for sequence numbers first..first+n-1 (echo)."""
    img = np.zeros((n, slot_bytes), np.uint8)
    exp = np.zeros((n, slot_bytes), np.uint8)
    ln = np.zeros(n, np.uint32)
    for i in range(n):
        seq = first + i
        p = bytes((seq * 131 + j) & 255 for j in range(payload))
        for arr in (img, exp):
            for off, d in enc.writes(seq, p):
                arr[i, off:off + len(d)] = np.frombuffer(d, np.uint8)
        ln[i] = enc.slot_bytes(payload)
    return img, ln, exp, ln.copy()


def pingpong(rounds: int, payload: int, cpus: tuple[int, int]) -> np.ndarray:
    exe = Path(tempfile.gettempdir()) / "twin-pingpong"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(HERE / "pingpong.c")], check=True)
    out = subprocess.run([str(exe), str(rounds), str(payload), str(cpus[0]), str(cpus[1])], check=True,
                         capture_output=True, text=True, env={**os.environ, "PINGPONG_DUMP": "1"})
    lines = out.stdout.split("rounds:\n", 1)[1].split()
    return np.array(lines, np.int64)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--payload", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=5_000)
    a = ap.parse_args(argv)
    ncpu = os.cpu_count() or 1
    cpus = (0, 1) if ncpu >= 2 else (-1, -1)
    enc = get_encoding("classic")
    slot_bytes = -(-enc.slot_bytes(a.payload) // 16) * 16
    total = a.warmup + a.rounds
    pooled = {"pingpong": [], "bridge batch": [], "bridge per-round": []}
    for rep in range(a.repeats):
        pooled["pingpong"].append(pingpong(total, a.payload, cpus)[a.warmup:])
        s = BridgeSettings("shm", cpu=cpus[1] if cpus[1] >= 0 else None, producer_cpu=cpus[0] if cpus[0] >= 0 else None)
        ep = ShmEndpoint(s)
        ep.open(slot_bytes, 16, "classic")
        try:
            img, ln, exp, eln = frames(total, 1, a.payload, enc, slot_bytes)
            t0, t1, bad = ep.batch(img, ln, exp, eln, first_seq=1)
            if bad.any():
                raise SystemExit(f"bridge batch: {int(bad.sum())} wrong replies")
            pooled["bridge batch"].append((t1 - t0)[a.warmup:])
            img, ln, exp, eln = frames(total, total + 1, a.payload, enc, slot_bytes)
            rt = np.zeros(total, np.int64)
            for i in range(total):
                r = ep.exchange(total + 1 + i, img[i, :ln[i]].tobytes())
                if r.data != exp[i, :eln[i]].tobytes():
                    raise SystemExit(f"bridge per-round: wrong reply to {total + 1 + i}")
                rt[i] = r.service_ns
            pooled["bridge per-round"].append(rt[a.warmup:])
        finally:
            ep.close()
    print(f"# bridge overhead: {platform.processor() or platform.machine()}, {ncpu} cores, Python "
          f"{platform.python_version()}, load average {os.getloadavg()[0]:.2f}; producer core {cpus[0]}, "
          f"consumer core {cpus[1]}; {a.repeats} x {a.rounds:,} rounds each, {a.payload} B payload, classic")
    print_pooled(pooled, "pingpong", ("exchange", 18), ("vs ping-pong p50", 18),
                 lambda p50, base: f"{100 * (p50 / base - 1):>+17.1f}%")
    return 0


def print_pooled(pooled: dict[str, list[np.ndarray]], base_key: str, first: tuple[str, int],
                 rel: tuple[str, int], fmt) -> None:
    """One line per variant of ``pooled`` (its repeats' round trips, ns): p50/p90/p99 of all repeats,
    ``fmt(p50, base)`` against ``base_key``'s p50, and each repeat's p50. ``first`` and ``rel`` are the
    first and the relative column's (title, width)."""
    base = float(np.median(np.concatenate(pooled[base_key])))
    print(f"{first[0]:<{first[1]}}{'p50 ns':>9}{'p90 ns':>9}{'p99 ns':>9}{rel[0]:>{rel[1]}}  per-repeat p50")
    for k, v in pooled.items():
        p50, p90, p99 = np.percentile(np.concatenate(v), [50, 90, 99])
        per = " ".join(f"{np.median(r):.0f}" for r in v)
        print(f"{k:<{first[1]}}{p50:>9.0f}{p90:>9.0f}{p99:>9.0f}{fmt(p50, base)}  {per}")


if __name__ == "__main__":
    sys.exit(main())
