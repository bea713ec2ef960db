"""The twin.loop PennyLane device: every qml.cond decided through the loop, results equal default.qubit's."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

qml = pytest.importorskip("pennylane", reason="pennylane not installed (pip install -e '.[pennylane]')")

from pennylane.exceptions import DeviceError  # noqa: E402

from twin.config import ConfigError  # noqa: E402
from twin.qec.pennylane_device import TwinLoopDevice  # noqa: E402
from twin.qec.pennylane_frontend import LoopAnswerError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DQ = qml.device("default.qubit")  # no fixed wires: PennyLane's deferred measurement adds one per measurement


def rep_round(theta):
    """The README's QNode body (examples/pennylane_rep_round.py)."""
    for q in range(3):
        qml.RX(theta, wires=q)
    qml.CNOT([0, 3])
    qml.CNOT([1, 3])
    qml.CNOT([1, 4])
    qml.CNOT([2, 4])
    s0, s1 = qml.measure(3), qml.measure(4)
    qml.cond(s0 & ~s1, qml.X)(0)
    qml.cond(s0 & s1, qml.X)(1)
    qml.cond(~s0 & s1, qml.X)(2)
    return qml.probs(wires=[0, 1, 2])


def ipe(phi, n=3, anc="anc", tgt="t"):
    """Iterative phase estimation of U = PhaseShift(2 pi phi) on its eigenstate |1>, least significant
    bit first on one reused ancilla: after controlled-U^(2^(k-1)) the ancilla carries the phase
    2 pi 0.b_k b_(k+1)...; the conditional PhaseShift(-2 pi / 2^(j-k+1)) for each measured b_j, j > k,
    leaves pi b_k, which H and a measurement read. For phi = 0.b1 b2 b3 exactly the result is certain."""
    def circuit():
        qml.X(tgt)
        bits = {}
        for k in range(n, 0, -1):
            qml.Hadamard(anc)
            qml.ControlledPhaseShift(2 * np.pi * phi * 2 ** (k - 1), wires=[anc, tgt])
            for j in range(k + 1, n + 1):
                qml.cond(bits[j], qml.PhaseShift)(-2 * np.pi / 2 ** (j - k + 1), wires=anc)
            qml.Hadamard(anc)
            bits[k] = qml.measure(anc, reset=True)
        return qml.probs(op=[bits[k] for k in range(1, n + 1)])
    return circuit


def within(got, p, n, sigmas=5.0):
    """Sampled frequencies ``got`` (n shots) against probabilities ``p``: each within ``sigmas`` binomial
    standard deviations sqrt(p (1 - p) / n) (plus 1e-12 for outcomes of probability 0 or 1)."""
    got, p = np.asarray(got, float), np.asarray(p, float)
    return bool(np.all(np.abs(got - p) <= sigmas * np.sqrt(p * (1 - p) / n) + 1e-12))


def test_the_entry_point_gives_the_device_and_the_readme_qnode_equals_default_qubit():
    dev = qml.device("twin.loop", wires=5)
    assert isinstance(dev, TwinLoopDevice) and dev.name == "twin.loop"
    theta = 0.9
    got = qml.QNode(rep_round, dev)(theta)
    assert np.allclose(got, qml.QNode(rep_round, DQ)(theta), atol=1e-12, rtol=0)
    run = dev.last_run[0]
    # the three corrections read the same two syndrome bits: one group, one request per reachable syndrome
    assert len(run.groups) == 1 and run.groups[0].measurements == ("m0", "m1") and len(run.groups[0].ops) == 3
    assert run.round_trips == 4 and run.round_trips_per_shot == 1 and run.groups[0].wrong_replies == 0


def test_readme_qnode_with_shots_is_within_binomial_bounds_and_one_round_trip_per_shot():
    dev = qml.device("twin.loop", wires=5, seed=3)
    theta, n = 0.9, 400
    got = qml.set_shots(qml.QNode(rep_round, dev), shots=n)(theta)
    assert within(got, qml.QNode(rep_round, DQ)(theta), n)
    run = dev.last_run[0]
    assert run.round_trips == n and run.groups[0].requests == n and len(run.program_ps) == n
    # a loop round to an EPYC 7282 core: p50 2.172 us for the echo (amd-qblox-exchange-runtime.txt);
    # the identity function adds its stated 20 ns, so the reaction is within a few buckets of it
    assert 2.0 < run.groups[0].reaction["p50_ns"] / 1000 < 2.6


