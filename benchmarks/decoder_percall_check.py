"""Issue 30.2's two checks of the per-call decoder cost (twin/qec/percall.py).

1. Every bundled decode scenario whose CPU placements draw the measured cost (``how: measured``):
   run the study (its own shots and seed) and compare each CPU placement's decoder-only p50 and p99
   with the shipped file's p50 and p99 for the placement's call, times the placement's carrying
   factor; "within" when the decoder-only value lies inside the file's bootstrap 95 % interval
   (times the factor) or inside the draws' own sampling range (the 99 % binomial interval of the
   quantile's rank over the study's request count, read off the file's sample: 26 comparisons, so a
   95 % one would miss about one by chance), either widened by 1 ps (the engine's integer ps).
2. ``--remeasure``: measure each shipped file's workload again on this machine (as ``twin calibrate
   decoder`` does, 20,000 calls or ARGV's) and print native and through-Python p50 / p90 / p99 /
   p99.9 against the shipped file (target: within 20 %).

Run: ``PYTHONPATH=. python benchmarks/decoder_percall_check.py [--remeasure [CALLS]]``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _band(t: np.ndarray, q: float, n: int) -> tuple[float, float]:
    """The q-th percentile's 99 % range over n draws from the sample t (binomial order statistics)."""
    s = np.sort(t)
    half = 2.576 * np.sqrt(q / 100 * (1 - q / 100) / n)
    lo, hi = max(q / 100 - half, 0.0), min(q / 100 + half, 1.0)
    return float(s[int(lo * (len(s) - 1))]), float(s[int(np.ceil(hi * (len(s) - 1)))])


def scenarios() -> int:
    from twin.qec.load import load_decode
    from twin.studies.decode import run_decode_study
    bad = 0
    print("scenario / placement (call)        file p50 x f   decoder-only p50   file p99 x f   decoder-only p99  "
          "within")
    for f in sorted((ROOT / "scenarios").glob("decode_*.yaml")):
        ld = load_decode(f)
        if ld.sc.decode.cost.how != "measured" or ld.percall is None or ld.percall[0] is None:
            continue
        doc = run_decode_study(ld).document
        pc = ld.percall[0]
        for s in doc["placements"]:
            c = s["cost"]
            if "source" not in c:
                continue
            fac, t = c["factor"], pc.times(c["call"])
            ok = []
            for k, q in (("p50", 50), ("p99", 99)):
                got = s["decoder_only"][f"{k}_ns"]
                lo, hi = (fac * x for x in c["measured_ci95_ns"][k])
                blo, bhi = (fac * x for x in _band(t, q, s["requests"]))
                ok.append(min(lo, blo) - 1e-3 <= got <= max(hi, bhi) + 1e-3)
            bad += not all(ok)
            m = c["measured_ns"]
            print(f"{f.stem} / {s['device']} ({c['call']}, x{fac:.3f}){'':4} {fac * m['p50']:11.1f} ns "
                  f"{s['decoder_only']['p50_ns']:12.1f} ns {fac * m['p99']:12.1f} ns "
                  f"{s['decoder_only']['p99_ns']:14.1f} ns  {'yes' if all(ok) else 'NO'} "
                  f"(exact workload: {c['exact_workload']})")
    return bad


def remeasure(calls: int) -> None:
    from twin.qec import percall as P
    from twin.qec.decoders import make_decoder
    from twin.qec.load import load_decode
    from twin.qec.workload import sample, sample_circuit
    for f in sorted((ROOT / P.FOLDER).glob("*.yaml")):
        if P.SCHEMA not in f.read_text()[:400]:
            continue
        pc = P.load_percall(f)
        w = pc.doc["workload"]
        if w.get("circuit"):
            ld = load_decode(ROOT / "scenarios" / Path(w["circuit"]).with_suffix(".yaml").name, find_percall=False)
            wl = sample_circuit(ld.circuit, max(calls, 20_000), seed=pc.doc["seed"], per=w["per"])
        else:
            wl = sample(w["code"], w["distance"], w["rounds"], w["p"], max(calls, 20_000), seed=pc.doc["seed"],
                        noise=w["noise"], per=w["per"])
        dec = make_decoder(pc.doc["decoder"], wl.circuit)
        frames = wl.cumulative_frames() if wl.per == "round" else wl.frames()
        s = P.measure(dec, dec.syndromes(frames), wl.cumulative_detectors().sum(axis=1), calls, seed=pc.doc["seed"])
        for call, x in (("native", s.native_ns), ("python", s.python_ns)):
            q = P.quantiles(x, boot=1)
            was = pc.doc[f"{call}_ns"]
            print(f"{f.stem} {call:7}", "  ".join(f"{k} {q[k] / 1000:8.3f} µs ({100 * (q[k] / was[k] - 1):+6.1f} %)"
                                                   for k in ("p50", "p90", "p99", "p99.9")))


if __name__ == "__main__":
    if "--remeasure" in sys.argv:
        rest = sys.argv[sys.argv.index("--remeasure") + 1:]
        remeasure(int(float(rest[0])) if rest else 20_000)
    else:
        sys.exit(1 if scenarios() else 0)
