"""Every model in every study: {sim, code, rtl, live shm} consumers in {twin run (a loop), a mesh,
twin decode}. Each cell runs (every reply checked by the card) or is refused at load with one line
naming the key and a reason that is physically true of the model."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from twin.cli import main

ROOT = Path(__file__).resolve().parent.parent
CAL = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
HOSTING = str(ROOT / "calibrations" / "hosting.yaml")
MODELS = ("sim", "code", "rtl", "live")
NEEDS_GCC = shutil.which("gcc") is None


def consumer(name: str, model: str) -> dict:
    """The consumer node standing for ``model``: RTL stands for FPGA logic (the V80), the others for
    an EPYC 7282 core; live is the shm backend on this host."""
    node = {"name": name, "kind": "consumer", "device": "v80" if model == "rtl" else "epyc7282", "model": model}
    if model == "live":
        node["bridge"] = {"backend": "shm", "timeout": "2 s"}
    return node


def run_cli(tmp_path: Path, doc: dict, command: str, *extra: str) -> tuple[int, str, Path]:
    p = tmp_path / f"{command}.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / f"out_{command}"
    rc = main([command, str(p), "--out", str(out), "--quiet", *extra])
    return rc, p, out


@pytest.mark.parametrize("model", MODELS)
def test_loop(tmp_path, model, capsys):
    doc = {"name": "matrix_loop", "calibration": CAL, "seed": 4, "rounds": 300, "frame_bytes": 64,
           "nodes": [{"name": "gen", "kind": "generator"}, {"name": "card", "kind": "link_card"},
                     consumer("c", model)],
           "links": [{"from": "gen", "to": "card", "kind": "on_card"}, {"from": "card", "to": "c", "kind": "pcie"}]}
    rc, _, out = run_cli(tmp_path, doc, "run", "--no-plot")
    assert rc == 0, capsys.readouterr()
    s = json.loads((out / "results.json").read_text())["consumers"][0]
    assert s["model"] == model and s["rounds"] == 300 and s["mismatches"] == 0 and s["replies_checked"] == 300
    st = {b["stage"]: b["median_round_ns"] for b in s["budget"]}
    assert sum(st.values()) > 0


def mesh_doc(model: str, flows_to_it: int) -> dict:
    """Two controllers; flow 0 (echo) to the consumer under test, flow 1 to a sim MI210, or both
    flows to the consumer under test when ``flows_to_it`` is 2."""
    routes = {"echo": "x", "invert": "x" if flows_to_it == 2 else "gpu"}
    return {"name": "matrix_mesh", "calibration": CAL, "seed": 6, "rounds": 200, "frame_bytes": 64,
            "nodes": [{"name": "a", "kind": "generator"}, {"name": "b", "kind": "generator"},
                      {"name": "card", "kind": "link_card", "routes": routes},
                      consumer("x", model), {"name": "gpu", "kind": "consumer", "device": "mi210"}],
            "links": [{"from": "a", "to": "card", "kind": "aurora"}, {"from": "b", "to": "card", "kind": "aurora"},
                      {"from": "card", "to": "x", "kind": "pcie"}, {"from": "card", "to": "gpu", "kind": "pcie"}],
            "flows": [{"from": "a", "function": "echo", "traffic": {"mode": "open_loop", "period": "3 us"}},
                      {"from": "b", "function": "invert", "traffic": {"mode": "open_loop", "period": "3 us"}}]}


@pytest.mark.parametrize("model", MODELS)
def test_mesh(tmp_path, model, capsys):
    rc, _, out = run_cli(tmp_path, mesh_doc(model, 1), "run", "--no-plot")
    assert rc == 0, capsys.readouterr()
    doc = json.loads((out / "results.json").read_text())
    assert [f["mismatches"] for f in doc["flows"]] == [0, 0]
    assert [f["rounds"] for f in doc["flows"]] == [200, 200]
    assert doc["flows"][0]["to"] == "x"
    # every model's consumer reports the replies it served; an RTL one has no utilisation of the twin's,
    # nor a live one (its flow ran on the paced loop: measured, not modelled)
    assert doc["consumers"]["x"]["served"] == 200
    assert (doc["consumers"]["x"]["utilisation"] is None) == (model in ("rtl", "live"))
    assert (doc["flows"][0].get("engine") == "paced") == (model == "live")


@pytest.mark.parametrize("model, why", [("rtl", "polls one request queue"), ("live", "serving one request queue")])
def test_mesh_refuses_two_queues_on_one_rtl_or_live_node(tmp_path, model, why, capsys):
    rc, p, _ = run_cli(tmp_path, mesh_doc(model, 2), "run", "--no-plot")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert f"{p}: nodes[3].model: '{model}'" in err[0] and why in err[0], err


def decode_doc(model: str) -> dict:
    pl = {"device": "v80" if model == "rtl" else "epyc7282", "mode": "inline", "model": model}
    if model == "live":
        pl["bridge"] = {"backend": "shm", "timeout": "2 s"}
    return {"name": "matrix_decode", "calibration": CAL, "hosting": HOSTING, "seed": 3,
            "decode": {"code": "rep", "distance": 3, "rounds": 1, "p": 0.001, "shots": 400, "decoder": "lookup",
                       "placements": [pl]}}


@pytest.mark.parametrize("model", ["sim", "code", "rtl"])
def test_decode(tmp_path, model, capsys):
    rc, _, out = run_cli(tmp_path, decode_doc(model), "decode", "--engine", "event")
    assert rc == 0, capsys.readouterr()
    pl = json.loads((out / "results.json").read_text())["placements"][0]
    assert pl.get("model", "sim") == model
    assert pl["card_mismatches"] == 0 and pl["identical_corrections"] == 400 and pl["replies_checked"] == 400


def test_decode_on_the_live_consumer_runs_the_lookup_decoder_s_c(tmp_path, capsys):
    """The live shm consumer is a C process serving the runtime library's C functions, the lookup
    decoders' tables (qrt_lookup.h) included: its corrections are the twin's, byte for byte."""
    rc, _, out = run_cli(tmp_path, decode_doc("live"), "decode")
    assert rc == 0, capsys.readouterr()
    pl = json.loads((out / "results.json").read_text())["placements"][0]
    assert pl["model"] == "live" and pl["card_mismatches"] == 0
    assert pl["identical_corrections"] == 400 and pl["replies_checked"] == 400


def test_decode_refuses_a_decoder_the_live_consumer_does_not_have(tmp_path, capsys):
    """PyMatching has no C in the runtime library: a live placement of it is refused at load."""
    doc = decode_doc("live")
    doc["decode"].update({"code": "surface", "distance": 3, "decoder": "matching"})
    rc, p, _ = run_cli(tmp_path, doc, "decode")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "decode.placements[0].model: 'live'" in err[0] and "has no C implementation" in err[0], err
