"""The compiled core (twin/engine/c/core.c) held equal to the references: the compiled event core to
the simpy engine (identical per-round timestamps, hops, reply checks, reply digest and every
statistic) on random topologies (flows sharing consumers, cards and lanes), traffic (closed loop
in flight 1..8, gaps, random gaps, open loop at a period or random gaps, few slots: a backlog),
wires (PCIe, Aurora, RoCE), faults (corrupt pieces on either path, dropped frames and their resend,
consumer stalls, host freezes, the card's reply timeout) and seeds; the compiled direct path to the
Python recurrence. A run the core does not compute (a dropped frame with several in flight, another
model, a spec field it does not know) stays on the reference, with the reason.

Examples per property: ``TWIN_PROPERTY_EXAMPLES`` (default 25: a few seconds).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import twin.engine.direct as D
import twin.engine.event as E
from twin.calibration.params import load_params
from twin.calibration.roce import load_roce_params
from twin.devices.consumer import ConsumerParams
from twin.devices.generator import Gaps, TrafficParams
from twin.engine import compiled, features, native
from twin.engine.partition import components
from twin.engine.stop import Interrupted, clear_stop, request_stop
from twin.engine.topology import Flow, FlowWorkload, Topology
from twin.faults import FaultPlan
from twin.runtime.functions import REGISTRY, lookup
from twin.scenario.compile import flow_spec

ROOT = Path(__file__).resolve().parent.parent
CARD = load_params(ROOT / "calibrations" / "fitted" / "card_path.yaml")
ROCE = load_roce_params(ROOT / "calibrations" / "fitted" / "backline_roce.yaml")
EXAMPLES = int(os.environ.get("TWIN_PROPERTY_EXAMPLES", "25"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HOPS = ("issue", "land", "seen", "start", "reply", "publish", "rland")

pytestmark = pytest.mark.skipif(not E.COMPILED, reason="compiled core turned off")


def _core_or_skip():
    try:
        native.core()
    except native.CoreUnavailable as e:
        pytest.skip(str(e))


def on_both(topo: Topology):
    """(simpy reference results, compiled core results) of ``topo``; the core must accept it. Each
    result is told its flow's faults and consumer (for :func:`assert_faults_seen`)."""
    assert compiled.refusal(topo) is None, compiled.refusal(topo)
    E.COMPILED = False
    try:
        ref = E.run_topology(topo)
    finally:
        E.COMPILED = True
    got = compiled.run(topo)
    for fl, a, b in zip(topo.flows, ref, got):
        for r in (a, b):
            r.spec_faults, r.consumer_kind, r.consumer_cost = (fl.spec.faults, fl.spec.consumer.kind,
                                                               fl.spec.consumer.poll_cost_ps)
    return ref, got


def assert_identical(ref, got):
    """Every flow: the same timestamps, hops, checks and statistics (slot waits compared as arrays)."""
    assert len(ref) == len(got)
    for a, b in zip(ref, got):
        for f in ("t_send", "t_in", "t_have", "t_back", "ok"):
            x, y = getattr(a, f), getattr(b, f)
            assert np.array_equal(x, y), f"flow {a.name}: {f} differs first at round {int(np.argmax(x != y)) + 1}"
        for f in HOPS:
            x, y = getattr(a.hops, f), getattr(b.hops, f)
            assert np.array_equal(x, y), f"flow {a.name}: hop {f} differs first at round {int(np.argmax(x != y)) + 1}"
        sa, sb = dict(a.stats), dict(b.stats)
        assert np.array_equal(sa.pop("slot_wait_ps"), sb.pop("slot_wait_ps"))
        assert sa == sb
        for what in ("lanes", "threads"):  # in the same order too (results.json writes them in it)
            assert list(sa["shared"][what]) == list(sb["shared"][what])
        assert_faults_seen(a)


