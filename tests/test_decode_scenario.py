"""A decode scenario is a run scenario plus a workload block (issue 24): the keys both say are one
schema (:class:`twin.scenario.schema.ScenarioBase`) read by one loader
(:func:`twin.scenario.load.read_scenario`), so a bad common key is refused alike by ``twin run`` and
``twin decode``; and what a placement's model can do is asked of the model registry
(:mod:`twin.nodes.models`), not written beside the schema."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from twin.config import ConfigError
from twin.nodes.models import model_for
from twin.qec.load import load_decode
from twin.qec.schema import Placement
from twin.scenario.load import load_scenario

ROOT = Path(__file__).resolve().parent.parent
CAL = ROOT / "calibrations"


def _bundled(name: str) -> dict:
    """A bundled scenario with its files named absolutely (so a copy loads from anywhere)."""
    doc = yaml.safe_load((ROOT / "scenarios" / f"{name}.yaml").read_text())
    doc["calibration"] = str(CAL / "fitted" / "card_path.yaml")
    for key, path in (("measured", CAL / "measured" / "card_path_64b.yaml"), ("hosting", CAL / "hosting.yaml")):
        if key in doc:
            doc[key] = str(path)
    return doc


def _write(tmp_path: Path, name: str, doc: dict) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


RUN, DECODE = "card_path_64b", "decode_rep3"


@pytest.mark.parametrize("key, value", [
    ("seed", -1), ("seed", 2**64), ("slots", 0), ("encoding", "gray"), ("name", "two words"),
    ("deadline", "5"), ("deadline", "-2 us"), ("calibration", "no_such.yaml"),
    ("traffic", {"mode": "closed_loop", "period": "1 us"}), ("traffic", {"mode": "open_loop"}),
    ("traffic", {"clock": "card", "ppm": 3.0}),
])
def test_a_bad_common_key_is_refused_alike_by_both_loaders(tmp_path, key, value):
    """The same bad value of a key both scenarios have: the same key, value and problem from
    ``twin run``'s loader and ``twin decode``'s (the file's name aside)."""
    errors = []
    for name, load in ((RUN, load_scenario), (DECODE, load_decode)):
        doc = {**_bundled(name), key: value}
        with pytest.raises(ConfigError) as e:
            load(_write(tmp_path, name, doc))
        errors.append((e.value.key, e.value.value, e.value.problem))
    assert errors[0] == errors[1]
    assert errors[0][0].split(".")[0] == key


def test_each_loader_refuses_the_other_studys_file(tmp_path):
    """A loop scenario given to ``twin decode`` and a decode scenario given to ``twin run``: one line
    naming the key that tells them apart and the command that runs it."""
    run, decode = _write(tmp_path, RUN, _bundled(RUN)), _write(tmp_path, DECODE, _bundled(DECODE))
    with pytest.raises(ConfigError) as e:
        load_decode(run)
    assert (e.value.key, e.value.value) == ("nodes", "[...]") and f"twin run {run}" in e.value.problem
    with pytest.raises(ConfigError) as e:
        load_scenario(decode)
    assert (e.value.key, e.value.value) == ("decode", "{...}") and f"twin decode {decode}" in e.value.problem
    assert load_decode(decode).sc.decode.placements[0].device == "v80"  # each loads with its own loader


def test_the_placement_rules_are_the_model_registrys(monkeypatch):
    """Parallel workers and the bridge block follow the registry's ``supports``: a model declared
    to take workers takes them, one declared to need no bridge block needs none, and the refusals
    name the models the registry lists."""
    with pytest.raises(ValueError, match="parallel decoders are modelled for sim and code placements"):
        Placement(device="v80", model="rtl", workers=2)
    monkeypatch.setitem(model_for("consumer", "rtl").supports, "workers", "any")
    assert Placement(device="v80", model="rtl", workers=2).workers == 2
    with pytest.raises(ValueError, match="modelled for sim, code and rtl placements"):
        Placement(device="v80", model="live", workers=2, bridge={"backend": "shm"})

    with pytest.raises(ValueError, match="model live needs a bridge block"):
        Placement(device="epyc7282", model="live")
    with pytest.raises(ValueError, match="share a stream over sim, code or rtl devices"):
        Placement(devices=["mi210", "mi210"], model="live", bridge={"backend": "shm"})
    monkeypatch.setitem(model_for("consumer", "live").supports, "needs", [])
    assert Placement(devices=["mi210", "mi210"], model="live").bridge is None
    with pytest.raises(ValueError, match="a bridge block is for model"):  # now no model takes one
        Placement(device="epyc7282", model="live", bridge={"backend": "shm"})


def test_cost_applies_to_the_models_the_cost_model_times(tmp_path, monkeypatch):
    """``decode.cost`` on placements that all time themselves is refused; the same scenario loads
    once the registry says the rtl model's decoder time is the cost model's."""
    from twin.nodes.models import COST_MODEL
    doc = _bundled(DECODE)
    doc["decode"] = {**doc["decode"], "cost": {"how": "model", "fixed": "100 ns"},
                     "placements": [{"device": "v80", "model": "rtl"}]}
    p = _write(tmp_path, DECODE, doc)
    with pytest.raises(ConfigError) as e:
        load_decode(p)
    assert e.value.key == "decode.cost" and "rtl: the Verilog's own cycles" in e.value.problem
    monkeypatch.setitem(model_for("consumer", "rtl").supports, "decoder_time", COST_MODEL)
    assert load_decode(p).sc.decode.cost.fixed == "100 ns"
