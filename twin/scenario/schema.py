"""Scenario files: a runnable what-if study (YAML), validated with pydantic.

A scenario names a parameter set, the traffic, the frame size and encoding, and a topology of
nodes and links. Without ``flows``, every consumer node is one loop (a one-flow topology);
loops run one at a time, one consumer per run, as the seeds measured them. With ``flows``, the
whole mesh runs at once. Pure pydantic: no I/O (the loader, :mod:`twin.scenario.load`, reads files).

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
              clock_period: "4 ns", ppm: 0.0, gap: "0 ns", in_flight: 1,
              gaps: null | {distribution: fixed | uniform | exponential | file,
                            value | min, max | mean | file},   # random gaps instead of period / gap
              program: null | {waits: {for_round: -1, then: "0 ns"}}}   # open loop: a round waits for an
                                                 # earlier round's correction (twin.devices.generator.Waits)
    deadline: null | "2 us"                      # count rounds whose loop exceeds it
    faults: null | {corrupt_piece: {rounds: [..], path: request | reply},
                    drop_frame: {rounds: [..]}, stall: [{at: "50 us", duration: "20 us"}],
                    timeout: "100 us"}
    nodes:  [{name, kind: generator | link_card | consumer | nic | switch, device: <consumer in calibration>,
              model: sim | code | rtl | live, routes: {function: consumer} (link card in a mesh),
              rtl: {top: NAME, sources: [file.v, ...]},   # rtl only: a user's function core (docs/rtl.md)
              bridge: {backend: shm | cuda | udp, timeout: "1 s", cpu: null, producer_cpu: null,
                       host: 127.0.0.1, port: 0, device: 0, fault: null | {kind, round},
                       pace: null | true | false, late: "1 us", spin: "1 ms"}}]   # pace, late, spin: shm
                                                 # bridge: model live only (hw_bridge)
    faults: ... host_freeze: [{at: "50 us", duration: "20 us"}]   # CPU consumers stop; live shm: SIGSTOP
    links:  [{from, to, kind: on_card | aurora | pcie | ethernet | c2c}]   # c2c: NVLink-C2C between the two
                                                 # chips of a superchip (two consumer nodes of one host)
    qblox:  null | a Qblox Cluster as the generator (twin.devices.qblox; replaces traffic)
    flows:  [] | a mesh: [{from, function, via, rounds, traffic: <as traffic above>}] (twin.studies.mesh); faults
              and deadline apply to every flow

Errors name the file, the key and the value (:class:`twin.config.ConfigError`).
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    StrictInt,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from twin.config import Located, short
from twin.config.strict import StrictByName
from twin.devices.generator import MAX_PPM, Gaps, TrafficParams, Waits
from twin.devices.qblox import QbloxCluster
from twin.faults import FaultPlan
from twin.nodes.models import MODELS as MODELS_AVAILABLE
from twin.units import Ps, UnitError, duration_text_ps

if TYPE_CHECKING:
    import networkx as nx

    from twin.scenario.graph import Graph

_Strict = StrictByName


def _duration(v: object) -> object:
    """A scenario's duration value checked (:func:`duration_ps`); returns it as written (or None)."""
    if v is not None:
        duration_ps(v)
    return v


def duration_ps(v: object) -> int:
    """A duration as a scenario writes it (``"5 us"``) in integer picoseconds: a string with a unit,
    ASCII digits, not negative, not a non-zero value below 1 ps, at most :data:`MAX_DURATION_PS`.
    Raises ValueError saying which."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if v != v or v in (float("inf"), float("-inf")):  # .nan / .inf: no unit makes it a duration
            raise ValueError("not a finite number: write a duration with its unit, e.g. '3 us'")
        raise ValueError(f"needs a unit, e.g. '{short(v)} ns' or '{short(v)} us'")
    if not isinstance(v, str):
        raise ValueError("must be a quantity string such as '5 us'")
    try:
        written, t = duration_text_ps(v)
    except UnitError as e:
        raise ValueError(str(e)) from None
    if written < 0:
        raise ValueError("must not be negative")
    if t == 0 and written:
        raise ValueError("is not 0 but below 1 ps, the engine's resolution (integer picoseconds); write 0 or at "
                         "least 1 ps")
    if t > MAX_DURATION_PS:
        raise ValueError(f"must be at most {MAX_DURATION_PS // 10**12:,} s (a timing parameter of the loop, not a "
                         "wall-clock time)")
    return t


MAX_DURATION_PS = 1000 * 10**12  # 1,000 s: any one duration in a scenario


def duration(v: object) -> Ps:
    """A scenario's duration (``"5 us"``) read once (:func:`duration_ps`'s rules) into a :class:`Ps`:
    integer picoseconds that keep the text as written. Raises ValueError saying what is wrong."""
    return v if isinstance(v, Ps) else Ps(duration_ps(v), str(v))  # duration_ps took only a str


Duration = Annotated[Ps, PlainValidator(duration), PlainSerializer(str, return_type=str),
                     WithJsonSchema({"type": "string", "examples": ["5 us", "28 ns"]})]
"""A duration key of a scenario: written ``"5 us"``, held as integer picoseconds (:class:`Ps`),
dumped as written. A bad value is refused at load (file, key, value: :class:`twin.config.ConfigError`)."""
PLAIN_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"  # a name that becomes part of a file's name (no /, no leading .)
MAX_HORIZON_PS = 2**62  # the simulated time a run may reach (int64 picoseconds, with headroom): ~53 days


def _seconds(ps: int) -> str:
    return f"{ps / 1e12:,.6g} s"


def horizon_bound(t: "Traffic", rounds: int, gaps_ps: Sequence[int] | None = None) -> tuple[str, int, str]:
    """A bound on the last instant of ``rounds`` requests of traffic ``t`` before the round trips
    are added: ``(key, ps, how)``, ``key`` the traffic key that sets it, ``how`` its numbers in words.

    Each request leaves at most the largest of these after the one before it (or after its reply):
    the open loop's ``period``, the closed loop's ``gap``, a gaps distribution's scale (its ``max``,
    twice an exponential ``mean``), and a program that waits (``program.waits.then`` after the
    correction it waits for, which a request ``k`` back sent: ``Waits``). A gaps file
    (``gaps_ps``, its values repeated when the run is longer) counts exactly: the sum of the first
    ``rounds`` gaps. What :data:`MAX_HORIZON_PS` leaves of int64 (half of it) is the round trips'."""
    spans = [("period", int(t.period or 0)), ("gap", int(t.gap))]
    g = t.gaps
    if g is not None and g.distribution != "file":
        scale = {"fixed": g.value, "uniform": g.max, "exponential": g.mean}.get(g.distribution)
        spans.append(("gaps", (2 if g.distribution == "exponential" else 1) * int(scale or 0)))
    if t.program is not None:
        spans.append(("program.waits.then", int(t.program.waits.then)))
    key, span = max(spans, key=lambda kv: kv[1])
    bound, how = rounds * span, f"{rounds:,} requests x {_seconds(span)} ({key})"
    if g is not None and g.distribution == "file" and gaps_ps:
        n = len(gaps_ps)
        whole, rest = divmod(rounds, n)
        total = whole * sum(gaps_ps) + sum(gaps_ps[:rest])
        if total > bound:
            bound, key = total, "gaps.file"
            how = f"{rounds:,} requests at the file's {n:,} gaps (repeated)"
    return key, bound, how


