"""The hand-off (a two-stage consumer, twin/devices/handoff.py) in the compiled event core
(twin/engine/c/core.c), held to the simpy reference: on random topologies whose flows hand their
requests to a second device (stage kinds and timings, C2C or PCIe wires with or without jitter,
traffic, requests in flight, slots, encodings, functions, flows sharing a receiving node's thread),
every timestamp, hop, hand-off instant (``hops.inner``), reply byte (the digest) and counter is the
reference's; and ``nvqlink_gb200``'s hand-off loop runs in the core, not on simpy.
Examples per property: ``TWIN_PROPERTY_EXAMPLES`` (default 100; .ci/run runs 2,000).
"""
from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_compiled_core import _core_or_skip, assert_identical, on_both, topologies
from test_core_service_extra import assert_inner_identical

from twin.devices import cpu_core, gpu_persistent_kernel
from twin.devices.handoff import INNER, HandoffSpec
from twin.engine import compiled
from twin.engine.topology import Topology
from twin.faults import FaultPlan
from twin.links import PcieLink
from twin.links.c2c import NvlinkC2C
from twin.scenario import load_scenario
from twin.scenario.compile import scenario_topology

ROOT = Path(__file__).resolve().parent.parent
NS = 1000
EXAMPLES = int(os.environ.get("TWIN_PROPERTY_EXAMPLES", "100"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

stages = st.one_of(
    st.builds(lambda p, c, s, chk, enc: cpu_core(p, c, s, enc, piece_check_ps=chk),
              st.integers(5 * NS, 400 * NS), st.integers(0, 900 * NS), st.integers(0, 2000 * NS),
              st.integers(0, 3 * NS), st.sampled_from(["classic", "per_piece"])),
    st.builds(lambda p, s, f, chk: gpu_persistent_kernel(p, s, "per_piece", f, chk),
              st.integers(50 * NS, 1000 * NS), st.integers(0, 2000 * NS), st.integers(0, 900 * NS),
              st.integers(0, 3 * NS)))
wires = st.one_of(
    st.builds(lambda rate, lat, miss: NvlinkC2C(rate, latency_ps=lat, coherence_miss_ps=miss),
              st.sampled_from([64e9, 450e9]), st.integers(0, 2000 * NS), st.integers(0, 1000 * NS)),
    st.builds(lambda lat: PcieLink(latency_ps=lat), st.integers(100 * NS, 2000 * NS)))


@st.composite
def handoffs(draw, name: str):
    """A second stage for flow ``name``: a random device, wire and jitter, its phase drawn or fixed."""
    stage = draw(stages)
    if draw(st.booleans()):
        stage = replace(stage, poll_phase_ps=draw(st.integers(0, stage.poll_period_ps - 1)))
    wire = draw(wires)
    return HandoffSpec(f"{name}_server", stage, wire, draw(st.sampled_from([0, 30 * NS])),
                       "c2c" if isinstance(wire, NvlinkC2C) else "pcie")


@pytest.mark.property
@PROPERTY
@given(topologies(), st.data())
def test_event_core_computes_the_handoff_as_the_simpy_reference(topo, data):
    _core_or_skip()
    flows = []
    for fl in topo.flows:
        if data.draw(st.booleans()):  # a one-stage flow may share the node's thread with a two-stage one
            stage1 = replace(fl.spec.consumer, preprocess_ps_per_measurement=data.draw(st.integers(0, 200)))
            fl = replace(fl, spec=replace(fl.spec, consumer=stage1, handoff=data.draw(handoffs(fl.spec.name))))
        flows.append(fl)
    topo = replace(topo, flows=tuple(flows))
    ref, got = on_both(topo)
    assert_identical(ref, got)
    assert_inner_identical(ref, got)
    for fl, res in zip(topo.flows, got):
        if fl.spec.handoff is not None:
            assert tuple(res.hops.inner) == INNER and (res.hops.inner["h_land"] > 0).all()


def _gpu_to_grace(rounds: int) -> Topology:
    loaded = load_scenario(ROOT / "scenarios" / "nvqlink_gb200.yaml")
    topo = scenario_topology(loaded.scenario, loaded.params, rounds=rounds)
    flows = [fl for fl in topo.flows if fl.spec.handoff is not None]
    assert [fl.spec.handoff.to for fl in flows] == ["grace_core"]  # gpu_to_grace: the GPU hands off to Grace
    return Topology(flows[0].spec.name, topo.seed, tuple(flows))


def test_nvqlink_gb200_s_handoff_runs_in_the_core_as_on_simpy(caplog):
    _core_or_skip()
    topo = _gpu_to_grace(3000)
    assert compiled.refusal(topo) is None
    ref, got = on_both(topo)
    assert_identical(ref, got)
    assert_inner_identical(ref, got)
    assert got[0].mismatches == 0 and got[0].stats["shared"]["lanes"]["gb200_gpu_to_grace->grace_core"]["writes"] \
        == 3000 * 1  # one burst of pieces a round (per-piece)
    from twin.engine.event import run_topology
    with caplog.at_level(logging.INFO, logger="twin.engine"):
        run_topology(topo)
    assert not [r for r in caplog.records if "simpy reference" in r.getMessage()]


def test_what_the_reference_refuses_on_a_handoff_the_core_leaves_to_it():
    """Faults on a two-stage flow (the reference raises: they act on one-stage consumers) and a hand-off
    lane that is another flow's lane too stay on the reference, each with its reason."""
    topo = _gpu_to_grace(10)
    fl = topo.flows[0]
    faulty = replace(fl, spec=replace(fl.spec, faults=FaultPlan(corrupt_rounds=frozenset({2}))))
    assert "one-stage consumers" in compiled.refusal(replace(topo, flows=(faulty,)))
    other = replace(fl, spec=replace(fl.spec, name="other"), card=fl.spec.name, consumer="grace_core")
    assert "another lane too" in compiled.refusal(replace(topo, flows=(fl, other)))
