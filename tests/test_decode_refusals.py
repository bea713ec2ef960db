"""What a new user tried and twin decode did not refuse in one line (found by a trial as a new user,
2026-12-01): circuits too large to carry or sample, a decoder answering with the wrong shape, a decoder
cost past the simulated horizon, a seed wider than 64 bits."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from twin.config import ConfigError
from twin.qec.load import load_decode
from twin.studies.decode import run_decode_study

ROOT = Path(__file__).resolve().parent.parent
BASE = {"name": "t", "calibration": str(ROOT / "calibrations/fitted/card_path.yaml"),
        "hosting": str(ROOT / "calibrations/hosting.yaml"),
        "decode": {"shots": 10, "decoder": "matching", "placements": [{"device": "epyc7282", "mode": "inline"}]}}


def scenario(tmp_path: Path, decode: dict, **top) -> Path:
    doc = {**BASE, **top, "decode": {**BASE["decode"], **decode}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


@pytest.mark.parametrize("text, says", [
    ("REPEAT 1000000000 {\n REPEAT 1000000000 {\n X_ERROR(0.1) 0\n M 0\n DETECTOR rec[-1]\n }\n}\n"
     "OBSERVABLE_INCLUDE(0) rec[-1]\n", "measurements per shot"),  # stim would unroll 10^18 of them
    ("REPEAT 600000 {\n M 0\n DETECTOR rec[-1]\n}\nOBSERVABLE_INCLUDE(0) rec[-1]\n", "one request carries"),
    ("X_ERROR(0.1) 0\nM 0\nDETECTOR rec[-1]\nOBSERVABLE_INCLUDE(1000) rec[-1]\n", "the reply slot holds"),
    ("X_ERROR(0.1) 200000\nM 0\nDETECTOR rec[-1]\nOBSERVABLE_INCLUDE(0) rec[-1]\n", "qubits"),
])
def test_a_circuit_too_large_is_refused_before_stim_unrolls_it(tmp_path, text, says):
    (tmp_path / "c.stim").write_text(text)
    with pytest.raises(ConfigError) as e:
        load_decode(scenario(tmp_path, {"circuit": "c.stim"}))
    assert e.value.key == "decode.circuit" and says in str(e.value) and "\n" not in str(e.value)


def test_a_decoder_answering_the_wrong_shape_is_one_line_naming_it(tmp_path, monkeypatch):
    (tmp_path / "wrongdec.py").write_text(
        "import numpy as np\nimport sinter\n\n\nclass Wrong(sinter.Decoder):\n"
        "    def compile_decoder_for_dem(self, *, dem):\n"
        "        class C(sinter.CompiledDecoder):\n"
        "            def decode_shots_bit_packed(self, *, bit_packed_detection_event_data):\n"
        "                return np.zeros((3, 7), np.uint8)\n"
        "        return C()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        p = scenario(tmp_path, {"code": "rep", "distance": 3, "decoder": "sinter:wrongdec:Wrong",
                                "cost": {"how": "model", "fixed": "1 us"}})
        with pytest.raises(ConfigError) as e:
            run_decode_study(load_decode(p))
    finally:
        sys.modules.pop("wrongdec", None)
    assert e.value.key == "decode.decoder" and "shape (3, 7)" in str(e.value)


def test_a_decoder_cost_past_the_simulated_horizon_is_refused(tmp_path):
    p = scenario(tmp_path, {"code": "rep", "distance": 3, "decoder": "lookup", "shots": 20_000,
                            "cost": {"how": "model", "fixed": "1000 s"}})
    with pytest.raises(ConfigError) as e:
        run_decode_study(load_decode(p))
    assert e.value.key == "decode.cost" and "simulated horizon" in str(e.value)


def test_a_seed_wider_than_64_bits_is_refused(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_decode(scenario(tmp_path, {"code": "rep", "distance": 3, "decoder": "lookup"}, seed=2**64))
    assert e.value.key == "seed"


@pytest.mark.parametrize("placements, key, value, says", [
    ([{"device": "epyc7282"}, {"device": "v80"}, {"device": "epyc7282", "mode": "inline"}],
     "decode.placements[2]", "epyc7282", "the same placement as placements[0]"),
    ([{"devices": ["mi210", "mi210"]}, {"devices": ["mi210", "mi210"], "dispatch": "round_robin"}],
     "decode.placements[1]", ["mi210", "mi210"], "the same placement as placements[0]"),
])
def test_a_placement_or_device_given_twice_is_refused(tmp_path, placements, key, value, says):
    """The same placement twice (defaults written out or not) would decode the same shots on the same
    devices again: two identical entries; refused in one line."""
    with pytest.raises(ConfigError) as e:
        load_decode(scenario(tmp_path, {"placements": placements}))
    assert (e.value.key, e.value.value) == (key, value) and says in str(e.value) and "\n" not in str(e.value)


def test_placements_that_differ_in_one_key_are_two_studies(tmp_path):
    """Same device, other hosting mode or worker count: three placements (and devices: [mi210, mi210]
    is two MI210s, not a duplicate: the bundled decode_stream_two_gpus loads)."""
    loaded = load_decode(scenario(tmp_path, {"code": "rep", "placements": [{"device": "epyc7282"},
                                                                        {"device": "epyc7282", "mode": "worker"},
                                                                        {"device": "epyc7282", "workers": 2}]}))
    assert len(loaded.sc.decode.placements) == 3
    load_decode(ROOT / "scenarios" / "decode_stream_two_gpus.yaml")
