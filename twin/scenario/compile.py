"""The compile step: ``load(path) -> Scenario -> compile -> Topology``.

:func:`compile_scenario` turns a loaded scenario (its :class:`~twin.scenario.schema.Scenario` and
parameter set) into the :class:`~twin.engine.topology.Topology` the engines run, for loops and
meshes alike; :func:`flow_spec` is the one entry to the parameter sets' spec builders (each set's
``loop_spec``: :class:`twin.calibration.params.ParamSet` for the card path,
:class:`twin.calibration.roce.RoceParamSet` for the RoCE v2 path), and :func:`is_roce` the one place
that tells the two apart (by the path a set declares, ``params.path``). The model registry
(:mod:`twin.nodes.models`) is asked once per node (:func:`node_models`); what a study needs of a
node's model it reads from that entry's ``supports`` (:func:`model_of`), never from its name.

This module imports no parameter-set module: the calibration fits build their loops through it, and
the sets are handed in.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

from twin.devices.generator import TrafficParams
from twin.engine.spec import LoopSpec
from twin.engine.topology import Flow, Topology
from twin.faults import FaultPlan

if TYPE_CHECKING:
    from twin.nodes.registry import Model
    from twin.scenario.schema import Node, Scenario

RtlOptions = Callable[["Node"], object]  # a consumer node -> its loop's RtlConfig (or None)


class ParameterSet(Protocol):
    """What the compile step asks of a parameter set (card path or RoCE): the route its requests
    take (``path``: ``card`` or ``roce``), its consumers, and its spec builder."""

    @property
    def path(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def consumers(self) -> dict: ...

    def loop_spec(self, consumer: str, traffic: TrafficParams, seed: int, *, slots: int = ...,
                  encoding: str | None = ..., external_control: bool = ..., faults: FaultPlan = ...,
                  function: int = ..., model: str = ..., card_model: str = ..., rtl=...,
                  bridge: object | None = ..., switch_hops: int = ...) -> LoopSpec: ...


class Loaded(Protocol):
    """A loaded scenario (:class:`twin.scenario.load.LoadedScenario`): its file, schema, parameter set."""

    @property
    def path(self) -> Path: ...

    @property
    def scenario(self) -> Scenario: ...

    @property
    def params(self) -> ParameterSet: ...


def flow_spec(params, device: str, traffic: TrafficParams, seed: int, *, slots: int = 16,
              encoding: str | None = None, external_control: bool = False, faults: FaultPlan = FaultPlan(),
              function: int = 0, model: str = "sim", card_model: str = "sim", rtl=None, bridge: object | None = None,
              switch_hops: int = 0) -> LoopSpec:
    """The resolved :class:`LoopSpec` of one flow to consumer ``device`` of ``params`` (a card-path
    :class:`~twin.calibration.params.ParamSet` or a :class:`~twin.calibration.roce.RoceParamSet`).

    ``encoding`` overrides the consumer's own (None keeps it); ``external_control`` puts the control
    system behind the Aurora cable (card path only: a RoCE controller is the card); ``switch_hops``:
    Ethernet switches on a RoCE route (card path: must be 0); ``rtl``: RTL options
    (:class:`twin.rtl.loop.RtlConfig`). Raises KeyError for an unknown consumer.
    """
    return params.loop_spec(device, traffic, seed, slots=slots, encoding=encoding, external_control=external_control,
                            faults=faults, function=function, model=model, card_model=card_model, rtl=rtl,
                            bridge=bridge, switch_hops=switch_hops)


def is_roce(params) -> bool:
    """Whether ``params`` is a RoCE v2 parameter set (its requests cross Ethernet, a NIC and PCIe)."""
    return params.path == "roce"


def model_of(node: Node) -> Model:
    """The registry's entry for ``node`` (its kind and model), asked once, when the schema validated the node."""
    return node.entry


def node_models(sc: Scenario) -> dict[str, Model]:
    """Every node's registry entry, by node name: the registry asked once per node."""
    return {n.name: model_of(n) for n in sc.nodes}


