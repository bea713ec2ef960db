"""Fault injection: each fault is detected and counted, and the run goes on."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.commands import main
from twin.config import ConfigError
from twin.devices import LinkCardParams, TrafficParams, cpu_core, gpu_persistent_kernel
from twin.engine import LoopSpec, run_event
from twin.engine.direct import DirectNotApplicable, run_direct
from twin.faults import FaultPlan
from twin.links import PcieLink
from twin.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def spec(faults: FaultPlan, encoding="per_piece", rounds=400, kind="cpu") -> LoopSpec:
    c = (cpu_core(20_000, 100_000, 20_000, encoding) if kind == "cpu"
         else gpu_persistent_kernel(500_000, 100_000, encoding, 1_000_000))
    return LoopSpec("c", LinkCardParams(), c, TrafficParams(rounds=rounds), PcieLink(latency_ps=900_000),
                    PcieLink(latency_ps=900_000), 10_000, seed=4, faults=faults)


@pytest.mark.parametrize("encoding", ["classic", "per_piece"])
@pytest.mark.parametrize("path", ["request", "reply"])
def test_corrupted_piece_is_a_counted_mismatch_on_exactly_that_round(encoding, path):
    res = run_event(spec(FaultPlan(corrupt_rounds=frozenset({7, 150}), corrupt_path=path), encoding))
    assert len(res.ok) == 400 and (res.t_have > 0).all()           # every round completed
    assert list(np.flatnonzero(~res.ok) + 1) == [7, 150]
    f = res.stats["faults"]
    assert f["injected"]["corrupt_piece"] == 2 and f["detected"]["mismatches"] == 2
    # the twin sees both memories: a corrupted request sat in the consumer's queue as it was not sent
    assert f["detected"]["mismatches_from_corrupted_requests"] == (2 if path == "request" else 0)


def test_corruption_leaves_timing_alone():
    clean = run_event(spec(FaultPlan()))
    bad = run_event(spec(FaultPlan(corrupt_rounds=frozenset({3}))))
    assert np.array_equal(clean.t_have, bad.t_have)


def test_dropped_frame_is_resent_after_the_timeout():
    timeout = 50_000_000  # 50 us
    clean = run_event(spec(FaultPlan()))
    res = run_event(spec(FaultPlan(drop_rounds=frozenset({10}), timeout_ps=timeout)))
    f = res.stats["faults"]
    assert f["injected"]["drop_frame"] == 1 and f["detected"]["resent_frames"] == 1
    assert res.ok.all() and len(res.ok) == 400
    # round 10 reaches the card one timeout after it was sent; the card-boundary round trip is
    # unaffected, the generator-to-generator loop is longer by at least the timeout
    assert res.t_in[9] - res.t_send[9] == timeout
    assert res.loop_ps[9] >= timeout + clean.rtt_ps.min()


def test_consumer_stall_delays_the_rounds_in_it_and_counts_a_timeout():
    start, dur, timeout = 100_000_000, 200_000_000, 50_000_000   # stall at 100 us for 200 us
    res = run_event(spec(FaultPlan(stalls=((start, start + dur),), timeout_ps=timeout)))
    assert res.ok.all() and len(res.ok) == 400
    assert res.stats["faults"]["detected"]["reply_timeouts"] == 1
    # the request that landed during the stall is answered only after it: its round trip spans
    # the rest of the stall
    worst = int(np.argmax(res.rtt_ps))
    assert res.t_in[worst] < start + dur < res.t_have[worst]
    assert (res.rtt_ps > 10_000_000).sum() == 1                  # exactly one round caught in it


def test_gpu_poller_resumes_on_its_grid_after_a_stall():
    start, dur = 50_000_000, 80_000_000
    res = run_event(spec(FaultPlan(stalls=((start, start + dur),), timeout_ps=10_000_000), kind="gpu", rounds=100))
    assert res.ok.all()


def test_direct_engine_refuses_faults():
    with pytest.raises(DirectNotApplicable):
        run_direct(spec(FaultPlan(corrupt_rounds=frozenset({1}))))


def test_fault_plan_validation():
    with pytest.raises(ValueError):
        FaultPlan(corrupt_path="sideways")
    with pytest.raises(ValueError):
        FaultPlan(drop_rounds=frozenset({1}))                    # no timeout
    with pytest.raises(ValueError):
        FaultPlan(stalls=((5, 5),), timeout_ps=1)


def test_fault_scenario_counts_land_in_results_json(tmp_path, capsys):
    out = tmp_path / "o"
    rc = main(["run", str(ROOT / "scenarios" / "faults_epyc7282.yaml"), "--quiet", "--no-plot", "--no-csv",
               "--out", str(out)])
    assert rc == 0, capsys.readouterr()
    (c,) = json.loads((out / "results.json").read_text())["consumers"]
    assert c["engine"] == "event" and c["replies_checked"] == 20_000
    assert c["faults"] == {"injected": {"corrupt_piece": 2, "drop_frame": 1, "stall": 1},
                           "detected": {"mismatches": 2, "resent_frames": 1, "reply_timeouts": 1,
                                        "mismatches_from_corrupted_requests": 2, "mismatch_rounds": [100, 5000]}}
    assert c["mismatches"] == 2
    # the stalled round and the dropped frame's round miss the 3 us deadline
    assert c["deadline_ns"] == 3000 and c["deadline_misses"] >= 2


def test_a_stall_after_the_last_round_is_not_counted():
    late = 10_000_000_000  # 10 ms: 400 rounds of about 2 us end long before
    res = run_event(spec(FaultPlan(stalls=((late, late + 1_000_000),), timeout_ps=1_000_000)))
    assert res.stats["faults"]["injected"]["stall"] == 0
    assert res.stats["faults"]["not_reached"] == {"stall": [0]}  # said, not silently dropped


def test_faults_past_a_shorter_run_are_named_and_warned(tmp_path, capsys):
    """--rounds 3000 on the 20,000-round faults scenario: its corrupted round 5000 and its stall at
    20 ms (3,000 rounds of a >= 1.7 us round trip end by about 7 ms) are not reached: results.json
    names their keys and values and the run warns, naming the file; round 100 and the dropped
    frame of round 3000 are injected."""
    src = ROOT / "scenarios" / "faults_epyc7282.yaml"
    rc = main(["run", str(src), "--rounds", "3000", "--no-plot", "--no-rounds", "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert rc == 0, out
    (c,) = json.loads((tmp_path / "o" / "results.json").read_text())["consumers"]
    assert c["faults"]["injected"] == {"corrupt_piece": 1, "drop_frame": 1, "stall": 0}
    assert c["faults"]["not_reached"] == [{"key": "faults.corrupt_piece.rounds[1]", "value": 5000},
                                          {"key": "faults.stall[0].at", "value": "20 ms"}]
    said = " ".join(out.split())
    lines = out.splitlines()  # each warning whole on one line, also when the output is not a terminal
    for key, value in (("faults.corrupt_piece.rounds[1]", "5000"), ("faults.stall[0].at", "20 ms")):
        assert (f"warning: {src}: {key}: {value}: past epyc7282's last reply (its 3,000 rounds): not injected"
                in lines), out
    assert "faults.timeout" not in said  # 50 us: far above the 2.2 us round trip


def test_a_timeout_under_the_round_trip_is_warned(tmp_path, capsys):
    """faults.timeout 1 us on the EPYC 7282 card path (median round trip 2.17 us, the seeds' table):
    nearly every reply counts as overdue while only the dropped frame is sent again: a warning names
    the file, the key and the value."""
    doc = yaml.safe_load((ROOT / "scenarios" / "faults_epyc7282.yaml").read_text())
    doc["calibration"] = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
    doc["measured"] = str(ROOT / "calibrations" / "measured" / "card_path_64b.yaml")
    doc["faults"]["timeout"] = "1 us"
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["run", str(path), "--rounds", "3000", "--no-plot", "--no-rounds", "--out", str(tmp_path / "o")]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"warning: {path}: faults.timeout: 1 us: under epyc7282's median round trip" in said, said
    (c,) = json.loads((tmp_path / "o" / "results.json").read_text())["consumers"]
    assert c["faults"]["detected"]["reply_timeouts"] > 2900 and c["faults"]["detected"]["resent_frames"] == 1


def test_a_mesh_reports_host_freezes_per_flow_as_a_loop_does(tmp_path):
    """Two closed-loop flows share one EPYC core (a host thread) that the host freezes for 200 us at
    1 ms, with a 20 us reply timeout: each flow's results.json entry has the host_freeze block a
    single loop has, its window where the scenario put it and at least one round stalled through it
    (a round in flight when the freeze begins waits out the window: its round trip >= the rest of
    the freeze, far over 20 us)."""
    doc = yaml.safe_load((ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml").read_text())
    doc["calibration"] = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
    next(n for n in doc["nodes"] if n["kind"] == "consumer")["device"] = "epyc7282"
    doc["rounds"] = 2000
    for f in doc["flows"]:
        f["traffic"] = {"mode": "closed_loop"}
    doc["faults"] = {"host_freeze": [{"at": "1 ms", "duration": "200 us"}], "timeout": "20 us"}
    path = tmp_path / "mesh.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["run", str(path), "--quiet", "--no-plot", "--no-rounds", "--out", str(tmp_path / "o")]) == 0
    for f in json.loads((tmp_path / "o" / "results.json").read_text())["flows"]:
        (w,) = f["host_freeze"]["windows"]
        assert (w["at_ns"], w["duration_ns"]) == (1_000_000, 200_000)
        assert w["stalled_rounds"] >= 1 and f["host_freeze"]["longest_stall_ns"] > 20_000
        assert f["faults"]["injected"]["host_freeze"] == 1


def test_a_flow_that_ended_before_a_freeze_reports_it_not_reached(tmp_path):
    """Mesh flows end apart: flow 0's 300 rounds are back well before 4 ms (each round under 10 us
    with two flows sharing one EPYC core), flow 1's 3,000 rounds run past it. The freeze at 4 ms is
    injected in flow 1 only; flow 0 names it not reached (its own end, not the mesh's), and a
    scenario whose consumers are none of them host threads is refused at load."""
    doc = yaml.safe_load((ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml").read_text())
    doc["calibration"] = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
    consumer = next(n for n in doc["nodes"] if n["kind"] == "consumer")
    consumer["device"] = "epyc7282"
    doc["rounds"] = 3000
    for f in doc["flows"]:
        f["traffic"] = {"mode": "closed_loop"}
    doc["flows"][0]["rounds"] = 300
    doc["faults"] = {"host_freeze": [{"at": "4 ms", "duration": "100 us"}], "timeout": "20 us"}
    path = tmp_path / "mesh.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["run", str(path), "--quiet", "--no-plot", "--no-rounds", "--out", str(tmp_path / "o")]) == 0
    f0, f1 = json.loads((tmp_path / "o" / "results.json").read_text())["flows"]
    assert f0["faults"]["injected"]["host_freeze"] == 0
    assert f0["faults"]["not_reached"] == [{"key": "faults.host_freeze[0].at", "value": "4 ms"}]
    assert f1["faults"]["injected"]["host_freeze"] == 1 and "not_reached" not in f1["faults"]
    consumer["device"] = "mi210"  # a GPU keeps answering through a host freeze
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as e:
        load_scenario(path)
    assert e.value.key == "faults.host_freeze[0].at" and "mi210: gpu" in str(e.value)
