"""Scenario files: a runnable what-if study (YAML), validated with pydantic.

A scenario names a parameter set, the traffic, the frame size and encoding, and a topology of
nodes and links. Every consumer node joined to the link card by a ``pcie`` link is one loop;
loops run one at a time, one consumer per run, as the seeds measured them.

Schema (keys; all optional keys show their default)::

    name: str
    description: ""
    calibration: path to a parameter set, relative to this file
    measured: null | path to a measurement file to compare with, relative to this file
    seed: 0
    rounds: 100000
    frame_bytes: 64
    encoding: default | classic | per_piece      # default: each consumer's own
    function: echo                               # what every request asks for (twin.runtime.functions)
    function: echo | invert | xor_fold | sum32   # what every request asks for (twin.runtime.functions)
    slots: 16
    traffic: {mode: closed_loop | open_loop, period: "5 us", clock: card | independent,
              clock_period: "4 ns", ppm: 0.0, gap: "0 ns"}
    deadline: null | "2 us"                      # count rounds whose loop exceeds it
    faults: null | {corrupt_piece: {rounds: [..], path: request | reply},
                    drop_frame: {rounds: [..]}, stall: [{at: "50 us", duration: "20 us"}],
                    timeout: "100 us"}
    nodes:  [{name, kind: generator | link_card | consumer | nic | switch, device: <consumer in calibration>,
              model: sim | code | rtl | live, routes: {function: consumer} (link card in a mesh),
              rtl: {top: NAME, sources: [file.v, ...]},   # rtl only: a user's function core (docs/rtl.md)
              bridge: {backend: shm | cuda | udp, timeout: "1 s", cpu: null, producer_cpu: null,
                       host: 127.0.0.1, port: 0, device: 0, fault: null | {kind, round}}}]
                                                 # bridge: model live only (hw_bridge)
    faults: ... host_freeze: [{at: "50 us", duration: "20 us"}]   # CPU consumers stop; live shm: SIGSTOP
    links:  [{from, to, kind: on_card | aurora | pcie | ethernet}]
    qblox:  null | a Qblox Cluster as the generator (twin.devices.qblox; replaces traffic)
    flows:  [] | a mesh: [{from, function, via, rounds, traffic: {mode: closed_loop | open_loop | poisson,
              period, clock, clock_period, ppm}}] (twin.mesh)

Errors name the file, the key and the value (:class:`twin.config.ConfigError`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from twin.calibration.params import ParamSet, load_params
from twin.config import ConfigError, Located, load_model
from twin.devices.generator import TrafficParams
from twin.devices.qblox import QbloxCluster
from twin.faults import FaultPlan
from twin.units import UnitError, time_ps

MODELS_AVAILABLE = ("sim", "code", "rtl", "live")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _duration(v: object) -> object:
    if v is None:
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        raise ValueError(f"needs a unit, e.g. '{v} ns' or '{v} us'")
    if not isinstance(v, str):
        raise ValueError("must be a quantity string such as '5 us'")
    try:
        if time_ps(v) < 0:
            raise ValueError("must not be negative")
    except UnitError as e:
        raise ValueError(str(e)) from None
    return v


class Traffic(_Strict):
    """The control side's traffic (see :class:`twin.devices.TrafficParams`)."""

    mode: Literal["closed_loop", "open_loop"] = "closed_loop"
    period: str | None = None
    clock: Literal["card", "independent"] = "card"
    clock_period: str = "4 ns"
    ppm: float = Field(0.0, gt=-1e6, lt=1e6)
    gap: str = "0 ns"
    in_flight: int = Field(1, ge=1, le=65_536, strict=True)  # closed loop: requests in flight

    _d = field_validator("period", "clock_period", "gap", mode="before")(classmethod(lambda cls, v: _duration(v)))

    @model_validator(mode="after")
    def _consistent(self):
        if time_ps(self.clock_period) <= 0:
            raise Located(("clock_period",), self.clock_period, "must be > 0")
        if self.mode == "open_loop":
            if self.period is None:
                raise Located(("period",), "<missing>", "open_loop traffic needs a period (e.g. '5 us')")
            if time_ps(self.period) <= 0 or time_ps(self.period) % time_ps(self.clock_period):
                raise Located(("period",), self.period,
                              f"must be a positive whole number of clock_period ({self.clock_period}) cycles")
        elif self.period is not None:  # closed loop: would be silently ignored
            raise Located(("period",), self.period, "applies to open_loop traffic only (closed_loop sends the "
                          "next request when the reply arrives); set mode: open_loop or remove period")
        if self.in_flight > 1 and self.mode != "closed_loop":
            raise Located(("in_flight",), self.in_flight, "applies to closed_loop traffic only")
        if self.clock == "card" and self.ppm:
            raise Located(("ppm",), self.ppm, "applies only to an independent clock (clock: independent)")
        return self