def assert_faults_seen(res):
    """What the faults must do, from their definition (twin/faults.py), whichever engine ran them: the
    echo's replies are right but for the corrupted rounds (a flipped payload byte, request or reply
    path), each a mismatch (on the request path one the card finds in the consumer's memory too); each
    dropped round is sent again; no request is taken at a poll inside a stall or a CPU's host freeze;
    a reply counts as overdue when it was not had ``timeout`` after its request was issued (and the
    run lasted that long; a reply had at that very instant may count either way: event order)."""
    fp, n = getattr(res, "spec_faults", FaultPlan()), len(res.t_in)  # told by on_both; else none
    det = res.stats["faults"]["detected"]
    corrupt = {r for r in fp.corrupt_rounds if r <= n}
    assert set((np.nonzero(~res.ok)[0] + 1).tolist()) == corrupt
    assert res.stats["mismatches"] == det["mismatches"] == len(corrupt)
    assert det["mismatches_from_corrupted_requests"] == (len(corrupt) if fp.corrupt_path == "request" else 0)
    assert det["resent_frames"] == res.stats["faults"]["injected"]["drop_frame"] == sum(r <= n for r in fp.drop_rounds)
    for s0, e0 in fp.consumer_stalls(getattr(res, "consumer_kind", "cpu")):  # none without faults
        polls = res.hops.start - res.consumer_cost
        assert not ((polls >= s0) & (polls < e0)).any(), f"a request taken at a poll in the stall [{s0}, {e0})"
    if fp.timeout_ps:
        due, end = res.hops.issue + fp.timeout_ps, res.t_back.max()  # the run ends with its last reply back
        late = int(((res.t_have > due) & (due < end)).sum())
        assert late <= det["reply_timeouts"] <= int(((res.t_have >= due) & (due <= end)).sum())
    else:
        assert det["reply_timeouts"] == 0


@st.composite
def traffics(draw, rounds: int):
    mode = draw(st.sampled_from(["closed_loop", "open_loop"]))
    clock = draw(st.sampled_from(["card", "independent"]))
    ppm = draw(st.sampled_from([0.0, 37.5, -120.0])) if clock == "independent" else 0.0
    frame = draw(st.sampled_from([8, 16, 64, 100, 180]))
    random = draw(st.booleans())
    gaps = None
    if random:
        kind = draw(st.sampled_from(["uniform", "exponential", "fixed"]))
        a = draw(st.integers(0, 3_000_000))
        gaps = Gaps(kind, a, a + draw(st.integers(0, 2_000_000)))
    if mode == "closed_loop":
        return TrafficParams("closed_loop", rounds, frame, clock=clock, ppm=ppm, gaps=gaps,
                             gap_ps=0 if gaps else draw(st.sampled_from([0, 4000, 1_000_000])),
                             in_flight=draw(st.integers(1, 8)))
    period = 0 if gaps else 4000 * draw(st.integers(100, 1500))  # 0.4 .. 6 us: from a backlog to an idle loop
    return TrafficParams("open_loop", rounds, frame, period_ps=period, clock=clock, ppm=ppm, gaps=gaps)


C_FUNCTIONS = sorted(f.id for f in REGISTRY.values() if f.id == 0 or f.c_symbol)
"""The functions the core runs: the echo and the runtime library's C functions (invert, xor_fold, sum32,
the lookup decoders decode_rep3 and decode_steane7)."""
SHOWS_EVERY_FLIP = (0, 1, 2, 3)
"""The functions whose reply changes with any byte of the request (echo, invert, xor_fold, sum32): a
corrupted round always shows as a mismatch. A lookup decoder reads the syndrome's bits alone (a flip
in the frame's padding gives the right correction): :func:`assert_faults_seen` needs these."""


