"""Decoder cost fitted per call at distances 3 and 5, checked on distance 7 (held out).

PyMatching (``MatchingDecoder.decode_payload``, one request per call) on the rotated surface code
memory experiment, as many rounds as the distance, circuit noise p = 1e-3 (stim). Distances 3 and 5
are timed with their calls spread over the numbers of detection events, distance 7 with its own
distribution of events; all interleaved in one shuffled order (:func:`twin.qec.cost_fit.held_out`).
The fit (overhead + per-event slope, Theil-Sen through per-event-count medians, outliers above
median + 10 MAD left out, residual quantiles) predicts distance 7's decoder-only percentiles from its
requests' events; prints measured vs predicted p50 / p99 / p99.9 and the p50 error (target: within
10 %).

Run: ``PYTHONPATH=. python benchmarks/decoder_cost_fit.py [CALLS]`` (default 30,000 calls per distance).
"""
from __future__ import annotations

import sys
import time

from twin.qec.cost_fit import held_out, machine


def main() -> None:
    calls = int(float(sys.argv[1])) if len(sys.argv) > 1 else 30_000
    m = machine()
    print(f"host: {m['cpu']}, {m['logical_cpus']} logical CPUs, Python {m['python']}, pymatching "
          f"{m['packages']['pymatching']}, load average {m['load_average_1_5_15']}")
    t0 = time.perf_counter()
    last = [0.0]

    def progress(done, total):
        if time.perf_counter() - last[0] > 2:
            last[0] = time.perf_counter()
            print(f"  {done:,}/{total:,} calls", file=sys.stderr)
    r = held_out((3, 5), 7, 1e-3, calls, seed=0, progress=progress)
    f = r.fit
    print(f"fit on d=3,5 ({f.n_calls:,} calls, {f.outliers['count']:,} outliers = {100 * f.outliers['fraction']:.2f} %"
          f" above median + 10 MAD): overhead {f.overhead_ns:.0f} ns + {f.per_event_ns:.0f} ns per detection event")
    for t in r.times:
        print(f"  {t.label}: {len(t.ns):,} calls, events mean {t.events.mean():.2f} max {t.events.max()}, "
              f"p50 {sorted(t.ns)[len(t.ns) // 2] / 1000:.3f} us")
    print(f"{'d=7 decoder-only':<22}{'measured':>12}{'predicted':>12}{'error':>9}")
    for k in ("p50", "p99", "p99.9"):
        ms, pr = r.measured[k], r.predicted[k]
        print(f"{k:<22}{ms / 1000:>9.3f} us{pr / 1000:>9.3f} us{100 * (pr / ms - 1):>+8.1f}%")
    print(f"d=7 without its {r.held_out_outliers:,} calls above the fit's outlier threshold: p50 "
          f"{r.measured_kept['p50'] / 1000:.3f} us, p99 {r.measured_kept['p99'] / 1000:.3f} us")
    print(f"p50 error {100 * r.error_p50:+.1f} % (target within 10 %); {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