class CorruptFault(_Strict):
    """Flip a payload byte of the given rounds' request or reply on the PCIe path."""

    rounds: list[int] = Field(min_length=1)
    path: Literal["request", "reply"] = "request"

    @field_validator("rounds")
    @classmethod
    def _positive(cls, v):
        for i, r in enumerate(v):
            if r < 1:
                raise Located((i,), r, "rounds are numbered from 1")
        return v


class DropFault(_Strict):
    """Lose the control system's first frame of the given rounds on the link."""

    rounds: list[int] = Field(min_length=1)
    _p = field_validator("rounds")(CorruptFault._positive.__func__)


class StallFault(_Strict):
    """The consumer stops polling from ``at`` for ``duration``."""

    at: str
    duration: str
    _d = field_validator("at", "duration", mode="before")(classmethod(lambda cls, v: _duration(v)))


class Faults(_Strict):
    """Fault injection (see :mod:`twin.faults`)."""

    corrupt_piece: CorruptFault | None = None
    drop_frame: DropFault | None = None
    stall: list[StallFault] = []
    host_freeze: list[StallFault] = []
    timeout: str = "100 us"
    _d = field_validator("timeout", mode="before")(classmethod(lambda cls, v: _duration(v)))

    def plan(self) -> FaultPlan:
        """The :class:`FaultPlan` for the loops."""
        return FaultPlan(corrupt_rounds=frozenset(self.corrupt_piece.rounds) if self.corrupt_piece else frozenset(),
                         corrupt_path=self.corrupt_piece.path if self.corrupt_piece else "request",
                         drop_rounds=frozenset(self.drop_frame.rounds) if self.drop_frame else frozenset(),
                         stalls=tuple((time_ps(s.at), time_ps(s.at) + time_ps(s.duration)) for s in self.stall),
                         timeout_ps=time_ps(self.timeout),
                         host_freezes=tuple((time_ps(s.at), time_ps(s.at) + time_ps(s.duration))
                                            for s in self.host_freeze))


class LiveFault(_Strict):
    """Fault injection in a live ``shm`` consumer (tests of the failure handling): at request
    ``round`` it exits (die), stops answering (hang) or answers wrongly (wrong)."""

    kind: Literal["die", "hang", "wrong"]
    round: int = Field(ge=1, strict=True)


