"""The decode scenario's schema: what a ``decode:`` scenario may say (pure pydantic; loading is
:mod:`twin.qec.load`'s, running :mod:`twin.studies.decode`'s). A decode scenario is a run scenario's common keys
(:class:`twin.scenario.schema.ScenarioBase`: name ... deadline, one set of validators) plus
``hosting``, ``control`` and the ``decode:`` workload block. What a placement's model can do
(its decoder time, parallel workers, a bridge block) is asked of the model registry
(:mod:`twin.nodes.models`), not written here.
Schema (keys; optional keys show their default)::

    name: str
    description: ""
    calibration: path to a parameter set, relative to this file
    hosting: ../calibrations/hosting.yaml   # hosting-mode costs (twin hosting --fit writes it)
    seed: 0
    slots: 16
    encoding: default | classic | per_piece  # default: classic, as the seeds' sessions serving user functions
    control: on_card | aurora                # where the control system sits (aurora: across a cable)
    traffic: {mode: closed_loop | open_loop, period: "1 us", clock: card | independent,
              clock_period: "4 ns", ppm: 0.0, gap: "0 ns"}   # open loop: one shot per period
    deadline: null | "2 us"                  # per request: card has the correction before it
    decode:
      code: rep | steane | surface | bb72 | bb90 | bb108 | bb144 | bb288   # or circuit:, not both
      circuit: null | FILE.stim              # any stim circuit with detectors and observables (relative to this file)
      distance: 3                            # a BB code's is its own (give none, or that one)
      rounds: 1                              # syndrome-extraction rounds per shot
      p: 0.001                               # physical error rate
      noise: circuit | code_capacity | phenomenological   # default: circuit; a BB code: phenomenological
      shots: 100000
      per: shot | round | window             # one request per shot, per QEC round, or per window
      window: null | {kind: streaming | parallel, commit: C, buffer: B}   # per: window (matching only):
                                             # streaming: each request carries C + B rounds, the decoder
                                             # commits C and slides by C (or rounds: W = C + B, not both);
                                             # parallel: A windows (B + C + B rounds, commit their C-round
                                             # core, independent) and B windows (the B-round seams, once both
                                             # neighbouring A windows passed their boundary)
      frame_bytes: null                      # default: the syndrome in whole 16-byte pieces
      decoder: lookup | matching | function | bposd | tesseract | relay_bp | "sinter:pkg.module:Class"
      function: null | "package.module:callable" | "lib.so:symbol" | a registered function name  # decoder: function
      cost: {how: measured | model | host_timed | fitted, scale: 1.0, fixed: null | "300 ns",
             file: null | ../calibrations/measured/decoders/X.yaml}   # scale: all but model; fixed: model
                                             # measured (default): the decoder's per-call file for the
                                             # workload (twin/qec/percall.py), file: another one
      feedback: null | {slack: "0 ns",       # the circuit's classically controlled gates wait for the loop
            idle: {model: t1t2, t1: "100 us", t2: "80 us"} | {model: depolarizing, rate_per_us: 0.001},
            qubits: data | all,              # which qubits idle meanwhile (data: measured at most once)
            inject: ["2 us", ...]}           # latencies added to the decoder's time: one more run each
      interval: wilson | clopper_pearson     # confidence interval of the logical error rate
      confidence: 0.95
      placements: [{device: <consumer in calibration>, mode: inline | worker | external_self |
            external_routed | chain, workers: 1,     # N parallel decoders sharing the request queue
            order: in_order | as_ready,              # workers > 1: reply order; one loop per placement
            call: native | python,                   # cost how measured: the decoder called natively or
                                                     # through its Python binding (default native)
            devices: null | [A, B, ...],             # instead of device: one open-loop stream over K >= 2
            dispatch: round_robin}]                  # devices, request i to devices[i mod K] (devices only)
"""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from twin.config import Located
from twin.config.strict import StrictByName
from twin.nodes.models import COST_MODEL, model_for, models_for
from twin.qec.hosting import MODES
from twin.scenario import Bridge, _duration
from twin.scenario.schema import ScenarioBase

