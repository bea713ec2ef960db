"""Calibration from live runs and its validation, on synthetic live runs with known answers: a run
folder whose round trips come from a known consumer model (so the fit must find it again and the
prediction must match within sampling error), stalled rounds injected at known rounds, and the
pieces with closed-form answers (the W1-best shift, the least-squares service terms, the modes)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.calibration.distribution import best_shift_ps, compare, count_modes, extra_modes
from twin.calibration.params import load_params, reply_bytes
from twin.commands import main
from twin.devices.isolation import check_isolation, find_stalls
from twin.engine import run_direct
from twin.fitting.live import _service_terms, calibrate_from_live
from twin.fitting.live_runs import LiveRun, load_run
from twin.fitting.validate import validate
from twin.runtime.functions import lookup
from twin.scenario.compile import flow_spec

ROOT = Path(__file__).resolve().parents[1]
CAL = ROOT / "calibrations" / "fitted" / "card_path.yaml"
TRUE_SERVICE_NS, TRUE_SLOPE_NS = 600.0, 1.0  # the synthetic device: 600 ns + 1 ns per frame byte


def truth_set(tmp_path: Path, idle=None) -> Path:
    """The card-path set with the EPYC 7282 core's service made the synthetic device's."""
    doc = yaml.safe_load(CAL.read_text())
    c = doc["consumers"]["epyc7282"]
    c.update(service_ns=TRUE_SERVICE_NS, service_per_frame_byte_ns=TRUE_SLOPE_NS)
    if idle:
        c["idle"] = idle
    doc.pop("fitted", None)
    p = tmp_path / "truth.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def synthetic_run(tmp_path: Path, name: str, truth: Path, frame: int = 64, function: str = "echo",
                  gap: str | None = None, gaps: dict | None = None, rounds: int = 4000, stall_every: int = 0,
                  seed: int = 11) -> Path:
    """A live run folder as `twin run` writes one, its round trips from ``truth``'s epyc7282 model."""
    folder = tmp_path / name
    folder.mkdir()
    traffic = {"mode": "closed_loop", "clock": "card", **({"gap": gap} if gap else {}),
               **({"gaps": gaps} if gaps else {})}
    sc = {"name": f"syn_{name}", "calibration": str(CAL), "seed": seed, "rounds": rounds, "frame_bytes": frame,
          "encoding": "classic", "function": function, "slots": 16, "traffic": traffic,
          "nodes": [{"name": "gen", "kind": "generator"}, {"name": "u55c", "kind": "link_card"},
                    {"name": "cpu_live", "kind": "consumer", "device": "epyc7282", "model": "live",
                     "bridge": {"backend": "shm", "timeout": "1 s"}}],
          "links": [{"from": "gen", "to": "u55c", "kind": "on_card"},
                    {"from": "u55c", "to": "cpu_live", "kind": "pcie"}]}
    sc_path = folder / "scenario.yaml"
    sc_path.write_text(yaml.safe_dump(sc))
    from twin.scenario import load_scenario
    s = load_scenario(sc_path).scenario
    fid = lookup(function).id
    spec = flow_spec(load_params(truth), "epyc7282", s.traffic_params(rounds), seed, slots=16, encoding="classic",
                     function=fid)
    res = run_direct(spec, reply_bytes=None if fid == 0 else reply_bytes(fid, frame))
    rtt = res.rtt_ps.copy()
    service = ((res.hops.reply - res.hops.start) // 1000).astype(np.int64)
    if stall_every:  # a time slice lost: 2 ms more on every stall_every-th round
        rtt[::stall_every] += 2_000_000_000
        service[::stall_every] += 2_000_000
    doc = {"scenario": sc["name"], "frame_bytes": frame, "consumers": [
        {"node": "cpu_live", "name": "epyc7282", "encoding": "classic", "function": function, "mismatches": 0,
         "live": {"backend": "synthetic", "scenario_file": str(sc_path)}}]}
    (folder / "results.json").write_text(json.dumps(doc))
    np.savez(folder / "live_rounds.npz", **{"cpu_live.rtt_ps": rtt, "cpu_live.service_ns": service})
    return folder


# -- pieces with closed-form answers ----------------------------------------------------------------

def test_stalls_are_the_rounds_beyond_the_service_distribution():
    rng = np.random.default_rng(1)
    s = rng.normal(600, 20, 10_000).astype(np.int64)
    s[[5, 77, 4000]] = [3_000_000, 800_000, 1_500]      # a time slice, a long interrupt, 45 MADs above
    st = find_stalls(s)
    assert list(np.flatnonzero(st.mask)) == [5, 77, 4000]
    assert st.count == 3 and st.longest_ns == 3_000_000 and st.summary()["first_rounds"] == [6, 78, 4001]
    assert find_stalls(np.full(100, 500)).count == 0   # one value: no spread, nothing stalled


def test_isolation_warns_on_a_machine_with_fewer_free_cores_than_pinned(monkeypatch):
    import os
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (6.5, 6.0, 6.0))
    import twin.devices.isolation
    # no /proc/stat sample to outrank the load average (a real one, on a loaded machine, can tick within
    # the test's zero-second window and then it, not the load average, is the witness)
    monkeypatch.setattr(twin.devices.isolation, "_cpu_times", lambda: {})
    iso = check_isolation([0, 1], sample_s=0.0)
    assert iso["cores_allowed"] == 2 and iso["load_1min"] == 6.5
    assert any("load average 6.50 on 2 core(s)" in w for w in iso["warnings"])
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    assert not [w for w in check_isolation([], sample_s=0.0)["warnings"] if "load" in w or "allowed" in w]