def check_horizon(t: "Traffic", rounds: int, where: tuple, gaps_ps: Sequence[int] | None = None) -> None:
    """Refuse traffic whose ``rounds`` requests would run past :data:`MAX_HORIZON_PS` of simulated
    time (integer picoseconds in int64), by :func:`horizon_bound`; ``gaps_ps``: a gaps file's values.
    Raises :class:`Located` naming the key that sets the bound, with its numbers."""
    key, bound, how = horizon_bound(t, rounds, gaps_ps)
    if bound > MAX_HORIZON_PS:
        value: object = t
        for part in key.split("."):  # the key's value as the file wrote it (a duration keeps its text)
            value = getattr(value, part)
        value = "{...}" if key == "gaps" else str(value)
        raise Located(where + tuple(key.split(".")), value,
                      f"{how} reach {bound:.3e} ps ({bound / 1e12 / 86400:,.0f} days) of simulated time, past the "
                      f"2^62 ps ({MAX_HORIZON_PS / 1e12 / 86400:.0f} days) the engine's int64 picosecond clock may "
                      "reach with room for the round trips; use fewer rounds or shorter waits")


def check_control_horizon(sc: "Scenario", rounds: int) -> None:
    """A control side that times its rounds itself (a Qblox cluster's programs, a node with its own
    ``params:`` such as a QCCS's trigger period) keeps ``rounds`` of them within
    :data:`MAX_HORIZON_PS`: the first instant plus rounds x its period. Raises :class:`Located`
    naming the control side's key, with the numbers."""
    ctl = sc.control()
    own = ctl is not None and ctl.settings is not None
    if sc.qblox is None and not own:
        return
    try:
        tp = sc.traffic_params(rounds)
    except ValueError:  # a listening Qblox program asked for more rounds than it runs: check_listening_rounds
        return
    span = max(tp.period_ps, tp.gap_ps)
    bound = tp.offset_ps + rounds * span
    if bound > MAX_HORIZON_PS:
        where = ("nodes", sc.nodes.index(ctl), "params") if own and ctl is not None else ("qblox",)
        raise Located(where, "{...}", f"{rounds:,} rounds x {_seconds(span)} (the control side's period) reach "
                      f"{bound:.3e} ps ({bound / 1e12 / 86400:,.0f} days) of simulated time, past the 2^62 ps "
                      f"({MAX_HORIZON_PS / 1e12 / 86400:.0f} days) the engine's int64 picosecond clock may reach with "
                      "room for the round trips; use fewer rounds or a shorter period")


def check_listening_rounds(q: QbloxCluster, rounds: int, where: tuple) -> None:
    """Refuse more rounds than programs that wait for replies publish (they cannot be extended at a
    period: every round takes what its replies make it take). Raises :class:`Located`."""
    if q.listens() and rounds > len(q.publish_ns()):
        raise Located(where, rounds, f"the Qblox programs wait for replies and publish {len(q.publish_ns())} "
                      "rounds: they run their own rounds (raise their loop counts, or ask for fewer)")


