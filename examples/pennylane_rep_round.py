"""One repetition-code round in PennyLane, its feed-forward run on the twin.

Three data qubits each get a small X rotation (a coherent error); two ancillas measure the
parities Z0Z1 and Z1Z2 mid-circuit; three feed-forwards flip the qubit the syndrome points to.
Each feed-forward is a loop round to an EPYC 7282 core; the quantum part runs on default.qubit.
Run from the repository root: ``python examples/pennylane_rep_round.py``.
"""
import pennylane as qml

from twin.qec.pennylane_frontend import run_on_twin

dev = qml.device("default.qubit", wires=5)


@qml.qnode(dev)
def rep_round(theta):
    for q in range(3):
        qml.RX(theta, wires=q)                       # coherent error on each data qubit
    qml.CNOT([0, 3])                                 # ancilla 3: parity Z0 Z1
    qml.CNOT([1, 3])
    qml.CNOT([1, 4])                                 # ancilla 4: parity Z1 Z2
    qml.CNOT([2, 4])
    s0, s1 = qml.measure(3), qml.measure(4)          # mid-circuit syndrome
    qml.cond(s0 & ~s1, qml.X)(0)                     # feed-forward: the correction
    qml.cond(s0 & s1, qml.X)(1)
    qml.cond(~s0 & s1, qml.X)(2)
    return qml.probs(wires=[0, 1, 2])


run = run_on_twin(rep_round, 0.3, device="epyc7282", shots=2000, seed=1)
print("default.qubit:", rep_round(0.3).round(6))
print("twin:         ", run.value.round(6), "matches:", run.matches)
for ff in run.feed_forwards:
    print(f"feed-forward {ff.index}: {ff.requests} timed requests (+{ff.branch_requests} branch checks), "
          f"p50 {ff.rtt['p50_ns']:.0f} ns, p99 {ff.rtt['p99_ns']:.0f} ns, wrong replies {ff.wrong_replies}")