_Strict = StrictByName


CONSUMER_MODELS = tuple(m.name for m in models_for("consumer"))  # what may stand for a placement's device


def _supports(model: str, key: str):
    """What the consumer model ``model`` supports under ``key`` (:mod:`twin.nodes.models`), or None."""
    return model_for("consumer", model).supports.get(key)


def needs_bridge(model: str) -> bool:
    """Whether consumer model ``model`` stands behind a bridge block (``supports["needs"]``: live)."""
    return "bridge" in (_supports(model, "needs") or ())


def cost_timed(model: str) -> bool:
    """Whether a consumer model's decoder time is the cost model's (:class:`twin.qec.cost.CostModel`;
    sim and code), not its own (rtl: the Verilog's cycles; live: measured)."""
    return _supports(model, "decoder_time") == COST_MODEL


def cost_timed_models(last: str) -> str:
    """The consumer models :func:`cost_timed`, in words (``sim or code``; ``last``: the word before the last)."""
    return _consumers(lambda m: m.get("decoder_time") == COST_MODEL, last)


def _bridgeless(supports: dict) -> bool:
    """Whether a consumer model's ``supports`` say it needs no bridge block."""
    return "bridge" not in supports.get("needs", ())


def _consumers(which, last: str) -> str:
    """The consumer models whose supports mapping ``which`` accepts, as a list in words
    (``sim, code or rtl``; ``last``: the word before the last one; ``(none registered)``)."""
    names = [m.name for m in models_for("consumer") if which(m.supports)]
    if len(names) < 2:
        return names[0] if names else "(none registered)"
    return f"{', '.join(names[:-1])} {last} {names[-1]}"


class Cost(_Strict):
    """How the decoder's compute time is accounted (:class:`twin.qec.cost.CostModel`): ``measured``
    (default: the decoder's per-call measurement for the workload, :mod:`twin.qec.percall`, the
    shipped file or ``file``, carried to each placement's CPU), ``model`` (the batch-amortised cost
    table, or ``fixed``), ``host_timed`` (timed now on this host, batched), ``fitted`` (the
    across-distance fit ``file`` written by ``twin calibrate decoder --fit``); files relative to the
    scenario. ``scale``: a further factor on the time (all but model)."""

    how: Literal["measured", "model", "host_timed", "fitted"] = "measured"
    scale: float = Field(1.0, ge=1e-3, le=1e3)  # x a host's timing: 1/1000 to 1000
    fixed: str | None = None
    file: str | None = None
    _d = field_validator("fixed", mode="before")(classmethod(lambda cls, v: _duration(v)))

    @model_validator(mode="before")
    @classmethod
    def _fixed_is_model(cls, v):  # a stated time with no how is the cost model's fixed time
        if isinstance(v, dict) and v.get("fixed") is not None and "how" not in v:
            return {**v, "how": "model"}
        return v

    @model_validator(mode="after")
    def _applies(self):  # each would be silently ignored under the other ``how``
        if self.how == "model" and "scale" in self.model_fields_set and self.scale != 1.0:
            raise Located(("scale",), self.scale, "applies to how: measured, host_timed or fitted only (it scales "
                          "a host's timing); under how: model give fixed, or use one of those")
        if self.how != "model" and self.fixed is not None:
            raise Located(("fixed",), self.fixed, f"applies to how: model only ({self.how} times the decoder "
                          "on a host); give one of fixed and how: " + self.how)
        if self.how == "fitted" and self.file is None:
            raise Located(("file",), "<missing>", "how: fitted needs the calibration file (twin calibrate decoder "
                          "--fit writes one, e.g. ../calibrations/measured/decoders/...yaml)")
        if self.how not in ("fitted", "measured") and self.file is not None:
            raise Located(("file",), self.file, f"applies to how: measured or fitted only (how is {self.how})")
        return self