class GapsBlock(_Strict):
    """Random gaps between requests (:class:`twin.devices.generator.Gaps`): ``distribution``
    fixed (``value``), uniform (``min``..``max``), exponential (``mean``: Poisson arrivals in open
    loop) or file (``file``: one duration per line, e.g. ``1.5 us``, relative to the scenario)."""

    distribution: Literal["fixed", "uniform", "exponential", "file"]
    value: Duration | None = None
    min: Duration | None = None
    max: Duration | None = None
    mean: Duration | None = None
    file: str | None = None

    def given(self, key: str) -> Any:
        """The value of ``key`` (a duration, or ``file``'s path text), one this distribution needs
        (:meth:`_consistent` required it; ValueError if it is not one)."""
        v = getattr(self, key)
        if v is None:
            raise ValueError(f"{self.distribution} gaps have no {key}")
        return v

    @model_validator(mode="after")
    def _consistent(self):
        need = {"fixed": ("value",), "uniform": ("min", "max"), "exponential": ("mean",), "file": ("file",)}
        want = need[self.distribution]
        for key in ("value", "min", "max", "mean", "file"):
            v = getattr(self, key)
            if key in want and v is None:
                raise Located((key,), "<missing>", f"{self.distribution} gaps need {' and '.join(want)}")
            if key not in want and v is not None:
                raise Located((key,), str(v),
                              f"does not apply to {self.distribution} gaps (they take {', '.join(want)})")
        if self.distribution == "uniform" and self.min > self.max:
            raise Located(("max",), str(self.max), f"must be >= min ({self.min})")
        if self.distribution == "exponential" and self.mean <= 0:
            raise Located(("mean",), str(self.mean), "must be > 0")
        return self


class WaitsBlock(_Strict):
    """``traffic.program.waits`` (:class:`twin.devices.generator.Waits`): each round's dependent
    operation waits for the correction of the round ``for_round`` before it (-1: the previous
    one); the round's request leaves ``then`` (whole clock cycles) after that operation."""

    for_round: int = Field(-1, le=-1, ge=-1_000_000, strict=True)
    then: Duration = duration("0 ns")


class ProgramBlock(_Strict):
    """``traffic.program``: what the generator's program waits for (``waits``)."""

    waits: WaitsBlock


class Traffic(_Strict):
    """The control side's traffic (see :class:`twin.devices.TrafficParams`)."""

    mode: Literal["closed_loop", "open_loop"] = "closed_loop"
    period: Duration | None = None
    clock: Literal["card", "independent"] = "card"
    clock_period: Duration = duration("4 ns")
    ppm: float = Field(0.0, ge=-MAX_PPM, le=MAX_PPM)
    gap: Duration = duration("0 ns")
    in_flight: int = Field(1, ge=1, le=65_536, strict=True)  # closed loop: requests in flight
    gaps: GapsBlock | None = None  # random gaps: instead of period (open loop) or gap (closed loop)
    program: ProgramBlock | None = None  # open loop: rounds wait for earlier rounds' corrections

    @model_validator(mode="after")
    def _consistent(self):
        if self.clock_period <= 0:
            raise Located(("clock_period",), str(self.clock_period), "must be > 0")
        if self.gaps is not None:
            if self.period is not None:
                raise Located(("period",), str(self.period), "gaps replace the period (request k+1 leaves a gap after "
                              "request k); give one of period and gaps")
            if self.gap:
                raise Located(("gap",), str(self.gap),
                              "gaps replace the fixed gap after a reply; give one of gap and gaps")
        elif self.mode == "open_loop":
            if self.period is None:
                raise Located(("period",), "<missing>", "open_loop traffic needs a period (e.g. '5 us') or gaps")
            if self.period <= 0 or self.period % self.clock_period:
                raise Located(("period",), str(self.period),
                              f"must be a positive whole number of clock_period ({self.clock_period}) cycles")
        elif self.period is not None:  # closed loop: would be silently ignored
            raise Located(("period",), str(self.period), "applies to open_loop traffic only (closed_loop sends the "
                          "next request when the reply arrives); set mode: open_loop or remove period")
        if self.in_flight > 1 and self.mode != "closed_loop":
            raise Located(("in_flight",), self.in_flight, "applies to closed_loop traffic only")
        if self.mode != "closed_loop" and self.gap:  # open loop sends every period: nothing waits a gap
            raise Located(("gap",), str(self.gap), "applies to closed_loop traffic only (the wait after a reply before "
                          "the next request); open_loop sends every period")
        if self.clock == "card" and self.ppm:
            raise Located(("ppm",), self.ppm, "applies only to an independent clock (clock: independent)")
        if self.program is not None and (self.mode != "open_loop" or self.gaps is not None):
            raise Located(("program",), "{...}", "a round waiting for an earlier correction delays an open-loop "
                          "stream at a fixed period (mode: open_loop, period, no gaps); closed loop already waits "
                          "for every reply")
        if self.program is not None and self.program.waits.then % self.clock_period:
            raise Located(("program", "waits", "then"), str(self.program.waits.then), "the program counts its time in "
                          f"clock edges: a whole number of clock_period ({self.clock_period}) cycles")
        return self


def _fault_rounds(v: list[int]) -> list[int]:
    """A fault's ``rounds``, checked: numbered from 1, none listed twice (Located naming the entry)."""
    seen = set()
    for i, r in enumerate(v):
        if r < 1:
            raise Located((i,), r, "rounds are numbered from 1")
        if r in seen:  # a round's fault happens once: a second listing would add nothing
            raise Located((i,), r, f"round {r} is listed twice")
        seen.add(r)
    return v


class CorruptFault(_Strict):
    """Flip a payload byte of the given rounds' request or reply on the PCIe path."""

    rounds: list[StrictInt] = Field(min_length=1)
    path: Literal["request", "reply"] = "request"
    _r = field_validator("rounds")(classmethod(lambda cls, v: _fault_rounds(v)))


class DropFault(_Strict):
    """Lose the control system's first frame of the given rounds on the link."""

    rounds: list[StrictInt] = Field(min_length=1)
    _r = field_validator("rounds")(classmethod(lambda cls, v: _fault_rounds(v)))


