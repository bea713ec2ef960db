"""The live sweeps at the loop's pace refitted (issue 26 item 4) and their random gaps held out (issue 30):
the committed fitted sets are what the fitter writes from the committed runs, a paced run's stand-in keeps
as many requests in flight as the run did, the prior's widen term widens a stand-in's service about its
median, and the held-out table in docs/live.md and BENCHMARKS.md is the one ``twin validate``'s comparison
computes (:func:`twin.fitting.validate.heldout_rows`)."""
from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.commands import main
from twin.fitting.live import _prior_widen, _table_median, as_measured, simulate_run
from twin.fitting.live_runs import load_run

ROOT = Path(__file__).resolve().parent.parent
LIVE = ROOT / "calibrations" / "measured" / "live"
FITTED = ROOT / "calibrations" / "fitted"
PACED_SETS = ["h200_host_shm_size_paced", "h200_cuda_size_paced", "h200_host_shm_duty_paced", "h200_cuda_duty_paced"]


def _refit(name: str, tmp_path: Path, monkeypatch) -> tuple[bytes, bytes]:
    """(committed bytes, the bytes the file's own recorded command writes now)."""
    committed = FITTED / f"{name}.yaml"
    command = yaml.safe_load(committed.read_text())["fitted"]["command"]
    args = shlex.split(command)
    assert args[:2] == ["twin", "calibrate"] and "--from-live" in args
    monkeypatch.chdir(ROOT)  # the command's paths are relative to the repository
    out = tmp_path / f"{name}.yaml"
    assert main(args[1:] + ["--out", str(out)]) == 0
    return committed.read_bytes(), out.read_bytes()


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if "duty" in n else n
                                  for n in PACED_SETS])
def test_refit_reproduces_the_committed_set(name, tmp_path, monkeypatch):
    committed, again = _refit(name, tmp_path, monkeypatch)
    assert again == committed, f"calibrations/fitted/{name}.yaml is not what its recorded command fits now"


def test_committed_sets_are_fitted_on_paced_runs_and_hold_out_random_gaps():
    for name in PACED_SETS:
        doc = yaml.safe_load((FITTED / f"{name}.yaml").read_text())["fitted"]
        fit = [r["run"] for r in doc["fitted_on"]]
        held = [r["run"] for r in doc["validated_on"]]
        assert all("_paced/" in r for r in fit + held), name
        assert held and not set(fit) & set(held), name
        if "duty" in name:  # random gaps are predictions only: none is fitted on
            assert not [r for r in fit if "/exp_" in r] and {r.rsplit("/", 1)[1] for r in held} == {
                "exp_10us", "exp_100us", "exp_1ms"}, name


def test_a_paced_run_says_one_request_in_flight():
    assert load_run(LIVE / "h200_cuda_duty_paced" / "exp_10us").in_flight == 1  # pooled passes keep it
    assert load_run(LIVE / "h200_host_shm_size_paced" / "echo_64B").in_flight == 1
    assert load_run(LIVE / "h200_cuda_duty" / "exp_100us").in_flight is None  # round by round: the card's slots


def test_the_stand_in_of_a_paced_open_loop_keeps_one_request_in_flight():
    from dataclasses import replace

    from twin.calibration.params import load_params
    run = load_run(LIVE / "h200_cuda_duty_paced" / "exp_10us")
    ps = load_params(FITTED / "h200_cuda_duty_paced.yaml")
    res = simulate_run(ps, "gpu_live_fitted", run, 20_000, 7)
    assert as_measured(res, None) is res  # round by round: the simulated card's slots, unchanged
    h = res.hops
    wait = np.zeros(len(h.land), np.int64)
    wait[1:] = np.maximum(0, h.publish[:-1] - h.land[1:])
    assert wait.any(), "a 10 us exponential stream at a 6.4 us round trip queues: the test would test nothing"
    # as measured: round k's request is written (its round trip timed) from the reply to round k - 1 on
    assert ((h.land + wait)[1:] >= h.publish[:-1]).all()
    fifo = replace(res, t_send=res.t_send - wait, t_in=res.t_in - wait).rtt_ps  # several in flight, queued
    measured = float(np.percentile(run.clean_rtt_ps, 99))
    assert abs(float(np.percentile(res.rtt_ps, 99)) - measured) < 0.05 * measured
    assert float(np.percentile(fifo, 99)) > 1.5 * measured  # the queue the live run never had


def test_the_prior_widens_a_service_table_about_its_median():
    from twin.calibration.idle_prior import bundled_priors
    prior = bundled_priors().classes["cpu"]
    assert prior.widen and prior.widen[0] == (prior.zero_below_ns, 1.0)
    assert all(w >= 1.0 for _, w in prior.widen) and prior.widen_at(1e6) > prior.widen_at(1e5) > 1.0
    table = [{"weight": 0.25, "offset_ns": o, "width_ns": w} for o, w in ((0.0, 40.0), (40.0, 20.0), (60.0, 20.0),
                                                                           (80.0, 120.0))]
    extra, notes = {"service_modes": [dict(b) for b in table]}, []
    _prior_widen(extra, prior, 2_000.0, notes)
    big = prior.widen[-1][1] / prior.widen_at(2_000.0)
    m = _table_median(table)
    assert m == 60.0
    longs = extra["service_modes"]
    top = longs[-1]["long_offset_ns"] + longs[-1]["long_width_ns"]
    assert top == pytest.approx(m + big * (200.0 - m), abs=1e-3)
    assert longs[2]["long_offset_ns"] == pytest.approx(m)  # the median's edge stays
    assert extra["idle_mix"][0] == (2_000.0, 0.0) and extra["idle_mix"][-1][1] == 1.0 and notes
    extra = {"service_modes": [dict(b) for b in table]}
    _prior_widen(extra, bundled_priors().classes["cpu"], 2e7, [])  # past the prior's last gap: nothing to widen
    assert "idle_mix" not in extra


@pytest.mark.slow
def test_the_held_out_table_in_the_docs_is_the_computed_one():
    import importlib.util
    spec = importlib.util.spec_from_file_location("live_heldout", ROOT / "benchmarks" / "live_heldout.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from twin.fitting.validate import heldout_markdown
    tables = mod.tables()
    rows = heldout_markdown(tables).splitlines()[2:]
    for doc in ("docs/live.md", "BENCHMARKS.md"):
        text = (ROOT / doc).read_text()
        missing = [r for r in rows if r not in text]
        assert not missing, f"{doc} lacks the computed held-out rows: {missing}"
    assert all(r["run"].startswith("exp_") for rs in tables.values() for r in rs)