class Placement(_Strict):
    """Where the decoder runs: a consumer of the parameter set (``device``), or several sharing the
    one stream (``devices``, at least two: request ``i`` goes to ``devices[i mod K]``, ``dispatch:
    round_robin``, :mod:`twin.engine.share`), a hosting mode, the model that stands for the consumer
    (``sim``, ``code``, ``rtl``, ``live`` with its ``bridge``), the number of parallel decoders
    sharing each device's request queue (``workers``) and their reply ``order``."""

    device: str | None = None
    devices: list[str] | None = None
    dispatch: Literal["round_robin"] | None = None
    mode: Literal[MODES] = "inline"  # type: ignore[valid-type]
    model: Literal[CONSUMER_MODELS] = "sim"  # type: ignore[valid-type]
    bridge: Bridge | None = None
    workers: int = Field(1, ge=1, le=1024, strict=True)
    order: Literal["in_order", "as_ready"] = "in_order"
    call: Literal["native", "python"] = "native"

    @model_validator(mode="after")
    def _devices(self):
        if self.device is not None and self.devices is not None:
            raise Located(("devices",), self.devices, "give device (one decoder device) or devices (one stream "
                          "shared over several), not both")
        if self.device is None and self.devices is None:
            raise Located(("device",), "<missing>", "name the consumer the decoder runs on (device: NAME, or "
                          "devices: [A, B] for one stream shared over several)")
        if self.devices is not None and len(self.devices) < 2:
            raise Located(("devices",), self.devices, "a stream shared over devices needs at least 2 of them; for "
                          "one, write device: NAME")
        if self.dispatch is not None and self.devices is None:
            raise Located(("dispatch",), self.dispatch, "dispatch spreads one stream over several devices: it "
                          "applies with devices: [A, B, ...]")
        if self.devices is not None and needs_bridge(self.model):
            raise Located(("devices",), self.devices, f"a {self.model} placement is one device behind its bridge "
                          f"block; share a stream over {_consumers(_bridgeless, 'or')} devices")
        return self

    def key(self) -> dict:
        """Every key's value, defaults filled in (``dispatch`` of a shared stream: round_robin), so
        two placements that run the same study compare equal."""
        d = self.model_dump()
        if self.devices is not None:
            d["dispatch"] = self.dispatch or "round_robin"
        return d

    @property
    def names(self) -> list[str]:
        """The placement's devices in dispatch order (one for ``device``)."""
        return list(self.devices) if self.devices is not None else [self.device]

    @property
    def dispatch_used(self) -> str | None:
        """The dispatch of a shared stream (``round_robin`` unless given), None for one device."""
        return (self.dispatch or "round_robin") if self.shared else None

    @property
    def shared(self) -> bool:
        """One stream over several devices."""
        return self.devices is not None

    @property
    def where(self) -> str | list[str]:
        """What :func:`twin.qec.loop.run_decode` takes: the device, or the list of devices."""
        return self.names if self.shared else self.device

    def device_key(self, i: int, j: int) -> str:
        """The scenario key naming the placement's ``j``-th device (placement ``i``)."""
        return f"decode.placements[{i}].devices[{j}]" if self.shared else f"decode.placements[{i}].device"

    @model_validator(mode="after")
    def _workers(self):
        if self.workers > 1 and _supports(self.model, "workers") == 1:
            raise Located(("workers",), self.workers, f"a {self.model} consumer is its own design (one serving "
                          "engine); parallel decoders are modelled for "
                          f"{_consumers(lambda m: m.get('workers') != 1, 'and')} placements")
        if "order" in self.model_fields_set and self.workers == 1:
            raise Located(("order",), self.order, "one worker replies in order either way; order applies to "
                          "workers > 1")
        return self

    @model_validator(mode="after")
    def _bridge(self):
        needs = needs_bridge(self.model)
        if needs and self.bridge is None:
            raise Located(("bridge",), "<missing>", f"model {self.model} needs a bridge block (backend: shm | cuda | "
                          "udp)")
        if not needs and self.bridge is not None:
            raise Located(("bridge",), self.bridge.backend, f"a bridge block is for model "
                          f"{_consumers(lambda m: not _bridgeless(m), 'or')}, not {self.model}")
        return self


