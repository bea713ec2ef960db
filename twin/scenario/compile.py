"""The compile step: a loaded scenario's parameter set and placements become resolved flows.

``load(path) -> Scenario -> compile -> Topology``: this module is the only caller of the parameter
sets' spec builders (:func:`twin.calibration.params.loop_spec` for the card path,
:func:`twin.calibration.roce.roce_loop_spec` for the RoCE v2 path) and the only place that tells the
parameter-set classes apart.
"""
from __future__ import annotations

from twin.devices.generator import TrafficParams
from twin.engine.spec import LoopSpec
from twin.faults import FaultPlan


def flow_spec(params, device: str, traffic: TrafficParams, seed: int, *, slots: int = 16,
              encoding: str | None = None, external_control: bool = False, faults: FaultPlan = FaultPlan(),
              function: int = 0, model: str = "sim", card_model: str = "sim", rtl=None, bridge: object | None = None,
              switch_hops: int = 0) -> LoopSpec:
    """The resolved :class:`LoopSpec` of one flow to consumer ``device`` of ``params`` (a card-path
    :class:`~twin.calibration.params.ParamSet` or a :class:`~twin.calibration.roce.RoceParamSet`).

    ``encoding`` overrides the consumer's own (None keeps it); ``external_control`` puts the control
    system behind the Aurora cable (card path only: a RoCE controller is the card); ``switch_hops``:
    Ethernet switches on a RoCE route (card path: must be 0); ``rtl``: RTL options (card path).
    Raises KeyError for an unknown consumer.
    """
    from twin.calibration.roce import RoceParamSet, roce_loop_spec
    if isinstance(params, RoceParamSet):
        return roce_loop_spec(params, device, traffic, seed, slots, encoding, faults, function, model,
                              switch_hops=switch_hops, bridge=bridge)
    from twin.calibration.params import loop_spec
    return loop_spec(params, device, traffic, seed, slots, encoding, external_control, faults, function, model,
                     card_model, rtl, bridge=bridge)


def is_roce(params) -> bool:
    """Whether ``params`` is a RoCE v2 parameter set (its requests cross Ethernet, a NIC and PCIe)."""
    from twin.calibration.roce import RoceParamSet
    return isinstance(params, RoceParamSet)
