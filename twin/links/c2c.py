"""NVLink-C2C: the coherent chip-to-chip link between a Grace CPU and a Hopper/Blackwell GPU.

Grace Hopper (GH200) and Grace Blackwell (GB200) superchips join CPU and GPU with NVLink-C2C:
900 GB/s total, 450 GB/s per direction (NVIDIA Grace Hopper Superchip Architecture whitepaper /
"NVIDIA Grace Hopper Superchip Architecture In-Depth", NVIDIA technical blog), hardware coherent:
either side loads and stores the other's memory, and caches it. Measured host-to-device and
device-to-host copy bandwidths are lower (375 GB/s and 297 GB/s on a GH200, as reported of the
KTH study by HPCwire, 2024); the model takes the link rate as a parameter.

Two things cross it in the twin:

- posted writes (a stage's hand-off of a request into the other chip's memory, a reply): the
  writer's stores leave as 64-byte cache lines at the link's rate, and land ``latency_ps`` later
  (:class:`NvlinkC2C` is a :class:`twin.kernel.posted.Wire`);
- polls: a poller spinning on a line of memory that the *other* side (or a device behind it) wrote
  has a stale copy invalidated; its next load misses and fetches the line across the link:
  ``coherence_miss_ps``. Polls of a line nobody else wrote hit the poller's own cache. So the poll
  that sees a request costs one coherence miss, an empty poll does not.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from twin.units import PS_PER_S

LINE_BYTES = 64  # the coherence granule: one cache line (Arm Neoverse V2 and the GPU's L2 lines are 64 B sectors)


@dataclass(frozen=True)
class NvlinkC2C:
    """One direction of NVLink-C2C as a wire.

    Parameters
    ----------
    bytes_per_s: link rate in one direction, bytes/s (default 450e9: 900 GB/s total, NVIDIA).
    latency_ps: a store's one-way latency from the writer to the other chip's memory (ps).
    coherence_miss_ps: a load of a line the other side wrote: invalidation seen, the line fetched
        across the link and back (ps); the cost of the poll that sees a request.
    line_bytes: coherence granule (64 B).

    Serialisation: whole lines, ``ceil(n / line) * line / rate``. Raises ValueError for a rate
    <= 0 or a negative latency.
    """

    bytes_per_s: float = 450e9
    latency_ps: int = 0
    coherence_miss_ps: int = 0
    line_bytes: int = LINE_BYTES

    def __post_init__(self):
        if self.bytes_per_s <= 0:
            raise ValueError(f"c2c: bytes_per_s must be > 0, got {self.bytes_per_s}")
        if self.latency_ps < 0 or self.coherence_miss_ps < 0:
            raise ValueError(f"c2c: latencies must be >= 0 ps, got {self.latency_ps}, {self.coherence_miss_ps}")
        if self.line_bytes <= 0:
            raise ValueError(f"c2c: line_bytes must be > 0, got {self.line_bytes}")

    def lines(self, nbytes: int) -> int:
        """Cache lines a write of ``nbytes`` occupies (at least one)."""
        return max(1, math.ceil(nbytes / self.line_bytes))

    def serialise_ps(self, nbytes: int) -> int:
        """Time the link direction is busy with a write of ``nbytes``, integer ps."""
        return int(round(self.lines(nbytes) * self.line_bytes * PS_PER_S / self.bytes_per_s))

    def one_way_ps(self, nbytes: int) -> int:
        """Issue to landing of one write on an idle link, no jitter."""
        return self.serialise_ps(nbytes) + self.latency_ps


__all__ = ["LINE_BYTES", "NvlinkC2C"]
