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
