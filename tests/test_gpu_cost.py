"""A GPU decoder's service comes from its persistent-kernel measurement (twin.qec.gpu_cost), the
runtime's general path applies to a Python user function only, and a GPU placement of a decoder
nothing measured there is refused at load with one line naming the device."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.config import ConfigError
from twin.qec import gpu_cost as G
from twin.qec.codes import memory_circuit
from twin.qec.cost import CostError, CostModel
from twin.qec.decoders.registry import build
from twin.qec.load import load_decode

ROOT = Path(__file__).resolve().parent.parent
CAL = ROOT / "calibrations"


def _file(tmp_path: Path, name: str, **kw) -> Path:
    doc = {"schema": G.SCHEMA, "measured_at": kw.pop("at", "2026-12-04T20:00Z"),
           "machine": {"gpu": "NVIDIA H200 (test)"}, "protocol": "test", **kw}
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc))
    return p


def test_the_shipped_file_gives_the_lookup_decoders_their_measured_excess_over_the_echo():
    s = G.load_services()
    doc = yaml.safe_load((CAL / "measured" / "gpu_decoders" / "h200_lookup_kernel.yaml").read_text())
    for fn in ("decode_rep3", "decode_steane7"):
        if s[fn].file.endswith("h200_lookup_kernel.yaml"):
            assert s[fn].over_echo_ns == doc["over_echo_service_p50_ns"][fn]
    rep3 = build("lookup", memory_circuit("rep", 3, 1, 1e-3), name="anything")
    assert G.kernel_function(rep3) == "decode_rep3"  # by what it computes, not by its name
    cm = CostModel()
    ps = cm.per_request_ps(rep3, "gpu", np.zeros((3, 1), np.uint8), np.array([0, 1, 2]), device="mi210")
    assert (ps == round(s["decode_rep3"].over_echo_ns * 1000)).all()
    assert "persistent kernel" in cm.describe()["gpu_kernel"]["line"] and "mi210" in cm.describe()["gpu_kernel"]["line"]


def test_a_service_from_a_measurement_file_with_a_per_event_slope(tmp_path):
    _file(tmp_path, "a.yaml", over_echo_p50_ns={"decode_uf_surface3": 900.0, "decode_rep3": 700.0},
          over_echo_p99_ns={"decode_uf_surface3": 1500.0}, per_event_ns={"decode_uf_surface3": 40.0},
          events_mean={"decode_uf_surface3": 1.5})
    _file(tmp_path, "b.yaml", at="2026-12-01T00:00Z", over_echo_service_p50_ns={"decode_rep3": 1.0})  # older
    s = G.load_services(tmp_path)
    uf = s["decode_uf_surface3"]
    assert np.allclose(uf.per_request_ns(np.array([0, 1, 4])), [840.0, 880.0, 1000.0])
    assert s["decode_rep3"].over_echo_ns == 700.0  # the latest file's
    assert "p99 1500 ns" in uf.describe("h200_gpu")


def test_a_bad_measurement_file_is_refused_naming_its_key(tmp_path):
    _file(tmp_path, "bad.yaml", over_echo_p50_ns={"decode_rep3": "fast"})
    with pytest.raises(ConfigError) as e:
        G.load_services(tmp_path)
    assert "over_echo_p50_ns" in e.value.key


def test_a_decoder_with_no_kernel_measurement_has_no_gpu_service():
    c = memory_circuit("surface", 3, 2, 1e-3)
    dec = build("lookup", c, name="surface_lookup")
    assert G.kernel_function(dec) is None
    why = G.refusal(dec)
    assert why and "nothing measured it there" in why and "\n" not in why
    with pytest.raises(CostError, match="persistent kernel"):
        CostModel().per_request_ps(dec, "gpu", np.zeros((1, 2), np.uint8), np.array([0]))
    # a fixed time is the scenario's own statement: served
    assert CostModel(how="model", fixed_ns=100.0).per_request_ps(dec, "gpu", np.zeros((1, 2), np.uint8),
                                                                 np.array([0]))[0] == 100_000


def test_the_union_find_decoder_of_the_bundled_graph_is_the_kernel_function():
    dec = build("union_find", memory_circuit("surface", 3, 3, 1e-3), name="x")
    assert G.kernel_function(dec) == "decode_uf_surface3"
    assert G.kernel_function(build("union_find", memory_circuit("surface", 3, 3, 2e-3), name="y")) is None


def _scenario(tmp_path: Path, decode: dict) -> Path:
    doc = yaml.safe_load((ROOT / "scenarios" / "decode_rep3.yaml").read_text())
    doc["calibration"] = str(CAL / "fitted" / "card_path.yaml")
    doc["hosting"] = str(CAL / "hosting.yaml")
    doc["decode"] = {**doc["decode"], **decode}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_a_gpu_placement_of_an_unmeasured_decoder_is_refused_at_load(tmp_path):
    p = _scenario(tmp_path, {"code": "surface", "distance": 3, "rounds": 2, "placements": [
        {"device": "epyc7282", "mode": "inline"}, {"device": "mi210", "mode": "inline"}],
        "cost": {"how": "model"}})
    with pytest.raises(ConfigError) as e:
        load_decode(p)
    assert (e.value.key, e.value.value) == ("decode.placements[1].device", "mi210")
    assert "persistent kernel" in e.value.problem and "\n" not in e.value.problem
    ok = _scenario(tmp_path, {"code": "surface", "distance": 3, "rounds": 2, "placements": [
        {"device": "mi210", "mode": "inline"}], "cost": {"how": "model", "fixed": "200 ns"}})
    assert load_decode(ok).decoder.kind == "lookup"


def test_the_general_path_is_a_python_user_functions_only():
    """The same rep-3 stream on the MI210: the lookup decoder's round trip holds its measured kernel
    time and no general path; a user function's holds the general path (calibrations/hosting.yaml)."""
    from dataclasses import replace

    from twin.calibration.params import load_params
    from twin.qec.decoders.function import FunctionDecoder
    from twin.qec.hosting import load_hosting
    from twin.qec.lookup import decode_payload, standard_table
    from twin.qec.loop import run_decode
    from twin.qec.workload import sample
    params = load_params(CAL / "fitted" / "card_path.yaml")
    hosting, _ = load_hosting(CAL / "hosting.yaml")
    w = sample("rep", 3, 1, 1e-3, 200, seed=1)
    t = standard_table("rep3")
    lk = build("lookup", w.circuit, name="rep3")
    fn = FunctionDecoder(lambda b: decode_payload(t, b), 4, 1, name="user_rep3")
    fixed = CostModel(how="model", fixed_ns=0.0)
    a = run_decode(params, "mi210", w, lk, hosting=hosting, cost=fixed, seed=2)
    b = run_decode(params, "mi210", w, fn, hosting=hosting, cost=fixed, seed=2)
    c = run_decode(params, "mi210", w, lk, hosting=replace(hosting, general_path_ps=0), cost=fixed, seed=2)
    rtt = [np.median(r.result.t_have - r.result.t_in) for r in (a, b, c)]
    assert rtt[0] == rtt[2]  # the lookup: no general path, whatever the hosting file says
    period = round(params.consumers["mi210"].poll_period_ns * 1000)  # the loop re-phases to the GPU's polls
    assert hosting.general_path_ps <= rtt[1] - rtt[0] <= hosting.general_path_ps + period