class StallFault(_Strict):
    """The consumer stops polling from ``at`` for ``duration``."""

    at: Duration
    duration: Duration

    @model_validator(mode="after")
    def _some_time(self):
        if self.duration <= 0:
            raise Located(("duration",), str(self.duration), "must be > 0 (a window of no time stops nothing)")
        return self


class Faults(_Strict):
    """Fault injection (see :mod:`twin.faults`)."""

    corrupt_piece: CorruptFault | None = None
    drop_frame: DropFault | None = None
    stall: list[StallFault] = []
    host_freeze: list[StallFault] = []
    timeout: Duration = duration("100 us")

    @model_validator(mode="after")
    def _some_fault(self):
        if not (self.corrupt_piece or self.drop_frame or self.stall or self.host_freeze):
            raise Located(("timeout",) if "timeout" in self.model_fields_set else (), str(self.timeout) if
                          "timeout" in self.model_fields_set else "{}", "no fault to time: give corrupt_piece, "
                          "drop_frame, stall or host_freeze (a timeout alone changes nothing), or leave faults out")
        return self

    @model_validator(mode="after")
    def _windows_apart(self):
        """Windows of one kind may not overlap: a consumer (or host) stopped twice at once stops once,
        and the second window would be counted as injected while it changes nothing."""
        for kind in ("stall", "host_freeze"):
            spans = sorted((w.at, w.at + w.duration, i)
                           for i, w in enumerate(getattr(self, kind)))
            for (s0, e0, i0), (s1, _, i1) in zip(spans, spans[1:]):
                if s1 < e0:
                    j, k = max(i0, i1), min(i0, i1)
                    raise Located((kind, j, "at"), str(getattr(self, kind)[j].at),
                                  f"overlaps {kind}[{k}] (at {getattr(self, kind)[k].at} for "
                                  f"{getattr(self, kind)[k].duration}): one stop at a time; write them as one window")
        return self

    def unreached(self, missed: dict) -> list[dict]:
        """The scenario's keys of the faults a run did not reach: ``missed`` as the engines count
        it (:func:`twin.engine.counters.not_reached`: rounds for corrupt_piece / drop_frame, window
        indices for stall / host_freeze) as ``[{"key": "faults.corrupt_piece.rounds[1]", "value":
        5000}, {"key": "faults.stall[0].at", "value": "20 ms"}, ...]`` in the file's order."""
        out = []
        for kind in ("corrupt_piece", "drop_frame"):
            listed = getattr(self, kind).rounds if getattr(self, kind) else []
            out += [{"key": f"faults.{kind}.rounds[{i}]", "value": r} for i, r in enumerate(listed)
                    if r in missed.get(kind, ())]
        for kind in ("stall", "host_freeze"):
            out += [{"key": f"faults.{kind}[{i}].at", "value": str(getattr(self, kind)[i].at)}
                    for i in missed.get(kind, ())]
        return out

    def plan(self) -> FaultPlan:
        """The :class:`FaultPlan` for the loops."""
        return FaultPlan(corrupt_rounds=frozenset(self.corrupt_piece.rounds) if self.corrupt_piece else frozenset(),
                         corrupt_path=self.corrupt_piece.path if self.corrupt_piece else "request",
                         drop_rounds=frozenset(self.drop_frame.rounds) if self.drop_frame else frozenset(),
                         stalls=tuple((int(s.at), s.at + s.duration) for s in self.stall),
                         timeout_ps=int(self.timeout),
                         host_freezes=tuple((int(s.at), s.at + s.duration) for s in self.host_freeze))


class LiveFault(_Strict):
    """Fault injection in a live ``shm`` consumer (tests of the failure handling): at request
    ``round`` it exits (die), stops answering (hang) or answers wrongly (wrong)."""

    kind: Literal["die", "hang", "wrong"]
    round: int = Field(ge=1, strict=True)


# a name that stands in a file or folder name the twin writes (a scenario's runs/<name>/, a node's
# waves.<loop>.<node>.vcd): letters, digits, _ . -, not starting with a dot (never a path)
PLAIN_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"


