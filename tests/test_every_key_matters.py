"""Nothing is accepted and ignored (issue 11): every key of the scenario schemas either changes the
outcome or is refused at load with one line naming file, key and value.

The list of keys is not written here: :func:`schema_keys` walks the pydantic models (nested models,
lists of models, optional models) of ``twin run`` (:class:`twin.scenario.schema.Scenario`) and
``twin decode`` (:class:`twin.qec.schema.DecodeScenario`). Every key it finds must have cases in
:data:`CASES` or a reason in :data:`EXEMPT`; a key added to a schema without either fails
:func:`test_every_schema_key_is_covered`.

A case runs a small base scenario and the same scenario with one key changed (``alt``; ``pre``
edits both, to make the key meaningful, e.g. an independent clock before ``ppm``), and asserts that
the outcome differs: the per-round timestamps or results.json, less what only repeats the scenario
(its name, the traffic block, each consumer's model and function, ...): see :func:`strip_echo`.
Or it asserts that the alternative is refused with a :class:`ConfigError` whose key is the given
one (``refused``). Base runs are cached for the module.
"""
from __future__ import annotations

import copy
import hashlib
import io
import json
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel
from rich.console import Console
from test_qblox_feedback import program as listening_program

from twin.config import ConfigError
from twin.qec.schema import DecodeScenario
from twin.scenario.schema import Scenario

ROOT = Path(__file__).resolve().parent.parent
CAL = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
SCHEMAS = {"run": Scenario, "decode": DecodeScenario}
DELETE = object()  # an ``alt``/``pre`` value: remove the key


# -- the walk --------------------------------------------------------------------------------------
def _nested(tp) -> tuple[str, type[BaseModel]] | None:
    """``("", Model)`` or ``("[]", Model)`` when annotation ``tp`` holds a model (optional or a
    list of it), ``None`` for a leaf. Any other container of a model is an error: the walk would
    miss its keys."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [n for n in (_nested(a) for a in typing.get_args(tp) if a is not type(None)) if n]
        if len(inner) > 1 or (inner and len(typing.get_args(tp)) > 2):
            raise TypeError(f"{tp}: a union of models; teach schema_keys to walk it")
        return inner[0] if inner else None
    if origin is list:
        inner = _nested(typing.get_args(tp)[0])
        if inner and inner[0]:
            raise TypeError(f"{tp}: a list of lists of models; teach schema_keys to walk it")
        return ("[]", inner[1]) if inner else None
    if origin is not None:
        if any(_nested(a) for a in typing.get_args(tp)):
            raise TypeError(f"{tp}: models inside a {origin}; teach schema_keys to walk it")
        return None
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "", tp
    return None


def schema_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every leaf key of ``model`` as a path (``nodes[].bridge.timeout``), by the names a file uses
    (a field's alias, e.g. ``links[].from``)."""
    out = []
    for name, f in model.model_fields.items():
        path = prefix + (f.alias or name)
        sub = _nested(f.annotation)
        out += schema_keys(sub[1], f"{path}{sub[0]}.") if sub else [path]
    return out