class Window(_Strict):
    """A decoding window: ``kind`` streaming (:mod:`twin.qec.window`: windows of ``commit + buffer``
    rounds that commit ``commit`` and slide by it, each round decoded as it arrives) or parallel
    (:mod:`twin.qec.parallel_window`: A windows of ``commit`` core rounds with ``buffer`` rounds on
    each side, decoded independently, B windows of ``buffer`` rounds filling the seams);
    ``commit`` C; ``buffer`` B. A streaming window may give ``rounds`` W = C + B instead of B."""

    kind: Literal["streaming", "parallel"] = "streaming"
    rounds: int | None = Field(None, ge=1, le=101, strict=True)
    commit: int = Field(ge=1, le=101, strict=True)
    buffer: int | None = Field(None, ge=0, le=100, strict=True)

    @model_validator(mode="after")
    def _commit(self):
        if self.rounds is not None and self.buffer is not None:
            raise Located(("buffer",), self.buffer, f"give buffer or rounds, not both (rounds {self.rounds} is "
                          "commit + buffer)")
        if self.rounds is None and self.buffer is None:
            raise Located(("buffer",), "<missing>", "a window needs buffer: B (rounds past the commit region)")
        if self.rounds is not None and self.kind == "parallel":
            raise Located(("rounds",), self.rounds, "a parallel window takes commit and buffer (an A window "
                          "holds buffer + commit + buffer rounds)")
        if self.rounds is not None and self.commit > self.rounds:
            raise Located(("commit",), self.commit, f"a window commits at most its {self.rounds} rounds")
        return self

    def spec(self):
        """The :class:`twin.qec.window.WindowSpec`."""
        from twin.qec.window import WindowSpec
        buffer = self.buffer if self.buffer is not None else self.rounds - self.commit
        return WindowSpec(self.kind, self.commit, buffer)


class Idle(_Strict):
    """The idle-noise model (:class:`twin.qec.idle_noise.IdleNoise`): ``t1t2`` with ``t1`` and
    ``t2`` (durations, ``t2 <= 2 t1``), or ``depolarizing`` with ``rate_per_us``."""

    model: Literal["t1t2", "depolarizing"]
    t1: str | None = None
    t2: str | None = None
    rate_per_us: float | None = Field(None, ge=0, le=1e6)
    _d = field_validator("t1", "t2", mode="before")(classmethod(lambda cls, v: _duration(v)))

    @model_validator(mode="after")
    def _params(self):
        from twin.units import time_ps
        if self.model == "t1t2":
            if self.rate_per_us is not None:
                raise Located(("rate_per_us",), self.rate_per_us, "applies to model: depolarizing (t1t2 takes t1, t2)")
            for k in ("t1", "t2"):
                if getattr(self, k) is None or time_ps(getattr(self, k)) <= 0:
                    raise Located((k,), getattr(self, k) or "<missing>",
                                  "model t1t2 needs t1 and t2 > 0 (e.g. '100 us')")
            if time_ps(self.t2) > 2 * time_ps(self.t1):
                raise Located(("t2",), self.t2, f"above 2 t1 ({self.t1}): no qubit has it (the twirled channel's p_z "
                              "would be negative)")
        else:
            for k in ("t1", "t2"):
                if getattr(self, k) is not None:
                    raise Located((k,), getattr(self, k), "applies to model: t1t2 (depolarizing takes rate_per_us)")
            if self.rate_per_us is None:
                raise Located(("rate_per_us",), "<missing>", "model depolarizing needs rate_per_us (e.g. 0.001)")
        return self

    def noise(self):
        """The :class:`twin.qec.idle_noise.IdleNoise` (ps)."""
        from twin.qec.idle_noise import IdleNoise
        from twin.units import time_ps
        if self.model == "t1t2":
            return IdleNoise("t1t2", time_ps(self.t1), time_ps(self.t2))
        return IdleNoise("depolarizing", rate_per_us=self.rate_per_us)