@st.composite
def topologies(draw):
    """1..4 flows over 1..3 consumer nodes, 1..2 cards and 1..2 generators (shared threads, bridges,
    lanes and oscillators), each with its own device, traffic, slots, encoding, wire and function (the
    echo or one of the runtime library's C functions: :data:`C_FUNCTIONS`)."""
    seed = draw(st.integers(0, 2**32))
    roce = draw(st.booleans())
    params = ROCE if roce else CARD
    devices = sorted(params.consumers)
    k = draw(st.integers(1, 4))
    consumers = draw(st.integers(1, 3))
    cards = draw(st.integers(1, 2))
    node_device = [draw(st.sampled_from(devices)) for _ in range(consumers)]  # one device per consumer node
    flows = []
    for i in range(k):
        tr = draw(traffics(draw(st.integers(3, 40))))
        node = draw(st.integers(0, consumers - 1))
        dev = node_device[node]
        slots = draw(st.sampled_from([1, 2, 4, 16]))
        enc = draw(st.sampled_from([None, "classic", "per_piece"]))
        if roce:
            spec = flow_spec(params, dev, tr, seed, slots=slots, encoding=enc, switch_hops=draw(st.integers(0, 2)))
        else:
            spec = flow_spec(params, dev, tr, seed, slots=slots, encoding=enc, external_control=draw(st.booleans()))
        spec = replace(spec, name=f"flow{i}", function=draw(st.sampled_from(C_FUNCTIONS)))
        flows.append(Flow(spec, f"gen{draw(st.integers(0, 1))}", f"card{draw(st.integers(0, cards - 1))}",
                          f"node{node}"))
    return Topology("prop", seed, tuple(flows))


@st.composite
def fault_plans(draw, tr: TrafficParams):
    """Faults for a flow of traffic ``tr`` (none half the time): 0..3 corrupt rounds on either path,
    0..2 stall and host-freeze windows anywhere in the first 150 us, a reply timeout of 0.5..40 us,
    and 0..2 dropped rounds in a closed loop (any number in flight: a resent frame may enter the card
    behind later rounds)."""
    if not draw(st.booleans()):
        return FaultPlan()
    n = tr.rounds
    rounds = st.frozensets(st.integers(1, n + 2), max_size=3)
    windows = st.lists(st.tuples(st.integers(0, 150_000_000), st.integers(1, 60_000_000)).map(lambda w: (w[0], sum(w))),
                       max_size=2).map(tuple)
    closed = tr.mode == "closed_loop"
    drops = draw(st.frozensets(st.integers(1, n), max_size=2)) if closed else frozenset()
    stalls, freezes = draw(windows), draw(windows)
    needs = bool(drops or stalls or freezes)
    # on the 2 ns grid the card's instants are on: a reply had at the very instant its timeout ends happens
    timeout = 2000 * draw(st.integers(250, 20_000)) if needs or draw(st.booleans()) else 0
    return FaultPlan(corrupt_rounds=draw(rounds), corrupt_path=draw(st.sampled_from(["request", "reply"])),
                     drop_rounds=drops, stalls=stalls, timeout_ps=timeout, host_freezes=freezes)


@PROPERTY
@given(topologies())
def test_compiled_event_core_equals_the_simpy_reference(topo):
    _core_or_skip()
    assert_identical(*on_both(topo))


@PROPERTY
@given(topologies(), st.data())
def test_compiled_event_core_injects_faults_as_the_simpy_reference(topo, data):
    """The same random topologies with faults drawn for every flow (a closed loop's in-flight count
    set to 1 half the time, the others keep theirs: frames may be dropped in any closed loop): identical
    rounds, replies and counts."""
    _core_or_skip()
    flows = []
    for fl in topo.flows:
        tr = fl.spec.traffic
        if tr.mode == "closed_loop" and data.draw(st.booleans()):
            tr = replace(tr, in_flight=1)
        fn = fl.spec.function if fl.spec.function in SHOWS_EVERY_FLIP else data.draw(st.sampled_from(SHOWS_EVERY_FLIP))
        flows.append(replace(fl, spec=replace(fl.spec, traffic=tr, function=fn, faults=data.draw(fault_plans(tr)))))
    assert_identical_or_both_run_dry(replace(topo, flows=tuple(flows)))