def test_iterative_phase_estimation_reads_the_phase_exactly_and_equals_default_qubit():
    dev = qml.device("twin.loop", wires=["anc", "t"])
    probs = qml.QNode(ipe(5 / 8), dev)()
    assert np.allclose(probs, np.eye(8)[5], atol=1e-12)  # 5/8 = 0.101b: outcome b1 b2 b3 = 101 for certain
    run = dev.last_run[0]
    # three conditional phase corrections, two measurements read: b3 (by rounds 2 and 1) and b2 (by round 1)
    assert [g.measurements for g in run.groups] == [("m0",), ("m1",)]
    assert sum(len(g.ops) for g in run.groups) == 3 and run.round_trips_per_shot == 2
    ref = qml.QNode(ipe(0.3), DQ)()  # not a 3-bit fraction: a distribution over estimates
    assert np.allclose(qml.QNode(ipe(0.3), dev)(), ref, atol=1e-12, rtol=0)
    n = 300
    got = qml.set_shots(qml.QNode(ipe(0.3), dev), shots=n)()
    assert within(got, ref, n)
    exact = qml.set_shots(qml.QNode(ipe(5 / 8), dev), shots=50)()
    assert np.array_equal(exact, np.eye(8)[5])  # every shot reads 101
    assert dev.last_run[0].round_trips == 2 * 50


def two_conditionals(a, q):
    def circuit():
        qml.Hadamard(a)
        m = qml.measure(a)
        qml.cond(m, qml.X)(q)
        qml.cond(m, qml.Z)(q)
        return qml.expval(qml.Z(q)), qml.probs(wires=[a, q])
    return circuit


@pytest.mark.parametrize("wires", [(0, 1), (0, 3), ("anc", "q")])
def test_expval_probs_tuple_and_round_trips_do_not_depend_on_wire_labels(wires):
    dev = qml.device("twin.loop", wires=list(wires), seed=1)
    e, p = qml.QNode(two_conditionals(*wires), dev)()
    # H then measure: q copies the outcome; <Z_q> = 0, probs 1/2 on |00> and |11>
    assert abs(e) < 1e-12 and np.allclose(p, [0.5, 0, 0, 0.5], atol=1e-12)
    assert dev.last_run[0].round_trips == 2 and dev.last_run[0].round_trips_per_shot == 1
    n = 60
    e, p = qml.set_shots(qml.QNode(two_conditionals(*wires), dev), shots=n)()
    assert p[1] == p[2] == 0 and abs(p[0] + p[3] - 1) < 1e-12 and np.isclose(e, p[0] - p[3])
    run = dev.last_run[0]
    assert run.round_trips == n and [g.requests for g in run.groups] == [n]


def every_return(a):
    qml.RY(a, 0)
    qml.RY(0.7, 1)
    m0 = qml.measure(0)
    m1 = qml.measure(1, reset=True)
    qml.cond(m0, qml.RX)(0.4, 2)
    qml.cond(m0 & m1, qml.Hadamard)(1)
    return (qml.expval(qml.Z(2)), qml.var(qml.X(1)), qml.probs(wires=[1, 2]), qml.expval(m0), qml.var(m0 + 2 * m1),
            qml.probs(op=m0), qml.probs(op=[m0, m1]))


def test_every_analytic_return_type_equals_default_qubit():
    dev = qml.device("twin.loop", wires=3)
    for r, g in zip(qml.QNode(every_return, DQ)(1.1), qml.QNode(every_return, dev)(1.1)):
        assert np.allclose(r, g, atol=1e-12, rtol=0)
    assert dev.last_run[0].round_trips_per_shot == 2


