"""The one engine: topologies of flows (:mod:`.topology`), the event engine every study runs on
(:mod:`.event`), the direct fast path for one-flow loops (:mod:`.direct`), a flow's resolved
specification (:mod:`.spec`) and the per-round hops (:mod:`.hops`). Both engines run in the compiled
core (``c/core.c``: :mod:`.native`, :mod:`.compiled`) where it computes the topology (:mod:`.features`),
each interacting component (:mod:`.partition`) on its own timeline (or its own process:
:mod:`.parts` on a Dask cluster, :mod:`.cluster`),
with identical results. A loop's spec is built from a parameter set by the compile step
(:func:`twin.scenario.compile.flow_spec`: the set's ``loop_spec``, card path or RoCE path)."""
from twin.engine.direct import DirectNotApplicable, EngineDisagreement, run_direct
from twin.engine.event import run_event, run_topology
from twin.engine.spec import LoopResult, LoopSpec
from twin.engine.topology import Flow, FlowWorkload, Topology

__all__ = ["LoopSpec", "LoopResult", "run_event", "run_topology", "run_direct", "DirectNotApplicable",
           "EngineDisagreement", "Flow", "FlowWorkload", "Topology"]
