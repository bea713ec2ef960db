"""twin.kernel: event ordering, memory regions, posted writes, pollers, clocks, jitter streams.

Expected instants are derived in each test from the component's contract (landing = issue +
serialisation + latency + jitter; a poll instant is phase + k * period; a clock edge is
phase + floor(k * period * (1 + ppb / 1e9))), never copied from a run.
"""
from __future__ import annotations

import ast
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import twin
from twin.kernel import Clock, EmptySchedule, JitterStream, Kernel, Lane, MemoryRegion, Poller, PostedWritePath
from twin.kernel.streams import BLOCK

# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ByteWire:
    """A wire whose serialisation is ``ps_per_byte`` per byte and whose latency is fixed."""

    latency_ps: int
    ps_per_byte: int

    def serialise_ps(self, nbytes: int) -> int:
        return nbytes * self.ps_per_byte


class FixedJitter:
    """A jitter source that returns preset values (then zeros)."""

    def __init__(self, values):
        self.values = list(values)

    def next(self) -> int:
        return self.values.pop(0) if self.values else 0


def zero_jitter() -> JitterStream:
    return JitterStream(0, "none", 0)


def ceil_grid(t: int, period: int, phase: int) -> int:
    """Smallest phase + k*period >= t, by the definition (written independently of twin.units)."""
    k = 0 if t <= phase else (t - phase + period - 1) // period
    return phase + k * period


# ---------------------------------------------------------------------------------------------
# Kernel
# ---------------------------------------------------------------------------------------------

def test_same_instant_callbacks_run_in_scheduling_order():
    k = Kernel()
    log = []
    for name in "abcde":
        k.at(100, log.append, name)
    k.at(50, log.append, "early")
    k.at(100, log.append, "f")
    k.run()
    assert log == ["early", "a", "b", "c", "d", "e", "f"]
    assert k.now == 100


def test_callback_scheduled_for_now_runs_after_those_already_due():
    k = Kernel()
    log = []

    def first():
        log.append("first")
        k.at(k.now, log.append, "scheduled-from-first")

    k.at(10, first)
    k.at(10, log.append, "second")
    k.run()
    assert log == ["first", "second", "scheduled-from-first"]


def test_scheduling_in_the_past_raises():
    k = Kernel()
    k.at(1000, lambda: None)
    k.run()
    assert k.now == 1000
    with pytest.raises(ValueError):
        k.at(999, lambda: None)
    with pytest.raises(ValueError):
        k.after(-1, lambda: None)
    k.at(1000, lambda: None)        # now itself is allowed
    k.run()


def test_after_is_relative_and_time_is_integer_ps():
    k = Kernel()
    seen = []
    k.at(7, lambda: k.after(5, lambda: seen.append(k.now)))
    k.run()
    assert seen == [12]
    assert type(k.now) is int


def test_events_counts_scheduled_callbacks():
    k = Kernel()
    for t in range(10):
        k.at(t, lambda: None)
    assert k.events == 10


def test_run_until_and_stop_keep_pending_events():
    k = Kernel()
    log = []
    for t in (10, 20, 30, 40):
        k.at(t, log.append, t)
    k.run(until_ps=25)
    assert log == [10, 20]
    k.at(31, k.stop)
    k.run()
    assert log == [10, 20, 30]      # stopped after the event at 31; 40 is still queued
    k.run()
    assert log == [10, 20, 30, 40]


def test_end_of_instant_calls_run_after_every_ordinary_event_of_their_instant():
    """at_end_of(t) runs after every other event of t, those scheduled for t after it (before the
    instant or during it) included; several for one instant in the order made, each after what the
    one before scheduled for t; an event of t scheduled by one comes before the next."""
    k = Kernel()
    log = []

    def ordinary(name, more=None):
        log.append(name)
        if more:
            k.at(k.now, ordinary, more)

    def late(name, more=None):
        log.append(name)
        if more:
            k.at(k.now, ordinary, more)

    k.at_end_of(100, late, "late1", "from-late1")
    k.at(100, ordinary, "a", "from-a")
    k.at_end_of(100, late, "late2")
    k.at(50, ordinary, "early")
    k.at(100, ordinary, "b")
    k.at(101, ordinary, "next")
    k.run()
    assert log == ["early", "a", "b", "from-a", "late1", "from-late1", "late2", "next"]
    assert k.now == 101
    assert k.events == 6            # the ordinary callbacks; end-of-instant calls are not counted
    with pytest.raises(ValueError):
        k.at_end_of(100, late, "past")