def test_live_table_reports_stalled_rounds_apart_with_a_warning():
    from types import SimpleNamespace

    from rich.console import Console

    from twin.output.live import print_live, stall_summary
    from twin.stats import summary_ns
    svc = np.full(1000, 600, np.int64)
    svc[1::50] += np.arange(20) % 3                  # a little spread: MAD 0 -> floored at 1 ns
    rtt = svc * 1000 + 2_000_000
    svc[100], rtt[100] = 5_000_000, 5_002_000_000  # a lost 5 ms time slice
    rtt[101] += 4_000_000_000                     # the next request queued behind it
    extra = stall_summary(svc, rtt)
    assert extra["stalled"]["rounds"] == 1 and extra["stalled"]["queued_behind"] == 1
    assert extra["clean"]["round_trip"]["p999_ns"] < 3000                     # both left out
    live = {"backend": "shm", "simulated": summary_ns(rtt), "service": summary_ns(svc * 1000), **extra,
            "isolation": {"warnings": ["load average 6.50 on 2 core(s): 0.00 free, the run pins 2"]}}
    run = SimpleNamespace(node="cpu_live", summary={**summary_ns(rtt), "live": live, "name": "epyc7282",
                                                    "rounds": 1000},
                          result=SimpleNamespace(t_in=np.zeros(1000)))
    con = Console(record=True, width=200)
    print_live(SimpleNamespace(runs=[run]), con)
    text = con.export_text()
    assert "stalled rounds left out" in text and "998" in text
    assert "warning: cpu_live: 1 of 1,000 rounds" in text and "1 more queued behind them" in text
    assert "machine not quiet before the run: load average 6.50" in text


def test_best_shift_is_the_translation():
    rng = np.random.default_rng(2)
    x = rng.exponential(300_000, 50_000).astype(np.int64) + 2_000_000
    assert best_shift_ps(x + 123_000, x) == pytest.approx(123_000, abs=1)