# -- cases -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """``base`` (a name in :data:`BASES`) with ``pre`` applied, against the same with ``alt`` also
    applied. Keys are paths with indices (``nodes[2].bridge.cpu``). ``refused``: the alternative is
    refused with a ConfigError naming this key (or an item of it, ``key[i]``)."""

    base: str
    alt: dict
    pre: dict = field(default_factory=dict)
    refused: str | None = None


C = Case
HOST_RT = "bundled:calibrations/measured/host_runtime/vm2core_rep3.yaml"  # a measured host runtime (both wakes)
OPEN = {"traffic.mode": "open_loop", "traffic.period": "3 us"}
INDEP = {**OPEN, "traffic.clock": "independent"}
GAPS = {"traffic.gaps": {"distribution": "uniform", "min": "1 us", "max": "3 us"}}
F0 = "flows[0].traffic"
MESH_CLOSED = {f"{F0}.mode": "closed_loop", f"{F0}.period": DELETE}
FAULT = {"faults": {"drop_frame": {"rounds": [20]}, "timeout": "50 us"}}
STALL = {"faults": {"stall": [{"at": "100 us", "duration": "20 us"}]}}
FREEZE = {"faults": {"host_freeze": [{"at": "100 us", "duration": "20 us"}]}}
# a dead consumer is seen when its reply is overdue: 500 ms, not the base's 2 s, before each verdict
LIVE_FAULT = {"nodes[2].bridge.fault": {"kind": "die", "round": 50}, "nodes[2].bridge.timeout": "500 ms"}
QB = "qblox.sequencers"
LISTEN_PROGRAM = listening_program(400, 596)  # waits for each reply, plays on its answer bit
LISTEN = {"qblox.sequencers[0].program": LISTEN_PROGRAM,
          "qblox.sequencers[1].program": LISTEN_PROGRAM.replace("300", "280")}
FITTED = {"decode.cost.how": "fitted", "decode.cost.file": "DECCOST1"}  # a fitted lookup cost (the runner writes it)
WINDOW = {"decode.code": "surface", "decode.rounds": 6, "decode.p": 0.01, "decode.shots": 100,
          "decode.decoder": "matching", "decode.per": "window", "decode.window": {"rounds": 6, "commit": 2}}
SLOW = {"traffic": {"mode": "open_loop", "period": "1 us"}, "decode.cost.fixed": "1500 ns"}
FB = {"decode.circuit": "USER_STIM", "decode.code": DELETE, "decode.distance": DELETE, "decode.p": DELETE,
      "decode.per": "round", "decode.decoder": "matching", "decode.shots": 100,
      "traffic": {"mode": "open_loop", "period": "1 us"},
      "decode.feedback": {"slack": "200 ns", "idle": {"model": "t1t2", "t1": "20 us", "t2": "20 us"}}}
SHARE = {"decode.placements[0].device": DELETE, "decode.placements[0].devices": ["epyc7282", "epyc7282"]}
ORDER = {"traffic": {"mode": "open_loop", "period": "300 ns"}, "decode.decoder": "matching",
         "decode.placements[0].workers": 2}


def traffic_cases(base: str, t: str, open_pre: dict, closed_pre: dict) -> dict[str, list[Case]]:
    """The traffic block's keys under ``t`` (``traffic``, ``flows[0].traffic``): ``open_pre`` makes
    it open loop with a period, ``closed_pre`` closed loop."""
    gp = {f"{t}.gaps": {"distribution": "uniform", "min": "1 us", "max": "3 us"}}
    # a round waits for the previous correction, then 1 us: a ~2.2 us round trip + 1 us against a 3 us period
    wp = {f"{t}.program": {"waits": {"for_round": -1, "then": "1 us"}}}
    return {
        "program.waits.for_round": [C(base, {f"{t}.program.waits.for_round": -2}, {**open_pre, **wp}),
                                    C(base, {f"{t}.program.waits.for_round": 0}, {**open_pre, **wp},
                                      refused=f"{t}.program.waits.for_round")],
        "program.waits.then": [C(base, {f"{t}.program.waits.then": "3 us"}, {**open_pre, **wp}),
                               C(base, {f"{t}.program.waits.then": "1001 ns"}, {**open_pre, **wp},  # not 4 ns cycles
                                 refused=f"{t}.program.waits.then"),
                               C(base, wp, closed_pre, refused=f"{t}.program")],  # closed loop waits already
        "mode": [C(base, {f"{t}.mode": "open_loop", f"{t}.period": "3 us"}, closed_pre)],
        "period": [C(base, {f"{t}.period": "4 us"}, open_pre),
                   C(base, {f"{t}.period": "3 us"}, closed_pre, refused=f"{t}.period")],  # closed loop: no period
        "clock": [C(base, {f"{t}.clock": "independent"}, {**open_pre, f"{t}.clock": "card"})],
        # closed loop: the next request leaves on the generator's next edge after the reply
        "clock_period": [C(base, {f"{t}.clock_period": "5 ns"}, closed_pre),
                         C(base, {f"{t}.clock_period": "7 ns"}, open_pre, refused=f"{t}.period")],
        "ppm": [C(base, {f"{t}.ppm": 200.0}, {**open_pre, f"{t}.clock": "independent"}),
                C(base, {f"{t}.ppm": 200.0}, {**open_pre, f"{t}.clock": "card"}, refused=f"{t}.ppm")],
        "gap": [C(base, {f"{t}.gap": "500 ns"}, closed_pre),
                C(base, {f"{t}.gap": "500 ns"}, open_pre, refused=f"{t}.gap")],  # open loop: every period
        "in_flight": [C(base, {f"{t}.in_flight": 3}, closed_pre),
                      C(base, {f"{t}.in_flight": 3}, open_pre, refused=f"{t}.in_flight")],
        "gaps.distribution": [C(base, {f"{t}.gaps": {"distribution": "exponential", "mean": "2 us"}},
                                {**closed_pre, **gp})],
        "gaps.value": [C(base, {f"{t}.gaps.value": "2 us"},
                         {**closed_pre, f"{t}.gaps": {"distribution": "fixed", "value": "1 us"}})],
        "gaps.min": [C(base, {f"{t}.gaps.min": "2 us"}, {**closed_pre, **gp}),
                     C(base, {f"{t}.gaps.min": "4 us"}, {**closed_pre, **gp}, refused=f"{t}.gaps.max")],
        "gaps.max": [C(base, {f"{t}.gaps.max": "5 us"}, {**closed_pre, **gp})],
        "gaps.mean": [C(base, {f"{t}.gaps.mean": "4 us"},
                        {**closed_pre, f"{t}.gaps": {"distribution": "exponential", "mean": "2 us"}})],
        "gaps.file": [C(base, {f"{t}.gaps.file": "GAPS2"},
                        {**closed_pre, f"{t}.gaps": {"distribution": "file", "file": "GAPS1"}}),
                      C(base, {f"{t}.gaps.file": "no_such_gaps.txt"},
                        {**closed_pre, f"{t}.gaps": {"distribution": "file", "file": "GAPS1"}},
                        refused=f"{t}.gaps.file")],
    }


def qblox_cases(base: str) -> dict[str, list[Case]]:
    fb = "qblox.feedback"
    return {
        # programs that wait for each reply and branch on its answer bit (LISTEN): the feedback block
        # a loop's echo carries 512 bits, so bit 9 is a zero bit (no answer is 1) and bit 512 is past the reply;
        # a decode study's reply is its one-observable correction: bit 9 would read 0 on every request
        "feedback.answer_bit": ([C(base, {f"{fb}.answer_bit": 9}, LISTEN),
                                 C(base, {f"{fb}.answer_bit": 512}, LISTEN, refused=f"{fb}.answer_bit")]
                                if base == "qblox" else
                                [C(base, {f"{fb}.answer_bit": 9}, LISTEN, refused=f"{fb}.answer_bit")]),
        "feedback.answer_address": [C(base, {f"{fb}.answer_address": 3}, LISTEN),  # set_cond looks at address 1
                                    C(base, {f"{fb}.answer_address": 2}, LISTEN, refused=f"{fb}.ready_address")],
        "feedback.ready_address": [C(base, {f"{fb}.ready_address": 3}, LISTEN, refused="qblox.sequencers")],
        "feedback.latency_ns": [C(base, {f"{fb}.latency_ns": 600}, LISTEN)],
        "feedback.spacing_ns": [C(base, {f"{fb}.spacing_ns": 900}, LISTEN)],
        "feedback.grid_ns": [C(base, {f"{fb}.grid_ns": 500}, LISTEN)],
        "sequencers[].program": [C(base, {f"{QB}[0].program": "PROGRAM_6US", f"{QB}[1].program": "PROGRAM_6US"})],
        # 8 acquisitions a round: two loop iterations of the program make one round (10 us)
        "sequencers[].measurements_per_round": [C(base, {f"{QB}[0].measurements_per_round": 8,
                                                         f"{QB}[1].measurements_per_round": 8}),
                                                C(base, {f"{QB}[0].measurements_per_round": 3},
                                                  refused="qblox.sequencers")],  # not whole rounds
        "result_latency_ns": [C(base, {"qblox.result_latency_ns": 900.0})],
        "trigger_network_ns": [C(base, {"qblox.trigger_network_ns": 900.0})],
        # loop: the frames carry the acquisitions (more bits of each frame); decode: refused, its requests
        # carry one bit per detector
        "bits_per_measurement": [C(base, {"qblox.bits_per_measurement": 2},
                                   refused="qblox.bits_per_measurement" if base == "decode_qblox" else None)],
        "clock": [C(base, {"qblox.clock": "card"}, {"qblox.ppm": 0.0, "qblox.drift_ppb_per_s": 0.0}),
                  C(base, {"qblox.clock": "card"}, refused="qblox.clock")],  # ppm and drift are set
        "ppm": [C(base, {"qblox.ppm": 300.0})],
        "drift_ppb_per_s": [C(base, {"qblox.drift_ppb_per_s": 5e6})],
    }


def bridge_cases(base: str, p: str) -> dict[str, list[Case]]:
    """A live node's bridge keys under ``p`` (``nodes[2].bridge``)."""
    return {
        "backend": [C("udp", {f"{p}.backend": "shm", f"{p}.port": DELETE})],
        "timeout": [C(base, {f"{p}.timeout": "1 ns"})],
        "cpu": [C(base, {f"{p}.cpu": 0}, {f"{p}.cpu": 1})],
        "producer_cpu": [C(base, {f"{p}.producer_cpu": 1}, {f"{p}.producer_cpu": 0})],
        "host": [C("udp", {f"{p}.host": "no.such.host.invalid"}, refused=f"{p}.host"),
                 C(base, {f"{p}.host": "10.0.0.1"}, refused=f"{p}.host")],  # shm: no host to reach
        "port": [C("udp", {f"{p}.port": DELETE}, refused=f"{p}.port"),
                 C(base, {f"{p}.port": 47000}, refused=f"{p}.port")],  # shm: no port
        # the GPU ordinal: cuda only (test_bridge_device_reaches_the_gpu_check shows it is the one asked for)
        "device": [C(base, {f"{p}.device": 1}, refused=f"{p}.device")],
        "fault.kind": [C(base, {f"{p}.fault.kind": "wrong"}, LIVE_FAULT)],
        "fault.round": [C(base, {f"{p}.fault.round": 120}, LIVE_FAULT)],
        # the paced C loop (twin.engine.paced) or round by round; its late threshold and spin limit
        "pace": [C(base, {f"{p}.pace": False})],
        "late": [C(base, {f"{p}.late": "0 ns"}),
                 C(base, {f"{p}.late": "2 us"}, {f"{p}.pace": False}, refused=f"{p}.late")],
        "spin": [C(base, {f"{p}.spin": "0 ns"}),
                 C(base, {f"{p}.spin": "2 us"}, {f"{p}.pace": False}, refused=f"{p}.spin")],
    }


