"""Bad input files: every one stops `twin run` (or the loader) with ONE line that names the file,
the dotted key and the offending value, exit code 2, never a traceback.

The documented format (docs/scenarios.md, twin/config/errors.py) is

    twin: error: FILE: KEY: VALUE: what is wrong

so the checks below look for ``FILE: KEY: VALUE: `` at the start of the line, with VALUE as
Python's ``repr`` of what the file holds. Each bad file is a copy of a file that loads (checked
first, so a mutation is the only thing wrong with it).
"""
from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from twin.calibration.measured import load_measured
from twin.calibration.params import load_params
from twin.commands import main
from twin.config import ConfigError
from twin.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "card_path_64b.yaml"
# The prior parameter set: a valid set with the same five consumers as the fitted one, so these
# tests do not depend on `twin calibrate` having been run.
PRIOR = ROOT / "calibrations" / "card_path.yaml"
MEASURED = ROOT / "calibrations" / "measured" / "card_path_64b.yaml"
PREFIX = "twin: error: "


# -- helpers -------------------------------------------------------------------------------------

def base_scenario() -> dict:
    doc = yaml.safe_load(SCENARIO.read_text())
    doc["calibration"] = str(PRIOR)
    doc["measured"] = str(MEASURED)
    return doc


def write(tmp_path: Path, doc, name: str = "bad.yaml") -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return p


def twin_run_error(path: Path, tmp_path: Path, capsys) -> str:
    """Run `twin run PATH` in-process; it must exit 2 with one `twin: error:` line on stderr,
    nothing that looks like a traceback, and write no results. Returns that line."""
    out = tmp_path / "out"
    rc = main(["run", str(path), "--rounds", "10", "--verify-rounds", "5", "--out", str(out), "--quiet",
               "--no-plot", "--no-csv"])
    captured = capsys.readouterr()
    assert rc == 2, captured
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(PREFIX), lines[0]
    assert "Traceback" not in captured.err + captured.out
    assert not (out / "results.json").exists()
    return lines[0]


def assert_names(line: str, path: Path, choices: list[tuple[str, str]]) -> None:
    """``line`` is ``twin: error: PATH: KEY: VALUE: ...`` for one of the (KEY, VALUE) ``choices``."""
    heads = [f"{PREFIX}{path}: {key}: {value}: " for key, value in choices]
    assert any(line.startswith(h) for h in heads), f"{line!r} does not start with any of {heads!r}"


def mutate(fn):
    def apply(doc: dict) -> dict:
        doc = copy.deepcopy(doc)
        fn(doc)
        return doc
    return apply


def set_key(key, value):
    return mutate(lambda d: d.__setitem__(key, value))


def set_traffic(**kv):
    return mutate(lambda d: d["traffic"].update(kv))


def set_node(i, key, value):
    return mutate(lambda d: d["nodes"][i].__setitem__(key, value))


def set_link(i, key, value):
    return mutate(lambda d: d["links"][i].__setitem__(key, value))


# -- the unmutated copies load: the mutations are the only fault -------------------------------

def test_base_copies_are_valid(tmp_path):
    loaded = load_scenario(write(tmp_path, base_scenario(), "good.yaml"))
    assert [n.device for n in loaded.scenario.consumers()] == ["v80", "epyc7282", "mi210", "epyc9755", "mi355x"]
    assert load_params(PRIOR).fit is not None
    assert set(load_measured(MEASURED).consumers) == {"v80", "epyc7282", "mi210", "epyc9755", "mi355x"}


# -- scenario files through `twin run` -----------------------------------------------------------
# In the scenario copy, nodes are [gen, u55c, v80, epyc7282, mi210, epyc9755, mi355x] and
# links[1] is u55c -> v80 (pcie).

