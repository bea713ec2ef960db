"""The duty-cycle (idle) model and the service modes (twin.devices.service): both engines compute
them identically; the cost follows its formula; service terms per byte and per function add up."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twin.calibration.params import ConsumerModel, IdleModel
from twin.devices import LinkCardParams, TrafficParams, cpu_core, gpu_persistent_kernel
from twin.devices.generator import Gaps
from twin.devices.service import IdleCost, ServiceMode, idle_ps, mode_draws
from twin.engine import LoopSpec, run_direct, run_event
from twin.engine.direct import check_same
from twin.links import PcieLink

NS = 1000
US = 1000 * NS


def _spec(consumer, traffic, jitter_ps=0, seed=5):
    return LoopSpec("epyc", LinkCardParams(), consumer, traffic, PcieLink(latency_ps=900 * NS),
                    PcieLink(latency_ps=900 * NS), jitter_ps, seed=seed)


idle_costs = st.one_of(
    st.builds(IdleCost, st.just("cache refill"), st.just("saturating"), st.integers(0, 2 * US),
              st.integers(1, 2000 * US)),
    st.lists(st.tuples(st.integers(1, 10**9), st.integers(0, 3 * US)), min_size=1, max_size=4,
             unique_by=lambda p: p[0]).map(
        lambda pts: IdleCost("clock exit", "table", points=tuple(sorted(pts)))))
modes = st.lists(st.builds(lambda w, off, wid, long: ServiceMode(w, off, wid, long, None if long is None else 2 * wid),
                           st.floats(0.01, 0.3), st.integers(0, 5 * US), st.integers(0, US),
                           st.one_of(st.none(), st.integers(0, 5 * US))), max_size=2)
mixes = st.one_of(st.just(()), st.tuples(st.integers(1, 50 * US), st.integers(60 * US, 2000 * US)).map(
    lambda g: ((g[0], 0.0), (g[1], 1.0))))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(idle=st.lists(idle_costs, max_size=2), modes=modes, mix=mixes, kind=st.sampled_from(["cpu", "gpu"]),
       enc=st.sampled_from(["classic", "per_piece"]), mode=st.sampled_from(["closed_loop", "open_loop"]),
       gaps=st.one_of(st.none(), st.builds(Gaps, st.just("exponential"), st.integers(1 * US, 200 * US))),
       jitter=st.sampled_from([0, 20_000]), seed=st.integers(0, 2**31))
def test_engines_agree_with_idle_cost_and_modes(idle, modes, mix, kind, enc, mode, gaps, jitter, seed):
    c = cpu_core(37 * NS, 80 * NS, 30 * NS, enc) if kind == "cpu" else gpu_persistent_kernel(600 * NS, 100 * NS,
                                                                                              enc, 800 * NS)
    c = replace(c, idle=tuple(idle), modes=tuple(modes), idle_mix=mix)
    # open loop: a fixed 20 us period (no backlog); closed loop: back to back or random gaps
    gaps = None if mode == "open_loop" else gaps
    tr = TrafficParams(mode=mode, rounds=150, frame_bytes=64, period_ps=20 * US if mode == "open_loop" else 0,
                       gaps=gaps)
    spec = _spec(c, tr, jitter, seed)
    e, d = run_event(spec), run_direct(spec)
    assert e.mismatches == 0
    check_same(d, e, len(d.t_in))   # every timestamp and hop identical


def test_a_rounds_service_draw_does_not_depend_on_the_run_length():
    """The event model checks the first rounds of a long direct run (twin run's auto mode): the
    first k rounds of a run of n must draw what a run of k draws, for any k <= n."""
    modes = (ServiceMode(0.3, 1 * US, 500 * NS), ServiceMode(0.2, 3 * US, 2 * US))
    short, long = mode_draws(modes, 11, "loop.consumer.modes", 40), mode_draws(modes, 11, "loop.consumer.modes", 5000)
    assert np.array_equal(short, long[:40])
    c = replace(gpu_persistent_kernel(600 * NS, 100 * NS, "classic", 800 * NS), modes=modes)
    tr = TrafficParams(mode="closed_loop", rounds=400, frame_bytes=64)
    long_run = run_direct(_spec(c, tr))
    check_same(long_run, run_event(_spec(c, replace(tr, rounds=60))), 60)


def test_saturating_cost_follows_its_formula():
    # c(gap) = cost * (1 - exp(-gap / tau)); a 1 ms gap against tau 100 us: 1 - e^-10 of the cost
    m = IdleCost("cache refill", cost_ps=400 * NS, tau_ps=100 * US)
    assert m.at(0) == 0
    assert m.at(100 * US) == pytest.approx(400 * NS * (1 - math.exp(-1)))
    assert idle_ps((m, m), 1000 * US) == round(2 * 400 * NS * (1 - math.exp(-10)))


def test_table_interpolates_in_log_gap_and_is_flat_beyond_its_ends():
    m = IdleCost("clock exit", "table", points=((1 * US, 0), (1000 * US, 300 * NS)))
    assert m.at(0) == 0 and m.at(1 * US) == 0
    assert m.at(int(math.sqrt(1 * US * 1000 * US))) == pytest.approx(150 * NS)  # halfway in log(gap)
    assert m.at(10**12) == 300 * NS


def test_idle_cost_adds_to_each_round_by_its_gap():
    # closed loop 1 ms apart, no jitter: each round's service grows by c(its idle gap), where the gap
    # runs from the thread free (reply published) to the poll that takes the next request
    base = cpu_core(37 * NS, 80 * NS, 30 * NS, "per_piece")
    cost = IdleCost("cache refill", cost_ps=400 * NS, tau_ps=100 * US)
    tr = TrafficParams(rounds=300, frame_bytes=64, gap_ps=1000 * US)
    a = run_direct(_spec(base, tr))
    b = run_direct(_spec(replace(base, idle=(cost,)), tr))
    h = b.hops
    free_prev = np.concatenate([[0], h.publish[:-1]])
    gap = h.start - base.poll_cost_ps - free_prev
    want = np.array([cost.at(int(g)) for g in gap])
    assert (gap[1:] > 999 * US).all()
    assert np.array_equal(h.reply - h.start - (a.hops.reply - a.hops.start), np.rint(want).astype(np.int64))
    # at the card boundary: the request enters on a 4 ns card edge, the core takes it at a 37 ns poll
    # and the card reads the reply at a 4 ns reply poll, so the round trip moves by the cost within
    # two card cycles and one poll period
    assert np.abs((b.rtt_ps - a.rtt_ps)[1:] - want[1:]).max() < 8 * NS + base.poll_period_ps


def test_mode_draws_have_their_weights_and_ranges():
    m = (ServiceMode(0.2, 1000, 500), ServiceMode(0.05, 20_000))
    x = mode_draws(m, 3, "s", 200_000)
    assert np.array_equal(x, mode_draws(m, 3, "s", 200_000))        # same seed, same draws
    first = (x >= 1000) & (x < 1500)
    assert abs(first.mean() - 0.2) < 0.005 and abs((x == 20_000).mean() - 0.05) < 0.003
    assert abs((x == 0).mean() - 0.75) < 0.005
    with pytest.raises(ValueError):
        mode_draws((ServiceMode(0.6, 1), ServiceMode(0.5, 2)), 0, "s", 10)
    # weights summing to 1: a quantile table, every round in one of its blocks
    q = mode_draws((ServiceMode(0.5, 1000, 1000), ServiceMode(0.5, 5000, 1000)), 4, "s", 100_000)
    assert ((q >= 1000) & (q < 2000) | (q >= 5000) & (q < 6000)).all() and abs((q < 3000).mean() - 0.5) < 0.01


def test_service_terms_per_byte_and_function_add_to_the_service_time():
    c = ConsumerModel(kind="cpu", host="h", path="host_memory", encoding="classic", poll_period_ns=10,
                      poll_cost_ns=100, service_ns=600, service_per_frame_byte_ns=1.0,
                      service_per_reply_byte_ns=0.25, function_ns={"sum32": -50.0})
    assert c.params(None, 256, 0).service_ps == (600 + 256 + 64) * NS      # echo: reply = frame
    from twin.runtime.functions import lookup
    assert c.params(None, 256, lookup("sum32").id).service_ps == (600 + 256 + 0.25 * 4 - 50) * NS
    assert c.params(None, 64, 0).idle == ()                                  # nothing varies per round


def test_idle_model_keys_are_checked():
    with pytest.raises(ValueError, match="either cost_ns and tau_ns, or table"):
        IdleModel(mechanism="x", cost_ns=1.0)
    with pytest.raises(ValueError, match="strictly increasing"):
        IdleModel(mechanism="x", table=[(10.0, 1.0), (5.0, 2.0)])
    assert IdleModel(mechanism="x", table=[(1.0, 0.0), (1e6, 3.0)]).cost().points == ((1000, 0), (10**9, 3000))


def test_modes_move_to_their_long_idle_blocks_by_the_idle_mix():
    from twin.devices.service import mix_fraction, mode_extra_ps
    m = (ServiceMode(1.0, 100 * NS, 100 * NS, long_offset_ps=300 * NS, long_width_ps=200 * NS),)
    mix = ((10 * US, 0.0), (1000 * US, 1.0))
    assert mix_fraction(mix, 5 * US) == 0 and mix_fraction(mix, 5000 * US) == 1
    assert mix_fraction(mix, 100 * US) == pytest.approx(0.5)                 # halfway in log(gap)
    assert mode_extra_ps(m, (0, 0.5), 0.0) == 150 * NS                       # short gap: its own block
    assert mode_extra_ps(m, (0, 0.5), 1.0) == 400 * NS                       # long gap: the long block
    assert mode_extra_ps(m, (0, 0.5), 0.5) == round(200 * NS + 0.5 * 150 * NS)  # halfway: quantile by quantile


def test_an_fpga_consumer_refuses_an_idle_cost_showing_the_files_value():
    """FPGA logic answers in whole clock cycles: a cpu/gpu idle cost on it is refused, and the error
    shows the value as the file wrote it (a mapping), not the model's Python repr."""
    from pydantic import ValidationError
    with pytest.raises(ValidationError) as e:
        ConsumerModel(kind="fpga", host="h", path="p2p", encoding="classic", clock_ns=4, answer_ns=28,
                      idle=[{"mechanism": "x", "cost_ns": 5000, "tau_ns": 100}])
    located = e.value.errors()[0]["ctx"]["error"]  # the Located the loader turns into one line
    assert located.path == ("idle",)
    assert located.value == [{"mechanism": "x", "cost_ns": 5000.0, "tau_ns": 100.0}]
