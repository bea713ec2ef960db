"""The compiled core (twin/engine/c/core.c) held equal to the references: the compiled event core to
the simpy engine (identical per-round timestamps, hops, reply checks, reply digest and every
statistic) on random topologies (flows sharing consumers, cards and lanes), traffic (closed loop
in flight 1..8, gaps, random gaps, open loop at a period or random gaps, few slots: a backlog),
wires (PCIe, Aurora, RoCE) and seeds; the compiled direct path to the Python recurrence. A run the
core does not compute (faults, another model, a spec field it does not know) stays on the
reference, with the reason.

Examples per property: ``TWIN_PROPERTY_EXAMPLES`` (default 25: a few seconds).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import twin.engine.direct as D
import twin.engine.event as E
from twin.calibration.params import load_params, loop_spec
from twin.calibration.roce import load_roce_params, roce_loop_spec
from twin.devices.consumer import ConsumerParams
from twin.devices.generator import Gaps, TrafficParams
from twin.engine import compiled, features, native
from twin.engine.topology import Flow, FlowWorkload, Topology
from twin.faults import FaultPlan

ROOT = Path(__file__).resolve().parent.parent
CARD = load_params(ROOT / "calibrations" / "fitted" / "card_path.yaml")
ROCE = load_roce_params(ROOT / "calibrations" / "fitted" / "backline_roce.yaml")
EXAMPLES = int(os.environ.get("TWIN_PROPERTY_EXAMPLES", "25"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HOPS = ("issue", "land", "seen", "start", "reply", "publish", "rland")

pytestmark = pytest.mark.skipif(not E.COMPILED, reason="compiled core turned off")


def _core_or_skip():
    try:
        native.core()
    except native.CoreUnavailable as e:
        pytest.skip(str(e))


def on_both(topo: Topology):
    """(simpy reference results, compiled core results) of ``topo``; the core must accept it."""
    assert compiled.refusal(topo) is None, compiled.refusal(topo)
    E.COMPILED = False
    try:
        ref = E.run_topology(topo)
    finally:
        E.COMPILED = True
    return ref, compiled.run(topo)


def assert_identical(ref, got):
    """Every flow: the same timestamps, hops, checks and statistics (slot waits compared as arrays)."""
    assert len(ref) == len(got)
    for a, b in zip(ref, got):
        for f in ("t_send", "t_in", "t_have", "t_back", "ok"):
            x, y = getattr(a, f), getattr(b, f)
            assert np.array_equal(x, y), f"flow {a.name}: {f} differs first at round {int(np.argmax(x != y)) + 1}"
        for f in HOPS:
            x, y = getattr(a.hops, f), getattr(b.hops, f)
            assert np.array_equal(x, y), f"flow {a.name}: hop {f} differs first at round {int(np.argmax(x != y)) + 1}"
        sa, sb = dict(a.stats), dict(b.stats)
        assert np.array_equal(sa.pop("slot_wait_ps"), sb.pop("slot_wait_ps"))
        assert sa == sb
        assert a.ok.all() and sa["mismatches"] == 0  # the echo, no faults: every reply checked and right


@st.composite
def traffics(draw, rounds: int):
    mode = draw(st.sampled_from(["closed_loop", "open_loop"]))
    clock = draw(st.sampled_from(["card", "independent"]))
    ppm = draw(st.sampled_from([0.0, 37.5, -120.0])) if clock == "independent" else 0.0
    frame = draw(st.sampled_from([8, 16, 64, 100, 180]))
    random = draw(st.booleans())
    gaps = None
    if random:
        kind = draw(st.sampled_from(["uniform", "exponential", "fixed"]))
        a = draw(st.integers(0, 3_000_000))
        gaps = Gaps(kind, a, a + draw(st.integers(0, 2_000_000)))
    if mode == "closed_loop":
        return TrafficParams("closed_loop", rounds, frame, clock=clock, ppm=ppm, gaps=gaps,
                             gap_ps=0 if gaps else draw(st.sampled_from([0, 4000, 1_000_000])),
                             in_flight=draw(st.integers(1, 8)))
    period = 0 if gaps else 4000 * draw(st.integers(100, 1500))  # 0.4 .. 6 us: from a backlog to an idle loop
    return TrafficParams("open_loop", rounds, frame, period_ps=period, clock=clock, ppm=ppm, gaps=gaps)


@st.composite
def topologies(draw):
    """1..4 flows over 1..3 consumer nodes, 1..2 cards and 1..2 generators (shared threads, bridges,
    lanes and oscillators), each with its own device, traffic, slots, encoding and wire."""
    seed = draw(st.integers(0, 2**32))
    roce = draw(st.booleans())
    params = ROCE if roce else CARD
    devices = sorted(params.consumers)
    k = draw(st.integers(1, 4))
    consumers = draw(st.integers(1, 3))
    cards = draw(st.integers(1, 2))
    node_device = [draw(st.sampled_from(devices)) for _ in range(consumers)]  # one device per consumer node
    flows = []
    for i in range(k):
        tr = draw(traffics(draw(st.integers(3, 40))))
        node = draw(st.integers(0, consumers - 1))
        dev = node_device[node]
        slots = draw(st.sampled_from([1, 2, 4, 16]))
        enc = draw(st.sampled_from([None, "classic", "per_piece"]))
        if roce:
            spec = roce_loop_spec(params, dev, tr, seed, slots, enc, slot_bytes=64,
                                  switch_hops=draw(st.integers(0, 2)))
        else:
            spec = loop_spec(params, dev, tr, seed, slots, enc, external_control=draw(st.booleans()))
        spec = replace(spec, name=f"flow{i}")
        flows.append(Flow(spec, f"gen{draw(st.integers(0, 1))}", f"card{draw(st.integers(0, cards - 1))}",
                          f"node{node}"))
    return Topology("prop", seed, tuple(flows))


@PROPERTY
@given(topologies())
def test_compiled_event_core_equals_the_simpy_reference(topo):
    _core_or_skip()
    assert_identical(*on_both(topo))


@PROPERTY
@given(st.integers(0, 2**32), st.sampled_from(sorted(CARD.consumers)), st.integers(1, 8), st.booleans(),
       st.sampled_from([None, "classic", "per_piece"]), st.booleans())
def test_compiled_direct_path_equals_the_python_recurrence(seed, device, in_flight, aurora, enc, gaps):
    _core_or_skip()
    tr = TrafficParams("closed_loop", 300, 64, in_flight=in_flight, gaps=Gaps("exponential", 800_000) if gaps else None)
    spec = loop_spec(CARD, device, tr, seed, 16, enc, external_control=aurora)
    D.COMPILED = False
    try:
        ref = D.run_direct(spec)
    except D.DirectNotApplicable:  # a slot wait: the compiled path must refuse it too
        D.COMPILED = True
        with pytest.raises(D.DirectNotApplicable, match="waits for a free slot"):
            D.run_direct(spec)
        return
    finally:
        D.COMPILED = True
    got = D.run_direct(spec)
    D.check_same(ref, got, len(ref.t_in))
    for f in HOPS:
        assert np.array_equal(getattr(ref.hops, f), getattr(got.hops, f)), f
    assert ref.stats == got.stats



@PROPERTY
@given(st.integers(0, 2**32), traffics(300), st.booleans(), st.sampled_from([None, "classic", "per_piece"]))
def test_compiled_direct_path_keeps_a_column_as_another_only_where_they_are_equal(seed, tr, aurora, enc):
    """Open and closed loop on the card's clock or an independent one (phase, drift), with and without
    Aurora, either encoding: the compiled path equals the Python recurrence, and it keeps t_in as
    t_send, t_back as t_have and publish as reply (one array) exactly where every round has them
    equal; its columns are read-only."""
    _core_or_skip()
    spec = loop_spec(CARD, "epyc7282", tr, seed, 64, enc, external_control=aurora)
    D.COMPILED = False
    try:
        ref = D.run_direct(spec)
    except D.DirectNotApplicable:
        return  # a slot wait: the test above holds the compiled path to the same refusal
    finally:
        D.COMPILED = True
    got = D.run_direct(spec)
    D.check_same(ref, got, len(ref.t_in))  # every column, the reference computing each on its own
    assert not any(a.flags.writeable for a in (got.t_send, got.t_in, got.t_have, got.t_back, got.hops.publish))
    assert np.shares_memory(got.t_back, got.t_have) == (not aurora)
    card_edges = not aurora and tr.clock == "card"
    assert np.shares_memory(got.t_in, got.t_send) >= card_edges  # the card's clock: t_in is t_send
    assert not (aurora and np.shares_memory(got.t_in, got.t_send))
    per_piece = (enc or CARD.consumers["epyc7282"].encoding) == "per_piece"
    assert np.shares_memory(got.hops.publish, got.hops.reply) == per_piece

def test_a_mesh_of_many_flows_on_shared_links_is_identical():
    """16 flows, 4 controllers, 2 cards, 4 consumers: every lane, bridge and thread shared."""
    _core_or_skip()
    flows = []
    for i in range(16):
        tr = TrafficParams("open_loop", 60, 64, gaps=Gaps("exponential", 1_500_000), clock="independent", ppm=20.0 * i)
        spec = replace(loop_spec(CARD, sorted(CARD.consumers)[i % 4], tr, 7, 4, external_control=i % 2 == 0),
                       name=f"flow{i}")
        card, node = f"card{i % 2}", f"node{i % 4}"
        flows.append(Flow(spec, f"ctrl{i % 4}", card, node,
                          lanes={"request": f"mesh.{card}->{node}", "reply": f"mesh.{node}->{card}"}))
    assert_identical(*on_both(Topology("mesh16", 7, tuple(flows))))


def _spec(**kw):
    return loop_spec(CARD, "epyc7282", TrafficParams("closed_loop", 50, 64), 3, **kw)


@dataclasses.dataclass(frozen=True)
class IdleCostConsumer(ConsumerParams):
    """A consumer with a behaviour the compiled core was not written for (a stand-in for a device
    feature added later)."""

    idle_ps: int = 0


def test_a_spec_field_the_core_does_not_know_keeps_the_run_on_the_python_engines():
    c = _spec().consumer
    spec = replace(_spec(), consumer=IdleCostConsumer(**{f.name: getattr(c, f.name) for f in dataclasses.fields(c)},
                                                      idle_ps=5000))
    assert features.uncomputed(spec) == ["consumer.idle_ps = 5000"]
    assert "consumer.idle_ps = 5000 is not computed by the compiled core" in compiled.refusal(Topology.single(spec))
    at_default = replace(spec, consumer=replace(spec.consumer, idle_ps=0))
    assert features.uncomputed(at_default) == [] and compiled.refusal(Topology.single(at_default)) is None


@pytest.mark.parametrize("kw, why", [
    (dict(faults=FaultPlan(corrupt_rounds=frozenset({3}))), "fault injection"),
    (dict(model="code"), "the consumer is model code"),
    (dict(function=1), "the function is not the echo"),
])
def test_what_the_core_does_not_compute_is_refused_with_its_reason(kw, why):
    assert why in compiled.refusal(Topology.single(_spec(**kw)))


def test_a_workload_in_python_is_refused():
    wl = FlowWorkload(payloads=lambda seq: bytes(64))
    assert "workload" in compiled.refusal(Topology.single(_spec(), wl))


def test_turned_off_the_reference_runs_and_says_why(monkeypatch, caplog):
    monkeypatch.setenv("TWIN_COMPILED", "0")
    with pytest.raises(native.CoreUnavailable, match="TWIN_COMPILED=0"):
        native.core()
    caplog.set_level("INFO", logger="twin.engine")
    res = E.run_event(_spec())
    assert res.ok.all() and "TWIN_COMPILED=0" in caplog.text