SCENARIO_CASES = [
    ("unknown-top-level-key", set_key("colour", "blue"), [("colour", "'blue'")]),
    ("rounds-zero", set_key("rounds", 0), [("rounds", "0")]),
    ("rounds-negative", set_key("rounds", -5), [("rounds", "-5")]),
    ("rounds-word", set_key("rounds", "many"), [("rounds", "'many'")]),
    ("frame-bytes-zero", set_key("frame_bytes", 0), [("frame_bytes", "0")]),
    ("frame-bytes-negative", set_key("frame_bytes", -64), [("frame_bytes", "-64")]),
    ("frame-bytes-word", set_key("frame_bytes", "big"), [("frame_bytes", "'big'")]),
    ("frame-shorter-than-syndrome", lambda d: set_key("function", "decode_surface5")(set_key("frame_bytes", 8)(d)),
     [("frame_bytes", "8")]),
    ("traffic-mode", set_traffic(mode="burst"), [("traffic.mode", "'burst'")]),
    # the missing value itself: errors.py's convention for a missing key is '<missing>'
    ("open-loop-without-period", set_traffic(mode="open_loop"),
     [("traffic.period", "'<missing>'"), ("traffic.period", "None")]),
    ("period-unit", set_traffic(mode="open_loop", period="5 parsecs"), [("traffic.period", "'5 parsecs'")]),
    # 5002 ns / 4 ns = 1250.5 cycles of the default clock_period
    ("period-not-whole-cycles", set_traffic(mode="open_loop", period="5002 ns"), [("traffic.period", "'5002 ns'")]),
    # 5004 ns / 8 ns = 625.5 cycles
    ("period-not-whole-cycles-8ns", set_traffic(mode="open_loop", period="5004 ns", clock_period="8 ns"),
     [("traffic.period", "'5004 ns'")]),
    ("ppm-on-card-clock", set_traffic(ppm=12.5), [("traffic.ppm", "12.5")]),
    # a closed loop sends on the reply: a period would be silently ignored
    ("period-on-a-closed-loop", set_traffic(mode="closed_loop", period="5 us"), [("traffic.period", "'5 us'")]),
    ("encoding", set_key("encoding", "zigzag"), [("encoding", "'zigzag'")]),
    ("model-rtl-on-a-cpu", set_node(3, "model", "rtl"), [("nodes[3].model", "'rtl'")]),
    ("model-banana", set_node(4, "model", "banana"), [("nodes[4].model", "'banana'")]),
    ("device-not-in-calibration", set_node(3, "device", "xeon8480"), [("nodes[3].device", "'xeon8480'")]),
    ("duplicate-node-name", set_node(3, "name", "v80"), [("nodes[3].name", "'v80'")]),
    ("link-to-unknown-node", set_link(1, "to", "ghost"), [("links[1].to", "'ghost'")]),
    ("consumer-not-on-pcie", set_link(1, "kind", "on_card"),
     [("links[1].kind", "'on_card'"), ("nodes[2].name", "'v80'")]),
    ("two-generators", mutate(lambda d: d["nodes"].append({"name": "gen2", "kind": "generator"})),
     [("nodes[7].kind", "'generator'"), ("nodes[7].name", "'gen2'")]),
    ("calibration-missing", set_key("calibration", "nowhere/card_path.yaml"),
     [("calibration", "'nowhere/card_path.yaml'")]),
    ("measured-missing", set_key("measured", "nowhere/measured.yaml"), [("measured", "'nowhere/measured.yaml'")]),
]


@pytest.mark.parametrize("case", SCENARIO_CASES, ids=[c[0] for c in SCENARIO_CASES])
def test_bad_scenario_names_file_key_value(case, tmp_path, capsys):
    _, fn, choices = case
    path = write(tmp_path, fn(base_scenario()))
    line = twin_run_error(path, tmp_path, capsys)
    assert_names(line, path, choices)


