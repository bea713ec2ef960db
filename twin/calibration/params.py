"""Parameter sets: every device and path parameter of the card path, with where it came from.

A parameter set is a YAML file (``calibrations/card_path.yaml`` is the prior that ``twin
calibrate`` starts from; ``calibrations/fitted/card_path.yaml`` the fitted set that ``twin run``
uses). Numeric keys carry their unit in the name (``_ns``) or are quantity strings. Each value's
origin (measured in a seed, fitted, derived, or an assumption) is listed under ``provenance``.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import ClassVar, Literal, Self

from pydantic import BaseModel, Field, field_validator, model_validator

from twin.config import Located, load_model
from twin.config.strict import Strict
from twin.devices.consumer import ConsumerParams
from twin.devices.cpu import cpu_core
from twin.devices.fpga import fpga_logic
from twin.devices.generator import TrafficParams
from twin.devices.gpu import gpu_persistent_kernel
from twin.devices.linkcard import LinkCardParams
from twin.devices.service import IdleCost, ServiceMode
from twin.engine.spec import LoopSpec
from twin.faults import FaultPlan
from twin.links.aurora import Aurora64B66B
from twin.links.pcie import PcieLink
from twin.units import PS_PER_NS, UnitError, check_physical, freq_hz, period_ps, rate_bps

MAX_PARAM_NS = 1e9  # 1 s: the most any one latency, period, jitter or cost of a hop may be
MAX_PARAM_COUNT = 10**9  # the most any integer of a parameter set (bytes, bits, lanes) may be


class _Strict(Strict):

    @field_validator("*")
    @classmethod
    def _ns_in_range(cls, v, info):
        """Every ``*_ns`` number at most :data:`MAX_PARAM_NS`, every integer at most
        :data:`MAX_PARAM_COUNT` (a typo of 1e300 would overflow the engine's integer arithmetic)."""
        values = v.values() if isinstance(v, dict) else (v,)  # a per-consumer table (doorbell_ns) too
        if info.field_name.endswith("_ns") and any(isinstance(x, (int, float)) and x > MAX_PARAM_NS for x in values):
            raise ValueError(f"must be at most {MAX_PARAM_NS:,.0f} ns (1 s, beyond any one hop of the loop)")
        if info.field_name.endswith("_ns") and _positive_only(cls, info.field_name) and \
                any(isinstance(x, (int, float)) and 0 < x and _ps(x) == 0 for x in values):
            raise ValueError("rounds to 0 ps, the engine's resolution (integer picoseconds), where it must be > 0 "
                             "(a period, clock or latency of no time): at least 0.001 ns")
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_PARAM_COUNT:
            raise ValueError(f"must be at most {MAX_PARAM_COUNT:,} (bytes, bits, lanes: no count of a parameter set "
                             "is larger)")
        return v


def _positive_only(model: type[BaseModel], name: str) -> bool:
    """Whether field ``name`` of ``model`` is declared ``> 0`` (``Field(gt=0)``)."""
    field = model.model_fields.get(name)
    return field is not None and any(getattr(m, "gt", None) == 0 for m in field.metadata)


def _ps(ns: float) -> int:
    return int(round(ns * PS_PER_NS))


def _positive(text: str, read) -> str:
    """Check a quantity string with ``read`` (:func:`freq_hz` or :func:`rate_bps`): > 0 and within
    the physical range (:func:`twin.units.check_physical`)."""
    try:
        v = read(text)
        if v <= 0:
            raise UnitError("must be > 0")
        check_physical(v, "frequency" if read is freq_hz else "rate", text)
    except UnitError as e:
        raise ValueError(str(e)) from None
    return text


class CardModel(_Strict):
    """The U55C link card (see :class:`twin.devices.LinkCardParams`)."""

    clock: str = "250 MHz"
    bridge_bits: int = Field(512, gt=0)
    engine_land_ns: float = Field(10.0, ge=0)
    reply_read_ns: float = Field(40.0, ge=0)
    reply_send_ns: float = Field(30.0, ge=0)
    reply_poll_period_ns: float = Field(4.0, gt=0)

    _clock = field_validator("clock")(classmethod(lambda cls, v: _positive(v, freq_hz)))

    @model_validator(mode="after")
    def _on_grid(self):
        clk = period_ps(self.clock)
        for key in ("reply_poll_period_ns", "reply_read_ns"):
            if _ps(getattr(self, key)) % clk:
                raise Located((key,), getattr(self, key),
                              f"must be a whole number of card clock cycles ({clk / 1000:g} ns)")
        return self

    def params(self) -> LinkCardParams:
        """The card's timing in integer picoseconds."""
        return LinkCardParams(clock_ps=period_ps(self.clock), bridge_bits=self.bridge_bits,
                              engine_land_ps=_ps(self.engine_land_ns), reply_read_ps=_ps(self.reply_read_ns),
                              reply_send_ps=_ps(self.reply_send_ns),
                              reply_poll_period_ps=_ps(self.reply_poll_period_ns))


class AuroraModel(_Strict):
    """The Aurora 64B/66B link from an external control system to the card."""

    lanes: int = Field(4, ge=1)
    lane_rate: str = "10.3125 Gb/s"
    link_stage_ns: float = Field(0.0, ge=0)

    _rate = field_validator("lane_rate")(classmethod(lambda cls, v: _positive(v, rate_bps)))

    def link(self) -> Aurora64B66B:
        """The link model with these parameters."""
        return Aurora64B66B(self.lanes, rate_bps(self.lane_rate), _ps(self.link_stage_ns))


class PcieModel(_Strict):
    """The PCIe link a host's paths are serialised on (the card's link)."""

    generation: int = Field(3, ge=1, le=5)
    lanes: Literal[1, 2, 4, 8, 16] = 16
    max_payload_bytes: Literal[128, 256, 512, 1024, 2048, 4096] = 256
    tlp_header_bytes: int = Field(16, ge=12, le=16)
    tlp_overhead_bytes: int = Field(8, ge=0)


class PathModel(_Strict):
    """One class of PCIe path on a host: one-way latency of a posted write on top of serialisation,
    and the scale of its exponential extra delay (queueing), both in ns."""

    latency_ns: float = Field(gt=0)
    jitter_ns: float = Field(0.0, ge=0)


class C2cModel(_Strict):
    """NVLink-C2C between the host's CPU and GPU (a Grace Hopper / Grace Blackwell superchip;
    :class:`twin.links.c2c.NvlinkC2C`): the rate of one direction, a store's one-way latency, the
    coherence miss of a load of a line the other chip wrote (served from the other chip's memory
    across the link), and the scale of the writes' exponential extra delay."""

    rate: str = "450 GB/s"
    latency_ns: float = Field(0.0, ge=0)
    coherence_miss_ns: float = Field(0.0, ge=0)
    jitter_ns: float = Field(0.0, ge=0)

    _rate = field_validator("rate")(classmethod(lambda cls, v: _positive(v, rate_bps)))

    def link(self):
        """The wire (:class:`twin.links.c2c.NvlinkC2C`) of one direction."""
        from twin.links.c2c import NvlinkC2C
        return NvlinkC2C(rate_bps(self.rate) / 8, _ps(self.latency_ns), _ps(self.coherence_miss_ns))


class HostModel(_Strict):
    """One host platform: its PCIe link and its two path classes, card <-> host memory (a CPU
    consumer's queues) and card <-> peer device (P2P: GPU, FPGA); on a superchip also the
    NVLink-C2C between its CPU and GPU (``c2c``; None: a PCIe host)."""

    description: str = ""
    pcie: PcieModel = PcieModel()
    host_memory: PathModel
    p2p: PathModel
    c2c: C2cModel | None = None

    def path(self, name: str) -> PathModel:
        """The ``"host_memory"`` or ``"p2p"`` path class."""
        return self.host_memory if name == "host_memory" else self.p2p

    def link(self, path: str) -> PcieLink:
        """The PCIe link of path class ``path`` with its one-way latency."""
        p = self.pcie
        return PcieLink(p.generation, p.lanes, p.max_payload_bytes, p.tlp_header_bytes, p.tlp_overhead_bytes,
                        _ps(self.path(path).latency_ns))


class HandoffModel(_Strict):
    """A consumer that receives each request and hands it to another consumer of the set (``to``,
    on the same host) through a device queue in that one's memory, over ``link`` (``c2c``: the
    host's NVLink-C2C; ``pcie``: the host's PCIe link into host memory); ``to`` runs the function
    (:mod:`twin.devices.handoff`)."""

    to: str
    link: Literal["c2c", "pcie"] = "c2c"


class IdleModel(_Strict):
    """What idling costs, one mechanism (:class:`twin.devices.service.IdleCost`): either
    ``cost_ns`` and ``tau_ns`` (``c(gap) = cost * (1 - exp(-gap / tau))``) or ``table``
    ([[gap_ns, cost_ns], ...], gaps increasing: log-gap interpolation, flat beyond the ends)."""

    mechanism: str
    cost_ns: float | None = Field(None, ge=0)
    tau_ns: float | None = Field(None, gt=0)
    table: list[tuple[float, float]] | None = None
    source: str = ""

    @model_validator(mode="after")
    def _one_form(self):
        if (self.table is None) == (self.cost_ns is None or self.tau_ns is None):
            raise ValueError("an idle cost needs either cost_ns and tau_ns, or table (not both)")
        if self.table is not None:
            gaps = [g for g, _ in self.table]
            if not gaps or gaps[0] <= 0 or any(b <= a for a, b in zip(gaps, gaps[1:])):
                raise Located(("table",), self.table, "gaps must be > 0 and strictly increasing")
            if any(c < 0 or c > MAX_PARAM_NS or g > MAX_PARAM_NS for g, c in self.table):
                raise Located(("table",), self.table, "costs must be >= 0; gaps and costs at most 1 s")
        return self

    def cost(self) -> IdleCost:
        """The mechanism in integer picoseconds."""
        if self.table is not None:
            return IdleCost(self.mechanism, "table", points=tuple((max(1, _ps(g)), _ps(c)) for g, c in self.table))
        return IdleCost(self.mechanism, "saturating", cost_ps=_ps(self.cost_ns), tau_ps=max(1, _ps(self.tau_ns)))


class ModeModel(_Strict):
    """One extra mode of the service time (:class:`twin.devices.service.ServiceMode`): with
    probability ``weight`` a round takes ``offset_ns`` plus a uniform draw in [0, ``width_ns``) more;
    after idling, ``f(gap)`` of the way to ``long_offset_ns`` / ``long_width_ns`` (the consumer's
    ``idle_mix``)."""

    weight: float = Field(gt=0, le=1)
    offset_ns: float = Field(ge=0)
    width_ns: float = Field(0.0, ge=0)
    long_offset_ns: float | None = Field(None, ge=0)
    long_width_ns: float | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _both_long(self):
        if (self.long_offset_ns is None) != (self.long_width_ns is None):
            raise ValueError("a long-idle block needs both long_offset_ns and long_width_ns")
        return self

    def mode(self) -> ServiceMode:
        """The mode in integer picoseconds."""
        return ServiceMode(self.weight, _ps(self.offset_ns), _ps(self.width_ns),
                           None if self.long_offset_ns is None else _ps(self.long_offset_ns),
                           None if self.long_width_ns is None else _ps(self.long_width_ns))


def reply_bytes(function: int, frame_bytes: int) -> int:
    """The reply payload's length for ``function`` (id) on a ``frame_bytes`` request: its Python
    implementation's answer to a zero payload (a function that refuses it: ``frame_bytes``)."""
    from twin.runtime.functions import lookup
    try:
        return len(lookup(function).python(bytes(frame_bytes)))
    except (KeyError, ValueError):
        return frame_bytes


class ConsumerModel(_Strict):
    """One consumer. ``kind`` picks the device model; unused keys for a kind must stay unset.

    ``poll``: ``local`` (the request queue is in the device's own memory) or ``c2c`` (it is in the
    other chip's memory across NVLink-C2C: a CPU core polling GPU memory the NIC wrote, a GPU
    polling host memory; each poll that sees a request, and a classic request's payload read,
    costs the host's ``c2c.coherence_miss_ns``; a GPU's dependent polls then run at that period).
    ``preprocess_ns_per_measurement``: pre-processing per raw measurement (payload bit) before the
    function (detector formation). ``handoff``: a second stage on another device (:class:`HandoffModel`).

    Service as a function of what is asked (cpu and gpu): ``service_ns`` is the constant part; a
    loop adds ``service_per_frame_byte_ns`` x request payload bytes, ``service_per_reply_byte_ns``
    x reply payload bytes and ``function_ns[<function name>]`` (fitted from several live runs by
    ``twin calibrate --from-live``). ``idle`` (what idling costs), ``service_modes`` and
    ``idle_mix`` (how far the modes move to their long-idle blocks after a gap) vary it per round
    (:mod:`twin.devices.service`). ``idle`` unset: a cpu or gpu takes its device class's measured idle
    prior (:mod:`twin.calibration.idle_prior`), as ``idle: prior`` says explicitly; ``idle: none``
    opts out (a live stand-in whose measured service already paid its idling: the ``--from-live``
    fitter writes it); an fpga has none. ``service_modes`` and ``idle_mix`` default to nothing."""

    kind: Literal["cpu", "gpu", "fpga"]
    device: str = ""
    host: str
    path: Literal["host_memory", "p2p"]
    encoding: Literal["classic", "per_piece"]
    poll_period_ns: float | None = Field(None, gt=0)
    poll_cost_ns: float | None = Field(None, ge=0)
    service_ns: float | None = Field(None, ge=0)
    read_ns: float | None = Field(None, ge=0)
    piece_check_ns: float = Field(0.0, ge=0)
    fence_ns: float = Field(0.0, ge=0)
    clock_ns: float | None = Field(None, gt=0)
    answer_ns: float | None = Field(None, ge=0)
    poll: Literal["local", "c2c"] = "local"
    preprocess_ns_per_measurement: float = Field(0.0, ge=0)
    handoff: HandoffModel | None = None
    service_per_frame_byte_ns: float = Field(0.0, ge=0)
    service_per_reply_byte_ns: float = Field(0.0, ge=0)
    function_ns: dict[str, float] = {}
    idle: list[IdleModel] | Literal["prior", "none"] | None = None  # None, "prior": the class's prior (uses_idle_prior)
    service_modes: list[ModeModel] = []
    idle_mix: list[tuple[float, float]] = []

    @field_validator("idle", mode="before")
    @classmethod
    def _idle_form(cls, v):
        if isinstance(v, str) and v not in ("prior", "none"):
            raise ValueError("idle: 'prior' (the device class's measured idle prior, the default for a cpu or gpu), "
                             "'none' (no idle cost) or a list of mechanisms")
        return v

    @field_validator("idle_mix")
    @classmethod
    def _mix(cls, v):
        gaps = [g for g, _ in v]
        if v and (gaps[0] <= 0 or any(b <= a for a, b in zip(gaps, gaps[1:])) or any(g > MAX_PARAM_NS for g in gaps)
                  or any(not 0 <= f <= 1 for _, f in v)):
            raise ValueError("idle_mix: [[gap_ns, fraction], ...] with gaps > 0 (at most 1 s) increasing and "
                             "fractions in [0, 1]")
        return v

    @field_validator("function_ns")
    @classmethod
    def _functions(cls, v):
        from twin.runtime.functions import lookup
        for name in v:
            try:
                lookup(name)
            except KeyError:
                raise Located((name,), name, "no such function") from None
        return v

    @model_validator(mode="after")
    def _kind_keys(self):
        need = {"cpu": ("poll_period_ns", "poll_cost_ns", "service_ns"),
                "gpu": ("poll_period_ns", "service_ns"),
                "fpga": ("clock_ns", "answer_ns")}[self.kind]
        for key in need:
            if getattr(self, key) is None:
                raise ValueError(f"a {self.kind} consumer needs {key}")
        if self.kind == "fpga":
            for key, default in (("poll", "local"), ("preprocess_ns_per_measurement", 0.0), ("handoff", None)):
                if getattr(self, key) != default:
                    raise Located((key,), getattr(self, key), "FPGA logic answers in its own memory, in one stage")
            for key in ("service_per_frame_byte_ns", "service_per_reply_byte_ns", "function_ns", "idle",
                        "service_modes", "idle_mix"):
                if getattr(self, key) and getattr(self, key) != "none":  # idle: none says what an fpga has
                    v = getattr(self, key)  # as the file wrote it, not the models' repr
                    v = [m.model_dump(exclude_defaults=True) if isinstance(m, BaseModel) else m for m in v] \
                        if isinstance(v, list) else v
                    raise Located((key,), v, "an fpga consumer's answer time is answer_ns in "
                                  "whole clock cycles: this cpu/gpu key does not apply")
        if self.poll == "c2c":
            other = {"cpu": "p2p", "gpu": "host_memory"}[self.kind]
            if self.path != other:
                raise Located(("path",), self.path, f"a {self.kind} polling over c2c has its queue in the other chip's "
                              f"memory: the NIC or card writes it on the {other} path")
        return self

    @property
    def uses_idle_prior(self) -> bool:
        """Whether the consumer takes its class's idle prior (:mod:`twin.calibration.idle_prior`): a cpu
        or gpu whose entry leaves ``idle`` unset (the default) or says ``idle: prior`` (an fpga that
        says ``prior`` is refused at load: no prior is measured); not with ``idle: none`` or its own list."""
        return self.kind in ("cpu", "gpu") and self.idle in (None, "prior")

    def service_total_ns(self, frame_bytes: int = 0, reply: int = 0, function: str = "echo") -> float:
        """The constant service time (ns) for one request: ``service_ns`` plus the per-byte and
        per-function terms."""
        return (self.service_ns + self.service_per_frame_byte_ns * frame_bytes
                + self.service_per_reply_byte_ns * reply + self.function_ns.get(function, 0.0))

    def params(self, encoding: str | None = None, frame_bytes: int = 0, function: int = 0, c2c=None) -> ConsumerParams:
        """Device parameters in ps; ``encoding`` overrides the consumer's own; ``frame_bytes`` and
        ``function`` (id) are what each request asks (their service terms, if any, are added to
        the service time); ``c2c`` (the host's :class:`C2cModel`) sets the poll's cost when ``poll``
        is ``c2c``. Raises ValueError when the service terms add up to less than 0, or for a ``c2c``
        poll without ``c2c``."""
        enc = encoding or self.encoding
        pre = _ps(self.preprocess_ns_per_measurement)
        if self.kind == "fpga":
            return fpga_logic(_ps(self.clock_ns), _ps(self.answer_ns), enc)
        from twin.runtime.functions import lookup
        try:
            fname = lookup(function).name
        except KeyError:
            fname = ""
        rb = reply_bytes(function, frame_bytes) if self.service_per_reply_byte_ns else 0
        svc = self.service_total_ns(frame_bytes, rb, fname)
        if svc < 0:
            raise ValueError(f"consumer {self.device!r}: its service terms add up to {svc:g} ns (< 0) for "
                             f"{frame_bytes} B and function {fname}")
        period, cost, read = _ps(self.poll_period_ns), self.poll_cost_ns, self.read_ns
        if self.poll == "c2c":
            if c2c is None:
                raise ValueError("poll c2c needs the host's c2c section")
            miss = _ps(c2c.coherence_miss_ns)
            if self.kind == "gpu":  # dependent loads across the link: one answer per miss
                period = max(period, miss)
            cost = read = c2c.coherence_miss_ns
        if self.kind == "gpu":
            p = gpu_persistent_kernel(period, _ps(svc), enc, _ps(self.fence_ns), _ps(self.piece_check_ns))
        else:
            p = cpu_core(period, _ps(cost), _ps(svc), enc, None if read is None else _ps(read),
                         _ps(self.piece_check_ns), _ps(self.fence_ns))
        p = replace(p, preprocess_ps_per_measurement=pre)
        idle = tuple(m.cost() for m in self.idle) if isinstance(self.idle, list) else ()
        modes = tuple(m.mode() for m in self.service_modes)
        mix = tuple((max(1, _ps(g)), float(f)) for g, f in self.idle_mix)
        return replace(p, idle=idle, modes=modes, idle_mix=mix) if idle or modes else p


class FitGroup(_Strict):
    """Consumers fitted together and the free parameters they fix: dotted path -> ``[low, high]``
    or ``[low, high, step]`` (the value is rounded to a multiple of ``step``, e.g. a clock cycle)."""

    consumers: list[str] = Field(min_length=1)
    free: dict[str, tuple[float, float] | tuple[float, float, float]] = Field(min_length=1)

    @field_validator("free")
    @classmethod
    def _bounds(cls, v):
        for key, b in v.items():
            if not b[0] < b[1]:
                raise Located((key,), list(b), "bounds must be [low, high] with low < high")
            if len(b) == 3 and b[2] <= 0:
                raise Located((key,), list(b), "the step (third number) must be > 0")
        return v

    def snap(self, key: str, value: float) -> float:
        """``value`` rounded to the key's step (if it has one), kept within its bounds."""
        b = self.free[key]
        if len(b) == 3:
            value = min(max(round(value / b[2]) * b[2], b[0]), b[1])
        return float(value)


class FitSpec(_Strict):
    """What ``twin calibrate`` fits: groups fitted in order (later groups see earlier results),
    ties (dotted path <- dotted path) applied after each group, and the fit's sample sizes."""

    measured: str
    groups: list[FitGroup] = Field(min_length=1)
    tie: dict[str, str] = {}
    rounds: int = Field(4000, gt=0)
    seed: int = 1
    maxiter: int = Field(40, gt=0)
    popsize: int = Field(10, gt=0)


class _DottedParams(_Strict):
    """What every parameter set (card path, RoCE path) shares: reading and replacing a parameter by
    its dotted path, and the checks of a fit section's names. A subclass has ``consumers``."""

    def get(self, dotted: str) -> float:
        """The value at a dotted path such as ``hosts.epyc7282.jitter_ns``; raises KeyError or
        AttributeError when a part of the path names nothing."""
        obj: object = self
        for part in dotted.split("."):
            obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
        return obj  # type: ignore[return-value]

    def with_values(self, values: dict[str, float]) -> Self:
        """A copy (of the same class) with the dotted paths in ``values`` replaced (validated
        again); raises KeyError when a path's last part is not a parameter."""
        data = self.model_dump()
        for dotted, v in values.items():
            parts = dotted.split(".")
            cur = data
            for part in parts[:-1]:
                cur = cur[part]
            if parts[-1] not in cur:
                raise KeyError(f"no parameter {dotted!r}")
            cur[parts[-1]] = v
        return type(self).model_validate(data)

    def _check_numeric(self, where: tuple, key: str) -> None:
        """Raise :class:`Located` at ``where`` unless the dotted path ``key`` names a number."""
        try:
            value = self.get(key)
        except (KeyError, AttributeError):
            raise Located(where, key, "no such parameter") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Located(where, key, "not a numeric parameter")

    def _check_group_consumers(self, gi: int, group: FitGroup) -> None:
        """Raise :class:`Located` when fit group ``gi`` names a consumer the set does not have."""
        for ci, c in enumerate(group.consumers):
            if c not in self.consumers:  # type: ignore[attr-defined]
                raise Located(("fit", "groups", gi, "consumers", ci), c, "no such consumer")


class ParamSet(_DottedParams):
    """A whole parameter set for the card path (see module docstring). ``path``: the route its
    requests take (``card``: pcie from the link card; the registry's :class:`Situation` path)."""

    path: ClassVar[str] = "card"

    name: str
    description: str = ""
    card: CardModel = CardModel()
    aurora: AuroraModel = AuroraModel()
    hosts: dict[str, HostModel]
    consumers: dict[str, ConsumerModel]
    provenance: dict[str, str] = {}
    fit: FitSpec | None = None
    fitted: dict | None = None

    @model_validator(mode="after")
    def _references(self):
        check_placements(self)
        if self.fit:
            named = [(("fit", "groups", gi, "free"), k) for gi, g in enumerate(self.fit.groups) for k in g.free]
            named += [(("fit", "tie"), k) for k in self.fit.tie]
            named += [(("fit", "tie", k), v) for k, v in self.fit.tie.items()]
            for where, key in named:
                self._check_numeric(where, key)
            for gi, g in enumerate(self.fit.groups):
                self._check_group_consumers(gi, g)
        return self

    def loop_spec(self, consumer: str, traffic: TrafficParams, seed: int, *, slots: int = 16,
                  encoding: str | None = None, external_control: bool = False, faults: FaultPlan = FaultPlan(),
                  function: int = 0, model: str = "sim", card_model: str = "sim", rtl=None,
                  bridge: object | None = None, switch_hops: int = 0) -> LoopSpec:
        """The card-path loop for ``consumer``: called by the compile step only
        (:func:`twin.scenario.compile.flow_spec`, whose keywords these are).

        ``encoding`` overrides the consumer's own (``None`` keeps it). ``external_control`` puts the
        generator behind the Aurora link (a control system across a cable) instead of on the card.
        ``model`` / ``card_model``: what stands for the consumer and the card; ``rtl``: RTL options
        (:class:`twin.rtl.loop.RtlConfig`). Raises ``KeyError`` for an unknown consumer, ValueError
        for ``switch_hops`` (a card path has no Ethernet switch).
        """
        if consumer not in self.consumers:
            raise KeyError(f"no consumer {consumer!r} in parameter set {self.name!r}")
        if switch_hops:
            raise ValueError(f"switch_hops {switch_hops}: a card-path loop crosses no Ethernet switch")
        c = self.consumers[consumer]
        host = self.hosts[c.host]
        link = host.link(c.path)
        cp, handoff = placed_consumer(self, consumer, encoding, traffic.frame_bytes, function, traffic)
        return LoopSpec(name=consumer, card=self.card.params(), consumer=cp, handoff=handoff, traffic=traffic,
                        request_link=link, reply_link=link,
                        jitter_ps=int(round(host.path(c.path).jitter_ns * PS_PER_NS)),
                        aurora=self.aurora.link() if external_control else None, slots=slots, seed=seed,
                        faults=faults, function=function, model=model, card_model=card_model, rtl=rtl, bridge=bridge)


def check_placements(ps) -> None:
    """Every consumer of parameter set ``ps`` names a host it has, polls over c2c or hands off over
    c2c only on a host with a c2c section, and hands off to another consumer of the same host that
    does not itself hand off. Raises :class:`Located`."""
    for name, c in ps.consumers.items():
        if c.host not in ps.hosts:
            raise Located(("consumers", name, "host"), c.host, f"no such host (have: {', '.join(ps.hosts)})")
        host = ps.hosts[c.host]
        if c.poll == "c2c" and host.c2c is None:
            raise Located(("consumers", name, "poll"), c.poll, f"host {c.host!r} has no c2c section (NVLink-C2C)")
        h = c.handoff
        if h is None:
            continue
        where = ("consumers", name, "handoff")
        if h.to == name or h.to not in ps.consumers:
            raise Located(where + ("to",), h.to, "must name another consumer of the set")
        to = ps.consumers[h.to]
        if to.host != c.host:
            raise Located(where + ("to",), h.to,
                          f"is on host {to.host!r}, not {c.host!r}: a hand-off stays in one node")
        if to.handoff is not None or to.kind == "fpga":
            raise Located(where + ("to",), h.to, "the serving stage must be a cpu or gpu that answers itself")
        if h.link == "c2c" and host.c2c is None:
            raise Located(where + ("link",), h.link, f"host {c.host!r} has no c2c section (NVLink-C2C)")


def serving_kind(ps, consumer: str) -> str:
    """The device kind that runs consumer ``consumer``'s function: its own, or (a hand-off) the
    serving stage's. Raises KeyError."""
    c = ps.consumers[consumer]
    return ps.consumers[c.handoff.to].kind if c.handoff is not None else c.kind


def with_idle_prior(params: ConsumerParams, c: ConsumerModel, traffic) -> ConsumerParams:
    """``params`` with its class's idle prior where consumer ``c`` takes one
    (:attr:`ConsumerModel.uses_idle_prior`) and ``traffic`` can leave it idle past the prior's zero
    (:func:`twin.calibration.idle_prior.may_idle_past`); else ``params`` unchanged."""
    if traffic is None or not c.uses_idle_prior:
        return params
    from twin.calibration.idle_prior import class_idle, may_idle_past
    prior = class_idle(c.kind)
    if prior is None or not may_idle_past(traffic, prior.zero_below_ns):
        return params
    return replace(params, idle=prior.costs())


def placed_consumer(ps, consumer: str, encoding: str | None = None, frame_bytes: int = 0, function: int = 0,
                    traffic=None):
    """Consumer ``consumer`` of parameter set ``ps`` as the engine takes it: its
    :class:`ConsumerParams` (its poll placed: a ``c2c`` poll costs the host's coherence miss; with
    ``traffic``, its class's idle prior where it takes one: :func:`with_idle_prior`) and its second
    stage (:class:`twin.devices.handoff.HandoffSpec`, or None). Raises KeyError."""
    from twin.devices.handoff import HandoffSpec
    c = ps.consumers[consumer]
    host = ps.hosts[c.host]
    params = with_idle_prior(c.params(encoding, frame_bytes, function, c2c=host.c2c), c, traffic)
    h = c.handoff
    if h is None:
        return params, None
    to = ps.consumers[h.to]
    stage = to.params(params.encoding, frame_bytes, function, c2c=host.c2c)
    if h.link == "c2c":
        wire, jitter = host.c2c.link(), host.c2c.jitter_ns
    else:
        wire, jitter = host.link("host_memory"), host.host_memory.jitter_ns
    return params, HandoffSpec(h.to, stage, wire, int(round(jitter * PS_PER_NS)), h.link)


def load_params(path: str | Path) -> ParamSet:
    """Load and validate a parameter set; raises :class:`twin.config.ConfigError`."""
    return load_model(path, ParamSet)