def test_service_terms_recover_a_linear_service_and_say_what_they_cannot_tell_apart():
    runs = [LiveRun(Path(f"r{f}"), {}, {}, np.zeros(1), np.zeros(1), find_stalls(np.zeros(0)), Path("x"), f, fn,
                    "classic") for f, fn in ((64, "echo"), (1024, "echo"), (64, "sum32"))]
    # truth: 600 ns + 0.75 ns per frame byte + 0.25 ns per reply byte (sum32 replies 4 bytes)
    service = [600 + 0.75 * f + 0.25 * reply_bytes(lookup(r.function).id, f) for r, f in zip(runs, (64, 1024, 64))]
    notes: list[str] = []
    terms = _service_terms(runs, service, notes)
    # echo's reply is its frame: frame and reply slopes are told apart only by sum32's 4-byte reply, and
    # sum32's own term then cannot be: it is left at 0 and said so
    assert terms["service_ns"] == pytest.approx(600, abs=1e-6)
    assert terms["service_per_frame_byte_ns"] == pytest.approx(0.75, abs=1e-4)
    assert terms["service_per_reply_byte_ns"] == pytest.approx(0.25, abs=1e-4)
    assert any("function_ns.sum32" in n for n in notes)
    notes2: list[str] = []
    t2 = _service_terms(runs[:2], service[:2], notes2)
    assert t2["service_per_frame_byte_ns"] == pytest.approx(1.0) and "service_per_reply_byte_ns" not in t2
    assert any("service_per_reply_byte_ns" in n for n in notes2)


def test_modes_of_a_bimodal_histogram():
    rng = np.random.default_rng(3)
    main_ = rng.uniform(5_000_000, 5_400_000, 80_000)
    second = rng.uniform(6_000_000, 6_200_000, 20_000)           # 20 % of rounds, 1 us later
    x = np.concatenate([main_, second]).astype(np.int64)
    assert count_modes(x) == 2 and count_modes(main_.astype(np.int64)) == 1
    (m,) = extra_modes(x)
    assert m["weight"] == pytest.approx(0.2, abs=0.01)
    assert m["offset_ns"] == pytest.approx(6_100 - 5_200, abs=10)    # median to median: 5.2 -> 6.1 us


def test_compare_reports_errors_w1_and_ks():
    x = np.arange(1_000_000, 2_000_000, 100, dtype=np.int64)
    c = compare(x, x + 10_000)
    assert c.error_pct("p50") == pytest.approx(100 * 10_000 / np.percentile(x, 50), rel=1e-2)
    assert c.w1_ns == pytest.approx(10.0) and c.ks == pytest.approx(0.01, abs=1e-3)


# -- twin validate on synthetic runs -----------------------------------------------------------------

def test_validate_the_generating_model_on_its_own_runs(tmp_path, capsys):
    truth = truth_set(tmp_path)
    run = synthetic_run(tmp_path, "r256", truth, frame=256, stall_every=97)
    lr = load_run(run)
    assert lr.stalls.count == len(range(0, 4000, 97))                # every injected stall found, no more
    doc = yaml.safe_load(truth.read_text())
    doc["consumers"]["cpu_live_fitted"] = doc["consumers"]["epyc7282"]
    cal = tmp_path / "cal.yaml"
    cal.write_text(yaml.safe_dump(doc))
    out = tmp_path / "val"
    assert main(["validate", str(cal), str(run), "--out", str(out), "--rounds", "4000", "--seed", "99"]) == 0
    text = capsys.readouterr().out
    assert "p50" in text and "W1" in text and "stalled" in text
    j = json.loads((out / "validate.json").read_text())
    # the generating model on another seed: sampling error only (4,000 rounds)
    assert abs(j["runs"][0]["p50_error_pct"]) < 1.0 and j["runs"][0]["w1_pct_of_p50"] < 1.0
    assert j["runs"][0]["stalled_rounds_left_out"] == lr.stalls.count
    assert j["runs"][0]["histogram_measured"]["bin_ns"] == 4.0 and (out / "validate.png").stat().st_size > 0


def test_validate_names_a_missing_consumer(tmp_path, capsys):
    run = synthetic_run(tmp_path, "r64", truth_set(tmp_path), rounds=500)
    assert main(["validate", str(CAL), str(run), "--out", str(tmp_path / "v")]) == 2
    err = capsys.readouterr().err
    assert "cpu_live_fitted" in err and "--consumer" in err


