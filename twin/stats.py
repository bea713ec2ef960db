"""Summary statistics of round-trip samples (integer picoseconds in, nanoseconds out).

Every percentile the twin reports or decides on (round trips, stages, program stalls and periods,
decoder call times) is :func:`percentile`: inverted CDF, the value of an actual sample (numpy's
default linear interpolation would report a time between two rounds, which no round took)."""
from __future__ import annotations

import operator
from collections.abc import Iterable

import numpy as np

PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}


DENSE_SPAN = 1 << 20
"""The widest range (max - min + 1, in the samples' own units: ps) whose percentiles are read from
one count per value (:func:`numpy.bincount`, 8 MiB of int64 counts at most); a wider one is
selected exactly (:func:`numpy.partition`)."""

SMALL_SPAN = 1 << 16
"""Empty counts take a first chunk one count per value only where its range is below
``max(SMALL_SPAN, 16 * samples)``: a short flow's (a mesh's 10,000 rounds over a range of 10^6 ps) is kept
as its distinct values instead, its percentiles then read from at most as many counts as it has samples,
not from a cumulative sum over the whole range (a 10,000-round flow's 11 columns: 0.05 ms against 6 ms)."""


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
    return np.partition(a, sorted(set(ks.ravel().tolist())))[ks]  # (np.unique would import numpy.ma: 15 ms)


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

    @property
    def total(self) -> int:
        """The exact sum of every sample counted (Python int), from the counts."""
        if self.values is not None and self.counts is not None:
            return sum(map(operator.mul, self.values.tolist(), self.counts.tolist()))
        if self.dense is None:
            return 0
        # sum (lo + i) c_i: i c_i < 2**20 * n fits int64 for n < 2**43 samples
        return self.lo * self.n + int(np.dot(np.arange(len(self.dense), dtype=np.int64), self.dense))

    def add(self, samples) -> tuple[int, int] | None:
        """Count a chunk of integer samples; returns its (min, max), None when it has none."""
        a = np.asarray(samples).ravel()
        if not len(a):
            return None
        if a.dtype.kind not in "iu":
            raise TypeError(f"counts of integers, got {a.dtype}")
        lo, hi = int(a.min()), int(a.max())
        self.add_bounded(a, lo, hi)
        return lo, hi

    def add_bounded(self, a: np.ndarray | None, lo: int, hi: int, n: int = 0) -> None:
        """Count the integer samples ``a`` (1-D) whose min and max are ``lo`` and ``hi`` (known to
        the caller); ``lo == hi``: ``a`` is not read and may be None, ``n`` then giving how many
        (default ``len(a)``)."""
        m = len(a) if a is not None else n
        if not m:
            return
        self._cum = None
        self.n += m
        if self.values is None:
            base = lo if self.dense is None else min(lo, self.lo)
            top = hi if self.dense is None else max(hi, self.lo + len(self.dense) - 1)
            if top - base < DENSE_SPAN and (self.dense is not None or top - base < max(SMALL_SPAN, 16 * m)):
                self._grow(base, top)
                assert self.dense is not None
                if lo == hi:  # one value (a stage constant by construction): no pass over the samples
                    self.dense[lo - self.lo] += m
                else:  # the chunk's own range only: one pass over its bins, not over all the counts'
                    c = np.bincount((a - lo).astype(np.intp, copy=False), minlength=hi - lo + 1)
                    self.dense[lo - self.lo:hi - self.lo + 1] += c
                return
            self._to_sparse()
        if lo == hi:
            v, c = np.array([lo], np.int64), np.array([m], np.int64)
        elif hi - lo < min(2 * DENSE_SPAN, max(SMALL_SPAN, 16 * m)):  # counting the chunk's range beats sorting it
            c = np.bincount((a - lo).astype(np.intp, copy=False))
            nz = np.flatnonzero(c)
            v, c = nz.astype(np.int64) + lo, c[nz].astype(np.int64)
        else:
            v, c = distinct_counts(a)
        self._merge(v.astype(np.int64), c.astype(np.int64))

    def dense_for(self, lo: int, hi: int, m: int) -> np.ndarray | None:
        """The dense counts grown to reach ``lo .. hi``, ``m`` samples within them counted as added
        (the caller adds each sample v into the returned array at ``v - self.lo``, before any other
        call), or None, nothing changed, where the counts are or would turn sparse (wider than
        :data:`DENSE_SPAN`, or a first chunk wide for its samples: :data:`SMALL_SPAN`; count them with
        :meth:`add_bounded`). Counts that grow (not the first
        samples') grow by a quarter more on each side (within :data:`DENSE_SPAN`; empty counts change
        no result), so a long run's tails reach past them rarely."""
        if self.values is not None:
            return None
        if self.dense is not None and lo >= self.lo and hi < self.lo + len(self.dense):
            self._cum = None
            self.n += m
            return self.dense
        base = lo if self.dense is None else min(lo, self.lo)
        top = hi if self.dense is None else max(hi, self.lo + len(self.dense) - 1)
        if top - base >= DENSE_SPAN or (self.dense is None and top - base >= max(SMALL_SPAN, 16 * m)):
            return None
        slack = 0 if self.dense is None else min((top - base) // 4 + 16, (DENSE_SPAN - 1 - (top - base)) // 2)
        self._grow(base - slack, top + slack)
        self._cum = None
        self.n += m
        return self.dense

    def dense_counted(self, m: int) -> None:
        """``m`` samples counted into :attr:`dense` by the caller (each ``v`` at ``v - self.lo``, within it)."""
        self._cum = None
        self.n += m

    def _grow(self, base: int, top: int) -> None:
        """The dense counts grown to ``base .. top`` when they do not reach."""
        if self.dense is None or base < self.lo or top >= self.lo + len(self.dense):
            grown = np.zeros(top - base + 1, np.int64)
            if self.dense is not None:
                grown[self.lo - base:self.lo - base + len(self.dense)] = self.dense
            self.lo, self.dense = base, grown

    def _to_sparse(self) -> None:
        d = self.dense if self.dense is not None else np.zeros(0, np.int64)
        nz = np.flatnonzero(d)
        self.values, self.counts, self.dense = nz.astype(np.int64) + self.lo, d[nz], None

    def _merge(self, v: np.ndarray, c: np.ndarray) -> None:
        assert self.values is not None and self.counts is not None
        allv = sorted_distinct(np.concatenate([self.values, v]))
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


EXACT_FLOAT = 1 << 53
"""Integers below this in magnitude are exact in float64, and so is every sum of them that stays
below it: :class:`SumsByValue` sums a chunk by :func:`numpy.bincount`'s float64 weights while
its rows times its largest magnitude stays below it, exactly by integers (:func:`numpy.add.at`)
otherwise."""

LOOKUP_SPAN = 2 * DENSE_SPAN
"""The widest range of keys (max - min + 1) whose positions :class:`SumsByValue` looks up in a
table (int32, 8 MiB at most); a wider one by binary search."""


class SumsByValue:
    """Per distinct value of an integer key (a round's round trip, int ps): how many samples had it
    and the exact sums of ``k`` integer columns over them (the round's stages, int ps), accumulated
    chunk by chunk: :attr:`values` (distinct keys ascending, int64, shape (D,)), :attr:`counts` (int64,
    (D,)), :attr:`sums` (int64, (k, D)). The same, entry for entry, however the samples are cut into
    chunks. Memory: the distinct keys times (k + 2) int64, not the samples (a round trip on a card
    clock takes a few hundred values), and a key's position looked up in a table over the keys'
    range while it is at most :data:`LOOKUP_SPAN` (int32, 8 MiB at most; a wider one by binary
    search). The sums are int64, exact: OverflowError before a column's total magnitude over every
    sample could reach 2**63 (ps: 106 days of one stage); within a chunk they are float64
    :func:`numpy.bincount` sums, exact while the chunk's length times its largest magnitude is
    below :data:`EXACT_FLOAT` (a chunk of 262,144 rounds: stages up to 34 ms), :func:`numpy.add.at`
    in int64 otherwise."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.values = np.zeros(0, np.int64)
        self.counts = np.zeros(0, np.int64)
        self.sums = np.zeros((k, 0), np.int64)
        self._mass = [0] * k  # per column, a bound on |its sum| over any key's samples (Python int)
        self._lut: np.ndarray | None = None  # position of key values[0] + i, or -1; None: too wide

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @property
    def nbytes(self) -> int:
        return self.values.nbytes + self.counts.nbytes + self.sums.nbytes

    def add(self, keys, columns: Iterable) -> None:
        """Count a chunk: ``keys`` (integers, shape (m,)) and ``columns``, ``k`` triples ``(samples,
        lo, hi)``: a column's integer samples (shape (m,), each key's entry) and their min and max
        (``lo == hi``: every sample is ``lo``, ``samples`` is not read and may be None), taken one at
        a time, each summed before the next is asked for (a generator may hand out one buffer again
        and again). Raises ValueError for a column of another length or another number of them,
        OverflowError where an int64 sum could overflow (the accumulator is not to be used after
        either)."""
        a = np.asarray(keys).ravel()
        m = len(a)
        # (intp once: np.bincount would convert the table's int32 again for every column)
        idx = self._index(a.astype(np.int64, copy=False)).astype(np.intp, copy=False) if m else np.zeros(0, np.intp)
        d = len(self.values)
        here = np.bincount(idx, minlength=d)
        self.counts += here
        j = -1
        for j, (col, lo, hi) in enumerate(columns):
            if j >= self.k or (col is not None and len(col) != m) or (col is None and lo != hi):
                raise ValueError(f"column {j} ({'none' if col is None else len(col)} samples) for {self.k} "
                                 f"columns of {m}")
            if m:
                self._add_column(j, idx, here, col, lo, hi)
        if j != self.k - 1:
            raise ValueError(f"{j + 1} columns for {self.k}")

    def index(self, keys: np.ndarray) -> np.ndarray:
        """Each key's position in :attr:`values` (int64, shape of ``keys``, int64 1-D, not empty), the
        keys not counted yet inserted first (zero counts and sums: :attr:`values`, :attr:`counts` and
        :attr:`sums` may be new arrays after it)."""
        return self._index(keys).astype(np.int64, copy=False)

    def table(self) -> tuple[np.ndarray, int] | None:
        """The lookup table of the keys' positions (int32, -1 where no key; entry i for key
        ``values[0] + i``) and that first key, or None where the keys are too wide for one
        (:data:`LOOKUP_SPAN`) or there are none."""
        return None if self._lut is None or not len(self.values) else (self._lut, int(self.values[0]))

    @property
    def bounds(self) -> list[int]:
        """Per column, the bound on the magnitude of its sums so far (each < 2**63), as :meth:`added` keeps it;
        settable (a caller that summed the columns itself)."""
        return list(self._mass)

    @bounds.setter
    def bounds(self, mass: list[int]) -> None:
        if len(mass) != self.k or any(not 0 <= x < 1 << 63 for x in mass):
            raise ValueError(f"bounds {mass} for {self.k} columns")
        self._mass = list(mass)

    def fits(self, j: int, m: int, lo: int, hi: int) -> bool:
        """Whether ``m`` integer samples within ``lo .. hi`` can be added to column ``j``'s int64 sums
        without any passing 2**63 (then :meth:`added` after them), by the column's bound so far."""
        return self._mass[j] + m * max(-lo, hi) < 1 << 63

    def added(self, j: int, m: int, lo: int, hi: int, total: int) -> None:
        """Column ``j``'s bound after ``m`` samples within ``lo .. hi`` summing to ``total`` were added
        to its sums (by the caller, :meth:`fits` first), as :meth:`add` keeps it."""
        self._mass[j] += total if lo >= 0 else m * max(-lo, hi)

    def _add_column(self, j: int, idx: np.ndarray, here: np.ndarray, c, lo: int, hi: int) -> None:
        """Column ``j``'s chunk (samples ``c`` within ``lo .. hi``; their keys at ``idx``, ``here``
        of each) into its sums."""
        big = max(-lo, hi)
        m = len(idx)
        if lo == hi:  # one value: each key's count times it
            part = here * lo
            self._mass[j] += m * big
        elif m * big < EXACT_FLOAT:  # every partial sum an integer below 2**53: exact
            part = np.bincount(idx, weights=c, minlength=len(here)).astype(np.int64)
            self._mass[j] += int(part.sum()) if lo >= 0 else m * big  # |sum| over any key's <= this
        else:
            part = np.zeros(len(here), np.int64)
            np.add.at(part, idx, np.asarray(c, np.int64))
            self._mass[j] += m * big
        if self._mass[j] >= 1 << 63:
            raise OverflowError(f"column {j}'s sum over one key's samples could pass 2**63")
        self.sums[j] += part

    def _index(self, a: np.ndarray) -> np.ndarray:
        """Each key's position in :attr:`values` (intp or int32), the chunk's new keys inserted first."""
        v = self.values
        lo, hi = int(a.min()), int(a.max())
        if self._lut is not None and lo >= v[0] and hi <= v[-1]:  # (a table: keys within the range so far)
            idx = self._lut[a - v[0]]
            if int(idx.min()) >= 0:
                return idx
            new = distinct(a[idx < 0])
        elif self._lut is None and len(v):
            idx = np.searchsorted(v, a)
            if (v.take(idx, mode="clip") == a).all():
                return idx
            new = sorted_distinct(a)
            new = new[v.take(np.searchsorted(v, new), mode="clip") != new]
        else:  # keys beyond the table's range: those and the unseen ones within it
            out = (a < v[0]) | (a > v[-1]) if len(v) else np.ones(len(a), bool)
            if self._lut is not None:
                out |= self._lut[np.clip(a - v[0], 0, len(self._lut) - 1)] < 0
            new = distinct(a[out])
        self._insert(new)
        if self._lut is not None:
            return self._lut[a - self.values[0]]
        return np.searchsorted(self.values, a)

    def _insert(self, new: np.ndarray) -> None:
        """New keys (sorted, none counted yet) into the table, with zero counts and sums."""
        at = np.searchsorted(self.values, new)
        self.values = np.insert(self.values, at, new)
        self.counts = np.insert(self.counts, at, 0)
        self.sums = np.insert(self.sums, at, 0, axis=1)
        span = int(self.values[-1] - self.values[0]) + 1
        if span > LOOKUP_SPAN:
            self._lut = None
            return
        self._lut = np.full(span, -1, np.int32)
        self._lut[self.values - self.values[0]] = np.arange(len(self.values), dtype=np.int32)

    def position(self, k: int) -> int:
        """The index in :attr:`values` of the key at sorted position ``k`` (0-based, in ``[0, n)``)
        of every sample counted."""
        if not 0 <= k < self.n:
            raise ValueError(f"position {k} of {self.n} samples")
        return int(np.searchsorted(np.cumsum(self.counts), k, side="right"))