def zhinst_cases(p: str) -> list[Case]:
    """A QCCS node's ``params:`` keys (node kind zhinst_qccs, twin/devices/zhinst.py), under ``p``."""
    internal = {f"{p}.feedback": "internal", f"{p}.generator": "SHFQC"}
    return [C("zhinst", {f"{p}.samples": 2048}), C("zhinst", {f"{p}.samples": 10}, refused=f"{p}.samples"),
            C("zhinst", {f"{p}.period_ns": 6000}), C("zhinst", {f"{p}.period_ns": 5050}, refused=f"{p}.period_ns"),
            C("zhinst", {f"{p}.generator": "HDAWG"}),
            C("zhinst", {f"{p}.generator": "SHFQC"}, refused=f"{p}.generator"),
            C("zhinst", {f"{p}.feedback": "register_forward"}), C("zhinst", internal),
            C("zhinst", {f"{p}.trigger_source": "internal"}, internal),
            C("zhinst", {f"{p}.trigger_source": "internal"}, refused=f"{p}.trigger_source"),
            C("zhinst", {f"{p}.automatic_triggerdelays": False}),
            C("zhinst", {f"{p}.result_latency_ns": 500.0}), C("zhinst", {f"{p}.reply_latency_ns": 500.0}),
            C("zhinst", {f"{p}.feedback_delay_cycles": 500}),
            C("zhinst", {f"{p}.feedback_delay_cycles": 2000}, refused=f"{p}.feedback_delay_cycles"),
            C("zhinst", {f"{p}.clock": "card"}, {f"{p}.ppm": 0.0}),
            C("zhinst", {f"{p}.clock": "card"}, refused=f"{p}.ppm"),
            C("zhinst", {f"{p}.ppm": 50.0}), C("zhinst", {f"{p}.nope": 1}, refused=f"{p}.nope"),
            C("zhinst", {"nodes[2].params": {"samples": 100}}, refused="nodes[2].params")]


def _prefixed(prefix: str, cases: dict[str, list[Case]]) -> dict[str, list[Case]]:
    return {f"{prefix}{k}": v for k, v in cases.items()}


