"""Build a :class:`LoopSpec` from a parameter set: one consumer, its host's paths, the card."""
from __future__ import annotations

from twin.calibration.params import ParamSet
from twin.devices.generator import TrafficParams
from twin.engine.spec import LoopSpec
from twin.faults import FaultPlan
from twin.units import PS_PER_NS


def loop_spec(params: ParamSet, consumer: str, traffic: TrafficParams, seed: int, slots: int = 16,
              encoding: str | None = None, external_control: bool = False,
              faults: FaultPlan = FaultPlan(), function: int = 0, model: str = "sim",
              card_model: str = "sim", rtl=None, bridge: object | None = None) -> LoopSpec:
    """The loop for ``consumer`` under ``params``.

    ``encoding`` overrides the consumer's own (``None`` keeps it). ``external_control`` puts the
    generator behind the Aurora link (a control system across a cable) instead of on the card.
    ``model`` / ``card_model``: what stands for the consumer and the card; ``rtl``: RTL options
    (:class:`twin.rtl.loop.RtlConfig`).
    Raises ``KeyError`` for an unknown consumer.
    """
    if consumer not in params.consumers:
        raise KeyError(f"no consumer {consumer!r} in parameter set {params.name!r}")
    c = params.consumers[consumer]
    host = params.hosts[c.host]
    link = host.link(c.path)
    return LoopSpec(name=consumer, card=params.card.params(), consumer=c.params(encoding), traffic=traffic,
                    request_link=link, reply_link=link, jitter_ps=int(round(host.path(c.path).jitter_ns * PS_PER_NS)),
                    aurora=params.aurora.link() if external_control else None, slots=slots, seed=seed,
                    faults=faults, function=function, model=model, card_model=card_model, rtl=rtl, bridge=bridge)
