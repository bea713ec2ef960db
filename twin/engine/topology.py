"""A topology to run: flows over nodes and link directions, fully resolved (integer ps).

A flow is one stream of requests from a generator (a control system) through a link card to a
consumer and back, with its own queue pair (a request queue in the consumer's memory, a reply
queue in the card's). What flows share, they contend for: a link direction (a :class:`Lane`:
serialisation and posted-write order), a card's bridge, a consumer's serving thread. A single
loop (``twin run`` on a loop scenario, ``twin decode``, the RoCE and Qblox paths) is the topology
with one flow; a mesh has several. :func:`twin.engine.event.run_topology` runs any topology.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from twin.engine.spec import LoopSpec


@dataclass(frozen=True)
class FlowWorkload:
    """What a flow's requests carry and how they are checked (default: the echo's counter words).

    payloads(seq) -> bytes: request payloads; reference(payload) -> bytes: what the card checks
    each reply against; keep_replies: keep every reply payload (``stats["replies"]``);
    functions(fid) -> callable: the consumer's functions (replaces the registry's);
    hosting(consumer) -> hosting part: how a consumer that the model times by its calibration
    (sim, code) hosts its function (a factory with its parameters, e.g.
    :class:`twin.qec.hosting.HostingMode`; None: the calibrated service,
    :class:`twin.devices.consumer.HostingPart`); reply_order: ``in_order`` (default) or
    ``as_ready`` (the consumer replies as its parallel decoders finish and the card reads replies as
    they land; :class:`twin.devices.linkcard.LinkCard`).
    """

    payloads: Callable[[int], bytes] | None = None
    reference: Callable[[bytes], bytes] | None = None
    keep_replies: bool = False
    functions: Callable | None = None
    hosting: Callable | None = None
    reply_order: str = "in_order"


@dataclass(frozen=True)
class Flow:
    """One flow: its resolved path (``spec``: devices, wires, traffic, faults, models) and the
    nodes and link directions it uses.

    generator / card / consumer: node names (flows naming the same node share it).
    lanes: stream names of the random jitter of each link direction it creates first
    (``request``, ``reply``); flows over the same direction share one lane.
    gaps_stream: the random stream of its generator's gaps (default ``spec.stream("gaps")``); the
    flows sharing one stream (:class:`twin.devices.generator.Share`) name the stream's.
    """

    spec: LoopSpec
    generator: str
    card: str
    consumer: str
    workload: FlowWorkload = FlowWorkload()
    lanes: dict = field(default_factory=dict)
    gaps_stream: str | None = None

    def lane_stream(self, which: str) -> str:
        """The jitter stream of this flow's ``request`` or ``reply`` lane."""
        return self.lanes.get(which) or self.spec.stream(f"pcie.{which}")


@dataclass(frozen=True)
class Topology:
    """Flows to run together on one event timeline, with one seed.

    ``phases`` (consumer node -> poll phase, ps) and ``clocks`` (generator node -> its oscillator's
    start phase, ps): constants drawn for a larger topology this one is a part of
    (:func:`twin.engine.partition.part_topology`); the engines take a node's from here and draw
    only the others (a node's first flow's :meth:`LoopSpec.draws`). Empty: all drawn here."""

    name: str
    seed: int
    flows: tuple[Flow, ...]
    phases: dict[str, int] = field(default_factory=dict)
    clocks: dict[str, int] = field(default_factory=dict)

    @classmethod
    def single(cls, spec: LoopSpec, workload: FlowWorkload = FlowWorkload()) -> "Topology":
        """The one-flow topology of a loop (generator -> card -> ``spec.name``)."""
        return cls(spec.name, spec.seed, (Flow(spec, "generator", "card", spec.name, workload),))