def test_period_unit_error_is_the_documented_line(tmp_path, capsys):
    """docs/scenarios.md shows this exact line for a period in parsecs."""
    path = write(tmp_path, set_traffic(mode="open_loop", period="5 parsecs")(base_scenario()))
    line = twin_run_error(path, tmp_path, capsys)
    assert line == (f"twin: error: {path}: traffic.period: '5 parsecs': unknown time unit 'parsecs' in "
                    f"'5 parsecs' (use ps, ns, us, ms, s)")


@pytest.mark.parametrize("model", ["gpu", "verilog", "rlt"])
def test_unknown_models_name_the_known_ones(model, tmp_path, capsys):
    path = write(tmp_path, set_node(2, "model", model)(base_scenario()))
    line = twin_run_error(path, tmp_path, capsys)
    assert_names(line, path, [("nodes[2].model", repr(model))])
    assert "must be one of sim, code, rtl, live" in line


def test_device_error_lists_the_calibrations_consumers(tmp_path, capsys):
    path = write(tmp_path, set_node(3, "device", "xeon8480")(base_scenario()))
    line = twin_run_error(path, tmp_path, capsys)
    for name in ("v80", "epyc7282", "mi210", "epyc9755", "mi355x"):
        assert name in line.split("'xeon8480'", 1)[1]


def test_relative_calibration_path_is_resolved_against_the_scenario(tmp_path, capsys):
    """The error shows the path as written and where it was looked for (next to the scenario)."""
    sub = tmp_path / "studies"
    sub.mkdir()
    path = write(sub, set_key("calibration", "../cal/none.yaml")(base_scenario()))
    line = twin_run_error(path, tmp_path, capsys)
    assert_names(line, path, [("calibration", "'../cal/none.yaml'")])
    assert str((tmp_path / "cal" / "none.yaml").resolve()) in line


def test_not_yaml(tmp_path, capsys):
    # line 3 closes a flow mapping with ']' : the parser stops there
    path = write(tmp_path, "name: x\ncalibration: y.yaml\ntraffic: {mode: open_loop]\n")
    line = twin_run_error(path, tmp_path, capsys)
    assert line.startswith(f"{PREFIX}{path}: line 3: "), line
    assert "YAML" in line


def test_top_level_list(tmp_path, capsys):
    path = write(tmp_path, "- name: x\n- rounds: 5\n")
    line = twin_run_error(path, tmp_path, capsys)
    assert line.startswith(f"{PREFIX}{path}: "), line
    assert "[{'name': 'x'}, {'rounds': 5}]" in line
    assert "mapping" in line


def test_empty_file(tmp_path, capsys):
    path = write(tmp_path, "")
    line = twin_run_error(path, tmp_path, capsys)
    assert line.startswith(f"{PREFIX}{path}: "), line


def test_missing_scenario_file(tmp_path, capsys):
    path = tmp_path / "no_such_scenario.yaml"
    line = twin_run_error(path, tmp_path, capsys)
    assert line.startswith(f"{PREFIX}{path}: "), line
    assert "No such file" in line or "cannot read" in line


def test_bad_calibration_named_by_a_scenario_names_the_calibration_file(tmp_path, capsys):
    cal = yaml.safe_load(PRIOR.read_text())
    cal["hosts"]["epyc7282"]["p2p"]["latency_ns"] = -5
    cal_path = write(tmp_path, cal, "cal.yaml")
    path = write(tmp_path, set_key("calibration", "cal.yaml")(base_scenario()))
    line = twin_run_error(path, tmp_path, capsys)  # a file the scenario names: described, not quoted (trust)
    assert_names(line, cal_path, [("hosts.epyc7282.p2p.latency_ns", "<a number>")])


def test_error_through_a_real_process(tmp_path):
    """The installed entry point: real exit status 2, exactly one line on stderr, nothing on stdout."""
    path = write(tmp_path, set_traffic(mode="open_loop", period="5 parsecs")(base_scenario()))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "twin", "run", str(path), "--rounds", "10",
                           "--out", str(tmp_path / "out"), "--quiet"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert proc.stderr.count("\n") == 1 and proc.stderr.endswith("\n"), proc.stderr
    assert_names(proc.stderr.strip(), path, [("traffic.period", "'5 parsecs'")])
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