class Bridge(_Strict):
    """How a ``model: live`` consumer is reached (:mod:`hw_bridge`): ``backend`` shm (a consumer
    process over POSIX shared memory), cuda (a persistent kernel on an NVIDIA GPU) or udp (an agent
    serving frames over UDP); ``timeout`` for one reply; ``cpu``/``producer_cpu`` cores to pin (shm);
    ``host``/``port`` of the UDP agent; ``device`` the GPU ordinal; ``fault`` (shm, tests);
    ``pace`` (shm): the flow's rounds at their simulated instants in one C loop (true; the default
    where the flow allows it: :func:`twin.engine.paced.paced_refusal`) or round by round through
    the event model (false); ``late`` (paced: a round sent later than this after its instant is
    counted late and named), ``spin`` (paced: waits shorter than this are spun, longer ones slept
    until ``spin`` before the instant)."""

    backend: Literal["shm", "cuda", "udp"]
    timeout: Duration = duration("1 s")
    cpu: int | None = Field(None, ge=0, strict=True)
    producer_cpu: int | None = Field(None, ge=0, strict=True)
    host: str = "127.0.0.1"
    port: int = Field(0, ge=0, le=65535, strict=True)
    device: int = Field(0, ge=0, strict=True)
    fault: LiveFault | None = None
    pace: bool | None = None
    late: Duration = duration("1 us")
    spin: Duration = duration("1 ms")

    @model_validator(mode="after")
    def _consistent(self):
        if self.timeout <= 0:
            raise Located(("timeout",), str(self.timeout), "must be > 0")
        if self.pace and self.backend != "shm":
            raise Located(("pace",), self.pace, f"the paced C loop runs on the shm backend; {self.backend} runs "
                          "round by round")
        for key in ("late", "spin"):  # the paced loop's: would be silently ignored elsewhere
            if key in self.model_fields_set and (self.backend != "shm" or self.pace is False):
                raise Located((key,), str(getattr(self, key)), "applies to the paced shm loop only "
                              f"(backend {self.backend}, pace {self.pace})")
            if getattr(self, key) < 0:
                raise Located((key,), str(getattr(self, key)), "must be >= 0")
        if self.fault is not None and self.backend != "shm":
            raise Located(("fault",), self.fault.kind, "live fault injection is for the shm backend")
        for key in ("cpu", "producer_cpu"):
            if getattr(self, key) is not None and self.backend != "shm":
                raise Located((key,), getattr(self, key), f"pinning is for the shm backend, not {self.backend}")
        if self.cpu is not None and self.cpu == self.producer_cpu:
            raise Located(("producer_cpu",), self.producer_cpu, f"the same core as the consumer (cpu: {self.cpu}): "
                          "the two would take turns on it, and the run would measure preemption, not the loop; "
                          "pin them to different cores")
        for key, backend in (("host", "udp"), ("port", "udp"), ("device", "cuda")):
            if key in self.model_fields_set and self.backend != backend:  # would be silently ignored
                raise Located((key,), getattr(self, key), f"applies to the {backend} backend only, not {self.backend}")
        if self.backend == "udp" and self.port == 0:
            raise Located(("port",), self.port if "port" in self.model_fields_set else "<missing>",
                          "the udp backend needs the agent's port")
        return self

    def settings(self):
        """The :class:`hw_bridge.contract.BridgeSettings` of this block."""
        from hw_bridge.contract import BridgeSettings
        return BridgeSettings(backend=self.backend, timeout_ns=self.timeout // 1000, cpu=self.cpu,
                              producer_cpu=self.producer_cpu, host=self.host, port=self.port,
                              fault=(self.fault.kind, self.fault.round) if self.fault else None, device=self.device,
                              pace=self.pace, late_ns=self.late // 1000, spin_ns=self.spin // 1000)


class RtlBlock(_Strict):
    """A user's Verilog function core for an RTL consumer: the module ``top`` with the function
    port of docs/rtl.md, from ``sources`` (paths relative to the scenario file)."""

    top: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_$]*$")
    sources: list[str] = Field(min_length=1)


def _located(e: ValidationError, prefix: tuple, data: object) -> Located:
    """The first error of a nested model's validation as a :class:`Located` under ``prefix``."""
    err = e.errors(include_url=False)[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, Located):
        return Located(prefix + loc + cause.path, cause.value, cause.problem)
    if err["type"] == "missing":
        return Located(prefix + loc, "<missing>", "required")
    return Located(prefix + loc, err.get("input"), err["msg"].removeprefix("Value error, "))


class HostRuntimeBlock(_Strict):
    """A consumer's host runtime (:mod:`twin.devices.host_runtime`): a dispatcher, a worker queue and a
    worker between taking the request and the reply, its stages drawn from a live measurement
    (``file``: a ``twin.host_runtime/1`` file, relative to the scenario; ``wake``: the worker's wait,
    ``spin`` or ``block``)."""

    file: str = Field(min_length=1)
    wake: Literal["spin", "block"]