RUN: dict[str, list[Case]] = {
    "calibration": [C("loop", {"calibration": "CAL_SLOW"}),
                    C("loop", {"calibration": "no_such_params.yaml"}, refused="calibration")],
    "measured": [C("loop", {"measured": str(ROOT / "calibrations/measured/card_path_64b.yaml")})],
    "seed": [C("loop", {"seed": 2})],
    "rounds": [C("loop", {"rounds": 150})],
    "frame_bytes": [C("loop", {"frame_bytes": 256})],
    "encoding": [C("loop", {"encoding": "classic"})],
    # sum32 answers 4 bytes: a shorter reply (echo and invert move the same bytes in the same time; the
    # card checks every reply against the function either way)
    "function": [C("loop", {"function": "sum32"}), C("loop", {"function": "nope"}, refused="function")],
    "slots": [C("loop", {"slots": 2}, {**OPEN, "traffic.period": "1 us"})],
    **_prefixed("traffic.", traffic_cases("loop", "traffic", OPEN, {})),
    "faults.corrupt_piece.rounds": [C("loop", {"faults.corrupt_piece.rounds": [40]},
                                      {"faults": {"corrupt_piece": {"rounds": [20]}}})],
    "faults.corrupt_piece.path": [C("loop", {"faults.corrupt_piece.path": "reply"},
                                    {"faults": {"corrupt_piece": {"rounds": [20]}}})],
    "faults.drop_frame.rounds": [C("loop", {"faults.drop_frame.rounds": [40]}, FAULT),
                                 C("loop", {"faults.drop_frame.rounds": [40]}, {**FAULT, **OPEN},
                                   refused="traffic.mode")],
    "faults.stall[].at": [C("loop", {"faults.stall[0].at": "200 us"}, STALL)],
    "faults.stall[].duration": [C("loop", {"faults.stall[0].duration": "60 us"}, STALL)],
    "faults.host_freeze[].at": [C("loop", {"faults.host_freeze[0].at": "200 us"}, FREEZE)],
    "faults.host_freeze[].duration": [C("loop", {"faults.host_freeze[0].duration": "60 us"}, FREEZE)],
    "faults.timeout": [C("loop", {"faults.timeout": "20 us"}, FAULT)],
    "deadline": [C("loop", {"deadline": "2200 ns"}, {"deadline": "10 us"})],
    "nodes[].kind": [C("loop", {"nodes[2].kind": "link_card", "nodes[2].device": DELETE}, refused="nodes[2].kind"),
                     C("roce", {"nodes[2].kind": "switch"}, refused="links[2].kind")],
    "nodes[].device": [C("loop", {"nodes[2].device": "epyc9755"}),
                       C("loop", {"nodes[2].device": "nope"}, refused="nodes[2].device")],
    "nodes[].model": [C("loop", {"nodes[2].model": "rtl"}, {"nodes[2].device": "v80"}),
                      C("loop", {"nodes[2].model": "rtl"}, refused="nodes[2].model")],  # an EPYC core
    "nodes[].routes": [C("mesh", {"nodes[2].routes": {"echo": "gpu", "invert": "x"}}),
                       C("loop", {"nodes[1].routes": {"echo": "epyc7282"}}, refused="nodes[1].routes")],
    "nodes[].rtl.top": [C("rtl", {"nodes[2].rtl.top": "user_inv"}, refused="nodes[2].rtl.top")],
    "nodes[].rtl.sources": [C("rtl", {"nodes[2].rtl.sources": ["no_such.v"]}, refused="nodes[2].rtl.sources")],
    **_prefixed("nodes[].bridge.", bridge_cases("live", "nodes[2].bridge")),
    "nodes[].host_runtime.file": [C("loop", {"nodes[2].host_runtime": {"file": HOST_RT, "wake": "block"}}),
                                  C("loop", {"nodes[2].host_runtime": {"file": "no_such.yaml", "wake": "block"}},
                                    refused="nodes[2].host_runtime.file")],
    "nodes[].host_runtime.wake": [C("loop", {"nodes[2].host_runtime.wake": "spin"},
                                    {"nodes[2].host_runtime": {"file": HOST_RT, "wake": "block"}}),
                                  C("loop", {"nodes[1].host_runtime": {"file": HOST_RT, "wake": "block"}},
                                    refused="nodes[1].host_runtime")],
    "links[].from": [C("loop", {"links[1].from": "nowhere"}, refused="links[1].from")],
    "links[].to": [C("loop", {"links[1].to": "nowhere"}, refused="links[1].to")],
    "links[].kind": [C("loop", {"links[0].kind": "aurora"}),
                     C("loop", {"links[1].kind": "ethernet"}, refused="links[1].kind")],
    "flows[].from": [C("mesh", {"flows[0].from": "b"}),
                     C("mesh", {"flows[0].from": "x"}, refused="flows[0].from")],
    "flows[].function": [C("mesh", {"flows[1].function": "echo"})],
    "flows[].via": [C("mesh", {"flows[0].via": "x"}, refused="flows[0].via")],
    "flows[].rounds": [C("mesh", {"flows[0].rounds": 100})],
    **_prefixed("flows[].traffic.", traffic_cases("mesh", F0, {}, MESH_CLOSED)),
    **_prefixed("qblox.", qblox_cases("qblox")),
    "nodes[].params": zhinst_cases("nodes[0].params"),
}

