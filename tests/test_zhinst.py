"""The Zurich Instruments QCCS control side (node kind zhinst_qccs, twin/devices/zhinst.py): the numbers
come from Zurich Instruments' published model (zhinst-timing-models) and from the physics its module
docstring writes down, not from the twin's own output."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from zhinst.timing_models import PQSCMode, QAType, QCCSFeedbackModel, SGType, get_feedback_system_description

from twin.cli import main
from twin.config import ConfigError
from twin.devices.zhinst import QccsParams
from twin.nodes.kinds import kind
from twin.nodes.models import model_for
from twin.nodes.protocol import ControlNode, Node
from twin.scenario.load import load_scenario
from twin.studies.run import run_study

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "scenarios" / "zhinst_qccs.yaml"
CAL = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
PARAMS = {"samples": 1024, "period_ns": 5000, "generator": "SHFSG", "feedback": "decoder",
          "result_latency_ns": 100.0, "reply_latency_ns": 60.0, "feedback_delay_cycles": 700, "clock": "card"}


def scenario(params: dict | None = None, **top) -> dict:
    return {"name": "zi", "calibration": CAL, "seed": 3, "rounds": 300, "frame_bytes": 64, **top,
            "nodes": [{"name": "qccs", "kind": "zhinst_qccs", "params": {**PARAMS, **(params or {})}},
                      {"name": "u55c", "kind": "link_card"}, {"name": "epyc7282", "kind": "consumer",
                                                               "device": "epyc7282"}],
            "links": [{"from": "qccs", "to": "u55c", "kind": "aurora"},
                      {"from": "u55c", "to": "epyc7282", "kind": "pcie"}]}


def write(tmp_path: Path, doc: dict) -> Path:
    p = tmp_path / "zi.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def run(tmp_path: Path, doc: dict):
    return run_study(load_scenario(write(tmp_path, doc))).runs[0]


# -- the published model ------------------------------------------------------------------------------
def test_native_latency_is_the_published_models_cycles_of_4_ns():
    # by hand, from get_feedback_system_description(SHFSG, SHFQA, DECODER) with automatic trigger delays:
    # initial 95 cycles for 3 steps, then the pattern (5,8),(5,8),(3,9),(5,8),(5,8),(2,9) (25 cycles per 50
    # steps of 4 samples), plus the RTLogger correction of 2. 1024 samples: step (1024 - 16) // 4 = 252; past
    # the 3 initial steps and one: 248 = 4 full periods (100 cycles) + 48 (cumulative 25) -> 95 + 25 + 100 + 2
    assert QccsParams(**PARAMS).native_cycles == 222
    # the package itself, for other configurations
    for gen, mode, key in ((SGType.HDAWG, PQSCMode.REGISTER_FORWARD, {"generator": "HDAWG",
                                                                      "feedback": "register_forward"}),
                           (SGType.SHFSG, PQSCMode.REGISTER_FORWARD, {"feedback": "register_forward"})):
        for samples in (20, 333, 4000):
            want = QCCSFeedbackModel(get_feedback_system_description(gen, QAType.SHFQA, mode)).get_latency(samples)
            got = QccsParams(**{**PARAMS, **key, "samples": samples, "feedback_delay_cycles": None})
            assert got.native_cycles == want
            assert got.read_ps == want * 4000  # no feedback_delay_cycles: the pulse reads at the native latency


def test_the_latency_grows_with_the_integration_one_for_one():
    # 200 samples more at 2 GSa/s is 100 ns more integration: 25 sequencer cycles of 4 ns (one pattern period)
    a, b = (QccsParams(**{**PARAMS, "samples": s}).native_cycles for s in (1024, 1224))
    assert (b - a) * 4 == 100


# -- the run ------------------------------------------------------------------------------------------
def test_request_instants_are_trigger_plus_readout(tmp_path):
    r = run(tmp_path, scenario()).result
    n = len(r.t_send)
    # clock card: trigger r at r x 5 us; the request leaves 1024 x 500 ps + 100 ns later
    want = np.arange(n, dtype=np.int64) * 5_000_000 + 1024 * 500 + 100_000
    assert np.array_equal(r.t_send, want)


def test_the_reaction_is_measured_against_the_native_path(tmp_path):
    out = tmp_path / "out"
    assert main(["run", str(write(tmp_path, scenario())), "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    fb = doc["consumers"][0]["program"]["feedback"]
    assert fb["native_ns"] == 222 * 4
    assert fb["read_at_ns"] == 700 * 4
    assert doc["traffic"]["native_feedback"]["model"].startswith("zhinst-timing-models ")
    # reaction = reply back at the QCCS + reply_latency - trigger = (t_back - t_send) + readout + reply_latency
    res = run(tmp_path, scenario()).result
    reaction = res.t_back - res.t_send + 1024 * 500 + 100_000 + 60_000
    assert fb["reaction_ns"]["max"] == reaction.max() / 1000
    assert fb["late_rounds"] == int((reaction > 700 * 4000).sum())
    assert fb["over_native_ns"]["p50"] == pytest.approx(float(np.percentile(reaction, 50, method="inverted_cdf")
                                                              / 1000 - 888))


def test_an_independent_clock_runs_at_its_offset(tmp_path):
    r = run(tmp_path, scenario({"clock": "independent", "ppm": 20.0})).result
    gaps = np.diff(r.t_send)
    # 1,250 sequencer cycles of 4 ns a round, each 20 ppm long: 5 us x (1 + 20e-6) = 5,000.1 ns, on whole ps
    assert abs(gaps.mean() - 5_000_100) < 1
    assert gaps.min() >= 5_000_099 and gaps.max() <= 5_000_101


def test_the_direct_engine_and_the_compiled_core_leave_it_to_the_event_engine(tmp_path):
    summary = run(tmp_path, scenario()).summary
    assert summary["engine"] == "event"
    from dataclasses import replace

    from twin.engine import features
    from twin.scenario.compile import flow_spec
    ld = load_scenario(write(tmp_path, scenario()))
    spec = replace(flow_spec(ld.params, "epyc7282", ld.scenario.traffic_params(), 1, external_control=True),
                   control=ld.scenario.control_side())
    assert "control" in features.refusal(spec)


# -- the kind: one file plus its registration --------------------------------------------------------
def test_the_node_satisfies_the_control_protocol(tmp_path):
    from dataclasses import replace

    from twin.engine.event import _FlowRun, _Shared
    from twin.engine.topology import Topology
    from twin.kernel import Kernel
    from twin.scenario.compile import flow_spec
    ld = load_scenario(write(tmp_path, scenario()))
    spec = replace(flow_spec(ld.params, "epyc7282", ld.scenario.traffic_params(), 1, external_control=True),
                   control=ld.scenario.control_side())
    fr = _FlowRun(Kernel(1), Topology.single(spec).flows[0], _Shared())
    assert type(fr.gen).__name__ == "ZhinstQccs"
    assert isinstance(fr.gen, ControlNode) and isinstance(fr.gen, Node)
    fr.shutdown()


def test_the_kind_is_declared_registered_and_listed(capsys):
    k = kind("zhinst_qccs")
    assert k.where == "generator" and k.settings_class() is QccsParams
    assert {p.name for p in k.params} == set(QccsParams.model_fields)
    for p in k.params:  # every source is the package and its version, or an assumption with why
        assert p.source.startswith(("zhinst-timing-models ", "zhinst-toolkit", "assumption: ")), p
    assert model_for("zhinst_qccs", "sim").factory == "twin.devices.zhinst:build_node"
    assert main(["components"]) == 0
    assert "zhinst_qccs (node kind)" in capsys.readouterr().out
    assert "zhinst_qccs" in (ROOT / "docs" / "components.md").read_text()


def test_the_bundled_scenario_is_listed_and_runs(tmp_path, capsys):
    assert main(["scenarios"]) == 0
    assert "zhinst_qccs" in capsys.readouterr().out
    doc = yaml.safe_load(BUNDLED.read_text())
    doc["rounds"] = 200
    doc["calibration"] = CAL
    out = tmp_path / "out"
    assert main(["run", str(write(tmp_path, doc)), "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert all(c["program"]["feedback"]["rounds"] == 200 for c in res["consumers"])


# -- refusals: one line naming file, key and value ------------------------------------------------------
@pytest.mark.parametrize("params,top,key", [
    ({"nope": 1}, {}, "nodes[0].params.nope"),
    ({"clock": "card", "ppm": 3.0}, {}, "nodes[0].params.ppm"),
    ({"generator": "SHFQC"}, {}, "nodes[0].params.generator"),  # the same numbers as an SHFSG on the PQSC path
    ({"trigger_source": "internal"}, {}, "nodes[0].params.trigger_source"),
    ({"feedback": "internal"}, {}, "nodes[0].params.generator"),  # the package: internal feedback needs an SHFQC
    ({"samples": 12000}, {}, "nodes[0].params.samples"),  # 6 us of readout in a 5 us round
    ({"period_ns": 5050}, {}, "nodes[0].params.period_ns"),
    ({}, {"traffic": {"mode": "closed_loop"}}, "traffic"),
])
def test_keys_that_would_change_nothing_or_cannot_be_are_refused(tmp_path, params, top, key):
    with pytest.raises(ConfigError) as e:
        load_scenario(write(tmp_path, scenario(params, **top)))
    assert e.value.key == key, str(e.value)
    assert "\n" not in str(e.value) and str(e.value).startswith(str(tmp_path / "zi.yaml"))


def test_the_schema_takes_declared_kinds_only_and_params_only_where_declared(tmp_path):
    doc = scenario()
    bad = copy.deepcopy(doc)
    bad["nodes"][0]["kind"] = "zhinst"
    with pytest.raises(ConfigError) as e:
        load_scenario(write(tmp_path, bad))
    assert e.value.key == "nodes[0].kind" and "zhinst_qccs" in str(e.value)
    bad = copy.deepcopy(doc)
    bad["nodes"][2]["params"] = {"samples": 100}
    with pytest.raises(ConfigError) as e:
        load_scenario(write(tmp_path, bad))
    assert e.value.key == "nodes[2].params"
    bad = copy.deepcopy(doc)
    bad["links"][0]["kind"] = "on_card"
    with pytest.raises(ConfigError) as e:
        load_scenario(write(tmp_path, bad))
    assert e.value.key == "nodes[0].kind" and "aurora" in str(e.value)
