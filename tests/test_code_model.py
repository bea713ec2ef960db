"""Model ``code``: the real C runtime library serves the requests on the twin's bytes.

The reference for every reply is the ``sim`` model (Python functions); the card checks each reply
byte for byte against it, and the two runs' reply digests and timestamps are compared.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.stats import ks_2samp

from twin.commands import main
from twin.devices import TrafficParams
from twin.engine.event import run_event
from twin.runtime import functions as F
from twin.scenario import load_scenario
from twin.scenario.compile import flow_spec

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def params():
    return load_scenario(ROOT / "scenarios" / "card_path_64b.yaml").params


def both(params, name, rounds, function=0, seed=5):
    tr = TrafficParams(rounds=rounds)
    sim = run_event(flow_spec(params, name, tr, seed, function=function))
    code = run_event(flow_spec(params, name, tr, seed, function=function, model="code"))
    return sim, code


@pytest.mark.slow
@pytest.mark.parametrize("name", ["epyc7282", "epyc9755"])  # per-piece and classic at 64 B
def test_code_equals_sim_byte_for_byte_over_1e5_rounds(params, name):
    sim, code = both(params, name, 100_000)
    assert code.mismatches == sim.mismatches == 0
    assert code.stats["reply_digest"] == sim.stats["reply_digest"]
    assert np.array_equal(code.t_have, sim.t_have)        # the same timing model accounts the time
    assert ks_2samp(sim.rtt_ps, code.rtt_ps).pvalue > 0.01


@pytest.mark.parametrize("fid", [f.id for f in F.REGISTRY.values() if f.c_symbol])
@pytest.mark.parametrize("name", ["epyc7282", "epyc9755"])
def test_every_c_function_matches_its_python_twin(params, name, fid):
    sim, code = both(params, name, 500, function=fid)
    assert code.mismatches == 0 and sim.mismatches == 0
    assert code.stats["reply_digest"] == sim.stats["reply_digest"]


def test_corrupted_request_is_caught_in_code_model_too(params):
    from dataclasses import replace

    from twin.faults import FaultPlan
    spec = replace(flow_spec(params, "epyc7282", TrafficParams(rounds=300), 5, model="code"),
                   faults=FaultPlan(corrupt_rounds=frozenset({17})))
    res = run_event(spec)
    assert list(np.flatnonzero(~res.ok) + 1) == [17]


@pytest.fixture
def sine_function():
    pytest.importorskip("numba")
    from twin.runtime.numba_fn import user_function

    def sine_code(inp, n, out, cap):
        """One byte per request byte: round(100 * sin(b / 16)) mod 256 (libm's sin)."""
        if n > cap:
            return -1
        for i in range(n):
            out[i] = int(round(100.0 * math.sin(inp[i] / 16.0))) & 0xFF  # noqa: RUF046 -- numba types round() apart
        return n

    f = user_function(60, "sine_code", sine_code)
    yield f
    F.REGISTRY.pop(f.id)


def test_numba_compiled_python_function_runs_in_the_c_dispatch_table(params, sine_function):
    sim, code = both(params, "epyc7282", 2000, function=sine_function.id)
    assert code.mismatches == 0 and sim.mismatches == 0
    assert code.stats["reply_digest"] == sim.stats["reply_digest"]
    # the reference itself, from first principles, for one payload
    assert sine_function.python(bytes([0, 16, 255])) == bytes([0, round(100 * math.sin(1.0)) & 0xFF,
                                                             round(100 * math.sin(255 / 16)) & 0xFF])


def test_scenario_key_swaps_sim_for_code(tmp_path, capsys):
    doc = yaml.safe_load((ROOT / "scenarios" / "card_path_64b.yaml").read_text())
    doc["calibration"] = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
    doc["measured"] = str(ROOT / "calibrations" / "measured" / "card_path_64b.yaml")
    doc["nodes"] = [n for n in doc["nodes"] if n["name"] in ("gen", "u55c", "epyc7282")]
    doc["links"] = [link for link in doc["links"] if link["to"] in ("u55c", "epyc7282")]
    out = {}
    for model in ("sim", "code"):
        doc["nodes"][2]["model"] = model
        p = tmp_path / f"{model}.yaml"
        p.write_text(yaml.safe_dump(doc))
        assert main(["run", str(p), "--rounds", "3000", "--engine", "event", "--quiet", "--no-plot",
                     "--out", str(tmp_path / model)]) == 0, capsys.readouterr()
        out[model] = json.loads((tmp_path / model / "results.json").read_text())["consumers"][0]
    assert out["code"]["model"] == "code" and out["code"]["replies_checked"] == 3000
    assert out["code"]["mismatches"] == 0
    for k in ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "mean_ns"):
        assert out["code"][k] == out["sim"][k]
    assert (tmp_path / "code" / "rounds.parquet").read_bytes() == (tmp_path / "sim" / "rounds.parquet").read_bytes()


