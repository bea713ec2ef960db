"""The event kernel: simulated time in integer picoseconds, memory regions owned by nodes,
posted writes that land bytes after a path latency, and event-driven pollers.

Everything above this package (links, exchange, devices) is built from these primitives; simpy
(the reference kernel) is used only through :mod:`twin.kernel.sim`, on its public API.
"""
from twin.kernel.clock import Clock
from twin.kernel.memory import MemoryRegion
from twin.kernel.poller import Poller
from twin.kernel.posted import Lane, PostedWritePath
from twin.kernel.sim import EmptySchedule, Kernel
from twin.kernel.streams import JitterStream

__all__ = ["Clock", "EmptySchedule", "Kernel", "Lane", "MemoryRegion", "PostedWritePath", "Poller", "JitterStream"]