class Bridge(_Strict):
    """How a ``model: live`` consumer is reached (:mod:`hw_bridge`): ``backend`` shm (a consumer
    process over POSIX shared memory), cuda (a persistent kernel on an NVIDIA GPU) or udp (an agent
    serving frames over UDP); ``timeout`` for one reply; ``cpu``/``producer_cpu`` cores to pin (shm);
    ``host``/``port`` of the UDP agent; ``device`` the GPU ordinal; ``fault`` (shm, tests)."""

    backend: Literal["shm", "cuda", "udp"]
    timeout: str = "1 s"
    cpu: int | None = Field(None, ge=0, strict=True)
    producer_cpu: int | None = Field(None, ge=0, strict=True)
    host: str = "127.0.0.1"
    port: int = Field(0, ge=0, le=65535, strict=True)
    device: int = Field(0, ge=0, strict=True)
    fault: LiveFault | None = None
    _d = field_validator("timeout", mode="before")(classmethod(lambda cls, v: _duration(v)))

    @model_validator(mode="after")
    def _consistent(self):
        if time_ps(self.timeout) <= 0:
            raise Located(("timeout",), self.timeout, "must be > 0")
        if self.fault is not None and self.backend != "shm":
            raise Located(("fault",), self.fault.kind, "live fault injection is for the shm backend")
        for key in ("cpu", "producer_cpu"):
            if getattr(self, key) is not None and self.backend != "shm":
                raise Located((key,), getattr(self, key), f"pinning is for the shm backend, not {self.backend}")
        if self.backend == "udp" and self.port == 0:
            raise Located(("port",), self.port if "port" in self.model_fields_set else "<missing>",
                          "the udp backend needs the agent's port")
        return self

    def settings(self):
        """The :class:`hw_bridge.contract.BridgeSettings` of this block."""
        from hw_bridge.contract import BridgeSettings
        return BridgeSettings(backend=self.backend, timeout_ns=time_ps(self.timeout) // 1000, cpu=self.cpu,
                              producer_cpu=self.producer_cpu, host=self.host, port=self.port,
                              fault=(self.fault.kind, self.fault.round) if self.fault else None, device=self.device)


class RtlBlock(_Strict):
    """A user's Verilog function core for an RTL consumer: the module ``top`` with the function
    port of docs/rtl.md, from ``sources`` (paths relative to the scenario file)."""

    top: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_$]*$")
    sources: list[str] = Field(min_length=1)


class Node(_Strict):
    """A node of the topology: ``kind`` generator, link_card or consumer (with its ``device``),
    the ``model`` standing for it, for an RTL consumer optionally its own function core, and for
    ``model: live`` its ``bridge``."""

    name: str = Field(min_length=1)
    kind: Literal["generator", "link_card", "consumer", "nic", "switch"]
    device: str | None = None
    model: str = "sim"
    routes: dict[str, str] | None = None  # link_card in a mesh: function name -> consumer node
    rtl: RtlBlock | None = None
    bridge: Bridge | None = None

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if v not in ("sim", "rtl", "code", "live"):
            raise ValueError("model must be one of sim, rtl, code, live")
        if v not in MODELS_AVAILABLE:
            raise ValueError(f"model {v!r} is not available in this version (available: {', '.join(MODELS_AVAILABLE)})")
        return v

    @model_validator(mode="after")
    def _code_is_for_consumers(self):
        if self.model == "code" and self.kind != "consumer":
            raise Located(("model",), self.model, "model code (the C runtime library) stands for a consumer only")
        if self.model == "rtl" and self.kind == "generator":
            raise Located(("model",), self.model, "model rtl stands for the link card or an FPGA consumer")
        if self.rtl is not None and (self.model != "rtl" or self.kind != "consumer"):
            raise Located(("rtl",), "{...}", "an rtl block belongs to a consumer with model rtl")
        if self.model == "live":
            if self.kind != "consumer":
                raise Located(("model",), self.model, "model live (hw_bridge) stands for a consumer only")
            if self.bridge is None:
                raise Located(("bridge",), "<missing>", "model live needs a bridge block (backend: shm | cuda | udp)")
        elif self.bridge is not None:
            raise Located(("bridge",), self.bridge.backend, f"a bridge block is for model live, not model {self.model}")
        return self


class Link(_Strict):
    """An edge of the topology, ``from``/``to`` node names and its ``kind``."""

    a: str = Field(alias="from")
    b: str = Field(alias="to")
    kind: Literal["on_card", "aurora", "pcie", "ethernet"]


_LINK_ENDS = {"pcie": ({"link_card", "consumer"}, {"nic", "consumer"}),
              "on_card": ({"generator", "link_card"},), "aurora": ({"generator", "link_card"},),
              "ethernet": ({"link_card", "nic"}, {"link_card", "switch"}, {"switch", "nic"}, {"switch"})}


