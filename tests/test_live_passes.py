"""A point measured in passes (benchmarks/live_sweep.py --passes): its passes' rounds pooled in pass
order, every round kept, percentiles as numpy's on the concatenation, the order recorded, and one
error naming the file, key and value for anything that is not one point."""
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from twin.config import ConfigError
from twin.fitting.live_runs import load_run, read_live_rounds

ROOT = Path(__file__).resolve().parents[1]
LIVE = ROOT / "calibrations" / "measured" / "live"
SOURCE = LIVE / "h200_cuda_repeat_1" / "back_to_back"  # one committed 10,000-round cuda run, split below
NODE = "gpu_live"
CUTS = (0, 3000, 4000, 10000)  # three passes of 3,000, 1,000 and 6,000 rounds
POSITIONS = (2, 7, 12)  # where each pass stood in a sweep of five points


def _point(tmp_path: Path, positions=POSITIONS, edit: dict | None = None) -> Path:
    """A point folder: SOURCE's rounds split at CUTS into pass folders (each with SOURCE's
    results.json, its seed made the pass's, and its slice of every per-round array, idle -1 at each
    pass's first round, as a run records it; ``edit``: per pass, results.json keys to change),
    scenario.yaml beside them, passes.json listing them (point back_to_back: SOURCE's scenario)."""
    point = tmp_path / "back_to_back"
    point.mkdir()
    shutil.copy(SOURCE / "scenario.yaml", point / "scenario.yaml")
    doc = json.loads((SOURCE / "results.json").read_text())
    with np.load(SOURCE / "live_rounds.npz") as z:
        arrays = {k: z[k] for k in z.files}
    passes = []
    for k, (a, b) in enumerate(zip(CUTS, CUTS[1:])):
        folder = point / f"pass_{k:02d}"
        folder.mkdir()
        part = {key: v[a:b].copy() for key, v in arrays.items()}
        part[f"{NODE}.idle_ns"][0] = -1
        np.savez(folder / "live_rounds.npz", **part)
        d = json.loads(json.dumps(doc))
        d["consumers"][0]["live"]["mismatch_rounds"] = []
        d["consumers"][0]["live"]["rounds"] = b - a
        d["seed"] = 20261129 + k
        for key, value in (edit or {}).get(k, {}).items():
            d[key] = value
        (folder / "results.json").write_text(json.dumps(d))
        passes.append({"folder": folder.name, "pass": k, "position": positions[k], "seed": 20261129 + k})
    (point / "passes.json").write_text(json.dumps({"schema": "twin.passes/1", "point": point.name, "passes": passes}))
    return point


def test_pooling_keeps_every_round_in_pass_order_and_percentiles_are_numpys(tmp_path):
    point = _point(tmp_path)
    with np.load(SOURCE / "live_rounds.npz") as z:
        rtt, svc, idle = z[f"{NODE}.rtt_ps"], z[f"{NODE}.service_ns"], z[f"{NODE}.idle_ns"].copy()
    idle[list(CUTS[:-1])] = -1
    doc, s, arrays, passes = read_live_rounds(point)
    assert np.array_equal(arrays["rtt_ps"], rtt) and np.array_equal(arrays["service_ns"], svc)
    assert np.array_equal(arrays["idle_ns"], idle)
    assert np.array_equal(arrays["pass_index"], np.repeat([0, 1, 2], np.diff(CUTS)))
    assert [p["position"] for p in passes] == list(POSITIONS)
    assert [p["position"] for p in s["live"]["passes"]] == list(POSITIONS)
    assert [p["rounds"] for p in s["live"]["passes"]] == list(np.diff(CUTS))
    assert s["rounds"] == doc["rounds"] == len(rtt) and doc["seeds"] == [20261129, 20261130, 20261131]
    for key, q in (("p50_ns", 50), ("p90_ns", 90), ("p99_ns", 99), ("p999_ns", 99.9)):
        assert s[key] == np.percentile(rtt, q, method="inverted_cdf") / 1000
        assert s["live"]["service"][key] == np.percentile(svc, q, method="inverted_cdf")
        assert s["live"]["idle"]["measured"][key] == np.percentile(idle[idle >= 0], q, method="inverted_cdf")
    run = load_run(point)  # what calibrate and validate see: the scenario beside the passes
    assert run.scenario == point / "scenario.yaml" and np.array_equal(run.rtt_ps, rtt)
    assert np.array_equal(run.measured_idle_ns, idle[idle >= 0])
    clean = ~run.stalls.mask
    assert run.pass_p50_ns() == [np.percentile(rtt[a:b][clean[a:b]], 50, method="inverted_cdf") / 1000
                                 for a, b in zip(CUTS, CUTS[1:])]


