"""PennyLane front end: feed-forward through the loop, results equal default.qubit's own."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

qml = pytest.importorskip("pennylane", reason="pennylane not installed (pip install -e '.[pennylane]')")

from twin.qec.pennylane_frontend import _branches, _parse, _result, run_on_twin  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def rep_round_qnode():
    dev = qml.device("default.qubit", wires=5)

    @qml.qnode(dev)
    def rep_round(theta):
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
    return rep_round


def test_repetition_round_matches_default_qubit_and_times_each_feed_forward():
    qn = rep_round_qnode()
    run = run_on_twin(qn, 0.4, device="epyc7282", shots=300, seed=2)
    assert run.matches
    assert np.allclose(run.value, qn(0.4), atol=1e-10)
    assert len(run.feed_forwards) == 3
    for ff in run.feed_forwards:
        # requests: the shots asked for, the ones timed; the branch requests are counted apart
        assert ff.wrong_replies == 0 and ff.requests == 300 and ff.branch_requests == len(run.branches)
        # a loop round to an EPYC 7282 core: p50 2.172 us for the echo (amd-qblox-exchange-runtime.txt);
        # the feed-forward function adds its 20 ns, so the round trip is within a few buckets of it
        assert 2.0 < ff.rtt["p50_ns"] / 1000 < 2.6
    # four syndrome outcomes reachable, probabilities sum to 1
    assert len(run.branches) == 4 and abs(sum(p for p, _ in run.branches) - 1) < 1e-12


def test_wrong_decisions_would_not_match():
    # the comparison has power: the same executor with every decision inverted disagrees
    qn = rep_round_qnode()
    tape = qml.workflow.construct_tape(qn)(0.4).map_to_standard_wires()
    program, ffs = _parse(tape)
    right = _result(tape, _branches(tape, program, lambda ff, bits: ff.decide(bits)))
    wrong = _result(tape, _branches(tape, program, lambda ff, bits: not ff.decide(bits)))
    assert np.allclose(right, qn(0.4), atol=1e-10)
    assert not np.allclose(wrong, qn(0.4), atol=1e-3)


def test_teleportation_with_reset_and_expval_on_a_gpu_worker():
    dev = qml.device("default.qubit")  # no fixed wires: PennyLane's deferred measurement adds one for the reset

    @qml.qnode(dev)
    def teleport(a, b):
        qml.RY(a, 0)
        qml.RZ(b, 0)
        qml.Hadamard(1)
        qml.CNOT([1, 2])
        qml.CNOT([0, 1])
        qml.Hadamard(0)
        m0 = qml.measure(0, reset=True)
        m1 = qml.measure(1)
        qml.cond(m1, qml.X)(2)
        qml.cond(m0, qml.Z)(2)
        return qml.expval(qml.PauliX(2)), qml.expval(qml.PauliZ(2))

    run = run_on_twin(teleport, 0.7, 0.3, device="mi210", mode="worker", shots=100, seed=0)
    assert run.matches
    assert np.allclose(run.value[1], np.cos(0.7), atol=1e-10)  # teleported RY(a)|0>: <Z> = cos a
    # the MI210's echo alone takes 3.708 us (p50, amd-qblox-exchange-runtime.txt); a user function in a
    # resident worker adds the general path and the hand-off on top
    assert run.feed_forwards[0].rtt["p50_ns"] > 3708


def test_unsupported_final_measurement_is_refused():
    dev = qml.device("default.qubit", wires=2)

    @qml.qnode(dev, shots=10)
    def c():
        qml.Hadamard(0)
        m = qml.measure(0)
        qml.cond(m, qml.X)(1)
        return qml.sample(wires=[1])

    with pytest.raises(ValueError, match="supports expval and probs"):
        run_on_twin(c, shots=10)

    @qml.qnode(dev, shots=10)
    def d():
        qml.Hadamard(0)
        m = qml.measure(0)
        qml.cond(m, qml.X)(1)
        return qml.expval(qml.Z(1))

    with pytest.raises(ValueError, match="analytic"):
        run_on_twin(d, shots=10)


def test_readme_example_runs_and_is_the_example_file():
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```python\nimport pennylane as qml")
    block = readme[start + len("```python\n"):readme.index("```", start + 10)]
    example = (ROOT / "examples/pennylane_rep_round.py").read_text()
    assert example.endswith(block)  # the README shows the example file's code
    out = subprocess.run([sys.executable, "-c", block], cwd=ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "matches: True" in out.stdout


def test_without_shots_the_branch_requests_are_the_timed_ones():
    run = run_on_twin(rep_round_qnode(), 0.4, device="epyc7282", shots=0, seed=2)
    assert run.matches
    for ff in run.feed_forwards:
        assert ff.requests == ff.branch_requests == len(run.branches) == 4 and ff.wrong_replies == 0