def test_idle_and_step_on_an_empty_schedule():
    k = Kernel()
    assert k.idle()
    with pytest.raises(EmptySchedule):
        k.step()
    k.at(5, lambda: None)
    assert not k.idle()
    k.step()
    assert k.idle() and k.now == 5


def test_simpy_is_used_by_the_kernel_alone_and_through_its_public_api():
    """Only twin/kernel/sim.py imports simpy, and it reads or writes no underscore attribute but
    its own (the end-of-instant calls)."""
    root = Path(twin.__file__).resolve().parent
    importers = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "simpy" or n.startswith("simpy.") for n in names):
                importers.append(path.relative_to(root).as_posix())
    assert sorted(set(importers)) == ["kernel/sim.py"]
    tree = ast.parse((root / "kernel" / "sim.py").read_text())
    private = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr.startswith("_")}
    assert private <= {"_late", "_late_call", "__init__"}, private


def test_named_rng_streams():
    a = Kernel(seed=5).rng("x").integers(0, 2**62, size=8)
    b = Kernel(seed=5).rng("x").integers(0, 2**62, size=8)
    c = Kernel(seed=5).rng("y").integers(0, 2**62, size=8)
    d = Kernel(seed=6).rng("x").integers(0, 2**62, size=8)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not np.array_equal(a, d)


# ---------------------------------------------------------------------------------------------
# MemoryRegion
# ---------------------------------------------------------------------------------------------

def test_region_land_read_and_counters():
    r = MemoryRegion("q", "gpu", 64)
    assert r.read(0, 64) == bytes(64)
    r.land(8, b"\x01\x02\x03")
    r.land(62, b"\xAA\xBB")           # exactly up to the end
    assert r.read(8, 3) == b"\x01\x02\x03"
    assert r.read(62, 2) == b"\xAA\xBB"
    assert bytes(r.view()[8:11]) == b"\x01\x02\x03"
    assert r.landings == 2
    assert r.bytes_landed == 5


@pytest.mark.parametrize("offset, data", [(-1, b"x"), (63, b"xy"), (64, b"x"), (0, bytes(65))])
def test_region_out_of_range_raises_and_changes_nothing(offset, data):
    r = MemoryRegion("q", "gpu", 64)
    calls = []
    r.watch(lambda: calls.append(1))
    with pytest.raises(IndexError):
        r.land(offset, data)
    assert r.buf == bytearray(64)
    assert r.landings == 0 and r.bytes_landed == 0
    assert calls == []


def test_region_size_must_be_positive():
    with pytest.raises(ValueError):
        MemoryRegion("q", "gpu", 0)


def test_region_watchers_see_the_new_bytes_on_every_landing():
    r = MemoryRegion("q", "cpu", 16)
    seen_a, seen_b = [], []
    r.watch(lambda: seen_a.append(r.read(0, 4)))
    r.watch(lambda: seen_b.append(r.read(0, 4)))
    r.land(0, b"abcd")
    r.write_local(0, b"wxyz")        # the owner's own store notifies too
    assert seen_a == [b"abcd", b"wxyz"]
    assert seen_b == [b"abcd", b"wxyz"]


# ---------------------------------------------------------------------------------------------
# PostedWritePath
# ---------------------------------------------------------------------------------------------

def _path(k, wire, size=256, jitter=None):
    dst = MemoryRegion("dst", "consumer", size)
    return PostedWritePath(k, "p", wire, dst, jitter or zero_jitter()), dst


def test_landing_is_issue_plus_serialisation_plus_latency():
    k = Kernel()
    wire = ByteWire(latency_ps=1000, ps_per_byte=10)
    path, dst = _path(k, wire)
    landed = []
    dst.watch(lambda: landed.append(k.now))
    out = []
    k.at(500, lambda: out.append(path.write(0, bytes(64))))
    k.run()
    assert out == [500 + 64 * 10 + 1000]
    assert landed == out
    assert path.writes == 1 and path.bytes == 64