@pytest.mark.parametrize("first", ["twin.runtime.functions", "twin.qec.lookup"])
def test_decoders_are_registered_whoever_is_imported_first(first):
    """The QEC decoders (ids from the contract: 16, 17, 18) are registered by twin.qec.functions,
    into the runtime's registry: a program that imports only the runtime finds them (through the
    entry point, pyproject.toml), and so does one that imports twin.qec first; each once."""
    import subprocess
    import sys
    code = (f"import sys, {first}\n"
            "from twin.exchange import contract as C\n"
            "from twin.runtime.functions import REGISTRY, lookup\n"
            "ids = (C.FUNCTION_DECODE_REP3, C.FUNCTION_DECODE_STEANE7, C.FUNCTION_DECODE_SURFACE5)\n"
            "print([lookup(i).name for i in ids], [lookup(i).native is not None for i in ids],\n"
            "      sorted(m for m in sys.modules if m.startswith('twin.qec')) if "
            f"{first!r}.startswith('twin.runtime') else '-')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert line.startswith("['decode_rep3', 'decode_steane7', 'decode_surface5'] [True, True, False] "), line
    if first.startswith("twin.runtime"):  # only the provider module came in, not the tables or stim
        assert line.endswith("['twin.qec', 'twin.qec.functions']"), line


def test_model_code_without_numba_serves_c_functions_and_refuses_numba_builds(tmp_path, monkeypatch, capsys):
    """numba is an extra: without it a code consumer still serves the runtime library's C functions,
    and a function that exists for model code only as a numba build is refused at load, one line."""
    import yaml

    import twin.devices.code as cc
    import twin.runtime.functions as fns
    from twin.commands import main
    monkeypatch.setattr(fns, "numba_available", lambda: False)
    monkeypatch.setattr(cc, "numba_available", lambda: False)
    root = Path(__file__).resolve().parent.parent
    doc = {"name": "code_no_numba", "calibration": str(root / "calibrations/fitted/card_path.yaml"), "rounds": 300,
           "function": "invert",
           "nodes": [{"name": "g", "kind": "generator"}, {"name": "card", "kind": "link_card"},
                     {"name": "c", "kind": "consumer", "device": "epyc7282", "model": "code"}],
           "links": [{"from": "g", "to": "card", "kind": "on_card"}, {"from": "card", "to": "c", "kind": "pcie"}]}
    p = tmp_path / "loop.yaml"
    p.write_text(yaml.safe_dump(doc))
    assert main(["run", str(p), "--out", str(tmp_path / "o"), "--quiet", "--no-plot", "--no-csv"]) == 0
    dec = {"name": "dec_no_numba", "calibration": doc["calibration"],
           "hosting": str(root / "calibrations/hosting.yaml"),
           "decode": {"code": "rep", "distance": 5, "p": 0.001, "shots": 200, "decoder": "lookup",
                      "placements": [{"device": "epyc7282", "model": "code"}]}}
    q = tmp_path / "dec.yaml"  # rep d=5: a table of the session (the bundled rep3 and steane7 have C now)
    q.write_text(yaml.safe_dump(dec))
    capsys.readouterr()
    assert main(["decode", str(q), "--out", str(tmp_path / "d"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "decode.placements[0].model: 'code'" in err[0] and "is Python only" in err[0], err