def assert_identical_or_both_run_dry(topo: Topology) -> None:
    """:func:`assert_identical` on both engines' results, or, where the reference's timeline runs dry
    with requests outstanding (a resent frame behind later rounds in a full card: the consumer waits
    for the round in its slot, the card for a reply), the core's too."""
    try:
        ref, got = on_both(topo)
    except RuntimeError as e:
        if "ran dry" not in str(e):
            raise
        with pytest.raises(RuntimeError, match="ran dry"):
            compiled.run(topo)
        return
    assert_identical(ref, got)


@PROPERTY
@given(st.integers(0, 2**32), st.sampled_from(sorted(CARD.consumers)), st.integers(1, 8), st.booleans(),
       st.sampled_from([None, "classic", "per_piece"]), st.booleans())
def test_compiled_direct_path_equals_the_python_recurrence(seed, device, in_flight, aurora, enc, gaps):
    _core_or_skip()
    tr = TrafficParams("closed_loop", 300, 64, in_flight=in_flight, gaps=Gaps("exponential", 800_000) if gaps else None)
    spec = flow_spec(CARD, device, tr, seed, slots=16, encoding=enc, external_control=aurora)
    D.COMPILED = False
    try:
        ref = D.run_direct(spec)
    except D.DirectNotApplicable:  # a slot wait: the compiled path must refuse it too
        D.COMPILED = True
        with pytest.raises(D.DirectNotApplicable, match="waits for a free slot"):
            D.run_direct(spec)
        return
    finally:
        D.COMPILED = True
    got = D.run_direct(spec)
    D.check_same(ref, got, len(ref.t_in))
    for f in HOPS:
        assert np.array_equal(getattr(ref.hops, f), getattr(got.hops, f)), f
    assert ref.stats == got.stats



@PROPERTY
@given(st.integers(0, 2**32), traffics(300), st.booleans(), st.sampled_from([None, "classic", "per_piece"]))
def test_compiled_direct_path_keeps_a_column_as_another_only_where_they_are_equal(seed, tr, aurora, enc):
    """Open and closed loop on the card's clock or an independent one (phase, drift), with and without
    Aurora, either encoding: the compiled path equals the Python recurrence, and it keeps t_in as
    t_send, t_back as t_have and publish as reply (one array) exactly where every round has them
    equal; its columns are read-only."""
    _core_or_skip()
    spec = flow_spec(CARD, "epyc7282", tr, seed, slots=64, encoding=enc, external_control=aurora)
    D.COMPILED = False
    try:
        ref = D.run_direct(spec)
    except D.DirectNotApplicable:
        return  # a slot wait: the test above holds the compiled path to the same refusal
    finally:
        D.COMPILED = True
    got = D.run_direct(spec)
    D.check_same(ref, got, len(ref.t_in))  # every column, the reference computing each on its own
    assert not any(a.flags.writeable for a in (got.t_send, got.t_in, got.t_have, got.t_back, got.hops.publish))
    assert np.shares_memory(got.t_back, got.t_have) == (not aurora)
    card_edges = not aurora and tr.clock == "card"
    assert np.shares_memory(got.t_in, got.t_send) >= card_edges  # the card's clock: t_in is t_send
    assert not (aurora and np.shares_memory(got.t_in, got.t_send))
    per_piece = (enc or CARD.consumers["epyc7282"].encoding) == "per_piece"
    assert np.shares_memory(got.hops.publish, got.hops.reply) == per_piece

def test_a_mesh_of_many_flows_on_shared_links_is_identical():
    """16 flows, 4 controllers, 2 cards, 4 consumers: every lane, bridge and thread shared."""
    _core_or_skip()
    flows = []
    for i in range(16):
        tr = TrafficParams("open_loop", 60, 64, gaps=Gaps("exponential", 1_500_000), clock="independent", ppm=20.0 * i)
        spec = replace(flow_spec(CARD, sorted(CARD.consumers)[i % 4], tr, 7, slots=4, external_control=i % 2 == 0),
                       name=f"flow{i}")
        card, node = f"card{i % 2}", f"node{i % 4}"
        flows.append(Flow(spec, f"ctrl{i % 4}", card, node,
                          lanes={"request": f"mesh.{card}->{node}", "reply": f"mesh.{node}->{card}"}))
    assert_identical(*on_both(Topology("mesh16", 7, tuple(flows))))


