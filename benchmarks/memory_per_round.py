"""Bytes a ``twin run`` keeps per loop-round, measured: the whole process's peak RSS (``ru_maxrss`` of
the child, ``os.wait4``) at two round counts, the slope divided by the loops that keep rounds, against
the estimate the run's load-time memory check uses (:data:`twin.engine.memory.ROUND_BYTES`).

Cases: one loop (a copy of card_path_64b with its EPYC 7282 alone, open loop at 4 us) on the auto
engine with its per-round file and histograms, and with ``--no-rounds --no-plot`` (the rounds still
kept); the five loops of card_path_64b; the event engine; the two flows of
mesh_two_controllers_one_gpu (event engine); and the streamed direct run (``--engine direct
--no-rounds --no-plot``, which keeps none: its slope is about 0). Prints one row per case and the
ratio estimate / measured (>= 1: the estimate does not undercount). ``--decode``: the decode
studies instead, bytes per shot of decode_rep3 and decode_surface_d5 against
:func:`twin.engine.memory.decode_bytes`.

Usage: PYTHONPATH=. python benchmarks/memory_per_round.py [--decode]
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCEN = ROOT / "scenarios"


def peak_rss(argv: list[str], cwd: Path) -> int:
    """Peak RSS (bytes) of ``python -m twin ARGV`` run to its end in ``cwd``."""
    p = subprocess.Popen([sys.executable, "-m", "twin", *argv], cwd=cwd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    err = p.stderr.read().decode() if p.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"twin {' '.join(argv)} failed:\n{err[-2000:]}")
    return usage.ru_maxrss * 1024


def one_loop(folder: Path) -> Path:
    doc = yaml.safe_load((SCEN / "card_path_64b.yaml").read_text())
    doc.update(calibration=str(SCEN / doc["calibration"]), rounds=1000,
               traffic={"mode": "open_loop", "clock": "card", "period": "4 us"},
               nodes=[n for n in doc["nodes"] if n["name"] in ("gen", "u55c", "epyc7282")],
               links=[lk for lk in doc["links"] if lk["to"] in ("u55c", "epyc7282")])
    doc.pop("measured", None)
    p = folder / "one_loop.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def decode_cases(here: Path) -> None:
    from twin.engine.memory import BASE_BYTES, decode_bytes
    print(f"{'decode scenario':28s} {'shots':>15s} {'peak MiB':>13s} {'B/shot':>8s} {'estimate/measured':>18s}")
    for name, dets, placements, (lo, hi) in (("decode_rep3", 4, 3, (10**5, 3 * 10**5)),
                                             ("decode_surface_d5", 120, 2, (2 * 10**4, 6 * 10**4))):
        peaks = [peak_rss(["decode", str(SCEN / f"{name}.yaml"), "--shots", str(n), "--quiet", "--overwrite",
                           "--out", str(here / "d")], here) for n in (lo, hi)]
        per = (peaks[1] - peaks[0]) / (hi - lo)
        est = (decode_bytes(1, 1, placements, dets) - BASE_BYTES)
        print(f"{name:28s} {lo:>7,}->{hi:<7,} {peaks[0] / 2**20:>5.0f}->{peaks[1] / 2**20:<5.0f} {per:>8.0f} "
              f"{est / per:>18.2f}", flush=True)


def main() -> None:
    from twin.engine.memory import ROUND_BYTES
    if "--decode" in sys.argv[1:]:
        with tempfile.TemporaryDirectory() as tmp:
            decode_cases(Path(tmp))
        return
    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        one = str(one_loop(here))
        cases = [  # name, argv, loops keeping rounds, (rounds low, rounds high)
            ("one loop, auto, parquet + histograms", [one], 1, (10**6, 3 * 10**6)),
            ("one loop, auto, --no-rounds --no-plot", [one, "--no-rounds", "--no-plot"], 1, (10**6, 3 * 10**6)),
            ("five loops, auto, parquet + histograms", [str(SCEN / "card_path_64b.yaml")], 5, (10**6, 2 * 10**6)),
            ("one loop, event engine", [one, "--engine", "event"], 1, (10**5, 3 * 10**5)),
            ("two mesh flows (event engine)", [str(SCEN / "mesh_two_controllers_one_gpu.yaml")], 2,
             (5 * 10**4, 15 * 10**4)),
            ("one loop, direct, streamed", [one, "--engine", "direct", "--no-rounds", "--no-plot"], 1,
             (2 * 10**6, 6 * 10**6)),
        ]
        print(f"{platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
              f"python {platform.python_version()}; estimate {ROUND_BYTES} B per loop-round")
        print(f"{'case':42s} {'rounds':>17s} {'peak MiB':>15s} {'B/loop-round':>13s} {'estimate/measured':>18s}")
        for name, argv, loops, (lo, hi) in cases:
            peaks = [peak_rss(["run", *argv, "--rounds", str(n), "--quiet", "--overwrite", "--out", str(here / "o")],
                              here) for n in (lo, hi)]
            per = (peaks[1] - peaks[0]) / (hi - lo) / loops
            ratio = f"{ROUND_BYTES / per:.2f}" if per > 8 else "(streamed)"
            print(f"{name:42s} {lo:>8,}->{hi:<8,} {peaks[0] / 2**20:>7.0f}->{peaks[1] / 2**20:<7.0f} {per:>13.0f} "
                  f"{ratio:>18s}", flush=True)


if __name__ == "__main__":
    main()
