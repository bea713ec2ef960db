"""Tables that survive any terminal (issue 31): ``twin run`` and ``twin decode`` at COLUMNS=80 and
100, piped, print every number whole (each the results.json value, none cut to ``…`` nor wrapped),
and ``--table csv|json`` gives the tables alone on standard output; the smaller findings beside."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from twin.commands import main
from twin.output.table import Grid, Num, fmt, interval, interval_digits

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"^[+-]?[\d,]*\.?\d+(e[+-]\d+)?%?$")


def _twin(args: list[str], columns: int, cwd: Path) -> str:
    """``twin ARGS`` in its own process, standard output a pipe (not a terminal), COLUMNS set."""
    env = dict(os.environ, COLUMNS=str(columns), PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "-m", "twin", *args], capture_output=True, text=True, env=env, cwd=cwd)
    assert run.returncode == 0, run.stderr
    return run.stdout


def _rows(out: str, label: str) -> list[str]:
    """Every token of the lines whose first token is ``label`` (its rows in every fold)."""
    return [t for ln in out.splitlines() if ln.split()[:1] == [label] for t in ln.split()[1:]]


def _whole(out: str, columns: int) -> None:
    assert "…" not in out and "checking" not in out, out
    tables = [ln for ln in out.splitlines() if ln.startswith(" ")]  # table lines (titles and notes start flush)
    assert all(len(ln) <= columns for ln in tables), max(tables, key=len)


@pytest.mark.parametrize("columns", [80, 100])
def test_twin_run_prints_every_number_whole(tmp_path, columns):
    out = _twin(["run", "--rounds", "3000", "--out", str(tmp_path / "r"), "--no-plot", "--no-csv", "--quiet"],
                columns, tmp_path)
    _whole(out, columns)
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    for c in doc["consumers"]:
        tokens = _rows(out, c["node"])
        for k in ("p50_ns", "p90_ns", "p99_ns", "p999_ns"):
            assert fmt(c[k] / 1000, ".3f") in tokens, (c["node"], k, tokens)
        assert f"{c['replies_checked']:,}" in tokens and f"{c['error_pct']['p50']:+.2f}%" in tokens
        role = c["measured"]["role"]  # "meas is": fit / held out, the one text cell of the row
        assert role == {"p50": "fit", "p90": "fit"} and tokens.count("fit") == 1, tokens
        assert all(NUMBER.match(t.strip("()")) for t in tokens if t != "fit"), tokens  # no number cut or glued
        for b in c["budget"]:
            assert f"{b['median_round_ns']:.0f}" in tokens


@pytest.mark.parametrize("columns", [80, 100])
def test_twin_decode_prints_every_number_whole(tmp_path, columns):
    out = _twin(["decode", str(ROOT / "scenarios" / "decode_feedback_ler.yaml"), "--shots", "100", "--out",
                 str(tmp_path / "d"), "--no-plot", "--quiet"], columns, tmp_path)
    _whole(out, columns)
    doc = json.loads((tmp_path / "d" / "results.json").read_text())
    for s in doc["placements"]:
        tokens = _rows(out, s["device"])
        for k in ("p50_ns", "p99_ns", "p999_ns"):
            assert fmt(s["reaction"][k] / 1000, ".3f") in tokens, (s["device"], k, tokens)
        for p in s["feedback"]:  # the feedback table, per injected latency: the LER and its interval whole
            row = [t for ln in out.splitlines() for t in ln.split()[2:]
                   if ln.split()[:2] == [f"{s['device']}:{s['mode']}", f"{p['inject_ns'] / 1000:g}"]]
            e = f".{interval_digits(p['ler'], *p['ci'])}e"
            assert all(fmt(x, e) in row for x in (p["ler"], *p["ci"])), row
            assert fmt(p["reaction"]["p50_ns"] / 1000, ".3f") in row


def test_table_csv_and_json_are_the_tables_alone(tmp_path, capsys):
    assert main(["run", "--rounds", "500", "--out", str(tmp_path / "c"), "--no-plot", "--no-csv", "--quiet",
                 "--table", "csv"]) == 0
    out = capsys.readouterr()
    doc = json.loads((tmp_path / "c" / "results.json").read_text())
    blocks = [b for b in out.out.strip().split("\n\n")]
    assert all(b.startswith("# ") for b in blocks) and "wrote" in out.err and "wrote" not in out.out
    head = list(csv.reader(io.StringIO(blocks[0].split("\n", 1)[1])))
    assert head[0][:4] == ["consumer", "meas p50", "meas p90", "twin p50"]
    for row, c in zip(head[1:], doc["consumers"]):
        assert row[0] == c["node"] and float(row[3]) == c["p50_ns"] / 1000 and float(row[6]) == c["p999_ns"] / 1000
    assert main(["decode", str(ROOT / "scenarios" / "decode_rep3.yaml"), "--shots", "50", "--out",
                 str(tmp_path / "j"), "--no-plot", "--quiet", "--table", "json"]) == 0
    out = capsys.readouterr()
    tables = [json.loads(ln) for ln in out.out.splitlines()]
    doc = json.loads((tmp_path / "j" / "results.json").read_text())
    first = tables[0]
    assert first["columns"][:4] == ["device", "mode", "differ/mism.", "p50 µs"]
    assert first["rows"][0][3] == doc["placements"][0]["reaction"]["p50_ns"] / 1000


def test_no_negative_zero_and_intervals_with_their_values_digits():
    assert fmt(-0.0004, ".3f") == "0.000" and fmt(-0.0, "+.2f") == "+0.00" and fmt(-0.004, ".2e") == "-4.00e-03"
    g = Grid("t", ["k", "growth"])
    g.add_row("a", Num(-0.0001))
    assert g.document()["rows"] == [["a", -0.0001]]
    assert interval(0.999, 0.997, 1.0) == "9.99e-01 [9.97e-01, 1.00e+00]"  # was 9.99e-01 [1.0e+00, 1.0e+00]
    assert interval(0.9999, 0.9995, 1.0) == "9.999e-01 [9.995e-01, 1.000e+00]"
    assert interval(0.0, 0.0, 0.0188) == "0.00e+00 [0.00e+00, 1.88e-02]"


def test_a_live_consumers_column_is_not_twin_p50():
    from twin.reports.run import headline_table
    s = {"p50_ns": 2000.0, "p90_ns": 2100.0, "p99_ns": 2200.0, "p999_ns": 2300.0, "engine": "event",
         "replies_checked": 10, "mismatches": 0, "live": {"backend": "udp"}}
    run = SimpleNamespace(node="qpu", summary=s, result=SimpleNamespace(t_in=[0] * 10))
    study = SimpleNamespace(scenario=SimpleNamespace(params=None, scenario=SimpleNamespace(name="x")), rounds=10,
                            failures=[], seed=1, runs=[run])
    t = headline_table(study)
    assert "twin p50" not in t.columns and t.columns[3] == "p50" and t.rows[0][0] == "qpu (live)"


def test_scenarios_copy_to_a_name_without_yaml_makes_a_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["scenarios", "copy", "card_path_64b", "B"]) == 0
    assert (tmp_path / "B" / "card_path_64b.yaml").is_file()
    (tmp_path / "C").write_text("mine")
    assert main(["scenarios", "copy", "card_path_64b", "C"]) == 2  # a file where a folder is meant: refused
    assert (tmp_path / "C").read_text() == "mine"
    assert main(["scenarios", "copy", "card_path_64b", "x.yaml"]) == 0 and (tmp_path / "x.yaml").is_file()


def test_twin_run_name_resolves_a_bundled_scenario(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "faults_epyc7282", "--rounds", "200", "--no-plot", "--no-csv", "--quiet"]) == 0
    assert json.loads((tmp_path / "runs" / "faults_epyc7282" / "results.json").read_text())["scenario"] \
        == "faults_epyc7282"


def test_decode_help_names_its_default(capsys):
    from twin.commands.common import DEFAULT_DECODE
    with pytest.raises(SystemExit):
        main(["decode", "--help"])
    assert f"(default {DEFAULT_DECODE})" in " ".join(capsys.readouterr().out.split())
