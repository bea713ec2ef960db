"""A live shm consumer at the loop's own pace (issue 26 acceptance): the twin's own time between a
reply and the next request, live rounds per wall-second, and the gaps the live device sees on its
own clock against the simulated ones.

Points, all with the shm consumer process (qrt_dispatch_one, echo, 64 B classic) pinned to core 1 (``--cores``)
and the producer to core 0 where the machine has them:

- ``back-to-back`` (the paced C loop alone, ``hw_bridge.paced.PacedFlow`` with every simulated delay
  0): each request is planned at the instant the previous reply was seen, so its lateness is the
  twin's own time between a reply and the next request;
- ``twin run``: ``scenarios/live_cpu_shm.yaml`` (the card path simulated around the live consumer)
  and the same with ``traffic.gap`` 10 µs, 100 µs, 1 ms and random gaps (``traffic.gaps``
  exponential, mean 100 µs), each a whole ``twin run`` whose results.json pace record
  (``twin.engine.paced.pace_summary``) gives the lateness, the late rounds (> 1 µs), the gap the
  consumer saw on its own clock minus the simulated gap (absolute, ns) and live rounds per second;
  ``wall s`` is the whole command's. Where a gap error comes from (:func:`decompose`): the
  producer's own gap error on its clock, the consumer's notice and publish delays across the two
  processes' clocks, and the consumer clock's rate against the producer's.

Usage: PYTHONPATH=. python benchmarks/live_pace.py [--scale 1.0] [--spin-us 1000]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from hw_bridge.contract import BridgeSettings
from hw_bridge.paced import PacedFlow, Pacing
from hw_bridge.shm import ShmEndpoint
from twin.engine.paced import _images

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "live_cpu_shm.yaml"
POINTS = [("gap 0 (live_cpu_shm)", {}, 200_000), ("gap 10 us", {"gap": "10 us"}, 40_000),
          ("gap 100 us", {"gap": "100 us"}, 8_000), ("gap 1 ms", {"gap": "1 ms"}, 1_500),
          ("random, exp. mean 100 us", {"gaps": {"distribution": "exponential", "mean": "100 us"}}, 8_000)]


CORES: tuple[int, int] = (0, 1)
"""(producer, consumer) cores asked for (``--cores``)."""


def cores() -> tuple[int | None, int | None]:
    """(producer, consumer) cores: :data:`CORES` where this process may run on both, else unpinned."""
    ok = os.sched_getaffinity(0)
    return CORES if set(CORES) <= ok else (None, None)


def back_to_back(n: int, pacing: Pacing) -> dict:
    """The paced loop with every simulated delay 0: lateness = the twin's own time (ns)."""
    prod, cons = cores()
    ep = ShmEndpoint(BridgeSettings("shm", cpu=cons, producer_cpu=prod))
    ep.open(96, 16, "classic", stamps=True)
    try:
        seqs = np.arange(1, n + 1, dtype=np.uint32)
        pay = (np.arange(n * 64, dtype=np.uint64).reshape(n, 64) % 251).astype(np.uint8)
        img, ln = _images(ep_enc(), seqs, pay, 0, 96)
        f = PacedFlow(ep, np.zeros(n, np.int64), closed=True, pacing=pacing)
        while f.done < n:
            d = f.done
            f.step(img[d:], ln[d:], img[d:], ln[d:])
        late = f.lateness_ns()[1:]
        wall = (f.seen[-1] - f.sent[0]) / 1e9
        return {"rounds": n, "own_p50_ns": float(np.percentile(late, 50)), "own_p99_ns": float(np.percentile(late, 99)),
                "own_p999_ns": float(np.percentile(late, 99.9)), "late_rounds": f.late_rounds,
                "rounds_per_s": n / wall, "bad": int(f.bad.sum()),
                "exchange_p50_ns": float(np.median(f.seen - f.sent))}
    finally:
        ep.close()


def ep_enc():
    from twin.exchange.encoding import get_encoding
    return get_encoding("classic")


def twin_run(label: str, traffic: dict, n: int, spin_us: float, work: Path) -> dict:
    """One ``twin run`` of live_cpu_shm.yaml with ``traffic`` keys added: its pace record."""
    doc = yaml.safe_load(SCENARIO.read_text())
    doc["calibration"] = str((SCENARIO.parent / doc["calibration"]).resolve())
    doc["traffic"] = {**doc.get("traffic", {}), **traffic}
    prod, cons = cores()
    doc["nodes"][-1]["bridge"] = {"backend": "shm", "timeout": "1 s", "cpu": cons, "producer_cpu": prod,
                                  "spin": f"{spin_us} us"}
    sc = work / f"{label.split()[1] if ' ' in label else label}.yaml".replace("/", "_")
    sc.write_text(yaml.safe_dump(doc))
    out = work / (sc.stem + "_out")
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "twin", "run", str(sc), "--rounds", str(n), "--out", str(out),
                           "--quiet", "--no-plot"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"twin run {label}: exit {done.returncode}:\n{(done.stderr or done.stdout)[-3000:]}")
    wall = time.perf_counter() - t
    res = json.loads((out / "results.json").read_text())["consumers"][0]
    pace = res["live"]["pace"]
    return {"rounds": n, "wall_s": wall, **pace, **decompose(out / "live_rounds.npz")}


