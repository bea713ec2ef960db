"""The compute layer's devices: control-side traffic generator, link card, consumers.

Each device documents its parameters (with units and defaults), its ports (the memory regions
and posted-write paths it uses) and its statistics.
"""
from twin.devices.consumer import ConsumerParams, PollingConsumer
from twin.devices.cpu import cpu_core
from twin.devices.fpga import fpga_logic
from twin.devices.generator import TrafficGenerator, TrafficParams
from twin.devices.gpu import gpu_persistent_kernel
from twin.devices.linkcard import LinkCard, LinkCardParams

__all__ = ["ConsumerParams", "PollingConsumer", "cpu_core", "gpu_persistent_kernel", "fpga_logic",
           "LinkCard", "LinkCardParams", "TrafficGenerator", "TrafficParams"]