@pytest.mark.parametrize("function", ["invert", "xor_fold", "sum32"])
def test_each_runtime_function_runs_in_the_core_and_checks_its_replies(function):
    """The core runs the runtime's C function (no fallback) and its replies are the function's: the
    digest differs from the echo's, no mismatch, and a corrupted reply is one mismatch on both engines."""
    _core_or_skip()
    tr = TrafficParams("closed_loop", 30, 21, in_flight=2)
    fn = lookup(function).id
    for enc in ("classic", "per_piece"):
        spec = flow_spec(CARD, "epyc7282", tr, 5, slots=4, encoding=enc, function=fn)
        ref, got = on_both(Topology.single(spec))
        assert_identical(ref, got)
        assert got[0].ok.all() and got[0].stats["mismatches"] == 0
        echo = compiled.run(Topology.single(replace(spec, function=0)))[0]
        assert echo.stats["reply_digest"] != got[0].stats["reply_digest"]
        bad = replace(spec, faults=FaultPlan(corrupt_rounds=frozenset({4}), corrupt_path="reply"))
        ref, got = on_both(Topology.single(bad))
        assert_identical(ref, got)
        assert (np.nonzero(~got[0].ok)[0] + 1).tolist() == [4]


def test_a_function_reply_of_another_length_than_planned_leaves_the_flow_to_the_reference(monkeypatch):
    """The core plans a function's reply writes for one length (its Python twin's on the frame); a reply
    of another length stops it, and the run is the simpy reference's (never silently different)."""
    _core_or_skip()
    spec = flow_spec(CARD, "epyc7282", TrafficParams("closed_loop", 20, 32), 5, slots=4, function=lookup("sum32").id)
    planned = compiled._function
    monkeypatch.setattr(compiled, "_function", lambda sp: (planned(sp)[0], planned(sp)[1] + 1))
    with pytest.raises(native.CoreUnavailable, match="function sum32 gave round 1 a reply of another length"):
        compiled.run(Topology.single(spec))
    fell = []
    monkeypatch.setattr(compiled, "note_fallback", fell.append)
    res = E.run_topology(Topology.single(spec))
    assert len(fell) == 1 and "sum32" in fell[0] and res[0].ok.all()


@pytest.mark.parametrize("enc", ["classic", "per_piece"])
def test_every_frame_length_modulo_a_piece_is_identical(enc):
    """Frames of 1..25 bytes: every length of a per-piece message's last piece (1..12 bytes), and short frames."""
    _core_or_skip()
    for frame in range(1, 26):
        tr = TrafficParams("closed_loop", 12, frame, in_flight=2)
        for fn in C_FUNCTIONS:
            if frame < lookup(fn).min_payload:  # a decoder's syndrome does not fit: refused, not served
                continue
            spec = flow_spec(CARD, "epyc7282", tr, 11, slots=4, encoding=enc, function=fn)
            assert_identical(*on_both(Topology.single(spec)))

def _flow(i: int, gen: str, card: str, node: str, rounds: int = 60, aurora: bool = False, ppm: float = 0.0) -> Flow:
    tr = TrafficParams("open_loop", rounds, 64, gaps=Gaps("exponential", 1_500_000), clock="independent", ppm=ppm)
    spec = replace(flow_spec(CARD, sorted(CARD.consumers)[i % 4], tr, 7, slots=4, external_control=aurora),
                   name=f"flow{i}")
    return Flow(spec, gen, card, node)


