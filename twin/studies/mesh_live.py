"""A live consumer inside a mesh at its flow's pace: one node ``model: live`` (backend shm or cuda)
among simulated ones, its flow driven by the paced C loop (:func:`twin.engine.paced.run_paced`)
instead of round by round through the event model.

Two steps, on one plan. First the whole mesh is simulated with the live node's ``sim`` model in its
place (:func:`twin.engine.event.run_topology`): every flow contends for the shared cable, the card's
bridge and the consumers' threads as always, and the live node's flow gets its request path
(sent -> landed in the consumer's memory, behind the other flows' requests on the shared links) and
its reply path. Then the live flow runs on the live device at those instants mapped to the wall
clock (open loop: up to ``slots`` requests in flight, :class:`hw_bridge.paced.PacedFlow`'s window;
closed loop: paced from each reply), every reply checked in C; its result replaces the simulated
one (:func:`twin.engine.paced._stream_result` for an open loop), the simulated one kept beside it.

The coupling is one way: the live flow's requests see the other flows' contention (it is in their
landing instants), but the other flows see the live node as its sim model, not the live device's
own reply timing on the shared reply links. Where the live device answers within the sim model's
time that changes nothing on the request side and little on the reply side; a slower live device
would, in the real mesh, also delay other flows' replies on a shared downlink, which this does not
show. (A two-way coupling would need the simulated flows to wait, event by event, for the live
device's replies: the round-by-round path, whose Python between rounds is slower than a µs stream.)
"""
from __future__ import annotations

from dataclasses import replace

from twin.engine.topology import Topology


def paced_live_flow(topo: Topology) -> int | None:
    """The index of the mesh flow whose consumer is a live node that the paced loop drives, or None:
    none is live, more than one is (the paced loop drives one device at a time; their flows would not
    share a wall clock), or the live flow is one :func:`twin.engine.paced.paced_refusal` refuses
    (then it runs round by round). Raises ValueError when ``bridge.pace: true`` asks for the paced
    loop where it cannot run."""
    from twin.engine.paced import paced_refusal
    live = [i for i, f in enumerate(topo.flows) if f.spec.model == "live"]
    if not live:
        return None
    why = None if len(live) == 1 else f"{len(live)} live flows: the paced loop drives one live device at a time"
    if why is None:
        why = paced_refusal(topo.flows[live[0]].spec)
    if why is not None:
        for i in live:
            if getattr(topo.flows[i].spec.bridge, "pace", None):
                raise ValueError(f"flow {i} ({topo.flows[i].consumer}): bridge.pace: true: {why}")
        return None
    return live[0]


def simulated_topology(topo: Topology, k: int) -> Topology:
    """``topo`` with flow ``k``'s consumer its ``sim`` model (no bridge)."""
    flows = tuple(replace(f, spec=replace(f.spec, model="sim", bridge=None)) if i == k else f
                  for i, f in enumerate(topo.flows))
    return replace(topo, flows=flows)


def run_live_flow(topo: Topology, k: int, sim_results: list, progress=None):
    """Flow ``k`` of ``topo`` on its live device at the pace of its simulated run ``sim_results[k]``:
    the paced result (its ``stats["live"]["simulated"]``: the simulated flow's round trip and loop
    percentiles over the same rounds). Raises as :func:`twin.engine.paced.run_paced` (a live failure
    or a stop, ``partial`` the rounds so far)."""
    from hw_bridge.paced import STAMPS
    from twin.engine.paced import run_paced
    spec = topo.flows[k].spec
    full = sim_results[k]
    sim = replace(full, stats={key: v for key, v in full.stats.items() if key not in ("shared", "events", "replies")})
    open_loop = spec.traffic.mode != "closed_loop"
    try:
        res = run_paced(spec, progress, sim=sim, stream=open_loop, window=min(spec.slots, STAMPS) if open_loop else 1)
    except BaseException as e:
        part = getattr(e, "partial", None)
        if part is not None:
            _beside(part, full)
        raise
    _beside(res, full)
    return res


def _beside(res, sim) -> None:
    """The simulated flow's round trip and loop percentiles over the live flow's rounds, in its live record."""
    from twin.stats import summary_ns
    m = len(res.t_in)
    head = sim.head(m)
    res.stats["live"]["simulated"] = {"model": "sim", "rtt": summary_ns(head.rtt_ps) if m else None,
                                      "loop": summary_ns(head.loop_ps) if m else None}
    res.stats["shared"] = sim.stats.get("shared")
    res.stats["events"] = sim.stats.get("events", 0)