def check_link_ends(g: nx.Graph, link: "Link", j: int) -> None:
    """Raise :class:`Located` when link ``j`` joins node kinds its kind cannot join."""
    ends = {g.nodes[link.a]["node"].kind, g.nodes[link.b]["node"].kind}
    allowed = _LINK_ENDS[link.kind]
    if ends not in allowed:
        text = " or ".join("a " + " and a ".join(sorted(a)) if len(a) > 1 else "two " + next(iter(a)) + "es"
                           for a in allowed)
        raise Located(("links", j, "kind"), link.kind, f"a {link.kind} link joins {text}, not {link.a} and {link.b}")


def roce_route(g: nx.Graph, card: str, consumer: str) -> list[str] | None:
    """The route link card -> (switch)* -> nic -> consumer over ethernet then pcie, or ``None``."""
    sub = nx.Graph((a, b) for a, b, k in g.edges(data="kind") if k == "ethernet")
    for nic in g.neighbors(consumer):
        if g.nodes[nic]["node"].kind != "nic" or g.edges[nic, consumer]["kind"] != "pcie":
            continue
        if card in sub and nic in sub and nx.has_path(sub, card, nic):
            return nx.shortest_path(sub, card, nic) + [consumer]
    return None


class Flow(_Strict):
    """A stream of requests in a mesh: from a generator, naming a function (the link card routes
    it to a consumer by function id), with its own traffic and round count. ``via``: the link card
    when the generator reaches several."""

    a: str = Field(alias="from")
    function: str = "echo"
    via: str | None = None
    rounds: int | None = Field(None, gt=0, le=100_000_000)
    traffic: "MeshTraffic"


class MeshTraffic(_Strict):
    """A flow's traffic: ``closed_loop``, ``open_loop`` (one request every ``period``) or
    ``poisson`` (exponential gaps of mean ``period``), on the controller's clock (``card``: the
    link card's; ``independent``: its own, ``ppm`` off, random phase)."""

    mode: Literal["closed_loop", "open_loop", "poisson"] = "open_loop"
    period: str | None = None
    clock: Literal["card", "independent"] = "card"
    clock_period: str = "4 ns"
    ppm: float = Field(0.0, gt=-1e6, lt=1e6)

    _d = field_validator("period", "clock_period", mode="before")(classmethod(lambda cls, v: _duration(v)))

    @model_validator(mode="after")
    def _consistent(self):
        if time_ps(self.clock_period) <= 0:
            raise Located(("clock_period",), self.clock_period, "must be > 0")
        if self.mode != "closed_loop" and (self.period is None or time_ps(self.period) <= 0):
            raise Located(("period",), self.period or "<missing>", f"{self.mode} traffic needs a period > 0 (e.g. '5 us')")
        if self.mode == "closed_loop" and self.period is not None:  # would be silently ignored
            raise Located(("period",), self.period, "applies to open_loop and poisson traffic only (closed_loop "
                          "sends the next request when the reply arrives); set the mode or remove period")
        if self.mode == "open_loop" and time_ps(self.period) % time_ps(self.clock_period):
            raise Located(("period",), self.period, f"must be a whole number of clock_period ({self.clock_period}) cycles")
        if self.clock == "card" and self.ppm:
            raise Located(("ppm",), self.ppm, "applies only to an independent clock (clock: independent)")
        return self


Flow.model_rebuild()


