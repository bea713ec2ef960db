"""A request received by one device and served by another: a two-stage consumer.

On a Grace Hopper / Grace Blackwell node the NIC lands each request in GPU memory (GPUDirect
RDMA), where a persistent kernel receives it, and the decoder may run on a Grace core. The
hand-off between them is a second queue pair in memory, not a Python queue:

1. stage 1 (the receiving device) polls the flow's request queue in its own memory, reads the
   request, pre-processes it (``preprocess_ps_per_measurement`` of its parameters: detector
   formation from raw measurements), and posts the request's bytes into the hand-off queue in
   stage 2's memory over the link between the two chips (NVLink-C2C or PCIe: a posted-write path
   on its own :class:`twin.kernel.Lane`, the same encoding, the same slot index); its thread is
   free once the writes are issued;
2. stage 2 (the serving device) polls the hand-off queue, which the other chip wrote: over
   NVLink-C2C each poll that sees a request costs a coherence miss (the spec's stage parameters
   carry it as the poll cost); it runs the function (the decoder) and posts the reply into the
   card's reply queue, the flow's reply path, exactly as a one-stage consumer does.

Slots cannot overrun: the card has at most ``slots`` requests outstanding and a hand-off slot
is reused by request ``seq + slots`` only after request ``seq``'s reply was read.

Every hop is timed: the flow's hops keep stage 1's ``seen`` and ``start``, the hand-off's
instants in ``hops.inner`` (issued, landed, seen by stage 2, taken by stage 2), stage 2's reply
instants in ``reply``/``publish``/``rland``, so the latency budget names ``preprocess``,
``handoff_write``, ``handoff_poll`` and ``handoff_queue`` between ``queue`` and ``service``.

Only the event engines run it: the simpy reference and the compiled event core (twin/engine/c/core.c,
``E_HANDOFF`` .. ``E_HARM``: the same events at the same instants); the direct engine refuses a spec
with a hand-off (:attr:`twin.engine.spec.LoopSpec.event_only`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from twin.devices.consumer import ConsumerParams, HostingPart, PollingConsumer, ServingThread, build_endpoint
from twin.kernel import MemoryRegion, PostedWritePath
from twin.kernel.posted import Wire
from twin.kernel.sim import stream_rng
from twin.nodes.protocol import ConsumerStats, NoTrace

INNER = ("h_issue", "h_land", "h_seen", "h_start")
"""The hand-off's instants per round, in order (:class:`twin.engine.hops.Hops` ``inner``)."""
INNER_STAGES = ("preprocess", "handoff_write", "handoff_poll", "handoff_queue")
"""Stage k of the hand-off runs from instant k-1 (``start`` for k = 0) to instant k; ``service``
then runs from ``h_start`` to the reply."""


@dataclass(frozen=True)
class HandoffSpec:
    """The second stage of a flow (integer picoseconds).

    to: the serving device's name (stream and region names).
    stage: its timing (:class:`ConsumerParams`); over NVLink-C2C its poll cost is the coherence
        miss of a line the receiving chip wrote.
    wire: the link the hand-off's posted writes cross (:class:`twin.links.c2c.NvlinkC2C` or
        :class:`twin.links.pcie.PcieLink`: any :class:`twin.kernel.posted.Wire`).
    jitter_ps: scale of the exponential extra delay of each hand-off write.
    link: the wire's kind, for the results (``c2c`` or ``pcie``).
    """

    to: str
    stage: ConsumerParams
    wire: Wire
    jitter_ps: int = 0
    link: str = "c2c"


class _StageHops:
    """Stage 2's view of the flow's hops: it reads the landing of its own queue (the hand-off's)
    and writes its seen/start into the hand-off instants, its reply instants into the flow's."""

    def __init__(self, hops):
        inner = hops.inner
        self.land, self.seen, self.start = inner["h_land"], inner["h_seen"], inner["h_start"]
        self.reply, self.publish, self.rland = hops.reply, hops.publish, hops.rland


class HandOff(HostingPart):
    """The hosting part of stage 1 (see module docstring): it reads and pre-processes each request,
    then posts its bytes into the hand-off queue through ``path`` (a :class:`PostedWritePath` into
    stage 2's memory); its thread is free once the writes are issued. Statistics: ``handed_off``."""

    def __init__(self, c: PollingConsumer, path: PostedWritePath):
        super().__init__(c)
        self.path = path
        self.handed_off = 0

    def serve(self, seq: int, base: int, at: int) -> None:
        """Read and pre-process request ``seq``, then post its bytes into the hand-off queue."""
        c = self.c
        t = at + c.p.pre_service_ps(c.enc, c.frame_bytes) + c.p.service_ps
        h = c.enc.header(c.requests.buf, base)
        writes = c.enc.writes(seq, c.enc.payload(c.requests.buf, base), function=h.function)
        c.kernel.at(t, self._hand_off, seq, base, writes)
        if c.hops is not None:  # its "reply" is the hand-off's issue; stage 2 records the flow's reply
            c.hops.inner["h_issue"][seq - 1] = t
        c._done(seq, at, t, t, t, record=False)

    def _hand_off(self, seq: int, base: int, writes) -> None:
        land = 0
        for off, data in writes:
            land = self.path.write(base + off, data)
        self.handed_off += 1
        hops = self.c.hops
        if hops is not None:
            hops.inner["h_land"][seq - 1] = land