def cosimulated(model: Model) -> bool:
    """Whether ``model`` is co-simulated RTL (it takes a loop's RTL options: build, ``--trace`` VCD)."""
    return "cosim" in model.supports


def compile_scenario(loaded: Loaded, rounds: int | None = None, seed: int | None = None, *,
                     trace: tuple[str, int, int] | None = None) -> Topology:
    """The :class:`Topology` of a loaded scenario (see :func:`scenario_topology`), with the RTL options
    of its co-simulated nodes: a user's function core (``rtl:`` block, sources relative to the
    scenario) and ``trace = (path, first, last)``: VCD waveforms of rounds first..last
    (``<path stem>.<node>.vcd`` beside ``path``, per loop)."""
    if trace is not None:
        check_trace_names(loaded)
    return scenario_topology(loaded.scenario, loaded.params, rounds, seed,
                             rtl=lambda node: rtl_config(loaded, node, trace))


def check_trace_names(loaded: Loaded) -> None:
    """Tracing (``--trace``) names each waveform file by its loop and node
    (``waves.<loop>.<node>.vcd``, :mod:`twin.rtl.loop`): every consumer's node name and every
    co-simulated node's must then be a plain name (letters, digits, ``_ . -``, not starting with a
    dot), never a path. Raises :class:`twin.config.ConfigError` naming the node."""
    import re

    from twin.config import ConfigError
    from twin.scenario.schema import PLAIN_NAME
    for i, n in enumerate(loaded.scenario.nodes):
        if (n.kind == "consumer" or cosimulated(model_of(n))) and not re.match(PLAIN_NAME, n.name):
            raise ConfigError(loaded.path, f"nodes[{i}].name", n.name, "--trace names its waveform files "
                              "waves.<loop>.<node>.vcd: a traced node's name must be letters, digits, _ . - "
                              "(not starting with a dot), not a path")


def scenario_topology(sc: Scenario, params: ParameterSet, rounds: int | None = None, seed: int | None = None, *,
                      rtl: RtlOptions | None = None) -> Topology:
    """The :class:`Topology` of scenario ``sc`` under ``params``, named by the scenario, at ``seed``
    (default the scenario's); ``rounds`` overrides every flow's round count; ``rtl(node)``: the RTL
    options of the loop to consumer ``node``.

    A mesh (``flows``): one flow per ``flows`` entry, named ``flow<i>``, over the nodes of its route,
    its link directions named lanes (``mesh.<card>-><consumer>``, ``mesh.<consumer>-><card>``) that
    flows over the same direction share. A loop scenario: one flow per consumer node, in file order,
    named by its device, from the scenario's generator through its link card; its lanes are its own
    (each loop runs alone, as the seeds measured them: :func:`twin.studies.run.run_study`). The scenario's
    faults apply to every flow. Raises ValueError when two flows to one consumer would use different
    encodings.
    """
    seed = sc.seed if seed is None else seed
    models = node_models(sc)
    flows = _mesh_flows(sc, params, models, rounds, seed, rtl) if sc.flows else _loop_flows(
        sc, params, models, rounds, seed, rtl)
    encs: dict[str, str] = {}
    for fl in flows:
        if encs.setdefault(fl.consumer, fl.spec.consumer.encoding) != fl.spec.consumer.encoding:
            raise ValueError(f"consumer {fl.consumer!r}: every flow to one consumer uses its encoding")
    return Topology(sc.name, seed, tuple(flows))


def _common(sc: Scenario) -> dict:
    """The spec keywords every flow of ``sc`` shares."""
    return {"slots": sc.slots, "encoding": None if sc.encoding == "default" else sc.encoding,
            "faults": sc.faults.plan() if sc.faults else FaultPlan()}


def _rtl_of(node: Node, card: Node, models: dict[str, Model], rtl: RtlOptions | None):
    """The RTL options of the loop from ``card`` to ``node`` (None when neither is co-simulated)."""
    if rtl is None or not (cosimulated(models[node.name]) or cosimulated(models[card.name])):
        return None
    return rtl(node)


