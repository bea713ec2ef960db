"""The Qblox Cluster control system: Q1ASM timing, publish times per round, its own drifting clock,
and the seeds' observation that traffic from an independent clock spreads the histograms smoothly.

Expected timings are worked out by hand from the Q1ASM semantics (a real-time instruction's last
argument is its duration in ns; classical instructions take no real time).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.config import ConfigError
from twin.devices.q1asm import Q1AsmError, Sequencer, parse, run_cluster
from twin.devices.qblox import QbloxCluster
from twin.kernel.clock import Clock, DriftingClock
from twin.scenario import load_scenario
from twin.stats import histogram_ps
from twin.studies.run import run_study

ROOT = Path(__file__).resolve().parent.parent


def timeline(program: str):
    return run_cluster({"s": program})["s"]


def test_real_time_durations_and_loops():
    tl = timeline("""
        move 3,R0
    l:  wait 100
        acquire 0,0,20        # at 100, 220, 340
        loop R0,@l
        play 0,1,8
        stop
    """)
    assert tl.acquisitions == [100, 220, 340]
    assert tl.durations == [20, 20, 20]
    assert tl.end_ns == 3 * 120 + 8


def test_conditional_jumps_and_register_waits():
    tl = timeline("""
        move 0,R1
        move 40,R2
    top: add R1,1,R1
        wait R2              # register duration
        acquire 0,R1,4
        jlt R1,4,@top       # four passes
        jge R1,10,@never
        stop
    never: illegal
    """)
    assert tl.acquisitions == [40, 84, 128, 172]


def test_parameter_instructions_take_no_time():
    tl = timeline("set_mrk 1\nset_freq 100\nreset_ph\nupd_param 4\nacquire 0,0,16\nstop")
    assert tl.acquisitions == [4]


def test_wait_sync_lines_sequencers_up():
    tls = run_cluster({"a": "wait 100\nwait_sync 4\nacquire 0,0,8\nstop",
                       "b": "wait 300\nwait_sync 4\nacquire 0,0,8\nstop"})
    assert tls["a"].acquisitions == [304] and tls["b"].acquisitions == [304]


@pytest.mark.parametrize("program, words", [
    ("wait 2\nstop", "outside [4, 65535]"),
    ("wait 70000\nstop", "outside"),
    ("acquire 0,0,-300\nstop", "acquire: duration -300 ns is negative"),  # as written, not wrapped to 2**32 - 300
    ("play 0,0,0x20000\nstop", "duration 0x20000 ns outside"),
    ("l: jmp @l\nstop", "endless"),
    ("wait 8", "no stop"),
    ("frobnicate 3\nstop", "unknown instruction"),
    ("jmp @nowhere\nstop", "no label"),
    ("acquire 0,0\nstop", "expected 3 arguments"),
    ("move 1,R64\nstop", "R0..R63"),
])
def test_bad_programs_are_refused_with_the_line(program, words):
    with pytest.raises(Q1AsmError, match=words.replace("[", r"\[").replace("(", r"\(")):
        Sequencer("s", program, max_steps=10_000).run_until_sync()


def test_parse_labels_point_at_the_next_instruction():
    instrs, labels = parse("a:\n b: nop\n stop")
    assert labels == {"a": 0, "b": 0} and [i.op for i in instrs] == ["nop", "stop"]


def _cluster(**kw) -> QbloxCluster:
    prog = "wait_sync 4\nmove 10,R0\nr: wait 996\nacquire 0,0,200\nacquire 1,0,200\nwait 3600\nloop R0,@r\nstop"
    return QbloxCluster(sequencers=[{"name": "q", "program": prog, "measurements_per_round": 2}], **kw)


def test_publish_instants_period_and_syndrome_size():
    c = _cluster(result_latency_ns=150, trigger_network_ns=250)
    # wait_sync 4, then per round: 996 wait, acquisitions at +996 and +1196, each 200 ns
    first_end = 4 + 996 + 200 + 200
    assert c.publish_ns()[:2] == [first_end + 400, first_end + 400 + 4996]
    assert c.period_ns() == 996 + 400 + 3600
    assert c.syndrome_bits() == 2
    tr = c.traffic(rounds=10, frame_bytes=8)
    assert (tr.mode, tr.period_ps, tr.clock_ps, tr.offset_ps) == \
        ("open_loop", 4_996_000, 1000, (first_end + 400) * 1000)


def test_unequal_rounds_and_partial_rounds_are_refused():
    prog = "move 2,R0\nacquire 0,0,8\nr: wait 100\nacquire 0,0,8\nloop R0,@r\nwait 12\nacquire 0,0,8\nstop"
    c = QbloxCluster(sequencers=[{"name": "q", "program": prog, "measurements_per_round": 1}])
    with pytest.raises(Q1AsmError, match="not equally spaced"):
        c.period_ns()
    with pytest.raises(ValueError, match="not whole rounds"):
        QbloxCluster(sequencers=[{"name": "q", "program": "acquire 0,0,8\nstop", "measurements_per_round": 2}])


def test_drifting_clock_edges():
    c = DriftingClock(1000, 12_500, 7, 2000)  # 12.5 ppm, 2 ppb/s = 2000 ppt/s
    k = 10**9  # one second of 1 ns edges
    base = 7 + (k * 1000 * (10**9 + 12_500)) // 10**9
    drift = (k * 1000) ** 2 * 2000 // (2 * 10**24)  # 1 ns: half of 2 ppb times one second
    assert c.edge(k) == base + drift and drift == 1000
    assert c.edge(5) == Clock(1000, 12_500, 7).edge(5)
    assert c.at_or_after(c.edge(k) - 1) == c.edge(k)


def test_qblox_scenario_errors_name_the_key(tmp_path):
    doc = yaml.safe_load((ROOT / "scenarios" / "qblox_cluster.yaml").read_text())
    doc["calibration"] = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
    doc["frame_bytes"] = 0 + 1  # 8 bits < 8 syndrome bits? 1 byte holds 8: fits
    doc["qblox"]["sequencers"][0]["measurements_per_round"] = 40  # 44 bits > 8
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as e:
        load_scenario(p)
    assert "sequencers" in str(e.value) or "frame_bytes" in str(e.value)


def max_bin_fraction(rtt_ps: np.ndarray) -> float:
    _, counts = histogram_ps(rtt_ps, 4000)
    return counts.max() / counts.sum()


def only_mi210(name: str, tmp_path: Path):
    """The bundled scenario ``name`` with the MI210 as its only consumer."""
    doc = yaml.safe_load((ROOT / "scenarios" / name).read_text())
    doc["calibration"] = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
    doc["measured"] = None
    keep = {n["name"] for n in doc["nodes"] if n["kind"] != "consumer" or n["name"] == "mi210"}
    doc["nodes"] = [n for n in doc["nodes"] if n["name"] in keep]
    doc["links"] = [e for e in doc["links"] if e["from"] in keep and e["to"] in keep]
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_scenario(p)


def test_independent_clock_spreads_the_gpu_histogram(tmp_path):
    """The MI210 polls every ~0.93 µs (fitted). Closed loop on the card's clock (the seeds'
    measurement, scenarios/card_path_64b.yaml) starts every round at nearly the same point of that
    poll cycle, so the round trips bunch into spikes a few bins wide, each holding several percent
    of the rounds: we require the largest 4 ns bin to hold >= 3 %. The Qblox cluster on its own
    clock (random phase, 12.5 ppm, drift) lands requests at every phase of the poll cycle, so the
    round trip spreads evenly over about one poll period, ~230 bins of 4 ns: the largest bin should
    hold about 1/230 = 0.43 % of the rounds; we require <= 1 % (room for the path jitter's shape)
    and less than a fifth of the same-clock figure ("far less")."""
    same = only_mi210("card_path_64b.yaml", tmp_path)
    indep = only_mi210("qblox_cluster.yaml", tmp_path)
    a = run_study(same, rounds=30_000, verify_rounds=500).runs[0].result.rtt_ps
    b = run_study(indep, rounds=30_000, verify_rounds=500).runs[0].result.rtt_ps
    fa, fb = max_bin_fraction(a), max_bin_fraction(b)
    assert fa >= 0.03, fa
    assert fb <= 0.01 and fb < fa / 5, (fa, fb)


# -- cross-check against q1simulator's Q1 core -------------------------------------------------

def q1simulator_core():
    """q1simulator's Q1 core and renderer, loaded without its package ``__init__`` (which imports its
    Qt program browser and fails without Qt bindings). Returns a runner ``program -> [acquisition
    start ns, ...]`` or skips the test with the reason."""
    import importlib.util
    import os
    import sys
    import types
    spec = importlib.util.find_spec("q1simulator")
    if spec is None or not spec.submodule_search_locations:
        if os.environ.get("TWIN_TEST_EXTRA"):  # asked to hold the test extra installed: a missing package fails
            pytest.fail("q1simulator is in the test extra but not installed (pip install -e '.[test]')")
        pytest.skip("q1simulator is not installed (pip install -e '.[test]')")
    saved = sys.modules.get("q1simulator")
    pkg = types.ModuleType("q1simulator")
    pkg.__path__ = list(spec.submodule_search_locations)
    sys.modules["q1simulator"] = pkg
    try:
        from q1simulator.event_distributor import EventDistributor
        from q1simulator.q1core import Q1Core
        from q1simulator.rt_renderer import Renderer
    except Exception as e:  # pragma: no cover - depends on the installed version
        pytest.skip(f"q1simulator's core does not load on its own: {type(e).__name__}: {e}")
    finally:
        if saved is None:
            sys.modules.pop("q1simulator", None)
        else:
            sys.modules["q1simulator"] = saved

    def run(program: str) -> list[int]:
        ed = EventDistributor()
        ed.arm_sequencer("s", synced=False)
        ed.start_sequencer("s")
        r = Renderer("s", ed)
        r.acquisitions = {i: 4096 for i in range(4)}
        r.delete_acquisition_data_all()
        r.skip_wait_sync = False
        r.reset()
        core = Q1Core("s", r, True, ed)
        core.load(program)
        core.run()
        assert core.exit_code == 0 and not core.errors, core.errors
        return sorted(int(t) for times in r.acq_times.values() for t, _ in times)
    return run


CROSS_CHECK = [
    "move 3,R0\nmove 0,R1\nl: wait 100\nacquire 0,R1,20\nadd R1,1,R1\nloop R0,@l\nupd_param 8\nacquire 1,0,300\nstop",
    "move 0,R1\nmove 40,R2\ntop: add R1,1,R1\nwait R2\nacquire 0,R1,4\njlt R1,4,@top\nstop",
    "move 5,R0\nr: set_mrk 1\nupd_param 4\nwait 996\nacquire 0,0,300\nacquire 1,0,300\nset_mrk 0\nwait 600\nloop "
    "R0,@r\nstop",
]


@pytest.mark.parametrize("program", CROSS_CHECK)
def test_acquisition_times_agree_with_q1simulator(program):
    q1sim = q1simulator_core()
    assert timeline(program).acquisitions == q1sim(program)


def test_bundled_qblox_programs_agree_with_q1simulator():
    q1sim = q1simulator_core()
    doc = yaml.safe_load((ROOT / "scenarios" / "qblox_cluster.yaml").read_text())
    for s in doc["qblox"]["sequencers"]:
        prog = s["program"].replace("wait_sync 4", "wait 4")  # one sequencer alone: no barrier to meet
        assert timeline(prog).acquisitions == q1sim(prog), s["name"]


def test_publish_to_reply_adds_the_result_and_trigger_latencies():
    loaded = load_scenario(ROOT / "scenarios" / "qblox_cluster.yaml")
    s = run_study(loaded, rounds=500, verify_rounds=100).runs[0].summary
    q = loaded.scenario.qblox
    assert q.result_latency_ns + q.trigger_network_ns == 400
    for k, v in s["loop"].items():
        assert s["publish_to_reply"][k] == pytest.approx(v + 400, abs=1e-6)
    # sends follow the program's 5 µs round period on the cluster's clock (12.5 ppm slow)
    res = run_study(loaded, rounds=500, verify_rounds=0).runs[0].result
    gaps = np.diff(res.t_send)
    assert abs(gaps.mean() - 5_000_000 * (1 + 12.5e-6)) < 1.0


def test_the_test_extra_installs_q1simulator():
    """The cross-check above runs where the test extra is installed (CI), instead of always skipping."""
    import tomllib
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(r.split(">")[0].split("=")[0].strip() == "q1simulator" for r in extra), extra
