"""Fit or prediction, said everywhere (issue 30, item 1): the fit targets a fitted set records, the
role column of the tables, the leave-one-out refit (:mod:`twin.fitting.loo`) and a published
maximum compared at its N (:meth:`twin.calibration.roce.RoceMeasuredRow.quantile`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.calibration.params import load_params
from twin.calibration.roce import RoceMeasuredRow
from twin.calibration.targets import FIT, HELD_OUT, UNRECORDED, role
from twin.config import ConfigError
from twin.stats import percentile_ps

ROOT = Path(__file__).resolve().parent.parent
CARD_PRIOR = ROOT / "calibrations" / "card_path.yaml"
CARD_FITTED = ROOT / "calibrations" / "fitted" / "card_path.yaml"
CARD_MEASURED = ROOT / "calibrations" / "measured" / "card_path_64b.yaml"
QUICK = dict(rounds=1500, maxiter=3, popsize=3)


def _small_prior(tmp_path: Path, consumers: list[str], free: dict, name: str = "small") -> Path:
    """The card-path prior with one fit group (``consumers``, ``free``), measured file by absolute path."""
    doc = yaml.safe_load(CARD_PRIOR.read_text())
    doc["fit"] = {"measured": str(CARD_MEASURED), "rounds": QUICK["rounds"], "seed": 1, "maxiter": 3, "popsize": 3,
                  "groups": [{"consumers": consumers, "free": free}]}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def test_the_committed_fitted_sets_record_their_fit_targets():
    card = load_params(CARD_FITTED)
    assert {(t["consumer"], t["stat"]) for t in card.fitted["fit_targets"]} == {
        (c, s) for c in ("v80", "epyc7282", "mi210", "epyc9755", "mi355x") for s in ("p50", "p90")}
    from twin.calibration.roce import load_roce_params
    nvq = load_roce_params(ROOT / "calibrations" / "fitted" / "nvqlink.yaml")
    assert nvq.fitted["fit_targets"] == [{"consumer": "gb200_gpu", "stat": "max"},
                                         {"consumer": "h200_gpu", "stat": "max"}]


def test_role_is_fit_only_for_a_target_of_the_same_measured_file(tmp_path):
    card = load_params(CARD_FITTED)
    assert role(card, CARD_FITTED, CARD_MEASURED, "v80", "p50") == FIT
    assert role(card, CARD_FITTED, CARD_MEASURED, "v80", "p99") == HELD_OUT  # not a statistic the fit matched
    other = tmp_path / "card_path_64b.yaml"
    other.write_text(CARD_MEASURED.read_text())
    assert role(card, CARD_FITTED, other, "v80", "p50") == HELD_OUT  # another file's numbers
    assert role(load_params(CARD_PRIOR), CARD_PRIOR, CARD_MEASURED, "v80", "p50") == HELD_OUT  # fitted to nothing
    old = card.model_copy(update={"fitted": {k: v for k, v in card.fitted.items() if k != "fit_targets"}})
    assert role(old, CARD_FITTED, CARD_MEASURED, "v80", "p50") == UNRECORDED


def _headline(out: str) -> list[list[str]]:
    """The headline table's consumer rows of ``twin run``'s output (after its header, before the budget)."""
    head = out.split("latency budget")[0]
    assert "meas is" in head
    body = head.split("mismatches")[1]
    return [ln.split() for ln in body.splitlines() if ln.strip().startswith(("v80 ", "mi355x "))]


def test_twin_run_marks_each_measured_row_fit_or_held_out(tmp_path, capsys):
    from twin.cli import main
    assert main(["run", "scenarios/card_path_64b.yaml", "--rounds", "2000", "--out", str(tmp_path / "a"),
                 "--no-plot"]) == 0
    rows = _headline(capsys.readouterr().out)
    assert len(rows) == 2 and all(r[9] == "fit" for r in rows)
    import json
    doc = json.loads((tmp_path / "a" / "results.json").read_text())
    assert doc["consumers"][0]["measured"]["role"] == {"p50": "fit", "p90": "fit"}
    sc = yaml.safe_load((ROOT / "scenarios" / "card_path_64b.yaml").read_text())
    sc["calibration"] = str(CARD_PRIOR)  # a prior: fitted to nothing, every number held out
    sc["measured"] = str(CARD_MEASURED)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sc))
    assert main(["run", str(tmp_path / "s.yaml"), "--rounds", "2000", "--out", str(tmp_path / "b"), "--no-plot"]) == 0
    rows = _headline(capsys.readouterr().out)
    assert len(rows) == 2 and all(r[9:11] == ["held", "out"] for r in rows)


def test_leave_one_out_refit_excludes_the_target(tmp_path):
    """v80 and mi210 share the EPYC 7282's P2P latency: without v80 the refit matches mi210 alone, so
    v80's prediction moves off the in-sample fit, and the refit is the fit of a prior without v80."""
    from twin.fitting.fit import calibrate
    from twin.fitting.loo import leave_one_out
    free = {"hosts.epyc7282.p2p.latency_ns": [300, 1500]}
    prior = _small_prior(tmp_path, ["v80", "mi210"], free)
    loo = leave_one_out(prior, log=lambda s: None, **QUICK)
    assert [(r.consumer, r.stat) for r in loo.rows] == [("v80", "p50"), ("v80", "p90"), ("mi210", "p50"),
                                                        ("mi210", "p90")]
    assert loo.constrains == {"hosts.epyc7282.p2p.latency_ns": ["v80", "mi210"]}
    v80 = [r for r in loo.rows if r.consumer == "v80"]
    assert all(not r.held and r.reason == "" for r in v80)
    assert any(r.predicted_ns != r.in_sample_ns for r in v80)
    alone = calibrate(load_params(_small_prior(tmp_path, ["mi210"], free, "alone")), prior, log=lambda s: None,
                      **QUICK)
    without = calibrate(load_params(prior), prior, log=lambda s: None, leave_out={"v80"}, **QUICK)
    assert without.values == alone.values


