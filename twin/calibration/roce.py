"""Parameter sets for the RoCE v2 path (the Backline tier) and the loop built from one (its fit:
:mod:`twin.fitting.roce`).

The loop: an FPGA controller (AMD Versal Premium VPK120 with the ERNIC RDMA engine; a hardware-
handshake engine issues each round on the FPGA's 200 MHz clock) -> Ethernet (switch hops) -> the
host's RDMA NIC -> PCIe -> the consumer's memory (a Threadripper PRO core's, or an MI210's) ->
the consumer answers: it writes its reply and rings the NIC's doorbell -> the NIC sends an RDMA
WRITE back -> Ethernet -> the ERNIC lands it in FPGA memory -> the handshake engine sees it.

It is the card path's loop with other parts: the FPGA plays the link card (its clock, issue and
reply read), :class:`twin.links.roce.RoceV2Path` is the wire of each direction, and the consumer
models are the card path's (:mod:`twin.devices.cpu`, :mod:`twin.devices.gpu`). So the same two
engines (event model with bytes, direct engine) run it, held equal by the same checks.

A parameter set is a YAML file with ``kind: roce_path`` (``calibrations/backline_roce.yaml`` is
the prior; ``calibrations/fitted/backline_roce.yaml`` the fitted set). Numbers of the published
summary: seed backline-paper-abstract.txt / backline-announcement.txt and the issue's table
(``calibrations/measured/backline_roce.yaml``).
"""
from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from twin.calibration.params import (
    ConsumerModel,
    FitGroup,
    HostModel,
    _DottedParams,
    _positive,
    _ps,
    _Strict,
    check_placements,
    placed_consumer,
)
from twin.config import ConfigError, Located, load_model, load_yaml
from twin.devices.generator import TrafficParams
from twin.devices.linkcard import LinkCardParams
from twin.engine.spec import LoopSpec
from twin.faults import FaultPlan
from twin.links.pcie import PcieLink
from twin.links.roce import RoceV2Packetiser, RoceV2Path
from twin.units import PS_PER_NS, freq_hz, period_ps, rate_bps, time_ps

SLOT_BYTES = 64  # the RoCE queues' slot size (Backline: 16-byte payloads in 64-byte slots)


class ControllerModel(_Strict):
    """The FPGA controller: its clock (every timestamp on its grid), the handshake engine's issue
    (request in -> RDMA WRITE handed to the ERNIC) and its read of a landed reply, the ERNIC's
    transmit (to first bit on the wire) and receive (last bit in -> bytes in FPGA memory)."""

    device: str = ""
    clock: str = "200 MHz"
    datapath_bits: int = Field(512, gt=0)
    issue_ns: float = Field(0.0, ge=0)
    reply_read_ns: float = Field(0.0, ge=0)
    ernic_tx_ns: float = Field(0.0, ge=0)
    ernic_rx_ns: float = Field(0.0, ge=0)

    _clock = field_validator("clock")(classmethod(lambda cls, v: _positive(v, freq_hz)))

    @model_validator(mode="after")
    def _on_grid(self):
        clk = period_ps(self.clock)
        if _ps(self.reply_read_ns) % clk:
            raise Located(("reply_read_ns",), self.reply_read_ns,
                          f"must be a whole number of controller clock cycles ({clk / 1000:g} ns)")
        return self


class EthernetModel(_Strict):
    """The Ethernet between the controller and the host: line rate, path MTU, VLAN tag, switches
    on the way (port-to-port latency each; store-and-forward or cut-through) and the cable."""

    rate: str = "100 Gb/s"
    mtu_bytes: Literal[256, 512, 1024, 2048, 4096] = 4096
    vlan: bool = False
    switch_latency_ns: float = Field(0.0, ge=0)
    switch_store_and_forward: bool = False
    cable_ns: float = Field(0.0, ge=0)

    _rate = field_validator("rate")(classmethod(lambda cls, v: _positive(v, rate_bps)))


