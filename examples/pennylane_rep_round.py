"""One repetition-code round in PennyLane on the twin.loop device: the loop decides the feed-forward.

Three data qubits each get a small X rotation (a coherent error); two ancillas measure the
parities Z0Z1 and Z1Z2 mid-circuit; three conditional X gates flip the qubit the syndrome points to.
All three read the same two measurements, so they are one round trip per shot to an EPYC 7282 core
(the loop answers with the measured bits; the control side evaluates each condition on the reply).
The quantum part runs on default.qubit's kernels. Run from the repository root:
``python examples/pennylane_rep_round.py``.
"""
import numpy as np
import pennylane as qml

dev = qml.device("twin.loop", wires=5, consumer="epyc7282", seed=1)  # every qml.cond waits for the loop


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


reference = qml.QNode(rep_round.func, qml.device("default.qubit"))(0.3)
twin = rep_round(0.3)                                # analytic: one request per reachable syndrome
print("default.qubit:", reference.round(6))
print("twin.loop:    ", twin.round(6), "matches:", bool(np.allclose(twin, reference, atol=1e-12)))
sampled = qml.set_shots(rep_round, shots=1000)(0.3)  # per shot: one request per shot
run = dev.last_run[0]
for g in run.groups:
    print(f"conditional on {', '.join(g.measurements)} ({len(g.ops)} ops): {g.requests} round trips, "
          f"reaction p50 {g.reaction['p50_ns']:.0f} ns, p99 {g.reaction['p99_ns']:.0f} ns, "
          f"stall p50 {g.stall['p50_ns']:.0f} ns, wrong replies {g.wrong_replies}")
print(f"1000 shots: {sampled.round(3)}, program time p50 {run.program['p50_ns']:.0f} ns")
