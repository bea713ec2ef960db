"""Summary statistics of round-trip samples (integer picoseconds in, nanoseconds out).

Every percentile the twin reports or decides on (round trips, stages, program stalls and periods,
decoder call times) is :func:`percentile`: inverted CDF, the value of an actual sample (numpy's
default linear interpolation would report a time between two rounds, which no round took)."""
from __future__ import annotations

import numpy as np

PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}


DENSE_SPAN = 1 << 20
"""The widest range (max - min + 1, in the samples' own units: ps) whose percentiles are read from
one count per value (:func:`numpy.bincount`, 8 MiB of int64 counts at most); a wider one is
selected exactly (:func:`numpy.partition`)."""


def ranks(n: int, q) -> np.ndarray:
    """The 0-based positions in the sorted samples that the inverted-CDF ``q``-th percentiles
    (0..100, scalar or sequence) of ``n`` samples take: ``ceil(n * q / 100) - 1`` clipped to
    ``[0, n - 1]``, in numpy's own float arithmetic (:func:`numpy.percentile`, ``method=
    "inverted_cdf"``), so the same sample is picked. Shape of ``q``, dtype intp."""
    x = n * np.true_divide(np.asarray(q, np.float64), 100) - 1
    prev = np.floor(x)
    k = np.where(x - prev == 0, prev, prev + 1).astype(np.intp)
    return np.clip(k, 0, max(n - 1, 0))


def order_statistics(samples, ks) -> np.ndarray:
    """The samples at the sorted positions ``ks`` (0-based, each in ``[0, n)``), exactly, without a
    sort: integers spanning at most :data:`DENSE_SPAN` values (and at most 2 per sample) by one
    count per value (one pass), anything else by selection (:func:`numpy.partition`, one pass for
    all ``ks``). ``samples``: 1-D (a 2-D one is flattened); the dtype is kept."""
    a = np.asarray(samples).ravel()
    ks = np.asarray(ks, np.intp)
    if a.dtype.kind in "iu" and len(a):
        lo, hi = int(a.min()), int(a.max())
        if hi - lo < min(DENSE_SPAN, 2 * len(a)):  # counting beats selecting while the bins are few
            base = 0 if 0 <= lo and hi < min(DENSE_SPAN, 2 * len(a)) else lo  # (a stage's times: no shifted copy)
            shifted = a if base == 0 else a - base
            cum = np.cumsum(np.bincount(shifted.astype(np.intp, copy=False), minlength=hi - base + 1))
            return (np.searchsorted(cum, ks, side="right") + base).astype(a.dtype)
    return np.partition(a, np.unique(ks))[ks]


def percentile(samples, q):
    """The ``q``-th percentile (0..100; a sequence of them gives an array, one per ``q``) of
    ``samples`` (any shape, flattened; any numeric dtype, kept) as the value of an actual sample:
    inverted CDF, the smallest sample with at least q % of samples at or below it (numpy's
    ``method="inverted_cdf"``, computed by :func:`order_statistics`: one pass for all ``q``, no
    sort). Raises ValueError for no samples."""
    a = np.asarray(samples)
    if a.size == 0:
        raise ValueError("no samples")
    v = order_statistics(a, ranks(a.size, q))
    return v[()] if np.ndim(q) == 0 else v


def percentile_rows(samples, q: float) -> np.ndarray:
    """The ``q``-th percentile (:func:`percentile`'s inverted CDF) of each row of the 2-D ``samples``
    (shape (rows, n), n > 0): one actual sample per row, shape (rows,), the dtype kept."""
    a = np.asarray(samples)
    if a.ndim != 2 or a.shape[1] == 0:
        raise ValueError(f"need rows of samples, got shape {a.shape}")
    k = int(ranks(a.shape[1], q))
    return np.partition(a, k, axis=1)[:, k]


def percentile_ps(samples_ps: np.ndarray, q: float) -> int:
    """The ``q``-th percentile as the value of an actual round (:func:`percentile`), int ps, so a
    4 ns-quantised run gives a bucket value."""
    return int(percentile(samples_ps, q))


def summary_ns(samples_ps: np.ndarray) -> dict[str, float]:
    """p50/p90/p99/p99.9 and mean in nanoseconds: keys ``p50_ns``, ``p90_ns``, ``p99_ns``,
    ``p999_ns``, ``mean_ns`` (mean rounded to 1e-3 ns so it prints the same on every machine).
    One pass for the four percentiles (:func:`percentile`); the mean is the exact integer sum over
    the count (float64 as numpy's mean, whose sum of integers below 2**53 is exact too)."""
    a = np.asarray(samples_ps)
    mean = float(np.float64(int(a.sum(dtype=np.int64))) / a.size) if a.dtype.kind in "iu" and a.size \
        else float(np.mean(a, dtype=np.float64))
    return _summary(percentile(a, list(PERCENTILES.values())), mean)


def _summary(values, mean: float) -> dict[str, float]:
    """:func:`summary_ns`'s mapping of the four percentiles (ps, in :data:`PERCENTILES` order) and the mean (ps)."""
    out = {f"{k}_ns": int(x) / 1000 for k, x in zip(PERCENTILES, values)}
    out["mean_ns"] = round(mean / 1000, 3)
    return out