class Node(_Strict):
    """A node of the topology: its ``kind`` (any declared node kind: :mod:`twin.nodes.kinds`;
    generator, link_card, consumer with its ``device``, nic, switch, zhinst_qccs, ...), the
    ``model`` standing for it, for an RTL consumer optionally its own function core, for ``model:
    live`` its ``bridge``, and for a kind that declares its own parameters (``settings``) its
    ``params:`` block, validated against the kind's declaration (an unknown key is refused)."""

    # a plain name: it stands in file names the twin writes (``--trace``: waves.<loop>.<node>.vcd), so
    # no path separator, no leading dot, printable ASCII (:data:`PLAIN_NAME`)
    name: str = Field(min_length=1, max_length=100, pattern=PLAIN_NAME)
    kind: str
    device: str | None = None
    model: str = "sim"
    routes: dict[str, str] | None = None  # link_card in a mesh: function name -> consumer node
    rtl: RtlBlock | None = None
    bridge: Bridge | None = None
    params: dict[str, Any] | None = None  # a kind with its own parameters (NodeKind.settings)
    host_runtime: HostRuntimeBlock | None = None  # a consumer's dispatcher-queue-worker host
    _settings: BaseModel | None = PrivateAttr(None)
    _entry: Any = PrivateAttr(None)  # its registry entry (twin.nodes.registry.Model), asked once, at validation

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        from twin.nodes.kinds import kinds
        names = [k.name for k in kinds("node")]
        if v not in names:
            raise ValueError(f"not a node kind (node kinds: {', '.join(names)}; `twin components` lists them)")
        return v

    @property
    def place(self) -> str:
        """Where the node stands in the topology (its kind's ``place``: generator for any control side)."""
        from twin.nodes.kinds import kind
        return kind(self.kind).where

    @property
    def settings(self) -> BaseModel | None:
        """The node's validated ``params:`` block (its kind's settings model), or None."""
        return self._settings

    @model_validator(mode="after")
    def _params(self):
        from twin.nodes.kinds import kind
        k = kind(self.kind)
        cls = k.settings_class()
        if cls is None:
            if self.params is not None:
                raise Located(("params",), "{...}", f"a {self.kind} node takes no params block (its parameters come "
                              "from the calibration and the scenario's other keys)")
            return self
        data = self.params or {}
        for key in data:
            if key not in cls.model_fields:
                raise Located(("params", key), data[key], f"not a parameter of {self.kind} (parameters: "
                              f"{', '.join(p.name for p in k.params)})")
        try:
            self._settings = cls.model_validate(data)
        except ValidationError as e:
            raise _located(e, ("params",), data) from None
        return self

    @model_validator(mode="after")
    def _host_runtime(self):
        if self.host_runtime is not None and (self.kind != "consumer" or self.model != "sim"):
            raise Located(("host_runtime",), "{...}", f"a host runtime's stages are added to a simulated consumer's "
                          f"(kind consumer, model sim); this is a {self.kind} of model {self.model}")
        return self

    @property
    def entry(self):
        """The model registry's entry for this node's (kind, model) (:class:`twin.nodes.registry.Model`):
        the registry is asked once per node, when the scenario is validated; everything after reads this."""
        return self._entry

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if v not in MODELS_AVAILABLE:
            raise ValueError(f"model must be one of {', '.join(MODELS_AVAILABLE)}")
        return v

    @model_validator(mode="after")
    def _model_stands_for_kind(self):
        """The model stands for the node's kind, and the node's blocks (``rtl``, ``bridge``) are those
        the registry says the model takes (``supports["blocks"]``) and must have (``supports["needs"]``)."""
        from twin.nodes.models import model_for
        try:
            m = self._entry = model_for(self.kind, self.model)
        except KeyError as e:
            raise Located(("model",), self.model, str(e).strip("'\"")) from None
        for block, shown in (("rtl", "{...}"), ("bridge", self.bridge.backend if self.bridge else "")):
            given = getattr(self, block) is not None
            if given and block not in m.supports.get("blocks", ()):
                raise Located((block,), shown, f"a{'n' * (block[0] in 'aeior')} {block} block is for "
                              f"{_taking(block)}; this is a {self.kind} of model {self.model}")
            if not given and block in m.supports.get("needs", ()):
                raise Located((block,), "<missing>", f"model {self.model} needs a{'n' * (block[0] in 'aeior')} "
                              f"{block} block{_BLOCK_HINT.get(block, '')}")
        return self


_BLOCK_HINT = {"bridge": " (backend: shm | cuda | udp)"}


def _taking(block: str) -> str:
    """The models that take node block ``block`` (the registry's ``supports["blocks"]``), e.g.
    ``model live of a consumer``."""
    from twin.nodes.kinds import kinds
    from twin.nodes.models import models_for
    return " or ".join(f"model {m.name} of a {k.name}" for k in kinds() for m in models_for(k.name)
                       if block in m.supports.get("blocks", ()))


class Link(_Strict):
    """An edge of the topology, ``from``/``to`` node names and its ``kind``."""

    a: str = Field(alias="from")
    b: str = Field(alias="to")
    kind: Literal["on_card", "aurora", "pcie", "ethernet", "c2c"]


class Flow(_Strict):
    """A stream of requests in a mesh: from a generator, naming a function (the link card routes
    it to a consumer by function id), with its own traffic (the same keys as the top-level
    ``traffic``) and round count. ``via``: the link card when the generator reaches several."""

    a: str = Field(alias="from")
    function: str = "echo"
    via: str | None = None
    rounds: int | None = Field(None, gt=0, le=100_000_000)
    traffic: Traffic = Traffic()


Flow.model_rebuild()


class ScenarioBase(_Strict):
    """What every scenario says, a loop (``twin run``, :class:`Scenario`) or a decoder study
    (``twin decode``, :class:`twin.qec.schema.DecodeScenario`, the same plus its ``decode:``
    workload block): its name, the parameter set (``calibration``, relative to the file), the
    seed, the card's slots, the encoding, the control side's traffic (or a Qblox cluster as the
    generator) and the deadline. ``study``: the command that runs it (the loader refuses a file
    written for the other one, :func:`twin.scenario.load.read_scenario`)."""

    study: ClassVar[str] = ""
    name: str = Field(min_length=1, max_length=100, pattern=PLAIN_NAME)
    description: str = ""
    calibration: str
    seed: int = Field(0, ge=0, le=2**64 - 1, strict=True)  # numpy and stim take 64-bit seeds
    slots: int = Field(16, gt=0, le=65_536, strict=True)
    encoding: Literal["default", "classic", "per_piece"] = "default"
    traffic: Traffic = Traffic()
    qblox: QbloxCluster | None = None  # the generator is a Qblox Cluster (twin.devices.qblox)
    deadline: Duration | None = None


