"""A user decoder (decode.function) that fails at load or at run time: one line naming the scenario
file, decode.function, its value, the shot and what was wrong; `twin decode` exits 2."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twin.commands import main
from twin.config import ConfigError

ROOT = Path(__file__).resolve().parent.parent

BAD = '''
def raises(p):
    raise RuntimeError("boom")
def none(p):
    return None
def text(p):
    return "1"
def empty(p):
    return b""
def long(p):
    return bytes(100)
def two(p, q):
    return b"\\0"
def late(p):
    if p[0]:
        raise KeyError("odd syndrome")
    return b"\\0"
def array(p):
    import numpy as np
    return np.array([p[0] & 1], np.uint8)
NOT_CALLABLE = 3
'''


def scenario(folder: Path, spec: str, name: str = "s.yaml") -> Path:
    text = (ROOT / "scenarios/decode_rep3_user.yaml").read_text()
    text = text.replace("examples.rep3_rule:decode", spec).replace("../calibrations", str(ROOT / "calibrations"))
    p = folder / name
    p.write_text(text)
    return p


@pytest.fixture
def bad(tmp_path):
    (tmp_path / "qec_err_dec.py").write_text(BAD)
    yield tmp_path
    sys.modules.pop("qec_err_dec", None)


@pytest.mark.parametrize("fn,problem", [
    ("raises", r"failed at shot 0 \(payload 00+\): it raised RuntimeError: boom$"),
    ("none", "failed at shot 0 .*: it returned None, expected bytes \\(1 byte\\)$"),
    ("text", "failed at shot 0 .*: it returned str '1', expected bytes \\(1 byte\\)$"),
    ("empty", "failed at shot 0 .*: it returned 0 bytes, expected 1 byte "),
    ("long", "failed at shot 0 .*: it returned 100 bytes, expected 1 byte "),
])
def test_failing_decoder_is_one_line_exit_2(bad, capsys, fn, problem):
    p = scenario(bad, f"qec_err_dec:{fn}")
    assert main(["decode", str(p), "--shots", "200", "--quiet", "--out", str(bad / "out")]) == 2
    note, err = capsys.readouterr().err.strip().split("\n", 1)  # the scenario names code: a line says so first
    assert note.startswith(f"twin: note: scenario {p} runs code: module qec_err_dec (key decode.function)")
    assert "\n" not in err and "Traceback" not in err
    import re
    assert re.match(rf"twin: error: {re.escape(str(p))}: decode\.function: 'qec_err_dec:{fn}': {problem}", err), err


def test_failure_names_the_first_failing_shot(bad):
    from twin.qec.load import load_decode
    from twin.qec.workload import sample
    from twin.studies.decode import run_decode_study
    ld = load_decode(scenario(bad, "qec_err_dec:late"))
    with pytest.raises(ConfigError, match=r"decode\.function.*failed at shot (\d+) \(payload ([0-9a-f]+)\): "
                                          r"it raised KeyError: 'odd syndrome'") as ei:
        run_decode_study(ld, shots=2000)
    shot = int(ei.value.problem.split("shot ")[1].split(" ")[0])
    w = sample("rep", 3, 1, 0.005, 2000, seed=ld.sc.seed)
    first = [i for i, f in enumerate(w.frames()) if f[0]][0]
    assert shot == first > 0
    # the function is given the shot's syndrome bytes (ceil(D/8) = 1 here), not the frame's padding
    assert ei.value.problem.split("payload ")[1].startswith(w.frames()[first][:1].tobytes().hex() + ")")


def test_failure_names_the_round_for_per_round_requests(bad):
    from twin.qec.decoders import FunctionDecoder, FunctionFailed
    from twin.qec.load import load_decode
    from twin.qec.workload import sample
    from twin.studies.decode import function_failure
    ld = load_decode(scenario(bad, "qec_err_dec:late"))
    w = sample("rep", 3, 3, 0.05, 50, seed=3, per="round")
    frames = w.cumulative_frames()
    j = [i for i, f in enumerate(frames) if f[0]][0]
    dec = FunctionDecoder(lambda p: b"\0\0", w.n_detectors, 1)
    with pytest.raises(FunctionFailed) as ei:
        dec.decode_payload(frames[j].tobytes())
    e = function_failure(ld, w, ei.value)
    g = w.requests_per_shot
    assert f"failed at shot {j // g}, round {j % g} of {g}" in str(e) and "2 bytes, expected 1 byte" in str(e)


@pytest.mark.parametrize("fn,problem", [
    ("two", r"takes \(p, q\); a decoder takes one positional argument, the request payload \(bytes\)"),
    ("NOT_CALLABLE", "is a int, not a function"),
    ("missing", "module qec_err_dec .* has no 'missing'"),
])
def test_unusable_function_is_refused_at_load(bad, fn, problem):
    from twin.qec.load import load_decode
    with pytest.raises(ConfigError, match=rf"decode\.function: 'qec_err_dec:{fn}': {problem}"):
        load_decode(scenario(bad, f"qec_err_dec:{fn}"))


def test_bytes_like_replies_are_accepted(bad):
    from twin.qec.load import load_decode
    from twin.studies.decode import run_decode_study
    doc = run_decode_study(load_decode(scenario(bad, "qec_err_dec:array")), shots=300).document
    assert all(p["identical_corrections"] == 300 for p in doc["placements"])


def test_function_module_search_order_and_no_lasting_sys_path(tmp_path, monkeypatch):
    """decode.function's module: the scenario's folder, then its parent, then the current directory."""
    from twin.qec.load import resolve_function
    scen, here = tmp_path / "a" / "scen", tmp_path / "cwd"
    scen.mkdir(parents=True)
    here.mkdir()
    monkeypatch.chdir(here)
    p = scenario(scen, "x:decode")
    before = list(sys.path)
    names = ["qec_order_own", "qec_order_parent", "qec_order_cwd", "qec_order_both"]
    (scen / "qec_order_own.py").write_text("def decode(p):\n    return b'o'\n")
    (scen.parent / "qec_order_parent.py").write_text("def decode(p):\n    return b'p'\n")
    (here / "qec_order_cwd.py").write_text("def decode(p):\n    return b'c'\n")
    (scen / "qec_order_both.py").write_text("def decode(p):\n    return b'o'\n")
    (scen.parent / "qec_order_both.py").write_text("def decode(p):\n    return b'p'\n")
    try:
        got = [resolve_function(f"{n}:decode", p)(b"\0") for n in names]
        assert got == [b"o", b"p", b"c", b"o"]  # the scenario's own folder first
        assert sys.path == before
        msg = (rf"decode\.function: 'qec_nowhere:decode': cannot import it \(no module "
               rf"'qec_nowhere' in {scen}, {scen.parent}, {here} or on the import path\)")
        with pytest.raises(ConfigError, match=msg):
            resolve_function("qec_nowhere:decode", p)
    finally:
        for n in names:
            sys.modules.pop(n, None)


def test_bundled_user_scenario_copied_outside_the_repo_runs_from_the_repo_root(tmp_path, monkeypatch):
    from twin.qec.load import load_decode
    p = scenario(tmp_path, "examples.rep3_rule:decode")
    monkeypatch.chdir(ROOT)
    assert load_decode(p).sc.decode.function == "examples.rep3_rule:decode"