class FeedbackTiming(_Strict):
    """A circuit's classically controlled gates wait for the loop (:mod:`twin.qec.feedback`):
    ``slack`` (the program time from a round's syndrome measured to the gate that needs its
    correction), the ``idle`` noise the stall costs, the ``qubits`` that idle, and ``inject``:
    latencies added to the decoder's time, one more run of each placement each (the LER vs
    latency curve; the placement's own run is the first point)."""

    slack: str = "0 ns"
    idle: Idle
    qubits: Literal["data", "all"] = "data"
    inject: list[str] = Field(default_factory=list, max_length=32)
    _d = field_validator("slack", mode="before")(classmethod(lambda cls, v: _duration(v)))

    @field_validator("inject", mode="before")
    @classmethod
    def _inject(cls, v):
        from twin.units import time_ps
        if isinstance(v, list):
            seen = set()
            for x in v:
                _duration(x)
                if time_ps(x) <= 0:
                    raise ValueError(f"{x!r}: an injected latency is > 0 (the placement's own run is the 0 point)")
                if time_ps(x) in seen:
                    raise ValueError(f"{x!r} is listed twice")
                seen.add(time_ps(x))
        return v


CIRCUIT_FILE_OWNS = ("distance", "rounds", "p", "noise")  # a circuit file fixes these itself


