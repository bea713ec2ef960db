"""Decoding throughput in the loop vs PyMatching's decode_batch on the same shots.

Rotated surface code d=5, 5 rounds, circuit noise p = 1e-3, 1e5 shots (stim, seed 5). Prints:

- reference: ``pymatching.Matching.decode_batch`` on stim's detection events (uint8 0/1 per
  detector), the way one decodes stim shots directly;
- in the loop: what the loop engine does to decode a stream (:class:`twin.qec.loop.BatchReplies`,
  used by :func:`twin.qec.loop.run_decode`): the decoder's batched ``decode_frames`` on the
  distinct request frames as the card writes them (bit-packed syndrome bytes) and the map from a
  frame's bytes to its reply that the consumer answers from (the frames' bytes themselves are the
  control side's payloads, made once per stream, not counted);
- for scale, whole loop runs: the event model alone, and ``engine="auto"`` (``twin decode``'s
  default) over all 1e5 shots;
- the ratio (target >= 0.80), each the median of 7 runs; the same without reusing the replies of
  identical frames (``decode_frames`` on every frame); and, for scale, the event model's rate
  of whole simulated rounds (bytes moved, every reply checked) for 20,000 of the shots;
- BP+OSD on the [[72,12,6]] bivariate bicycle code (3 rounds, phenomenological p = 0.01, 2,000
  shots, median of 3 runs): ``stimbposd.BPOSD.decode_batch`` on stim's detection events (direct)
  against the loop's batch of the same shots through the decoder registry's ``bposd`` entry.

Run: ``PYTHONPATH=. python benchmarks/decode_throughput.py``.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
import pymatching

from twin.calibration.params import load_params
from twin.qec.decoders import MatchingDecoder, make_decoder
from twin.qec.loop import BatchReplies, frame_keys, run_decode
from twin.qec.workload import sample

SHOTS = 100_000
REPEATS = 7


def timed(fn, repeats: int = REPEATS) -> float:
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main() -> None:
    w = sample("surface", 5, 5, 1e-3, SHOTS, seed=5)
    m = pymatching.Matching.from_detector_error_model(w.circuit.detector_error_model(decompose_errors=True))
    dets = w.detectors.astype(np.uint8)
    dec = MatchingDecoder(w.circuit)
    frames = w.frames()

    keys = frame_keys(frames)  # the payloads the control side sends (made once per stream)

    def in_loop():
        return BatchReplies(dec, frames, keys)

    ref = m.decode_batch(dets)
    served = in_loop()
    got = np.stack([np.frombuffer(served.serve(k), np.uint8) for k in keys])
    got = np.unpackbits(got, axis=1, bitorder="little", count=1)
    assert np.array_equal(ref, got), "in-loop corrections differ from decode_batch"
    t_ref = timed(lambda: m.decode_batch(dets))
    t_loop = timed(in_loop)
    t_all = timed(lambda: dec.decode_frames(frames))  # every frame, no reuse of identical ones
    print(f"  distinct frames: {served.distinct} of {SHOTS}")
    print(f"surface d=5, 5 rounds, p=1e-3, {SHOTS} shots, {w.n_detectors} detectors, frames of {w.frame_bytes} B")
    print(f"  PyMatching decode_batch (direct)     {SHOTS / t_ref:12,.0f} shots/s  ({t_ref * 1e3:.1f} ms)")
    print(f"  decoding in the loop (batched)       {SHOTS / t_loop:12,.0f} shots/s  ({t_loop * 1e3:.1f} ms)")
    print(f"  ratio loop / direct                  {t_ref / t_loop:12.2f}   (target >= 0.80)")
    print(f"  every frame decoded (no reuse)       {SHOTS / t_all:12,.0f} shots/s  ratio {t_ref / t_all:.2f}")
    bposd_ratio()
    params = load_params(Path(__file__).resolve().parent.parent / "calibrations/fitted/card_path.yaml")
    w2 = sample("surface", 5, 5, 1e-3, 20_000, seed=5)
    t = time.perf_counter()
    run_decode(params, "epyc7282", w2, MatchingDecoder(w2.circuit))
    dt = time.perf_counter() - t
    print(f"  event model, whole rounds            {w2.shots / dt:12,.0f} rounds/s (20,000 shots, bytes moved, "
          f"every reply checked)")
    t = time.perf_counter()
    r = run_decode(params, "epyc7282", w, dec, engine="auto")
    dt = time.perf_counter() - t
    print(f"  twin decode's auto engine, whole run {SHOTS / dt:12,.0f} rounds/s ({SHOTS} shots: sampling aside, "
          f"batch decode, direct engine, event model over {r.extra['replies_checked']:,})")


def bposd_ratio(shots: int = 2_000, repeats: int = 3) -> None:
    """BP+OSD: the loop's batch against stimbposd's decode_batch on the same BB72 shots."""
    from stimbposd import BPOSD
    w = sample("bb72", 6, 3, 0.01, shots, seed=5, noise="phenomenological")
    direct = BPOSD(w.circuit.detector_error_model())
    dets = w.detectors.astype(np.uint8)
    dec = make_decoder("bposd", w.circuit, name="bb72_bposd")
    frames = w.frames()
    keys = frame_keys(frames)
    ref = direct.decode_batch(dets)
    served = BatchReplies(dec, frames, keys)
    got = np.stack([np.frombuffer(served.serve(k), np.uint8) for k in keys])
    got = np.unpackbits(got, axis=1, bitorder="little", count=w.n_observables)
    assert np.array_equal(ref.astype(np.uint8), got), "in-loop BP+OSD corrections differ from decode_batch"
    t_ref = timed(lambda: direct.decode_batch(dets), repeats)
    t_loop = timed(lambda: BatchReplies(dec, frames, keys), repeats)
    print(f"bb72 [[72,12,6]], 3 rounds, phenomenological p=0.01, {shots} shots, {w.n_detectors} detectors, "
          f"distinct frames {served.distinct}")
    print(f"  stimbposd BPOSD.decode_batch (direct) {shots / t_ref:12,.0f} shots/s  ({t_ref * 1e3:.1f} ms)")
    print(f"  BP+OSD in the loop (batched)         {shots / t_loop:12,.0f} shots/s  ({t_loop * 1e3:.1f} ms)")
    print(f"  ratio loop / direct                  {t_ref / t_loop:12.2f}   (target >= 0.80)")


if __name__ == "__main__":
    main()