def copies(a):
    qml.RY(a, 0)
    m = qml.measure(0)
    qml.cond(m, qml.X)(1)
    return (qml.sample(wires=[0, 1]), qml.counts(m), qml.sample(m), qml.counts(wires=1), qml.expval(qml.Z(1)),
            qml.var(qml.Z(1)), qml.probs(op=m))


def test_every_sampled_return_type_is_consistent_shot_by_shot():
    dev = qml.device("twin.loop", wires=2, seed=5)
    n, a = 200, 1.1
    s01, cm, sm, c1, e1, v1, pm = qml.set_shots(qml.QNode(copies, dev), shots=n)(a)
    ref = qml.set_shots(qml.QNode(copies, DQ, mcm_method="deferred"), shots=n)(a)  # types, shapes
    for g, r in zip((s01, sm), (ref[0], ref[2])):
        assert g.shape == r.shape and g.dtype == r.dtype
    # wire 1 is flipped exactly when m = 1, and wire 0 collapsed to m: per shot, all three agree
    assert np.array_equal(s01[:, 0], sm) and np.array_equal(s01[:, 1], sm)
    k = int(sm.sum())
    assert cm == {0.0: n - k, 1.0: k} and set(cm) == set(ref[1])  # counts of m: float keys, as default.qubit's
    assert c1.get("1", 0) == k and sum(c1.values()) == n
    assert np.isclose(e1, 1 - 2 * k / n) and np.isclose(v1, 1 - (1 - 2 * k / n) ** 2)
    assert np.allclose(pm, [1 - k / n, k / n])
    assert within(k / n, np.sin(a / 2) ** 2, n)  # P(m = 1) = sin^2(a / 2)


def test_the_same_seed_gives_the_same_results_and_timing():
    runs = []
    for seed in (7, 7, 8):
        dev = qml.device("twin.loop", wires=2, seed=seed)
        out = qml.set_shots(qml.QNode(copies, dev), shots=40)(1.1)
        runs.append((out[0], dev.last_run[0].groups[0].reaction_ps))
    assert np.array_equal(runs[0][0], runs[1][0]) and np.array_equal(runs[0][1], runs[1][1])
    assert not np.array_equal(runs[0][1], runs[2][1])  # the loop's draws follow the seed


def test_stall_is_the_reaction_minus_the_slack_and_the_program_time_adds_up():
    # measure(0) ends at 300 ns; wire 1 runs K independent 10 ns gates meanwhile, then waits for the
    # reply: the request leaves at 300 ns, the reply is back at 300 ns + reaction, wire 1 is free at
    # K * 10 ns, so stall = max(0, 300 ns + reaction - K * 10 ns); program = reply + (10 ns if the X
    # is applied) + 300 ns final readout (or, with no stall, wire 1's own end)
    for K in (20, 500):
        dev = qml.device("twin.loop", wires=2, seed=2, gate_time="10 ns", measure_time="300 ns")

        def circuit():
            qml.Hadamard(0)
            for _ in range(K):
                qml.RZ(0.1, 1)
            m = qml.measure(0)
            qml.cond(m, qml.X)(1)
            return qml.sample(wires=1)

        qml.set_shots(qml.QNode(circuit, dev), shots=50)()
        run = dev.last_run[0]
        g = run.groups[0]
        reaction, applied = g.reaction_ps, g.bits[:, 0].astype(np.int64)
        m_end, free = 10_000 + 300_000, K * 10_000  # the Hadamard, then the measurement; wire 1's gates
        assert np.array_equal(g.stall_ps, np.maximum(0, m_end + reaction - free))
        assert np.array_equal(run.program_ps, np.maximum(m_end + reaction, free) + 10_000 * applied + 300_000)
    assert g.stall["p99_ns"] == 0  # K = 500: 5 us of independent gates hide the ~2.3 us round trip


def test_aurora_control_and_the_deadline_count_in_the_reaction():
    dev = qml.device("twin.loop", wires=2, control="aurora", deadline="2 us")
    qml.set_shots(qml.QNode(copies, dev), shots=30)(1.1)
    g = dev.last_run[0].groups[0]
    assert g.reaction["p50_ns"] > g.rtt["p50_ns"]  # the cable to the control system is in the reaction
    assert g.deadline_misses == 30  # every reaction is past 2 us (the echo alone is 2.172 us at p50)