def test_a_negative_fitted_slope_is_taken_as_no_slope(tmp_path):
    _file(tmp_path, "a.yaml", over_echo_p50_ns={"decode_rep3": 650.0}, per_event_ns={"decode_rep3": -0.6},
          events_mean={"decode_rep3": 0.02})
    s = G.load_services(tmp_path)["decode_rep3"]
    assert s.per_event_ns == 0.0
    assert np.allclose(s.per_request_ns(np.array([0, 1, 5])), 650.0)


def test_the_slope_is_anchored_at_the_median_requests_events(tmp_path):
    """The p50 over the echo is the median request's cost: a file with events_p50 anchors the slope
    there, not at the mean (the shipped union-find: 0 events at the median, 0.30 on average)."""
    uf3 = "decode_uf_surface3"
    _file(tmp_path, "a.yaml", over_echo_p50_ns={uf3: 7000.0}, per_event_ns={uf3: 8000.0}, events_mean={uf3: 0.3},
          events_p50={uf3: 0.0})
    uf = G.load_services(tmp_path)[uf3]
    assert np.allclose(uf.per_request_ns(np.array([0, 1])), [7000.0, 15000.0])
    shipped = G.load_services()["decode_uf_surface3"]
    assert shipped.events_at == 0.0 and shipped.per_request_ns(np.array([0]))[0] == shipped.over_echo_ns
