"""The generator's one waiting program (:class:`twin.devices.generator.Waits`): a per-request pattern
of offsets, several dependencies per request, time in clock edges, the same edges in both engines.

The expected send instants are the program's recurrence written out here from its definition:
request ``i`` leaves at edge ``max(e[i-1] + period, ceil(last correction needed / clock) + then)``
on the card's clock (phase 0), ``e[i-1] + period`` when it waits for nothing.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from twin.devices.generator import TrafficParams, Waits
from twin.engine.direct import run_direct
from twin.engine.event import run_event
from twin.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
CAL = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
CLK, PERIOD = 4000, 2_000_000  # ps: the card's 250 MHz clock, a 2 us cycle


def spec_with(tmp_path, waits: Waits, rounds: int = 240):
    doc = {"name": "w", "calibration": CAL, "seed": 9, "rounds": rounds, "frame_bytes": 64,
           "traffic": {"mode": "open_loop", "period": "2 us"},
           "nodes": [{"name": "gen", "kind": "generator"}, {"name": "u55c", "kind": "link_card"},
                     {"name": "epyc7282", "kind": "consumer", "device": "epyc7282"}],
           "links": [{"from": "gen", "to": "u55c", "kind": "on_card"},
                     {"from": "u55c", "to": "epyc7282", "kind": "pcie"}]}
    import yaml
    p = tmp_path / "w.yaml"
    p.write_text(yaml.safe_dump(doc))
    ld = load_scenario(p)
    from twin.scenario.compile import flow_spec
    sc = ld.scenario
    spec = flow_spec(ld.params, "epyc7282", sc.traffic_params(), sc.seed, slots=sc.slots)
    return replace(spec, traffic=replace(spec.traffic, waits=waits))


def test_a_shot_pattern_with_two_dependencies_is_the_recurrence_in_both_engines(tmp_path):
    # a shot of 4 requests: the first waits for nothing, the second for the one before, the third
    # for nothing, the fourth for both the one before and the one three before (two corrections)
    w = Waits(((), (1,), (), (1, 3)), then_cycles=50)
    spec = spec_with(tmp_path, w)
    ev, di = run_event(spec), run_direct(spec)
    assert np.array_equal(ev.t_send, di.t_send) and np.array_equal(ev.t_back, di.t_back)
    back = ev.t_back.astype(np.int64)
    want = [0]
    for i in range(1, len(ev.t_send)):
        e = want[-1] + PERIOD // CLK
        deps = {1: [i - 1], 3: [i - 1, i - 3]}.get(i % 4, [])
        deps = [j for j in deps if j >= 0]
        if deps:
            e = max(e, -(-int(max(back[j] for j in deps)) // CLK) + 50)
        want.append(e)
    assert np.array_equal(ev.t_send, np.array(want, np.int64) * CLK)
    stall = ev.stats["program"]["stall_ps"]
    assert np.array_equal(stall, di.stats["program"]["stall_ps"])
    assert (stall[np.arange(len(stall)) % 4 % 2 == 0] == 0).all()  # requests that wait for nothing never stall
    assert (stall > 0).sum() > 20  # a ~2.2 us round trip plus 200 ns against a 2 us cycle: waiting rounds stall


def test_every_round_is_the_one_entry_pattern():
    assert Waits.every_round(-2, 7) == Waits(((2,),), 7)
    assert Waits.every_round(-2).needs(1) == () and Waits.every_round(-2).needs(5) == (3,)
    with pytest.raises(ValueError, match="for_round"):
        Waits.every_round(0)
    with pytest.raises(ValueError, match="offsets >= 1"):
        Waits(((0,),))
    with pytest.raises(ValueError, match="one flow"):
        TrafficParams(mode="closed_loop", waits=Waits())
