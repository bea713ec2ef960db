"""twin: a simulation-first digital twin of the real-time QEC feedback loop.

Layers (see docs/architecture.md):

- :mod:`twin.kernel` — the event kernel (integer picoseconds, memory regions, posted writes,
  pollers, clocks);
- :mod:`twin.links` — the wire (Aurora 64B/66B, PCIe posted writes);
- :mod:`twin.exchange` — the memory contract (queues, classic and per-piece encodings);
- :mod:`twin.devices` and :mod:`twin.runtime` — the compute (generator, link card, consumers;
  the device runtime library);
- :mod:`twin.engine` — one loop assembled from them, with the event and direct engines;
- :mod:`twin.calibration`, :mod:`twin.scenario`, :mod:`twin.studies`, :mod:`twin.reports`,
  :mod:`twin.commands` — measured data, fitting, what-if studies and their outputs;
  :mod:`twin.bundled` finds the bundled scenarios, calibrations and Verilog.
"""

__version__ = "0.1.0"