# -- parameter sets (load_params) -----------------------------------------------------------------

def base_params() -> dict:
    return yaml.safe_load(PRIOR.read_text())


def params_error(tmp_path: Path, doc: dict) -> tuple[Path, ConfigError]:
    path = write(tmp_path, doc, "params.yaml")
    with pytest.raises(ConfigError) as ei:
        load_params(path)
    err = ei.value
    assert "\n" not in str(err)
    assert str(err).startswith(f"{path}: "), str(err)
    return path, err


def assert_err(err: ConfigError, path: Path, key: str, value: str) -> None:
    assert str(err).startswith(f"{path}: {key}: {value}: "), str(err)
    assert err.key == key


def test_params_unknown_top_level_key(tmp_path):
    d = base_params()
    d["flavour"] = "vanilla"
    path, err = params_error(tmp_path, d)
    assert_err(err, path, "flavour", "'vanilla'")
    assert "unknown key" in str(err)


def test_params_unknown_nested_key(tmp_path):
    d = base_params()
    d["hosts"]["epyc9755"]["p2p"]["latency_us"] = 1
    path, err = params_error(tmp_path, d)
    assert_err(err, path, "hosts.epyc9755.p2p.latency_us", "1")


def test_params_negative_latency(tmp_path):
    d = base_params()
    d["hosts"]["epyc7282"]["host_memory"]["latency_ns"] = -800
    path, err = params_error(tmp_path, d)
    assert_err(err, path, "hosts.epyc7282.host_memory.latency_ns", "-800")


def test_params_negative_card_time(tmp_path):
    d = base_params()
    d["card"]["reply_send_ns"] = -30
    path, err = params_error(tmp_path, d)
    assert_err(err, path, "card.reply_send_ns", "-30")


def test_params_consumer_names_missing_host(tmp_path):
    d = base_params()
    d["consumers"]["mi210"]["host"] = "epyc9999"
    path, err = params_error(tmp_path, d)
    assert_err(err, path, "consumers.mi210.host", "'epyc9999'")


def test_params_fit_names_nonexistent_parameter(tmp_path):
    d = base_params()
    d["fit"]["groups"][0]["free"]["hosts.epyc7282.p2p.warp_ns"] = [1, 2]
    path, err = params_error(tmp_path, d)
    assert err.key.startswith("fit.groups[0].free"), str(err)
    # the offending name must be visible in the head of the line (key or value), not only in prose
    head = str(err)[len(f"{path}: "):].split(": ", 2)
    assert "hosts.epyc7282.p2p.warp_ns" in head[0] + head[1], str(err)


def test_params_tie_names_nonexistent_parameter(tmp_path):
    d = base_params()
    d["fit"]["tie"]["hosts.epyc9755.p2p.latency_ns"] = "hosts.epyc9999.p2p.latency_ns"
    path, err = params_error(tmp_path, d)
    assert err.key.startswith("fit.tie"), str(err)
    assert "hosts.epyc9999.p2p.latency_ns" in str(err)


@pytest.mark.parametrize("bounds", [[1500, 300], [300, 300]])
def test_params_fit_bounds_low_not_below_high(bounds, tmp_path):
    d = base_params()
    d["fit"]["groups"][1]["free"]["hosts.epyc9755.host_memory.latency_ns"] = bounds
    path, err = params_error(tmp_path, d)
    assert err.key.startswith("fit.groups[1].free"), str(err)
    text = str(err)
    assert "hosts.epyc9755.host_memory.latency_ns" in text
    lo, hi = bounds
    assert f"{lo}" in text.split("hosts.epyc9755.host_memory.latency_ns", 1)[1]
    assert f"{hi}" in text.split("hosts.epyc9755.host_memory.latency_ns", 1)[1]


