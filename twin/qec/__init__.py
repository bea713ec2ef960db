"""QEC workloads and decoders through the loop.

``codes`` (stim memory circuits), ``workload`` (shots as request frames, ground truth), ``lookup``
(exact maximum-likelihood tables), ``decoders`` (lookup, PyMatching, user functions), ``native``
(tables for the C runtime), ``cost`` (compute time per device kind), ``hosting`` and
``hosting_fit`` (the four hosting modes and their calibration), ``loop`` (a decoder through the
loop), ``study`` and ``cli`` (``twin decode``, ``twin hosting``), ``pennylane_frontend``.
"""