DEC: dict[str, list[Case]] = {
    "calibration": [C("decode", {"calibration": "CAL_SLOW"})],
    "hosting": [C("decode", {"hosting": "HOSTING_SLOW"}, {"decode.placements[0].mode": "worker"})],
    "seed": [C("decode", {"seed": 2})],
    "slots": [C("decode", {"slots": 1}, {"traffic": {"mode": "open_loop", "period": "1 us"}})],
    "encoding": [C("decode", {"encoding": "per_piece"})],
    "control": [C("decode", {"control": "aurora"}),
                C("decode_qblox", {"control": "on_card"}, refused="control")],
    **_prefixed("traffic.", traffic_cases("decode", "traffic", OPEN, {})),
    **_prefixed("qblox.", qblox_cases("decode_qblox")),
    "deadline": [C("decode", {"deadline": "2200 ns"}, {"deadline": "10 us"})],
    "decode.code": [C("decode", {"decode.code": "surface"})],
    # a stim file instead of a named code (the bundled one: a repetition code with feedback resets)
    "decode.circuit": [C("decode", {"decode.circuit": "USER_STIM", "decode.code": DELETE, "decode.distance": DELETE,
                                    "decode.p": DELETE}),
                       C("decode", {"decode.circuit": "NO_DETECTORS_STIM", "decode.code": DELETE,
                                    "decode.distance": DELETE, "decode.p": DELETE}, refused="decode.circuit"),
                       C("decode", {"decode.circuit": "USER_STIM"}, refused="decode.code")],  # both given
    "decode.distance": [C("decode", {"decode.distance": 5})],
    "decode.rounds": [C("decode", {"decode.rounds": 2})],
    "decode.p": [C("decode", {"decode.p": 0.05})],
    "decode.noise": [C("decode", {"decode.noise": "code_capacity"}),
                     C("decode", {"decode.noise": "phenomenological"}, refused="decode.noise")],  # BB codes only
    "decode.shots": [C("decode", {"decode.shots": 200})],
    "decode.per": [C("decode", {"decode.per": "round"}, {"decode.rounds": 2})],
    "decode.frame_bytes": [C("decode", {"decode.frame_bytes": 48})],
    "decode.decoder": [C("decode", {"decode.decoder": "matching"}),
                       C("decode", {"decode.decoder": "bposd"}, {"decode.cost": {"fixed": "300 ns"}}),
                       C("decode", {"decode.decoder": "nosuch"}, refused="decode.decoder"),
                       C("decode", {"decode.decoder": "lookup"}, WINDOW, refused="decode.decoder")],  # windows
    "decode.function": [C("decode", {"decode.function": "examples.rep3_rule:no_such"}, refused="decode.function"),
                        C("decode", {"decode.function": "examples.rep3_rule:decode"}, refused="decode.function")],
    "decode.cost.how": [C("decode", {"decode.cost.how": "host_timed"}),
                        C("decode", {"decode.cost.how": "model"}),  # the table, against the measured default
                        C("decode", {"decode.cost.how": "fitted", "decode.cost.file": "DECCOST1"})],
    "decode.cost.scale": [C("decode", {"decode.cost.scale": 3.0}, {"decode.cost.how": "host_timed"}),
                          C("decode", {"decode.cost.scale": 3.0}, FITTED),
                          C("decode", {"decode.cost.scale": 3.0}),  # how: measured (the default)
                          C("decode", {"decode.cost.scale": 3.0}, {"decode.cost.how": "model"},
                            refused="decode.cost.scale")],
    "decode.cost.fixed": [C("decode", {"decode.cost.fixed": "700 ns"}),
                          C("decode", {"decode.cost.fixed": "700 ns"}, {"decode.cost.how": "host_timed"},
                            refused="decode.cost.fixed"),
                          C("decode", {"decode.cost.fixed": "700 ns"}, FITTED, refused="decode.cost.fixed")],
    "decode.cost.file": [C("decode", {"decode.cost.file": "DECCOST2"}, FITTED),
                         C("decode", {"decode.cost.file": "DECCOST1"}, refused="decode.cost.file"),  # not per call
                         C("decode", {"decode.cost.file": "DECCOST1"}, {"decode.cost.how": "model"},
                           refused="decode.cost.file"),
                         C("decode", {"decode.cost.file": "no_such_cost.yaml"}, FITTED, refused="decode.cost.file"),
                         C("decode", {"decode.cost.file": DELETE}, FITTED, refused="decode.cost.file")],
    # a circuit's feedback timed by the loop (issue 14): its stalls become idle noise and logical error
    "decode.feedback.slack": [C("decode", {"decode.feedback.slack": "600 ns"}, FB),
                              C("decode", {"decode.feedback.slack": "2 us"}, FB, refused="decode.feedback.slack")],
    "decode.feedback.idle.model": [C("decode", {"decode.feedback.idle": {"model": "depolarizing", "rate_per_us": 0.05}},
                                     FB)],
    "decode.feedback.idle.t1": [C("decode", {"decode.feedback.idle.t1": "50 us"}, FB),
                                C("decode", {"decode.feedback.idle.t1": DELETE}, FB,
                                  refused="decode.feedback.idle.t1")],
    # T2 sets p_z: a Z-basis memory's data do not feel it (a Z error flips no Z measurement)
    "decode.feedback.idle.t2": [C("decode", {"decode.feedback.idle.t2": "50 us"}, FB,
                                  refused="decode.feedback.idle.t2")],
    "decode.feedback.idle.rate_per_us": [
        C("decode", {"decode.feedback.idle.rate_per_us": 0.2}, {**FB, "decode.feedback.idle": {
            "model": "depolarizing", "rate_per_us": 0.05}}),
        C("decode", {"decode.feedback.idle.rate_per_us": 0.05}, FB, refused="decode.feedback.idle.rate_per_us")],
    "decode.feedback.qubits": [C("decode", {"decode.feedback.qubits": "all"}, FB)],
    "decode.feedback.inject": [C("decode", {"decode.feedback.inject": ["3 us"]}, FB),
                               C("decode", {"decode.feedback.inject": ["0 ns"]}, FB, refused="decode.feedback.inject")],
    "decode.interval": [C("decode", {"decode.interval": "clopper_pearson"})],
    "decode.confidence": [C("decode", {"decode.confidence": 0.5})],
    # a windowed stream (issue 13): the surface code, six rounds, matching on each window's sub-graph
    "decode.window.rounds": [C("decode", {"decode.window.rounds": 4}, WINDOW),
                             C("decode", {"decode.window.rounds": 1}, WINDOW, refused="decode.window.commit"),
                             C("decode", {"decode.window.rounds": 8}, WINDOW, refused="decode.window.rounds")],
    "decode.window.kind": [C("decode", {"decode.window": {"kind": "parallel", "commit": 2, "buffer": 2}}, WINDOW),
                           C("decode", {"decode.window.kind": "parallel"}, WINDOW, refused="decode.window.rounds")],
    "decode.window.buffer": [C("decode", {"decode.window": {"commit": 2, "buffer": 2}}, WINDOW),
                             C("decode", {"decode.window.buffer": 1}, WINDOW, refused="decode.window.buffer")],
    "decode.window.commit": [C("decode", {"decode.window.commit": 3}, WINDOW),
                             C("decode", {"decode.window": {"rounds": 6, "commit": 2}}, refused="decode.window")],
    # parallel decoders on a stream that one decoder cannot keep up with
    "decode.placements[].workers": [C("decode", {"decode.placements[0].workers": 2}, SLOW),
                                    C("decode", {"decode.placements[0].workers": 2},
                                      {"decode.placements[0].model": "rtl", "decode.placements[0].device": "v80"},
                                      refused="decode.placements[0].workers")],
    # matching's time varies with the detection events: a short request overtakes a long one
    "decode.placements[].order": [C("decode", {"decode.placements[0].order": "as_ready"}, ORDER),
                                  C("decode", {"decode.placements[0].order": "as_ready"},
                                    refused="decode.placements[0].order")],  # one worker
    "decode.placements[].device": [C("decode", {"decode.placements[0].device": "epyc9755"})],
    "decode.placements[].call": [C("decode", {"decode.placements[0].call": "python"}),
                                 C("decode", {"decode.placements[0].call": "python"}, {"decode.cost.fixed": "300 ns"},
                                   refused="decode.placements[0].call")],
    "decode.placements[].devices": [C("decode", SHARE, SLOW),
                                    C("decode", SHARE, refused="decode.placements[0].devices"),  # closed loop
                                    C("decode", {"decode.placements[0].devices": ["epyc7282", "epyc7282"]}, SLOW,
                                      refused="decode.placements[0].devices"),  # beside device
                                    C("decode", {**SHARE, "decode.placements[0].devices": ["epyc7282"]}, SLOW,
                                      refused="decode.placements[0].devices")],  # one device
    "decode.placements[].dispatch": [C("decode", {**SHARE, "decode.placements[0].dispatch": "least_loaded"}, SLOW,
                                       refused="decode.placements[0].dispatch"),
                                     C("decode", {"decode.placements[0].dispatch": "round_robin"}, SLOW,
                                       refused="decode.placements[0].dispatch")],  # one device
    "decode.placements[].mode": [C("decode", {"decode.placements[0].mode": "worker"})],
    "decode.placements[].model": [C("decode", {"decode.placements[0].model": "rtl"},
                                    {"decode.p": 0.001, "decode.placements[0].device": "v80"})],
    # A decode placement's bridge: model live serves only the runtime library's C functions and no
    # decoder has one (test_model_matrix), so every bridge here is refused: with model live naming
    # the model, with any other model naming the bridge block.
    **{f"decode.placements[].bridge.{k}": [
        C("decode", {"decode.placements[0].model": "live", "decode.placements[0].bridge": bridge},
          refused="decode.placements[0].model"),
        C("decode", {"decode.placements[0].bridge": bridge}, refused="decode.placements[0].bridge")]
       for k, bridge in [("backend", {"backend": "shm"}), ("timeout", {"backend": "shm", "timeout": "2 s"}),
                         ("cpu", {"backend": "shm", "cpu": 0}), ("producer_cpu", {"backend": "shm", "producer_cpu": 0}),
                         ("host", {"backend": "udp", "host": "127.0.0.1", "port": 47000}),
                         ("port", {"backend": "udp", "port": 47000}), ("device", {"backend": "cuda", "device": 0}),
                         ("fault", {"backend": "shm", "fault": {"kind": "die", "round": 3}}),
                         ("pace", {"backend": "shm", "pace": True}), ("late", {"backend": "shm", "late": "2 us"}),
                         ("spin", {"backend": "shm", "spin": "2 us"})]},
}
DEC["decode.placements[].bridge.fault.kind"] = DEC.pop("decode.placements[].bridge.fault")
DEC["decode.placements[].bridge.fault.round"] = DEC["decode.placements[].bridge.fault.kind"]

