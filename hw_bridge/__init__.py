"""Live devices in place of simulated nodes (``model: live`` on a consumer; docs/live.md).

- :mod:`hw_bridge.endpoint`: the bridge contract's types (:class:`LiveEndpoint`: open, deliver,
  wait_reply, timestamps, close; :class:`LiveFailure`; :class:`BridgeSettings`), what the backends
  build on; :mod:`hw_bridge.contract`: those names again plus :func:`open_endpoint` and
  :func:`preflight`, the one module that knows the backends by name.
- backends: :mod:`hw_bridge.shm` (a consumer process running the runtime library over POSIX
  shared memory), :mod:`hw_bridge.cuda` (a persistent kernel on an NVIDIA GPU through CuPy),
  :mod:`hw_bridge.udp` with :mod:`hw_bridge.agent` (``python -m hw_bridge.agent``).
- the live consumer inside the twin's event model is :mod:`twin.devices.live` (it opens these endpoints).
- :mod:`twin.output.live`: measured beside simulated; ``twin calibrate --from-live``
  is :mod:`twin.fitting.live`; :mod:`hw_bridge.build`: the C parts, built and cached on first use;
  :mod:`hw_bridge.producer`: the C producer side of a round, shared by ``shm`` and ``cuda``;
  :mod:`hw_bridge.host_runtime`: a dispatcher-queue-worker decoding host timed live per stage
  (``benchmarks/host_runtime.py``; the model is :mod:`twin.devices.host_runtime`).
"""