class Scenario(_Strict):
    """A what-if study (see module docstring for the schema)."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
    description: str = ""
    calibration: str
    measured: str | None = None
    seed: int = Field(0, ge=0, strict=True)
    rounds: int = Field(100_000, gt=0, le=100_000_000, strict=True)
    frame_bytes: int = Field(64, gt=0, le=65_535, strict=True)
    encoding: Literal["default", "classic", "per_piece"] = "default"
    function: str = "echo"
    slots: int = Field(16, gt=0, le=65_536, strict=True)
    traffic: Traffic = Traffic()
    faults: Faults | None = None
    deadline: str | None = None
    nodes: list[Node] = Field(min_length=3)

    _dl = field_validator("deadline", mode="before")(classmethod(lambda cls, v: _duration(v)))
    links: list[Link] = Field(min_length=2)
    flows: list["Flow"] = []  # a mesh: several controllers, cards, consumers (twin.mesh)
    qblox: QbloxCluster | None = None  # the generator is a Qblox Cluster (twin.devices.qblox)

    @field_validator("function")
    @classmethod
    def _function(cls, v: str) -> str:
        from twin.runtime.functions import lookup
        try:
            lookup(v)
        except KeyError as e:
            raise ValueError(str(e).strip("'\"")) from None
        return v

    @model_validator(mode="after")
    def _topology(self):
        self.graph()  # raises ValueError on a bad topology
        if self.faults and self.faults.drop_frame and self.traffic.mode != "closed_loop":
            raise Located(("traffic", "mode"), self.traffic.mode,
                          "faults.drop_frame needs closed_loop traffic (one request in flight)")
        if self.qblox is not None:
            if "traffic" in self.model_fields_set:
                raise Located(("traffic",), "<set>", "a Qblox cluster's traffic comes from its programs (qblox); "
                              "leave traffic out")
            if self.flows or not self.external_control():
                raise Located(("qblox",), self.qblox.device, "a Qblox cluster reaches one link card across a "
                              "cable: an aurora link from the generator, no flows")
            if self.qblox.syndrome_bits() > 8 * self.frame_bytes:
                raise Located(("frame_bytes",), self.frame_bytes, f"the cluster publishes "
                              f"{self.qblox.syndrome_bits()} syndrome bits a round; they do not fit")
        if self.faults and time_ps(self.faults.timeout) <= 0:
            raise Located(("faults", "timeout"), self.faults.timeout, "must be > 0")
        from twin.runtime.functions import lookup
        need = lookup(self.function).min_payload
        if self.frame_bytes < need:
            raise Located(("frame_bytes",), self.frame_bytes,
                          f"function {self.function} needs a payload of at least {need} bytes (its syndrome)")
        return self

    def graph(self) -> nx.Graph:
        """The topology as a networkx graph: nodes carry their :class:`Node`, edges their kind.
        Without flows: one generator and one link card; each consumer on pcie from the card, or
        reached over ethernet (RoCE: card -> switches -> nic -> pcie). With flows: a mesh, checked
        by :func:`twin.mesh.topology.mesh_graph` (its routes in ``graph["routes"]``).
        Raises ValueError (:class:`Located`) naming the key of the first problem."""
        g = nx.Graph()
        for i, n in enumerate(self.nodes):
            if n.name in g:
                raise Located(("nodes", i, "name"), n.name, "node name used twice")
            g.add_node(n.name, node=n, index=i)
        if self.flows:
            from twin.mesh.topology import mesh_graph
            return mesh_graph(self, g)
        for kind in ("generator", "link_card"):
            idx = [i for i, n in enumerate(self.nodes) if n.kind == kind]
            if not idx:
                raise Located(("nodes",), f"<no {kind}>", f"the topology needs exactly one {kind}")
            if len(idx) > 1:
                raise Located(("nodes", idx[1], "kind"), kind, f"a second {kind}; the topology needs exactly one")
        if not any(n.kind == "consumer" for n in self.nodes):
            raise Located(("nodes",), "<no consumer>", "the topology needs at least one consumer")
        for j, link in enumerate(self.links):
            for key, end in (("from", link.a), ("to", link.b)):
                if end not in g:
                    raise Located(("links", j, key), end, "no node of that name")
            if g.has_edge(link.a, link.b):
                raise Located(("links", j, "to"), link.b, f"a second link between {link.a} and {link.b}")
            check_link_ends(g, link, j)
            g.add_edge(link.a, link.b, kind=link.kind, index=j)
        gen = next(n.name for n in self.nodes if n.kind == "generator")
        card = next(n.name for n in self.nodes if n.kind == "link_card")
        if not g.has_edge(gen, card):
            raise Located(("nodes", g.nodes[gen]["index"], "name"), gen,
                          f"the generator must be joined to link card {card!r} by an on_card or aurora link")
        for i, n in enumerate(self.nodes):
            if n.kind != "consumer":
                continue
            if n.device is None:
                raise Located(("nodes", i, "device"), "<missing>", "a consumer needs a device (a consumer of the parameter set)")
            if not g.has_edge(card, n.name) and roce_route(g, card, n.name) is None:
                raise Located(("nodes", i, "name"), n.name, f"not joined to link card {card!r} by a pcie link"
                              + (" or through an RDMA NIC" if any(m.kind == "nic" for m in self.nodes) else ""))
        for i, n in enumerate(self.nodes):
            if n.kind in ("nic", "switch", "link_card") and n.routes:
                raise Located(("nodes", i, "routes"), n.routes, "routes by function id belong to a mesh (flows)")
        return g

    def roce_hops(self, consumer: str) -> int | None:
        """Switches on the RoCE route from the link card (the FPGA's ERNIC) to ``consumer``, or
        ``None`` when the consumer is on the card path (pcie from the link card)."""
        g = self.graph()
        card = next(n.name for n in self.nodes if n.kind == "link_card")
        if g.has_edge(card, consumer):
            return None
        route = roce_route(g, card, consumer)
        return None if route is None else sum(1 for v in route if g.nodes[v]["node"].kind == "switch")

    # -- derived -----------------------------------------------------------------------------
    def consumers(self) -> list[Node]:
        """Consumer nodes in file order (one loop each)."""
        return [n for n in self.nodes if n.kind == "consumer"]

    def card_model(self) -> str:
        """The link card node's model (``sim`` or ``rtl``)."""
        return next(n.model for n in self.nodes if n.kind == "link_card")

    def external_control(self) -> bool:
        """True when the generator reaches the card over Aurora (a control system across a cable)."""
        g = self.graph()
        gen = next(n.name for n in self.nodes if n.kind == "generator")
        card = next(n.name for n in self.nodes if n.kind == "link_card")
        return g.edges[gen, card]["kind"] == "aurora"

    def traffic_params(self, rounds: int | None = None) -> TrafficParams:
        """The traffic in ps for the devices; ``rounds`` overrides the scenario's."""
        if self.qblox is not None:
            return self.qblox.traffic(rounds or self.rounds, self.frame_bytes)
        t = self.traffic
        return TrafficParams(mode=t.mode, rounds=rounds or self.rounds, frame_bytes=self.frame_bytes,
                             period_ps=time_ps(t.period) if t.period else 0, clock=t.clock,
                             clock_ps=time_ps(t.clock_period), ppm=t.ppm, gap_ps=time_ps(t.gap),
                             in_flight=t.in_flight)


class LoadedScenario:
    """A validated scenario with its parameter set loaded and paths resolved."""

    def __init__(self, path: Path, scenario: Scenario, params: ParamSet, measured_path: Path | None):
        self.path = path
        self.scenario = scenario
        self.params = params
        self.measured_path = measured_path


def check_not_a_scenario(path: Path, key: str, value: str, target: Path) -> None:
    """``target`` (named by ``key: value`` in the scenario ``path``) must be a parameter set, not a
    scenario (a file with ``nodes`` or ``decode``). Raises :class:`ConfigError` naming file, key, value."""
    from twin.config.errors import load_yaml
    doc = load_yaml(target)
    if isinstance(doc, dict) and ("nodes" in doc or "decode" in doc):
        raise ConfigError(path, key, value, f"{target.name} is a scenario, not a parameter set; name a "
                          "parameter set (e.g. calibrations/fitted/card_path.yaml)")


def load_scenario(path: str | Path) -> LoadedScenario:
    """Load a scenario and the parameter set it names; check every device exists there.

    Raises :class:`ConfigError` naming the file, key and value of the first problem.
    """
    path = Path(path)
    from twin.config.errors import load_yaml
    data = load_yaml(path)
    if isinstance(data, dict) and "decode" in data and "nodes" not in data:
        raise ConfigError(path, "decode", "{...}", "this is a decode scenario (it has a decode block); "
                          f"run it with `twin decode {path}`")
    sc = load_model(path, Scenario, data=data)
    cal_path = (path.parent / sc.calibration).resolve()
    if not cal_path.is_file():
        raise ConfigError(path, "calibration", sc.calibration, f"no such file ({cal_path})")
    check_not_a_scenario(path, "calibration", sc.calibration, cal_path)
    from twin.calibration.roce import RoceParamSet, load_any_params
    params = load_any_params(cal_path)
    if not sc.flows:
        for i, node in enumerate(sc.nodes):
            if node.kind != "consumer":
                continue
            roce = sc.roce_hops(node.name) is not None
            if roce != isinstance(params, RoceParamSet):
                raise ConfigError(path, "calibration", sc.calibration,
                                  f"node {node.name!r} is reached over " + ("ethernet (RoCE): the calibration must be a "
                                  "parameter set with kind: roce_path" if roce else "pcie from the link card: the "
                                  "calibration must be a card-path parameter set"))
    for i, node in enumerate(sc.nodes):
        if node.kind == "consumer" and node.device not in params.consumers:
            raise ConfigError(path, f"nodes[{i}].device", node.device,
                              f"not a consumer of {cal_path.name} (have: {', '.join(params.consumers)})")
        if node.kind == "consumer" and node.model == "rtl" and params.consumers[node.device].kind != "fpga":
            raise ConfigError(path, f"nodes[{i}].model", node.model,
                              f"model rtl stands for FPGA logic; {node.device} is a {params.consumers[node.device].kind}")
        if node.model == "rtl" and sc.frame_bytes > 180:
            raise ConfigError(path, "frame_bytes", sc.frame_bytes, f"model rtl (nodes[{i}]) takes frames of at most 180 bytes")
        if node.model != "sim" and sc.flows:
            raise ConfigError(path, f"nodes[{i}].model", node.model,
                              "a mesh (flows) runs every node as model sim; code, rtl and live run one loop at a time")
        if node.model in ("rtl", "live") and isinstance(params, RoceParamSet):
            raise ConfigError(path, f"nodes[{i}].model", node.model,
                              f"model {node.model} runs on the card path, not on a RoCE route")
        if node.bridge is not None and node.bridge.backend == "udp":
            import socket
            try:
                socket.getaddrinfo(node.bridge.host, node.bridge.port, socket.AF_INET, socket.SOCK_DGRAM)
            except (socket.gaierror, UnicodeError) as e:
                raise ConfigError(path, f"nodes[{i}].bridge.host", node.bridge.host,
                                  f"cannot resolve it to an IPv4 address ({getattr(e, 'strerror', None) or e})") from None
        if node.kind == "consumer" and node.model in ("code", "live"):
            from twin.runtime.functions import cannot_serve, lookup
            why = cannot_serve(lookup(sc.function), node.model)
            if why:
                raise ConfigError(path, "function", sc.function, f"nodes[{i}] ({node.name}) is model {node.model}: {why}")
        if node.model == "rtl" and sc.faults is not None:
            raise ConfigError(path, "faults", "{...}", f"fault injection is not available with model rtl (nodes[{i}])")
        for j, src in enumerate(node.rtl.sources if node.rtl else ()):
            if not (path.parent / src).is_file():
                raise ConfigError(path, f"nodes[{i}].rtl.sources[{j}]", src, f"no such file ({(path.parent / src).resolve()})")
        if node.rtl:
            from twin.rtl.build import check_user_block
            check_user_block(path, i, node.rtl.top, node.rtl.sources)
    measured_path = None
    if sc.measured is not None:
        measured_path = (path.parent / sc.measured).resolve()
        if not measured_path.is_file():
            raise ConfigError(path, "measured", sc.measured, f"no such file ({measured_path})")
    return LoadedScenario(path, sc, params, measured_path)
