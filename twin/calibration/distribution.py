"""Comparing two round-trip distributions: percentiles, Wasserstein-1, KS and the 4 ns histogram,
and the modes of a histogram (what ``twin calibrate --from-live`` and ``twin validate`` report).

W1 (:func:`scipy.stats.wasserstein_distance`) is the mean absolute shift that turns one
distribution into the other (ns); KS (:func:`scipy.stats.ks_2samp`) the largest gap between the
two cumulative distributions. Modes: peaks of the 4 ns histogram smoothed with a Gaussian of
:data:`SMOOTH_NS`, at least :data:`MODE_PROMINENCE` of the highest peak above the valleys beside
them (:func:`scipy.signal.find_peaks`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.stats import histogram_ps, percentile_ps

BIN_PS = 4000            # the card clock: every published round trip is a 4 ns bucket
SMOOTH_NS = 16.0         # smoothing of the histogram before looking for peaks
MODE_PROMINENCE = 0.15   # a peak stands this fraction of the highest peak above its valleys
STATS = (("p50", 50), ("p90", 90), ("p99", 99))


@dataclass
class Comparison:
    """Measured vs predicted: ``rows`` (stat, measured ns, predicted ns), ``w1_ns``, ``ks``, the
    number of modes of each histogram, sample sizes."""

    rows: list[tuple[str, float, float]]
    w1_ns: float
    ks: float
    modes_measured: int
    modes_predicted: int
    n_measured: int
    n_predicted: int

    @property
    def p50_ns(self) -> float:
        """The measured median (ns)."""
        return self.rows[0][1]

    @property
    def w1_pct(self) -> float:
        """W1 as a percentage of the measured p50."""
        return 100.0 * self.w1_ns / self.p50_ns

    def error_pct(self, stat: str) -> float:
        """100 * (predicted - measured) / measured for ``stat`` (p50, p90, p99)."""
        m, p = next((m, p) for s, m, p in self.rows if s == stat)
        return 100.0 * (p - m) / m

    def as_dict(self) -> dict:
        """For a calibration file or results: errors (%), W1 (ns, % of p50), KS, modes."""
        return {**{f"{s}_measured_ns": round(m, 3) for s, m, _ in self.rows},
                **{f"{s}_predicted_ns": round(p, 3) for s, _, p in self.rows},
                **{f"{s}_error_pct": round(self.error_pct(s), 3) for s, _, _ in self.rows},
                "w1_ns": round(self.w1_ns, 3), "w1_pct_of_p50": round(self.w1_pct, 3), "ks": round(self.ks, 4),
                "modes_measured": self.modes_measured, "modes_predicted": self.modes_predicted,
                "rounds_measured": self.n_measured, "rounds_predicted": self.n_predicted}


def count_modes(samples_ps: np.ndarray) -> int:
    """Peaks of the 4 ns histogram (module docstring); 0 for no samples."""
    from scipy.ndimage import gaussian_filter1d
    from scipy.signal import find_peaks
    if len(samples_ps) == 0:
        return 0
    lo, hi = np.percentile(samples_ps, [0.5, 99.5])  # the body: a lone outlier is not a mode
    s = samples_ps[(samples_ps >= lo) & (samples_ps <= hi)]
    _, counts = histogram_ps(s, BIN_PS)
    sm = gaussian_filter1d(counts.astype(float), SMOOTH_NS * 1000 / BIN_PS, mode="constant")
    peaks, _ = find_peaks(np.concatenate([[0], sm, [0]]), prominence=MODE_PROMINENCE * sm.max())
    return max(1, len(peaks))


def compare(measured_ps: np.ndarray, predicted_ps: np.ndarray) -> Comparison:
    """Measured vs predicted round trips (ps arrays): see :class:`Comparison`."""
    from scipy.stats import ks_2samp, wasserstein_distance
    m = np.asarray(measured_ps, np.int64)
    p = np.asarray(predicted_ps, np.int64)
    rows = [(k, percentile_ps(m, q) / 1000, percentile_ps(p, q) / 1000) for k, q in STATS]
    return Comparison(rows, wasserstein_distance(m, p) / 1000, float(ks_2samp(m, p).statistic), count_modes(m),
                      count_modes(p), len(m), len(p))


def best_shift_ps(measured_ps: np.ndarray, predicted_ps: np.ndarray, points: int = 2001) -> float:
    """The translation of ``predicted_ps`` that minimises its W1 distance to ``measured_ps``: W1 of a
    shift d is the integral over u of |Qm(u) - Qp(u) - d|, least at the median of Qm - Qp (on
    ``points`` evenly spaced quantiles)."""
    u = np.linspace(0, 100, points)[1:-1]
    return float(np.median(np.percentile(measured_ps, u) - np.percentile(predicted_ps, u)))


def extra_modes(samples_ps: np.ndarray) -> list[dict]:
    """The modes beyond the main one, as service modes (``weight``, ``offset_ns``, ``width_ns``):
    for each peak above the main (highest) peak, the rounds between the valleys beside it: their
    share of all rounds, and the offset from the main region's median to theirs (width 0: the main
    mode's shape moved there). Empty for a one-mode histogram (the fitted poll and jitter already
    give the main mode's shape)."""
    from scipy.ndimage import gaussian_filter1d
    from scipy.signal import find_peaks
    lo, hi = np.percentile(samples_ps, [0.5, 99.5])
    s = samples_ps[(samples_ps >= lo) & (samples_ps <= hi)]
    starts, counts = histogram_ps(s, BIN_PS)
    sm = gaussian_filter1d(counts.astype(float), SMOOTH_NS * 1000 / BIN_PS, mode="constant")
    peaks, _ = find_peaks(np.concatenate([[0], sm, [0]]), prominence=MODE_PROMINENCE * sm.max())
    peaks = peaks - 1
    if len(peaks) < 2:
        return []
    k_main = int(np.argmax(sm[peaks]))
    valleys = [int(a + np.argmin(sm[a:b + 1])) for a, b in zip(peaks, peaks[1:])]
    bounds = [int(starts[0])] + [int(starts[v]) for v in valleys] + [int(starts[-1]) + BIN_PS]

    def region(k):
        return samples_ps[(samples_ps >= bounds[k]) & (samples_ps < bounds[k + 1])]

    main_med = float(np.median(region(k_main)))
    out = []
    for k in range(k_main + 1, len(peaks)):
        r = region(k)
        out.append({"weight": round(len(r) / len(samples_ps), 6),
                    "offset_ns": round((float(np.median(r)) - main_med) / 1000, 3), "width_ns": 0.0})
    return out


# probability grid of a service quantile table: 2 % steps in the body, finer in the tail (p99, p99.9)
TABLE_U = np.unique(np.concatenate([np.arange(0, 0.90, 0.02), np.arange(0.90, 0.99, 0.01),
                                    np.arange(0.99, 0.999, 0.001), [0.9995, 1.0]]).round(6))


def service_table(service_ns: np.ndarray) -> tuple[float, list[dict]]:
    """A measured service distribution as (floor ns, service modes): the floor is its minimum; each
    block between two quantiles of :data:`TABLE_U` is a mode of weight (their difference), offset
    (the lower quantile above the floor) and width (the block's span), so a draw is uniform within
    its block and the modes' weights sum to 1 (:func:`twin.devices.service.mode_draws`)."""
    q = np.quantile(np.asarray(service_ns, np.float64), TABLE_U)
    floor = float(q[0])
    modes = [{"weight": round(float(u1 - u0), 6), "offset_ns": round(float(a - floor), 3),
              "width_ns": round(float(b - a), 3)}
             for u0, u1, a, b in zip(TABLE_U, TABLE_U[1:], q, q[1:])]
    return floor, modes
