"""The device runtime library (verbs ``next``, ``complete``, read request, append reply; signals
and device queues) and the four ways to host a function.

Empty in this version: consumers are timing models (:mod:`twin.devices`). The C library and the
``code`` model that runs it inside the twin arrive with the memory-contract work.
"""
