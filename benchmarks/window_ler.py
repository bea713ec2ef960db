"""Logical error rates of the window decoders against the batch decoder, on the same shots.

Rotated surface-code memory (stim's ``surface_code:rotated_memory_z``, circuit noise) over 30
rounds: d = 5 at p = 6e-3 (20,000 shots, seed 11) and d = 7 at p = 7e-3 (10,000 shots, seed 12),
decoded by whole-shot matching (the registry's ``matching``), the streaming window (C = d,
B = d and B = 0) and A/B parallel windows (C = d, B = d and B = 0); and the merged patch of two
d = 5 patches (:func:`twin.qec.merge_patch.merged_memory_circuit`, 5 rounds, p = 6e-3, 30,000
shots, seed 13) decoded whole and in two spatial pieces (4 columns each, seam 4; and 6 + 6 with no
seam). Prints each LER with the batch decode's 99 % Wilson interval (scipy ``binomtest``), whether
it lies inside, the boundary bytes per shot the windows exchange, and the wall seconds per shot
of each decoder on this machine (one process; the windows decoded one after another).

Then the cost per round as the shot grows (d = 5, p = 6e-3, 400 shots, seed 21, 15 / 30 / 60
rounds): ``per: round`` (the registry's matching on each round's events so far, as the loop's
batch decodes them: the shot's cost grows with the square of its rounds) against the streaming
window (C = B = 5: each round decoded in two windows, the cost per round flat).

Run: ``PYTHONPATH=. python benchmarks/window_ler.py [--part ler|cost]`` (about 10 minutes on 2 cores).
"""
from __future__ import annotations

import argparse
import platform
import time

from twin.qec.decoders import direct_corrections, make_decoder
from twin.qec.merge_patch import merged_memory_circuit
from twin.qec.parallel_window import ParallelWindowDecoder
from twin.qec.window import SlidingWindowDecoder
from twin.qec.workload import logical_errors, sample, sample_circuit
from twin.studies.decode import interval


def _rows(w, decoders) -> None:
    shots = w.shots
    t0 = time.perf_counter()
    whole = int(logical_errors(direct_corrections(make_decoder("matching", w.circuit), w.detectors), w).sum())
    tb = time.perf_counter() - t0
    lo, hi = interval(whole, shots, "wilson", 0.99)
    print(f"  batch          LER {whole / shots:.4f}  99% [{lo:.4f}, {hi:.4f}]  {1e6 * tb / shots:8.1f} us/shot",
          flush=True)
    for name, dec in decoders:
        t0 = time.perf_counter()
        k = int(logical_errors(dec.decode_batch(w.detectors), w).sum())
        t = time.perf_counter() - t0
        inside = "inside" if lo <= k / shots <= hi else "OUTSIDE"
        nbytes = sum(link.nbytes for link in dec.links)
        print(f"  {name:14s} LER {k / shots:.4f}  {inside:7s}  windows {len(dec._win):2d}  boundary "
              f"{nbytes:4d} B/shot  {1e6 * t / shots:8.1f} us/shot", flush=True)


def _cost_per_round() -> None:
    print("cost per round, d=5, p=0.006, 400 shots: per: round (events so far) vs streaming C5B5", flush=True)
    for rounds in (15, 30, 60):
        w = sample("surface", 5, rounds, 6e-3, 400, seed=21, per="round")
        dec = make_decoder("matching", w.circuit)
        t0 = time.perf_counter()
        direct_corrections(dec, w.cumulative_detectors())
        t_round = time.perf_counter() - t0
        win = SlidingWindowDecoder(w.circuit, 10, 5)
        t0 = time.perf_counter()
        win.decode_batch(w.detectors)
        t_win = time.perf_counter() - t0
        n = 400 * (rounds + 1)
        print(f"  {rounds:3d} rounds: per: round {1e6 * t_round / n:7.1f} us/round, streaming "
              f"{1e6 * t_win / n:7.1f} us/round", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["ler", "cost", "all"], default="all")
    part = ap.parse_args().part
    print(f"{platform.node()} {platform.processor() or platform.machine()}, {time.strftime('%Y-%m-%d')}", flush=True)
    if part in ("cost", "all"):
        _cost_per_round()
    if part == "cost":
        return
    for d, p, shots, seed in ((5, 6e-3, 20_000, 11), (7, 7e-3, 10_000, 12)):
        w = sample("surface", d, 30, p, shots, seed=seed)
        print(f"surface d={d}, 30 rounds, p={p:g}, {shots} shots", flush=True)
        _rows(w, [(f"streaming C{d}B{d}", SlidingWindowDecoder(w.circuit, 2 * d, d)),
                  (f"streaming C{d}B0", SlidingWindowDecoder(w.circuit, d, d)),
                  (f"parallel C{d}B{d}", ParallelWindowDecoder(w.circuit, d, d)),
                  (f"parallel C{d}B0", ParallelWindowDecoder(w.circuit, d, 0))])
    c = merged_memory_circuit(5, 5, 6e-3)
    w = sample_circuit(c, 30_000, seed=13)
    print("merged patch of two d=5 patches (5 x 11), 5 rounds, p=0.006, 30000 shots", flush=True)
    _rows(w, [("space C4B4", ParallelWindowDecoder(c, 4, 4, axis=0)),
              ("space C6B0", ParallelWindowDecoder(c, 6, 0, axis=0))])


if __name__ == "__main__":
    main()
