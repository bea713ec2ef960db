"""twin.links: Aurora 64B/66B framing and serialisation, PCIe posted-write TLP accounting.

Every expected number is derived here from the protocol definitions:
- Aurora 64B/66B: 66-bit blocks carrying 64 payload bits; a frame of n bytes is n // 8 full data
  blocks plus one separator block carrying the remaining n % 8 bytes (0..7); blocks are striped
  over the bonded lanes (seeds: 4 lanes x 10.3125 Gb/s).
- PCIe: transfer rate 2.5 / 5 / 8 / 16 / 32 GT/s per lane for Gen1..5, 8b/10b coding on Gen1-2
  and 128b/130b on Gen3+; a posted write is split into ceil(n / MPS) memory-write TLPs, each
  with a 16-byte 4-DW header and 8 bytes of framing (4-byte STP token, 4-byte LCRC).
"""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.links import Aurora64B66B, PcieLink

PS_PER_S = 10**12
LANE_RATE = Fraction("10.3125e9")          # bit/s, seeds


# ---------------------------------------------------------------------------------------------
# Aurora 64B/66B
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, blocks", [(0, 1), (1, 1), (7, 1), (8, 2), (15, 2), (16, 3), (63, 8), (64, 9),
                                       (1792, 225)])
def test_aurora_blocks(n, blocks):
    assert Aurora64B66B().blocks(n) == blocks


def test_aurora_block_time_is_66_bits_at_the_lane_rate():
    # 66 / 10.3125e9 s = 6.4 ns
    assert Aurora64B66B().block_time_ps() == pytest.approx(float(66 * PS_PER_S / LANE_RATE), rel=1e-12)
    assert float(66 * PS_PER_S / LANE_RATE) == 6400.0


def test_aurora_64_byte_frame_on_the_seeds_link():
    a = Aurora64B66B()                       # 4 lanes x 10.3125 Gb/s
    blocks = 64 // 8 + 1                     # 8 data blocks + separator = 9
    block_times = math.ceil(blocks / 4)      # striped over 4 lanes: 3 block times
    expected = Fraction(block_times * 66 * PS_PER_S) / LANE_RATE
    assert expected == 19_200                # 3 x 6.4 ns
    assert a.serialise_ps(64) == expected
    assert type(a.serialise_ps(64)) is int


def test_aurora_payload_rate_is_40_gbps():
    # 4 lanes x 10.3125 Gb/s x 64/66 = 40 Gb/s of payload
    assert float(4 * LANE_RATE * 64 / 66) == 40e9
    assert Aurora64B66B().payload_rate_bps() == pytest.approx(40e9, rel=1e-12)


def test_aurora_one_way_adds_the_link_stage():
    a = Aurora64B66B(link_stage_ps=210_000)
    assert a.latency_ps == 210_000
    assert a.one_way_ps(64) == 19_200 + 210_000


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=0, max_value=20_000), lanes=st.integers(min_value=1, max_value=16),
       rate=st.sampled_from(["10.3125e9", "25.78125e9", "6.25e9", "3.125e9", "12.5e9"]))