def test_landing_adds_the_jitter_draw():
    k = Kernel()
    wire = ByteWire(latency_ps=1000, ps_per_byte=10)
    path, dst = _path(k, wire, jitter=FixedJitter([777]))
    k.at(0, path.write, 0, bytes(16))
    landed = []
    dst.watch(lambda: landed.append(k.now))
    k.run()
    assert landed == [16 * 10 + 1000 + 777]


def test_back_to_back_writes_serialise():
    k = Kernel()
    wire = ByteWire(latency_ps=1000, ps_per_byte=10)
    path, dst = _path(k, wire)
    lands = []

    def burst():
        lands.append(path.write(0, bytes(64)))      # busy 0..640
        lands.append(path.write(64, bytes(8)))      # waits for the wire: busy 640..720
        lands.append(path.write(72, bytes(100)))    # busy 720..1720

    k.at(0, burst)
    k.run()
    assert lands == [640 + 1000, 720 + 1000, 1720 + 1000]
    # a write issued after the wire went idle starts at its issue instant
    k.at(5000, lambda: lands.append(path.write(0, bytes(10))))
    k.run()
    assert lands[-1] == 5000 + 100 + 1000


def test_a_held_write_lands_with_the_earlier_one_and_its_bytes_win():
    # The first write draws a large jitter; the second (same path, same offset) would land
    # earlier, so it is held to the first's landing instant, and its bytes are the ones left.
    k = Kernel()
    wire = ByteWire(latency_ps=1000, ps_per_byte=10)
    path, dst = _path(k, wire, jitter=FixedJitter([5000, 0]))
    lands = []

    def two():
        lands.append(path.write(0, b"AAAA"))
        lands.append(path.write(0, b"BBBB"))

    k.at(0, two)
    seen = []
    dst.watch(lambda: seen.append((k.now, dst.read(0, 4))))
    k.run()
    first = 40 + 1000 + 5000
    assert lands == [first, first]
    assert seen == [(first, b"AAAA"), (first, b"BBBB")]
    assert dst.read(0, 4) == b"BBBB"
    assert path.reorders_held == 1


@settings(max_examples=50, deadline=None)
@given(writes=st.lists(st.tuples(st.integers(min_value=0, max_value=3000),    # gap before issue
                                 st.integers(min_value=4, max_value=300)),    # size (bytes)
                       min_size=1, max_size=40),
       latency=st.integers(min_value=0, max_value=5000),
       ps_per_byte=st.integers(min_value=0, max_value=20),
       scale=st.sampled_from([0, 1, 100, 2000, 20000]),
       seed=st.integers(min_value=0, max_value=2**32))
def test_posted_writes_land_in_issue_order_under_jitter(writes, latency, ps_per_byte, scale, seed):
    k = Kernel(seed)
    wire = ByteWire(latency_ps=latency, ps_per_byte=ps_per_byte)
    path, dst = _path(k, wire, size=512, jitter=JitterStream(seed, "path", scale))
    ref_jitter = JitterStream(seed, "path", scale)       # the same draws, for the expectation

    issues, t = [], 0
    for gap, size in writes:
        t += gap
        issues.append(t)
        # every write carries its index at offset 0, so the region shows which one landed last
        k.at(t, path.write, 0, struct.pack("<I", len(issues) - 1) + bytes(size - 4))
    order = []
    dst.watch(lambda: order.append((k.now, struct.unpack_from("<I", dst.buf, 0)[0])))
    k.run()

    # expectation from the contract: start when the wire is free; land after serialisation +
    # latency + jitter, but never before the previous write on the path.
    free = last = 0
    held = 0
    expect = []
    for t_issue, (_, size) in zip(issues, writes):
        start = max(t_issue, free)
        free = start + size * ps_per_byte
        raw = free + latency + ref_jitter.next()
        assert raw >= t_issue + size * ps_per_byte + latency
        if raw < last:
            held += 1
        last = max(raw, last)
        expect.append(last)

    assert [i for _, i in order] == list(range(len(writes)))     # landed in issue order
    assert [t for t, _ in order] == expect
    assert all(a <= b for a, b in zip(expect, expect[1:]))
    assert struct.unpack_from("<I", dst.buf, 0)[0] == len(writes) - 1
    assert path.reorders_held == held
    assert path.writes == len(writes)
    assert path.bytes == sum(size for _, size in writes)
    if scale == 0:
        assert held == 0


