"""Why a random-gap run's service differed from a fixed-gap run's of the same gap: the stored live
duty-cycle runs, conditioned on what could carry it (issue 15).

Prints, from committed data only (no device needed):

1. per ``twin run`` sweep (calibrations/measured/live/<sweep>/<point>/live_rounds.npz): the
   service p50 of the exponential-gap runs and the fixed-period run in the same bins of the
   measured idle gap (random minus periodic at equal gap), and of the rounds the producer paced by
   spinning (idle within 2 us of its target) against those where the host's own time between rounds
   overshot the target (Python right before the request);
2. per exponential run, least squares of the service on log(last gap), log(the gap before it)
   and log of an exponential moving average of the gaps (10 and 100 rounds): ns per e-fold, R^2;
3. the interleaved C-paced sweep (h200_duty_interleaved: ``benchmarks/duty_cycle.py --passes 10``):
   per pass the fixed-gap p50 and the random-gap p50 of rounds whose gap lies within 0.8-1.25x of the
   fixed one, the difference's mean and its standard error over the passes, and the spread of the
   per-pass p50s (the machine's slow level);
4. the repeated sweeps (h200_host_shm_repeat_1..3, h200_cuda_repeat_1..3: the same points three
   times on one start, shm and cuda alternating): each point's card-boundary round-trip p50 per
   repeat and their spread (max - min, % of the median): how far two runs of the same traffic differ.

Usage: python benchmarks/duty_history.py [SWEEP ...] (default: the H200 sweeps)
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

LIVE = Path(__file__).resolve().parent.parent / "calibrations" / "measured" / "live"
SWEEPS = ["h200_host_shm_duty", "h200_host_shm_duty_2", "h200_host_shm_duty_3",
          "h200_cuda_duty", "h200_cuda_duty_2", "h200_cuda_duty_3"]
BINS_US = [50, 80, 100, 150, 300, 600, 1000, 2000]


def rounds(folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(service ns, measured idle ns, target idle ns) of a run folder, the first round left out; of a
    point measured in passes (``passes.json``), its passes' in pass order, each one's first round left out."""
    if (folder / "passes.json").is_file():
        parts = [rounds(p) for p in sorted(folder.glob("pass_*")) if p.is_dir()]
        return tuple(np.concatenate(x) for x in zip(*parts))  # type: ignore[return-value]
    with np.load(folder / "live_rounds.npz") as z:
        node = next(k.split(".")[0] for k in z.files)
        return tuple(z[f"{node}.{k}"][1:].astype(float) for k in ("service_ns", "idle_ns", "idle_target_ns"))


def ema(x: np.ndarray, n: float) -> np.ndarray:
    """Exponential moving average over ``n`` rounds, the current one included."""
    out, m, a = np.empty_like(x), x[0], 1.0 / n
    for i, v in enumerate(x):
        m += a * (v - m)
        out[i] = m
    return out


def by_gap(sweep: str) -> None:
    """Table 1 for one sweep."""
    d = LIVE / sweep
    print(f"\n{sweep}: service p50 (ns) by measured idle gap; random - periodic at equal gap; spun vs overshot")
    for per, ex in (("period_100us", "exp_100us"), ("period_1ms", "exp_1ms")):
        if not (d / per).is_dir() or not (d / ex).is_dir():
            continue
        sp, ip, _ = rounds(d / per)
        se, ie, te = rounds(d / ex)
        for lo, hi in zip(BINS_US, BINS_US[1:]):
            mp = (ip >= lo * 1e3) & (ip < hi * 1e3)
            me = (ie >= lo * 1e3) & (ie < hi * 1e3)
            if mp.sum() >= 200 and me.sum() >= 200:
                a, b = np.median(sp[mp]), np.median(se[me])
                print(f"  {lo:>5}-{hi:<5} us  {per} {a:6.0f} (n {mp.sum():5d})  {ex} {b:6.0f} (n {me.sum():5d})"
                      f"  random - periodic {b - a:+5.0f} ns ({100 * (b - a) / a:+5.1f} %)")
        spun = (ie - te) < 2000
        if spun.sum() > 100 and (~spun).sum() > 100:
            print(f"  {ex}: spun to its target {np.median(se[spun]):.0f} ns (n {spun.sum()}), host overshot "
                  f"{np.median(se[~spun]):.0f} ns (n {(~spun).sum()})")


