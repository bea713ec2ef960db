"""The union-find decoder's logical error rate against PyMatching's on the same shots (issue 30, item 3).

The rotated surface code memory-Z experiment (``twin.qec.codes.memory_circuit("surface", d, rounds, p)``,
circuit noise), stim's detector sampler with a fixed seed; the same detection events decoded by the
union-find decoder (``twin.qec.union_find``, the registry's ``union_find``: its graph from the circuit's
decomposed model, each distinct syndrome decoded once) and by PyMatching (``pymatching.Matching`` of the
same model, ``decode_batch``). Prints per decoder sinter-style counts (shots, errors, discards, seconds
of decoding) and the logical error rate with sinter's likelihood-ratio bounds (``sinter.fit_binomial``,
max likelihood factor 1000) and a Wilson 95 % interval; then the ratio UF / PyMatching and the paired
disagreements (shots only UF gets wrong, only PyMatching gets wrong). At d = 3 both decoders correct
every single fault; they differ on weight-two faults only.

Usage: PYTHONPATH=. python benchmarks/uf_ler.py [--shots 1000000] [--p 0.001 0.003 0.005] [--d 3] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time


def one(d: int, rounds: int, p: float, shots: int, seed: int) -> dict:
    """Both decoders on ``shots`` shots of one circuit: counts, seconds, paired disagreements."""
    import pymatching

    from twin.qec.codes import memory_circuit
    from twin.qec.decoders.registry import build
    c = memory_circuit("surface", d, rounds, p)
    det, obs = c.compile_detector_sampler(seed=seed).sample(shots, separate_observables=True, bit_packed=True)
    uf = build("union_find", c, name="uf")
    t = time.perf_counter()
    pu = uf.decode_shots_bit_packed(det)
    t_uf = time.perf_counter() - t
    m = pymatching.Matching.from_detector_error_model(c.detector_error_model(decompose_errors=True))
    t = time.perf_counter()
    pm = m.decode_batch(det, bit_packed_shots=True, bit_packed_predictions=True)
    t_pm = time.perf_counter() - t
    wu = (pu != obs).any(axis=1)
    wp = (pm != obs).any(axis=1)
    return {"uf": (int(wu.sum()), t_uf), "pm": (int(wp.sum()), t_pm), "only_uf": int((wu & ~wp).sum()),
            "only_pm": int((wp & ~wu).sum())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shots", type=int, default=1_000_000)
    ap.add_argument("--p", type=float, nargs="+", default=[1e-3, 3e-3, 5e-3])
    ap.add_argument("--d", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=2026)
    a = ap.parse_args(argv)
    import sinter

    from twin.studies.decode import interval
    print(f"# union-find vs PyMatching: rotated surface code memory-Z d={a.d}, {a.rounds} rounds, circuit noise; "
          f"{a.shots:,} shots per p, seed {a.seed}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}")
    print(f"{'p':>7} {'decoder':>10} {'shots':>10} {'errors':>7} {'discards':>8} {'seconds':>8} {'LER':>10} "
          f"{'sinter fit (x1000)':>24} {'wilson 95%':>24}")
    for i, p in enumerate(a.p):
        r = one(a.d, a.rounds, p, a.shots, a.seed + i)
        for name, key in (("union_find", "uf"), ("pymatching", "pm")):
            k, secs = r[key]
            fit = sinter.fit_binomial(num_shots=a.shots, num_hits=k, max_likelihood_factor=1000)
            lo, hi = interval(k, a.shots, "wilson", 0.95)
            print(f"{p:>7g} {name:>10} {a.shots:>10,} {k:>7,} {0:>8} {secs:>8.2f} {k / a.shots:>10.3e} "
                  f"{f'[{fit.low:.2e}, {fit.high:.2e}]':>24} {f'[{lo:.2e}, {hi:.2e}]':>24}")
        ku, kp = r["uf"][0], r["pm"][0]
        ratio = ku / kp if kp else float("nan")
        # the ratio's 95 % interval from the paired disagreements (a binomial split of the discordant shots)
        n = r["only_uf"] + r["only_pm"]
        note = ""
        if n:
            lo, hi = interval(r["only_uf"], n, "wilson", 0.95)
            common = kp - r["only_pm"]
            rl = (common + lo * n) / max(1, common + (1 - lo) * n)
            rh = (common + hi * n) / max(1, common + (1 - hi) * n)
            note = f", 95% [{rl:.3f}, {rh:.3f}] from the paired split"
        print(f"{p:>7g} ratio UF/PyMatching {ratio:.3f}{note}; only UF wrong {r['only_uf']:,}, "
              f"only PyMatching wrong {r['only_pm']:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
