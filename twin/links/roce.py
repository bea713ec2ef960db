"""RoCE v2: RDMA WRITE over UDP/IPv4/Ethernet, from first principles (the Backline tier's wire).

A posted write on this path is one RDMA WRITE message: the sender's RDMA engine (an FPGA's
ERNIC, or the host's RDMA NIC) puts it on Ethernet as one or more packets, switches forward them,
and the receiving RDMA NIC (or ERNIC) writes the payload into the target memory over PCIe (or
its own memory). The packet is the real one:

===================  =====  =================================================================
field                bytes  note
===================  =====  =================================================================
preamble + SFD           8  on the wire, not in the frame
Ethernet header         14  (+4 with an 802.1Q VLAN tag)
IPv4 header             20  no options
UDP header               8  destination port 4791 (IANA: RoCE v2)
InfiniBand BTH          12  base transport header
RETH                    16  first (or only) packet of an RDMA WRITE: address, key, length
payload                  n  padded to a multiple of 4 bytes (BTH pad count)
ICRC                     4  invariant CRC
FCS                      4  Ethernet frame check sequence
inter-frame gap         12  on the wire, not in the frame
===================  =====  =================================================================

An Ethernet frame (header to FCS) is at least 64 bytes; shorter ones are padded. A message longer
than the path MTU is split into packets of ``mtu_bytes`` payload (WRITE First/Middle/Last); only
the first carries the RETH.
"""
from __future__ import annotations

from dataclasses import dataclass

from twin.links.pcie import PcieLink
from twin.units import PS_PER_S

PREAMBLE_SFD = 8
ETH_HEADER = 14
VLAN_TAG = 4
IPV4_HEADER = 20
UDP_HEADER = 8
UDP_PORT_ROCEV2 = 4791
BTH = 12
RETH = 16
ICRC = 4
FCS = 4
IFG = 12
MIN_FRAME = 64
PATH_MTUS = (256, 512, 1024, 2048, 4096)