def test_components_are_the_flows_joined_by_what_they_share():
    """Flows 0-2: 0 and 1 on one card, 2 on 1's consumer through another card; 3 alone; 4 and 5 from
    one controller (one oscillator: a constant, no contention) over their own cards and consumers;
    6 and 7 over one Aurora cable each from one controller to one card (the card's bridge)."""
    flows = [_flow(0, "g0", "c0", "n0"), _flow(1, "g1", "c0", "n1"), _flow(2, "g2", "c1", "n1"),
             _flow(3, "g3", "c2", "n3"), _flow(4, "g4", "c3", "n4"), _flow(5, "g4", "c4", "n5"),
             _flow(6, "g6", "c5", "n6", aurora=True), _flow(7, "g6", "c5", "n7", aurora=True)]
    topo = Topology("parts", 7, tuple(flows))
    assert components(topo) == [(0, 1, 2), (3,), (4,), (5,), (6, 7)]
    assert components(Topology("one", 7, tuple(flows[:1]))) == [(0,)]


@st.composite
def meshes(draw):
    """2..8 flows: with sharing, over a few controllers, cards and consumers drawn for each flow
    (some flows meet, some do not); without, every flow its own controller, card and consumer."""
    k = draw(st.integers(2, 8))
    shared = draw(st.booleans())
    seed = draw(st.integers(0, 2**32))
    pool = draw(st.integers(1, k)) if shared else k
    devices = [draw(st.sampled_from(sorted(CARD.consumers))) for _ in range(pool)]  # one device per consumer node
    flows = []
    for i in range(k):
        pick = (lambda: draw(st.integers(0, pool - 1))) if shared else (lambda i=i: i)
        node = pick()
        tr = draw(traffics(draw(st.integers(3, 30))))
        spec = flow_spec(CARD, devices[node], tr, seed, slots=draw(st.sampled_from([1, 4, 16])),
                         encoding=draw(st.sampled_from([None, "classic", "per_piece"])),
                         external_control=draw(st.booleans()))
        flows.append(Flow(replace(spec, name=f"flow{i}"), f"gen{pick()}", f"card{pick()}", f"node{node}"))
    return Topology("meshes", seed, tuple(flows)), shared


def _components_by_merging(topo: Topology) -> list[tuple[int, ...]]:
    """The components the slow way: each flow a group of its resources, groups sharing one merged until
    none do."""
    from twin.engine.partition import shared_resources
    groups = [({i}, set(shared_resources(fl))) for i, fl in enumerate(topo.flows)]
    merged = True
    while merged:
        merged = False
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                if groups[a][1] & groups[b][1]:
                    groups[a][0].update(groups[b][0])
                    groups[a][1].update(groups[b][1])
                    del groups[b]
                    merged = True
                    break
            if merged:
                break
    return sorted(tuple(sorted(g)) for g, _ in groups)


@PROPERTY
@given(meshes())
def test_a_mesh_split_into_its_components_equals_the_one_timeline_of_the_reference(mesh):
    """Every flow's rounds, hops and counters, the lanes' and threads' counters and the event count
    equal the simpy reference's (one timeline of the whole mesh), whether its flows meet or not."""
    _core_or_skip()
    topo, shared = mesh
    if not shared:  # nothing shared: every flow its own component
        assert components(topo) == [(i,) for i in range(len(topo.flows))]
    assert components(topo) == _components_by_merging(topo)
    assert_identical(*on_both(topo))


def test_a_large_mesh_split_equals_its_one_timeline():
    """48 flows, 8 controllers per card, half of the cards over Aurora from one controller each
    cable, each flow to its own consumer but every third pair of flows sharing one: 6 components, each
    on its own timeline, equal to the whole mesh on one timeline of the same core (compiled.SPLIT off)."""
    _core_or_skip()
    flows = []
    for i in range(48):
        card = i // 8
        node = f"n{i - i % 2}" if i % 3 == 0 else f"n{i}"
        flows.append(_flow(i, f"g{card}" if card % 2 else f"g{i}", f"c{card}", node, rounds=150, aurora=card % 2 == 1,
                           ppm=3.0 * (i % 5)))
    topo = Topology("large", 11, tuple(flows))
    assert len(components(topo)) == 6
    split = compiled.run(topo)
    compiled.SPLIT = False
    try:
        one = compiled.run(topo)
    finally:
        compiled.SPLIT = True
    assert_identical(one, split)