@pytest.mark.parametrize("change, words", [
    (lambda p, d: d["passes"][1].update(folder="pass_09"), ["passes.json", "passes[1].folder", "pass_09"]),
    (lambda p, d: d["passes"][1].update(folder="../x"), ["passes.json", "passes[1].folder", "../x"]),
    (lambda p, d: d["passes"][2].update(position=1), ["passes.json", "passes[2].position", "1"]),
    (lambda p, d: d["passes"][1].update(**{"pass": 2}), ["passes.json", "passes[1].pass", "2"]),
    (lambda p, d: d["passes"][0].update(rounds=5), ["passes.json", "passes[0].rounds", "unknown key"]),
    (lambda p, d: d["passes"][0].pop("position"), ["passes.json", "passes[0].position", "required"]),
    (lambda p, d: d.update(passes=[]), ["passes.json", "passes"]),
    (lambda p, d: d.update(schema="twin.passes/9"), ["passes.json", "schema", "twin.passes/9"]),
    (lambda p, d: shutil.copy(p / "pass_00" / "results.json", p / "results.json"),
     ["results.json", "beside passes.json"]),
    (lambda p, d: d["passes"][2].update(folder="pass_01"), ["passes.json", "passes[2].folder", "pass_01", "twice"]),
    (lambda p, d: d["passes"][1].update(seed=7), ["passes.json", "passes[1].seed", "7", "20261130"]),
    (lambda p, d: d.update(point="exp_1ms"), ["passes.json", "point", "exp_1ms", "live_gpu_cuda_back_to_back"]),
    (lambda p, d: d.update(point="to_back"), ["passes.json", "point", "to_back"]),
    (lambda p, d: d["passes"][1].update(command="twin run s.yaml --out back_to_back/pass_00 --seed 20261130"),
     ["passes.json", "passes[1].command", "--out back_to_back/pass_00"]),
    (lambda p, d: (p / "pass_03").mkdir(), ["passes.json", "passes", "pass_03", "does not list"]),
    (lambda p, d: d["passes"][2].update(seed=d["passes"][0]["seed"]), ["passes.json", "passes[2].seed",
                                                                       "also passes[0]'s seed"]),
    (lambda p, d: d["passes"][1].update(seconds=-1), ["passes.json", "passes[1].seconds", "-1"]),
    (lambda p, d: d["passes"][1].update(started_utc="yesterday"), ["passes.json", "passes[1].started_utc",
                                                                   "yesterday"]),
])
def test_a_passes_file_that_is_not_one_point_is_one_error_naming_file_key_value(tmp_path, change, words):
    point = _point(tmp_path)
    d = json.loads((point / "passes.json").read_text())
    change(point, d)
    (point / "passes.json").write_text(json.dumps(d))
    with pytest.raises(ConfigError) as e:
        load_run(point)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_passes_of_different_points_are_refused_naming_the_pass(tmp_path):
    point = _point(tmp_path, edit={2: {"frame_bytes": 256}})
    with pytest.raises(ConfigError) as e:
        load_run(point)
    assert all(w in str(e.value) for w in ("pass_02", "results.json", "frame_bytes", "256", "64"))