class Counts:
    """Integer samples (int ps) as counts per value, accumulated chunk by chunk in memory that
    depends on their range, not their number: exact inverted-CDF percentiles (:func:`percentile`'s),
    the exact sum and mean, min and max, equal to those of all the chunks joined.

    Values are counted one per value while their range (max - min + 1) is at most
    :data:`DENSE_SPAN`; a wider range keeps the distinct values and their counts (sorted), whose
    number bounds the memory (a round trip on a card clock takes few distinct values). ``nbytes``:
    the memory the counts hold."""

    def __init__(self) -> None:
        self.n = 0
        self.total = 0  # exact (Python int)
        self.lo = 0
        self.dense: np.ndarray | None = None  # counts of lo, lo + 1, ...
        self.values: np.ndarray | None = None  # sparse: distinct values (sorted) and their counts
        self.counts: np.ndarray | None = None
        self._cum: tuple[np.ndarray | None, np.ndarray] | None = None  # _table's, until the next add

    @classmethod
    def of(cls, samples) -> "Counts":
        """The counts of ``samples`` (integers, any shape)."""
        c = cls()
        c.add(samples)
        return c

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.dense, self.values, self.counts) if a is not None)

    def add(self, samples) -> None:
        """Count a chunk of integer samples."""
        a = np.asarray(samples).ravel()
        if not len(a):
            return
        self._cum = None
        if a.dtype.kind not in "iu":
            raise TypeError(f"counts of integers, got {a.dtype}")
        lo, hi = int(a.min()), int(a.max())
        self.n += len(a)
        self.total += int(a.sum(dtype=np.int64))
        if self.values is None:
            base = lo if self.dense is None else min(lo, self.lo)
            top = hi if self.dense is None else max(hi, self.lo + len(self.dense) - 1)
            if top - base < DENSE_SPAN:
                self._add_dense(a, base, top)
                return
            self._to_sparse()
        v, c = np.unique(a, return_counts=True)
        self._merge(v.astype(np.int64), c.astype(np.int64))

    def _add_dense(self, a: np.ndarray, base: int, top: int) -> None:
        """Count ``a`` into the dense counts, grown to ``base .. top`` first when they do not reach."""
        if self.dense is None or base < self.lo or top >= self.lo + len(self.dense):
            grown = np.zeros(top - base + 1, np.int64)
            if self.dense is not None:
                grown[self.lo - base:self.lo - base + len(self.dense)] = self.dense
            self.lo, self.dense = base, grown
        lo = int(a.min())  # the chunk's own range only: one pass over its bins, not over all the counts'
        c = np.bincount((a - lo).astype(np.intp, copy=False))
        self.dense[lo - self.lo:lo - self.lo + len(c)] += c

    def _to_sparse(self) -> None:
        d = self.dense if self.dense is not None else np.zeros(0, np.int64)
        nz = np.flatnonzero(d)
        self.values, self.counts, self.dense = nz.astype(np.int64) + self.lo, d[nz], None

    def _merge(self, v: np.ndarray, c: np.ndarray) -> None:
        assert self.values is not None and self.counts is not None
        allv = np.union1d(self.values, v)
        cnt = np.zeros(len(allv), np.int64)
        cnt[np.searchsorted(allv, self.values)] += self.counts
        cnt[np.searchsorted(allv, v)] += c
        self.values, self.counts = allv, cnt

    def _table(self) -> tuple[np.ndarray | None, np.ndarray]:
        """(values ascending, or None for the dense counts' ``lo, lo + 1, ...``; cumulative counts),
        kept until the next :meth:`add`."""
        if self._cum is None:
            if self.values is not None and self.counts is not None:
                self._cum = (self.values, np.cumsum(self.counts))
            else:
                self._cum = (None, np.cumsum(self.dense if self.dense is not None else np.zeros(0, np.int64)))
        return self._cum

    def order_statistics(self, ks) -> np.ndarray:
        """The values at the sorted positions ``ks`` (0-based, in ``[0, n)``), int64."""
        if not self.n:
            raise ValueError("no samples")
        vals, cum = self._table()
        i = np.searchsorted(cum, np.asarray(ks, np.intp), side="right")
        return (i + self.lo).astype(np.int64) if vals is None else vals[i]

    def percentile(self, q):
        """:func:`percentile` of every sample counted (int, or an int64 array for a sequence ``q``)."""
        v = self.order_statistics(ranks(self.n, q))
        return int(v) if np.ndim(q) == 0 else v

    def below(self, value: int) -> int:
        """How many samples are < ``value``."""
        vals, cum = self._table()
        i = int(np.clip(value - self.lo, 0, len(cum))) if vals is None else int(np.searchsorted(vals, value))
        return int(cum[i - 1]) if i else 0

    def mean(self) -> float:
        """The mean, float64 of the exact sum (numpy's mean of the samples joined, for sums below 2**53)."""
        return float(np.float64(self.total) / self.n)

    def summary_ns(self) -> dict[str, float]:
        """:func:`summary_ns` of every sample counted."""
        if not self.n:
            raise ValueError("no samples")
        return _summary(self.percentile(list(PERCENTILES.values())), self.mean())


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
