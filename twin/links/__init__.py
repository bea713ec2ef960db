"""The wire layer: what physically carries the bits (Aurora 64B/66B, PCIe posted writes)."""
from twin.links.aurora import Aurora64B66B
from twin.links.pcie import PcieLink

__all__ = ["Aurora64B66B", "PcieLink"]
