"""The trust model (issue 29, "Security"): a scenario is a program. Outputs named from input files
never leave their folder; a scenario that names code outside the twin says so when loaded or
copied; ``decode.function`` (and a sinter class) comes from the user's own files unless the user
allows more; an error on a file another file names prints none of that file's content."""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.config import ConfigError
from twin.config.trust import announcing

ROOT = Path(__file__).resolve().parent.parent
CAL = ROOT / "calibrations/fitted/card_path.yaml"
HOSTING = ROOT / "calibrations/hosting.yaml"
SECRET = "hunter2-swordfish-0xDEADBEEF"
SECRETS = {  # readable files a hostile scenario might name, each holding the secret
    "key": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}AAAAB3NzaC1yc2E\n-----END OPENSSH PRIVATE KEY-----\n",
    "passwd": f"root:x:0:0:{SECRET}:/root:/bin/bash\n",
    "env": f"TOKEN={SECRET}\n",
    "yaml": f"hosts: {SECRET}\ntoken: {SECRET}\n",
    "tab": f"a: 1\n\t{SECRET}\n",
    "json": json.dumps({"source": SECRET, "setup": [SECRET], "consumers": {SECRET: 1}}) + "\n",
}


@pytest.fixture(autouse=True)
def no_user_modules_left(tmp_path):
    """Each test imports its decoder modules afresh (a module of one name from another folder is refused)."""
    import sys
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        where = getattr(sys.modules[name], "__file__", None) or ""
        if where.startswith((str(tmp_path), str(ROOT / "examples"))) or name == "examples":
            del sys.modules[name]


def decode_doc(tmp_path: Path, decode: dict, name: str = "dec", **top) -> Path:
    doc = {"name": name, "calibration": str(CAL), "hosting": str(HOSTING), "seed": 1, **top,
           "decode": {"code": "rep", "distance": 3, "p": 0.02, "shots": 50,
                      "placements": [{"device": "epyc7282", "mode": "inline"}], **decode}}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def run_doc(tmp_path: Path, name: str = "run", **changes) -> Path:
    doc = yaml.safe_load((ROOT / "scenarios/card_path_64b.yaml").read_text())
    doc["calibration"], doc["measured"] = str(CAL), str(ROOT / "calibrations/measured/card_path_64b.yaml")
    doc.update(changes)
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def one_line(msg: str, file, key: str) -> None:
    assert "\n" not in msg and msg.startswith(f"{file}: {key}: "), msg


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    """One synthetic live run folder (tests/test_validate.py builds it), copied per case."""
    from test_validate import synthetic_run, truth_set
    base = tmp_path_factory.mktemp("live")
    return synthetic_run(base, "run", truth_set(base), rounds=400)


# -- 1. outputs named from inputs stay in their folder -------------------------------------------------
@pytest.mark.parametrize("name", ["../../escaped", "/tmp/escaped", "a/b", ".hidden", "a\\b", "x" * 101])
def test_a_node_name_that_is_not_a_plain_name_is_refused_at_load(tmp_path, name):
    """A node's name stands in the --trace wave files (waves.<loop>.<node>.vcd): a path there was
    a traceback, or a file written outside the run folder."""
    from twin.scenario import load_scenario
    doc = yaml.safe_load((ROOT / "tests/rtl_user/scenario.yaml").read_text())
    doc["calibration"] = str(CAL)
    doc["nodes"][2]["rtl"]["sources"] = [str(ROOT / "tests/rtl_user/user_invert.v")]
    doc["nodes"][2]["name"] = name
    doc["links"][1]["to"] = name
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as e:
        load_scenario(p)
    one_line(str(e.value), p, "nodes[2].name")


def test_calibrate_decoders_default_file_is_named_inside_its_folder():
    """``twin calibrate decoder``'s default file is named from the scenario's decoder: never a path."""
    from twin.commands.calibrate_decoder import DEFAULT_FOLDER, _out
    from twin.qec.schema import Decode
    d = Decode.model_construct(decoder="sinter:../../../../tmp/escaped:Cls", code="rep", p=0.01)
    out = _out(argparse.Namespace(out=None, overwrite=True), d, [3])
    assert out.parent == DEFAULT_FOLDER and "/" not in out.name and not out.name.startswith("."), out