def test_leave_one_out_says_when_no_other_target_constrains_a_parameter(tmp_path, capsys):
    """The MI210's poll period acts on the MI210 alone: left out, the refit cannot fit it, so it keeps
    the prior's value and the row says why."""
    from twin.cli import main
    prior = _small_prior(tmp_path, ["v80", "mi210"], {"hosts.epyc7282.p2p.latency_ns": [300, 1500],
                                                      "consumers.mi210.poll_period_ns": [50, 1500]})
    assert main(["validate", "--leave-one-out", str(prior), "--rounds", "1500", "--maxiter", "3", "--popsize", "3",
                 "--out", str(tmp_path / "loo")]) == 0
    out = capsys.readouterr().out
    assert "fit (in sample)" in out and "held out (predicted)" in out
    assert "no other target constrains consumers.mi210.poll_period_ns" in out
    import json
    doc = json.loads((tmp_path / "loo" / "leave_one_out.json").read_text())
    mi210 = [r for r in doc["rows"] if r["consumer"] == "mi210"]
    assert mi210 and all(r["held_at_prior"] == ["consumers.mi210.poll_period_ns"] for r in mi210)
    assert all(r["held_at_prior"] == [] for r in doc["rows"] if r["consumer"] == "v80")


def test_leave_one_out_refuses_a_set_fitted_to_nothing(tmp_path):
    from twin.fitting.loo import prior_of
    doc = yaml.safe_load(CARD_PRIOR.read_text())
    del doc["fit"]
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match="nothing to leave out"):
        prior_of(tmp_path / "p.yaml")
    assert prior_of(CARD_FITTED).resolve() == CARD_PRIOR.resolve()  # a fitted set: the prior it names


def test_a_maximum_is_compared_at_its_published_n_not_the_run_length():
    """The 1 - 1/N quantile of a long run is the same whatever the run's length (beyond N); the run's
    own maximum grows with it."""
    row = RoceMeasuredRow(device="d", max="5 us", max_samples=1000, max_samples_source="test")
    assert row.quantile("max") == pytest.approx(99.9)
    assert row.quantile("p50") == 50.0
    rng = np.random.default_rng(1)
    draw = lambda n: (1_000_000 + rng.exponential(10_000, n)).astype(np.int64)  # noqa: E731
    short, long_ = draw(20_000), draw(2_000_000)
    at_n = [percentile_ps(a, row.quantile("max")) for a in (short, long_)]
    assert abs(at_n[0] - at_n[1]) < 0.01 * at_n[1]
    assert long_.max() > 1.01 * at_n[1]  # the run's maximum is not what is compared
    expected = 1_000_000 + 10_000 * np.log(1000)  # the exponential's 1 - 1/N quantile
    assert abs(at_n[1] - expected) < 0.005 * expected


