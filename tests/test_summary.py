"""Typed results (issue 24, item 3): each flow's results.json entry is a frozen record
(:mod:`twin.output.summary`) whose common part is built by one function, :func:`flow_summary`,
for ``twin run``, a mesh and ``twin decode`` alike; the file holds exactly the records' ``to_json()``."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import twin.qec.load
import twin.studies.decode
import twin.studies.mesh
import twin.studies.mesh_reduce
import twin.studies.run
from twin.commands import main
from twin.output.summary import Check, FlowSummary, FlowTiming, Latency, Wait, flow_summary
from twin.scenario import load_scenario
from twin.stats import summary_ns

ROOT = Path(__file__).resolve().parent.parent
CARD = ROOT / "scenarios" / "card_path_64b.yaml"
FAULTS = ROOT / "scenarios" / "faults_epyc7282.yaml"
MESH = ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml"
DECODE = ROOT / "scenarios" / "decode_rep3.yaml"


def plain(doc):
    """``doc`` as results.json has it (through JSON: tuples become lists)."""
    return json.loads(json.dumps(doc))


def test_records_round_trip_through_to_json():
    rng = np.random.default_rng(3)
    samples = rng.integers(400_000, 900_000, 1001).astype(np.int64)
    lat = Latency.of(samples)
    assert lat.to_json() == summary_ns(samples) and list(lat.to_json()) == list(summary_ns(samples))
    assert Latency(**lat.to_json()) == lat
    assert lat.shifted(212.5).to_json() == {k: round(v + 212.5, 3) for k, v in summary_ns(samples).items()}
    for c in (Check("direct+event", 40, 0, "ab" * 32), Check("direct", 0, 0)):
        assert Check(**c.to_json()) == c
    assert "reply_digest" not in Check("direct", 0, 0).to_json()
    waits = np.array([0, 0, 4000, 12000], np.int64)
    w = Wait.of(waits)
    assert Wait(**w.to_json()) == w
    assert w.to_json() == {"mean_ns": 4.0, "p99_ns": 12.0, "waited_fraction": 0.5}


def test_records_are_frozen():
    lat = Latency(1.0, 2.0, 3.0, 4.0, 2.0)
    timing = FlowTiming(lat, 0)
    for rec, name in ((lat, "p50_ns"), (Check("event", 1, 0), "mismatches"), (timing, "rtt")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(rec, name, 0)
        assert not hasattr(rec, "__dict__")  # slots: no field can be added either
    again = dataclasses.replace(timing, backlog_max=3)
    assert again.backlog_max == 3 and timing.backlog_max == 0


def test_results_json_of_a_run_is_its_records(tmp_path):
    """The file `twin run` writes holds exactly each consumer's record, built again from the same run."""
    for path, rounds in ((CARD, 300), (FAULTS, 3000)):
        out = tmp_path / path.stem
        main(["run", str(path), "--rounds", str(rounds), "--out", str(out), "--quiet", "--no-plot", "--no-csv"])
        doc = json.loads((out / "results.json").read_text())
        study = twin.studies.run.run_study(load_scenario(path), rounds=rounds)
        assert all(isinstance(r.record, FlowSummary) for r in study.runs)
        assert doc["consumers"] == [plain(r.record.to_json()) for r in study.runs]
        assert len(doc["consumers"]) == len(study.runs) > 0
    assert any("faults" in c for c in doc["consumers"])  # the faults block came through the record


@pytest.fixture
def spied(monkeypatch):
    """Every call of flow_summary by the three studies: (study, result, the FlowTiming it returned)."""
    calls = []
    for mod in (twin.studies.run, twin.studies.mesh_reduce, twin.studies.decode):  # a mesh flow's: mesh_reduce's
        def spy(res, *a, _name=mod.__name__, **kw):
            t = flow_summary(res, *a, **kw)
            calls.append((_name, res, t))
            return t
        monkeypatch.setattr(mod, "flow_summary", spy)
    return calls


def _same_meaning(timing: FlowTiming, res, rtt: dict, backlog: int) -> None:
    """The common part, wherever a study writes it: the round trip's percentiles of the result's
    rounds and the card's backlog."""
    assert rtt == timing.rtt.to_json() == summary_ns(res.rtt_ps)
    assert backlog == timing.backlog_max == int(res.stats.get("backlog_max", 0))


def test_run_mesh_and_decode_summaries_are_built_by_flow_summary(spied):
    study = twin.studies.run.run_study(load_scenario(CARD), rounds=300)
    got = [c for c in spied if c[0] == "twin.studies.run"]
    assert len(got) == len(study.runs)
    for run, (_, res, timing) in zip(study.runs, got):
        assert run.record.timing is timing and res is run.result
        s = run.summary
        _same_meaning(timing, res, {k: s[k] for k in timing.rtt.to_json()}, s["backlog_max"])

    loaded = load_scenario(MESH)
    res = twin.studies.mesh.run_mesh(loaded.scenario, loaded.params, rounds=500)
    flows = twin.studies.mesh.flow_summaries(loaded.scenario, res)
    got = [c for c in spied if c[0] == "twin.studies.mesh_reduce"]
    assert len(got) == len(flows) == len(res.flows) == 2
    for f, ft, (_, r, timing) in zip(flows, res.flows, got):
        assert f.timing is timing and r is ft
        s = f.to_json()
        _same_meaning(timing, ft, s["rtt"], s["backlog_max"])
        assert s["loop"] == summary_ns(ft.loop_ps) and s["budget"] == timing.budget

    ld = twin.qec.load.load_decode(DECODE)
    dec = twin.studies.decode.run_decode_study(ld, shots=200)
    got = [c for c in spied if c[0] == "twin.studies.decode"]
    assert len(got) == len(dec.document["placements"]) == len(dec.runs) > 0
    for s, run, (_, r, timing) in zip(dec.document["placements"], dec.runs, got):
        assert r is run.result
        _same_meaning(timing, r, s["rtt"], s["card_backlog_max"])
