"""Python functions called back from the compiled event core (twin.runtime.callback): a flow whose
consumer serves a function written in Python only stays in the core, and equals the simpy reference
(rounds, hops, replies, counters) for random small topologies, on models sim and code."""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_compiled_core import CARD, PROPERTY, _core_or_skip, assert_identical, on_both, topologies

import twin.engine.event as E
from twin.devices.generator import TrafficParams
from twin.engine import compiled
from twin.engine.topology import Flow, Topology
from twin.runtime.functions import REGISTRY, Function, register
from twin.scenario.compile import flow_spec

pytestmark = pytest.mark.skipif(not E.COMPILED, reason="compiled core turned off")


def _rotate(payload: bytes) -> bytes:
    """A user's function in Python: each byte rotated left by 3 and XORed with its index, then the
    payload reversed (every byte of the reply depends on one byte of the request)."""
    return bytes(((b << 3 | b >> 5) & 0xFF) ^ (i & 0xFF) for i, b in enumerate(payload))[::-1]


def _tagged(payload: bytes) -> bytes:
    """Another: the payload's length and sum as 3 bytes (a reply of constant length)."""
    return bytes([len(payload) & 0xFF, sum(payload) & 0xFF, (sum(payload) >> 8) & 0xFF])


class UserError(RuntimeError):
    """What a user's function raises (not a ValueError: it cannot become a status)."""


def _raises(payload: bytes) -> bytes:
    if payload and payload[-1] % 5 == 4:
        raise UserError(f"bad last byte {payload[-1]}")
    return bytes(payload)


PY = {name: REGISTRY.get(fid) or register(Function(fid, name, fn, None, "a Python test function"))
      for fid, name, fn in ((56, "py_rotate", _rotate), (57, "py_tagged", _tagged),
                            (58, "py_raises", _raises))}


@given(topologies(), st.data())
@PROPERTY
def test_a_python_function_called_back_from_the_core_equals_the_simpy_reference(topo, data):
    _core_or_skip()
    flows = []
    for fl in topo.flows:  # some flows ask for a Python function, on a sim or a code consumer
        fn = data.draw(st.sampled_from([fl.spec.function, PY["py_rotate"].id, PY["py_tagged"].id]))
        model = data.draw(st.sampled_from(["sim", "code"]))
        flows.append(replace(fl, spec=replace(fl.spec, function=fn, model=model)))
    ref, got = on_both(replace(topo, flows=tuple(flows)))
    assert_identical(ref, got)
    for fl, r in zip(flows, got):
        assert r.ok.all() and r.stats["mismatches"] == 0


def _mesh(model: str, fid: int, rounds: int = 40) -> Topology:
    flows = []
    for i in range(4):
        tr = TrafficParams("closed_loop", rounds, 24 + i, in_flight=2)
        spec = flow_spec(CARD, "epyc7282", tr, 11, slots=4, function=fid if i == 1 else 0)
        flows.append(Flow(replace(spec, name=f"flow{i}", model=model if i == 1 else "sim"), f"g{i}", "card0", f"n{i}"))
    return Topology("py_mesh", 11, tuple(flows))


@pytest.mark.parametrize("model", ["sim", "code"])
def test_a_mesh_with_one_python_node_stays_in_the_core_and_its_replies_are_the_functions(model, monkeypatch):
    """The core accepts the mesh (no fall-back to the reference), and the Python node's replies are
    its function's: no mismatch, and a digest other than the echo's."""
    _core_or_skip()
    topo = _mesh(model, PY["py_rotate"].id)
    assert compiled.refusal(topo) is None
    fell = []
    monkeypatch.setattr(compiled, "note_fallback", fell.append)
    got = E.run_topology(topo)
    assert fell == [] and all(r.ok.all() for r in got)
    echo = compiled.run(_mesh(model, 0))
    assert got[1].stats["reply_digest"] != echo[1].stats["reply_digest"]
    assert got[0].stats["reply_digest"] == echo[0].stats["reply_digest"]
    assert_identical(*on_both(topo))


@pytest.mark.parametrize("model", ["sim", "code"])
def test_an_exception_in_a_called_back_function_is_the_references(model):
    """A user's function that raises inside the core's call stops the run with the very exception the
    simpy reference stops with (type and one-line message), and the process goes on."""
    _core_or_skip()
    topo = _mesh(model, PY["py_raises"].id)
    E.COMPILED = False
    try:
        with pytest.raises(UserError) as ref:
            E.run_topology(topo)
    finally:
        E.COMPILED = True
    with pytest.raises(UserError) as got:
        compiled.run(topo)
    assert str(got.value) == str(ref.value) and "\n" not in str(got.value)
    assert compiled.run(_mesh(model, PY["py_rotate"].id))[1].ok.all()  # the core still runs