@pytest.mark.parametrize("window", [1, 7, 1024])
def test_the_whole_step_in_one_core_call_equals_one_call_a_component(window, monkeypatch):
    """12 flows on 3 link cards shared by 4 (3 components, one over Aurora), advanced a whole step of
    every component in one call of the core (compiled.WHOLE_STEP) by windows of 1, 7 and 1,024 replies:
    every flow's rounds, hops and counters equal those of one call a component at the default window."""
    _core_or_skip()
    flows = tuple(_flow(i, f"g{i}", f"c{i // 4}", f"n{i}", rounds=300 + 50 * (i % 3), aurora=i // 4 == 1,
                        ppm=4.0 * i) for i in range(12))
    topo = Topology("steps", 5, flows)
    assert len(components(topo)) == 3
    monkeypatch.setattr(compiled, "WHOLE_STEP", False)
    one_each = compiled.run(topo)
    monkeypatch.setattr(compiled, "WHOLE_STEP", True)
    monkeypatch.setattr(compiled, "WINDOW", window)
    seen: list[int] = []
    whole = compiled.run(topo, progress=seen.append, chunk_rounds=1000)
    assert_identical(one_each, whole)
    assert seen and seen == sorted(seen) and seen[-1] == sum(f.spec.traffic.rounds for f in flows)


def test_a_stopped_mesh_keeps_every_flows_rounds_up_to_one_instant():
    """Four components advanced together, asked to stop after the first progress report: every flow
    keeps a prefix of its whole run's rounds, at least one, and no flow keeps a round whose reply came
    back after a round another flow left out (one cut instant for all)."""
    _core_or_skip()
    flows = tuple(_flow(i, f"g{i}", f"c{i // 2}", f"n{i}", rounds=4000, ppm=10.0 * i) for i in range(8))
    topo = Topology("stopped", 7, flows)
    assert len(components(topo)) == 4
    whole = compiled.run(topo)
    clear_stop()
    try:
        with pytest.raises(Interrupted) as e:
            compiled.run(topo, progress=lambda done: request_stop(), chunk_rounds=3000)
    finally:
        clear_stop()
    kept = e.value.results
    assert [r.name for r in kept] == [r.name for r in whole]
    lengths = [len(r.t_back) for r in kept]
    assert all(1 <= m < 4000 for m in lengths), lengths
    for r, w in zip(kept, whole):
        assert np.array_equal(r.t_back, w.t_back[:len(r.t_back)]) and np.array_equal(r.hops.rland,
                                                                                      w.hops.rland[:len(r.t_back)])
    last_kept = max(int(r.t_back[-1]) for r in kept)
    first_left = min(int(w.t_back[len(r.t_back)]) for r, w in zip(kept, whole))
    assert last_kept <= first_left


def _spec(**kw):
    return flow_spec(CARD, "epyc7282", kw.pop("traffic", TrafficParams("closed_loop", 50, 64)), 3, **kw)


@dataclasses.dataclass(frozen=True)
class IdleCostConsumer(ConsumerParams):
    """A consumer with a behaviour the compiled core was not written for (a stand-in for a device
    feature added later)."""

    idle_ps: int = 0


def test_a_spec_field_the_core_does_not_know_keeps_the_run_on_the_python_engines():
    c = _spec().consumer
    spec = replace(_spec(), consumer=IdleCostConsumer(**{f.name: getattr(c, f.name) for f in dataclasses.fields(c)},
                                                      idle_ps=5000))
    assert features.uncomputed(spec) == ["consumer.idle_ps = 5000"]
    assert "consumer.idle_ps = 5000 is not computed by the compiled core" in compiled.refusal(Topology.single(spec))
    at_default = replace(spec, consumer=replace(spec.consumer, idle_ps=0))
    assert features.uncomputed(at_default) == [] and compiled.refusal(Topology.single(at_default)) is None


