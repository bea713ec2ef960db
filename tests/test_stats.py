"""twin/stats.py: every percentile is an actual sample (inverted CDF), row by row too."""
import itertools
import math
from fractions import Fraction

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
from twin.engine.hops import FlowStats, Hops, budget, budget_rows, slowest_round, stage_times  # noqa: E402
from twin.stats import Counts, SumsByValue, order_statistics, ranks, summary_ns  # noqa: E402

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


def _bounded(columns) -> list:
    """:meth:`SumsByValue.add`'s columns: each with its min and max."""
    return [(c, int(c.min()), int(c.max())) for c in columns]


def _definition(rtt: np.ndarray, stages: np.ndarray) -> tuple[list[Fraction], list[Fraction]]:
    """The budget's median round and slowest 1 % by brute force (``stages``: shape (k, n), int ps):
    the median round the plain mean of the rounds whose round trip is the sorted rounds' p50 (at
    rank ceil(n / 2) - 1); the slowest 1 % the tail's mean averaged over every choice of which of
    the rounds tied at position int(0.99 (n - 1))'s value fill the tail's places at that value."""
    n = len(rtt)
    srt = np.sort(rtt)
    v50 = srt[max(0, math.ceil(n / 2) - 1)]
    mid = [Fraction(int(st[rtt == v50].sum()), int((rtt == v50).sum())) for st in stages]
    k = int(0.99 * (n - 1))
    v99 = srt[k]
    above, tied = np.flatnonzero(rtt > v99), np.flatnonzero(rtt == v99)
    t = n - k - len(above)  # the tail's places at v99
    picks = list(itertools.combinations(tied, t))
    tail = [sum((Fraction(int(st[above].sum()) + int(st[list(c)].sum()), n - k) for c in picks), Fraction(0))
            / len(picks) for st in stages]
    return mid, tail


def _check_budget(rows: list[dict], rtt: np.ndarray, stages: np.ndarray) -> None:
    """``rows`` against :func:`_definition`: the median round's stages the floor or the ceiling of
    their means, adding up to the p50 exactly, the ceilings on the largest remainders; the slowest
    1 % and the shares as the exact fractions rounded."""
    mid, tail = _definition(rtt, stages)
    got = [round(r["median_round_ns"] * 1000) for r in rows]
    assert sum(got) == percentile_ps(rtt, 50) == sum(mid)
    assert all(g in (math.floor(m), math.ceil(m)) for g, m in zip(got, mid))
    up = [m - math.floor(m) for g, m in zip(got, mid) if g > m]  # rounded up: no smaller remainder than one down
    down = [m - math.floor(m) for g, m in zip(got, mid) if g < m]
    assert not up or not down or min(up) >= max(down)
    for r, m, tl in zip(rows, mid, tail):
        assert r["p99_rounds_mean_ns"] == round(float(tl) / 1000, 3)
        assert r["share_median_round"] == round(float(m / max(1, sum(mid))), 6)


def test_budget_of_a_hand_made_set():
    """Seven rounds of two stages: the p50 (3000 ps) is three rounds' (stage means 4000/3 and
    5000/3 ps: 1333 and 1667 by largest remainder); the slowest 1 % are the last two places (of
    positions 5 and 6), one of them among the two rounds tied at 9000 ps: counted half each."""
    st = np.array([[1, 1, 2, 1, 4, 8, 3], [1, 2, 1, 2, 5, 1, 7]], np.int64) * 1000
    rtt = st.sum(axis=0)
    acc = SumsByValue(2)
    acc.add(rtt, _bounded(st))
    rows = budget_rows(["a", "b"], [(0, 0), (0, 0)], acc)
    assert [r["median_round_ns"] for r in rows] == [1.333, 1.667]
    assert [r["share_median_round"] for r in rows] == [0.444444, 0.555556]
    assert [r["p99_rounds_mean_ns"] for r in rows] == [4.5, 5.0]  # (3 + (4 + 8) / 2) / 2, (7 + (5 + 1) / 2) / 2
    _check_budget(rows, rtt, st)


@settings(max_examples=300, deadline=None)
@given(hs.lists(hs.lists(hs.integers(0, 6), min_size=3, max_size=3), min_size=1, max_size=120),
       hs.integers(1, 3000))
def test_budget_equals_its_definition_by_brute_force(rounds, scale):
    """Few values, many ties (at the p50 and at the slowest 1 %'s edge), any scale."""
    st = np.asarray(rounds, np.int64).T * scale
    rtt = st.sum(axis=0)
    acc = SumsByValue(3)
    acc.add(rtt, _bounded(st))
    _check_budget(budget_rows(["a", "b", "c"], [(0, 0)] * 3, acc), rtt, st)


@pytest.mark.parametrize("n", [2, 10, 1000, 1001])
def test_budget_median_round_is_the_p50_round(n):
    """The median round's stages add up to the p50 round trip (the inverted-CDF one, not the upper
    median) exactly, in integer ps."""
    t_in, t_have, hops = _flow(n, n)
    rtt = t_have - t_in
    rows = budget(t_in, t_have, hops)
    assert all(round(r["median_round_ns"] * 1000) / 1000 == r["median_round_ns"] for r in rows)  # whole ps
    assert sum(round(r["median_round_ns"] * 1000) for r in rows) == percentile_ps(rtt, 50)


