"""A host runtime (dispatcher, worker queue, worker: twin.devices.host_runtime) as consumer stages:
both engines give the same instants; its stages are in the budget and add up; each round's stages
are the measured request its draw and idle gap pick; a seed gives the same bytes; bad keys are
refused at load in one line; the live harness (hw_bridge/c/hb_host_runtime.c) answers correctly."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twin.config import ConfigError
from twin.devices import LinkCardParams, TrafficParams, cpu_core, gpu_persistent_kernel
from twin.devices.generator import Gaps
from twin.devices.host_runtime import HostRuntime, read
from twin.devices.service import IdleCost
from twin.engine import LoopSpec, run_direct, run_event
from twin.engine.direct import check_same
from twin.engine.hops import budget, stage_times
from twin.exchange.encoding import get_encoding
from twin.links import PcieLink
from twin.runtime.native import _compiler
from twin.scenario import load_scenario
from twin.scenario.compile import compile_scenario

NS = 1000
US = 1000 * NS
ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "calibrations" / "measured" / "host_runtime" / "vm2core_rep3.yaml"
SCENARIO = ROOT / "scenarios" / "loop_host_runtime_rep3.yaml"


def _runtime(seed: int, points: int = 2, rows: int = 40) -> HostRuntime:
    rng = np.random.default_rng(seed)
    idle = tuple(int(3 * US * 30 ** k) for k in range(points))

    def col(lo, hi):
        return tuple(rng.integers(lo, hi, rows) for _ in range(points))
    return HostRuntime("synthetic.yaml", "block", idle, col(100 * NS, 400 * NS), col(2 * US, 40 * US),
                       col(500 * NS, 3 * US))


def _spec(consumer, traffic, seed=5, jitter_ps=0):
    return LoopSpec("epyc", LinkCardParams(), consumer, traffic, PcieLink(latency_ps=900 * NS),
                    PcieLink(latency_ps=900 * NS), jitter_ps, seed=seed)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["cpu", "gpu"]), enc=st.sampled_from(["classic", "per_piece"]),
       mode=st.sampled_from(["closed_loop", "open_loop"]), idle=st.booleans(), hr_seed=st.integers(0, 100),
       gaps=st.one_of(st.none(), st.builds(Gaps, st.just("exponential"), st.integers(1 * US, 300 * US))),
       jitter=st.sampled_from([0, 20_000]), seed=st.integers(0, 2**31))
def test_engines_agree_with_a_host_runtime(kind, enc, mode, idle, hr_seed, gaps, jitter, seed):
    c = cpu_core(37 * NS, 80 * NS, 30 * NS, enc) if kind == "cpu" else gpu_persistent_kernel(600 * NS, 100 * NS,
                                                                                              enc, 800 * NS)
    c = replace(c, host_runtime=_runtime(hr_seed),
                idle=(IdleCost("cache refill", cost_ps=400 * NS, tau_ps=100 * US),) if idle else ())
    tr = TrafficParams(mode=mode, rounds=150, frame_bytes=64, period_ps=200 * US if mode == "open_loop" else 0,
                       gaps=None if mode == "open_loop" else gaps)
    spec = _spec(c, tr, seed, jitter)
    e, d = run_event(spec), run_direct(spec)
    assert e.mismatches == 0
    check_same(d, e, len(d.t_in))  # every timestamp and hop identical, the host runtime's instants too
    assert set(d.hops.inner) == {"hr_enqueued", "hr_awake", "hr_decoded"}


def test_stages_are_in_the_budget_add_up_and_are_the_drawn_requests():
    hr = _runtime(3)
    base = cpu_core(37 * NS, 80 * NS, 30 * NS, "per_piece")
    tr = TrafficParams(rounds=400, frame_bytes=64, gaps=Gaps("exponential", 200 * US))
    spec = _spec(replace(base, host_runtime=hr), tr)
    r = run_direct(spec)
    names = [row["stage"] for row in budget(r.t_in, r.t_have, r.hops)]
    i = names.index("service")
    assert names[i - 2:i + 2] == ["host_enqueue", "host_wake", "service", "host_handback"]
    st_ = stage_times(r.t_in, r.t_have, r.hops)
    assert np.array_equal(sum(st_.values()), r.t_have - r.t_in)
    # round i: the idle gap from the thread free (the previous reply published) to the poll that took
    # it; its stages are request floor(u_i * rows) of the point nearest that gap in log time
    h = r.hops
    gap = h.start - base.poll_cost_ps - np.concatenate([[0], h.publish[:-1]])
    draws = hr.draws(spec.seed, spec.stream("consumer.host_runtime"), tr.rounds)
    want = []
    for g, x in zip(gap.tolist(), draws.tolist()):
        k = int(np.argmin([abs(math.log(p) - math.log(max(1, g))) for p in hr.idle_ps]))
        j = int(x * len(hr.enqueue_ps[k]))
        want.append((hr.enqueue_ps[k][j], hr.wake_ps[k][j], hr.handback_ps[k][j]))
    want = np.array(want)
    assert np.array_equal(st_["host_enqueue"], want[:, 0])
    assert np.array_equal(st_["host_wake"], want[:, 1])
    assert np.array_equal(st_["host_handback"], want[:, 2])
    assert np.array_equal(st_["service"], np.full(tr.rounds, base.service_ps + base.pre_service_ps(
        get_encoding("per_piece"), 64)))
    # both points are used (gaps of mean 200 us against points at 3 us and 90 us)
    ks = {int(np.argmin([abs(math.log(p) - math.log(max(1, g))) for p in hr.idle_ps])) for g in gap.tolist()}
    assert ks == {0, 1}
    # without the host runtime the same loop answers inline: the first round trip shrinks by its
    # stages, within the card's reply poll (a 4 ns grid)
    plain = run_direct(_spec(base, tr))
    assert plain.hops.inner is None
    assert abs(int(r.rtt_ps[0] - plain.rtt_ps[0]) - int(want[0].sum())) < LinkCardParams().reply_poll_period_ps


def test_same_seed_same_bytes_other_seed_other_draws():
    hr = _runtime(4)
    c = replace(cpu_core(37 * NS, 80 * NS, 30 * NS, "classic"), host_runtime=hr)
    tr = TrafficParams(rounds=200, frame_bytes=64, gap_ps=50 * US)
    a, b, o = run_direct(_spec(c, tr, 9)), run_direct(_spec(c, tr, 9)), run_direct(_spec(c, tr, 10))
    for f in ("t_send", "t_in", "t_have", "t_back"):
        assert getattr(a, f).tobytes() == getattr(b, f).tobytes()
    for k in a.hops.inner:
        assert a.hops.inner[k].tobytes() == b.hops.inner[k].tobytes()
    assert (a.rtt_ps - o.rtt_ps).any()


def test_the_measured_file_reads_per_wake_mode():
    for wake in ("spin", "block"):
        hr = read(str(MEASURED), wake)
        assert hr.wake == wake and len(hr.idle_ps) >= 3
        assert all(len(e) >= 100 for e in hr.enqueue_ps)
        doc = yaml.safe_load(MEASURED.read_text())
        for p in doc["points"]:
            assert {"machine", "measured_at", "protocol"} <= set(doc) and p["stages_ns"]["wake"]["p50"] > 0
    with pytest.raises(ValueError, match="wake must be"):
        read(str(MEASURED), "sleep")


def test_the_bundled_scenario_runs_its_stages():
    loaded = load_scenario(SCENARIO)
    topo = compile_scenario(loaded, rounds=300)
    spec = topo.flows[0].spec
    assert spec.consumer.host_runtime is not None and spec.consumer.host_runtime.wake == "block"
    r = run_event(spec)
    assert r.mismatches == 0
    names = [row["stage"] for row in budget(r.t_in, r.t_have, r.hops)]
    assert {"host_enqueue", "host_wake", "host_handback"} <= set(names)


def _bad(tmp_path, mutate) -> str:
    doc = yaml.safe_load(SCENARIO.read_text())
    doc["calibration"] = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
    doc["nodes"][2]["host_runtime"]["file"] = str(MEASURED)
    mutate(doc)
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ConfigError) as e:
        load_scenario(p)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(p))
    return msg


def test_bad_keys_are_refused_at_load(tmp_path):
    def wake(d):
        d["nodes"][2]["host_runtime"]["wake"] = "sleep"
    assert "nodes[2].host_runtime.wake: 'sleep'" in _bad(tmp_path, wake)

    def extra(d):
        d["nodes"][2]["host_runtime"]["cores"] = 3
    assert "nodes[2].host_runtime.cores" in _bad(tmp_path, extra)

    def missing(d):
        d["nodes"][2]["host_runtime"]["file"] = "nowhere.yaml"
    assert "nodes[2].host_runtime.file: 'nowhere.yaml'" in _bad(tmp_path, missing)

    def other_schema(d):
        d["nodes"][2]["host_runtime"]["file"] = str(ROOT / "calibrations" / "measured" / "card_path_64b.yaml")
    assert "not a host runtime measurement" in _bad(tmp_path, other_schema)

    def on_the_card(d):
        d["nodes"][1]["host_runtime"] = {"file": str(MEASURED), "wake": "block"}
    assert "nodes[1].host_runtime" in _bad(tmp_path, on_the_card)


@pytest.mark.skipif(_compiler() is None, reason="no C compiler (hw_bridge.build needs one)")
def test_the_harness_answers_rep3_and_stamps_in_order():
    from hw_bridge.host_runtime import check_replies, point_doc, run_point
    from hw_bridge.host_runtime import stage_times as hstages
    for wake in ("block", "spin"):
        rec, timer = run_point(wake, "rep3", 60, 0, warmup=10, seed=5)  # raises on any wrong reply
        assert rec.shape == (60, 10) and timer > 0
        assert (np.diff(rec[:, :8], axis=1) >= 0).all()  # t0 <= t1 <= ... <= t7 in every request
        assert set(rec[:, 8].tolist()) <= set(range(16)) and len(set(rec[:, 8].tolist())) > 4
        st_ = hstages(rec)
        assert np.array_equal(sum(st_[k] for k in ("ring", "enqueue", "wake", "decode", "handback", "publish",
                                                    "reply")), rec[:, 7] - rec[:, 0])
        doc = point_doc(wake, 0, rec, timer)
        from twin.devices.host_runtime import decode_sample
        back = decode_sample(doc["sample"])
        assert np.array_equal(back["wake"], st_["wake"])
    bad = rec.copy()
    bad[3, 9] ^= 1
    with pytest.raises(RuntimeError, match="1 wrong replies"):
        check_replies(bad, "rep3")


def test_the_benchmark_command_runs_in_a_fresh_process(tmp_path):
    """benchmarks/host_runtime.py as a user runs it (its own process: the decoders registered by the
    command itself, not by an earlier import in the test session) writes a file of its points."""
    import os
    import subprocess
    import sys
    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "hr.yaml"
    env = {**os.environ, "PYTHONPATH": str(root)}
    r = subprocess.run([sys.executable, str(root / "benchmarks" / "host_runtime.py"), "--out", str(out),
                        "--requests", "60", "--warmup", "10", "--gaps-us", "0", "--wake", "block"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = yaml.safe_load(out.read_text())
    assert doc["decoder"] == "decode_rep3" and doc["points"]


@pytest.mark.parametrize("gap", ["-1", "nan", "inf", "x"])
def test_the_benchmark_refuses_a_gap_below_zero_in_one_line(tmp_path, gap):
    import os
    import subprocess
    import sys
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, str(root / "benchmarks" / "host_runtime.py"), "--out", str(tmp_path / "h.yaml"),
                        "--gaps-us", gap], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(root)},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].endswith("a gap in µs, a number >= 0")
    assert not (tmp_path / "h.yaml").exists()
