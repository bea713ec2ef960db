"""QEC workloads and decoders through the loop.

``codes`` (stim memory circuits), ``bb`` (bivariate bicycle qLDPC codes), ``workload`` (shots of any
stim circuit as request frames, ground truth), ``lookup`` (exact maximum-likelihood tables),
``decoders`` (the registry behind one bit-packed interface: lookup, PyMatching, BP+OSD, Tesseract,
Relay-BP, any sinter decoder, user functions), ``sinter_stats`` (sinter's CSV), ``sinter_loop`` (the
loop as a sinter decoder), ``functions``
(the decoders served by function id 16, 17, 18, registered in :mod:`twin.runtime.functions`),
``native`` (tables for the C runtime), ``cost`` (compute time per device kind), ``hosting`` and
``hosting_fit`` (the four hosting modes and their calibration), ``loop`` (a decoder through the
loop), ``feedback`` (a circuit's classically controlled gates: where the program waits, the shots
sampled again with its stalls as idle noise), ``idle_noise`` (T1/T2 Pauli twirl, depolarising rate),
``ler_latency`` (a feedback run's stalls, reaction time and LER; the timing-aware LER), ``study`` and
``cli`` (``twin decode``, ``twin hosting``), ``pennylane_frontend`` and
``pennylane_device`` (the ``twin.loop`` PennyLane device: a QNode's ``qml.cond`` decided by the loop).
"""
# importing the package registers its decoders in the runtime's function registry
from twin.qec import functions

__all__ = ["functions"]