# -- the whole fit (slow: differential evolution) -----------------------------------------------------

@pytest.mark.slow
def test_fit_at_64_and_1024_bytes_predicts_256(tmp_path):
    truth = truth_set(tmp_path)
    runs = [synthetic_run(tmp_path, f"r{f}", truth, frame=f, stall_every=200) for f in (64, 1024)]
    held = synthetic_run(tmp_path, "r256", truth, frame=256)
    fit = calibrate_from_live(runs, rounds=4000, rounds_check=20_000, maxiter=12, popsize=6, log=lambda s: None,
                              validate=[held])
    c = fit.params.consumers[fit.consumer]
    assert c.service_per_frame_byte_ns == pytest.approx(TRUE_SLOPE_NS, abs=0.05)
    _, cmp_, role = fit.checks[-1]
    assert role == "held out"
    assert abs(cmp_.error_pct("p50")) < 3.0 and abs(cmp_.error_pct("p99")) < 10.0


@pytest.mark.slow
def test_duty_cycle_fit_on_back_to_back_and_1ms(tmp_path):
    # the synthetic device pays 300 ns x (1 - exp(-gap / 50 us)) after idling: back to back about
    # nothing, 1 ms the whole 300 ns; the fit moves the back-to-back service quantiles toward the 1 ms
    # run's by the log-gap fraction
    idle = [{"mechanism": "cache refill", "cost_ns": 300.0, "tau_ns": 50_000.0}]
    truth = truth_set(tmp_path, idle)
    runs = [synthetic_run(tmp_path, "b2b", truth), synthetic_run(tmp_path, "g1ms", truth, gap="1 ms")]
    held = [synthetic_run(tmp_path, "g100us", truth, gap="100 us")]
    fit = calibrate_from_live(runs, rounds=4000, rounds_check=20_000, log=lambda s: None, validate=held)
    c = fit.params.consumers[fit.consumer]
    assert c.idle_mix[0][1] == 0 and c.idle_mix[-1] == (pytest.approx(1_000_000, rel=0.01), 1.0)
    # the 1 ms run's median service is c(1 ms) - c(back-to-back gap) above the back-to-back one
    from twin.fitting.live import idle_gaps_ps
    b2b = simulate_b2b(truth, tmp_path)
    g = float(np.median(idle_gaps_ps(b2b, 100_000)))          # the EPYC 7282 core's poll cost: 100 ns
    want = 300 * (1 - np.exp(-1000 / 50)) - 300 * (1 - np.exp(-g / 50e6))
    m = c.service_modes[len(c.service_modes) // 2]
    assert m.long_offset_ns - m.offset_ns == pytest.approx(want, abs=4)   # one card cycle
    for _, cmp_, role in fit.checks:
        assert abs(cmp_.error_pct("p50")) < 3.0
        if role == "fitted":
            assert cmp_.w1_pct < 0.5


def simulate_b2b(truth: Path, tmp_path: Path):
    from twin.fitting.live import simulate_run
    from twin.fitting.live_runs import load_run
    return simulate_run(load_params(truth), "epyc7282", load_run(tmp_path / "b2b"), 4000, 11)


# -- the acceptance on the committed H200 data (branch gpu's runs, 2026-12-01) -----------------------

LIVE = ROOT / "calibrations" / "measured" / "live"


def test_h200_host_shm_fitted_at_64_and_1024_bytes_predicts_256():
    # calibrations/fitted/h200_host_shm_size.yaml: fitted on echo_64B and echo_1024B only
    (v,) = validate(ROOT / "calibrations" / "fitted" / "h200_host_shm_size.yaml",
                    [LIVE / "h200_host_shm_size" / "echo_256B"], seed=7)
    assert abs(v.comparison.error_pct("p50")) < 3.0 and abs(v.comparison.error_pct("p99")) < 10.0


@pytest.mark.slow
@pytest.mark.parametrize("cal, sweep, runs", [
    ("h200_host_shm_duty.yaml", "h200_host_shm_duty", ["period_100us"]),
    ("h200_cuda_duty.yaml", "h200_cuda_duty", ["period_100us", "exp_100us"])])
def test_h200_duty_cycle_fitted_on_back_to_back_and_1ms_predicts_held_out_runs(cal, sweep, runs):
    checks = validate(ROOT / "calibrations" / "fitted" / cal, [LIVE / sweep / r for r in runs], seed=7)
    for v in checks:
        assert abs(v.comparison.error_pct("p50")) < 3.0 and v.comparison.w1_pct <= 2.0, v.run.path


def test_fits_write_a_new_file_unless_told_to_overwrite(tmp_path):
    import argparse
    import datetime as dt
    import re

    from twin.commands.calibrate import fitted_out
    from twin.commands.common import stamped
    from twin.usage import UsageError
    prior = tmp_path / "card_path.yaml"
    prior.write_text("name: x\n")
    out = fitted_out(argparse.Namespace(out=None, overwrite=False), prior)
    assert out.parent == tmp_path / "fitted" and re.fullmatch(r"card_path-\d{8}-\d{4}\.yaml", out.name)
    when = dt.datetime(2026, 12, 1, 21, 5, tzinfo=dt.timezone.utc)
    assert stamped(prior, when).name == "card_path-20261201-2105.yaml"
    (tmp_path / "fitted" / "card_path.yaml").write_text("# Written by `twin calibrate` from x\n")
    named = argparse.Namespace(out=str(tmp_path / "fitted" / "card_path.yaml"), overwrite=False)
    with pytest.raises(UsageError, match="--overwrite"):  # even a set the twin wrote: data, not scratch
        fitted_out(named, prior)
    named.overwrite = True
    assert fitted_out(named, prior) == tmp_path / "fitted" / "card_path.yaml"


def test_isolation_of_a_gpu_consumer_needs_one_host_core(monkeypatch):
    """A cuda run's consumer is the GPU: on one allowed, idle core (taskset) it needs only the twin's
    own core, while a CPU (shm) consumer there would take turns with the producer."""
    import os
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert not [w for w in check_isolation([], sample_s=0.0, cpu_consumer=False)["warnings"] if "allowed" in w]
    (w,) = [w for w in check_isolation([], sample_s=0.0)["warnings"] if "allowed" in w]
    assert "1 core(s) allowed, the run needs 2 quiet one(s) (producer and consumer)" in w


def test_calibrate_refuses_a_held_out_run_that_is_fitted_on_and_a_fit_of_two_devices(tmp_path, capsys):
    """A held-out run that is also a fit run, and fit runs of two devices (an shm CPU run and a cuda
    GPU run), are refused before any fit: one line, exit 2, nothing written."""
    L = ROOT / "calibrations" / "measured" / "live"
    shm, cuda = L / "h200_host_shm_duty_3" / "back_to_back", L / "h200_cuda_duty_3" / "back_to_back"
    out = tmp_path / "fit.yaml"
    assert main(["calibrate", "--from-live", str(shm), "--validate", str(shm), "--out", str(out)]) == 2
    assert "also a fit run" in capsys.readouterr().err
    assert main(["calibrate", "--from-live", str(shm), str(cuda), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "a cuda run of mi210" in err and "a shm run of epyc7282" in err
    assert not out.exists()


def test_validate_names_the_runs_a_calibration_was_fitted_on(tmp_path, capsys):
    """`twin validate` on a fitted set's own fit run says "fitted on", on another run "held out"."""
    L = ROOT / "calibrations" / "measured" / "live" / "h200_host_shm_duty_3"
    cal = ROOT / "calibrations" / "fitted" / "h200_host_shm_duty_3.yaml"
    fitted = {row["run"] for row in yaml.safe_load(cal.read_text())["fitted"]["fitted_on"]}
    assert "calibrations/measured/live/h200_host_shm_duty_3/back_to_back" in fitted
    assert main(["validate", str(cal), str(L / "back_to_back"), str(L / "period_100us"), "--rounds", "3000",
                 "--out", str(tmp_path / "v"), "--no-plot"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines()  # the first fold of the table: its µs columns
            if ("fitted on" in line or "held out" in line) and "µs" in line]
    assert len(rows) == 2 and "back_to_b" in rows[0] and "fitted on" in rows[0] and "held out" in rows[1]


def test_a_taskset_run_on_a_large_host_is_judged_by_the_host_load_and_its_own_cores(monkeypatch):
    """The load average counts the whole machine's runnable tasks: a cuda run held to core 3 of an
    idle 16-core host whose other work keeps the load at 0.76 is not warned (was 'load average 0.76
    on 1 core(s): 0.24 free'); at load 15.5 one core is left, under the run's one: warned. The
    allowed core itself is sampled, as a pinned one is."""
    import os

    from twin.devices import isolation
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.76, 0.5, 0.5))
    ticks = iter([{3: (0, 100)}, {3: (90, 200)}])  # core 3 ran other work 90 of 100 ticks
    monkeypatch.setattr(isolation, "_cpu_times", lambda: next(ticks))
    iso = check_isolation([], sample_s=0.0, cpu_consumer=False)
    assert iso["busy"] == {3: 0.9}
    assert iso["warnings"] == ["core 3 (allowed) was 90 % busy with other work before the run"]
    monkeypatch.setattr(isolation, "_cpu_times", lambda: {3: (0, 100)})
    assert check_isolation([], sample_s=0.0, cpu_consumer=False)["warnings"] == []
    monkeypatch.setattr(os, "getloadavg", lambda: (15.7, 15.0, 15.0))
    (w,) = check_isolation([], sample_s=0.0, cpu_consumer=False)["warnings"]
    assert w.startswith("load average 15.70 on 16 core(s): 0.30 free, the run needs 1")  # pins none


def test_an_idle_two_core_machine_is_not_called_loaded(monkeypatch):
    """A shm run pinning both cores of an idle 2-core machine: the 1-minute load 0.09 (the twin's own
    start-up in it) is within LOAD_SLACK of the two cores the run needs, so no load warning (was
    '1.91 free, the run pins 2'); 0.6 of other work is more than half a core short: warned."""
    import os

    from twin.devices import isolation
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(isolation, "_cpu_times", lambda: {})
    monkeypatch.setattr(os, "getloadavg", lambda: (0.09, 0.05, 0.01))
    assert check_isolation([1, 0], sample_s=0.0)["warnings"] == []
    monkeypatch.setattr(os, "getloadavg", lambda: (0.6, 0.5, 0.5))
    (w,) = check_isolation([1, 0], sample_s=0.0)["warnings"]
    assert w.startswith("load average 0.60 on 2 core(s): 1.40 free, the run pins 2")


def test_idle_pinned_cores_outrank_a_decaying_load_average(monkeypatch):
    """Right after the user's own runs the 1-minute load is 0.9 on a 2-core machine, but the two
    pinned cores, sampled now, are 5 % and 0 % busy: no load warning (it said '1.10 free, the run
    pins 2'); the same load with core 0 60 % busy is warned, by the sample."""
    import os

    from twin.devices import isolation
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.9, 0.5, 0.3))
    ticks = iter([{0: (0, 100), 1: (0, 100)}, {0: (5, 200), 1: (0, 200)}])
    monkeypatch.setattr(isolation, "_cpu_times", lambda: next(ticks))
    assert check_isolation([1, 0], sample_s=0.0)["warnings"] == []
    ticks = iter([{0: (0, 100), 1: (0, 100)}, {0: (60, 200), 1: (0, 200)}])
    assert check_isolation([1, 0], sample_s=0.0)["warnings"] == [
        "core 0 (pinned) was 60 % busy with other work before the run"]