class NicModel(_Strict):
    """The host's RDMA NIC: receive processing (packet in -> DMA write issued), transmit
    processing (doorbell seen -> first bit on the wire) and, unless the reply is posted inline with
    the doorbell, a DMA read of the work request and payload (a PCIe read round trip)."""

    device: str = ""
    rx_ns: float = Field(0.0, ge=0)
    tx_ns: float = Field(0.0, ge=0)
    doorbell: Literal["inline", "dma_read"] = "inline"
    dma_read_ns: float = Field(0.0, ge=0)


class RoceFitSpec(_Strict):
    """What ``twin calibrate`` fits for a RoCE set: groups fitted in order, the statistics fitted
    (``min``, ``p50``, ``p90``, ``p99``, ``p999``; each weighted alike), the fit's sample sizes."""

    measured: str
    groups: list[FitGroup] = Field(min_length=1)
    stats: list[Literal["min", "p50", "p90", "p99", "p999", "max"]] = ["min", "p50", "p99", "p999"]
    switch_hops: int = Field(0, ge=0)  # switches on the measured route (the scenario's must match)
    rounds: int = Field(20000, gt=0)
    seed: int = 1
    maxiter: int = Field(30, gt=0)
    popsize: int = Field(10, gt=0)


class RoceParamSet(_DottedParams):
    """A whole parameter set for the RoCE v2 path (see module docstring); ``get`` and
    ``with_values`` as :class:`twin.calibration.params.ParamSet`'s (dotted paths such as
    ``hosts.threadripper.host_memory.latency_ns``). ``path``: the route its requests take (``roce``:
    ethernet, an RDMA NIC and pcie; the registry's :class:`Situation` path)."""

    path: ClassVar[str] = "roce"
    name: str
    kind: Literal["roce_path"]
    description: str = ""
    controller: ControllerModel = ControllerModel()
    ethernet: EthernetModel = EthernetModel()
    nic: NicModel = NicModel()
    hosts: dict[str, HostModel]
    consumers: dict[str, ConsumerModel]
    doorbell_ns: dict[str, float] = {}
    provenance: dict[str, str] = {}
    fit: RoceFitSpec | None = None
    fitted: dict | None = None

    @model_validator(mode="after")
    def _references(self):
        check_placements(self)
        for name, c in self.consumers.items():
            if c.kind == "fpga":
                raise Located(("consumers", name, "kind"), c.kind, "the RoCE path serves cpu and gpu consumers")
        for name, v in self.doorbell_ns.items():
            if name not in self.consumers:
                raise Located(("doorbell_ns", name), v, "no such consumer")
            if v < 0:
                raise Located(("doorbell_ns", name), v, "must be >= 0")
        if self.fit:
            for gi, g in enumerate(self.fit.groups):
                for k in g.free:
                    self._check_numeric(("fit", "groups", gi, "free"), k)
                self._check_group_consumers(gi, g)
        return self

    def loop_spec(self, consumer: str, traffic: TrafficParams, seed: int, *, slots: int = 16,
                  encoding: str | None = None, external_control: bool = False, faults: FaultPlan = FaultPlan(),
                  function: int = 0, model: str = "sim", card_model: str = "sim", rtl=None,
                  bridge: object | None = None, switch_hops: int = 0) -> LoopSpec:
        """The RoCE loop for ``consumer`` (a :class:`LoopSpec` both engines run) with ``switch_hops``
        switches on its route: called by the compile step only (:func:`twin.scenario.compile.flow_spec`,
        whose keywords these are). The controller is the card, so ``aurora`` is ``None``
        (``external_control``, ``card_model`` and ``rtl`` are the card path's and change nothing here); the
        jitter is the consumer's host path class's. The queues' slots are :data:`SLOT_BYTES` (Backline:
        16-byte payloads in 64-byte slots); a message that does not fit gets the smallest multiple of 16
        bytes that holds it. Raises ``KeyError`` for an unknown consumer."""
        from twin.exchange.encoding import get_encoding
        req, rep, card = roce_paths(self, consumer, switch_hops)
        c = self.consumers[consumer]
        cp, handoff = placed_consumer(self, consumer, encoding, traffic.frame_bytes, function, traffic)
        need = get_encoding(cp.encoding).slot_bytes(traffic.frame_bytes)
        host = self.hosts[c.host]
        return LoopSpec(name=consumer, card=card, consumer=cp, handoff=handoff, traffic=traffic,
                        request_link=req, reply_link=rep,  # type: ignore[arg-type]  # any Wire serves
                        jitter_ps=int(round(host.path(c.path).jitter_ns * PS_PER_NS)), aurora=None, slots=slots,
                        seed=seed, faults=faults, function=function, model=model,
                        slot_bytes=max(SLOT_BYTES, -(-need // 16) * 16), bridge=bridge)


def is_roce_file(path: str | Path) -> bool:
    """True when the YAML file at ``path`` declares ``kind: roce_path`` (cheap peek, no validation)."""
    try:
        doc = load_yaml(path)
    except ConfigError:
        return False  # the loader that follows says what is wrong with it
    return isinstance(doc, dict) and doc.get("kind") == "roce_path"


def load_roce_params(path: str | Path) -> RoceParamSet:
    """Load and validate a RoCE parameter set; raises :class:`twin.config.ConfigError`."""
    return load_model(path, RoceParamSet)


def load_any_params(path: str | Path):
    """A card-path :class:`ParamSet` or a :class:`RoceParamSet`, by the file's ``kind``."""
    from twin.calibration.params import load_params
    return load_roce_params(path) if is_roce_file(path) else load_params(path)


def roce_paths(params: RoceParamSet, consumer: str,
               switch_hops: int = 0) -> tuple[RoceV2Path, RoceV2Path, LinkCardParams]:
    """The two wires of ``consumer``'s loop and the controller as a link card.

    Request (controller -> consumer memory): ``latency = ernic_tx + hops x (switch + cable) + cable
    + nic.rx + host path latency``; store-and-forward hops: the receiving NIC, plus each switch if
    store-and-forward; the NIC's DMA write over the host's PCIe link ends it.
    Reply (consumer -> FPGA memory): ``latency = doorbell (the consumer's MMIO write to the NIC,
    ``doorbell_ns``) + [dma_read] + nic.tx + hops x (switch + cable) + cable + ernic_rx``; store-and-forward
    hops: the ERNIC, plus store-and-forward switches; the reply's bytes cross PCIe once (the NIC
    fetching them), counted in the serialisation tail.
    Raises ``KeyError`` for an unknown consumer.
    """
    if consumer not in params.consumers:
        raise KeyError(f"no consumer {consumer!r} in parameter set {params.name!r}")
    c = params.consumers[consumer]
    host = params.hosts[c.host]
    eth, nic, ctl = params.ethernet, params.nic, params.controller
    pk = RoceV2Packetiser(eth.mtu_bytes, eth.vlan)
    rate = rate_bps(eth.rate)
    sf = 1 + (switch_hops if eth.switch_store_and_forward else 0)
    hops_ns = switch_hops * (eth.switch_latency_ns + eth.cable_ns) + eth.cable_ns
    pcie: PcieLink = host.link(c.path)
    req = RoceV2Path(rate, pk, sf, pcie.with_latency(0),
                     _ps(ctl.ernic_tx_ns + hops_ns + nic.rx_ns) + pcie.latency_ps)
    dma = nic.dma_read_ns if nic.doorbell == "dma_read" else 0.0
    rep = RoceV2Path(rate, pk, sf, pcie.with_latency(0),
                     _ps(params.doorbell_ns.get(consumer, 0.0) + dma + nic.tx_ns + hops_ns + ctl.ernic_rx_ns))
    card = LinkCardParams(clock_ps=period_ps(ctl.clock), bridge_bits=ctl.datapath_bits,
                          engine_land_ps=_ps(ctl.issue_ns), reply_read_ps=_ps(ctl.reply_read_ns),
                          reply_send_ps=0, reply_poll_period_ps=period_ps(ctl.clock))
    return req, rep, card


# -- measured numbers and the fit ---------------------------------------------------------------

STAT_Q = {"min": 0.0, "p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9, "max": 100.0}


class RoceMeasuredRow(_Strict):
    """One measured consumer: whichever of min/p50/p90/p99/p999/max were published (quantity
    strings; at least one). ``max``: the largest round trip of the run (NVQLink publishes its
    maximum FPGA -> GPU -> FPGA round trip); it needs ``max_samples`` (N, the rounds the maximum was
    taken over) and ``max_samples_source`` (where N comes from, or why it is an assumption): a
    maximum is compared as the largest of N draws (:meth:`quantile`), never at a run's length."""

    device: str
    min: str | None = None
    p50: str | None = None
    p90: str | None = None
    p99: str | None = None
    p999: str | None = None
    max: str | None = None
    max_samples: int | None = Field(None, ge=2)
    max_samples_source: str | None = None

    @field_validator("min", "p50", "p90", "p99", "p999", "max")
    @classmethod
    def _q(cls, v):
        if v is not None:
            time_ps(v)
        return v

    @model_validator(mode="after")
    def _some(self):
        if not self.stats_ps():
            raise Located(("p50",), "<missing>", "a measured consumer needs at least one of min, p50, p90, p99, "
                          "p999, max")
        if self.max is not None and (self.max_samples is None or not self.max_samples_source):
            raise Located(("max_samples",), self.max_samples, "a published max needs max_samples (the rounds it "
                          "was taken over) and max_samples_source (where that number comes from)")
        if self.max is None and self.max_samples is not None:
            raise Located(("max_samples",), self.max_samples, "max_samples without a max")
        return self

    def stats_ps(self) -> dict[str, int]:
        """The published statistics in ps, by name."""
        return {k: time_ps(getattr(self, k)) for k in STAT_Q if getattr(self, k) is not None}

    def quantile(self, stat: str) -> float:
        """The percentile (0-100) a simulated run is compared at for published ``stat``: STAT_Q's, but
        for ``max`` the ``1 - 1/N`` quantile, N = ``max_samples``: the value the largest of N
        independent draws from the run's distribution exceeds with probability 1 - (1 - 1/N)^N
        (about 63 %), the run's own length playing no part (a run needs at least N rounds for it to be
        more than the run's maximum: :func:`max_note`)."""
        if stat == "max" and self.max_samples is not None:
            return 100.0 * (1.0 - 1.0 / self.max_samples)
        return STAT_Q[stat]


STABLE_MAX_RUNS = 10  # a run of this many times N rounds has about this many rounds above its 1 - 1/N quantile


def max_note(n: int, source: str | None, rounds: int) -> str:
    """How a published maximum over ``n`` rounds is compared, in one line (N and its ``source``),
    with a warning when the simulated run of ``rounds`` is shorter than N (its 1 - 1/N quantile is
    then its own maximum) or than :data:`STABLE_MAX_RUNS` x N (the quantile then rests on fewer than
    that many rounds above it: it moves from seed to seed as a maximum does)."""
    line = f"max compared as the largest of N = {n:,} draws (the run's 1 - 1/N quantile); N: {source}"
    if rounds < n:
        line += f"; warning: the run's {rounds:,} rounds are fewer than N, its own maximum stands in"
    elif rounds < STABLE_MAX_RUNS * n:
        line += (f"; warning: the run's {rounds:,} rounds hold about {rounds // n} above that quantile: run "
                 f"{STABLE_MAX_RUNS * n:,} or more for a stable comparison")
    return line


class RoceMeasured(_Strict):
    """A RoCE measurement file (``calibrations/measured/backline_roce.yaml``)."""

    source: str
    setup: dict
    bin: str = "5 ns"
    frame_bytes: int = Field(16, gt=0)
    consumers: dict[str, RoceMeasuredRow]


def load_roce_measured(path: str | Path) -> RoceMeasured:
    """Load a RoCE measurement file; raises :class:`ConfigError`."""
    return load_model(path, RoceMeasured)