class Decode(_Strict):
    """The workload (a named code, or ``circuit``: a stim file), the decoder (a name in
    :mod:`twin.qec.decoders.registry`) and its placements."""

    code: Literal["rep", "steane", "surface", "bb72", "bb90", "bb108", "bb144", "bb288"] | None = None
    circuit: str | None = Field(None, min_length=1)
    distance: int = Field(3, ge=2, le=25, strict=True)
    rounds: int = Field(1, ge=1, le=100, strict=True)
    p: float = Field(1e-3, ge=0, lt=0.5)
    noise: Literal["circuit", "code_capacity", "phenomenological"] | None = None
    shots: int = Field(100_000, gt=0, le=10_000_000, strict=True)
    per: Literal["shot", "round", "window"] = "shot"
    window: Window | None = None
    frame_bytes: int | None = Field(None, gt=0, le=65_535)
    decoder: str = Field("lookup", min_length=1)
    function: str | None = None
    cost: Cost = Cost()
    feedback: FeedbackTiming | None = None
    interval: Literal["wilson", "clopper_pearson"] = "wilson"
    confidence: float = Field(0.95, gt=0, lt=1)
    placements: list[Placement] = Field(min_length=1)

    @model_validator(mode="after")
    def _call(self):  # a placement's call picks one of the measured file's two distributions, nothing else
        for i, pl in enumerate(self.placements):
            if "call" not in pl.model_fields_set:
                continue
            if self.cost.how != "measured":
                raise Located(("placements", i, "call"), pl.call, f"picks the native or through-Python per-call "
                              f"measurement of cost how: measured (how is {self.cost.how})")
            if not cost_timed(pl.model):
                raise Located(("placements", i, "call"), pl.call, f"a {pl.model} placement times its decoder itself "
                              f"({_supports(pl.model, 'decoder_time')}); call applies to "
                              f"{cost_timed_models('and')} placements")
        return self

    @model_validator(mode="after")
    def _distinct(self):  # a placement given twice would run the same study twice (devices: [a, a] is two a's)
        for i, pl in enumerate(self.placements):
            same = next((k for k in range(i) if self.placements[k].key() == pl.key()), None)
            if same is not None:
                raise Located(("placements", i), pl.devices or pl.device, f"the same placement as "
                              f"placements[{same}]: it would decode the same shots on the same device again")
        return self

    @model_validator(mode="after")
    def _source(self):
        if (self.code is None) == (self.circuit is None):
            raise Located(("code",), self.code or "<missing>", "give either code (a named code) or circuit (a .stim "
                          "file), one of them")
        if self.circuit is not None:
            if self.per == "window":
                raise Located(("per",), self.per, "windows are cut from a named code's rounds; a circuit file "
                              "decodes per shot or per round")
            for k in CIRCUIT_FILE_OWNS:
                if k in self.model_fields_set:
                    raise Located((k,), getattr(self, k), f"the circuit file ({self.circuit}) fixes its own noise "
                                  "and rounds; leave distance, rounds, p and noise out")
        return self

    @property
    def noise_model(self) -> str | None:
        """``noise`` or its default: ``phenomenological`` for a BB code, ``circuit`` for the others,
        None for a circuit file."""
        if self.circuit is not None:
            return None
        return self.noise or ("phenomenological" if self.code.startswith("bb") else "circuit")

    @model_validator(mode="after")
    def _window(self):
        if self.per == "window" and self.window is None:
            raise Located(("window",), "<missing>", "per: window needs a window: {rounds: W, commit: C}")
        if self.window is not None and self.per != "window":
            raise Located(("window",), "{...}", f"a window is for per: window (per is {self.per})")
        if self.window is not None and self.decoder != "matching":
            raise Located(("decoder",), self.decoder, "windowed decoding runs PyMatching on each window's "
                          "sub-graph: decoder: matching")
        if self.window is not None and self.code is not None:
            spec = self.window.spec()
            if spec.kind == "streaming" and spec.rounds > self.rounds + 1:
                key = "rounds" if self.window.rounds is not None else "buffer"
                raise Located(("window", key), getattr(self.window, key),
                              f"a window of {spec.rounds} rounds is longer than the experiment's {self.rounds + 1} "
                              f"detector rounds ({self.rounds} rounds and the final readout): one window would "
                              "decode the whole shot (per: shot does that)")
            if spec.kind == "parallel" and spec.commit >= self.rounds + 1:
                raise Located(("window", "commit"), spec.commit,
                              f"a core of {spec.commit} rounds holds the experiment's {self.rounds + 1} detector "
                              "rounds: one A window would decode the whole shot (per: shot does that)")
        return self

    def window_tuple(self):
        """The window's :class:`twin.qec.window.WindowSpec`, or None."""
        return None if self.window is None else self.window.spec()

    def requests_per_shot(self) -> int:
        """Requests per shot (stim's memory circuits have rounds + 1 detector times: the final readout)."""
        if self.per == "shot":
            return 1
        if self.per == "round":
            return self.rounds
        from twin.qec.window import request_windows
        return len(request_windows(self.rounds + 1, self.window.spec())[0])


def check_shared(pl: Placement, i: int, requests: int) -> None:
    """A stream of ``requests`` shared over placement ``i``'s devices reaches every one of them
    (request ``j`` goes to ``devices[j mod K]``: more devices than requests would leave some with
    nothing to decode). Raises :class:`Located` naming the placement's devices."""
    if pl.shared and len(pl.devices) > requests:
        raise Located(("decode", "placements", i, "devices"), pl.devices, f"{len(pl.devices)} devices share a "
                      f"stream of {requests:,} request(s): each needs at least one; give more shots or fewer devices")


