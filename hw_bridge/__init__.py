"""Live devices in place of simulated nodes (``model: live`` on a consumer; docs/live.md).

- :mod:`hw_bridge.contract`: the bridge contract (:class:`LiveEndpoint`: open, deliver,
  wait_reply, timestamps, close; :class:`LiveFailure`; :class:`BridgeSettings`).
- backends: :mod:`hw_bridge.shm` (a consumer process running the runtime library over POSIX
  shared memory), :mod:`hw_bridge.cuda` (a persistent kernel on an NVIDIA GPU through CuPy),
  :mod:`hw_bridge.udp` with :mod:`hw_bridge.agent` (``python -m hw_bridge.agent``).
- :mod:`hw_bridge.node`: the live consumer inside the twin's event model.
- :mod:`hw_bridge.report`: measured beside simulated; :mod:`hw_bridge.calibrate`: ``twin calibrate
  --from-live``; :mod:`hw_bridge.build`: the C parts, built and cached on first use;
  :mod:`hw_bridge.producer`: the C producer side of a round, shared by ``shm`` and ``cuda``.
"""
