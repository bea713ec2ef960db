"""Closed loop with several requests in flight: both engines agree, and throughput follows."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from twin.calibration.params import load_params
from twin.devices.generator import TrafficParams
from twin.engine.direct import run_direct
from twin.engine.event import run_event
from twin.scenario.compile import flow_spec
from twin.studies.sweep import Axis, run_sweep

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("consumer, external", [("epyc7282", False), ("mi210", True), ("v80", False)])
@pytest.mark.parametrize("in_flight", [2, 5])
def test_engines_agree_with_requests_in_flight(consumer, external, in_flight):
    p = load_params(ROOT / "calibrations" / "fitted" / "card_path.yaml")
    tr = TrafficParams(mode="closed_loop", rounds=2000, frame_bytes=64, in_flight=in_flight)
    spec = flow_spec(p, consumer, tr, 9, external_control=external)
    a, b = run_direct(spec), run_event(spec)
    for f in ("t_send", "t_in", "t_have", "t_back"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert b.mismatches == 0
    # the first in_flight requests leave together; later ones each wait for a reply
    assert (a.t_send[:in_flight] == 0).all() and (a.t_send[in_flight:] >= a.t_back[:-in_flight]).all()


def test_in_flight_only_for_closed_loop():
    with pytest.raises(ValueError, match="in_flight"):
        TrafficParams(mode="open_loop", period_ps=4000, in_flight=2)


def test_sweep_over_requests_in_flight_raises_throughput_not_the_cpu_round_trip(tmp_path):
    """The faults scenario without its dropped frame (a resend needs one request in flight: refused)."""
    import yaml
    from scenario_mutations import base_doc
    doc = base_doc(ROOT / "scenarios" / "faults_epyc7282.yaml")
    del doc["faults"]["drop_frame"]
    sc = tmp_path / "faults_no_drop.yaml"
    sc.write_text(yaml.safe_dump(doc, sort_keys=False))
    rows = run_sweep(sc, [Axis("traffic.in_flight", (1, 2))], rounds=3000, workers=1)
    one, two = rows[0], rows[1]
    assert (one["traffic.in_flight"], two["traffic.in_flight"]) == (1, 2)
    assert abs(two["p50_ns"] - one["p50_ns"]) <= 8  # the core keeps up with two: same round trip within 2 buckets
