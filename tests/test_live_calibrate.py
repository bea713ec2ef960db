"""Calibration from a live run: the recorded H200 cuda run is fitted and predicted."""
import json
from pathlib import Path

import numpy as np
import pytest

from twin.calibration.measured import load_measured
from twin.calibration.params import load_params
from twin.commands import main
from twin.config import ConfigError
from twin.fitting.live import calibrate_from_live
from twin.fitting.live_runs import load_live_run

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "calibrations" / "measured" / "live" / "h200_cuda_warp"  # the warp kernel, 2026-12-01


def test_recorded_run_matches_the_measurement_file():
    _, s, rtt = load_live_run(RUN)
    m = load_measured(ROOT / "calibrations" / "measured" / "h200_cuda_live.yaml").consumers["gpu_live_fitted"]
    assert s["live"]["backend"] == "cuda" and s["mismatches"] == 0 and len(rtt) == 100_000
    from twin.stats import percentile_ps
    assert percentile_ps(rtt, 50) == m.p50_ps and percentile_ps(rtt, 90) == m.p90_ps


def test_fit_from_live_run_and_its_table(tmp_path, capsys):
    out = tmp_path / "fitted.yaml"
    rc = main(["calibrate", "--from-live", str(RUN), "--out", str(out),
               "--rounds", "3000", "--maxiter", "4", "--popsize", "5"])
    assert rc == 0
    text = capsys.readouterr().out
    for word in ("p50", "p90", "p99", "W1", "measured", "predicted"):
        assert word in text
    ps = load_params(out)
    c = ps.consumers["gpu_live_fitted"]
    assert c.kind == "gpu" and c.host == "gpu_live_fitted_host" and c.encoding == "classic"
    assert "epyc7282" in ps.consumers  # the rest of the set is kept


def test_committed_fit_predicts_the_h200_within_5_percent(tmp_path):
    rc = main(["run", str(ROOT / "scenarios" / "h200_cuda_predicted.yaml"), "--rounds", "20000", "--out",
               str(tmp_path), "--quiet", "--no-plot", "--no-csv"])
    assert rc == 0
    s = json.loads((tmp_path / "results.json").read_text())["consumers"][0]
    assert s["measured"] is not None and abs(s["error_pct"]["p50"]) < 5.0


def test_not_a_live_run(tmp_path):
    with pytest.raises(ConfigError):
        calibrate_from_live(tmp_path)
    (tmp_path / "results.json").write_text(json.dumps({"consumers": [{"node": "x", "live": None}]}))
    np.savez(tmp_path / "live_rounds.npz", a=np.zeros(3))
    with pytest.raises(ConfigError) as e:
        calibrate_from_live(tmp_path)
    assert "no live consumer" in str(e.value)


def test_from_live_finds_a_scenario_outside_scenarios(tmp_path, capsys):
    from test_live_shm import scenario
    sc_dir = tmp_path / "elsewhere"
    sc_dir.mkdir()
    sc = scenario(sc_dir, rounds=500, bridge={"backend": "shm", "timeout": "2 s"})
    run = tmp_path / "run"
    assert main(["run", str(sc), "--out", str(run), "--quiet", "--no-plot", "--no-csv"]) == 0
    doc = json.loads((run / "results.json").read_text())
    assert doc["consumers"][0]["live"]["scenario_file"] == str(sc.resolve())
    capsys.readouterr()
    out = tmp_path / "fitted.yaml"
    rc = main(["calibrate", "--from-live", str(run), "--out", str(out), "--rounds", "500", "--maxiter", "1",
               "--popsize", "3"])
    if rc == 2:  # a machine so loaded that (almost) every live round waited for a time slice: refused, said
        assert "neither stalled nor queued" in capsys.readouterr().err
    else:
        assert rc == 0 and "live_fitted" in load_params(out).consumers
    sc.unlink()  # the recorded file is gone: say to pass SCENARIO, do not guess
    capsys.readouterr()
    assert main(["calibrate", "--from-live", str(run), "--out", str(out), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "live.scenario_file" in err and "pass SCENARIO" in err


def test_from_live_without_a_recorded_scenario_says_pass_scenario(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    doc = json.loads((RUN / "results.json").read_text())
    doc["scenario"] = "no_such_scenario"
    doc["consumers"][0]["live"].pop("scenario_file", None)  # a run that recorded no scenario file
    (run / "results.json").write_text(json.dumps(doc))
    (run / "live_rounds.npz").write_bytes((RUN / "live_rounds.npz").read_bytes())
    assert main(["calibrate", "--from-live", str(run)]) == 2
    err = capsys.readouterr().err
    assert "scenario: 'no_such_scenario'" in err and "pass SCENARIO" in err


def test_from_live_out_help_states_its_default(capsys):
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    # a new file by default, never the committed set (argparse may wrap the name at its hyphens)
    assert "calibrations/fitted/<scenario>_<node>_fitted-YYYYMMDD-HHMM.yaml" in "".join(capsys.readouterr().out.split())