class Scenario(ScenarioBase):
    """A what-if study (see module docstring for the schema)."""

    study: ClassVar[str] = "run"
    measured: str | None = None
    rounds: int = Field(100_000, gt=0, le=100_000_000, strict=True)
    frame_bytes: int = Field(64, gt=0, le=65_535, strict=True)
    function: str = "echo"
    faults: Faults | None = None
    nodes: list[Node] = Field(min_length=3)
    links: list[Link] = Field(min_length=2)
    flows: list["Flow"] = []  # a mesh: several controllers, cards, consumers (twin.studies.mesh)

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
        """The whole scenario's checks, in this order: the topology graph, the traffic's horizon, a
        mesh's per-flow keys, the faults, a Qblox cluster, the function's payload."""
        self.topology()  # raises ValueError on a bad topology
        check_horizon(self.traffic, self.rounds, ("traffic",))
        self._check_mesh_keys()
        self._check_faults()
        if self.qblox is not None:
            self._check_qblox(self.qblox)
        check_control_horizon(self, self.rounds)
        if self.faults and self.faults.timeout <= 0:
            raise Located(("faults", "timeout"), str(self.faults.timeout), "must be > 0")
        from twin.runtime.functions import lookup
        need = lookup(self.function).min_payload
        if self.frame_bytes < need:
            raise Located(("frame_bytes",), self.frame_bytes,
                          f"function {self.function} needs a payload of at least {need} bytes (its syndrome)")
        return self

    def _check_mesh_keys(self) -> None:
        """A mesh (``flows``): no top-level function, traffic or measured (they are per flow, or have
        nothing to compare with); every flow's traffic within the horizon. Raises :class:`Located`."""
        if self.flows:
            for key, why in (("function", "each flow names its function (flows[].function)"),
                             ("traffic", "each flow has its traffic (flows[].traffic)"),
                             ("measured", "the published measurements are of single loops, not of a mesh")):
                if key in self.model_fields_set:
                    value = getattr(self, key)
                    raise Located((key,), value if isinstance(value, str) else "{...}",
                                  f"not for a mesh (flows): {why}")
        for i, f in enumerate(self.flows):
            check_horizon(f.traffic, f.rounds or self.rounds, ("flows", i, "traffic"))

    def _check_faults(self) -> None:
        """Faulted rounds within the last round of some loop (else they would inject nothing); a
        dropped frame needs closed-loop traffic with one request in flight (its resend must not
        overtake later requests). Raises :class:`Located`."""
        if not self.faults:
            return
        last = max(f.rounds or self.rounds for f in self.flows) if self.flows else self.rounds
        for kind in ("corrupt_piece", "drop_frame"):
            block = getattr(self.faults, kind)
            for i, r in enumerate(block.rounds if block else []):
                if r > last:
                    raise Located(("faults", kind, "rounds", i), r, f"past the scenario's last round ({last:,}"
                                  f"{' in any flow' if self.flows else ''}): it would inject nothing")
        if not self.faults.drop_frame:
            return
        loops = [(("flows", i, "traffic"), f.traffic) for i, f in enumerate(self.flows)] if self.flows else [
            (("traffic",), self.traffic)]
        for where, t in loops:
            if t.mode != "closed_loop":
                raise Located((*where, "mode"), t.mode, "faults.drop_frame needs closed_loop traffic with one "
                              "request in flight (a resent frame must not overtake later requests)")
            if t.in_flight > 1:
                raise Located((*where, "in_flight"), t.in_flight, "faults.drop_frame needs one request in "
                              "flight (a frame resent after its timeout would overtake the later requests)")

    def _check_qblox(self, q: QbloxCluster) -> None:
        """A Qblox cluster as the generator: its programs are the traffic, it reaches one link card
        across an Aurora cable, its syndrome bits fit the frame, its listening programs publish the
        rounds asked for, and a feedback answer bit lies in the reply. Raises :class:`Located`."""
        if "traffic" in self.model_fields_set:
            raise Located(("traffic",), "<set>", "a Qblox cluster's traffic comes from its programs (qblox); "
                          "leave traffic out")
        if self.flows or not self.external_control():
            raise Located(("qblox",), q.device, "a Qblox cluster reaches one link card across a "
                          "cable: an aurora link from the generator, no flows")
        if q.syndrome_bits() > 8 * self.frame_bytes:
            raise Located(("frame_bytes",), self.frame_bytes, f"the cluster publishes "
                          f"{q.syndrome_bits()} syndrome bits a round; they do not fit")
        check_listening_rounds(q, self.rounds, ("rounds",))
        fb = q.feedback
        if fb is None:
            return
        from twin.runtime.functions import lookup  # the answer bit must lie in the reply the function sends back
        try:
            rb = len(lookup(self.function).python(bytes(self.frame_bytes)))
        except (KeyError, ValueError):
            rb = self.frame_bytes
        if fb.answer_bit >= 8 * rb:
            raise Located(("qblox", "feedback", "answer_bit"), fb.answer_bit,
                          f"the reply carries {8 * rb} bits ({rb} bytes of {self.function}'s answer to a "
                          f"{self.frame_bytes}-byte frame): this bit would always read 0")

    @model_validator(mode="after")
    def _control(self):  # after _topology (definition order): the graph is sound
        ctl = self.control()
        if ctl is not None and ctl.settings is not None:  # a control kind with its own parameters checks its place
            ctl.settings.check_scenario(self, self.nodes.index(ctl))
        return self

    def graph(self) -> nx.Graph:
        """The topology as a networkx graph (:func:`twin.scenario.graph.scenario_graph`): nodes carry
        their :class:`Node`, edges their kind; a mesh's routes in ``graph["routes"]``. Raises
        ValueError (:class:`Located`) naming the key of the first problem. A mesh's graph is built
        once, as the scenario is validated (its routes searched: about 1 s for a 10,000-node mesh), and
        the same graph returned after (the scenario's nodes, links and flows are not changed after)."""
        if self.flows:
            return self._mesh_graph
        from twin.scenario.graph import scenario_graph
        return scenario_graph(self)

    @cached_property
    def _mesh_graph(self) -> nx.Graph:
        """A mesh's graph (:meth:`graph`), built on first use and kept (not a field: equality and
        dumps ignore it)."""
        from twin.scenario.graph import scenario_graph
        return scenario_graph(self)

    def topology(self) -> Graph:
        """The topology checked as :meth:`graph` checks it (the same errors), without networkx for
        a loop whose consumers hang off the card: a :class:`twin.scenario.graph.Topology` for a
        loop scenario (nodes, edges and their kinds as the graph's), the networkx graph for a mesh
        (:func:`twin.scenario.graph.check_topology`, built once: :meth:`graph`)."""
        if self.flows:
            return self.graph()
        from twin.scenario.graph import check_topology
        return check_topology(self)

    def _link_kind(self, a: str, b: str) -> str | None:
        """The kind of the link between nodes ``a`` and ``b`` (either way round), None if none: the
        kind of the graph's edge (:meth:`graph`: one edge per link, a second link refused)."""
        return next((link.kind for link in self.links if {link.a, link.b} == {a, b}), None)

    def roce_hops(self, consumer: str) -> int | None:
        """Switches on the RoCE route from the link card (the FPGA's ERNIC) to ``consumer``, or
        ``None`` when the consumer is on the card path (pcie from the link card)."""
        card = next(n.name for n in self.nodes if n.kind == "link_card")
        if self._link_kind(card, consumer) is not None:
            return None
        g = self.graph()
        from twin.scenario.graph import roce_route
        route = roce_route(g, card, consumer)
        return None if route is None else sum(1 for v in route if g.nodes[v]["node"].kind == "switch")

    # -- derived -----------------------------------------------------------------------------
    def consumers(self) -> list[Node]:
        """Consumer nodes in file order (one loop each)."""
        return [n for n in self.nodes if n.kind == "consumer"]

    def control(self) -> Node | None:
        """The control side: the (first) node whose kind stands as the generator, or None (a mesh has several)."""
        return next((n for n in self.nodes if n.place == "generator"), None)

    def control_side(self):
        """The loop's :class:`twin.engine.spec.Control`: the control node's kind, model and own parameters."""
        from twin.engine.spec import Control
        ctl = self.control()
        return Control() if ctl is None else Control(ctl.kind, ctl.model, ctl.settings)

    def external_control(self) -> bool:
        """True when the generator reaches the card over Aurora (a control system across a cable)."""
        gen = next(n.name for n in self.nodes if n.place == "generator")
        card = next(n.name for n in self.nodes if n.kind == "link_card")
        kind = self._link_kind(gen, card)
        if kind is None:
            raise KeyError((gen, card))  # as the graph's edges[gen, card]
        return kind == "aurora"

    def traffic_params(self, rounds: int | None = None, gaps_file: Path | None = None) -> TrafficParams:
        """The traffic in ps for the devices; ``rounds`` overrides the scenario's. A control node
        with its own parameters (``params:``) times its rounds itself: its ``traffic``."""
        ctl = self.control()
        if ctl is not None and ctl.settings is not None:
            return ctl.settings.traffic(rounds or self.rounds, self.frame_bytes)  # type: ignore[attr-defined]
        if self.qblox is not None:
            return self.qblox.traffic(rounds or self.rounds, self.frame_bytes)
        return traffic_params(self.traffic, rounds or self.rounds, self.frame_bytes, gaps_file)