CASES = {"run": RUN, "decode": DEC}

# Keys that are labels or identifiers by design: they name things in the output and nothing else.
EXEMPT = {
    ("run", "name"): "the scenario's name: the default output folder and the results' title",
    ("run", "description"): "free text for the reader",
    ("run", "nodes[].name"): "an identifier: links, routes and flows refer to nodes by it",
    ("run", "qblox.device"): "the cluster's name in the results",
    ("run", "qblox.sequencers[].name"): "an identifier of a sequencer in error messages",
    ("decode", "name"): "the scenario's name: the default output folder and the results' title",
    ("decode", "description"): "free text for the reader",
    ("decode", "qblox.device"): "the cluster's name in the results",
    ("decode", "qblox.sequencers[].name"): "an identifier of a sequencer in error messages",
}


def test_every_schema_key_is_covered():
    walked = {(s, k) for s, model in SCHEMAS.items() for k in schema_keys(model)}
    listed = {(s, k) for s, cases in CASES.items() for k in cases} | set(EXEMPT)
    assert not walked - listed, f"schema keys with no case and no exemption: {sorted(walked - listed)}"
    assert not listed - walked, f"cases or exemptions for keys the schemas do not have: {sorted(listed - walked)}"
    assert not {(s, k) for s, cases in CASES.items() for k in cases} & set(EXEMPT)
    assert len(walked) > 100  # the walk reached the nested models


def test_the_walk_reaches_nested_models():
    keys = set(schema_keys(Scenario)) | {f"decode:{k}" for k in schema_keys(DecodeScenario)}
    for k in ("traffic.gaps.mean", "nodes[].bridge.timeout", "nodes[].bridge.fault.round", "links[].from",
              "flows[].traffic.in_flight", "qblox.sequencers[].program", "faults.stall[].at",
              "decode:decode.cost.scale", "decode:decode.placements[].mode"):
        assert k in keys, k


# -- bases -----------------------------------------------------------------------------------------
PROGRAM = """wait_sync 4
move 100,R0
round:  upd_param 4
wait 3196
acquire 0,0,300
acquire 1,0,300
acquire 2,0,300
acquire 3,0,300
wait 600
loop R0,@round
stop
"""
QBLOX = {"device": "Qblox Cluster", "result_latency_ns": 150.0, "trigger_network_ns": 250.0, "clock": "independent",
         "ppm": 12.5, "drift_ppb_per_s": 2.0,
         "sequencers": [{"name": "s0", "measurements_per_round": 4, "program": PROGRAM},
                        {"name": "s1", "measurements_per_round": 4, "program": PROGRAM.replace("300", "280")}]}
GEN, CARD = {"name": "gen", "kind": "generator"}, {"name": "u55c", "kind": "link_card"}
ZQ = {"samples": 1000, "period_ns": 5000, "feedback_delay_cycles": 800, "result_latency_ns": 100.0,
      "reply_latency_ns": 100.0, "clock": "independent", "ppm": 5.0}  # a QCCS (twin/devices/zhinst.py)


def _loop(consumer: dict, link0: str = "on_card", **kw) -> dict:
    return {"name": "keys", "calibration": CAL, "seed": 1, "rounds": 200, "frame_bytes": 64, **kw,
            "nodes": [GEN, CARD, consumer],
            "links": [{"from": "gen", "to": "u55c", "kind": link0},
                      {"from": "u55c", "to": consumer["name"], "kind": "pcie"}]}


