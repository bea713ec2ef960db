"""Decoder cost measured per call and fitted (twin/qec/cost_fit.py, ``decode.cost.how: fitted``,
``twin calibrate decoder``): the fit recovers a known line and flags outliers, draws are seeded, the
command writes a file that a decode scenario reads, the schema refuses what it would ignore, and
(slow) a fit at d = 3, 5 predicts PyMatching's p50 at d = 7 within 10 %."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.commands import main
from twin.config import ConfigError
from twin.qec.cost_fit import DecoderFit, fit_calls, fit_document, load_fit, schedule, surface_job, time_calls

ROOT = Path(__file__).resolve().parent.parent
CAL = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
HOSTING = str(ROOT / "calibrations" / "hosting.yaml")
MEASURED = ROOT / "calibrations" / "measured" / "decoders"


def synthetic(n=20_000, seed=1, overhead=3000.0, slope=250.0, preempted=0.01):
    rng = np.random.default_rng(seed)
    ev = rng.integers(0, 10, n)
    ns = overhead + slope * ev + rng.gamma(2.0, 50.0, n)
    hit = rng.random(n) < preempted
    ns[hit] += rng.uniform(2e5, 5e6, hit.sum())  # preempted: 0.2-5 ms
    return ev, ns, hit


def test_fit_recovers_the_line_and_flags_every_preempted_call():
    ev, ns, hit = synthetic()
    f = fit_calls(ev, ns)
    # the gamma(2, 50) residual has median ~84 ns: the intercept through the medians carries it
    assert f.overhead_ns == pytest.approx(3000 + 84, abs=15)
    assert f.per_event_ns == pytest.approx(250, abs=5)
    assert f.outlier_mask[hit].all()  # every preempted call is an outlier ...
    assert f.outliers["count"] == f.outlier_mask.sum() < hit.sum() * 1.2  # ... and few others are
    assert f.outliers["max_ns"] == pytest.approx(ns.max(), abs=0.1)
    assert f.residual_ns[-1] < 1000  # none of them is in the residual distribution
    assert len(f.levels) == len(f.residual_ns) and f.levels[0] == 0 and f.levels[-1] == 1


def test_fit_refuses_what_it_cannot_fit():
    with pytest.raises(ValueError):
        fit_calls(np.array([1]), np.array([10.0]))
    with pytest.raises(ValueError):
        fit_calls(np.array([1, 2]), np.array([10.0, 12.0]), k_mad=0)


def test_draws_are_seeded_and_reproduce_the_residual_distribution():
    ev, ns, _ = synthetic()
    f = fit_calls(ev, ns)
    events = np.full(50_000, 4)
    a, b, c = f.draw_ns(events, 7), f.draw_ns(events, 7), f.draw_ns(events, 8)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    line = f.overhead_ns + 4 * f.per_event_ns
    for q in (0.1, 0.5, 0.9, 0.99):
        assert np.quantile(a - line, q) == pytest.approx(np.interp(q, f.levels, f.residual_ns), abs=6)
    # and the kept calls' own spread at 4 events: the draws' p90 matches the measurement's
    kept = ns[(ev == 4) & ~f.outlier_mask]
    assert np.quantile(a, 0.9) == pytest.approx(np.quantile(kept, 0.9), rel=0.02)


def test_schedule_spreads_calls_over_event_counts_or_follows_the_workload():
    rng = np.random.default_rng(0)
    ev = np.array([0] * 900 + [1] * 80 + [2] * 15 + [3] * 5 + [4] * 2)
    s = schedule(ev, 800, rng, stratify=True)
    counts = np.bincount(ev[s], minlength=5)
    assert len(s) == 800 and counts[4] == 0 and set(counts[:4]) == {200}  # 4 events: < 5 distinct shots
    s = schedule(ev, 800, rng, stratify=False)
    assert len(set(s)) == 800 and np.bincount(ev[s])[0] > 600


def test_time_calls_times_the_decoder_per_request():
    job = surface_job(3, 3e-3, 2000, seed=1)
    (t,), timer = time_calls([job], 400, warmup=20, seed=1)
    assert len(t.ns) == 400 and (t.ns > 0).all() and timer >= 0
    assert t.events.max() >= 3 and len(np.unique(t.events)) >= 4  # spread over the events
    f = fit_calls(t.events, t.ns)
    assert f.overhead_ns > 100 and f.per_event_ns > 0  # a Python call into PyMatching, more per event


def _decode_scenario(tmp_path: Path, cost: dict, decoder="matching", **decode) -> Path:
    doc = {"name": "fitcost", "calibration": CAL, "hosting": HOSTING, "seed": 3,
           "decode": {"code": "surface", "distance": 3, "rounds": 3, "p": 0.003, "shots": 300, "decoder": decoder,
                      "cost": cost, "placements": [{"device": "epyc7282", "mode": "inline"}], **decode}}
    p = tmp_path / f"s{len(list(tmp_path.glob('s*.yaml')))}.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_calibrate_decoder_writes_a_file_that_a_decode_scenario_uses(tmp_path, capsys):
    scen = _decode_scenario(tmp_path, {"how": "model"})
    out = tmp_path / "dec.yaml"
    assert main(["calibrate", "decoder", str(scen), "--fit", "--calls", "300", "--warmup", "10",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "outliers" in printed and f"wrote {out}" in printed
    doc = yaml.safe_load(out.read_text())
    assert doc["machine"]["cpu"] and doc["machine"]["packages"]["pymatching"] and doc["measured_at"].startswith("20")
    assert doc["decoder"] == "matching" and doc["calls"] == 300 and doc["workloads"][0]["distance"] == 3
    assert doc["workloads"][0]["p"] == 0.003 and doc["outliers"]["count"] == doc["workloads"][0]["outliers"]
    assert "--calls 300" in doc["command"] and "--fit" in doc["command"]
    fit = load_fit(out)
    assert fit.decoder == "matching" and fit.n_calls == 300

    runs = []
    for seed, scale in ((3, 1.0), (3, 1.0), (4, 1.0), (3, 2.0)):
        p = _decode_scenario(tmp_path, {"how": "fitted", "file": str(out), "scale": scale})
        d = tmp_path / f"out{len(runs)}"
        assert main(["decode", str(p), "--seed", str(seed), "--out", str(d), "--quiet"]) == 0
        text = (d / "results.json").read_text()
        runs.append((text, json.loads(text)["placements"][0]))
    s = runs[0][1]
    assert s["cost"]["how"] == "fitted" and s["cost"]["file"] == str(out)
    assert s["cost"]["base_ns"] == pytest.approx(fit.overhead_ns, abs=0.01)
    dec = s["decoder_only"]
    assert dec["p50_ns"] <= dec["p99_ns"] <= dec["p999_ns"]
    assert dec["p50_ns"] >= fit.overhead_ns + np.interp(0, fit.levels, fit.residual_ns) - 1
    assert runs[0][0] == runs[1][0]  # same seed: byte-identical
    assert runs[2][1]["decoder_only"] != dec  # another seed: other draws
    assert runs[3][1]["decoder_only"]["p50_ns"] == pytest.approx(2 * dec["p50_ns"], rel=0.01)  # scale
    assert runs[3][1]["rtt"]["p50_ns"] > s["rtt"]["p50_ns"]
    assert "decoder only" in capsys.readouterr().out


def test_the_cost_block_refuses_what_it_would_ignore(tmp_path):
    fit = fit_calls(*synthetic(2000)[:2])
    lookup_file = tmp_path / "lookup.yaml"
    lookup_file.write_text(yaml.safe_dump(fit_document(fit, _meta("lookup"))))
    cases = [({"how": "model", "file": str(lookup_file)}, "decode.cost.file"),
             ({"how": "fitted"}, "decode.cost.file"),
             ({"how": "fitted", "file": str(lookup_file), "fixed": "300 ns"}, "decode.cost.fixed"),
             ({"how": "fitted", "file": "no_such.yaml"}, "decode.cost.file"),
             ({"how": "fitted", "file": str(lookup_file)}, "decode.cost.file"),  # a lookup fit, matching decoder
             ({"how": "fitted", "file": CAL}, "decode.cost.file"),  # not a decoder-cost file
             ({"how": "fitted", "file": str(lookup_file), "scale": 0}, "decode.cost.scale")]
    from twin.qec.load import load_decode
    for cost, key in cases:
        with pytest.raises(ConfigError) as e:
            load_decode(_decode_scenario(tmp_path, cost))
        assert e.value.key == key, (cost, str(e.value))
        assert "\n" not in str(e.value)
    ok = load_decode(_decode_scenario(tmp_path, {"how": "fitted", "file": str(lookup_file)}, decoder="lookup",
                                        code="rep", rounds=1))
    assert isinstance(ok.cost_fit, DecoderFit) and ok.cost_fit.decoder == "lookup"


def _meta(decoder: str) -> dict:
    from twin.qec.cost_fit import machine
    return {"description": "test", "decoder": decoder, "implementation": "synthetic", "entry_point": "none",
            "machine": machine(), "measured_at": "2026-12-01T00:00:00Z", "command": "test", "seed": 0, "warmup": 0,
            "stratified": False, "timer_overhead_ns": 0.0, "min_group": 20,
            "workloads": [{"label": "synthetic", "code": "rep", "distance": 3, "rounds": 1, "p": 0.01,
                           "noise": "circuit", "calls": 2000, "outliers": 0, "events": {}, "measured_ns": {}}]}


def test_calibrate_options_belong_to_their_calibration(tmp_path, capsys):
    scen = _decode_scenario(tmp_path, {"how": "model"})
    assert main(["calibrate", "decoder", str(scen), "--rounds", "5"]) == 2
    assert "--rounds: not for `twin calibrate decoder`" in capsys.readouterr().err
    assert main(["calibrate", str(ROOT / "calibrations/card_path.yaml"), "--calls", "500"]) == 2
    assert "--calls: only for `twin calibrate decoder" in capsys.readouterr().err
    assert main(["calibrate", "decoder"]) == 2
    assert "give one decode scenario" in capsys.readouterr().err


def test_the_committed_calibration_files_load_and_say_where_they_were_measured():
    files = [f for f in sorted(MEASURED.glob("*.yaml")) if "twin.decoder_cost/1" in f.read_text()[:600]]
    assert files
    for f in files:
        fit = load_fit(f)
        doc = yaml.safe_load(f.read_text())
        assert doc["machine"]["cpu"] and doc["measured_at"] and doc["calls"] >= 10_000, f
        assert fit.per_event_ns > 0 and fit.outliers["count"] == sum(w["outliers"] for w in doc["workloads"]), f


@pytest.mark.slow
def test_a_fit_at_distances_3_and_5_predicts_distance_7s_p50_within_10_percent():
    from twin.qec.cost_fit import held_out
    r = held_out((3, 5), 7, 1e-3, 30_000, seed=0)
    assert abs(r.error_p50) < 0.10, (r.measured, r.predicted, r.fit.overhead_ns, r.fit.per_event_ns)