def distinct(a: np.ndarray) -> np.ndarray:
    """The distinct values of the integer array ``a`` (1-D), ascending: :func:`numpy.unique`'s result
    (same values, int64), by one count per value where their range is at most :data:`LOOKUP_SPAN`
    and at most 4 values a sample (a pass, no sort: a round trip's 200,000 keys in 1 ms, not 7)."""
    if len(a):
        lo, hi = int(a.min()), int(a.max())
        if hi - lo < min(LOOKUP_SPAN, 4 * len(a)):
            return np.flatnonzero(np.bincount((a - lo).astype(np.intp, copy=False), minlength=hi - lo + 1)) \
                .astype(np.int64) + lo
    return sorted_distinct(a).astype(np.int64, copy=False)


def distinct_counts(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of the 1-D integer array ``a`` (ascending, int64) and how many times each
    occurs (int64): :func:`numpy.unique`'s ``return_counts``, by a sort (see :func:`sorted_distinct`)."""
    s = np.sort(a).astype(np.int64, copy=False)
    if not len(s):
        return s, np.zeros(0, np.int64)
    first = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    return s[first], np.diff(np.append(first, len(s))).astype(np.int64)


def sorted_distinct(a: np.ndarray) -> np.ndarray:
    """The distinct values of the 1-D array ``a``, ascending (:func:`numpy.unique`'s, the dtype kept) by a
    sort, without numpy.unique's look for a masked array (its first call imports numpy.ma: 15 ms of a
    run's start)."""
    s = np.sort(a)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if len(s) else s


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
