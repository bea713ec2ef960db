"""One stream over several consumers: the stream's requests dispatched round robin over K flows.

A control system (one generator node: one oscillator) sends one open-loop stream through one link
card (one bridge; one Aurora cable when it sits across one) to K consumers: request ``i`` (0-based,
stream order) goes to consumer ``i mod K``, as a fixed-latency FPGA dispatcher does. Each consumer
has its own queue pair, PCIe path and poll grid. Flow ``k`` is a :class:`Share` of the stream: it
sends the stream's requests ``k, k + K, ...`` at exactly the instants the whole stream sends them
(the stream's period, or its gaps drawn once from the first flow's stream and walked by every
flow), so the union of the flows' send instants is the stream's. It runs on the one engine
(:func:`twin.engine.event.run_topology`); :func:`merge` puts the K results back in stream order.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from twin.devices.generator import Share, TrafficParams
from twin.engine.hops import Hops
from twin.engine.spec import LoopResult, LoopSpec
from twin.engine.topology import Flow, FlowWorkload, Topology


def flow_names(devices: list[str]) -> list[str]:
    """The flows' (and consumer nodes') names for ``devices`` (consumers of a parameter set, in
    dispatch order): the device's name at its first occurrence, ``name#k`` (k its position) at a
    later one, e.g. ``[mi210, mi210] -> [mi210, mi210#1]``."""
    return [d if d not in devices[:k] else f"{d}#{k}" for k, d in enumerate(devices)]


def share_traffic(traffic: TrafficParams, count: int) -> list[TrafficParams]:
    """The ``count`` flows' traffic of the open-loop stream ``traffic`` (``rounds``: the stream's
    requests): flow ``k`` sends requests ``k, k + count, ...``. Raises ValueError for closed-loop
    traffic (each reply sends the next request: there is no stream to dispatch) or fewer requests
    than flows."""
    if traffic.mode != "open_loop":
        raise ValueError("a stream shared over several consumers is open-loop traffic (a QEC cycle); closed loop "
                         "sends each request on a reply")
    if traffic.rounds < count:
        raise ValueError(f"{traffic.rounds} requests cannot reach {count} consumers")
    return [replace(traffic, rounds=len(range(k, traffic.rounds, count)), share=Share(k, count, traffic.rounds))
            for k in range(count)]


def stream_topology(specs: list[LoopSpec], workloads: list[FlowWorkload]) -> Topology:
    """The topology of one stream over ``specs`` (one per consumer, each with its share's traffic,
    :func:`share_traffic`, named by :func:`flow_names`): one generator node, one card node, consumer
    node ``spec.name`` per flow; every flow walks the first flow's gaps."""
    gaps = specs[0].stream("gaps")
    flows = tuple(Flow(s, "generator", "card", s.name, wl, gaps_stream=gaps) for s, wl in zip(specs, workloads))
    return Topology("+".join(s.name for s in specs), specs[0].seed, flows)


def stream_index(k: int, count: int, seq: int) -> int:
    """The stream's request index (0-based) of flow ``k``'s request ``seq`` (1-based)."""
    return k + (seq - 1) * count


def stream_prefix(results: list[LoopResult]) -> list[LoopResult]:
    """A stopped stream's flows (each one's whole rounds so far) cut to the longest prefix of the
    stream that all of them completed: request ``i`` is flow ``i mod K``'s, so the prefix has
    ``L = min_k(c_k K + k)`` requests for flows of ``c_k`` rounds, and flow ``k`` keeps
    ``ceil((L - k) / K)`` (its kept replies and slot waits too)."""
    K = len(results)
    L = min(len(r.t_in) * K + k for k, r in enumerate(results))
    out = []
    for k, r in enumerate(results):
        m = max(0, -(-(L - k) // K))
        h = r.head(m)
        for key in ("replies", "slot_wait_ps"):
            if key in h.stats:
                h.stats[key] = h.stats[key][:m]
        out.append(h)
    return out


def merge(results: list[LoopResult], name: str) -> tuple[LoopResult, np.ndarray]:
    """The K flows' results as the stream's, in stream order (request ``i`` is flow ``i mod K``'s
    request ``i // K + 1``): a :class:`LoopResult` named ``name`` whose ``stats`` sum the cards'
    mismatches and take the largest card backlog (per-flow stats in ``stats["flows"]``), with the
    ``slot_wait_ps`` and kept ``replies`` merged likewise; and the flow of each request (int64)."""
    K = len(results)
    n = sum(len(r.t_send) for r in results)
    flow = np.arange(n, dtype=np.int64) % K

    def mix(get):
        parts = [np.asarray(get(r)) for r in results]
        out = np.empty(n, parts[0].dtype)
        for k, p in enumerate(parts):
            out[k::K] = p
        return out
    hops = None
    if all(r.hops is not None for r in results):
        fields = [f for f in Hops.__dataclass_fields__ if f not in ("inner", "ready")]
        hops = Hops(*(mix(lambda r, f=f: getattr(r.hops, f)) for f in fields))
        if all(r.hops is not None and r.hops.ready is not None for r in results):
            hops.ready = mix(lambda r: r.hops.ready)
    stats: dict[str, Any] = {"mismatches": sum(int(r.stats.get("mismatches", 0)) for r in results),
                             "backlog_max": max(int(r.stats.get("backlog_max", 0)) for r in results),
                             "events": results[0].stats.get("events"),
                             "flows": [{k: v for k, v in r.stats.items()
                                        if k not in ("replies", "slot_wait_ps", "shared")} for r in results]}
    if all("slot_wait_ps" in r.stats for r in results):
        stats["slot_wait_ps"] = mix(lambda r: r.stats["slot_wait_ps"][:len(r.t_send)])
    if all("replies" in r.stats for r in results):
        stats["replies"] = [None] * n
        for k, r in enumerate(results):
            stats["replies"][k::K] = r.stats["replies"]
    res = LoopResult(name, "event", mix(lambda r: r.t_send), mix(lambda r: r.t_in), mix(lambda r: r.t_have),
                     mix(lambda r: r.t_back), mix(lambda r: r.ok), stats, hops)
    return res, flow