@dataclass(frozen=True)
class RoceV2Packetiser:
    """How an RDMA WRITE of ``n`` payload bytes becomes Ethernet frames.

    mtu_bytes: RoCE path MTU, payload bytes per packet (256, 512, 1024, 2048 or 4096; default 4096).
    vlan: an 802.1Q tag on every frame (default False).
    """

    mtu_bytes: int = 4096
    vlan: bool = False

    def __post_init__(self):
        if self.mtu_bytes not in PATH_MTUS:
            raise ValueError(f"roce: mtu_bytes must be one of {PATH_MTUS}, got {self.mtu_bytes}")

    def payloads(self, nbytes: int) -> list[int]:
        """Payload bytes of each packet of a message of ``nbytes`` (at least one packet)."""
        if nbytes < 0:
            raise ValueError(f"roce: message size must be >= 0 bytes, got {nbytes}")
        if nbytes == 0:
            return [0]
        full, rest = divmod(nbytes, self.mtu_bytes)
        return [self.mtu_bytes] * full + ([rest] if rest else [])

    def frame_bytes(self, payload: int, first: bool) -> int:
        """Ethernet frame bytes (header to FCS, min-size padding included) of one packet."""
        padded = -(-payload // 4) * 4
        frame = (ETH_HEADER + (VLAN_TAG if self.vlan else 0) + IPV4_HEADER + UDP_HEADER + BTH
                 + (RETH if first else 0) + padded + ICRC + FCS)
        return max(MIN_FRAME, frame)

    def wire_bytes_per_packet(self, nbytes: int) -> list[int]:
        """Bytes each packet occupies on the wire: preamble/SFD + frame + inter-frame gap."""
        return [PREAMBLE_SFD + self.frame_bytes(p, i == 0) + IFG for i, p in enumerate(self.payloads(nbytes))]

    def wire_bytes(self, nbytes: int) -> int:
        """Bytes on the wire for the whole message."""
        return sum(self.wire_bytes_per_packet(nbytes))


@dataclass(frozen=True)
class RoceV2Path:
    """One direction of the RoCE v2 path, as a wire under a posted-write path.

    Parameters
    ----------
    rate_bps: Ethernet line rate in bit/s (e.g. 100e9); every hop runs at this rate.
    packetiser: :class:`RoceV2Packetiser` (MTU, VLAN).
    store_and_forward_hops: hops after the sender that receive a whole packet before passing it
        on (a store-and-forward switch; the receiving NIC, which checks ICRC/FCS before it writes).
    pcie: the receiving NIC's PCIe link into the target memory, or ``None`` when the receiver
        writes into its own memory (the FPGA's ERNIC).
    latency_ps: fixed one-way latency on top of serialisation: sender's RDMA engine, switch
        port-to-port latency, cable, receiver's processing, PCIe path latency (see
        :meth:`twin.calibration.roce.RoceParamSet.loop_spec` for how it is composed).

    As a :class:`twin.kernel.posted.Wire`: ``serialise_ps(n)`` is the time the message occupies the
    sender's Ethernet link (writes on one path serialise on it); ``tail_ps(n)`` the time after
    that until the message is complete in the target memory, beyond ``latency_ps``: one packet time
    (the longest) per store-and-forward hop, plus the DMA write of the last packet's payload over
    PCIe. Statistics: none (kept by the posted-write path).
    """

    rate_bps: float = 100e9
    packetiser: RoceV2Packetiser = RoceV2Packetiser()
    store_and_forward_hops: int = 1
    pcie: PcieLink | None = None
    latency_ps: int = 0

    def __post_init__(self):
        if self.rate_bps <= 0:
            raise ValueError(f"roce: rate_bps must be > 0, got {self.rate_bps}")
        if self.store_and_forward_hops < 0:
            raise ValueError(f"roce: store_and_forward_hops must be >= 0, got {self.store_and_forward_hops}")
        if self.latency_ps < 0:
            raise ValueError(f"roce: latency_ps must be >= 0, got {self.latency_ps}")

    def bits_ps(self, nbytes_on_wire: int) -> int:
        """Time to put ``nbytes_on_wire`` bytes on the wire at ``rate_bps``, integer ps."""
        return int(round(nbytes_on_wire * 8 * PS_PER_S / self.rate_bps))

    def serialise_ps(self, nbytes: int) -> int:
        """Occupancy of the sender's link for a message of ``nbytes`` payload, in ps."""
        return self.bits_ps(self.packetiser.wire_bytes(nbytes))

    def tail_ps(self, nbytes: int) -> int:
        """Size-dependent time after the sender's serialisation until the message is in memory."""
        packets = self.packetiser.wire_bytes_per_packet(nbytes)
        t = self.store_and_forward_hops * self.bits_ps(max(packets))
        if self.pcie is not None:
            t += self.pcie.serialise_ps(self.packetiser.payloads(nbytes)[-1])
        return t

    def one_way_ps(self, nbytes: int) -> int:
        """Issue to landing for one message on an idle path, no jitter."""
        return self.serialise_ps(nbytes) + self.tail_ps(nbytes) + self.latency_ps

    def packets(self, nbytes: int) -> int:
        """Packets in a message of ``nbytes``."""
        return len(self.packetiser.payloads(nbytes))


def header_overhead_bytes(vlan: bool = False) -> int:
    """Bytes of a single-packet RDMA WRITE on the wire beyond its (4-byte padded) payload, when
    the frame is above the 64-byte minimum: 8 + 14 (+4) + 20 + 8 + 12 + 16 + 4 + 4 + 12 = 98 (102)."""
    return (PREAMBLE_SFD + ETH_HEADER + (VLAN_TAG if vlan else 0) + IPV4_HEADER + UDP_HEADER + BTH + RETH + ICRC + FCS
            + IFG)


__all__ = ["RoceV2Packetiser", "RoceV2Path", "UDP_PORT_ROCEV2", "header_overhead_bytes"]
