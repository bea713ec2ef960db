"""The wire layer: what physically carries the bits (Aurora 64B/66B, PCIe posted writes, RoCE v2, NVLink-C2C)."""
from twin.links.aurora import Aurora64B66B
from twin.links.c2c import NvlinkC2C
from twin.links.pcie import PcieLink
from twin.links.roce import RoceV2Packetiser, RoceV2Path

__all__ = ["Aurora64B66B", "NvlinkC2C", "PcieLink", "RoceV2Packetiser", "RoceV2Path"]