def history(sweep: str) -> None:
    """Table 2 for one sweep's exponential runs."""
    for ex in ("exp_100us", "exp_1ms"):
        f = LIVE / sweep / ex
        if not f.is_dir():
            continue
        s, i, _ = rounds(f)
        s, last, prev = s[1:], np.log(i[1:]), np.log(i[:-1])
        ok = s < 3 * np.median(s)  # stalled rounds out
        x = np.c_[np.ones(len(s)), last, prev, np.log(ema(i[1:], 10)), np.log(ema(i[1:], 100))][ok]
        y = s[ok]
        r2 = lambda xx, c: 1 - np.var(y - xx @ c) / np.var(y)  # noqa: E731
        c1 = np.linalg.lstsq(x[:, :2], y, rcond=None)[0]
        c = np.linalg.lstsq(x, y, rcond=None)[0]
        print(f"  {sweep}/{ex}: last gap alone {c1[1]:5.1f} ns/e-fold (R2 {r2(x[:, :2], c1):.3f}); with history: "
              f"last {c[1]:5.1f}, previous {c[2]:5.1f}, EMA10 {c[3]:6.1f}, EMA100 {c[4]:6.1f} (R2 {r2(x, c):.3f})")


def interleaved() -> None:
    """Table 3: the interleaved C-paced sweep."""
    d = LIVE / "h200_duty_interleaved"
    if not d.is_dir():
        return
    print("\nh200_duty_interleaved (C-paced, 10 interleaved passes): random - periodic at equal gap, per pass")
    for b in ("shm", "cuda"):
        with np.load(d / f"{b}.npz") as z:
            a = {k: z[k] for k in z.files}
        passes = int(a["back_to_back.pass_index"].max()) + 1
        for per, ex, gap in (("gap_100us", "exp_100us", 100e3), ("gap_1ms", "exp_1ms", 1e6)):
            diff, lvl = [], []
            for k in range(passes):
                sp = a[f"{per}.service_ns"][a[f"{per}.pass_index"] == k]
                m = (a[f"{ex}.pass_index"] == k) & (a[f"{ex}.idle_ns"] >= 0.8 * gap) & (a[f"{ex}.idle_ns"] < 1.25 * gap)
                diff.append(np.median(a[f"{ex}.service_ns"][m]) - np.median(sp))
                lvl.append(np.median(sp))
            diff, lvl = np.array(diff), np.array(lvl)
            print(f"  {b:<5}{per:<10} per-pass p50 {lvl.min():5.0f}..{lvl.max():<5.0f} ns "
                  f"(spread {100 * (lvl.max() - lvl.min()) / np.median(lvl):4.1f} % of the median); {ex} - {per}: "
                  f"{diff.mean():+5.1f} ± {diff.std(ddof=1) / np.sqrt(passes):4.1f} ns (mean ± s.e., {passes} passes)")


def repeats() -> None:
    """Table 4: the same points measured three times."""
    for be in ("host_shm", "cuda"):
        folders = [LIVE / f"h200_{be}_repeat_{k}" for k in (1, 2, 3)]
        if not all(f.is_dir() for f in folders):
            continue
        print(f"\nh200_{be}_repeat_1..3: round-trip p50 (ns) of the same point in three sweeps, spread")
        for pt in ("back_to_back", "period_100us", "period_1ms", "exp_100us", "exp_1ms"):
            p50 = []
            for f in folders:
                with np.load(f / pt / "live_rounds.npz") as z:
                    p50.append(float(np.median(z[next(k for k in z.files if k.endswith(".rtt_ps"))])) / 1e3)
            print(f"  {pt:<14}" + "".join(f"{x:8.0f}" for x in p50)
                  + f"   spread {100 * (max(p50) - min(p50)) / np.median(p50):4.1f} %")


def main(argv: list[str]) -> int:
    sweeps = argv or [s for s in SWEEPS if (LIVE / s).is_dir()]
    for s in sweeps:
        by_gap(s)
    print("\nservice against the gap history (least squares, stalled rounds out)")
    for s in sweeps:
        history(s)
    interleaved()
    repeats()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