@pytest.mark.parametrize("n", [1, 7, 1000, 4001])
def test_budget_equals_the_definition(n):
    t_in, t_have, hops = _flow(n, 11 * n)
    st = stage_times(t_in, t_have, hops)
    rows = budget(t_in, t_have, hops)
    for row, (name, d) in zip(rows, st.items()):
        assert row["stage"] == name
        assert row["p50_ns"] * 1000 == np.percentile(d, 50, method="inverted_cdf")
        assert row["p99_ns"] * 1000 == np.percentile(d, 99, method="inverted_cdf")
    if n < 2000:  # (the brute force's choices of the tied rounds grow with the ties)
        _check_budget(rows, t_have - t_in, np.array(list(st.values())))


@pytest.mark.parametrize("batch", [1, 7, 64, 999, 4001, 10**6])
def test_streamed_budget_equals_the_whole_at_any_batch(batch):
    """FlowStats over batches of any size gives the whole run's budget, slowest round, round trip and
    loop, key for key: with a stage constant (slot_wait: 4 ns) and one 0 by construction (fence: the
    publish the reply's own array), and a loop that is the round trip's arrays for the first 2,000
    rounds, its own after."""
    n = 4001
    t_in, t_have, h = _flow(n, 5)
    hops = Hops(h.issue, h.land, h.seen, h.start, h.reply, h.reply, h.rland, ready=h.issue - 4000)
    t_send, t_back = t_in - 1000 * (np.arange(n) >= 2000), t_have + 8000 * (np.arange(n) % 3 == 0)
    acc = FlowStats()
    for i in range(0, n, batch):
        cut = slice(i, i + batch)
        s, b = (t_in[cut], t_have[cut]) if i + batch <= 2000 else (t_send[cut], t_back[cut])
        acc.add(i, s, t_in[cut], t_have[cut], b, hops._map(lambda v: v[cut]))
    assert acc.n == n
    rows = budget(t_in, t_have, hops)
    assert [r["stage"] for r in rows][:2] == ["card", "slot_wait"] and rows[1]["median_round_ns"] == 4.0
    assert acc.budget() == rows
    assert acc.slowest_round() == slowest_round(t_in, t_have, hops)
    assert acc.rtt.summary_ns() == summary_ns(t_have - t_in)
    loop = np.where(np.arange(n) < 2000 // batch * batch, t_have - t_in, t_back - t_send)
    assert acc.loop.summary_ns() == summary_ns(loop)


def test_sums_by_value_are_exact_integers_whatever_the_chunks():
    """Sums past 2**53 (where float64 would round) stay exact: a chunk whose rows times its largest
    value reach 2**53 is summed in integers; the chunks' cut changes nothing."""
    rng = np.random.default_rng(9)
    keys = rng.integers(0, 5, 1000)
    col = rng.integers(2**52, 2**52 + 1000, 1000)
    whole, parts = SumsByValue(1), SumsByValue(1)
    whole.add(keys, _bounded([col]))
    for i in range(1000):
        parts.add(keys[i:i + 1], _bounded([col[i:i + 1]]))
    want = [sum(int(c) for c, k in zip(col, keys) if k == v) for v in range(5)]
    assert whole.sums[0].tolist() == parts.sums[0].tolist() == want
    assert whole.values.tolist() == list(range(5)) and whole.counts.tolist() == np.bincount(keys).tolist()
    with pytest.raises(OverflowError):
        whole.add(keys, _bounded([col * 4]))
    with pytest.raises(ValueError):
        SumsByValue(2).add(keys, _bounded([col]))


def test_a_short_wide_first_chunk_is_kept_as_distinct_values_and_gives_the_same_percentiles():
    """A mesh flow's 10,000 rounds over 10^6 ps: distinct values, not 10^6 counts (whose cumulative sum
    each percentile read paid); a chunk as long as its range stays one count per value."""
    from twin.stats import SMALL_SPAN, Counts
    rng = np.random.default_rng(3)
    short = rng.integers(0, 1_000_000, 10_000)
    c = Counts.of(short)
    assert c.dense is None and c.values is not None and len(c.values) <= len(short)
    q = [0, 1, 50, 90, 99, 99.9, 100]
    assert (c.percentile(q) == np.percentile(short, q, method="inverted_cdf")).all()
    assert c.total == int(short.sum())
    long = rng.integers(0, 4 * SMALL_SPAN, 100_000)
    d = Counts.of(long)
    assert d.dense is not None and (d.percentile(q) == np.percentile(long, q, method="inverted_cdf")).all()
    d.add(short)  # dense counts stay dense as they grow
    assert d.dense is not None and d.percentile(50) == np.percentile(np.concatenate([long, short]), 50,
                                                                     method="inverted_cdf")