def _loop_flows(sc: Scenario, params: ParameterSet, models: dict[str, Model], rounds: int | None, seed: int,
                rtl: RtlOptions | None) -> list[Flow]:
    """One flow per consumer node of loop scenario ``sc`` (see :func:`scenario_topology`)."""
    from dataclasses import replace

    from twin.runtime.functions import lookup
    gen = sc.control()  # the node that stands as the generator (a traffic generator, a vendor's control system)
    assert gen is not None  # the graph refuses a loop without one
    control = sc.control_side()  # its kind, model and own parameters: its registered factory builds it
    card = next(n for n in sc.nodes if n.kind == "link_card")
    traffic = sc.traffic_params(rounds)  # gaps files were resolved at load
    kw = _common(sc) | {"external_control": sc.external_control(), "function": lookup(sc.function).id,
                        "card_model": card.model}
    flows = []
    for node in sc.consumers():
        assert node.device is not None  # the graph refuses a consumer without one
        spec = flow_spec(params, node.device, traffic, seed, model=node.model, rtl=_rtl_of(node, card, models, rtl),
                         bridge=node.bridge.settings() if node.bridge else None,
                         switch_hops=(sc.roce_hops(node.name) or 0) if is_roce(params) else 0, **kw)
        flows.append(Flow(replace(with_host_runtime(spec, node), control=control), gen.name, card.name, node.name))
    return flows


def with_host_runtime(spec: LoopSpec, node: Node) -> LoopSpec:
    """``spec`` with consumer ``node``'s host runtime (its ``host_runtime`` block, the file resolved at
    load: :func:`twin.scenario.load.resolve_host_runtimes`), or ``spec`` without one."""
    if node.host_runtime is None:
        return spec
    from dataclasses import replace

    from twin.devices.host_runtime import read
    hr = read(node.host_runtime.file, node.host_runtime.wake)
    return replace(spec, consumer=replace(spec.consumer, host_runtime=hr))


def _mesh_flows(sc: Scenario, params: ParameterSet, models: dict[str, Model], rounds: int | None, seed: int,
                rtl: RtlOptions | None) -> list[Flow]:
    """One flow per ``flows`` entry of mesh scenario ``sc`` (see :func:`scenario_topology`)."""
    from dataclasses import replace

    from twin.runtime.functions import lookup
    from twin.scenario.schema import traffic_params
    g = sc.graph()
    kw = _common(sc)
    flows = []
    for r in g.graph["routes"]:
        f = sc.flows[r.flow]
        node, card = g.nodes[r.consumer]["node"], g.nodes[r.card]["node"]
        assert node.device is not None  # the graph refuses a consumer without one
        n = rounds or f.rounds or sc.rounds
        spec = flow_spec(params, node.device, traffic_params(f.traffic, n, sc.frame_bytes), seed,
                         external_control=g.edges[r.generator, r.card]["kind"] == "aurora",
                         function=lookup(r.function).id, model=node.model, card_model=card.model,
                         rtl=_rtl_of(node, card, models, rtl), bridge=node.bridge.settings() if node.bridge else None,
                         **kw)
        flows.append(Flow(replace(with_host_runtime(spec, node), name=f"flow{r.flow}"), r.generator, r.card, r.consumer,
                          lanes={"request": f"mesh.{r.card}->{r.consumer}", "reply": f"mesh.{r.consumer}->{r.card}"}))
    return flows


def rtl_config(loaded: Loaded, node: Node, trace: tuple[str, int, int] | None):
    """The RTL options (:class:`twin.rtl.loop.RtlConfig`) of the loop to consumer ``node``: its
    ``rtl:`` block's core (sources resolved against the scenario's folder) and the ``trace`` files."""
    from twin.rtl.loop import RtlConfig
    kw: dict = {}
    if node.rtl is not None:
        kw["function_top"] = node.rtl.top
        kw["function_sources"] = tuple(str((loaded.path.parent / s).resolve()) for s in node.rtl.sources)
    if trace is not None:
        path, first, last = trace
        p = Path(path)
        kw.update(trace_path=str(p.with_name(f"{p.stem}.{node.name}{p.suffix}")), trace_first=first, trace_last=last)
    return RtlConfig(**kw)
