"""Issue 14, parts 2-4: a stim circuit's feedback timed by the loop, its stalls as idle noise, the LER
they cost, and the timing-aware LER; checked from first principles.

The circuit is built here (not the bundled file): a distance-3 repetition code whose ancillas are
reset by feedback (``M``, then ``CX rec[-k] a``), data qubits 0 2 4, with ``X_ERROR(b)`` on the data
before every round and before the final readout and no other noise. With exact measurements a data
flip between two rounds is seen in the later round's detectors alone, so matching decodes each
round on its own: a round fails (a logical flip) when two or three of its data qubits flipped,
``f = 3 e^2 (1 - e) + e^3`` with ``e`` the round's flip probability, and a shot fails when an odd
number of rounds did: ``(1 - prod(1 - 2 f_j)) / 2``. The idle noise adds, per data qubit and round,
an X or Y (both flip a Z measurement) with probability ``p_x + p_y = (1 - exp(-t / T1)) / 2`` for
a stall ``t``.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import stim
from scipy.stats import binomtest

from twin.calibration.roce import load_any_params
from twin.config import ConfigError
from twin.devices.generator import TrafficParams, Waits
from twin.qec.cost import CostModel
from twin.qec.decoders.registry import build
from twin.qec.feedback import analyse
from twin.qec.hosting import load_hosting
from twin.qec.idle_noise import IdleNoise, draw_paulis
from twin.qec.ler_latency import feedback_point
from twin.qec.loop import run_decode
from twin.qec.workload import sample_circuit

ROOT = Path(__file__).resolve().parent.parent
CAL = ROOT / "calibrations" / "fitted" / "card_path.yaml"
US = 1_000_000  # ps
PERIOD, SLACK, CLK = 1 * US, 200_000, 4000


def rep_feedback_text(rounds: int, b: float, idle: list[tuple[float, float, float]] | None = None) -> str:
    """The test's circuit as stim text; ``idle[r]``: a PAULI_CHANNEL_1 on the data after round ``r``'s feedback."""
    lines = ["R 0 1 2 3 4"]
    for r in range(rounds):
        lines += [f"X_ERROR({b}) 0 2 4", "CX 0 1 2 3", "CX 2 1 4 3", "M 1 3", "CX rec[-2] 1 rec[-1] 3"]
        prev = "" if r == 0 else " rec[-4]", "" if r == 0 else " rec[-3]"
        lines += [f"DETECTOR(1, {r}) rec[-2]{prev[0]}", f"DETECTOR(3, {r}) rec[-1]{prev[1]}"]
        if idle is not None:
            lines.append(f"PAULI_CHANNEL_1({idle[r][0]}, {idle[r][1]}, {idle[r][2]}) 0 2 4")
    lines += [f"X_ERROR({b}) 0 2 4", "M 0 2 4",
              f"DETECTOR(1, {rounds}) rec[-2] rec[-3] rec[-5]", f"DETECTOR(3, {rounds}) rec[-1] rec[-2] rec[-4]",
              "OBSERVABLE_INCLUDE(0) rec[-1]"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def loop():
    return load_any_params(CAL), load_hosting(ROOT / "calibrations" / "hosting.yaml")[0]


def feedback_run(loop, circuit, shots, inject_ps=0, slack_ps=SLACK, period_ps=PERIOD, seed=3, feedback=True):
    params, hosting = loop
    w = sample_circuit(circuit, shots, seed=seed, per="round")
    plan = analyse(circuit)
    fb = Waits(plan.waits, (period_ps - slack_ps) // CLK) if feedback else None
    tr = TrafficParams(mode="open_loop", period_ps=period_ps, waits=fb)
    r = run_decode(params, "epyc7282", w, build("matching", circuit, name="fbtest_matching"), mode="inline",
                   hosting=hosting, cost=CostModel(fixed_ns=300.0), traffic=tr, seed=seed, engine="auto",
                   verify_rounds=w.requests if shots <= 200 else 0, inject_ps=inject_ps)
    return r, plan


def test_the_circuit_waits_where_its_gates_read_the_previous_round():
    plan = analyse(stim.Circuit(rep_feedback_text(4, 1e-3)))
    assert plan.waits == ((), (1,), (1,), (1,), (1,))  # 4 rounds and the final readout; each waits for the last
    assert plan.idle_qubits == (0, 2, 4) and plan.gates == 4


def test_stall_per_cycle_is_the_reaction_time_minus_the_slack(loop):
    c = stim.Circuit(rep_feedback_text(4, 1e-3))
    r, plan = feedback_run(loop, c, 200)
    assert r.extra["engine"] == "direct+event"  # the event model ran every request: same instants as direct
    t_send, t_back = r.result.t_send, r.result.t_back
    gap = np.diff(t_send)
    waits = np.array([bool(plan.waits[i % 5]) for i in range(1, len(t_send))])
    # the gate is SLACK after the syndrome; it is applied at the first edge at or after the correction;
    # the next syndrome is measured PERIOD - SLACK later
    reaction = (t_back - t_send)[:-1]
    stall = np.maximum(0, -(-(reaction - SLACK) // CLK) * CLK)
    assert (gap[waits] == PERIOD + stall[waits]).all()
    assert (gap[~waits] == PERIOD).all()  # a shot's first round waits for nothing
    assert (stall[waits] > 0).all()
    # against the loop's reaction time measured independently: the same stream without feedback, at a
    # 10 us cycle (no request waits for another); PCIe jitter and the poll phase differ between the runs
    free, _ = feedback_run(loop, c, 200, period_ps=10 * US, feedback=False)
    r0 = float((free.result.t_back - free.result.t_send).mean())
    assert abs(stall[waits].mean() - (r0 - SLACK)) < 3 * CLK
    pt = feedback_point(r, plan, PERIOD, SLACK, IdleNoise("t1t2", 20 * US, 20 * US), 1, lambda k, n: (0, 1))
    assert pt["effective_cycle_ns"] == pytest.approx((t_send[-1] - t_send[0]) / (len(t_send) - 1) / 1000, abs=1e-3)
    assert pt["stall_per_cycle_ns"] == pytest.approx(np.r_[0, stall * waits].mean() / 1000, abs=1e-3)
    assert pt["reaction_to_applied"]["p50_ns"] >= pt["reaction"]["p50_ns"]


def test_feedback_across_a_cable_on_an_independent_clock_is_the_same_in_both_engines(loop):
    params, hosting = loop
    c = stim.Circuit(rep_feedback_text(3, 1e-2))
    w = sample_circuit(c, 60, seed=4, per="round")
    tr = TrafficParams(mode="open_loop", period_ps=PERIOD, clock="independent", ppm=12.5,
                       waits=Waits(analyse(c).waits, (PERIOD - SLACK) // CLK))
    r = run_decode(params, "mi210", w, build("matching", c, name="fbtest2_matching"), mode="inline", hosting=hosting,
                   cost=CostModel(fixed_ns=300.0), traffic=tr, seed=4, engine="auto", verify_rounds=w.requests,
                   external_control=True)
    assert r.extra["engine"] == "direct+event" and r.identical  # EngineDisagreement otherwise
    gap = np.diff(r.result.t_send)
    assert (gap[3::4] < PERIOD + CLK).all() and (gap[np.arange(len(gap)) % 4 != 3] > PERIOD + 4 * US).all()


def test_a_slack_longer_than_the_reaction_time_costs_no_stall(loop):
    c = stim.Circuit(rep_feedback_text(2, 1e-3))
    r, _ = feedback_run(loop, c, 50, slack_ps=5 * US, period_ps=5 * US)
    assert (np.diff(r.result.t_send) == 5 * US).all()


def expected_ler(stall_ps: np.ndarray, b: float, t1_ps: int) -> float:
    """First principles (module docstring), per shot from its stalls (shots, rounds + 1)."""
    e_idle = (1 - np.exp(-stall_ps / t1_ps)) / 2
    e = b * (1 - e_idle) + e_idle * (1 - b)
    f = 3 * e**2 * (1 - e) + e**3
    return float(((1 - np.prod(1 - 2 * f, axis=1)) / 2).mean())


def test_ler_rises_with_injected_latency_as_the_idle_noise_predicts(loop):
    b, t1 = 1e-3, 20 * US
    noise = IdleNoise("t1t2", t1, t1)
    c = stim.Circuit(rep_feedback_text(4, b))
    shots = 2000

    def ci(k, n):
        iv = binomtest(k, n).proportion_ci(confidence_level=0.99, method="wilson")
        return iv.low, iv.high
    lers = []
    for inject in (0, 3 * US, 8 * US):
        r, plan = feedback_run(loop, c, shots, inject_ps=inject)
        pt = feedback_point(r, plan, PERIOD, SLACK, noise, seed=11, ci=ci, inject_ps=inject)
        stall = np.r_[0, np.diff(r.result.t_send) - PERIOD].reshape(shots, 5)  # the program's own send instants
        want = expected_ler(stall, b, t1)
        lo, hi = pt["ci"]
        assert lo <= want <= hi, (inject, pt["ler"], want)
        lers.append(pt["ler"])
        if inject == 3 * US:  # stim's own sampling of the circuit with the channels written in, each round's mean stall
            idle = [tuple(float(v) for v in noise.pauli(int(stall[:, j].mean()))) for j in range(1, 5)]
            cs = stim.Circuit(rep_feedback_text(4, b, idle))
            det, obs = cs.compile_detector_sampler(seed=5).sample(20_000, separate_observables=True)
            import pymatching
            m = pymatching.Matching.from_detector_error_model(c.detector_error_model(decompose_errors=True))
            ler_stim = float((m.decode_batch(det) != obs).any(axis=1).mean())
            assert lo <= ler_stim <= hi, (pt["ler"], ler_stim)
    assert lers[0] < lers[1] < lers[2]


def scenario(tmp_path: Path, deadline: str, **feedback) -> Path:
    (tmp_path / "rep_fb.stim").write_text(rep_feedback_text(3, 0.01))
    fb = {"slack": "200 ns", "idle": {"model": "t1t2", "t1": "20 us", "t2": "20 us"}, **feedback}
    doc = {"name": "fb", "calibration": str(CAL), "hosting": str(ROOT / "calibrations" / "hosting.yaml"),
           "seed": 2, "deadline": deadline, "traffic": {"mode": "open_loop", "period": "1 us"},
           "decode": {"circuit": "rep_fb.stim", "shots": 100, "per": "round", "decoder": "matching",
                      "cost": {"fixed": "300 ns"}, "feedback": fb,
                      "placements": [{"device": "epyc7282", "mode": "inline"}, {"device": "mi210", "mode": "inline"}]}}
    import yaml
    p = tmp_path / f"fb_{deadline.replace(' ', '')}.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_timing_aware_ler_counts_every_late_correction_as_a_failure(tmp_path):
    from twin.qec.load import load_decode
    from twin.studies.decode import run_decode_study
    late = run_decode_study(load_decode(scenario(tmp_path, "1 ns"))).document
    for s in late["placements"]:
        assert s["deadline_misses"] == s["requests"]
        assert s["logical_errors"]["timing_aware"] == s["shots"] and s["ler"]["timing_aware"] == 1.0
    on_time = run_decode_study(load_decode(scenario(tmp_path, "1 s"))).document
    for s in on_time["placements"]:
        assert s["deadline_misses"] == 0 and s["logical_errors"]["timing_aware"] == s["logical_errors"]["loop"]


def test_twin_decode_writes_the_ler_vs_latency_table_and_plot(tmp_path):
    from rich.console import Console

    from twin.commands import build_parser
    p = scenario(tmp_path, "5 us", inject=["4 us"])
    out = tmp_path / "out"
    args = build_parser().parse_args(["decode", str(p), "--out", str(out), "--quiet", "--verify-rounds", "50"])
    text = io.StringIO()
    assert args.handler(args, Console(file=text, width=200)) == 0
    rows = (out / "ler_vs_latency.csv").read_text().splitlines()
    assert rows[0].startswith("placement,inject_ns,reaction_p50_ns") and len(rows) == 1 + 2 * 2
    assert (out / "ler_vs_latency.png").stat().st_size > 0
    doc = json.loads((out / "results.json").read_text())
    pts = doc["placements"][0]["feedback"]
    assert [p["inject_ns"] for p in pts] == [0, 4000]
    assert pts[1]["reaction"]["p50_ns"] - pts[0]["reaction"]["p50_ns"] == pytest.approx(4000, abs=100)
    assert "moving the decoder from epyc7282:inline to mi210:inline" in text.getvalue()


@pytest.mark.parametrize("change, key", [
    ({"circuit": None, "code": "rep"}, "decode.feedback"),
    ({"per": "shot"}, "decode.per"),
    ({"feedback": {"slack": "202 ns", "idle": {"model": "depolarizing", "rate_per_us": 0.01}}},
     "decode.feedback.slack"),
])
def test_feedback_refused_where_it_cannot_stand(tmp_path, change, key):
    import yaml

    from twin.qec.load import load_decode
    p = scenario(tmp_path, "5 us")
    doc = yaml.safe_load(p.read_text())
    doc["decode"].update(change)
    doc["decode"] = {k: v for k, v in doc["decode"].items() if v is not None}
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as e:
        load_decode(p)
    assert e.value.key == key


def test_a_circuit_without_feedback_is_refused(tmp_path):
    import yaml

    from twin.qec.load import load_decode
    p = scenario(tmp_path, "5 us")
    (tmp_path / "rep_fb.stim").write_text(rep_feedback_text(3, 0.01).replace("CX rec[-2] 1 rec[-1] 3", "R 1 3"))
    with pytest.raises(ConfigError) as e:
        load_decode(p)
    assert e.value.key == "decode.feedback" and "no classically controlled gate" in e.value.problem
    assert yaml.safe_load(p.read_text())


def test_idle_paulis_are_drawn_with_the_twirled_probabilities():
    noise = IdleNoise("t1t2", 20 * US, 15 * US)
    t = np.full(400_000, 4 * US)
    got = np.bincount(draw_paulis(noise, t, np.random.default_rng(1)), minlength=4) / len(t)
    px = (1 - np.exp(-4 / 20)) / 4
    pz = (1 - np.exp(-4 / 15)) / 2 - px
    for k, p in ((1, px), (2, px), (3, pz)):
        assert abs(got[k] - p) < 5 * np.sqrt(p * (1 - p) / len(t))
    dep = IdleNoise("depolarizing", rate_per_us=1e-3)
    assert sum(dep.pauli(1 * US)) == pytest.approx(1e-3, rel=1e-3)  # short idles: rate x time
    with pytest.raises(ValueError):
        IdleNoise("t1t2", 10 * US, 25 * US)  # T2 > 2 T1