@pytest.mark.parametrize("poll_ns", [6, 2, 4.5])
def test_params_card_poll_period_off_the_4ns_clock(poll_ns, tmp_path):
    """250 MHz -> 4 ns cycles: 6, 2 and 4.5 ns are not whole cycles (8 ns would be)."""
    d = base_params()
    d["card"]["reply_poll_period_ns"] = poll_ns
    path, err = params_error(tmp_path, d)
    assert_err(err, path, "card.reply_poll_period_ns", repr(poll_ns))


def test_params_card_poll_period_on_the_clock_loads(tmp_path):
    d = base_params()
    d["card"]["reply_poll_period_ns"] = 8  # two 4 ns cycles
    assert load_params(write(tmp_path, d, "ok.yaml")).card.reply_poll_period_ns == 8


def test_calibrate_rejects_bad_prior_with_exit_2(tmp_path, capsys):
    d = base_params()
    d["hosts"]["epyc7282"]["p2p"]["jitter_ns"] = -1
    path = write(tmp_path, d, "prior.yaml")
    rc = main(["calibrate", str(path), "--out", str(tmp_path / "fitted.yaml"), "--rounds", "10",
               "--maxiter", "1", "--popsize", "1"])
    cap = capsys.readouterr()
    assert rc == 2
    lines = cap.err.splitlines()
    assert len(lines) == 1 and "Traceback" not in cap.err + cap.out
    assert_names(lines[0], path, [("hosts.epyc7282.p2p.jitter_ns", "-1")])
    assert not (tmp_path / "fitted.yaml").exists()


def test_calibrate_needs_a_fit_section(tmp_path, capsys):
    d = base_params()
    del d["fit"]
    path = write(tmp_path, d, "prior.yaml")
    rc = main(["calibrate", str(path), "--out", str(tmp_path / "fitted.yaml")])
    cap = capsys.readouterr()
    assert rc == 2
    lines = cap.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{PREFIX}{path}: fit: "), cap.err
    assert not (tmp_path / "fitted.yaml").exists()


# -- measurement files (load_measured) -----------------------------------------------------------

def base_measured() -> dict:
    return yaml.safe_load(MEASURED.read_text())


@pytest.mark.parametrize("stat,value", [("p50", "fast"), ("p90", "2.492 parsecs"), ("p50", "us 2.4")])
def test_measured_unreadable_percentile(stat, value, tmp_path):
    d = base_measured()
    d["consumers"]["v80"][stat] = value
    path = write(tmp_path, d, "measured.yaml")
    with pytest.raises(ConfigError) as ei:
        load_measured(path)
    assert_err(ei.value, path, f"consumers.v80.{stat}", repr(value))


def test_measured_unknown_key(tmp_path):
    d = base_measured()
    d["consumers"]["mi210"]["p95"] = "3.9 us"
    path = write(tmp_path, d, "measured.yaml")
    with pytest.raises(ConfigError) as ei:
        load_measured(path)
    assert_err(ei.value, path, "consumers.mi210.p95", "'3.9 us'")


def test_bad_measured_named_by_a_scenario_exits_2(tmp_path, capsys):
    d = base_measured()
    d["consumers"]["v80"]["p50"] = "fast"
    m_path = write(tmp_path, d, "measured.yaml")
    path = write(tmp_path, set_key("measured", "measured.yaml")(base_scenario()))
    line = twin_run_error(path, tmp_path, capsys)  # a file the scenario names: described, not quoted (trust)
    assert_names(line, m_path, [("consumers.v80.p50", "<a string of 4 characters>")])
    assert "fast" not in line


@pytest.mark.parametrize("scenario,node,model", [("mesh_two_controllers_one_gpu.yaml", None, "rtl"),
                                                 ("backline_roce.yaml", None, "rtl")])
