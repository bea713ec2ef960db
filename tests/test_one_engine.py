"""The one engine's promises, checked from first principles: queueing with several requests in
flight in twin decode (Little's law), faults counted per flow in a mesh, random gaps over RoCE,
twin decode on the RoCE path, and the latency budget adding up to the round trip in every study."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.cli import main
from twin.engine.hops import stage_times

ROOT = Path(__file__).resolve().parent.parent
CAL = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
ROCE = str(ROOT / "calibrations" / "fitted" / "backline_roce.yaml")
HOSTING = str(ROOT / "calibrations" / "hosting.yaml")


def write(tmp_path: Path, name: str, doc: dict) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def decode_runs(tmp_path: Path, in_flight: int, calibration: str = CAL, device: str = "epyc7282"):
    from twin.qec.load import load_decode
    from twin.studies.decode import run_decode_study
    doc = {"name": f"dec{in_flight}", "calibration": calibration, "hosting": HOSTING, "seed": 9,
           "traffic": {"mode": "closed_loop", "in_flight": in_flight},
           "decode": {"code": "rep", "distance": 3, "p": 0.001, "shots": 3000, "decoder": "lookup",
                      "cost": {"how": "model", "fixed": "2 us"}, "placements": [{"device": device, "mode": "inline"}]}}
    ld = load_decode(write(tmp_path, f"dec{in_flight}", doc))
    study = run_decode_study(ld, engine="event")
    return study.runs[0], study.document["placements"][0]


def test_decode_in_flight_queues_as_littles_law_says(tmp_path):
    one, s1 = decode_runs(tmp_path, 1)
    eight, s8 = decode_runs(tmp_path, 8)
    # one in flight: nothing waits; eight: the consumer is the bottleneck, so requests queue behind it
    assert s8["rtt"]["p50_ns"] > 4 * s1["rtt"]["p50_ns"]
    for run, k in ((one, 1), (eight, 8)):
        r = run.result
        span = int(r.t_back.max() - r.t_send.min())
        throughput = len(r.t_send) / span                  # requests per ps
        mean_loop = float((r.t_back - r.t_send).mean())    # ps in the system
        assert abs(throughput * mean_loop - k) / k < 0.01  # Little's law: L = lambda W
    # the consumer serves back to back with eight in flight: the service (2 us) sets the rate
    r = eight.result
    gaps = np.diff(np.sort(r.t_have))[10:]
    assert np.median(gaps) >= 2_000_000
    assert s8["identical_corrections"] == s1["identical_corrections"] == 3000 and s8["card_mismatches"] == 0


def test_a_mesh_fault_is_counted_per_flow(tmp_path, capsys):
    doc = yaml.safe_load((ROOT / "scenarios" / "mesh_fanout_by_function.yaml").read_text())
    doc["calibration"] = CAL
    doc["faults"] = {"corrupt_piece": {"rounds": [3, 7]}, "drop_frame": {"rounds": [5]}}
    for f in doc["flows"]:
        f["traffic"] = {"mode": "closed_loop"}
    out = tmp_path / "out"
    assert main(["run", str(write(tmp_path, "mesh_faults", doc)), "--rounds", "50", "--out", str(out), "--quiet",
                 "--no-plot"]) == 0
    res = json.loads((out / "results.json").read_text())
    for f in res["flows"]:
        assert f["faults"]["injected"] == {"corrupt_piece": 2, "drop_frame": 1, "stall": 0}
        assert f["faults"]["detected"]["mismatches"] == f["mismatches"] == 2
        assert f["faults"]["detected"]["resent_frames"] == 1


def test_random_gaps_over_roce(tmp_path):
    from twin.scenario import load_scenario
    from twin.studies.run import run_study
    doc = yaml.safe_load((ROOT / "scenarios" / "backline_roce.yaml").read_text())
    doc["calibration"] = ROCE
    doc.pop("measured")
    doc["traffic"] = {"mode": "open_loop", "clock": "card", "clock_period": "5 ns",
                      "gaps": {"distribution": "exponential", "mean": "8 us"}}
    study = run_study(load_scenario(write(tmp_path, "roce_gaps", doc)), rounds=4000, verify_rounds=4000)
    for r in study.runs:
        sends = np.diff(r.result.t_send)
        assert r.summary["engine"] == "direct+event" and r.summary["mismatches"] == 0
        assert abs(sends.mean() - 8e6) < 0.06 * 8e6          # exponential gaps of mean 8 us
        assert sends.std() > 0.8 * sends.mean()               # and spread like them (std = mean)
        assert (sends % 5000 == 0).all()                      # on the FPGA's 5 ns clock
        st = stage_times(r.result.t_in, r.result.t_have, r.result.hops)
        assert np.array_equal(sum(st.values()), r.result.rtt_ps)


def test_decode_on_the_roce_path(tmp_path):
    run, s = decode_runs(tmp_path, 1, ROCE, "threadripper_core")
    assert s["card_mismatches"] == 0 and s["identical_corrections"] == 3000
    r = run.result
    assert np.array_equal(sum(stage_times(r.t_in, r.t_have, r.hops).values()), r.rtt_ps)


def test_budget_adds_up_in_a_mesh():
    from twin.scenario import load_scenario
    from twin.studies.mesh import run_mesh
    loaded = load_scenario(ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml")
    res = run_mesh(loaded.scenario, loaded.params, rounds=2000)
    for ft in res.flows:
        st = stage_times(ft.t_in, ft.t_have, ft.hops)
        assert np.array_equal(sum(st.values()), ft.rtt_ps)
        assert (st["queue"] > 0).any()  # two controllers share one GPU thread: some requests wait


def test_decode_with_a_qblox_cluster_in_control(tmp_path):
    """The cluster's Q1ASM programs time the requests (one round every period_ns of the programs,
    on its own clock); the correction's trip is reported from the round's last acquisition."""
    from twin.qec.load import load_decode
    from twin.studies.decode import run_decode_study
    q = yaml.safe_load((ROOT / "scenarios" / "qblox_cluster.yaml").read_text())["qblox"]
    doc = {"name": "dq", "calibration": CAL, "hosting": HOSTING, "seed": 2, "control": "aurora", "qblox": q,
           "decode": {"code": "rep", "distance": 3, "p": 0.001, "shots": 1500, "decoder": "lookup",
                      "placements": [{"device": "epyc7282"}]}}
    study = run_decode_study(load_decode(write(tmp_path, "dq", doc)))
    out = study.document
    r = study.runs[0].result
    period_ps = out["traffic"]["period_ns"] * 1000
    assert abs(np.median(np.diff(r.t_send)) - period_ps) <= 4000   # one request per program round
    pl = out["placements"][0]
    extra = q["result_latency_ns"] + q["trigger_network_ns"]
    assert pl["publish_to_reply"]["p50_ns"] == pytest.approx(pl["loop"]["p50_ns"] + extra)
    doc["control"] = "on_card"
    from twin.config import ConfigError
    with pytest.raises(ConfigError) as e:
        load_decode(write(tmp_path, "dq_bad", doc))
    assert e.value.key == "control"


@pytest.mark.parametrize("traffic, key", [
    ({"mode": "open_loop", "gaps": {"distribution": "exponential", "mean": "1e9 s"}}, "traffic.gaps.mean"),
    ({"mode": "open_loop", "period": "1e6 s"}, "traffic.period"),
    ({"mode": "closed_loop", "gap": "900 s"}, "traffic.gap"),
    ({"mode": "open_loop", "gaps": {"distribution": "uniform", "min": "0 s", "max": "900 s"}}, "traffic.gaps"),
    ({"mode": "open_loop", "gaps": {"distribution": "fixed", "value": "500 s"}}, "traffic.gaps"),
])
def test_spacings_past_the_simulated_horizon_are_refused(tmp_path, capsys, traffic, key):
    """Integer picoseconds in int64 end after ~106 days: a duration over 1,000 s, or rounds x spacing
    past 2**62 ps, is one line naming the key (it was an overflow traceback)."""
    doc = yaml.safe_load((ROOT / "scenarios" / "card_path_64b.yaml").read_text())
    doc.update(calibration=CAL, measured=None, traffic=traffic, rounds=100_000)
    rc = main(["run", str(write(tmp_path, "far", doc)), "--quiet", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and f": {key}" in err[0], err


def test_a_scenario_that_is_not_utf8_is_one_line(tmp_path, capsys):
    p = tmp_path / "latin.yaml"
    p.write_bytes(b"name: x\n# caf\xe9\n")
    assert main(["run", str(p), "--quiet", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"twin: error: {p}: line 2: byte 0xe9 is not UTF-8 text (scenario, calibration, measurement and "
                   "gaps files are UTF-8)"]


@pytest.mark.parametrize("key, value", [("function", "invert"), ("traffic", {"mode": "closed_loop", "in_flight": 8}),
                                        ("measured", str(ROOT / "calibrations/measured/card_path_64b.yaml"))])
def test_a_mesh_refuses_the_top_level_keys_it_takes_per_flow(tmp_path, capsys, key, value):
    doc = yaml.safe_load((ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml").read_text())
    doc.update(calibration=CAL, **{key: value})
    p = write(tmp_path, "mesh_key", doc)
    assert main(["run", str(p), "--rounds", "100", "--quiet", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"twin: error: {p}: {key}: ") and "not for a mesh" in err[0], err


def test_decode_cost_with_only_rtl_placements_is_refused(tmp_path, capsys):
    doc = {"name": "rtl_cost", "calibration": CAL, "hosting": HOSTING,
           "decode": {"code": "rep", "distance": 3, "p": 0.001, "shots": 100, "decoder": "lookup",
                      "cost": {"how": "host_timed", "scale": 2.0},
                      "placements": [{"device": "v80", "model": "rtl"}]}}
    p = write(tmp_path, "rtl_cost", doc)
    assert main(["decode", str(p), "--quiet", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "decode.cost" in err[0] and "no placement uses it" in err[0], err


def test_verify_rounds_with_the_direct_engine_is_refused_and_traffic_is_named_in_results(tmp_path, capsys):
    assert main(["run", "--engine", "direct", "--verify-rounds", "10", "--quiet", "--out", str(tmp_path / "d")]) == 2
    assert "--verify-rounds 10" in capsys.readouterr().err
    doc = yaml.safe_load((ROOT / "scenarios" / "card_path_64b.yaml").read_text())
    doc.update(calibration=CAL, measured=None, traffic={"mode": "closed_loop", "in_flight": 4,
                                                        "gaps": {"distribution": "fixed", "value": "1 us"}})
    out = tmp_path / "r"
    assert main(["run", str(write(tmp_path, "tr", doc)), "--rounds", "300", "--quiet", "--no-plot", "--out",
                 str(out)]) == 0
    t = json.loads((out / "results.json").read_text())["traffic"]
    assert t["in_flight"] == 4 and t["gaps"] == {"distribution": "fixed", "value": "1 us"}


def test_an_rtl_placement_refuses_a_session_decoder_it_has_no_verilog_for(tmp_path):
    """The V80's Verilog has cores for echo, decode_rep3 and decode_steane7: a surface-code table is a
    session decoder with no core, refused before any loop runs (it used to crash reshaping no replies)."""
    from twin.config import ConfigError
    from twin.qec.load import load_decode
    from twin.studies.decode import run_decode_study
    doc = {"name": "rtl_surface", "calibration": CAL, "hosting": HOSTING, "seed": 1,
           "decode": {"code": "surface", "distance": 3, "rounds": 1, "p": 0.001, "shots": 20, "decoder": "lookup",
                      "placements": [{"device": "v80", "mode": "inline", "model": "rtl"}]}}
    with pytest.raises(ConfigError) as e:
        run_decode_study(load_decode(write(tmp_path, "rtl_surface", doc)))
    assert e.value.key == "decode.placements[0].model" and "no Verilog core" in str(e.value)