# -- 2. a scenario that names code says so ---------------------------------------------------------
def announced(load, path) -> list[str]:
    lines: list[str] = []
    with announcing(lines.append):
        load(path)
    return lines


def test_a_bundled_scenario_with_a_user_function_is_announced_when_loaded():
    from twin.qec.load import load_decode
    lines = announced(load_decode, ROOT / "scenarios/decode_rep3_user.yaml")
    assert lines == [f"twin: note: scenario {ROOT / 'scenarios/decode_rep3_user.yaml'} runs code: module "
                     "examples.rep3_rule (key decode.function); a scenario is a program: run only those you trust "
                     "(docs/scenarios.md, Trust)"]


def test_a_scenario_naming_no_code_is_not_announced():
    from twin.qec.load import load_decode
    from twin.scenario import load_scenario
    assert announced(load_scenario, ROOT / "scenarios/card_path_64b.yaml") == []
    assert announced(load_decode, ROOT / "scenarios/decode_rep3.yaml") == []
    assert announced(load_scenario, ROOT / "scenarios/v80_rtl.yaml") == []  # the twin's own Verilog


def test_twin_decode_and_scenarios_copy_announce_on_stderr(tmp_path, monkeypatch, capsys):
    import sys

    from twin.commands import main
    monkeypatch.chdir(tmp_path)
    for name in [m for m in sys.modules if m == "examples" or m.startswith("examples.")]:
        monkeypatch.delitem(sys.modules, name)  # the copy's own examples/ is imported (an earlier test's is put back)
    assert main(["scenarios", "copy", "decode_rep3_user"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [line for line in err if "runs code: module examples.rep3_rule (key decode.function)" in line]
    assert len(err) == 1 and err[0].startswith("twin: note: scenario decode_rep3_user.yaml runs code: ")
    assert main(["decode", "decode_rep3_user.yaml", "--shots", "20", "--quiet", "--no-plot", "--out", "o"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if "runs code" in ln]
    assert len(err) == 1 and "module examples.rep3_rule (key decode.function)" in err[0]


def build_c_rule(folder: Path) -> Path:
    from test_qec_decoders import C_RULE
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rule.c").write_text(C_RULE)
    lib = folder / "librule.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(folder / "rule.c")], check=True)
    return lib


SINTER_CLASS = """
import pymatching, sinter

class Dec(sinter.Decoder):
    def compile_decoder_for_dem(self, *, dem):
        return sinter.BuiltinCompiledDecoder(...) if False else _Compiled(dem)

class _Compiled(sinter.CompiledDecoder):
    def __init__(self, dem):
        self.m = pymatching.Matching.from_detector_error_model(dem)
    def decode_shots_bit_packed(self, *, bit_packed_detection_event_data):
        return self.m.decode_batch(bit_packed_detection_event_data, bit_packed_shots=True,
                                   bit_packed_predictions=True)
"""


def test_each_route_to_code_is_announced_with_its_key(tmp_path, monkeypatch):
    from twin.qec.load import load_decode
    from twin.scenario import load_scenario
    monkeypatch.chdir(tmp_path)
    build_c_rule(tmp_path)
    c = announced(load_decode, decode_doc(tmp_path, {"decoder": "function", "function": "librule.so:rep3_rule",
                                                     "cost": {"fixed": "50 ns"}}))
    assert len(c) == 1 and "runs code: C library librule.so (key decode.function)" in c[0]
    shutil.copy(ROOT / "examples/rep3_rule.py", tmp_path / "trust_rule.py")
    m = announced(load_decode, decode_doc(tmp_path, {"decoder": "function", "function": "trust_rule:decode",
                                                     "cost": {"fixed": "50 ns"}}, name="m"))
    assert len(m) == 1 and "runs code: module trust_rule (key decode.function)" in m[0]
    (tmp_path / "trust_sinter.py").write_text(SINTER_CLASS)
    s = announced(load_decode, decode_doc(tmp_path, {"decoder": "sinter:trust_sinter:Dec", "cost": {"fixed": "1 us"}},
                                          name="s"))
    assert len(s) == 1 and "runs code: sinter class trust_sinter:Dec (key decode.decoder)" in s[0]
    v = (ROOT / "tests/rtl_user/user_invert.v").read_text()
    (tmp_path / "sys.v").write_text(v.replace("always @(posedge clk) begin",
                                              'initial $system("touch pwned");\n    always @(posedge clk) begin', 1))
    doc = yaml.safe_load((ROOT / "tests/rtl_user/scenario.yaml").read_text())
    doc["calibration"] = str(CAL)
    doc["nodes"][2]["rtl"]["sources"] = ["sys.v"]
    (tmp_path / "rtl.yaml").write_text(yaml.safe_dump(doc))
    r = announced(load_scenario, tmp_path / "rtl.yaml")
    assert len(r) == 1 and "runs code: Verilog sys.v with $system (key nodes[2].rtl.sources[0])" in r[0]
    doc["nodes"][2]["rtl"]["sources"] = [str(ROOT / "tests/rtl_user/user_invert.v")]  # no system task: not announced
    (tmp_path / "rtl2.yaml").write_text(yaml.safe_dump(doc))
    assert announced(load_scenario, tmp_path / "rtl2.yaml") == []


def test_twin_sweep_and_run_announce_verilog_that_reaches_the_host(tmp_path, monkeypatch, capsys):
    """The announcement comes at load, before any Verilog is built (a bad --param ends the sweep there)."""
    from twin.commands import main
    monkeypatch.chdir(tmp_path)
    v = (ROOT / "tests/rtl_user/user_invert.v").read_text()
    (tmp_path / "sys.v").write_text(v.replace("always @(posedge clk) begin",
                                              'initial $system("id");\n    always @(posedge clk) begin', 1))
    doc = yaml.safe_load((ROOT / "tests/rtl_user/scenario.yaml").read_text())
    doc["calibration"] = str(CAL)
    doc["nodes"][2]["rtl"]["sources"] = ["sys.v"]
    (tmp_path / "rtl.yaml").write_text(yaml.safe_dump(doc))
    assert main(["sweep", "rtl.yaml", "--param", "no_such_key=1,2"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == ("twin: note: scenario rtl.yaml runs code: Verilog sys.v with $system (key "
                      "nodes[2].rtl.sources[0]); a scenario is a program: run only those you trust "
                      "(docs/scenarios.md, Trust)"), err
    assert len(err) == 2 and err[1].startswith("twin: error: "), err
    assert main(["run", "rtl.yaml", "--rounds", "10", "--trace", "1:20"]) == 2  # refused after the load
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "runs code: Verilog sys.v with $system" in err[0], err


def test_verilog_host_tasks_are_found_through_includes(tmp_path):
    from twin.config.trust import named_code
    (tmp_path / "inc.vh").write_text('initial begin fd = $fopen("/etc/x", "w"); end\n'
                                     'import "DPI-C" function int system(string cmd);\n')
    (tmp_path / "top.v").write_text('`include "inc.vh"\nmodule top; initial $c("system(\\"id\\");"); endmodule\n')
    refs = named_code({"nodes": [{}, {"rtl": {"sources": ["top.v"]}}]}, tmp_path / "s.yaml")
    assert [r.key for r in refs] == ["nodes[1].rtl.sources[0]"]
    assert refs[0].what == 'Verilog top.v with $c, $fopen, import "DPI-C"'


# -- 3. decode.function from the user's own modules only, unless the user allows more --------------------
@pytest.mark.parametrize("spec", ["os:system", "subprocess:getoutput", "posix:system", "builtins:exec",
                                  "numpy:frombuffer", "shutil:rmtree"])
def test_a_function_outside_the_users_own_files_is_refused_at_load(tmp_path, monkeypatch, spec):
    """``os:system`` with a crafted circuit was a shell command from a scenario with no code file."""
    from twin.qec.load import load_decode
    monkeypatch.delenv("TWIN_ALLOW_CODE", raising=False)
    p = decode_doc(tmp_path, {"decoder": "function", "function": spec, "cost": {"fixed": "50 ns"}})
    with pytest.raises(ConfigError) as e:
        load_decode(p)
    one_line(str(e.value), p, "decode.function")
    mod = spec.split(":")[0]
    assert f"'{spec}'" in str(e.value) and f"--allow-code {mod}" in str(e.value), str(e.value)
    assert "is not one of your own" in str(e.value)


def test_a_refused_function_is_one_line_with_no_note_that_it_runs(tmp_path, monkeypatch, capsys):
    """``twin decode`` of a scenario naming ``os:system`` prints the refusal alone: the note "runs code:
    module os" came first, though the module is refused and never runs."""
    from twin.commands import main
    monkeypatch.delenv("TWIN_ALLOW_CODE", raising=False)
    monkeypatch.setattr("twin.config.trust._ALLOWED", set())
    p = decode_doc(tmp_path, {"decoder": "function", "function": "os:system", "cost": {"fixed": "50 ns"}})
    assert main(["decode", str(p), "--shots", "20", "--quiet", "--no-plot", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "note" not in err and len(err.strip().splitlines()) == 1 and "'os:system'" in err, err


def test_the_user_allows_a_module_by_flag_or_environment_never_by_the_scenario(tmp_path, monkeypatch, capsys):
    from twin.commands import main
    from twin.qec.load import load_decode
    monkeypatch.delenv("TWIN_ALLOW_CODE", raising=False)
    monkeypatch.setattr("twin.config.trust._ALLOWED", set())
    monkeypatch.chdir(tmp_path)
    p = decode_doc(tmp_path, {"decoder": "function", "function": "builtins:bytes", "cost": {"fixed": "50 ns"}})
    assert main(["decode", str(p), "--shots", "20", "--quiet", "--no-plot", "--out", "o"]) == 2
    assert "builtins:bytes" in capsys.readouterr().err
    with pytest.raises(ConfigError):  # a scenario key cannot allow it
        load_decode(decode_doc(tmp_path, {"decoder": "function", "function": "builtins:bytes",
                                          "cost": {"fixed": "50 ns"}}, name="allow", allow_code=["builtins"]))
    monkeypatch.setenv("TWIN_ALLOW_CODE", "builtins")
    assert load_decode(p).sc.decode.function == "builtins:bytes"
    monkeypatch.delenv("TWIN_ALLOW_CODE")
    with pytest.raises(ConfigError):
        load_decode(p)
    assert main(["decode", str(p), "--shots", "20", "--quiet", "--no-plot", "--out", "o2", "--allow-code",
                 "builtins"]) == 0  # bytes(payload) is the identity: a 1-byte syndrome, a 1-byte reply


def test_a_c_library_outside_the_users_folders_is_refused_unless_allowed(tmp_path, monkeypatch):
    from twin.qec.load import load_decode
    monkeypatch.delenv("TWIN_ALLOW_CODE", raising=False)
    build_c_rule(tmp_path / "elsewhere")
    (tmp_path / "scen").mkdir()
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    p = decode_doc(tmp_path / "scen", {"decoder": "function", "function": "../elsewhere/librule.so:rep3_rule",
                                       "cost": {"fixed": "50 ns"}})
    with pytest.raises(ConfigError) as e:
        load_decode(p)
    one_line(str(e.value), p, "decode.function")
    assert "--allow-code librule.so" in str(e.value)
    monkeypatch.setenv("TWIN_ALLOW_CODE", "librule.so")
    assert load_decode(p).decoder is not None


def test_a_sinter_spec_naming_a_function_is_never_called(tmp_path, monkeypatch):
    """``sinter:os:abort`` called os.abort() with no arguments while making the 'class'."""
    from twin.qec.load import load_decode
    p = decode_doc(tmp_path, {"decoder": "sinter:os:abort", "cost": {"fixed": "1 us"}})
    with pytest.raises(ConfigError) as e:
        load_decode(p)
    one_line(str(e.value), p, "decode.decoder")
    assert "--allow-code os" in str(e.value)
    monkeypatch.setenv("TWIN_ALLOW_CODE", "os")
    with pytest.raises(ConfigError) as e:
        load_decode(p)
    assert "os:abort is a builtin_function_or_method, not a class" in str(e.value)


# -- 4. an error on a file another file names prints none of its content ---------------------------------
def secret_file(tmp_path: Path, kind: str) -> Path:
    f = tmp_path / f"secret_{kind}.txt"
    f.write_text(SECRETS[kind])
    return f


def no_secret(msg: str) -> None:
    assert "\n" not in msg and SECRET not in msg and "hunter2" not in msg and "OPENSSH" not in msg, msg


@pytest.mark.parametrize("kind", sorted(SECRETS))
@pytest.mark.parametrize("key", ["calibration", "measured", "gaps"])
def test_a_run_scenario_naming_a_readable_file_prints_none_of_it(tmp_path, kind, key):
    from twin.scenario import load_scenario
    from twin.studies.run import _measured
    f = secret_file(tmp_path, kind)
    if key == "gaps":
        doc = yaml.safe_load((ROOT / "scenarios/card_path_64b.yaml").read_text())
        p = run_doc(tmp_path, traffic={**doc["traffic"], "gaps": {"distribution": "file", "file": str(f)}})
    else:
        p = run_doc(tmp_path, **{key: str(f)})
    with pytest.raises(ConfigError) as e:
        _measured(load_scenario(p))
    no_secret(str(e.value))
    assert str(e.value).startswith((f"{p}: ", f"{f}: ")), str(e.value)


@pytest.mark.parametrize("kind", sorted(SECRETS))
@pytest.mark.parametrize("key", ["hosting", "decode.circuit", "decode.cost.file"])
def test_a_decode_scenario_naming_a_readable_file_prints_none_of_it(tmp_path, kind, key):
    from twin.qec.load import load_decode
    f = secret_file(tmp_path, kind)
    if key == "hosting":
        p = decode_doc(tmp_path, {"decoder": "matching"}, hosting=str(f))
    elif key == "decode.circuit":
        p = decode_doc(tmp_path, {"decoder": "matching", "code": None, "distance": None, "p": None,
                                  "circuit": str(f)})
        doc = yaml.safe_load(p.read_text())
        doc["decode"] = {k: v for k, v in doc["decode"].items() if v is not None}
        p.write_text(yaml.safe_dump(doc))
    else:
        p = decode_doc(tmp_path, {"decoder": "matching", "cost": {"how": "fitted", "file": str(f)}})
    with pytest.raises(ConfigError) as e:
        load_decode(p)
    no_secret(str(e.value))
    assert str(e.value).startswith((f"{p}: ", f"{f}: ")), str(e.value)


def test_a_file_the_user_names_on_the_command_line_is_still_quoted(tmp_path, capsys):
    """The user's own prior: its bad value is shown (only files named by another file are hidden)."""
    from twin.commands import main
    cal = tmp_path / "cal.yaml"
    cal.write_text(CAL.read_text().replace("engine_land_ns: 10.0", 'engine_land_ns: "ten-ns-please"', 1))
    assert main(["calibrate", str(cal), "--rounds", "10"]) == 2
    assert "'ten-ns-please'" in capsys.readouterr().err
    p = run_doc(tmp_path, calibration=str(cal))
    from twin.scenario import load_scenario
    with pytest.raises(ConfigError) as e:
        load_scenario(p)
    assert "ten-ns-please" not in str(e.value) and "card.engine_land_ns: <a string of 13 characters>" in str(e.value)


def test_a_run_folder_recording_a_readable_file_as_its_scenario_prints_none_of_it(live_run, tmp_path, capsys):
    from test_hostile_inputs import copy_run, results_of

    from twin.commands import main
    run = copy_run(live_run, tmp_path)
    doc = results_of(run)
    f = secret_file(tmp_path, "key")
    for c in doc["consumers"]:
        if c.get("live"):
            c["live"]["scenario_file"] = str(f)
    (run / "results.json").write_text(json.dumps(doc))
    assert main(["calibrate", "--from-live", str(run), "--rounds", "200", "--maxiter", "1", "--popsize", "2",
                 "--out", str(tmp_path / "fit.yaml")]) == 2
    err = capsys.readouterr().err
    no_secret(err.strip())
    assert err.count("\n") == 1 and str(f) in err, err


def test_hidden_values_are_described_not_shown():
    from twin.config.errors import describe, scrub
    assert describe("abc") == "<a string of 3 characters>" and describe({"a": 1}) == "<a mapping of 1 key>"
    assert describe([1, 2]) == "<a list of 2 items>" and describe(3.5) == "<a number>"
    assert scrub("unknown time unit 'parsecs' in '5 parsecs' (use ps, ns)", "", "5 parsecs") == \
        "unknown time unit '…' in '…' (use ps, ns)"
    assert scrub("Input should be 'a' or 'b'", "zzz: 1", "zzz") == "Input should be 'a' or 'b'"
    assert np.all([scrub(f"got '{SECRET[:10]}...{SECRET[-5:]}'", SECRET) == "got '…'"])


# -- found by benchmarks/hostile_inputs.py ------------------------------------------------------------
@pytest.mark.parametrize("key, value", [("encoding", "/tmp/x"), ("function", "../../x"), ("name", "/tmp/x")])
def test_a_run_folder_consumer_the_fit_cannot_replay_is_refused_by_key(live_run, tmp_path, capsys, key, value):
    """A live consumer's encoding, function or device that the fit would use was read unchecked (a
    pydantic ValidationError, a KeyError from the function registry or the parameter set)."""
    from test_hostile_inputs import copy_run, results_of

    from twin.commands import main
    run = copy_run(live_run, tmp_path)
    doc = results_of(run)
    doc["consumers"][0][key] = value
    (run / "results.json").write_text(json.dumps(doc))
    assert main(["calibrate", "--from-live", str(run), "--rounds", "200", "--maxiter", "1", "--popsize", "2",
                 "--out", str(tmp_path / "fit.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"twin: error: {run / 'results.json'}: "), err
    assert repr(value) in err and key in err, err


def test_an_allowance_that_is_not_a_name_is_one_line(capsys):
    from twin.commands import main
    assert main(["decode", "--allow-code", "a\x00b", "--shots", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("twin: error: --allow-code 'a\\x00b': "), err


def test_a_lookup_decoder_on_a_long_circuit_is_refused_before_stim_models_it(tmp_path):
    """A REPEAT of a syndrome round past a lookup table's 20 detectors: stim's detector error model
    of 100,000 rounds took minutes before the table's limit was asked (found as a hang)."""
    from scenario_mutations import limit

    from twin.qec.load import load_decode
    text = ("R 0 1 2\nREPEAT 100000 {\n    X_ERROR(0.01) 0 2\n    CX 0 1 2 1\n    MR 1\n    DETECTOR rec[-1]\n}\n"
            "M 0\nOBSERVABLE_INCLUDE(0) rec[-1]\n")
    (tmp_path / "long.stim").write_text(text)
    p = decode_doc(tmp_path, {"decoder": "lookup", "code": None, "distance": None, "p": None, "circuit": "long.stim"})
    doc = yaml.safe_load(p.read_text())
    doc["decode"] = {k: v for k, v in doc["decode"].items() if v is not None}
    p.write_text(yaml.safe_dump(doc))
    with limit(20), pytest.raises(ConfigError) as e:
        load_decode(p)
    one_line(str(e.value), p, "decode.decoder")
    assert "100000 detectors; a lookup table holds at most 20" in str(e.value)