def test_aurora_serialisation_from_first_principles(n, lanes, rate):
    a = Aurora64B66B(lanes=lanes, lane_rate_bps=float(rate))
    per_lane_blocks = -(-(n // 8 + 1) // lanes)
    exact = Fraction(per_lane_blocks * 66 * PS_PER_S) / Fraction(rate)
    got = a.serialise_ps(n)
    assert abs(got - exact) <= Fraction(1, 2)          # the nearest integer picosecond
    assert a.serialise_ps(n + 1) >= got                # more bytes never serialise faster
    # one extra lane never slows a frame
    assert Aurora64B66B(lanes=lanes + 1, lane_rate_bps=float(rate)).serialise_ps(n) <= got


@pytest.mark.parametrize("kw", [dict(lanes=0), dict(lanes=-1), dict(lane_rate_bps=0), dict(lane_rate_bps=-1e9),
                                dict(link_stage_ps=-1)])
def test_aurora_rejects_bad_parameters(kw):
    with pytest.raises(ValueError):
        Aurora64B66B(**kw)


def test_aurora_rejects_negative_frame_sizes():
    with pytest.raises(ValueError):
        Aurora64B66B().blocks(-1)
    with pytest.raises(ValueError):
        Aurora64B66B().serialise_ps(-8)


# ---------------------------------------------------------------------------------------------
# PCIe
# ---------------------------------------------------------------------------------------------

GEN = {1: (Fraction(25, 10) * 10**9, Fraction(8, 10)), 2: (5 * 10**9, Fraction(8, 10)),
       3: (8 * 10**9, Fraction(128, 130)), 4: (16 * 10**9, Fraction(128, 130)),
       5: (32 * 10**9, Fraction(128, 130))}


def exact_bytes_per_s(gen: int, lanes: int) -> Fraction:
    rate, coding = GEN[gen]
    return lanes * rate * coding / 8


def test_pcie_gen3_x16_byte_rate():
    expected = 16 * 8e9 * (128 / 130) / 8          # ~15.754 GB/s
    assert PcieLink(3, 16).bytes_per_s() == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("gen, lanes, expected", [
    (1, 1, 250e6),                 # 2.5 GT/s, 8b/10b: 250 MB/s per lane
    (2, 8, 8 * 500e6),
    (3, 16, 16 * 8e9 * 128 / 130 / 8),
    (4, 16, 16 * 16e9 * 128 / 130 / 8),
    (5, 4, 4 * 32e9 * 128 / 130 / 8),
])
def test_pcie_byte_rates(gen, lanes, expected):
    assert PcieLink(gen, lanes).bytes_per_s() == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("mps, n, tlps", [(256, 0, 1), (256, 1, 1), (256, 64, 1), (256, 256, 1), (256, 257, 2),
                                          (256, 1792, 7), (128, 1792, 14), (512, 1792, 4), (4096, 4097, 2)])
def test_pcie_tlp_count(mps, n, tlps):
    assert PcieLink(max_payload_bytes=mps).tlps(n) == tlps


def test_pcie_wire_bytes_for_the_seeds_frames():
    link = PcieLink()                                  # MPS 256, 16 B header, 8 B framing
    assert link.wire_bytes(64) == 64 + 1 * (16 + 8)
    assert link.wire_bytes(8) == 8 + 24                # a classic publish word on its own
    assert link.wire_bytes(1792) == 1792 + 7 * 24
    # a 3-DW header (32-bit address) and other framing are parameters
    assert PcieLink(tlp_header_bytes=12, tlp_overhead_bytes=6).wire_bytes(300) == 300 + 2 * 18


def test_pcie_gen3_x16_serialisation_of_a_64_byte_write():
    # (64 + 16 + 8) bytes / (16 lanes x 8 GT/s x 128/130 / 8) = 88 x 130 / 2048 ns = 5.5859375 ns
    exact = Fraction(88 * PS_PER_S) / exact_bytes_per_s(3, 16)
    assert exact == Fraction(5_585_9375, 10_000)
    assert PcieLink().serialise_ps(64) == 5586
    assert type(PcieLink().serialise_ps(64)) is int


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=0, max_value=20_000), gen=st.sampled_from([1, 2, 3, 4, 5]),
       lanes=st.sampled_from([1, 2, 4, 8, 16]), mps=st.sampled_from([128, 256, 512, 1024, 2048, 4096]))
def test_pcie_serialisation_from_first_principles(n, gen, lanes, mps):
    link = PcieLink(gen, lanes, mps)
    tlps = max(1, -(-n // mps))
    wire = n + tlps * (16 + 8)
    assert link.tlps(n) == tlps
    assert link.wire_bytes(n) == wire
    exact = Fraction(wire * PS_PER_S) / exact_bytes_per_s(gen, lanes)
    assert abs(link.serialise_ps(n) - exact) <= Fraction(1, 2)


@pytest.mark.parametrize("kw", [dict(generation=0), dict(generation=6), dict(lanes=0), dict(lanes=3),
                                dict(lanes=32), dict(max_payload_bytes=100), dict(max_payload_bytes=64),
                                dict(max_payload_bytes=8192), dict(latency_ps=-1)])
def test_pcie_rejects_bad_parameters(kw):
    with pytest.raises(ValueError):
        PcieLink(**kw)


def test_pcie_with_latency_keeps_everything_else():
    link = PcieLink(4, 8, 512, 12, 6, 100)
    other = link.with_latency(900_000)
    assert other.latency_ps == 900_000
    assert dataclasses.replace(other, latency_ps=100) == link