class StagedConsumer(NoTrace):
    """A two-stage consumer node (see module docstring): ``stage1`` (a :class:`PollingConsumer`
    polling the flow's request queue, hosting part :class:`HandOff`) and ``stage2`` (the serving
    stage, a :class:`PollingConsumer` polling the hand-off queue and replying on the flow's reply
    path). Its statistics (:meth:`finish`) are stage 1's polls and requests served, as a one-stage
    consumer's; stage 2's are on ``stage2``; ``handed_off``."""

    keeps_partial = False

    def __init__(self, stage1: PollingConsumer, handoff: HandOff, stage2: PollingConsumer):
        self.stage1, self.handoff, self.stage2 = stage1, handoff, stage2

    @property
    def handed_off(self) -> int:
        """Requests handed to the serving device."""
        return self.handoff.handed_off

    def setup(self) -> None:
        """Both stages begin polling (stage 1 first)."""
        self.stage1.setup()
        self.stage2.setup()

    def finish(self) -> ConsumerStats:
        """Stage 1's polls of the flow's request queue and requests served."""
        return self.stage1.finish()

    def shutdown(self) -> None:
        """Both stages release what they hold."""
        self.stage1.shutdown()
        self.stage2.shutdown()


def lane_stream(spec) -> str:
    """The random stream of the hand-off lane's jitter of flow ``spec`` (its ``handoff``)."""
    return spec.stream(f"handoff.{spec.handoff.link}")


def stage_phase(spec) -> int:
    """The serving stage's poll phase (ps) of flow ``spec`` (its ``handoff``): its parameters'
    ``poll_phase_ps``, else drawn in [0, poll period) from the flow's ``handoff.setup`` stream."""
    st = spec.handoff.stage
    if st.poll_phase_ps is not None:
        return st.poll_phase_ps
    return int(stream_rng(spec.seed, spec.stream("handoff.setup")).integers(0, st.poll_period_ps))


def build_staged(ctx) -> StagedConsumer:
    """The two-stage consumer of ``ctx.spec`` (its ``handoff``) for one queue pair, from a
    :class:`twin.engine.event.NodeContext`: the hand-off region in stage 2's memory, its lane
    (``ctx.lane``: shared statistics), stage 2 with its own poll phase (drawn from the flow's
    ``handoff.setup`` stream) and serving thread; the flow's workload (a hosting mode, the
    decoder's cost) applies to stage 2, which runs the function. Raises ValueError when the flow
    injects faults (they act on one-stage consumers' writes and pollers)."""
    spec = ctx.spec
    ho = spec.handoff
    if spec.faults.active:
        raise ValueError(f"loop {spec.name!r}: fault injection acts on one-stage consumers; this one hands its "
                         f"requests to {ho.to}")
    if spec.consumer.host_runtime is not None:
        raise ValueError(f"loop {spec.name!r}: a host runtime (dispatcher, queue, worker) runs in one device; this "
                         f"consumer hands its requests to {ho.to}")
    k = ctx.kernel
    region = MemoryRegion(f"{ho.to}.{spec.name}.handoff_queue", ho.to, spec.slots * ctx.slot_bytes)
    lane = ctx.lane(ctx.name, ho.to, ho.wire, lane_stream(spec), ho.jitter_ps)
    path = PostedWritePath(k, f"{ctx.name}->{ho.to}", None, region, lane=lane)
    phase = stage_phase(spec)
    hops = ctx.hops
    if hops is not None:
        hops.inner = {name: [-1] * len(hops.land) for name in INNER}
    stage2 = PollingConsumer(k, f"{ctx.name}.{ho.to}", ho.stage.with_phase(phase), ctx.enc, region, ctx.rep_path,
                             spec.slots, ctx.slot_bytes, spec.traffic.frame_bytes, ctx.functions(), None, (),
                             ServingThread(), None if hops is None else _StageHops(hops), hosting=ctx.workload.hosting)
    stage1 = PollingConsumer(k, ctx.name, spec.consumer.with_phase(ctx.phase_ps), ctx.enc, ctx.req_region,
                             ctx.rep_path, spec.slots, ctx.slot_bytes, spec.traffic.frame_bytes, ctx.functions(), None,
                             (), ctx.thread, hops, hosting=lambda c: HandOff(c, path))
    assert isinstance(stage1.hosting, HandOff)
    return StagedConsumer(stage1, stage1.hosting, stage2)


def build_sim_endpoint(ctx) -> PollingConsumer | StagedConsumer:
    """Model ``sim`` of a consumer (registered in :mod:`twin.nodes.models`): the two-stage consumer
    when the flow hands its requests to a second device (``spec.handoff``), else the one-stage
    :func:`twin.devices.consumer.build_endpoint`."""
    if ctx.spec.handoff is not None:
        return build_staged(ctx)
    return build_endpoint(ctx)


__all__ = ["HandOff", "HandoffSpec", "INNER", "INNER_STAGES", "StagedConsumer", "build_sim_endpoint", "build_staged",
           "lane_stream", "stage_phase"]


if TYPE_CHECKING:  # mypy checks that these satisfy the node protocol (twin/nodes/protocol.py)
    from twin.nodes.protocol import ConsumerNode
    _stagedconsumer: type[ConsumerNode] = StagedConsumer
