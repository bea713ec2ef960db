"""A batch of rounds into a flow's counts: the compiled core's passes over the instants, or numpy's.

:func:`add_columns` counts columns that are differences of two int64 instant columns (a stage's
time, the round trip) into :class:`twin.stats.Counts` (exact inverted-CDF percentiles, sum, min,
max) and sums the first of them per key value into a :class:`twin.stats.SumsByValue` (the budget's
median round and slowest 1 %). With the compiled core (``twin/engine/c/stats.c``, linked into
``twin.engine._core``) no difference is ever stored: one pass in blocks of 1,024 rounds (each
block's bounds, then its counts and sums while it is in cache) as long as the values fall within
the counts and the keys are known, two passes (bounds, the counts grown to them, counting) for the
rest of a batch. Without the core (or for counts wider than :data:`twin.stats.DENSE_SPAN`, keys too
wide for a lookup table, sums near 2**63) numpy does the same, column by column. The results are
the same, entry for entry, either way and however the rounds are cut into batches
(tests/test_flow_counts.py). Memory: the counts', plus one int64 per round of a batch (the keys'
positions, the rounds of new keys). Speed on a 2-core VM: BENCHMARKS.md.
"""
from __future__ import annotations

import ctypes

import numpy as np

from twin.stats import Counts, SumsByValue

Pair = tuple[np.ndarray, np.ndarray]
"""(from, to): a column's values are ``to - from`` (int64 ps, 1-D, one length)."""


def _core():
    """The compiled core, or None (the numpy path) where it is not to be had."""
    from twin.engine.native import CoreUnavailable, core
    try:
        return core()
    except CoreUnavailable:
        return None


def add_columns(pairs: list[Pair], counts: list[Counts | None], by_key: SumsByValue | None = None,
                key: int = -1, arg: int = -1) -> tuple[list[int], list[int], int]:
    """Count a batch: column j (``pairs[j]``'s ``to - from``, m rounds) into ``counts[j]`` (None: not
    counted), the first ``by_key.k`` columns summed per value of column ``key`` into ``by_key``.
    Returns each column's min and max (0, 0 for no rounds) and the first round at column ``arg``'s
    largest value (numpy's argmax; -1 where ``arg`` is -1 or no rounds). Raises OverflowError as
    :meth:`twin.stats.SumsByValue.add` does.

    With the core: one pass in blocks (``twin_stats_add``) while every value falls within its
    column's counts and every key is known (a long run's batches after its first few), the rest of
    the batch by two passes (bounds, the counts grown to them, then counting); sparse counts by numpy."""
    m = len(pairs[0][0]) if pairs else 0
    lib = _core() if m else None
    if lib is None:
        return _numpy(pairs, counts, by_key, key, arg)
    for a, b in pairs:
        assert a.dtype == b.dtype == np.int64 and a.flags.c_contiguous and b.flags.c_contiguous and len(a) == len(b)
    dense = [c if c is not None and c.values is None else None for c in counts]
    sparse = [j for j, c in enumerate(counts) if c is not None and dense[j] is None]
    done, lo, hi, at = _one_pass(lib, pairs, dense, by_key, key, arg)
    if done < m:
        rest = [(a[done:], b[done:]) for a, b in pairs]
        lo2, hi2, at2 = _two_passes(lib, rest, dense, by_key, key, arg)
        if done:
            if at2 >= 0 and hi2[arg] > hi[arg]:
                at = done + at2
            lo, hi = [min(x, y) for x, y in zip(lo, lo2)], [max(x, y) for x, y in zip(hi, hi2)]
        else:
            lo, hi, at = lo2, hi2, at2
    for j in sparse:  # sparse counts: numpy's
        c = counts[j]
        assert c is not None
        c.add_bounded(pairs[j][1] - pairs[j][0] if lo[j] != hi[j] else None, lo[j], hi[j], m)
    return lo, hi, at