def gaps_of(block: GapsBlock | None, gaps_file: Path | None = None) -> Gaps | None:
    """The :class:`Gaps` of a ``gaps`` block; ``gaps_file`` is its file resolved (distribution file).
    Raises ValueError naming the line of a file entry that is not a duration."""
    if block is None:
        return None
    d = block.distribution
    if d == "fixed":
        return Gaps("fixed", int(block.given("value")))  # the block's check: the distribution's keys are given
    if d == "uniform":
        return Gaps("uniform", int(block.given("min")), int(block.given("max")))
    if d == "exponential":
        return Gaps("exponential", int(block.given("mean")))
    return Gaps("file", values_ps=read_gaps(gaps_file or Path(block.given("file"))))


def read_gaps(path: Path) -> tuple[int, ...]:
    """Durations from a text file, one per line (``1.5 us``; ``#`` starts a comment). Raises
    ValueError naming the line of a bad entry."""
    from twin.config import read_input_text
    out = []
    seen: dict[str, int] = {}  # a file of measured gaps repeats its values: each text read once
    for i, line in enumerate(read_input_text(path).splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        v = seen.get(text)
        if v is None:
            try:
                v = seen[text] = duration_ps(text)
            except ValueError as e:
                raise ValueError(f"line {i}: {short(text)}: {e}") from None
        out.append(v)
    if not out:
        raise ValueError("no durations in the file")
    return tuple(out)


def traffic_params(t: Traffic, rounds: int, frame_bytes: int, gaps_file: Path | None = None) -> TrafficParams:
    """A ``traffic`` block as :class:`TrafficParams` (ps) for ``rounds`` requests of ``frame_bytes``."""
    return TrafficParams(mode=t.mode, rounds=rounds, frame_bytes=frame_bytes,
                         period_ps=int(t.period or 0), clock=t.clock, clock_ps=int(t.clock_period), ppm=t.ppm,
                         gap_ps=int(t.gap), in_flight=t.in_flight, gaps=gaps_of(t.gaps, gaps_file),
                         waits=None if t.program is None else Waits.every_round(
                             t.program.waits.for_round, t.program.waits.then // t.clock_period))


