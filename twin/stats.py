"""Summary statistics of round-trip samples (integer picoseconds in, nanoseconds out).

Every percentile the twin reports or decides on (round trips, stages, program stalls and periods,
decoder call times) is :func:`percentile`: inverted CDF, the value of an actual sample (numpy's
default linear interpolation would report a time between two rounds, which no round took)."""
from __future__ import annotations

import numpy as np

PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}


def percentile(samples, q):
    """The ``q``-th percentile (0..100; a sequence of them gives an array, one per ``q``) of
    ``samples`` (any shape, flattened; any numeric dtype, kept) as the value of an actual sample:
    inverted CDF, the smallest sample with at least q % of samples at or below it. Raises
    ValueError for no samples."""
    a = np.asarray(samples)
    if a.size == 0:
        raise ValueError("no samples")
    return np.percentile(a, q, method="inverted_cdf")


def percentile_rows(samples, q: float) -> np.ndarray:
    """The ``q``-th percentile (:func:`percentile`'s inverted CDF) of each row of the 2-D ``samples``
    (shape (rows, n), n > 0): one actual sample per row, shape (rows,), the dtype kept."""
    a = np.asarray(samples)
    if a.ndim != 2 or a.shape[1] == 0:
        raise ValueError(f"need rows of samples, got shape {a.shape}")
    return np.percentile(a, q, axis=1, method="inverted_cdf")


def percentile_ps(samples_ps: np.ndarray, q: float) -> int:
    """The ``q``-th percentile as the value of an actual round (:func:`percentile`), int ps, so a
    4 ns-quantised run gives a bucket value."""
    return int(percentile(samples_ps, q))


def summary_ns(samples_ps: np.ndarray) -> dict[str, float]:
    """p50/p90/p99/p99.9 and mean in nanoseconds: keys ``p50_ns``, ``p90_ns``, ``p99_ns``,
    ``p999_ns``, ``mean_ns`` (mean rounded to 1e-3 ns so it prints the same on every machine)."""
    out = {f"{k}_ns": percentile_ps(samples_ps, q) / 1000 for k, q in PERCENTILES.items()}
    out["mean_ns"] = round(float(np.mean(samples_ps, dtype=np.float64)) / 1000, 3)
    return out


def histogram_ps(samples_ps: np.ndarray, bin_ps: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """Counts per ``bin_ps`` bucket: returns (bucket start times in ps, counts), empty buckets kept."""
    lo = (int(samples_ps.min()) // bin_ps) * bin_ps
    idx = (samples_ps - lo) // bin_ps
    counts = np.bincount(idx.astype(np.int64))
    return lo + np.arange(len(counts), dtype=np.int64) * bin_ps, counts


def histogram_4ns(samples_ps: np.ndarray) -> dict:
    """The 4 ns histogram (the card clock's bucket) as a mapping: ``bin_ns`` (4), ``start_ns`` (the
    first bucket), ``counts`` (a list, empty buckets kept). ``samples_ps``: int ps, not empty."""
    starts, counts = histogram_ps(np.asarray(samples_ps, np.int64), 4000)
    return {"bin_ns": 4.0, "start_ns": float(starts[0]) / 1000, "counts": counts.tolist()}


def plot_bin_ps(samples_ps: np.ndarray, bin_ps: int = 4000, max_bars: int = 20_000) -> int:
    """The bar width for a histogram figure of ``samples_ps``: ``bin_ps`` (the timing clock's
    resolution), widened to a whole multiple of it so that at most ``max_bars`` bars span the
    samples (a run with rare long stalls would otherwise need millions of bars)."""
    span = int(samples_ps.max() - samples_ps.min()) if len(samples_ps) else 0
    return bin_ps * max(1, -(-span // (bin_ps * max_bars)))