def _addresses(arrays) -> tuple[np.ndarray, object]:
    """(the arrays' addresses as uint64, a ctypes int64** to them); None's address is 0."""
    addr = np.array([0 if a is None else a.ctypes.data for a in arrays], np.uint64)
    return addr, addr.ctypes.data_as(ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)))


def _one_pass(lib, pairs: list[Pair], dense: list[Counts | None], by_key: SumsByValue | None, key: int,
              arg: int) -> tuple[int, list[int], list[int], int]:
    """The rounds ``twin_stats_add`` counted in one pass (from the first, whole blocks, up to the first
    block with a value outside its counts or a key outside the table), their bounds and argmax."""
    k, m = len(pairs), len(pairs[0][0])
    t = by_key.table() if by_key is not None else None
    if by_key is not None and t is None:
        return 0, [0] * k, [0] * k, -1
    arrays = [c.dense if c is not None else None for c in dense]
    if any(c is not None and (a is None or not len(a)) for c, a in zip(dense, arrays)):
        return 0, [0] * k, [0] * k, -1
    keep = (_addresses([a for a, _ in pairs]), _addresses([b for _, b in pairs]), _addresses(arrays))
    base = np.array([c.lo if c is not None else 0 for c in dense], np.int64)
    size = np.array([len(a) if a is not None else 0 for a in arrays], np.int64)
    lo, hi, total, at = (np.zeros(k, np.int64) for _ in range(4))
    ks = by_key.k if by_key is not None else 0
    if by_key is not None and t is not None:
        by_key.sums = sums = np.ascontiguousarray(by_key.sums)
        mass = np.array(by_key.bounds, np.int64)
        kc, lut, lut_base, span, stride = by_key.counts, t[0].ctypes.data, t[1], len(t[0]), sums.shape[1]
    else:
        sums = mass = kc = np.zeros(1, np.int64)
        lut, lut_base, span, stride = None, 0, 0, 0
    skipped, n_skipped = np.empty(m if ks else 1, np.int64), np.zeros(1, np.int64)
    done = int(lib.twin_stats_add(m, k, keep[0][1], keep[1][1], keep[2][1], _ptr(base), _ptr(size), ks, lut, lut_base,
                                  span, key, _ptr(kc), _ptr(sums), stride, _ptr(mass), arg, _ptr(lo), _ptr(hi),
                                  _ptr(at), _ptr(total), _ptr(skipped), _ptr(n_skipped),
                                  _ptr(np.zeros(max(stride, 1), np.int64))))
    if done:
        for c in dense:
            if c is not None:
                c.dense_counted(done)
        if by_key is not None:
            by_key.bounds = mass.tolist()
            if n_skipped[0]:
                _new_keys(by_key, pairs, key, skipped[:int(n_skipped[0])])
    return done, lo.tolist(), hi.tolist(), int(at[0])


def _new_keys(by_key: SumsByValue, pairs: list[Pair], key: int, rounds: np.ndarray) -> None:
    """The ``rounds`` whose keys ``twin_stats_add`` did not know (it left them out of the sums and the
    keys' counts only; their bounds are in the columns' already): the keys inserted, the rounds summed."""
    a, b = pairs[key]
    pos = by_key.index(b[rounds] - a[rounds])
    by_key.counts += np.bincount(pos, minlength=len(by_key.counts))
    for j in range(by_key.k):
        np.add.at(by_key.sums[j], pos, pairs[j][1][rounds] - pairs[j][0][rounds])


