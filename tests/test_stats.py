"""twin/stats.py: every percentile is an actual sample (inverted CDF), row by row too."""
import math

import numpy as np
import pytest

from twin.stats import percentile, percentile_ps, percentile_rows


@pytest.mark.parametrize("n", [1, 2, 3, 10, 101])
@pytest.mark.parametrize("q", [0.1, 50.0, 90.0, 99.0, 99.9, 100.0])
def test_inverted_cdf_is_the_smallest_sample_with_q_percent_at_or_below(n, q):
    rng = np.random.default_rng(n)
    x = rng.integers(0, 10**6, n)
    want = np.sort(x)[max(0, math.ceil(q / 100 * n) - 1)]  # the definition, not numpy
    assert percentile(x, q) == want
    assert percentile_ps(x, q) == want


def test_rows_give_each_rows_own_sample():
    rng = np.random.default_rng(7)
    a = rng.integers(0, 1000, (40, 9))
    got = percentile_rows(a, 50)
    assert got.shape == (40,)
    for row, g in zip(a, got):
        assert g == np.sort(row)[math.ceil(0.5 * 9) - 1] and g in row


def test_no_samples_refused():
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile_rows(np.zeros((3, 0)), 50)


# ---- one pass, in constant memory: percentiles from counts, the budget by selection ----------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as hs  # noqa: E402

import twin.stats as stats  # noqa: E402
from twin.engine.hops import Hops, budget, round_at, rounds_from  # noqa: E402
from twin.stats import Counts, order_statistics, ranks, summary_ns  # noqa: E402

QS = [0.0, 0.1, 1.0, 33.3, 50.0, 90.0, 99.0, 99.9, 100.0]
ints = hs.lists(hs.integers(-10**12, 10**12) | hs.integers(0, 50), min_size=1, max_size=300)


@settings(max_examples=300, deadline=None)
@given(ints, hs.lists(hs.floats(0, 100), min_size=1, max_size=5))
def test_percentiles_from_counts_equal_numpys_inverted_cdf(xs, qs):
    a = np.asarray(xs, np.int64)
    want = np.percentile(a, qs + QS, method="inverted_cdf")
    assert (percentile(a, qs + QS) == want).all()  # dense counts or selection, by the range
    assert (Counts.of(a).percentile(qs + QS) == want).all()
    assert (np.sort(a)[ranks(len(a), qs + QS)] == want).all()


@settings(max_examples=200, deadline=None)
@given(ints, hs.integers(1, 40), hs.booleans())
def test_counts_chunked_equal_the_whole(xs, chunk, narrow):
    a = np.asarray(xs, np.int64)
    if narrow:
        a = a % 97
    c = Counts()
    for i in range(0, len(a), chunk):
        c.add(a[i:i + chunk])
    assert (c.percentile(QS) == np.percentile(a, QS, method="inverted_cdf")).all()
    assert c.n == len(a) and c.total == int(a.sum())
    assert c.summary_ns() == summary_ns(a)
    assert c.mean() == float(np.mean(a, dtype=np.float64))
    assert all(c.below(int(v)) == int((a < v).sum()) for v in a[:5])


def test_counts_wide_range_goes_sparse_and_stays_exact(monkeypatch):
    monkeypatch.setattr(stats, "DENSE_SPAN", 64)
    rng = np.random.default_rng(3)
    a = rng.integers(0, 10**9, 5000)
    c = Counts()
    for i in range(0, len(a), 700):
        c.add(a[i:i + 700])
    assert c.dense is None and c.values is not None
    assert (c.percentile(QS) == np.percentile(a, QS, method="inverted_cdf")).all()
    assert (order_statistics(a, [0, 17, 4999]) == np.sort(a)[[0, 17, 4999]]).all()  # by selection


def test_counts_memory_is_the_range_not_the_run():
    """A run's statistics need memory for the values' range (1 ps counts), not for its rounds: ten times
    the rounds over the same range hold the same bytes."""
    rng = np.random.default_rng(5)
    short, long = Counts(), Counts()
    for c, chunks in ((short, 1), (long, 10)):
        for _ in range(chunks):
            c.add(2_000_000 + rng.integers(0, 500_000, 100_000))
    assert long.n == 10 * short.n
    assert long.nbytes <= 8 * 500_001 and long.nbytes <= short.nbytes + 64


def _flow(n: int, seed: int):
    """A flow of ``n`` rounds on a 4 ns grid (many ties), its instants in order."""
    rng = np.random.default_rng(seed)
    steps = rng.integers(0, 4, (7, n)) * 4000 + 1000
    t_in = np.cumsum(rng.integers(1, 3, n)) * 10**7
    inst = t_in + np.cumsum(steps, axis=0)
    t_have = inst[-1] + 4000 * rng.integers(0, 2, n)
    return t_in, t_have, Hops(*(np.ascontiguousarray(x) for x in inst))


@pytest.mark.parametrize("n", [2, 10, 1000, 1001])
def test_budget_median_round_is_the_p50_round(n):
    """The median round's stages add up to the p50 round trip (the inverted-CDF one, not the upper median)."""
    t_in, t_have, hops = _flow(n, n)
    rtt = t_have - t_in
    rows = budget(t_in, t_have, hops)
    total_ps = round(sum(r["median_round_ns"] for r in rows) * 1000)
    assert total_ps == percentile_ps(rtt, 50)


@pytest.mark.parametrize("n", [1, 7, 1000, 4001])
def test_budget_by_selection_equals_the_sorted_definition(n):
    t_in, t_have, hops = _flow(n, 11 * n)
    rtt = t_have - t_in
    order = np.argsort(rtt, kind="stable")
    k50, k99 = int(ranks(n, 50)), int(0.99 * (n - 1))
    assert round_at(rtt, k50) == order[k50]
    assert (np.flatnonzero(rounds_from(rtt, k99)) == np.sort(order[k99:])).all()
    from twin.engine.hops import stage_times
    for row, (name, d) in zip(budget(t_in, t_have, hops), stage_times(t_in, t_have, hops).items()):
        assert row["stage"] == name
        assert row["p50_ns"] * 1000 == np.percentile(d, 50, method="inverted_cdf")
        assert row["p99_ns"] * 1000 == np.percentile(d, 99, method="inverted_cdf")
        assert row["median_round_ns"] * 1000 == d[order[k50]]
        assert row["p99_rounds_mean_ns"] == round(float(d[order[k99:]].mean()) / 1000, 3)
