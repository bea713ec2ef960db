""":func:`twin.stats.distinct` is :func:`numpy.unique` of integer keys, whichever way it counts."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.stats import LOOKUP_SPAN, distinct


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-3 * LOOKUP_SPAN, 3 * LOOKUP_SPAN), max_size=60), st.integers(-2**40, 2**40),
       st.sampled_from((1, 7, 1000, 4 * LOOKUP_SPAN)))
def test_distinct_is_unique(values, shift, scale):
    a = np.array(values, np.int64) // max(1, 4 * LOOKUP_SPAN // scale) + shift
    got, want = distinct(a), np.unique(a)
    assert got.dtype == np.int64 and np.array_equal(got, want)


def test_distinct_of_a_round_trips_many_keys():
    a = np.random.default_rng(3).integers(2_000_000, 2_900_000, 200_000) // 4 * 4
    assert np.array_equal(distinct(a), np.unique(a))
