"""`twin` on awkward input a user may give: unusable output paths, overloaded open loops,
scenario names that are paths, duplicate keys, two nodes on one device."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from twin.calibration.measured import load_measured
from twin.commands import main
from twin.config import ConfigError
from twin.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "card_path_64b.yaml"
FITTED = ROOT / "calibrations" / "fitted" / "card_path.yaml"
PRIOR = ROOT / "calibrations" / "card_path.yaml"
MEASURED = ROOT / "calibrations" / "measured" / "card_path_64b.yaml"


def scenario(tmp_path: Path, **changes) -> Path:
    doc = yaml.safe_load(SCENARIO.read_text())
    doc["calibration"] = str(FITTED)
    doc["measured"] = str(MEASURED)
    doc.update(changes)
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def one_line_error(capsys, rc: int) -> str:
    cap = capsys.readouterr()
    assert rc == 2, cap
    lines = cap.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("twin: error: "), cap.err
    assert "Traceback" not in cap.err + cap.out
    return lines[0]


def test_out_inside_a_file_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    rc = main(["run", "--rounds", "50", "--verify-rounds", "10", "--quiet", "--out", str(tmp_path / "afile" / "sub")])
    assert "afile" in one_line_error(capsys, rc)


def test_calibrate_out_folder_is_refused_before_fitting(tmp_path, capsys):
    rc = main(["calibrate", str(PRIOR), "--out", str(tmp_path)])  # a full fit would take minutes
    assert str(tmp_path) in one_line_error(capsys, rc)


def test_name_cannot_be_a_path(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_scenario(scenario(tmp_path, name="../../escape"))
    assert e.value.key == "name" and e.value.value == "../../escape"


def test_duplicate_yaml_key_is_refused(tmp_path):
    p = scenario(tmp_path)
    p.write_text(p.read_text() + "seed: 5\n")  # the file already has a seed
    with pytest.raises(ConfigError) as e:
        load_scenario(p)
    assert "duplicate key 'seed'" in str(e.value)


def test_bare_number_for_a_duration_asks_for_a_unit(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_scenario(scenario(tmp_path, traffic={"mode": "open_loop", "period": 5000}))
    assert e.value.key == "traffic.period" and "needs a unit" in str(e.value)


@pytest.mark.parametrize("p50, p90, key", [("-2.428 us", "2.492 us", "p50"), ("2.5 us", "2.4 us", "p90")])
def test_measured_percentiles_positive_and_ordered(tmp_path, p50, p90, key):
    doc = yaml.safe_load(MEASURED.read_text())
    doc["consumers"]["v80"].update(p50=p50, p90=p90)
    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as e:
        load_measured(p)
    assert e.value.key == f"consumers.v80.{key}"


def overloaded(tmp_path: Path) -> Path:
    # One request every 4 ns: far more than any consumer answers (each round trip is microseconds).
    return scenario(tmp_path, traffic={"mode": "open_loop", "period": "4 ns", "clock": "card"},
                    nodes=[{"name": "gen", "kind": "generator"}, {"name": "u55c", "kind": "link_card"},
                           {"name": "v80", "kind": "consumer", "device": "v80"}],
                    links=[{"from": "gen", "to": "u55c", "kind": "on_card"},
                           {"from": "u55c", "to": "v80", "kind": "pcie"}])


def test_direct_engine_on_an_overloaded_loop_is_one_line_exit_2(tmp_path, capsys):
    rc = main(["run", str(overloaded(tmp_path)), "--engine", "direct", "--rounds", "200", "--quiet",
               "--out", str(tmp_path / "o")])
    assert "--engine direct" in one_line_error(capsys, rc)


def test_overloaded_loop_warns_and_reports_backlog(tmp_path, capsys):
    out = tmp_path / "o"
    rc = main(["run", str(overloaded(tmp_path)), "--rounds", "200", "--quiet", "--no-plot", "--out", str(out)])
    cap = capsys.readouterr()
    assert rc == 0, cap
    doc = json.loads((out / "results.json").read_text())
    (c,) = doc["consumers"]
    assert c["engine"] == "event" and c["replies_checked"] == 200 and c["mismatches"] == 0
    # 16 slots, 200 requests 4 ns apart: all but the 16 in flight wait for a slot at some point
    assert c["backlog_max"] > 100
    assert "warning: v80" in cap.out


def test_two_nodes_on_one_device_are_told_apart_by_node_name(tmp_path, capsys):
    p = scenario(tmp_path,
                 nodes=[{"name": "gen", "kind": "generator"}, {"name": "u55c", "kind": "link_card"},
                        {"name": "mi210", "kind": "consumer", "device": "mi210"},
                        {"name": "mi210b", "kind": "consumer", "device": "mi210"}],
                 links=[{"from": "gen", "to": "u55c", "kind": "on_card"},
                        {"from": "u55c", "to": "mi210", "kind": "pcie"},
                        {"from": "u55c", "to": "mi210b", "kind": "pcie"}])
    out = tmp_path / "o"
    assert main(["run", str(p), "--rounds", "100", "--verify-rounds", "10", "--quiet", "--no-plot",
                 "--format", "csv", "--out", str(out)]) == 0
    with (out / "rounds.csv").open() as f:
        labels = [row["consumer"] for row in csv.DictReader(f)]
    assert labels == ["mi210"] * 100 + ["mi210b"] * 100
    assert "mi210b" in capsys.readouterr().out


def test_stale_outputs_are_not_left_beside_a_new_results_json(tmp_path):
    out = tmp_path / "o"
    assert main(["run", "--rounds", "100", "--verify-rounds", "10", "--quiet", "--out", str(out)]) == 0
    assert (out / "rounds.parquet").exists() and (out / "histograms.png").exists()
    assert main(["run", "--rounds", "50", "--verify-rounds", "10", "--quiet", "--no-csv", "--no-plot",
                 "--overwrite", "--out", str(out)]) == 0  # the earlier run's own files: replaced or removed
    assert not (out / "rounds.parquet").exists() and not (out / "histograms.png").exists()
    assert json.loads((out / "results.json").read_text())["rounds"] == 50


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("twin ")


def test_a_refused_run_leaves_no_output_folder(tmp_path, capsys):
    out = tmp_path / "never"
    rc = main(["run", str(ROOT / "scenarios" / "faults_epyc7282.yaml"), "--engine", "direct", "--quiet",
               "--out", str(out)])
    line = one_line_error(capsys, rc)
    assert "node 'epyc7282'" in line and not out.exists()


# -- twin topology --out -------------------------------------------------------------------------

@pytest.mark.parametrize("name, says", [("x.xyz", "'.xyz'"), ("noext", "no extension")])
def test_topology_out_of_an_unknown_format_is_one_line_exit_2(name, says, tmp_path, capsys):
    out = tmp_path / name
    line = one_line_error(capsys, main(["topology", str(SCENARIO), "--out", str(out)]))
    assert f"--out {out}" in line and says in line
    assert not list(tmp_path.iterdir())  # nothing written beside it (no noext.png)


def test_topology_out_folder_writes_topology_png_in_it_and_says_so(tmp_path, capsys):
    assert main(["topology", str(SCENARIO), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "topology.png").stat().st_size > 0
    assert f"wrote {tmp_path / 'topology.png'}" in capsys.readouterr().out
    assert not tmp_path.with_suffix(".png").exists()


@pytest.mark.parametrize("suffix", [".svg", ".pdf"])
def test_topology_out_suffix_picks_the_format(suffix, tmp_path, capsys):
    out = tmp_path / f"t{suffix}"
    assert main(["topology", str(SCENARIO), "--out", str(out)]) == 0
    head = out.read_bytes()[:200]
    assert (b"<svg" in head) if suffix == ".svg" else head.startswith(b"%PDF")
    assert f"wrote {out}" in capsys.readouterr().out


def test_topology_out_that_cannot_be_written_names_the_option(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "t.png"
    line = one_line_error(capsys, main(["topology", str(SCENARIO), "--out", str(out)]))
    assert f"--out {out}" in line and "not a folder" in line


# -- --out checked before any work, errors naming the option ------------------------------------

DECODE = ROOT / "scenarios" / "decode_rep3.yaml"
MESH = ROOT / "scenarios" / "mesh_fanout_by_function.yaml"


def _no_study(*a, **k):
    raise AssertionError("the study ran before --out was checked")


@pytest.mark.parametrize("argv", [
    ["decode", str(DECODE), "--quiet"],
    ["run", str(SCENARIO), "--rounds", "20", "--verify-rounds", "10", "--quiet"],
    ["run", str(MESH), "--rounds", "20", "--quiet"],
    ["sweep", str(SCENARIO), "--param", "frame_bytes=64", "--rounds", "20", "--workers", "1", "--quiet"],
], ids=["decode", "run", "run-mesh", "sweep"])
@pytest.mark.parametrize("where", ["inside-a-file", "a-file"])
def test_unusable_out_is_refused_before_the_study_naming_out(argv, where, tmp_path, capsys, monkeypatch):
    import twin.commands.run_mesh
    import twin.studies.decode
    import twin.studies.run
    import twin.studies.sweep
    # patched where they are looked up when called, after import (monkeypatch then restores them)
    monkeypatch.setattr(twin.studies.decode, "run_decode_study", _no_study)
    monkeypatch.setattr(twin.studies.run, "run_study", _no_study)
    monkeypatch.setattr(twin.studies.sweep, "run_sweep", _no_study)
    monkeypatch.setattr(twin.commands.run_mesh, "run_mesh", _no_study)
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / ("x" if where == "inside-a-file" else "")
    out = out if where == "inside-a-file" else tmp_path / "afile"
    line = one_line_error(capsys, main([*argv, "--out", str(out)]))
    assert line.startswith(f"twin: error: --out {out}: ") and "not a folder" in line


def test_calibrate_out_under_a_file_names_out(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "fitted.yaml"
    line = one_line_error(capsys, main(["calibrate", str(PRIOR), "--out", str(out)]))
    assert line == f"twin: error: --out {out}: {tmp_path / 'afile'} exists and is not a folder"


@pytest.mark.parametrize("window", ["50:500", "101"])
def test_trace_window_beyond_the_runs_rounds_is_refused(window, tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["run", str(ROOT / "scenarios" / "v80_rtl.yaml"), "--rounds", "100", "--trace", window,
               "--quiet", "--out", str(out)])
    first, _, last = window.partition(":")
    line = one_line_error(capsys, rc)
    assert line == (f"twin: error: --trace {first}:{last or first}: outside the run's rounds 1:100 "
                    "(--rounds or the scenario's rounds)")
    assert not out.exists()


@pytest.mark.parametrize("which, reason", [
    ("v80_rtl", "loop 'v80': the consumer is model rtl and the link card is model rtl"),
    ("invert", "loop 'epyc7282': function invert is not the echo"),
])
def test_direct_engine_refusal_names_the_actual_reason(which, reason, tmp_path, capsys):
    if which == "invert":
        doc = yaml.safe_load(scenario(tmp_path).read_text())
        doc["nodes"] = [n for n in doc["nodes"] if n["kind"] != "consumer" or n["name"] == "epyc7282"]
        doc["links"] = [ln for ln in doc["links"] if ln["to"] in {n["name"] for n in doc["nodes"]}]
        path = tmp_path / "inv.yaml"
        path.write_text(yaml.safe_dump({**doc, "function": "invert"}, sort_keys=False))
    else:
        path = ROOT / "scenarios" / "v80_rtl.yaml"
    rc = main(["run", str(path), "--engine", "direct", "--rounds", "10", "--quiet", "--out", str(tmp_path / "o")])
    line = one_line_error(capsys, rc)
    assert f"{reason}; the direct engine computes only the echo in model sim" in line
    assert line.endswith("use --engine auto or event")


def test_live_is_a_known_model():
    from twin.scenario import MODELS_AVAILABLE
    assert load_scenario(ROOT / "scenarios" / "live_cpu_shm.yaml").scenario.consumers()[0].model == "live"
    assert MODELS_AVAILABLE == ("sim", "code", "rtl", "live")


def test_output_into_a_closed_pipe_ends_quietly():
    """`twin scenarios | head -1`: the reader leaves before twin has written; twin ends with the
    shell's SIGPIPE status (128 + 13) and nothing on stderr (was 'twin: error: Broken pipe', exit 2)."""
    import os
    import subprocess
    import sys
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first write
    try:
        p = subprocess.run([sys.executable, "-m", "twin", "scenarios"], stdout=w, stderr=subprocess.PIPE, text=True,
                           timeout=60)
    finally:
        os.close(w)
    assert p.returncode == 141 and p.stderr == "", (p.returncode, p.stderr)


@pytest.mark.parametrize("command, given, size", [("run", "scenarios/faults_epyc7282.yaml", ["--rounds", "200"]),
                                                  ("decode", "decode_rep3", ["--shots", "20"])])
def test_a_bundled_scenario_named_outside_a_clone_is_the_bundled_one(tmp_path, monkeypatch, capsys, command, given,
                                                                     size):
    """Outside a clone, `twin run scenarios/NAME.yaml` (or a bare NAME) is not a file here: it is the
    bundled scenario, as a bare `twin run` finds its default (was 'cannot read it (No such file or
    directory)', then a line pointing at `twin scenarios copy`)."""
    monkeypatch.chdir(tmp_path)
    assert main([command, given, *size, "--quiet", "--no-plot"]) == 0, capsys.readouterr().err
    stem = Path(given).stem
    assert json.loads((tmp_path / "runs" / stem / "results.json").read_text())["scenario"] == stem