class DecodeScenario(ScenarioBase):
    """A decoder study (see module docstring): a run scenario's common keys
    (:class:`twin.scenario.schema.ScenarioBase`; a Qblox cluster's programs time the requests)
    plus where the control system sits, the hosting-mode costs and the ``decode:`` workload block."""

    study: ClassVar[str] = "decode"
    hosting: str = "../calibrations/hosting.yaml"
    control: Literal["on_card", "aurora"] = "on_card"
    decode: Decode

    @model_validator(mode="after")
    def _horizon(self):
        from twin.scenario.schema import check_horizon
        d = self.decode
        check_horizon(self.traffic, d.shots * d.requests_per_shot(), ("traffic",))
        if self.traffic.program is not None and (d.per == "window" or any(p.shared for p in d.placements)):
            raise Located(("traffic", "program"), "{...}", "a round waiting for an earlier correction delays one "
                          "open-loop stream at a fixed period: not a windowed stream (its requests leave when "
                          "their rounds are measured) nor one shared over devices")
        if d.per == "window" and self.traffic.gaps is not None:
            raise Located(("traffic", "gaps"), "{...}", "a windowed stream's requests leave when their last round "
                          "is measured (traffic.period is the QEC cycle); random gaps do not apply")
        return self

    @model_validator(mode="after")
    def _shared(self):
        for i, pl in enumerate(self.decode.placements):
            if not pl.shared:
                continue
            where = ("decode", "placements", i, "devices")
            if self.qblox is None and self.traffic.mode != "open_loop":
                raise Located(where, pl.devices, f"one stream shared over devices is open-loop traffic at the QEC "
                              f"cycle (traffic.mode is {self.traffic.mode}: each reply sends the next request)")
            if self.decode.per != "shot":
                raise Located(where, pl.devices, f"each request goes to one device; a shot's per-{self.decode.per} "
                              "requests build on the earlier ones' state in one decoder (per: shot)")
            check_shared(pl, i, self.decode.shots)
        return self

    @model_validator(mode="after")
    def _feedback(self):
        from twin.units import time_ps
        d, t = self.decode, self.traffic
        if d.feedback is None:
            return self
        where = ("decode", "feedback")
        if d.circuit is None:
            raise Located(where, "{...}", f"a named code's memory circuit ({d.code}) has no classically controlled "
                          "gates; give decode.circuit: a .stim file with feedback (CX rec[-1] q)")
        if d.per != "round":
            raise Located(("decode", "per"), d.per, "a gate waits for one round's correction: feedback needs per: "
                          "round (one request per QEC round)")
        if self.qblox is not None:
            raise Located(("qblox",), "{...}", "a Qblox cluster's programs time its requests; feedback times a "
                          "stim circuit's program at traffic.period")
        if t.mode != "open_loop" or t.gaps is not None:
            raise Located(("traffic", "mode"), t.mode, "feedback runs the circuit's program at the QEC cycle: "
                          "open_loop traffic with a period (no gaps)")
        slack, clk = time_ps(d.feedback.slack), time_ps(t.clock_period)
        if slack % clk or slack > time_ps(t.period):
            raise Located(where + ("slack",), d.feedback.slack, f"a whole number of clock_period ({t.clock_period}) "
                          f"cycles, at most the period ({t.period})")
        for i, pl in enumerate(d.placements):
            if d.feedback.inject and not cost_timed(pl.model):
                raise Located(where + ("inject",), d.feedback.inject, "an injected latency is added to a "
                              f"{cost_timed_models('or')} decoder's time; "
                              f"placement {i} is model {pl.model} (its own time)")
        return self

    @model_validator(mode="after")
    def _qblox(self):
        if self.qblox is not None:
            if "traffic" in self.model_fields_set:
                raise Located(("traffic",), "<set>", "a Qblox cluster's requests are timed by its programs (qblox); "
                              "leave traffic out")
            if self.control != "aurora":
                raise Located(("control",), self.control, "a Qblox cluster reaches the link card across a cable: "
                              "control: aurora")
            from twin.scenario.schema import check_listening_rounds
            check_listening_rounds(self.qblox, self.decode.shots * self.decode.requests_per_shot(),
                                   ("decode", "shots"))
            if self.qblox.bits_per_measurement != 1:
                raise Located(("qblox", "bits_per_measurement"), self.qblox.bits_per_measurement,
                              "a decode study's requests carry its detection events, one bit per detector (the "
                              "contract's syndrome section); the cluster's programs time them: 1 bit per measurement")
        return self