def _sweep():
    spec = importlib.util.spec_from_file_location("live_sweep", ROOT / "benchmarks" / "live_sweep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sweep_schedule_is_round_robin():
    mod = _sweep()
    order = mod.schedule(["b2b", "p100", "p1ms"], 3)
    assert len(order) == 9 and set(order) == {(k, p) for k in range(3) for p in ("b2b", "p100", "p1ms")}
    for i, (k, _) in enumerate(order):  # every point's pass k runs before any point's pass k + 1
        assert all(k2 >= k for k2, _ in order[i:])
    assert [p for k, p in order if k == 1] == ["b2b", "p100", "p1ms"]
    assert mod.pass_rounds(1003, 4) == [251, 251, 251, 250]  # 1,003 = 4 x 250 + 3: no round dropped


def test_sweep_command_line_refuses_no_or_unknown_points_and_says_every_option(tmp_path, capsys):
    mod = _sweep()
    out = tmp_path / "sweep"
    for extra, words in ((["--only"], ["--only"]), (["--only", "foo", "back_to_back", "bar"], ["foo", "bar"]),
                         (["--only", "back_to_back", "back_to_back"], ["named twice"]),
                         (["--only", "back_to_back", "--rounds", "50"], ["50 rounds", ">= 100"]),
                         (["--only", "back_to_back", "--cpu", "4096"], ["--cpu 4096", "not a core"])):
        with pytest.raises(SystemExit) as e:  # each refused before anything is measured or written
            mod.main(["--backend", "shm", "--sweep", "duty", "--out", str(out), *extra])
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.count("\n") == 1 and all(w in err for w in words), err
    assert not out.exists()
    ap = mod.parser()
    assert ap.description.endswith(".") and all(a.help for a in ap._actions)


# the acceptance on the committed interleaved sweeps (H200, 2026-12-02): fitted on the pooled back to
# back and 1 ms points, each pooled held-out point within 3 % at p50 and W1 <= 2 % of p50
HELD = [(cal, sweep, point) for cal, sweep in (("h200_host_shm_duty_passes", "h200_host_shm_passes"),
                                               ("h200_cuda_duty_passes", "h200_cuda_passes"),
                                               ("h200_host_shm_duty_passes_2", "h200_host_shm_passes_2"),
                                               ("h200_cuda_duty_passes_2", "h200_cuda_passes_2"),
                                               ("h200_host_shm_duty_passes_3", "h200_host_shm_passes_3"),
                                               ("h200_cuda_duty_passes_3", "h200_cuda_passes_3"))
        for point in ("period_100us", "exp_100us", "exp_1ms")]
MISSED = {("h200_host_shm_duty_passes", "h200_host_shm_passes", "exp_100us"):
          "W1 2.2 %: one of its 8 passes (pass 7) served at 212 ns p50 against 520-580 for the other seven",
          **{("h200_host_shm_duty_passes_3", "h200_host_shm_passes_3", p):
             "W1 2.7 %: the fit points each hold a pass served at 171 / 210 ns p50 (others 447-756 ns), so the "
             "fitted service tables sit low" for p in ("period_100us", "exp_100us", "exp_1ms")}}


@pytest.mark.slow
@pytest.mark.parametrize("cal, sweep, point", [
    pytest.param(*h, marks=pytest.mark.xfail(strict=True, reason=MISSED[h])) if h in MISSED else h for h in HELD])
def test_interleaved_duty_fit_predicts_held_out_points(cal, sweep, point):
    from twin.fitting.validate import validate
    (v,) = validate(ROOT / "calibrations" / "fitted" / f"{cal}.yaml", [LIVE / sweep / point], seed=7)
    assert abs(v.comparison.error_pct("p50")) < 3.0
    assert v.comparison.w1_pct <= 2.0


@pytest.mark.slow
def test_the_vm_size_sweep_in_passes_predicts_256_bytes():
    """The size line's second case (this 2-core VM, shm, quiet, the four points interleaved in 8
    passes): fitted on 64 and 1,024 B, the pooled 256 B point within 3 % at p50 and 10 % at p99."""
    from twin.fitting.validate import validate
    (v,) = validate(ROOT / "calibrations" / "fitted" / "vm_shm_size_passes.yaml",
                    [LIVE / "vm_shm_size_passes" / "echo_256B"], seed=7)
    assert abs(v.comparison.error_pct("p50")) < 3.0 and abs(v.comparison.error_pct("p99")) < 10.0


def test_a_fit_on_a_point_in_passes_records_its_passes_and_what_it_set(tmp_path):
    from twin.fitting.live import calibrate_from_live, fitted_section
    fit = calibrate_from_live(_point(tmp_path), ROOT / "scenarios" / "live_gpu_cuda.yaml", rounds=2000,
                              rounds_check=2000, log=lambda *a: None)
    doc = fitted_section(fit, "twin calibrate --from-live point")
    (row,) = doc["fitted_on"]
    assert row["passes"] == 3 and len(row["pass_p50_ns"]) == 3
    assert any("3 passes pooled" in n for n in doc["notes"])
    free = " ".join(doc["free_parameters"])  # shape service: the measured service table, not a poll period
    assert "service_modes" in free and "poll_period_ns" not in free and "jitter_ns" not in free
    assert doc["targets"].startswith("the first run's measured service distribution")


def test_a_pass_alone_uses_the_points_scenario_and_validate_says_its_own_option(tmp_path, capsys):
    """A pass folder whose recorded scenario is gone (SOURCE's /tmp/res/...) falls back to the
    point's scenario.yaml one level up; with that gone too, `twin validate` says its own option,
    on one line of stderr and nothing on stdout."""
    from twin.commands import main
    point = _point(tmp_path)
    assert load_run(point / "pass_01").scenario == point / "scenario.yaml"
    (point / "scenario.yaml").unlink()
    cal = ROOT / "calibrations" / "fitted" / "h200_cuda_duty_passes.yaml"
    assert main(["validate", str(cal), str(point / "pass_01"), "--out", str(tmp_path / "v"), "--no-plot"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "live.scenario_file" in err
    assert "--scenario" in err and "calibrate" not in err


def test_a_run_named_twice_or_inside_a_fit_point_is_refused(tmp_path, capsys):
    """The same run twice, or a pass folder of a fit point held out, would count its rounds twice or
    check the fit on what it was fitted on: one line each, exit 2, nothing written."""
    from twin.commands import main
    P = LIVE / "h200_cuda_passes"
    out = tmp_path / "fit.yaml"
    for argv, words in (
            (["calibrate", "--from-live", str(P / "back_to_back"), str(P / "period_1ms"), "--validate",
              str(P / "back_to_back" / "pass_00"), "--out", str(out)], ["--validate", "pass_00", "inside"]),
            (["calibrate", "--from-live", str(P / "back_to_back"), str(P / "back_to_back"), "--out", str(out)],
             ["--from-live", "back_to_back", "the same folder"]),
            (["validate", str(ROOT / "calibrations" / "fitted" / "h200_cuda_duty_passes.yaml"), str(P / "exp_1ms"),
              str(P / "exp_1ms"), "--out", str(tmp_path / "v")], ["exp_1ms", "the same folder"])):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and all(w in err for w in words), err
    assert not out.exists() and not (tmp_path / "v").exists()


def test_a_pass_folder_is_labelled_with_its_point():
    """Passes of several points are told apart in tables and figure titles: point/pass_KK."""
    from twin.fitting.live_runs import load_run
    run = load_run(LIVE / "h200_host_shm_passes" / "exp_1ms" / "pass_03")
    assert run.label.startswith("exp_1ms/pass_03 (64 B, echo)")
    assert load_run(LIVE / "h200_host_shm_passes" / "exp_1ms").label.startswith("exp_1ms (64 B")
