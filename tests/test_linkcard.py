"""The link card's bridge order and slot bounds, and the consumer's reply bound."""
from __future__ import annotations

import pytest

from twin.devices import LinkCard, LinkCardParams, PollingConsumer, cpu_core
from twin.exchange import CLASSIC
from twin.exchange.contract import STATUS
from twin.kernel import JitterStream, Kernel, MemoryRegion, PostedWritePath
from twin.links import PcieLink


def rig(slot_bytes=2048, slots=4, function=None):
    k = Kernel(1)
    req = MemoryRegion("req", "c", slot_bytes * slots)
    rep = MemoryRegion("rep", "card", slot_bytes * slots)
    link = PcieLink(latency_ps=500_000)
    req_path = PostedWritePath(k, "req", link, req, JitterStream(1, "a", 0))
    rep_path = PostedWritePath(k, "rep", link, rep, JitterStream(1, "b", 0))
    writes = []
    orig = req_path.write
    req_path.write = lambda off, data: writes.append((k.now, off)) or orig(off, data)
    replies = []
    card = LinkCard(k, LinkCardParams(), CLASSIC, req_path, rep, slots, slot_bytes, 64, lambda b: b,
                    lambda seq, t_in, t_have, ok: replies.append((seq, ok)))
    cons = PollingConsumer(k, "c", cpu_core(10_000, 100_000, 20_000, "classic"), CLASSIC, req, rep_path, slots,
                           slot_bytes, 64, function)
    cons.setup()
    return k, card, writes, replies, rep


def test_frames_pass_the_bridge_in_arrival_order():
    k, card, writes, replies, _ = rig()
    k.at(0, card.submit, 1, bytes(1792))     # 28 words of 512 bits: 28 cycles of 4 ns
    k.at(4000, card.submit, 2, bytes(64))    # 1 word, but behind the first frame
    k.run()
    first = {seq: t for seq, t in zip([1, 1, 2, 2], [t for t, _ in writes])}
    assert first[1] == 28 * 4000 + 10_000    # bridge + engine landing (10 ns, seeds)
    assert first[2] == 28 * 4000 + 4000 + 10_000
    assert replies == [(1, True), (2, True)]


def test_a_request_larger_than_its_slot_is_refused():
    k, card, *_ = rig(slot_bytes=64)
    with pytest.raises(ValueError, match="does not fit"):
        card.submit(1, bytes(64 - 16 + 1))   # classic: 16-byte header + payload


def test_a_reply_too_long_for_its_slot_gets_status_bad_length():
    k, card, writes, replies, rep = rig(slot_bytes=64, function=lambda fid: (lambda b: b * 2))
    k.at(0, card.submit, 1, bytes(range(40)))
    k.run()
    h = CLASSIC.header(rep.buf, 0)
    assert (h.seq, h.length, h.flags) == (1, 0, STATUS["bad_length"])
    assert replies == [(1, False)]           # counted as a mismatch, nothing spilled
    assert rep.buf[64:] == bytes(len(rep.buf) - 64)