def _two_passes(lib, pairs: list[Pair], dense: list[Counts | None], by_key: SumsByValue | None, key: int,
                arg: int) -> tuple[list[int], list[int], int]:
    """:func:`add_columns` of the ``dense`` counts by two passes: the bounds, the counts grown to reach
    them (a column that would turn sparse taken by numpy: None in ``dense`` from then on), the keys
    new to ``by_key`` inserted, then counting."""
    k, m = len(pairs), len(pairs[0][0])
    frm, to = _addresses([a for a, _ in pairs]), _addresses([b for _, b in pairs])
    lo, hi = np.zeros(k, np.int64), np.zeros(k, np.int64)
    at = int(lib.twin_stats_bounds(m, k, frm[1], to[1], arg, _ptr(lo), _ptr(hi)))
    los, his = lo.tolist(), hi.tolist()
    arrays: list[np.ndarray | None] = [None] * k
    base = np.zeros(k, np.int64)
    for j, c in enumerate(dense):
        if c is None:
            continue
        arr = c.dense_for(los[j], his[j], m)
        if arr is None:  # turning sparse: numpy's, now and after
            c.add_bounded(pairs[j][1] - pairs[j][0], los[j], his[j])
            dense[j] = None
        else:
            arrays[j], base[j] = arr, c.lo
    pos, sums, kc, ks = _positions(lib, pairs, by_key, key, m, los, his)
    total = np.zeros(k, np.int64)
    d = _addresses(arrays)
    lib.twin_stats_count(m, k, frm[1], to[1], d[1], _ptr(base), ks, _ptr(pos) if ks else None,
                         _ptr(kc) if ks else None, _ptr(sums) if ks else None, sums.shape[1] if ks else 0,
                         _ptr(total))
    if ks:
        assert by_key is not None
        for j, t in enumerate(total.tolist()[:ks]):
            by_key.added(j, m, los[j], his[j], t)
    return los, his, at


def _positions(lib, pairs: list[Pair], by_key: SumsByValue | None, key: int, m: int, los: list[int],
               his: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(each round's key position, the sums, the keys' counts, the columns to sum: ``by_key.k``) for
    :func:`add_columns`' pass 2; the keys new to ``by_key`` inserted. The sums are numpy's (done here,
    0 columns left to sum) where an int64 sum could come near 2**63."""
    none = np.zeros(0, np.int64)
    if by_key is None:
        return none, none, none, 0
    if not all(by_key.fits(j, m, los[j], his[j]) for j in range(by_key.k)):
        keys = pairs[key][1] - pairs[key][0]
        by_key.add(keys, ((pairs[j][1] - pairs[j][0], los[j], his[j]) for j in range(by_key.k)))
        return none, none, none, 0
    pos = np.empty(m, np.int64)
    t = by_key.table()
    a, b = pairs[key]
    if t is None or lib.twin_stats_positions(m, _ptr(a), _ptr(b), t[0].ctypes.data, t[1], len(t[0]), _ptr(pos)):
        pos = by_key.index(b - a)  # keys new to the table (or none): inserted
    sums = np.ascontiguousarray(by_key.sums)
    by_key.sums = sums
    return pos, sums, by_key.counts, by_key.k


def _numpy(pairs: list[Pair], counts: list[Counts | None], by_key: SumsByValue | None, key: int,
           arg: int) -> tuple[list[int], list[int], int]:
    """:func:`add_columns` by numpy, column by column (one difference buffer for all)."""
    m = len(pairs[0][0]) if pairs else 0
    los, his = [0] * len(pairs), [0] * len(pairs)
    at = -1
    d = np.empty(m, np.int64)

    def column(j: int):
        a, b = pairs[j]
        np.subtract(b, a, out=d)
        los[j], his[j] = (int(d.min()), int(d.max())) if m else (0, 0)
        c = counts[j]
        if c is not None:
            c.add_bounded(d if los[j] != his[j] else None, los[j], his[j], m)
        return d
    ks = 0 if by_key is None else by_key.k
    if by_key is not None:
        keys = pairs[key][1] - pairs[key][0]

        def summed():
            for j in range(ks):
                yield column(j), los[j], his[j]
        by_key.add(keys, summed())
    for j in range(ks, len(pairs)):
        column(j)
        if j == arg and m:
            at = int(np.argmax(d))
    if 0 <= arg < ks and m:
        at = int(np.argmax(pairs[arg][1] - pairs[arg][0]))
    return los, his, at


def _ptr(a: np.ndarray):
    """A ctypes int64 pointer to ``a`` (C-contiguous int64, kept alive by the caller)."""
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
