"""A flow's statistics counted by the compiled core (twin/engine/c/stats.c through
twin.engine.flow_counts.add_columns) equal numpy's, entry for entry, and numpy's inverted-CDF
percentiles of the same integers, however the rounds are cut into batches."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import twin.stats as stats
from twin.commands import main
from twin.engine import flow_counts
from twin.engine.hops import FlowStats, Hops
from twin.engine.native import CoreUnavailable, core
from twin.scenario import load_scenario
from twin.scenario.compile import compile_scenario
from twin.stats import Counts, SumsByValue
from twin.studies.run import stream_one

try:
    core()
except CoreUnavailable as e:  # (the numpy path is then the only one: nothing to compare)
    pytest.skip(f"no compiled core: {e}", allow_module_level=True)

EXAMPLES = int(os.environ.get("TWIN_PROPERTY_EXAMPLES", "100"))
QS = [0.0, 0.1, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 100.0]


def _numpy(monkeypatch, on: bool) -> None:
    """add_columns on numpy's path (``on``) or the compiled core's."""
    monkeypatch.setattr(flow_counts, "_core", (lambda: None) if on else core)


def _columns(scale: int, k: int, n: int, rng: np.random.Generator, wide: bool):
    """k + 1 instant columns of n rounds (nondecreasing unless ``wide``: stages >= 0)."""
    step = rng.integers(0, scale, (k, n))
    if wide:
        step = step - scale // 3
    return [np.ascontiguousarray(x) for x in np.vstack([np.zeros((1, n), np.int64), np.cumsum(step, axis=0)])]


def _accumulate(inst, batch: int, dense_span: int, numpy_path: bool):
    """Counts of every stage and of the whole (first to last instant), the stages' sums by the whole,
    the bounds and argmax of every batch."""
    with pytest.MonkeyPatch.context() as mp:
        _numpy(mp, numpy_path)
        mp.setattr(stats, "DENSE_SPAN", dense_span)
        return _batches(inst, batch)


def _batches(inst, batch: int):
    k = len(inst) - 1
    counts = [Counts() for _ in range(k + 1)]
    by = SumsByValue(k)
    seen = []
    for i in range(0, len(inst[0]), batch):
        cut = [c[i:i + batch] for c in inst]
        pairs = [(cut[j], cut[j + 1]) for j in range(k)] + [(cut[0], cut[k])]
        seen.append(flow_counts.add_columns(pairs, [*counts[:k - 1], None, counts[k]], by, key=k, arg=k))
    return counts, by, seen


@pytest.mark.property
@settings(max_examples=EXAMPLES, deadline=None)
@given(hs.integers(1, 6), hs.integers(1, 1500), hs.integers(1, 700), hs.sampled_from([2, 40, 5000, 10**7]),
       hs.booleans(), hs.sampled_from([64, 1 << 20]), hs.integers(0, 2**32 - 1))
def test_counts_from_the_core_equal_numpys_and_the_inverted_cdf(k, n, batch, scale, wide, span, seed):
    """Random integer stages (few values with many ties, or wide ranges; negative ones too), any batch,
    dense counts or sparse ones (a DENSE_SPAN of 64): every percentile is numpy's inverted CDF of the
    values joined, and the core's counts, sums, bounds and argmax are numpy's path's, exactly."""
    inst = _columns(scale, k, n, np.random.default_rng(seed), wide)
    got = _accumulate(inst, batch, span, False)
    want = _accumulate(inst, batch, span, True)
    for j, (c, w) in enumerate(zip(got[0], want[0])):
        if j == k - 1:  # the last stage: summed, not counted
            assert c.n == w.n == 0
            continue
        d = inst[j + 1] - inst[j] if j < k else inst[k] - inst[0]
        assert c.n == w.n == n and c.total == w.total == int(d.sum())
        assert (c.percentile(QS) == np.percentile(d, QS, method="inverted_cdf")).all()
        assert (w.percentile(QS) == c.percentile(QS)).all()
    g, w = got[1], want[1]
    assert g.values.tolist() == w.values.tolist() and g.counts.tolist() == w.counts.tolist()
    assert g.sums.tolist() == w.sums.tolist()
    assert got[2] == want[2]