def decompose(npz: Path) -> dict:
    """Where a gap error comes from (ns, p99 over rounds 2..): ``own`` the producer's gap on its clock
    (previous reply seen -> request sent) minus the simulated one; ``in`` the consumer's notice
    (request sent -> consumer saw it landed, its clock minus the producer's); ``out`` its publish
    (consumer's reply published -> producer saw it); ``ppm`` the consumer's clock rate against the
    producer's (least squares of the notice instants against the send instants)."""
    with np.load(npz) as z:
        k = [f for f in z.files if f.endswith(".lateness_ps")][0].split(".")[0]
        sent = z[f"{k}.planned_ns"] + z[f"{k}.lateness_ps"] // 1000
        seen = sent + z[f"{k}.service_ns"]
        din, dout = z[f"{k}.device_in_ns"], z[f"{k}.device_out_ns"]
        own = (z[f"{k}.idle_ns"] - z[f"{k}.idle_target_ns"])[1:]
    ok = (din > 0) & (dout > 0)
    s_, d_ = sent[ok], din[ok]
    h = len(s_) // 2  # the rate over long spans: the median of the second half's ratios (robust to stalls)
    span = (s_[h:] - s_[0]).astype(float)
    rate = float(np.median(((d_[h:] - d_[0]) - (s_[h:] - s_[0])) / span)) if h else 0.0
    p99 = lambda a: float(np.percentile(a, 99))  # noqa: E731
    return {"own_p99": p99(np.abs(own)), "in_p99": p99(din[ok] - sent[ok]), "out_p99": p99(seen[ok] - dout[ok]),
            "ppm": rate * 1e6}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="rounds of every point x this")
    ap.add_argument("--spin-us", type=float, default=1000.0, help="bridge.spin: spin below, sleep above (µs)")
    ap.add_argument("--cores", default="0,1", help="producer,consumer cores (default 0,1)")
    a = ap.parse_args(argv)
    global CORES
    try:
        p, c = (int(x) for x in a.cores.split(","))
    except ValueError:
        raise SystemExit(f"live_pace: --cores takes two comma-separated integers, got {a.cores!r}") from None
    CORES = (p, c)
    pacing = Pacing(spin_ns=int(a.spin_us * 1000))
    print(f"# live pace: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, load average {os.getloadavg()[0]:.2f} at start; producer/consumer cores "
          f"{cores()}; spin below {a.spin_us:g} µs, sleep above; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    b = back_to_back(int(500_000 * a.scale), pacing)
    print(f"back-to-back paced C loop, {b['rounds']:,} rounds: twin's own time reply -> next request p50 "
          f"{b['own_p50_ns']:.0f} ns, p99 {b['own_p99_ns']:.0f} ns, p99.9 {b['own_p999_ns']:.0f} ns "
          f"(target <= 1000 / <= 5000); {b['rounds_per_s']:,.0f} live rounds per wall-second (target >= 100,000); "
          f"exchange p50 {b['exchange_p50_ns']:.0f} ns; {b['late_rounds']} rounds > 1 µs late; "
          f"{b['bad']} wrong replies")
    print(f"{'twin run point':<26}{'rounds':>9}{'wall s':>8}{'rounds/s':>10}{'late p50':>10}{'late p99':>10}"
          f"{'late>1us':>9}{'gap err p50':>12}{'gap err p99':>12}{'p99.9':>10}{'own p99':>10}{'in p99':>10}"
          f"{'out p99':>10}"
          f"{'clock ppm':>10}  (ns; gap err target p99 <= 1000)")
    with tempfile.TemporaryDirectory() as d:
        for label, traffic, n in POINTS:
            r = twin_run(label, traffic, max(100, int(n * a.scale)), a.spin_us, Path(d))
            lt, g = r["lateness"], r["device_gap_error"] or {}
            print(f"{label:<26}{r['rounds']:>9,}{r['wall_s']:>8.2f}{r['rounds_per_s'] or 0:>10,.0f}"
                  f"{lt['p50_ns']:>10.0f}{lt['p99_ns']:>10.0f}{r['late_rounds']:>9,}{g.get('p50_ns', 0):>12.0f}"
                  f"{g.get('p99_ns', 0):>12.0f}{g.get('p999_ns', 0):>10.0f}{r['own_p99']:>10.0f}{r['in_p99']:>10.0f}"
                  f"{r['out_p99']:>10.0f}{r['ppm']:>10.2f}")
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
