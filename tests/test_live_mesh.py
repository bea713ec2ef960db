"""A live shm consumer inside a mesh (twin.studies.mesh_live): its flow runs on the paced C loop at
the instants of the mesh simulated with the node's sim model, the other flows simulated; a live
failure ends the run with the other flows whole and the live flow's rounds so far, flow and node
named. No timing bounds (the machine may be loaded)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from test_live_decode import live_shm_runs  # noqa: F401  (the module's skip where live shm cannot run)

from twin.commands import main
from twin.config import ConfigError
from twin.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
PINS = {"producer_cpu": 0, "cpu": 1} if {0, 1} <= os.sched_getaffinity(0) else {}


def mesh(tmp_path, *, live=True, bridge=None, rounds=2000, two_live=False, name="sc.yaml") -> Path:
    doc = yaml.safe_load((ROOT / "scenarios" / "mesh_fanout_by_function.yaml").read_text())
    doc["calibration"] = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
    doc["rounds"] = rounds
    b = bridge or {"backend": "shm", "timeout": "2 s", **PINS}
    if live:
        doc["nodes"][2] = {"name": "epyc7282", "kind": "consumer", "device": "epyc7282", "model": "live", "bridge": b}
    if two_live:
        doc["nodes"][3] = {"name": "mi210", "kind": "consumer", "device": "epyc7282", "model": "live",
                           "bridge": {"backend": "shm"}}
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc))
    return p


def run(tmp_path, capsys, sc: Path, out="out"):
    o = tmp_path / out
    rc = main(["run", str(sc), "--out", str(o), "--quiet", "--no-plot"])
    cap = capsys.readouterr()
    doc = json.loads((o / "results.json").read_text()) if (o / "results.json").exists() else None
    return rc, cap.err + cap.out, doc


def test_a_live_node_in_a_mesh_runs_paced_and_the_other_flows_as_simulated(tmp_path, capsys):
    rc, err, doc = run(tmp_path, capsys, mesh(tmp_path))
    assert rc == 0, err
    f0 = doc["flows"][0]
    assert f0["to"] == "epyc7282" and f0["engine"] == "paced" and f0["rounds"] == 2000 and f0["mismatches"] == 0
    lv = f0["live"]
    assert lv["backend"] == "shm" and lv["error"] is None and lv["pace"]["paced"]
    assert lv["simulated"]["model"] == "sim" and lv["simulated"]["rtt"]["p50_ns"] > 0
    assert doc["consumers"]["epyc7282"]["utilisation"] is None and doc["consumers"]["epyc7282"]["served"] == 2000
    assert "live shm, paced" in " ".join(err.split())
    # the other flows are the mesh simulated with the live node's sim model: the same as a mesh without it
    rc2, err2, sim = run(tmp_path, capsys, mesh(tmp_path, live=False, name="sim.yaml"), out="sim")
    assert rc2 == 0, err2
    for a, b in zip(doc["flows"][1:], sim["flows"][1:]):
        assert a["rtt"] == b["rtt"] and a["loop"] == b["loop"] and "live" not in a
    assert lv["simulated"]["rtt"] == sim["flows"][0]["rtt"]


def test_a_live_node_that_dies_in_a_mesh_ends_the_run_with_the_rounds_so_far(tmp_path, capsys):
    bridge = {"backend": "shm", "timeout": "300 ms", "fault": {"kind": "die", "round": 700}, **PINS}
    rc, err, doc = run(tmp_path, capsys, mesh(tmp_path, bridge=bridge))
    assert rc == 3, err
    line = next(ln for ln in err.splitlines() if ln.startswith("twin: error:"))
    assert "flow 0 (node 'epyc7282')" in line and "dead at round 700" in line and "699 rounds completed" in line
    assert doc["partial"] is True
    f0, others = doc["flows"][0], doc["flows"][1:]
    assert f0["rounds"] == 699 and f0["rounds_requested"] == 2000 and f0["live"]["error"]["kind"] == "dead"
    assert all(f["rounds"] == 2000 for f in others)


def test_two_live_nodes_in_a_mesh_run_round_by_round_and_pace_true_is_refused(tmp_path, capsys):
    with pytest.raises(ConfigError) as e:
        load_scenario(mesh(tmp_path, bridge={"backend": "shm", "pace": True}, two_live=True))
    line = str(e.value)
    assert "\n" not in line and "bridge.pace: True" in line and "2 live nodes in a mesh" in line
    load_scenario(mesh(tmp_path, bridge={"backend": "shm", "pace": True}, name="one.yaml"))  # one: paced
    rc, err, doc = run(tmp_path, capsys, mesh(tmp_path, rounds=200, two_live=True, name="two.yaml"))
    assert rc == 0, err
    assert all("live" not in f for f in doc["flows"])  # the event model, round by round
