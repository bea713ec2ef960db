"""Aurora 64B/66B: the serial link from the control system to the link card."""
from __future__ import annotations

import math
from dataclasses import dataclass

from twin.units import PS_PER_S


@dataclass(frozen=True)
class Aurora64B66B:
    """Aurora 64B/66B framing and serialisation, from first principles.

    Parameters
    ----------
    lanes: int, default 4 — bonded lanes (the seeds' link: 4 lanes).
    lane_rate_bps: float, default 10.3125e9 — line rate per lane, bit/s (seeds: 10.3125 Gb/s).
    link_stage_ps: int, default 0 — fixed latency of both ends' link stages plus the cable, one
        direction, in ps. Not measured on its own; :func:`twin.calibrate` derives it from the
        seeds' 0.44 µs for a 64-byte frame and its reply (amd-qblox-exchange-runtime.txt).

    Framing: a frame of ``n`` bytes is ``n // 8`` data blocks plus one separator block that
    carries the last ``n % 8`` bytes (0..7; SEP or SEP7), so ``n // 8 + 1`` blocks of 66 bits.
    Blocks are striped over the lanes, so a frame occupies ``ceil(blocks / lanes)`` block times
    of ``66 / lane_rate`` seconds. Lossless and in order; clock-compensation blocks are ignored
    (one per several thousand blocks).

    Ports: ``tx`` (frames in), ``rx`` (frames out). Statistics: frames, bytes (kept by users).
    """

    lanes: int = 4
    lane_rate_bps: float = 10.3125e9
    link_stage_ps: int = 0

    BLOCK_BITS = 66
    PAYLOAD_BITS_PER_BLOCK = 64

    def __post_init__(self):
        if self.lanes < 1:
            raise ValueError(f"aurora: lanes must be >= 1, got {self.lanes}")
        if self.lane_rate_bps <= 0:
            raise ValueError(f"aurora: lane_rate_bps must be > 0, got {self.lane_rate_bps}")
        if self.link_stage_ps < 0:
            raise ValueError(f"aurora: link_stage_ps must be >= 0, got {self.link_stage_ps}")

    def blocks(self, nbytes: int) -> int:
        """66-bit blocks for a frame of ``nbytes`` (data blocks + one separator block)."""
        if nbytes < 0:
            raise ValueError(f"aurora: frame size must be >= 0 bytes, got {nbytes}")
        return nbytes // 8 + 1

    def block_time_ps(self) -> float:
        """One 66-bit block on one lane, in ps (6,400 ps at 10.3125 Gb/s)."""
        return self.BLOCK_BITS * PS_PER_S / self.lane_rate_bps

    def serialise_ps(self, nbytes: int) -> int:
        """Time from the first to the last bit of a frame on the wire, in integer ps."""
        per_lane = math.ceil(self.blocks(nbytes) / self.lanes)
        return int(round(per_lane * self.block_time_ps()))

    @property
    def latency_ps(self) -> int:
        """Fixed one-way latency added to serialisation (link stages + cable)."""
        return self.link_stage_ps

    def payload_rate_bps(self) -> float:
        """Usable bit rate over all lanes after 64b/66b coding (40 Gb/s for the seeds' link)."""
        return self.lanes * self.lane_rate_bps * self.PAYLOAD_BITS_PER_BLOCK / self.BLOCK_BITS

    def one_way_ps(self, nbytes: int) -> int:
        """Serialisation plus the fixed link-stage latency for one frame."""
        return self.serialise_ps(nbytes) + self.link_stage_ps