DROP = FaultPlan(drop_rounds=frozenset({3}), timeout_ps=20_000_000)


@pytest.mark.parametrize("kw, why", [
    (dict(faults=DROP, traffic=TrafficParams("open_loop", 50, 64, period_ps=4_000_000)), "need closed-loop"),
    (dict(model="rtl"), "the consumer is model rtl"),
    (dict(function=999), "function 999 is not registered"),
])
def test_what_the_core_does_not_compute_is_refused_with_its_reason(kw, why):
    assert why in compiled.refusal(Topology.single(_spec(**kw)))


def test_a_resent_frame_behind_later_rounds_is_the_references():
    """Four in flight, rounds 3 and 7 dropped: each resent frame enters the card after later rounds (the
    card issues in arrival order, the consumer serves in round order); identical on both, each drop
    resent once, and the slot waits in issue order."""
    _core_or_skip()
    tr = TrafficParams("closed_loop", 40, 64, in_flight=4)
    spec = replace(_spec(traffic=tr, slots=16), faults=replace(DROP, drop_rounds=frozenset({3, 7})))
    assert compiled.refusal(Topology.single(spec)) is None
    ref, got = on_both(Topology.single(spec))
    assert_identical(ref, got)
    det = got[0].stats["faults"]["detected"]
    assert det["resent_frames"] == 2 and got[0].ok.all()
    assert (np.diff(got[0].t_in)[1:3] < 0).any()  # round 3 entered the card after round 4


def test_a_workload_in_python_is_refused():
    wl = FlowWorkload(payloads=lambda seq: bytes(64))
    assert "workload" in compiled.refusal(Topology.single(_spec(), wl))


def test_turned_off_the_reference_runs_and_says_why(monkeypatch, caplog):
    monkeypatch.setenv("TWIN_COMPILED", "0")
    with pytest.raises(native.CoreUnavailable, match="TWIN_COMPILED=0"):
        native.core()
    caplog.set_level("INFO", logger="twin.engine")
    res = E.run_event(_spec())
    assert res.ok.all() and "TWIN_COMPILED=0" in caplog.text


@pytest.mark.parametrize("name, corrupted", [("faults_epyc7282", 1), ("host_freeze", 0)])
def test_the_bundled_fault_scenarios_run_on_the_compiled_core(name, corrupted, monkeypatch):
    """No fallback to the simpy reference; in 300 rounds faults_epyc7282 corrupts its round 100 (one
    mismatch per loop), host_freeze corrupts nothing."""
    _core_or_skip()
    from twin.scenario.load import load_scenario
    from twin.studies.run import run_study
    fell = []
    monkeypatch.setattr(compiled, "note_fallback", fell.append)
    study = run_study(load_scenario(ROOT / "scenarios" / f"{name}.yaml"), rounds=300, engine="event")
    assert fell == []
    assert [r.result.stats["mismatches"] for r in study.runs] == [corrupted] * len(study.runs)


def test_a_reply_had_at_the_instant_its_timeout_ends_is_overdue_on_both():
    """The card's timeout check of a request is scheduled when it is issued, before the read-out of its
    reply, so at the same instant it runs first and counts the reply as overdue: with the timeout set
    to one round's issue-to-had time, every round at least that long counts (the timeout changes no
    instant)."""
    _core_or_skip()
    spec = _spec(traffic=TrafficParams("closed_loop", 200, 64, gaps=Gaps("exponential", 800_000)))
    plain = E.run_event(spec)
    took = plain.t_have - plain.hops.issue
    timeout = int(took[4])
    ref, got = on_both(Topology.single(replace(spec, faults=FaultPlan(timeout_ps=timeout))))
    assert_identical(ref, got)
    assert np.array_equal(got[0].t_have, plain.t_have)
    assert got[0].stats["faults"]["detected"]["reply_timeouts"] == int((took >= timeout).sum()) > 0