def test_a_wrong_reply_is_caught():
    class Lying(TwinLoopDevice):
        def served_function(self, group):  # the consumer flips the bits; the check computes them itself
            return lambda payload: bytes(b ^ 1 for b in payload)

    dev = Lying(wires=2)
    with pytest.raises(LoopAnswerError, match="differ from the value of the simulated measurements"):
        qml.set_shots(qml.QNode(copies, dev), shots=5)(1.1)


def test_a_named_function_is_what_the_conditions_read():
    dev = qml.device("twin.loop", wires=2, function=lambda payload: bytes([payload[0] ^ 1]))

    def flipped():
        qml.Hadamard(0)
        m = qml.measure(0)
        qml.cond(m, qml.X)(1)
        return qml.probs(wires=[0, 1])

    def negated():
        qml.Hadamard(0)
        m = qml.measure(0)
        qml.cond(~m, qml.X)(1)
        return qml.probs(wires=[0, 1])
    # the consumer answers NOT m, so cond(m) acts as cond(~m) does on default.qubit
    assert np.allclose(qml.QNode(flipped, dev)(), qml.QNode(negated, DQ)(), atol=1e-12)
    assert dev.last_run[0].function == "<lambda>"


def test_a_decode_scenario_gives_the_loop_and_its_function():
    sc = ROOT / "scenarios/decode_rep3_user.yaml"
    dev = qml.device("twin.loop", wires=2, scenario=sc)
    assert dev.loop.function_name == "examples.rep3_rule:decode" and dev.loop.consumer == "epyc7282"

    def copy():
        qml.Hadamard(0)
        m = qml.measure(0)
        qml.cond(m, qml.X)(1)
        return qml.probs(wires=1)
    # rep3_rule reads bit 0 as detector 0 alone and answers p24 and not p02 = 0: the X is never applied
    assert np.allclose(qml.QNode(copy, dev)(), [1, 0], atol=1e-12)
    gpu = qml.device("twin.loop", wires=2, scenario=sc, placement=1, function="identity")
    assert np.allclose(qml.QNode(copy, gpu)(), [0.5, 0.5], atol=1e-12)
    # the MI210's echo alone takes 3.708 us (p50, amd-qblox-exchange-runtime.txt); a user function in a
    # resident worker adds the general path and the hand-off on top
    assert gpu.loop.mode == "worker" and gpu.last_run[0].groups[0].reaction["p50_ns"] > 3708
    with pytest.raises(ConfigError, match="decode.decoder"):
        qml.device("twin.loop", wires=2, scenario=ROOT / "scenarios/decode_rep3.yaml")
    with pytest.raises(ValueError, match="not both"):
        qml.device("twin.loop", wires=2, scenario=sc, consumer="mi210")
    # a lookup-decoder scenario with function=: the identity on its first placement, the V80's FPGA logic,
    # at the stated compute time; a user function there is refused (FPGA logic runs no Python)
    v80 = qml.device("twin.loop", wires=2, scenario=ROOT / "scenarios/decode_rep3.yaml", function="identity",
                     compute="100 ns")
    assert np.allclose(qml.QNode(copy, v80)(), [0.5, 0.5], atol=1e-12) and v80.loop.consumer == "v80"
    with pytest.raises(DeviceError, match="FPGA logic"):
        qml.QNode(copy, qml.device("twin.loop", wires=2, consumer="v80", function=lambda b: bytes(b)))()


def test_methods_that_would_bypass_the_loop_are_refused():
    dev = qml.device("twin.loop", wires=2)
    with pytest.raises(DeviceError, match="the loop would decide none"):
        qml.QNode(copies, dev, mcm_method="deferred")(1.1)
    plain = qml.QNode(lambda: (qml.RX(0.4, 0), qml.expval(qml.Z(0)))[1], dev)
    assert np.isclose(plain(), np.cos(0.4)) and dev.last_run == [None]  # no mid-circuit measurement: no loop


