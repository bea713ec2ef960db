"""PCIe posted writes (memory-write TLPs), host memory and peer-to-peer."""
from __future__ import annotations

import math
from dataclasses import dataclass

from twin.units import PS_PER_S

# Transfer rate (GT/s) and line coding per PCIe generation (PCI-SIG base specifications).
_GEN = {1: (2.5e9, 8 / 10), 2: (5.0e9, 8 / 10), 3: (8.0e9, 128 / 130), 4: (16.0e9, 128 / 130),
        5: (32.0e9, 128 / 130)}


@dataclass(frozen=True)
class PcieLink:
    """A PCIe path that carries posted writes from one device into another's memory.

    Parameters
    ----------
    generation: int, default 3 — 1..5; sets the transfer rate and line coding (the U55C is a
        Gen3 x16 card).
    lanes: int, default 16.
    max_payload_bytes: int, default 256 — MPS; a write is split into ``ceil(n / MPS)`` TLPs.
    tlp_header_bytes: int, default 16 — 4-DW memory-write header (64-bit address).
    tlp_overhead_bytes: int, default 8 — per-TLP data-link and framing bytes (Gen3+: 4-byte STP
        token with the sequence number, 4-byte LCRC).
    latency_ps: int, default 0 — one-way latency of the path (card, switches, root complex,
        target memory) on top of serialisation. Fitted per host in ``calibrations/``.

    Serialisation is computed from first principles: wire bytes / (lanes × rate × coding / 8).
    """

    generation: int = 3
    lanes: int = 16
    max_payload_bytes: int = 256
    tlp_header_bytes: int = 16
    tlp_overhead_bytes: int = 8
    latency_ps: int = 0

    def __post_init__(self):
        if self.generation not in _GEN:
            raise ValueError(f"pcie: generation must be one of {sorted(_GEN)}, got {self.generation}")
        if self.lanes not in (1, 2, 4, 8, 16):
            raise ValueError(f"pcie: lanes must be 1, 2, 4, 8 or 16, got {self.lanes}")
        if self.max_payload_bytes not in (128, 256, 512, 1024, 2048, 4096):
            raise ValueError(f"pcie: max_payload_bytes must be a power of two 128..4096, got {self.max_payload_bytes}")
        if self.latency_ps < 0:
            raise ValueError(f"pcie: latency_ps must be >= 0, got {self.latency_ps}")

    def bytes_per_s(self) -> float:
        """Raw byte rate after line coding (15.75e9 B/s for Gen3 x16)."""
        rate, coding = _GEN[self.generation]
        return self.lanes * rate * coding / 8

    def tlps(self, nbytes: int) -> int:
        """Number of memory-write TLPs for a write of ``nbytes`` (at least one)."""
        return max(1, math.ceil(nbytes / self.max_payload_bytes))

    def wire_bytes(self, nbytes: int) -> int:
        """Bytes on the link for a write of ``nbytes`` payload, headers and framing included."""
        return nbytes + self.tlps(nbytes) * (self.tlp_header_bytes + self.tlp_overhead_bytes)

    def serialise_ps(self, nbytes: int) -> int:
        """Time the link is busy with a write of ``nbytes``, in integer ps."""
        return int(round(self.wire_bytes(nbytes) * PS_PER_S / self.bytes_per_s()))

    def with_latency(self, latency_ps: int) -> "PcieLink":
        """The same link with another one-way latency."""
        return PcieLink(self.generation, self.lanes, self.max_payload_bytes, self.tlp_header_bytes,
                        self.tlp_overhead_bytes, int(latency_ps))