EPYC = {"name": "epyc7282", "kind": "consumer", "device": "epyc7282"}
BASES = {
    "loop": ("run", _loop(EPYC)),
    "live": ("live", _loop({"name": "c", "kind": "consumer", "device": "epyc7282", "model": "live",
                            "bridge": {"backend": "shm", "timeout": "2 s"}}, encoding="classic")),
    "udp": ("live", _loop({"name": "c", "kind": "consumer", "device": "epyc7282", "model": "live",
                           "bridge": {"backend": "udp", "timeout": "2 s", "port": "UDP_PORT"}}, encoding="classic")),
    "rtl": ("run", _loop({"name": "v80", "kind": "consumer", "device": "v80", "model": "rtl",
                          "rtl": {"top": "user_invert", "sources": [str(ROOT / "tests/rtl_user/user_invert.v")]}},
                         function="invert", rounds=50)),
    "qblox": ("run", {**_loop(EPYC, "aurora"), "qblox": QBLOX}),
    "zhinst": ("run", {**_loop(EPYC, "aurora"), "nodes": [{"name": "gen", "kind": "zhinst_qccs", "params": ZQ}, CARD,
                                                          EPYC]}),
    "roce": ("run", {"name": "keys", "calibration": str(ROOT / "calibrations/fitted/backline_roce.yaml"), "seed": 1,
                     "rounds": 200, "frame_bytes": 16,
                     "nodes": [{"name": "hs", "kind": "generator"}, {"name": "vpk120", "kind": "link_card"},
                               {"name": "nic", "kind": "nic"},
                               {"name": "threadripper_core", "kind": "consumer", "device": "threadripper_core"}],
                     "links": [{"from": "hs", "to": "vpk120", "kind": "on_card"},
                               {"from": "vpk120", "to": "nic", "kind": "ethernet"},
                               {"from": "nic", "to": "threadripper_core", "kind": "pcie"}]}),
    "mesh": ("run", {"name": "keys", "calibration": CAL, "seed": 1, "rounds": 150, "frame_bytes": 64,
                     "nodes": [{"name": "a", "kind": "generator"}, {"name": "b", "kind": "generator"},
                               {"name": "card", "kind": "link_card", "routes": {"echo": "x", "invert": "gpu"}},
                               {"name": "x", "kind": "consumer", "device": "epyc7282"},
                               {"name": "gpu", "kind": "consumer", "device": "mi210"}],
                     "links": [{"from": "a", "to": "card", "kind": "aurora"},
                               {"from": "b", "to": "card", "kind": "aurora"},
                               {"from": "card", "to": "x", "kind": "pcie"},
                               {"from": "card", "to": "gpu", "kind": "pcie"}],
                     "flows": [{"from": g, "function": fn, "traffic": {"mode": "open_loop", "period": "3 us"}}
                               for g, fn in (("a", "echo"), ("b", "invert"))]}),
    "decode": ("decode", {"name": "keys", "calibration": CAL, "hosting": str(ROOT / "calibrations/hosting.yaml"),
                          "seed": 1, "decode": {"code": "rep", "distance": 3, "p": 0.03, "shots": 300,
                                                "placements": [{"device": "epyc7282", "mode": "inline"}]}}),
    "decode_qblox": ("decode", {"name": "keys", "calibration": CAL, "hosting": str(ROOT / "calibrations/hosting.yaml"),
                                "seed": 1, "control": "aurora", "qblox": QBLOX,
                                "decode": {"code": "rep", "distance": 3, "p": 0.03, "shots": 300,
                                           "placements": [{"device": "epyc7282", "mode": "inline"}]}}),
}


# -- running ---------------------------------------------------------------------------------------
def _parts(path: str) -> list[str | int]:
    out: list[str | int] = []
    for part in path.split("."):
        m = re.fullmatch(r"([^\[]+)((?:\[\d+\])*)", part)
        out.append(m.group(1))
        out += [int(i) for i in re.findall(r"\[(\d+)\]", m.group(2))]
    return out


def edit(doc: dict, changes: dict) -> dict:
    """``doc`` with every ``path: value`` of ``changes`` set (``DELETE``: removed)."""
    doc = copy.deepcopy(doc)
    for path, value in changes.items():
        *parents, last = _parts(path)
        cur = doc
        for p in parents:
            if isinstance(cur, dict) and p not in cur:
                cur[p] = {}
            cur = cur[p]
        if value is DELETE:
            cur.pop(last, None)
        else:
            cur[last] = copy.deepcopy(value)
    return doc


ECHO_TOP = {"scenario", "seed", "rounds", "frame_bytes", "traffic", "measured", "calibration", "workload", "decoder",
            "hosting", "interval", "deadline_ns"}
ECHO_ITEM = {"function", "model", "node", "name", "encoding", "rounds", "device", "kind", "host", "engine", "mode",
             "cost", "throughput", "scenario_file", "traffic", "deadline_ns", "from", "via", "to", "route", "flow",
             "requests", "shots"}


def strip_echo(doc: dict) -> dict:
    """results.json less what repeats the scenario: the keys of :data:`ECHO_TOP` and, in each
    consumer, flow or placement, those of :data:`ECHO_ITEM`. What is left was computed by the run."""
    out = {k: v for k, v in doc.items() if k not in ECHO_TOP and not k.startswith("_")}
    for k in ("consumers", "flows", "placements"):
        if isinstance(out.get(k), list):
            out[k] = [{a: b for a, b in item.items() if a not in ECHO_ITEM} for item in out[k]]
    return out


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(memoryview(a.tobytes()))
    return h.hexdigest()


class Runner:
    """Writes a scenario document, runs it as its base kind prescribes and returns its outcome (a
    mapping); raises ConfigError when it is refused. Outcomes are cached by the document."""

    def __init__(self, folder: Path, subst: dict):
        self.folder, self.subst, self.cache, self.n = folder, subst, {}, 0

    def _write(self, doc: dict, suffix: str) -> Path:
        text = yaml.safe_dump(doc, sort_keys=True)
        for k, v in self.subst.items():
            text = text.replace(k, v)
        self.n += 1
        d = self.folder / f"s{self.n}"
        d.mkdir()
        p = d / f"keys.{suffix}.yaml"
        p.write_text(text)
        return p

    def outcome(self, kind: str, doc: dict) -> dict:
        key = (kind, yaml.safe_dump(doc, sort_keys=True))
        if key not in self.cache:
            try:
                self.cache[key] = getattr(self, f"_{kind}")(self._write(doc, kind))
            except ConfigError as e:
                self.cache[key] = e
        got = self.cache[key]
        if isinstance(got, ConfigError):
            raise got
        return got

    def _cli(self, p: Path) -> tuple[int, str, Path]:
        from twin.commands import build_parser
        out = p.parent / "out"
        args = build_parser().parse_args(["run", str(p), "--out", str(out), "--quiet", "--no-plot",
                                          "--format", "csv"])
        err = io.StringIO()
        import contextlib
        with contextlib.redirect_stderr(err):
            rc = args.handler(args, Console(file=io.StringIO(), width=200))
        return rc, err.getvalue(), out

    def _run(self, p: Path) -> dict:
        rc, err, out = self._cli(p)
        assert rc == 0, err
        csv = (out / "rounds.csv").read_text().splitlines()
        rounds = [line.split(",", 1)[1] for line in csv[1:]]  # less the node or flow name
        return {"rounds": rounds, "results": strip_echo(json.loads((out / "results.json").read_text()))}

    def _live(self, p: Path) -> dict:
        """A live run's measured times differ from run to run; its outcome is what is deterministic:
        exit code, rounds completed, replies that mismatched, the failure, where the processes ran."""
        rc, err, out = self._cli(p)
        doc = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else None
        err = err.strip().replace(str(out), "OUT")  # the run's folder (a failure's line names it): each run its own
        got = {"rc": rc, "error": re.sub(r"\d+(\.\d+)? ?[mun]?s\b|process \d+", "#", err)}
        if doc:
            s = doc["consumers"][0]
            lv = s["live"]
            got.update(rounds=s["rounds"], mismatches=s["mismatches"], backend=lv["backend"],
                       endpoint=re.sub(r"process \d+", "process #", lv["endpoint"]),
                       failure=(lv["error"] or {}).get("kind") if isinstance(lv["error"], dict) else lv["error"],
                       mismatch_rounds=lv["mismatch_rounds"], engine=s["engine"],
                       pace={k: v for k, v in (lv.get("pace") or {}).items()
                             if k in ("paced", "why", "closed", "late_threshold_ns", "spin_ns")})
        return got

    def _decode(self, p: Path) -> dict:
        from twin.qec.load import load_decode
        from twin.studies.decode import run_decode_study
        study = run_decode_study(load_decode(p))
        doc, runs = study.document, study.runs
        rounds = _digest(*[a for r in runs for a in (r.result.t_in, r.result.t_have, r.result.t_back, r.corrections)])
        return {"rounds": rounds, "results": json.loads(json.dumps(strip_echo(doc), default=float))}