def test_readme_example_runs_and_is_the_example_file(capsys):
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```python\nimport numpy as np\nimport pennylane as qml")
    block = readme[start + len("```python\n"):readme.index("```", start + 10)]
    example = (ROOT / "examples/pennylane_rep_round.py").read_text()
    assert example.endswith(block)  # the README shows the example file's code
    exec(compile(block, "README.md", "exec"), {"__name__": "readme"})  # in this process: PennyLane is imported
    out = capsys.readouterr().out
    assert "matches: True" in out and "1000 round trips" in out and "wrong replies 0" in out


def postselected(a):
    qml.RY(a, 0)
    qml.CNOT([0, 1])
    m = qml.measure(0, postselect=1)
    qml.cond(m, qml.RX, qml.RY)(0.3, 1)  # a false branch too: both operations read m, one group
    return qml.expval(qml.Z(1)), qml.probs(wires=1)


def test_postselection_broadcasting_shot_vectors_and_the_tracker():
    dev = qml.device("twin.loop", wires=2, seed=4)
    for r, g in zip(qml.QNode(postselected, DQ)(1.2), qml.QNode(postselected, dev)(1.2)):
        assert np.allclose(r, g, atol=1e-12, rtol=0)  # renormalised to the postselected outcome
    assert dev.last_run[0].groups[0].ops == ["RX", "RY"] and dev.last_run[0].round_trips == 1
    a = np.array([0.5, 1.2])
    for r, g in zip(qml.QNode(postselected, DQ)(a), qml.QNode(postselected, dev)(a)):
        assert np.allclose(r, g, atol=1e-12, rtol=0)
    assert len(dev.last_run) == 2  # one tape per broadcast parameter
    (e1, p1), (e2, p2) = qml.set_shots(qml.QNode(postselected, dev), shots=[20, 30])(1.2)
    assert np.isclose(p1.sum(), 1) and np.isclose(p2.sum(), 1)
    assert dev.last_run[0].round_trips == 50  # every shot asks, postselected away or not (as hardware does)
    with qml.Tracker(dev) as tr:
        qml.set_shots(qml.QNode(postselected, dev), shots=10)(1.2)
    assert tr.totals["round_trips"] == 10


def test_the_tracker_records_batches_as_pennylane_devices_do():
    """PennyLane's device suite (``pennylane/devices/tests/test_tracker.py``) and its simulators:
    one ``batches`` record per execute, with ``batch_len``; ``executions`` per tape."""
    dev = qml.device("twin.loop", wires=2, seed=4)

    @qml.qnode(dev, diff_method="parameter-shift")
    def circ():
        return qml.expval(qml.X(0))

    with qml.Tracker(dev) as tr:
        circ()
    assert tr.history["batches"] == [1] and tr.history["batch_len"] == [1]
    assert tr.history["executions"] == [1]

    def fed_back(x):
        qml.RX(x, 0)
        m = qml.measure(0)
        qml.cond(m, qml.X)(1)
        return qml.expval(qml.Z(1))

    with qml.Tracker(dev) as tr:
        qml.QNode(fed_back, dev)(np.array([0.5, 1.2]))  # two tapes (broadcast) in one batch
    assert tr.totals["batches"] == 1 and tr.history["batch_len"] == [2]
    assert tr.totals["executions"] == 2 and tr.totals["simulations"] == 2
    assert tr.history["round_trips"] == [r.round_trips for r in dev.last_run]
    assert len(tr.history["program_time_ns"]) == 2
    counts = {}
    for d in (DQ, dev):  # finite shots: the same counts as default.qubit's (its one-shot tape: 2 executions)
        with qml.Tracker(d) as tr:
            qml.set_shots(qml.QNode(fed_back, d, mcm_method="one-shot"), shots=10)(0.5)
        counts[d.name] = {k: tr.totals[k] for k in ("batches", "simulations", "executions", "shots")}
    assert counts[dev.name] == counts[DQ.name] and counts[dev.name]["batches"] == 1
    assert tr.totals["round_trips"] == 10  # one per shot