def test_plan_without_a_kernel_gives_the_same_landings():
    # The direct engine plans on a bare Lane (no kernel, no region); the arithmetic is the lane's alone.
    wire = ByteWire(latency_ps=300, ps_per_byte=3)
    a = Lane("a", wire, JitterStream(9, "j", 500))
    b = PostedWritePath(Kernel(9), "b", wire, MemoryRegion("d", "x", 64), JitterStream(9, "j", 500))
    issues = [0, 0, 10, 5000, 5001, 5001, 9000]
    assert [a.plan(t, 40) for t in issues] == [b.plan(t, 40) for t in issues]


# ---------------------------------------------------------------------------------------------
# Poller
# ---------------------------------------------------------------------------------------------

def _poller(period=1000, phase=250, cost=100, size=16):
    k = Kernel()
    r = MemoryRegion("req", "consumer", size)
    p = Poller(k, r, period, phase, cost, name="p")
    return k, r, p


@pytest.mark.parametrize("t_land", [1, 249, 250, 251, 1249, 1250, 1_000_123, 7_654_321])
def test_poller_sees_a_landing_at_the_first_poll_at_or_after_it(t_land):
    period, phase, cost = 1000, 250, 100
    k, r, p = _poller(period, phase, cost)
    seen = []
    p.arm(lambda: r.buf[0] == 1, seen.append)
    k.at(t_land, r.land, 0, b"\x01")
    k.run()
    poll_instants = [phase + j * period for j in range(t_land // period + 2)]
    t_poll = min(x for x in poll_instants if x >= t_land)
    assert seen == [t_poll + cost]
    assert p.hits == 1
    # every poll from the first one after arming (at 0) up to the one that saw it
    assert p.polls == len([x for x in poll_instants if 0 <= x <= t_poll])


def test_a_write_landing_exactly_on_a_poll_instant_is_seen_by_that_poll():
    period, phase, cost = 4000, 1000, 0
    k, r, p = _poller(period, phase, cost)
    seen = []
    p.arm(lambda: r.buf[0] == 7, seen.append)
    t_land = phase + 25 * period
    k.at(t_land, r.land, 0, b"\x07")
    k.run()
    assert seen == [t_land]


def test_landings_that_do_not_satisfy_the_test_are_ignored():
    k, r, p = _poller(1000, 0, 0)
    seen = []
    p.arm(lambda: r.buf[0] == 2, seen.append)
    k.at(1500, r.land, 0, b"\x01")         # not what it waits for
    k.at(2500, r.land, 1, b"\x02")         # wrong byte
    k.at(3500, r.land, 0, b"\x02")
    k.run()
    assert seen == [4000]


def test_no_event_per_empty_poll():
    period, phase, cost = 1000, 250, 100
    n_empty = 100_000
    k, r, p = _poller(period, phase, cost)
    seen = []
    p.arm(lambda: r.buf[0] == 1, seen.append)
    t_land = phase + n_empty * period - 1            # just before poll number n_empty
    k.at(t_land, r.land, 0, b"\x01")
    k.run()
    assert seen == [phase + n_empty * period + cost]
    assert p.polls == n_empty + 1                    # polls 0..n_empty, computed arithmetically
    assert k.events == 2                             # the landing and the one observing poll


def test_polls_grow_arithmetically_with_the_wait():
    counts = []
    for n in (10, 1000, 100_000):
        k, r, p = _poller(1000, 0, 0)
        p.arm(lambda: r.buf[0] == 1, lambda t: None)
        k.at(n * 1000, r.land, 0, b"\x01")
        k.run()
        counts.append((p.polls, k.events))
    assert [c for c, _ in counts] == [11, 1001, 100_001]
    assert all(e == 2 for _, e in counts)


def test_poller_armed_when_already_ready_fires_at_next_poll():
    k, r, p = _poller(1000, 250, 100)
    r.land(0, b"\x01")
    k.at(3333, lambda: p.arm(lambda: r.buf[0] == 1, seen.append))
    seen = []
    k.run()
    assert seen == [4250 + 100]


def test_arming_twice_raises_and_rearming_after_a_hit_works():
    k, r, p = _poller(1000, 0, 0)
    seen = []

    def on_seen(t):
        seen.append(t)
        if len(seen) == 1:
            p.arm(lambda: r.buf[0] == 2, on_seen)     # re-arm from the callback

    p.arm(lambda: r.buf[0] == 1, on_seen)
    with pytest.raises(RuntimeError):
        p.arm(lambda: True, on_seen)
    k.at(1500, r.land, 0, b"\x01")
    k.at(10_500, r.land, 0, b"\x02")
    k.run()
    assert seen == [2000, 11_000]
    assert p.hits == 2


def test_unarmed_poller_ignores_landings():
    k, r, p = _poller(1000, 0, 0)
    r.land(0, b"\x01")
    k.at(5, r.land, 0, b"\x01")
    k.run()
    assert p.hits == 0 and k.events == 1


@pytest.mark.parametrize("period, phase, cost", [(0, 0, 0), (-1, 0, 0), (1000, 1000, 0), (1000, -1, 0),
                                                 (1000, 0, -1)])
def test_poller_rejects_bad_parameters(period, phase, cost):
    with pytest.raises(ValueError):
        Poller(Kernel(), MemoryRegion("r", "o", 8), period, phase, cost)


@settings(max_examples=50, deadline=None)
@given(period=st.integers(min_value=1, max_value=100_000), data=st.data(),
       cost=st.integers(min_value=0, max_value=200_000),
       t_arm=st.integers(min_value=0, max_value=10**7),
       delay=st.integers(min_value=0, max_value=10**7))
def test_poller_observation_instant_property(period, data, cost, t_arm, delay):
    phase = data.draw(st.integers(min_value=0, max_value=period - 1))
    k = Kernel()
    r = MemoryRegion("req", "consumer", 8)
    p = Poller(k, r, period, phase, cost)
    seen = []
    k.at(t_arm, lambda: p.arm(lambda: r.buf[0] == 1, seen.append))
    t_land = t_arm + delay
    k.at(t_land, r.land, 0, b"\x01")
    k.run()
    t_poll = ceil_grid(t_land, period, phase)
    assert seen == [t_poll + cost]
    assert p.polls == (t_poll - ceil_grid(t_arm, period, phase)) // period + 1
    assert k.events == 3        # the arming, the landing and the observing poll; none per empty poll


# ---------------------------------------------------------------------------------------------
# Clock
# ---------------------------------------------------------------------------------------------

def test_clock_edges_nominal():
    c = Clock(4000)
    assert [c.edge(k) for k in range(4)] == [0, 4000, 8000, 12000]
    c = Clock(4000, 0, 1234)
    assert c.edge(0) == 1234 and c.edge(10) == 1234 + 40_000


def test_clock_edges_with_frequency_offset():
    # +1 ppm (1000 ppb, slower): after 10**6 periods of 4 ns (4 ms) the clock is 4 ns late.
    c = Clock(4000, ppb=1000)
    assert c.edge(10**6) == 4 * 10**9 + 4000
    # -37 ppm: after 10**6 periods, 4e9 * 37e-6 = 148,000 ps early.
    c = Clock(4000, ppb=-37_000, phase_ps=500)
    assert c.edge(10**6) == 500 + 4 * 10**9 - 148_000
    # below one picosecond of drift the edge is floored: 1 ppb over 100 periods of 4 ns = 0.4 ps
    assert Clock(4000, ppb=1).edge(100) == 400_000


@pytest.mark.parametrize("kw", [dict(period_ps=0), dict(period_ps=-4), dict(period_ps=4000, ppb=-10**9),
                                dict(period_ps=4000, phase_ps=-1)])
def test_clock_rejects_bad_parameters(kw):
    with pytest.raises(ValueError):
        Clock(**kw)


@settings(max_examples=60, deadline=None)
@given(period=st.integers(min_value=1, max_value=10**6),
       ppb=st.one_of(st.integers(min_value=-10**6, max_value=10**6),
                     st.integers(min_value=-999_999_999, max_value=10**9)),
       phase=st.integers(min_value=0, max_value=10**6),
       t=st.integers(min_value=-1000, max_value=10**13))
def test_clock_index_at_or_after_properties(period, ppb, phase, t):
    c = Clock(period, ppb, phase)
    k = c.index_at_or_after(t)
    assert k >= 0
    assert c.edge(k) >= t
    assert k == 0 or c.edge(k - 1) < t
    assert c.at_or_after(t) == c.edge(k)
    # edges follow the definition phase + floor(k * period * (1e9 + ppb) / 1e9)
    assert c.edge(k) == phase + (k * period * (10**9 + ppb)) // 10**9


@settings(max_examples=40, deadline=None)
@given(period=st.integers(min_value=1000, max_value=10**5),
       ppb=st.integers(min_value=-10**5, max_value=10**5),
       phase=st.integers(min_value=0, max_value=10**5),
       j=st.integers(min_value=0, max_value=10**8))
def test_clock_edge_is_its_own_at_or_after(period, ppb, phase, j):
    c = Clock(period, ppb, phase)
    assert c.at_or_after(c.edge(j)) == c.edge(j)
    assert c.index_at_or_after(c.edge(j)) == j
    assert c.at_or_after(c.edge(j) + 1) == c.edge(j + 1)


# ---------------------------------------------------------------------------------------------
# JitterStream
# ---------------------------------------------------------------------------------------------

def test_jitter_same_seed_and_name_same_values():
    a = JitterStream(3, "gpu.pcie.request", 20_000)
    b = JitterStream(3, "gpu.pcie.request", 20_000)
    assert [a.next() for _ in range(100)] == [b.next() for _ in range(100)]


def test_jitter_different_names_or_seeds_differ():
    a = JitterStream(3, "x", 20_000).block(51)
    b = JitterStream(3, "y", 20_000).block(51)
    c = JitterStream(4, "x", 20_000).block(51)
    assert a != b
    assert a != c


def test_jitter_block_equals_repeated_next_across_refills():
    n = 2 * BLOCK + 123
    a = JitterStream(11, "s", 5000)
    b = JitterStream(11, "s", 5000)
    one_by_one = [a.next() for _ in range(7)] + [a.next() for _ in range(n)]
    blocks = b.block(7) + b.block(BLOCK - 7 + 1) + b.block(n - (BLOCK - 7 + 1))
    assert one_by_one == blocks
    assert a.next() == b.next()



def test_jitter_is_exp_scale_rounded_drawn_block_by_block():
    """The stream's definition: block k is ``rint(Generator.exponential(scale, BLOCK))`` of the stream's
    generator, k = 0, 1, ...; however it is read (several blocks in one call, one by one)."""
    from twin.kernel.sim import stream_rng
    rng = stream_rng(5, "pcie.request")
    want = np.concatenate([np.rint(rng.exponential(47_747, BLOCK)).astype(np.int64) for _ in range(6)])
    js = JitterStream(5, "pcie.request", 47_747)
    got = np.concatenate([js.array(3 * BLOCK + 5), np.array([js.next() for _ in range(BLOCK)], np.int64),
                          js.array(2 * BLOCK - 5)])
    assert got.dtype == np.int64 and np.array_equal(got, want)

def test_jitter_zero_scale_gives_zeros():
    z = JitterStream(1, "z", 0)
    assert [z.next() for _ in range(10)] == [0] * 10
    assert z.block(5000) == [0] * 5000


def test_jitter_values_are_non_negative_integers_with_the_exponential_mean():
    scale = 20_000
    v = np.array(JitterStream(5, "m", scale).block(40_000))
    assert v.dtype.kind == "i" and (v >= 0).all()
    # Exp(scale): mean = scale; the standard error over 40,000 draws is scale / 200 (0.5 %).
    assert abs(v.mean() - scale) < 0.03 * scale
    # and its median is scale * ln 2
    assert abs(np.median(v) - scale * np.log(2)) < 0.03 * scale


def test_jitter_rejects_negative_scale():
    with pytest.raises(ValueError):
        JitterStream(0, "n", -1)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), scale=st.sampled_from([1, 47_747, 10**6]),
       takes=st.lists(st.tuples(st.sampled_from(["next", "array", "block"]),
                                st.sampled_from([0, 1, 5, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 7])), max_size=6))
def test_jitter_stream_reads_in_any_sizes_give_the_values_one_by_one(seed, scale, takes):
    """array(n) and block(n), however mixed with next(), read the values next() gives one at a time (array draws
    the blocks it needs in one call)."""
    ref, got = JitterStream(seed, "lane", scale), JitterStream(seed, "lane", scale)
    for kind, n in takes:
        want = [ref.next() for _ in range(n if kind != "next" else min(n, 3))]
        if kind == "next":
            seen = [got.next() for _ in range(len(want))]
        elif kind == "array":
            a = got.array(n)
            assert a.dtype == np.int64
            seen = a.tolist()
        else:
            seen = got.block(n)
        assert seen == want
