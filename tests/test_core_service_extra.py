"""A consumer's service beyond its constant body in the compiled core (twin/engine/c/core.c, packed by
twin/engine/service_core.py): idle costs (saturating and tables), service modes (with long-idle
blocks), ``idle_mix`` and host-runtime stages, held to the references -- the compiled event core to
the simpy engine on random topologies (flows sharing serving threads), the compiled direct path to
the Python recurrence and to the simpy engine -- timestamp for timestamp, hop for hop, the host
runtime's inner instants included; and the core really runs them (no fallback).
Examples per property: ``TWIN_PROPERTY_EXAMPLES`` (default 100; .ci/run runs 2,000).
"""
from __future__ import annotations

import math
import os
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_compiled_core import _core_or_skip, assert_identical, on_both, topologies

import twin.engine.direct as D
import twin.engine.event as E
from twin.devices import LinkCardParams, TrafficParams, cpu_core, gpu_persistent_kernel
from twin.devices.generator import Gaps
from twin.devices.host_runtime import HostRuntime
from twin.devices.service import IdleCost, ServiceMode
from twin.engine import LoopSpec, compiled, features, native
from twin.engine.direct import check_same
from twin.engine.topology import Flow, Topology
from twin.links import PcieLink

NS = 1000
US = 1000 * NS
EXAMPLES = int(os.environ.get("TWIN_PROPERTY_EXAMPLES", "100"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
pytestmark = pytest.mark.property

idle_costs = st.one_of(
    st.builds(IdleCost, st.just("cache refill"), st.just("saturating"), st.integers(0, 3 * US),
              st.integers(1, 2000 * US)),
    st.lists(st.tuples(st.integers(1, 10**9), st.integers(0, 3 * US)), min_size=1, max_size=4,
             unique_by=lambda p: p[0]).map(lambda pts: IdleCost("clock exit", "table", points=tuple(sorted(pts)))))
service_modes = st.lists(
    st.builds(lambda w, off, wid, long, lw: ServiceMode(w, off, wid, long, None if long is None else lw),
              st.floats(0.01, 0.45), st.integers(0, 5 * US), st.integers(0, 2 * US),
              st.one_of(st.none(), st.integers(0, 5 * US)), st.integers(0, 3 * US)), max_size=2)
whole_modes = st.lists(st.builds(ServiceMode, st.just(0.25), st.integers(0, 4 * US), st.integers(0, US)),
                       min_size=4, max_size=4)  # a quantile table: the weights are the whole distribution
mixes = st.one_of(st.just(()), st.lists(st.tuples(st.integers(1, 3000 * US), st.floats(0, 1)), min_size=1, max_size=3,
                                        unique_by=lambda p: p[0]).map(lambda p: tuple(sorted(p))))


@st.composite
def host_runtimes(draw):
    """None half the time, else a synthetic measurement: 1..3 points of 1..30 requests each."""
    if not draw(st.booleans()):
        return None
    k = draw(st.integers(1, 3))
    idle = tuple(sorted(draw(st.sets(st.integers(1, 10**9), min_size=k, max_size=k))))
    rows = [draw(st.integers(1, 30)) for _ in range(k)]
    rng = np.random.default_rng(draw(st.integers(0, 2**32)))

    def col(hi):
        return tuple(rng.integers(0, hi, r) for r in rows)
    return HostRuntime("synthetic.yaml", draw(st.sampled_from(["spin", "block"])), idle, col(400 * NS),
                       col(40 * US), col(3 * US))


@st.composite
def services(draw, consumer):
    """``consumer`` with a random idle cost, service modes, idle_mix and host runtime (any may be empty)."""
    modes = draw(st.one_of(service_modes, whole_modes))
    return replace(consumer, idle=tuple(draw(st.lists(idle_costs, max_size=2))), modes=tuple(modes),
                   idle_mix=draw(mixes), host_runtime=draw(host_runtimes()))


def assert_inner_identical(ref, got):
    for a, b in zip(ref, got):
        ia, ib = a.hops.inner or {}, b.hops.inner or {}
        assert set(ia) == set(ib)
        for k in ia:
            x, y = np.asarray(ia[k]), np.asarray(ib[k])
            assert np.array_equal(x, y), f"flow {a.name}: {k} differs first at round {int(np.argmax(x != y)) + 1}"


@PROPERTY
@given(topologies(), st.data())
def test_event_core_computes_the_service_as_the_simpy_reference(topo, data):
    _core_or_skip()
    flows = tuple(replace(fl, spec=replace(fl.spec, consumer=data.draw(services(fl.spec.consumer))))
                  for fl in topo.flows)
    topo = replace(topo, flows=flows)
    ref, got = on_both(topo)
    assert_identical(ref, got)
    assert_inner_identical(ref, got)


def _spec(consumer, traffic, jitter_ps=0, seed=5):
    return LoopSpec("epyc", LinkCardParams(), consumer, traffic, PcieLink(latency_ps=900 * NS),
                    PcieLink(latency_ps=900 * NS), jitter_ps, seed=seed)


def _python(run, spec):
    """``run(spec)`` on the Python engines (the direct recurrence, the simpy reference)."""
    D.COMPILED = E.COMPILED = False
    try:
        return run(spec)
    finally:
        D.COMPILED = E.COMPILED = True


@PROPERTY
@given(data=st.data(), kind=st.sampled_from(["cpu", "gpu"]), enc=st.sampled_from(["classic", "per_piece"]),
       mode=st.sampled_from(["closed_loop", "open_loop"]),
       gaps=st.one_of(st.none(), st.builds(Gaps, st.just("exponential"), st.integers(1 * US, 500 * US))),
       jitter=st.sampled_from([0, 20_000]), seed=st.integers(0, 2**31), rounds=st.integers(1, 120))
def test_direct_core_computes_the_service_as_the_python_recurrence(data, kind, enc, mode, gaps, jitter, seed,
                                                                    rounds):
    _core_or_skip()
    c = cpu_core(37 * NS, 80 * NS, 30 * NS, enc) if kind == "cpu" else gpu_persistent_kernel(600 * NS, 100 * NS,
                                                                                              enc, 800 * NS)
    c = data.draw(services(c))
    tr = TrafficParams(mode=mode, rounds=rounds, frame_bytes=64, period_ps=60 * US if mode == "open_loop" else 0,
                       gaps=None if mode == "open_loop" else gaps)
    spec = _spec(c, tr, jitter, seed)
    assert features.refusal(spec, direct=True) is None and features.refusal(spec) is None
    fast = D.run_direct(spec)
    check_same(fast, _python(D.run_direct, spec), rounds)
    check_same(fast, _python(E.run_event, spec), rounds)


def test_a_saturating_idle_cost_is_its_formula_in_every_round():
    """From first principles: a closed loop waiting 200 us between rounds, a 2 us saturating cost with
    tau 50 us: every round but the first (idle since 0) takes cost * (1 - exp(-gap / tau)) more, the
    gap being the thread's free instant to the poll that takes the request."""
    _core_or_skip()
    cost, tau = 2 * US, 50 * US
    base = cpu_core(37 * NS, 80 * NS, 30 * NS, "per_piece")
    c = replace(base, idle=(IdleCost("cache refill", "saturating", cost, tau),))
    tr = TrafficParams(rounds=50, frame_bytes=64, gap_ps=200 * US)
    r = D.run_direct(_spec(c, tr))
    body = c.pre_service_ps(__import__("twin.exchange.encoding", fromlist=["x"]).get_encoding("per_piece"), 64) \
        + c.service_ps
    polls = r.hops.start - c.poll_cost_ps          # the poll that took each request
    free = r.hops.reply                            # per-piece: the thread polls again at its reply
    gap = polls[1:] - free[:-1]
    want = np.array([round(cost * (1 - math.exp(-g / tau))) for g in gap.tolist()])
    assert (gap > 100 * US).all()
    assert np.abs((r.hops.reply - r.hops.start - body)[1:] - want).max() <= 1  # exp vs expm1: within 1 ps


def test_modes_give_their_offsets_in_the_core():
    """One mode of weight 1 (the whole distribution), offset 3 us, no width: every round 3 us longer."""
    _core_or_skip()
    base = gpu_persistent_kernel(600 * NS, 100 * NS, "classic", 800 * NS)
    tr = TrafficParams(rounds=40, frame_bytes=64, gap_ps=10 * US)
    a = D.run_direct(_spec(base, tr))
    b = D.run_direct(_spec(replace(base, modes=(ServiceMode(1.0, 3 * US, 0),)), tr))
    assert set((b.hops.reply - b.hops.start - (a.hops.reply - a.hops.start)).tolist()) == {3 * US}


def test_the_core_runs_every_service_term_without_falling_back():
    _core_or_skip()
    hr = HostRuntime("synthetic.yaml", "block", (3 * US,), (np.array([100 * NS]),), (np.array([2 * US]),),
                     (np.array([500 * NS]),))
    c = replace(cpu_core(37 * NS, 80 * NS, 30 * NS, "classic"), idle=(IdleCost("x", "saturating", US, 5 * US),),
                modes=(ServiceMode(0.3, US, US, 4 * US, US),), idle_mix=((US, 0.0), (100 * US, 1.0)), host_runtime=hr,
                preprocess_ps_per_measurement=7)
    spec = _spec(c, TrafficParams(rounds=30, frame_bytes=64, gap_ps=20 * US))
    assert features.refusal(spec) is None and features.refusal(spec, direct=True) is None
    topo = Topology("one", 5, (Flow(spec, "gen", "card", "node"),))
    assert compiled.refusal(topo) is None
    native.core()
    got = compiled.run(topo)[0]
    assert set(np.asarray(got.hops.inner["hr_awake"]) - np.asarray(got.hops.inner["hr_enqueued"])) == {2 * US}
    assert D.run_direct(spec).hops.inner is not None


def test_a_streamed_run_draws_its_modes_batch_by_batch_and_gets_the_same_rounds():
    """A streamed run (constant memory) draws the modes' picks per batch: the same rounds as a run kept whole."""
    _core_or_skip()
    c = replace(gpu_persistent_kernel(600 * NS, 100 * NS, "per_piece", 800 * NS),
                idle=(IdleCost("x", "saturating", US, 30 * US),), modes=(ServiceMode(0.3, US, 2 * US, 5 * US, US),),
                idle_mix=((5 * US, 0.0), (200 * US, 1.0)))
    spec = _spec(c, TrafficParams(rounds=5_000, frame_bytes=64, gaps=Gaps("exponential", 40 * US)), 20_000, 11)
    whole = D.run_direct(spec)
    got: dict[str, list] = {}
    D.run_direct(spec, chunk_rounds=777, sink=lambda i, cols: [got.setdefault(k, []).append(v.copy())
                                                               for k, v in cols.items()])
    assert np.array_equal(np.concatenate(got["t_back"]), whole.t_back)
    for f in ("start", "reply", "publish"):
        assert np.array_equal(np.concatenate(got[f]), getattr(whole.hops, f))
    assert len(set((whole.hops.reply - whole.hops.start).tolist())) > 100  # the service varied
    hr = HostRuntime("synthetic.yaml", "spin", (3 * US,), (np.array([NS]),), (np.array([NS]),), (np.array([NS]),))
    with pytest.raises(D.DirectNotApplicable, match="host runtime"):
        D.run_direct(replace(spec, consumer=replace(c, host_runtime=hr)), sink=lambda i, cols: None)