@pytest.mark.parametrize("batch", [4_096, 131_071])
def test_a_streamed_flow_s_statistics_equal_numpys(batch, monkeypatch):
    """A real flow (the default scenario's mi210: a stage wider than DENSE_SPAN goes sparse) streamed
    through the core and through numpy: the same budget, round trip, slowest round."""
    loaded = load_scenario("scenarios/card_path_64b.yaml")
    spec = compile_scenario(loaded, 300_000, loaded.scenario.seed).flows[2].spec
    out = []
    for numpy_path in (False, True):
        _numpy(monkeypatch, numpy_path)
        _, acc, _ = stream_one(spec, batch)
        out.append((acc.budget(), acc.rtt.summary_ns(), acc.slowest_round(), acc.n))
    assert out[0] == out[1] and out[0][3] == 300_000


def test_constant_and_repeated_columns_are_not_read(monkeypatch):
    """A stage of one instant twice (the direct engine's slot_wait) counts m zeros; its sums stay 0."""
    t = np.arange(10, dtype=np.int64) * 7
    u = t + np.arange(10, dtype=np.int64) % 3
    c0, c1 = Counts(), Counts()
    by = SumsByValue(2)
    lo, hi, at = flow_counts.add_columns([(t, t), (t, u), (t, u)], [c0, c1, None], by, key=2, arg=1)
    assert (lo, hi, at) == ([0, 0, 0], [0, 2, 2], 2)
    assert c0.n == 10 and c0.percentile(100) == 0 and by.sums[0].tolist() == [0, 0, 0]
    assert by.sums[1].tolist() == [0, 3, 6] and by.counts.tolist() == [4, 3, 3]


def test_flowstats_with_no_rounds_counts_nothing():
    acc = FlowStats()
    z = np.zeros(0, np.int64)
    acc.add(0, z, z, z, z, Hops(z, z, z, z, z, z, z, ready=z))
    assert acc.n == 0 and acc.budget() == [] and acc.slowest_round() is None


def test_a_1e5_round_run_writes_today_s_results(tmp_path, monkeypatch):
    """The default scenario's five loops, 1e5 rounds streamed (--engine direct --no-rounds): results.json
    byte for byte as numpy's column-by-column path writes it (the counting before the core did it)."""
    def run(name: str, numpy_path: bool) -> bytes:
        _numpy(monkeypatch, numpy_path)
        out = tmp_path / name
        assert main(["run", "scenarios/card_path_64b.yaml", "--engine", "direct", "--rounds", "1e5", "--no-rounds",
                     "--no-plot", "--quiet", "--out", str(out)]) == 0
        return (out / "results.json").read_bytes()
    assert run("core", False) == run("numpy", True)


def test_a_batch_within_the_counts_is_counted_in_one_pass():
    """After a first batch has sized the counts and keys, a batch within them goes through the one-pass
    blocks whole; one beyond them stops at the first block that is not (then two passes, same counts)."""
    rng = np.random.default_rng(1)
    t = np.cumsum(rng.integers(0, 50, 5000))
    u = t + rng.integers(0, 100, 5000)
    counts, by = [Counts(), Counts()], SumsByValue(1)
    flow_counts.add_columns([(t, u), (t, u)], counts, by, key=1, arg=1)
    v = t + rng.integers(10, 90, 5000)
    v[4500] = u[0] + 10**6  # a value past the counts in the fifth block
    dense = [c if c.values is None else None for c in counts]
    done, _, _, _ = flow_counts._one_pass(core(), [(t[:4000], v[:4000])] * 2, dense, by, 1, 1)
    assert done == 4000 and counts[0].n == 9000
    done, lo, hi, at = flow_counts._one_pass(core(), [(t[4000:], v[4000:])] * 2, dense, by, 1, 1)
    assert done == 0 and counts[0].n == 9000
    flow_counts.add_columns([(t[4000:], v[4000:])] * 2, counts, by, key=1, arg=1)
    whole = np.concatenate([u - t, v - t])
    assert counts[1].n == 10_000 and (counts[1].percentile(QS) == np.percentile(whole, QS, method="inverted_cdf")).all()
    assert by.sums[0].tolist() == [int(whole[whole == x].sum()) for x in by.values]