def test_models_a_path_cannot_run_are_refused(scenario, node, model, tmp_path, capsys):
    """RTL stands for FPGA logic (the mesh's consumer is an MI210) and the RTL link card is the U55C's
    engine, not a RoCE controller: say so, don't ignore it."""
    import yaml
    src = Path(__file__).resolve().parent.parent / "scenarios" / scenario
    doc = yaml.safe_load(src.read_text())
    i = next(j for j, n in enumerate(doc["nodes"]) if n["kind"] == ("consumer" if "mesh" in scenario else "link_card"))
    doc["nodes"][i]["model"] = model
    for key in ("calibration", "measured"):
        if doc.get(key):
            doc[key] = str((src.parent / doc[key]).resolve())
    path = tmp_path / scenario
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    line = twin_run_error(path, tmp_path, capsys)
    assert_names(line, path, [(f"nodes[{i}].model", repr(model))])


# -- the wrong kind of file ----------------------------------------------------------------------

DECODE = ROOT / "scenarios" / "decode_rep3.yaml"


@pytest.mark.parametrize("argv", [["run"], ["sweep", "--param", "frame_bytes=64"], ["topology"]])
def test_a_decode_scenario_given_to_run_sweep_topology_says_use_twin_decode(argv, tmp_path, capsys):
    out = tmp_path / "o.png" if argv[0] == "topology" else tmp_path
    rc = main([argv[0], str(DECODE), *argv[1:], "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 2 and captured.err.splitlines() == [
        f"{PREFIX}{DECODE}: decode: '{{...}}': this is a decode scenario (it has a decode block); "
        f"run it with `twin decode {DECODE}`"], captured.err


def test_a_loop_scenario_given_to_decode_says_use_twin_run(tmp_path, capsys):
    rc = main(["decode", str(SCENARIO), "--out", str(tmp_path)])
    line = capsys.readouterr().err.strip()
    assert rc == 2 and line.startswith(f"{PREFIX}{SCENARIO}: nodes: ") and "twin run" in line


@pytest.mark.parametrize("cmd, base, target", [("run", SCENARIO, "card_path_64b.yaml"),
                                               ("decode", DECODE, "decode_rep3.yaml")])
def test_calibration_naming_a_scenario_is_not_a_parameter_set(cmd, base, target, tmp_path, capsys):
    (tmp_path / target).write_text(base.read_text())
    doc = yaml.safe_load(base.read_text())
    doc["calibration"] = target
    path = write(tmp_path, doc)
    rc = main([cmd, str(path), "--out", str(tmp_path / "out")])
    line = capsys.readouterr().err.strip()
    assert rc == 2 and line == (f"{PREFIX}{path}: calibration: '{target}': {target} is a scenario, not a "
                                "parameter set; name a parameter set (e.g. calibrations/fitted/card_path.yaml)")


def test_an_error_inside_a_union_names_the_files_keys_not_pydantics_member_tags():
    """pydantic puts the union member it tried (``list[function-after[...]]``) and validators'
    tags into an error's location; the one line names the file's keys only, an index kept."""
    from twin.config.load import _file_loc
    data = {"consumers": {"epyc7282": {"idle": 0}, "v80": {"idle": ["prior"]}}}
    tag = "list[function-after[_one_form(), IdleModel]]"
    assert _file_loc(data, ("consumers", "epyc7282", "idle", tag)) == ("consumers", "epyc7282", "idle")
    assert _file_loc(data, ("consumers", "v80", "idle", tag, 0)) == ("consumers", "v80", "idle", 0)
    assert _file_loc(data, ("consumers", "epyc7282", "function-after[x]", "idle", "str")) == \
        ("consumers", "epyc7282", "idle")
    assert _file_loc(data, ("consumers", "mi210", "idle")) == ("consumers", "mi210", "idle")  # a key it lacks