def _lookup_cost(overhead_ns: float, slope_ns: float) -> dict:
    """A decoder-cost calibration file (``decode.cost.how: fitted``) of a lookup decoder: a fit of
    calls of ``overhead_ns + slope_ns * events`` with a spread, as ``twin calibrate decoder`` writes."""
    import numpy as np

    from twin.qec.cost_fit import fit_calls, fit_document, machine
    rng = np.random.default_rng(0)
    ev = rng.integers(0, 4, 2000)
    fit = fit_calls(ev, overhead_ns + slope_ns * ev + rng.exponential(20.0, 2000))
    w = {"label": "rep d=3", "code": "rep", "distance": 3, "rounds": 1, "p": 0.03, "noise": "circuit", "calls": 2000,
         "outliers": fit.outliers["count"], "events": {}, "measured_ns": {}}
    return fit_document(fit, {"description": "test", "decoder": "lookup", "implementation": "synthetic",
                              "entry_point": "none", "machine": machine(), "measured_at": "2026-12-01T00:00:00Z",
                              "command": "test", "seed": 0, "warmup": 0, "stratified": False,
                              "timer_overhead_ns": 0.0, "workloads": [w], "min_group": 20})


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    from hw_bridge.agent import Agent
    d = tmp_path_factory.mktemp("keys")
    cal = yaml.safe_load(Path(CAL).read_text())  # the same parameter set with slower PCIe hosts
    for h in cal["hosts"].values():
        h["host_memory"]["latency_ns"] += 300
    (d / "cal_slow.yaml").write_text(yaml.safe_dump(cal))
    hosting = yaml.safe_load((ROOT / "calibrations/hosting.yaml").read_text())
    hosting["values"] = {k: v * 2 for k, v in hosting["values"].items()}
    (d / "hosting_slow.yaml").write_text(yaml.safe_dump(hosting))
    (d / "gaps1.txt").write_text("1 us\n2 us\n")
    (d / "gaps2.txt").write_text("3 us\n500 ns\n")
    (d / "no_detectors.stim").write_text("H 0\nM 0\n")
    for i, (overhead, slope) in enumerate(((100.0, 10.0), (300.0, 40.0)), 1):
        (d / f"deccost{i}.yaml").write_text(yaml.safe_dump(_lookup_cost(overhead, slope)))
    agent = Agent(["echo"], "classic", 1024)
    import threading
    t = threading.Thread(target=agent.serve, daemon=True)
    t.start()
    program = yaml.safe_dump(PROGRAM.replace("wait 3196", "wait 4196")).strip()
    yield Runner(d, {"CAL_SLOW": str(d / "cal_slow.yaml"), "HOSTING_SLOW": str(d / "hosting_slow.yaml"),
                     "GAPS1": str(d / "gaps1.txt"), "GAPS2": str(d / "gaps2.txt"),
                     "UDP_PORT": str(agent.address[1]), "PROGRAM_6US": program,
                     "NO_DETECTORS_STIM": str(d / "no_detectors.stim"),
                     "USER_STIM": str(ROOT / "scenarios" / "decode_user_circuit.stim"),
                     "DECCOST1": str(d / "deccost1.yaml"), "DECCOST2": str(d / "deccost2.yaml")})
    agent.stop()
    t.join(5)
    agent.close()


# Accepted and ignored, and not fixable without an engine change: they fail until someone fixes them.
XFAIL: dict = {}  # (schema, key, case index): why a key is still accepted and ignored (none today)


def _cases():
    for schema, cases in CASES.items():
        for key, items in cases.items():
            for i, case in enumerate(items):
                why = XFAIL.get((schema, key, i))
                marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
                yield pytest.param(schema, key, case, id=f"{schema}:{key}:{i}", marks=marks)


@pytest.mark.parametrize("schema,key,case", list(_cases()))
def test_key_changes_the_outcome_or_is_refused(runner, schema, key, case):
    kind, base = BASES[case.base]
    assert (kind == "decode") == (schema == "decode")
    named = {re.sub(r"\[\d+\]", "[]", p) for p in case.alt}
    assert any(n == key or n.startswith(key + ".") or key.startswith(n + ".") for n in named), \
        f"case for {key} changes {sorted(case.alt)}"
    doc = edit(base, case.pre)
    if case.refused:
        with pytest.raises(ConfigError) as e:
            runner.outcome(kind, edit(doc, case.alt))
        assert e.value.key == case.refused or e.value.key.startswith(case.refused + "["), str(e.value)
        assert "\n" not in str(e.value)
        return
    before = runner.outcome(kind, doc)
    after = runner.outcome(kind, edit(doc, case.alt))
    assert after != before, f"{schema}: {key}: {case.alt} changed nothing (accepted and ignored)"


def test_bridge_device_reaches_the_gpu_check(monkeypatch):
    """No GPU here: the cuda backend's ``device`` is shown to be the ordinal the GPU check asks for."""
    from hw_bridge.contract import preflight
    from twin.scenario import Bridge
    asked = []
    monkeypatch.setattr("hw_bridge.cuda.gpu_available", lambda device=0: (asked.append(device) or True, "fake"))
    preflight(Bridge(backend="cuda", device=3).settings())
    assert asked == [3]