def test_a_maximum_without_its_n_is_refused():
    with pytest.raises(Exception, match="max_samples"):
        RoceMeasuredRow(device="d", max="5 us")


def test_the_nvqlink_fit_refuses_fewer_rounds_than_n():
    from twin.calibration.roce import load_roce_params
    from twin.fitting.roce import calibrate_roce
    prior = ROOT / "calibrations" / "nvqlink.yaml"
    with pytest.raises(ConfigError, match="fewer than the 100,000 rounds"):
        calibrate_roce(load_roce_params(prior), prior, log=lambda s: None, rounds=20_000)


def test_twin_run_names_n_and_its_source_under_the_table(tmp_path, capsys):
    from twin.cli import main
    assert main(["run", "scenarios/nvqlink_h200.yaml", "--rounds", "3000", "--out", str(tmp_path / "n"),
                 "--no-plot"]) == 0
    out = capsys.readouterr().out
    assert "largest of N = 100,000 draws" in out and "arXiv 2510.25213" in out
    assert "fewer than N" in out  # 3,000 rounds: its own maximum stands in, and it says so


def test_a_live_fit_s_numbers_are_fit_targets_when_their_row_names_a_run_it_was_fitted_on(tmp_path):
    """calibrations/measured/h200_cuda_live.yaml summarises the run the live set was fitted on: its
    numbers are fit targets; the same row naming a held-out run is held out, naming none unrecorded."""
    cal = ROOT / "calibrations" / "fitted" / "live_gpu_cuda_gpu_live_fitted.yaml"
    measured = ROOT / "calibrations" / "measured" / "h200_cuda_live.yaml"
    params = load_params(cal)
    assert role(params, cal, measured, "gpu_live_fitted", "p50") == FIT
    doc = yaml.safe_load(measured.read_text())
    doc["consumers"]["gpu_live_fitted"]["run"] = str(ROOT / "calibrations/measured/live/h200_cuda_duty_3/back_to_back")
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(doc))
    assert role(params, cal, tmp_path / "m.yaml", "gpu_live_fitted", "p50") == HELD_OUT  # its validated_on run
    del doc["consumers"]["gpu_live_fitted"]["run"]
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(doc))
    assert role(params, cal, tmp_path / "m.yaml", "gpu_live_fitted", "p50") == UNRECORDED


def test_the_calibrate_residuals_table_marks_the_numbers_the_fit_did_not_match():
    import io

    from rich.console import Console

    from twin.fitting.fit import Residual
    from twin.fitting.report import residuals_table
    buf = io.StringIO()
    residuals_table([Residual("a", "p50", 1000.0, 1001.0), Residual("a", "p99", 2000.0, 1900.0)], "t",
                    {("a", "p50")}).print(Console(file=buf, width=200))
    rows = {ln.split()[1]: ln for ln in buf.getvalue().splitlines() if ln.strip().startswith("a ")}
    assert " fit " in rows["p50"] and "held out" in rows["p99"]


def test_twin_hosting_says_which_seed_figures_the_costs_were_fitted_to(tmp_path, capsys):
    """calibrations/hosting.yaml was fitted at 64 bytes (its provenance.fitted_at_64_bytes): those rows
    are fit, every 1,792-byte row held out."""
    from twin.cli import main
    main(["hosting", "--rounds", "300"])  # exit 1 when a row is outside 5 %: the labels are what is checked
    rows = [ln for ln in capsys.readouterr().out.splitlines() if " B " in ln]
    assert rows and all(("fit" in ln.split(" B ")[1].split()[:2]) == (" 64 B " in ln) for ln in rows), rows
    assert all("held out" in ln for ln in rows if "1792 B" in ln)
