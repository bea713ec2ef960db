"""The wire layer: what physically carries the bits (Aurora 64B/66B, PCIe posted writes, RoCE v2)."""
from twin.links.aurora import Aurora64B66B
from twin.links.pcie import PcieLink
from twin.links.roce import RoceV2Packetiser, RoceV2Path

__all__ = ["Aurora64B66B", "PcieLink", "RoceV2Packetiser", "RoceV2Path"]
