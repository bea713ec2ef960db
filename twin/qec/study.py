"""``twin decode``: a decoder study from a scenario with a ``decode:`` block.

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
      per: shot | round | window             # one request per shot, per QEC round, or per sliding window
      window: null | {rounds: W, commit: C}  # per: window: each request carries W rounds, the decoder
                                             # commits C and the window slides by C (matching only)
      frame_bytes: null                      # default: the syndrome in whole 16-byte pieces
      decoder: lookup | matching | function | bposd | tesseract | relay_bp | "sinter:pkg.module:Class"
      function: null | "package.module:callable" | "lib.so:symbol" | a registered function name  # decoder: function
      cost: {how: model | host_timed | fitted, scale: 1.0, fixed: null | "300 ns",
             file: null | ../calibrations/measured/decoders/X.yaml}   # scale: host_timed, fitted; fixed: model
      interval: wilson | clopper_pearson     # confidence interval of the logical error rate
      confidence: 0.95
      placements: [{device: <consumer in calibration>, mode: inline | worker | external_self |
            external_routed | chain, workers: 1,     # N parallel decoders sharing the request queue
            order: in_order | as_ready,              # workers > 1: reply order; one loop per placement
            devices: null | [A, B, ...],             # instead of device: one open-loop stream over K >= 2
            dispatch: round_robin}]                  # devices, request i to devices[i mod K] (devices only)

For every placement the study reports: corrections identical to the direct decode (same shots,
byte for byte), the card's mismatches, logical errors and rate with its interval for the loop,
for the direct decode and for stim+PyMatching run directly on the same shots (and, for windows,
the whole-shot decode of the same shots), the reaction time (a request's last syndrome round
measured -> its correction at the control system) and the card-boundary round trip, deadline
misses, the stream (throughput, the backlog: requests waiting anywhere for a decoder, its growth
per cycle against the expected ``1 - N T / S``, rho; a stream over K devices: rho = S / (K N T) and
each device's part, ``per_device``), and the decode throughput of the loop's
batched decode beside the direct decode's. Files: results.json, requests.csv (every request),
queue_depth.csv; plots: latency vs request, backlog vs time.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from twin.calibration.params import ParamSet
from twin.config import ConfigError, Located, load_model
from twin.devices.qblox import QbloxCluster
from twin.engine.stop import Interrupted
from twin.qec.hosting import MODES, HostingParams, check_mode, load_hosting
from twin.scenario import Bridge, Traffic, _duration
from twin.stats import summary_ns
from twin.units import time_ps


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


class Cost(_Strict):
    """How the decoder's compute time is accounted (:class:`twin.qec.cost.CostModel`): ``model``
    (the cost table, or ``fixed``), ``host_timed`` (timed now on this host), ``fitted`` (the
    calibration ``file`` written by ``twin calibrate decoder``, relative to the scenario). ``scale``:
    the factor from the host's time to the target device's (host_timed and fitted)."""

    how: Literal["model", "host_timed", "fitted"] = "model"
    scale: float = Field(1.0, ge=1e-3, le=1e3)  # x a host's timing: 1/1000 to 1000
    fixed: str | None = None
    file: str | None = None
    _d = field_validator("fixed", mode="before")(classmethod(lambda cls, v: _duration(v)))

    @model_validator(mode="after")
    def _applies(self):  # each would be silently ignored under the other ``how``
        if self.how == "model" and "scale" in self.model_fields_set and self.scale != 1.0:
            raise Located(("scale",), self.scale, "applies to how: host_timed or fitted only (it scales a host's "
                          "timing); under how: model give fixed, or use host_timed or fitted")
        if self.how != "model" and self.fixed is not None:
            raise Located(("fixed",), self.fixed, f"applies to how: model only ({self.how} times the decoder "
                          "on a host); give one of fixed and how: " + self.how)
        if self.how == "fitted" and self.file is None:
            raise Located(("file",), "<missing>", "how: fitted needs the calibration file (twin calibrate decoder "
                          "writes one, e.g. ../calibrations/measured/decoders/...yaml)")
        if self.how != "fitted" and self.file is not None:
            raise Located(("file",), self.file, f"applies to how: fitted only (how is {self.how})")
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
    model: Literal["sim", "code", "rtl", "live"] = "sim"
    bridge: Bridge | None = None
    workers: int = Field(1, ge=1, le=1024, strict=True)
    order: Literal["in_order", "as_ready"] = "in_order"

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
        if self.devices is not None and self.model == "live":
            raise Located(("devices",), self.devices, "a live placement is one device behind its bridge block; "
                          "share a stream over sim, code or rtl devices")
        return self

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
        if self.workers > 1 and self.model in ("rtl", "live"):
            raise Located(("workers",), self.workers, f"a {self.model} consumer is its own design (one serving "
                          "engine); parallel decoders are modelled for sim and code placements")
        if "order" in self.model_fields_set and self.workers == 1:
            raise Located(("order",), self.order, "one worker replies in order either way; order applies to "
                          "workers > 1")
        return self

    @model_validator(mode="after")
    def _bridge(self):
        if self.model == "live" and self.bridge is None:
            raise Located(("bridge",), "<missing>", "model live needs a bridge block (backend: shm | cuda | udp)")
        if self.model != "live" and self.bridge is not None:
            raise Located(("bridge",), self.bridge.backend, f"a bridge block is for model live, not {self.model}")
        return self


class Window(_Strict):
    """A sliding window (:mod:`twin.qec.window`): ``rounds`` W per window, ``commit`` C rounds
    committed per window (the window slides by C)."""

    rounds: int = Field(ge=1, le=101, strict=True)
    commit: int = Field(ge=1, le=101, strict=True)

    @model_validator(mode="after")
    def _commit(self):
        if self.commit > self.rounds:
            raise Located(("commit",), self.commit, f"a window commits at most its {self.rounds} rounds")
        return self



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
    interval: Literal["wilson", "clopper_pearson"] = "wilson"
    confidence: float = Field(0.95, gt=0, lt=1)
    placements: list[Placement] = Field(min_length=1)

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
        if self.window is not None and self.code is not None and self.window.rounds > self.rounds + 1:
            raise Located(("window", "rounds"), self.window.rounds,
                          f"longer than the experiment's {self.rounds + 1} detector rounds ({self.rounds} rounds and "
                          "the final readout): one window would decode the whole shot (per: shot does that)")
        return self

    def window_tuple(self) -> tuple[int, int] | None:
        """``(W, C)`` of the window, or None."""
        return None if self.window is None else (self.window.rounds, self.window.commit)

    def requests_per_shot(self) -> int:
        """Requests per shot (stim's memory circuits have rounds + 1 detector times: the final readout)."""
        if self.per == "shot":
            return 1
        if self.per == "round":
            return self.rounds
        from twin.qec.window import window_starts
        return len(window_starts(self.rounds + 1, self.window.rounds, self.window.commit))


class DecodeScenario(_Strict):
    """A decoder study (see module docstring)."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
    description: str = ""
    calibration: str
    hosting: str = "../calibrations/hosting.yaml"
    seed: int = Field(0, ge=0, le=2**64 - 1, strict=True)  # stim and numpy take 64-bit seeds
    slots: int = Field(16, gt=0, le=65_536, strict=True)
    encoding: Literal["default", "classic", "per_piece"] = "default"
    control: Literal["on_card", "aurora"] = "on_card"
    traffic: Traffic = Traffic()
    qblox: QbloxCluster | None = None  # the control system is a Qblox cluster: its programs time the requests
    deadline: str | None = None
    decode: Decode

    @model_validator(mode="after")
    def _horizon(self):
        from twin.scenario.schema import check_horizon
        d = self.decode
        check_horizon(self.traffic, d.shots * d.requests_per_shot(), ("traffic",))
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
            if self.qblox.bits_per_measurement != 1:
                raise Located(("qblox", "bits_per_measurement"), self.qblox.bits_per_measurement,
                              "a decode study's requests carry its detection events, one bit per detector (the "
                              "contract's syndrome section); the cluster's programs time them: 1 bit per measurement")
        return self
    _dl = field_validator("deadline", mode="before")(classmethod(lambda cls, v: _duration(v)))


@dataclass
class LoadedDecode:
    """A validated decode scenario with its parameter sets loaded."""

    path: Path
    sc: DecodeScenario
    params: ParamSet
    hosting: HostingParams
    hosting_path: Path
    cost_fit: object = None  # decode.cost.how fitted: its twin.qec.cost_fit.DecoderFit
    circuit: object = None   # the stim.Circuit the decode block describes (decode_circuit)
    decoder: object = None   # the decoder built for it at load (decoder_for)


def load_decode(path: str | Path) -> LoadedDecode:
    """Load a decode scenario; raises :class:`ConfigError` naming file, key and value."""
    path = Path(path)
    from twin.config import load_yaml
    data = load_yaml(path)
    if isinstance(data, dict) and "nodes" in data and "decode" not in data:
        raise ConfigError(path, "nodes", "[...]", f"this is a loop scenario (nodes, no decode block); run it "
                          f"with `twin run {path}`")
    sc = load_model(path, DecodeScenario, data=data)
    from twin.calibration.roce import RoceParamSet
    from twin.scenario.load import load_calibration
    cal, params = load_calibration(path, sc.calibration)
    if isinstance(params, RoceParamSet) and sc.control != "on_card":
        raise ConfigError(path, "control", sc.control, "a RoCE parameter set's controller is the FPGA itself "
                          "(its ERNIC sends the requests): control: on_card")
    from twin.scenario.load import resolve_gaps_file
    requests = sc.decode.shots * sc.decode.requests_per_shot()
    resolve_gaps_file(path, "traffic", sc.traffic, requests)
    for i, pl in enumerate(sc.decode.placements):
        for j, dev in enumerate(pl.names):
            if dev not in params.consumers:
                raise ConfigError(path, pl.device_key(i, j), dev,
                                  f"not a consumer of {cal.name} (have: {', '.join(params.consumers)})")
            try:
                check_mode(pl.mode, params.consumers[dev].kind, dev)
            except ValueError as e:
                raise ConfigError(path, f"decode.placements[{i}].mode", pl.mode, str(e)) from None
    from twin.config import named_file
    hp_path = named_file(path, "hosting", sc.hosting)
    hosting, _ = load_hosting(hp_path)
    d = sc.decode
    from twin.qec.decoders.registry import kind_of, unavailable
    why = unavailable(d.decoder)
    if why:
        raise ConfigError(path, "decode.decoder", d.decoder, why)
    circuit = decode_circuit(path, d)
    if d.circuit is not None and d.per == "round":  # the file's rounds, not decode.rounds, set the requests
        from twin.qec.workload import sample_circuit
        from twin.scenario.schema import check_horizon
        try:
            check_horizon(sc.traffic, d.shots * sample_circuit(circuit, 1, per="round").requests_per_shot,
                          ("traffic",))
        except Located as e:
            raise ConfigError(path, ".".join(map(str, e.path)), e.value, e.problem) from None
    sinter_inner = resolve_sinter_decoder(d.decoder, path) if d.decoder.startswith("sinter:") else None
    fn = None
    if d.decoder == "function":
        if not d.function:
            raise ConfigError(path, "decode.function", "<missing>", "decoder: function needs a function "
                              "('package.module:callable', 'lib.so:symbol' or a registered function name)")
        fn = resolve_function(d.function, path, reply_bytes=-(-circuit.num_observables // 8))
        for i, pl in enumerate(d.placements):
            for j, dev in enumerate(pl.names):
                if params.consumers[dev].kind == "fpga":
                    raise ConfigError(path, pl.device_key(i, j), dev, "a Python function does not run in FPGA logic")
        if d.cost.how == "model" and d.cost.fixed is None:
            raise ConfigError(path, "decode.cost.fixed", "<missing>", "a user function has no entry in the cost "
                              "model: give its time (fixed: '50 ns') or use how: host_timed")
    elif d.function:
        raise ConfigError(path, "decode.function", d.function, f"only for decoder: function (decoder is {d.decoder})")
    if "cost" in d.model_fields_set and all(pl.model in ("rtl", "live") for pl in d.placements):
        raise ConfigError(path, "decode.cost", "{...}", "no placement uses it: an rtl placement's time is the "
                          "Verilog's own cycles, a live one's is measured; cost applies to sim and code placements")
    fit = _load_cost_fit(path, d) if d.cost.how == "fitted" else None
    if d.cost.how == "model" and d.cost.fixed is None and d.decoder != "function":
        from twin.qec.cost import MODEL_NS
        for i, pl in enumerate(d.placements):
            for j, dev in enumerate(pl.names):
                kind = params.consumers[dev].kind
                if (kind_of(d.decoder), kind) not in MODEL_NS:
                    raise ConfigError(path, pl.device_key(i, j), dev,
                                      f"the cost model has no {d.decoder} decoder on a {kind}: give decode.cost.fixed "
                                      "or use how: host_timed")
    from twin.qec.lookup import MAX_DETECTORS, syndrome_bytes
    if d.decoder == "lookup" and circuit.num_detectors > MAX_DETECTORS:
        raise ConfigError(path, "decode.decoder", d.decoder, f"{circuit.num_detectors} detectors; a lookup table "
                          f"holds at most {MAX_DETECTORS} (use matching)")
    if d.frame_bytes is not None and d.frame_bytes < syndrome_bytes(circuit.num_detectors):
        need = syndrome_bytes(circuit.num_detectors)
        raise ConfigError(path, "decode.frame_bytes", d.frame_bytes,
                          f"the syndrome of {circuit.num_detectors} detectors needs {need}")
    try:  # built once here, so a decoder that cannot take this model is refused at load (e.g. no matching graph)
        decoder = decoder_for(d, circuit, path, sinter_inner=sinter_inner, fn=fn)
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(path, "decode.decoder", d.decoder, f"cannot be built for this circuit: "
                          f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}") from None
    return LoadedDecode(path, sc, params, hosting, hp_path, fit, circuit, decoder)


MAX_CIRCUIT_QUBITS = 100_000           # stim allocates a frame per qubit; a real memory experiment has ~10^3
MAX_CIRCUIT_MEASUREMENTS = 10_000_000  # per shot: sampling walks every one
MAX_PAYLOAD_BYTES = 65_535             # a request's length field (the contract's 16-bit length)


def check_circuit_size(path: Path, d: Decode, c) -> None:
    """Refuse (ConfigError naming ``decode.circuit``) a circuit the loop cannot carry or stim cannot
    sample in reasonable time: more than :data:`MAX_CIRCUIT_QUBITS` qubits or
    :data:`MAX_CIRCUIT_MEASUREMENTS` measurements per shot; a packed syndrome over
    :data:`MAX_PAYLOAD_BYTES` (one request); observables whose reply (ceil(K/8) bytes) does not fit
    the reply slot, which is the request frame's size. stim counts these from the REPEAT blocks
    without unrolling them."""
    why = None
    syndrome = -(-c.num_detectors // 8)
    frame = d.frame_bytes or max(16, -(-syndrome // 16) * 16)
    if c.num_qubits > MAX_CIRCUIT_QUBITS:
        why = f"{c.num_qubits:,} qubits; at most {MAX_CIRCUIT_QUBITS:,}"
    elif c.num_measurements > MAX_CIRCUIT_MEASUREMENTS:
        why = f"{c.num_measurements:,} measurements per shot; at most {MAX_CIRCUIT_MEASUREMENTS:,}"
    elif syndrome > MAX_PAYLOAD_BYTES:
        why = (f"{c.num_detectors:,} detectors: a {syndrome:,}-byte syndrome; one request carries at most "
               f"{MAX_PAYLOAD_BYTES:,} bytes ({8 * MAX_PAYLOAD_BYTES:,} detectors)")
    elif -(-c.num_observables // 8) > frame:
        why = (f"{c.num_observables:,} observables: a {-(-c.num_observables // 8):,}-byte correction; the reply "
               f"slot holds the {frame}-byte frame")
    if why:
        raise ConfigError(path, "decode.circuit", d.circuit, why)


def decode_circuit(path: Path, d: Decode):
    """The ``stim.Circuit`` a decode block describes: ``decode.circuit`` (a .stim file, relative to
    the scenario's folder) or the named code's memory experiment. Raises ConfigError naming the key:
    a file that is missing, does not parse, or has no detectors or no observables; a noise model the
    code is not built with; a distance the code does not have; stim's own limits (rounds)."""
    import stim

    from twin.qec.codes import memory_circuit
    if d.circuit is not None:
        from twin.config import named_file, read_input_text
        f = named_file(path, "decode.circuit", d.circuit)
        try:
            text = read_input_text(f)  # a regular file of at most 16 MiB of UTF-8
        except ConfigError as e:
            raise ConfigError(path, "decode.circuit", d.circuit, e.problem) from None
        try:
            c = stim.Circuit(text)
        except Exception as e:  # stim raises ValueError with the offending line
            raise ConfigError(path, "decode.circuit", d.circuit, f"stim cannot parse it: "
                              f"{(str(e).strip().splitlines() or [''])[0][:160]}") from None
        if c.num_detectors == 0 or c.num_observables == 0:
            raise ConfigError(path, "decode.circuit", d.circuit, f"{c.num_detectors} detectors and "
                              f"{c.num_observables} observables; a decode study needs at least one of each")
        check_circuit_size(path, d, c)  # before stim unrolls it: a nested REPEAT can ask for 10^18 of anything
        try:
            c.detector_error_model(decompose_errors=False, approximate_disjoint_errors=True)
        except ValueError as e:  # e.g. a non-deterministic detector or observable
            raise ConfigError(path, "decode.circuit", d.circuit, f"stim has no detector error model for it: "
                              f"{(str(e).strip().splitlines() or [''])[0][:160]}") from None
        return c
    from twin.qec.bb import BB_CODES
    noise = d.noise_model
    if d.code in BB_CODES:
        if noise == "circuit":
            raise ConfigError(path, "decode.noise", noise, "a BB code is built with phenomenological or "
                              "code_capacity noise (no circuit-level syndrome extraction; docs/qec.md)")
        if "distance" in d.model_fields_set and d.distance != BB_CODES[d.code].d:
            raise ConfigError(path, "decode.distance", d.distance, f"{d.code} has distance {BB_CODES[d.code].d} "
                              "(give none, or that one)")
    elif noise == "phenomenological":
        raise ConfigError(path, "decode.noise", noise, f"stim's generated {d.code} circuits have circuit or "
                          "code_capacity noise; phenomenological is for the BB codes")
    if d.code == "steane" and d.distance != 3:
        raise ConfigError(path, "decode.distance", d.distance, "the Steane code has distance 3")
    try:
        return memory_circuit(d.code, d.distance, d.rounds, d.p, noise)
    except ValueError as e:  # stim's own limits, e.g. the color code needs two rounds
        raise ConfigError(path, "decode.rounds", d.rounds, str(e).splitlines()[0]) from None


def build_decoder(ld: LoadedDecode, w):
    """The scenario's decoder for workload ``w`` (:class:`twin.qec.workload.Workload`): the one
    built at load when ``w`` samples the scenario's own circuit, else :func:`decoder_for` its circuit
    (e.g. another distance, for ``twin calibrate decoder``). Raises ConfigError for a function or a
    sinter class that does not resolve."""
    if ld.decoder is not None and w.circuit is ld.circuit:
        return ld.decoder
    return decoder_for(ld.sc.decode, w.circuit, ld.path, name=w.name)


def decoder_for(d: Decode, circuit, path: Path | None = None, sinter_inner=None, fn=None, name: str | None = None):
    """The decoder ``d.decoder`` names (:func:`twin.qec.decoders.registry.build`) for ``circuit``;
    for ``function`` with ``fn`` (or ``d.function`` resolved, :func:`resolve_function`), for
    ``sinter:...`` with ``sinter_inner`` (or the class resolved from ``path``'s folders). A bundled
    lookup table keeps its own name (``rep3``, ``steane7``), so the loop serves it under its contract
    id; others are ``<name or the workload's name>_<decoder>``."""
    from twin.qec.decoders.registry import build
    if d.decoder == "function":
        fn = fn or resolve_function(d.function, path, reply_bytes=-(-circuit.num_observables // 8))
        return build("function", circuit, name=d.function, fn=fn)
    if d.decoder.startswith("sinter:"):
        return build(d.decoder, circuit, inner=sinter_inner or resolve_sinter_decoder(d.decoder, path))
    from twin.qec.lookup import STANDARD
    std = next((n for n, key in STANDARD.items() if key == (d.code, d.distance, d.rounds, d.p)), None)
    if std and d.decoder == "lookup" and d.noise_model == "circuit":
        return build("lookup", circuit, name=std)
    return build(d.decoder, circuit, name=f"{name or workload_name(d, path)}_{d.decoder}")


def workload_name(d: Decode, path: Path | None) -> str:
    """The workload's label: ``<code>_d<distance>_r<rounds>_p<p>`` or the circuit file's stem."""
    if d.circuit is not None:
        return Path(d.circuit).stem
    from twin.qec.bb import BB_CODES
    dist = BB_CODES[d.code].d if d.code in BB_CODES else d.distance
    return f"{d.code}_d{dist}_r{d.rounds}_p{d.p:g}"


def resolve_sinter_decoder(spec: str, path: Path | None):
    """``sinter:pkg.module:Class``: the class imported like ``decode.function``'s module
    (:func:`function_roots`) and instantiated without arguments. Raises ConfigError naming
    ``decode.decoder``: no such module or class, or an object that is not a sinter decoder."""
    where = path or "<scenario>"
    mod, _, cls = spec[len("sinter:"):].partition(":")
    try:
        module, _root = _import_from(mod, function_roots(path))
        obj = getattr(module, cls)()
    except Exception as e:
        raise ConfigError(where, "decode.decoder", spec, f"cannot make the sinter decoder: {type(e).__name__}: "
                          f"{(str(e).splitlines() or [''])[0][:160]}") from None
    if not any(callable(getattr(obj, m, None)) for m in ("compile_decoder_for_dem", "decode_via_files")):
        raise ConfigError(where, "decode.decoder", spec, f"{type(obj).__name__} is not a sinter.Decoder (no "
                          "compile_decoder_for_dem or decode_via_files)")
    return obj


def _load_cost_fit(path: Path, d: Decode):
    """The decoder-cost calibration of ``decode.cost.file`` (relative to the scenario), checked to be
    of the scenario's decoder kind; raises ConfigError naming ``decode.cost.file``."""
    from twin.config import named_file
    from twin.qec.cost_fit import load_fit
    f = named_file(path, "decode.cost.file", d.cost.file)
    try:
        fit = load_fit(f)
    except ConfigError as e:
        raise ConfigError(path, "decode.cost.file", d.cost.file, f"not a decoder-cost file ({e})") from None
    if fit.decoder != d.decoder:
        raise ConfigError(path, "decode.cost.file", d.cost.file, f"measured on a {fit.decoder} decoder; this "
                          f"scenario's decoder is {d.decoder}")
    fit.meta["file"] = d.cost.file
    return fit


def function_roots(path: Path | None) -> list[Path]:
    """Where ``decode.function``'s module is looked for, in order: the scenario's own folder, its
    parent (the repository root for a bundled scenario, so ``examples.rep3_rule`` resolves), then
    the current directory; duplicates dropped. After these, the ordinary import path (an installed
    package)."""
    roots = [path.resolve().parent, path.resolve().parent.parent] if path is not None else []
    roots.append(Path.cwd().resolve())
    out: list[Path] = []
    for r in roots:
        if r not in out:
            out.append(r)
    return out


def _module_file(root: Path, mod: str) -> Path | None:
    base = root.joinpath(*mod.split("."))
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        try:
            if f.is_file():
                return f
        except (OSError, ValueError):  # a name the system refuses (too long): not there
            return None
    return None


def _import_from(mod: str, roots: list[Path]):
    """Import ``mod`` from the first of ``roots`` that holds its file (the root is on sys.path only
    during the import), else from the ordinary import path. Returns (module, where it was found)
    or raises ImportError listing the places looked in."""
    import importlib
    import sys
    for root in roots:
        if _module_file(root, mod) is None:
            continue
        cached = sys.modules.get(mod.split(".")[0])
        if cached is not None:
            homes = [getattr(cached, "__file__", None)] + list(getattr(cached, "__path__", []))
            homes = [Path(h).resolve() for h in homes if h]
            if homes and not any(h.is_relative_to(root) for h in homes):
                raise ImportError(f"{root} holds it, but a module {cached.__name__!r} is already imported "
                                  f"from {homes[0]}; give the decoder's module a name of its own")
        sys.path.insert(0, str(root))
        try:
            return importlib.import_module(mod), root
        finally:
            try:
                sys.path.remove(str(root))
            except ValueError:
                pass
    try:
        return importlib.import_module(mod), None
    except ModuleNotFoundError as e:
        if e.name and not (mod == e.name or mod.startswith(e.name + ".")):
            raise  # the module exists but something it imports does not
        where = ", ".join(str(r) for r in roots)
        raise ImportError(f"no module {mod!r} in {where} or on the import path") from None


def resolve_function(spec: str, path: Path | None = None, reply_bytes: int = 1):
    """The callable named by ``spec``: ``package.module:callable``, ``lib.so:symbol`` (a C function
    in a shared library, relative to the scenario's folder; :func:`twin.qec.decoders.function.c_function`,
    whose reply is ``reply_bytes`` long) or a registered function's name.

    The module is imported from the first of :func:`function_roots` that holds it (the scenario's
    folder, its parent, the current directory; each on ``sys.path`` only while importing), else from
    the ordinary import path. The callable must take one positional argument (the request payload,
    bytes). Raises ConfigError naming ``decode.function`` and its value: no such module (listing
    where it looked), importing it raised, no such attribute, not callable, wrong signature."""
    import inspect

    from twin.runtime.functions import lookup
    where = path or "<scenario>"
    if ":" not in spec:
        try:
            return lookup(spec).python
        except KeyError as e:
            raise ConfigError(where, "decode.function", spec, str(e).strip("'\"")) from None
    mod, _, attr = spec.rpartition(":")
    if not mod or not attr:
        raise ConfigError(where, "decode.function", spec, "expected 'package.module:callable'")
    if mod.endswith((".so", ".dylib")):
        from twin.qec.decoders.function import c_function
        lib = (path.parent / mod).resolve() if path is not None else Path(mod).resolve()
        try:
            return c_function(lib, attr, reply_bytes)
        except (OSError, AttributeError) as e:
            raise ConfigError(where, "decode.function", spec, f"cannot load the C function: "
                              f"{(str(e).splitlines() or [''])[0][:160]}") from None
    try:
        module, _root = _import_from(mod, function_roots(path))
    except ImportError as e:
        raise ConfigError(where, "decode.function", spec, f"cannot import it ({e})") from None
    except Exception as e:
        raise ConfigError(where, "decode.function", spec, f"importing {mod} raised {type(e).__name__}: "
                          f"{(str(e).splitlines() or [''])[0][:160]}") from None
    try:
        fn = getattr(module, attr)
    except AttributeError:
        raise ConfigError(where, "decode.function", spec, f"module {mod} ({getattr(module, '__file__', '?')}) "
                          f"has no {attr!r}") from None
    if not callable(fn):
        raise ConfigError(where, "decode.function", spec, f"is a {type(fn).__name__}, not a function")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn  # a builtin without a signature: checked when called
    try:
        sig.bind(b"")
    except TypeError:
        raise ConfigError(where, "decode.function", spec, f"takes {sig}; a decoder takes one positional "
                          "argument, the request payload (bytes)") from None
    return fn


def function_failure(ld: "LoadedDecode", w, e) -> ConfigError:
    """A :class:`twin.qec.decoders.FunctionFailed` as the ConfigError naming ``decode.function``,
    the first shot (and round, for per-round requests) whose payload made it fail, and the payload."""
    g = w.requests_per_shot
    frames = w.cumulative_frames() if g > 1 else w.frames()
    sb = min(len(e.payload), frames.shape[1])
    hits = np.flatnonzero((frames[:, :sb] == np.frombuffer(e.payload[:sb], np.uint8)).all(axis=1))
    if len(hits):
        j = int(hits[0])
        at = f"shot {j // g}" + (f", round {j % g} of {g}" if g > 1 else "")
    else:
        at = "a request"
    return ConfigError(ld.path, "decode.function", ld.sc.decode.function,
                       f"failed at {at} (payload {e.payload.hex()}): {e.problem}")


def interval(k: int, n: int, method: str, confidence: float) -> tuple[float, float]:
    """Confidence interval of a binomial rate k/n: ``wilson`` or ``clopper_pearson`` (exact),
    from ``scipy.stats.binomtest``."""
    from scipy.stats import binomtest
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence,
                                       method="wilson" if method == "wilson" else "exact")
    return float(ci.low), float(ci.high)


def _pymatching_direct(circuit, detectors: np.ndarray) -> tuple[np.ndarray | None, str]:
    """stim + PyMatching on the same shots, or None with the reason when the model has no graph."""
    import pymatching
    try:
        m = pymatching.Matching.from_detector_error_model(circuit.detector_error_model(decompose_errors=True))
    except Exception as e:  # stim raises ValueError for hyperedges it cannot decompose
        return None, f"not decomposable into a matching graph ({str(e).splitlines()[0][:80]})"
    pred = m.decode_batch(detectors.astype(np.uint8)).astype(bool)
    return pred, "pymatching.Matching.decode_batch on stim's detection events"


@dataclass
class DecodeStudy:
    """A decode study's outcome.

    document: the results.json mapping (deterministic for a seed; each placement's ``throughput``
    is the wall clock of this machine and is printed, not written); runs: one
    :class:`twin.qec.loop.DecodeRun` per placement (per-request timestamps, corrections, hops);
    queues: per placement ``(t_ps, depth)``, the requests in the card at 200 instants (int64);
    tables: per placement ``(name, request table)`` (:func:`twin.qec.streaming.request_table`);
    backlogs: per placement ``(t_ps, backlog)``, the requests waiting anywhere for a decoder at 200
    instants (:func:`twin.qec.streaming.backlog`). interrupted: a stop request ended it early
    (``document["partial"]``: the placements run, the last one's whole shots so far).
    """

    document: dict
    runs: list
    queues: list
    tables: list = None
    backlogs: list = None
    interrupted: bool = False  # stopped by a signal: the document is partial (twin.engine.stop)


def run_decode_study(ld: LoadedDecode, shots: int | None = None, seed: int | None = None, progress=None,
                     engine: str = "auto", verify_rounds: int = 10_000) -> dict:
    """Run every placement; returns a :class:`DecodeStudy` (the results document, the per-request
    runs, the queue depths). ``engine`` and ``verify_rounds``: see :func:`twin.qec.loop.run_decode`.
    Raises :class:`ConfigError` for a placement whose model cannot stand there or a user decoder
    that fails. Asked to stop (:mod:`twin.engine.stop`), it ends after the placement running then,
    keeping its whole shots so far (``shots`` completed, ``shots_requested``; no placement entry if
    none completed); the study is ``interrupted`` and its document ``"partial": true``."""
    from twin.qec.cost import CostError, CostModel
    from twin.qec.decoders import FunctionFailed
    from twin.qec.decoders.base import DecoderFailed
    from twin.qec.loop import queue_depth, run_decode
    from twin.qec.workload import sample_circuit

    sc, d = ld.sc, ld.sc.decode
    shots = shots or d.shots
    seed = sc.seed if seed is None else seed
    circuit = ld.circuit if ld.circuit is not None else decode_circuit(ld.path, d)
    w = sample_circuit(circuit, shots, seed=seed, frame_bytes=d.frame_bytes, per=d.per, window=d.window_tuple(),
                       name=workload_name(d, ld.path))
    decoder = build_decoder(ld, w)
    pm, pm_how = _pymatching_direct(w.circuit, w.detectors)
    pm_errors = None if pm is None else int((pm != w.observables).any(axis=1).sum())
    t = ld.sc.traffic
    from twin.scenario import traffic_params
    q = ld.sc.qblox
    traffic = (q.traffic(w.requests, w.frame_bytes, carry_syndrome=False) if q is not None
               else traffic_params(t, w.requests, w.frame_bytes))
    deadline_ps = time_ps(sc.deadline) if sc.deadline else None
    doc = {"schema": "twin.decode/1", "scenario": sc.name, "calibration": ld.params.name,
           "hosting": ld.hosting.__dict__, "seed": seed,
           "workload": {**workload_document(d),
                        "shots": shots, "detectors": w.n_detectors, "observables": w.n_observables,
                        "frame_bytes": w.frame_bytes, "requests": w.requests,
                        "per_request": {"shot": "one shot's detection events",
                                        "round": "one QEC round's detection events (the consumer decodes the "
                                                 "shot's events so far)",
                                        "window": "one sliding window's detection events (the consumer decodes "
                                                  "the window, commits its first rounds and slides)"}[d.per],
                        **({"window": {"rounds": d.window.rounds, "commit": d.window.commit,
                                       "windows_per_shot": w.requests_per_shot}} if d.window else {})},
           "decoder": {"kind": d.decoder, "name": decoder.name, "function": d.function},
           "traffic": traffic_document(sc),
           "deadline_ns": deadline_ps / 1000 if deadline_ps else None,
           "interval": {"method": d.interval, "confidence": d.confidence},
           "stim_pymatching": None, "placements": []}
    if pm_errors is not None:
        lo, hi = interval(pm_errors, shots, d.interval, d.confidence)
        doc["stim_pymatching"] = {"logical_errors": pm_errors, "ler": pm_errors / shots, "ci": [lo, hi],
                                  "how": pm_how}
    else:
        doc["stim_pymatching"] = {"logical_errors": None, "how": pm_how}
    runs = []
    queues = []
    tables = []
    backlogs = []
    from twin.calibration.roce import RoceParamSet
    from twin.nodes.models import Situation, refusal
    from twin.qec.loop import session_function
    from twin.qec.streaming import backlog, device_summaries, request_table, stream_summary
    fn = session_function(decoder, w.name)
    for i, pl in enumerate(d.placements):  # before any loop runs: can each model stand on each device?
        for dev in pl.names:
            why = refusal("consumer", pl.model, Situation(
                device_kind=ld.params.consumers[dev].kind,
                path="roce" if isinstance(ld.params, RoceParamSet) else "card", frame_bytes=w.frame_bytes,
                function=fn, study="decode", hosting=pl.mode))
            if why:
                raise ConfigError(ld.path, f"decode.placements[{i}].model", pl.model,
                                  why + (f" (device {dev})" if pl.shared else ""))
    for pl in d.placements:
        cost = CostModel(how=d.cost.how, scale=d.cost.scale,
                         fixed_ns=time_ps(d.cost.fixed) / 1000 if d.cost.fixed else None, fit=ld.cost_fit,
                         file=d.cost.file, seed=seed)
        label = "+".join(pl.names)
        cb = (lambda n, name=label: progress(name, n)) if progress else None
        stopped = None
        try:
            r = run_decode(ld.params, pl.where, w, decoder, mode=pl.mode, hosting=ld.hosting, cost=cost,
                           traffic=traffic, seed=seed, slots=sc.slots,
                           encoding="classic" if sc.encoding == "default" else sc.encoding,
                           external_control=sc.control == "aurora", progress=cb, engine=engine,
                           verify_rounds=verify_rounds, model=pl.model,
                           bridge=pl.bridge.settings() if pl.bridge else None, workers=pl.workers, order=pl.order)
        except FunctionFailed as e:
            raise function_failure(ld, w, e) from None
        except DecoderFailed as e:  # a decoder answered with the wrong shape
            raise ConfigError(ld.path, "decode.decoder", d.decoder, str(e)) from None
        except CostError as e:  # what the cost model says this decoder costs here cannot be simulated
            raise ConfigError(ld.path, "decode.cost", d.cost.how, str(e)) from None
        except Interrupted as e:
            stopped, r = e, e.partial
            doc["partial"] = True
            if r is None or not r.workload.shots:  # not one whole shot: nothing of this placement to keep
                break
        runs.append(r)
        res = r.result
        le_loop, le_direct = r.logical_errors_loop, r.logical_errors_direct
        done = r.workload.shots  # all of them, or those before a stop
        table = request_table(r)
        tables.append((placement_label(label, pl.mode, pl.workers, pl.order, pl.dispatch_used), table))
        cycle = traffic.period_ps if traffic.mode == "open_loop" and traffic.period_ps else None
        stream = stream_summary(table, cycle, pl.workers, len(pl.names))
        s = {"device": label, "mode": pl.mode, **({"model": pl.model} if pl.model != "sim" else {}),
             **({"workers": pl.workers, "order": pl.order} if pl.workers > 1 else {}),
             **({"devices": pl.names, "dispatch": pl.dispatch_used} if pl.shared else {}),
             "function": {"id": r.function.id, "name": r.function.name},
             "kind": "+".join(ld.params.consumers[dev].kind for dev in pl.names), "shots": done,
             "requests": r.workload.requests,
             "identical_corrections": int((r.corrections == r.direct).all(axis=1).sum()),
             "card_mismatches": int(res.stats.get("mismatches", 0)), "engine": r.extra["engine"],
             "replies_checked": int(r.extra["replies_checked"]),
             "logical_errors": {"loop": le_loop, "direct": le_direct},
             "ler": {"loop": le_loop / done, "direct": le_direct / done},
             "ci": {"loop": list(interval(le_loop, done, d.interval, d.confidence)),
                    "direct": list(interval(le_direct, done, d.interval, d.confidence))},
             "cost": r.cost, "compute_ns_mean": round(float(r.compute_ps.mean()) / 1000, 3) if "base_ns" in r.cost
             else None,
             "backlog_max": stream["backlog"]["max"],
             "card_backlog_max": int(res.stats.get("backlog_max", 0)),
             "reaction": stream["reaction"], "stream": stream,
             "rtt": summary_ns(res.rtt_ps)}
        if "base_ns" in r.cost:  # the decoder's own time per request, beside the round trip
            s["decoder_only"] = summary_ns(r.compute_ps)
        if pl.shared:  # each device's part of the stream
            s["per_device"] = device_summaries(r, table, cycle, pl.workers)
        if res.loop_ps is not None and sc.control == "aurora":
            s["loop"] = summary_ns(res.loop_ps)
            if q is not None:  # from a round's last acquisition integrated to the correction back at the link
                extra = q.result_latency_ns + q.trigger_network_ns
                s["publish_to_reply"] = {k: round(v + extra, 3) for k, v in s["loop"].items()}
        if deadline_ps is not None:
            lat = res.loop_ps if sc.control == "aurora" else res.rtt_ps
            s["deadline_misses"] = int((lat > deadline_ps).sum())
        tq = np.linspace(int(res.t_in.min()), int(res.t_have.max()), 200).astype(np.int64)
        s["queue_depth_max"] = int(queue_depth(res, np.sort(res.t_in)).max())
        s["throughput"] = {"loop_decode_requests_per_s": w.requests / r.decode_wall_s if r.decode_wall_s else None,
                           "direct_decode_requests_per_s": w.requests / r.direct_wall_s if r.direct_wall_s else None,
                           "note": "wall clock of this machine; not part of the deterministic results"}
        if pl.mode == "chain":
            s["waited_for_rearm"] = int(r.extra["waited_for_rearm"])
        queues.append((tq, queue_depth(res, tq)))
        tb = np.linspace(int(table["arrival_ps"].min()), int(table["start_ps"].max()), 200).astype(np.int64)
        backlogs.append((tb, backlog(table["arrival_ps"], table["start_ps"], tb)))
        if stopped is not None:
            s["shots_requested"], s["requests_requested"] = shots, w.requests
        doc["placements"].append(s)
        if stopped is not None:
            break
    if stopped is not None and runs and pm is not None:  # stopped: PyMatching on the shots the last placement kept
        shots = runs[-1].workload.shots
        pm_errors = int((pm[:shots] != w.observables[:shots]).any(axis=1).sum())
        lo, hi = interval(pm_errors, shots, d.interval, d.confidence)
        doc["stim_pymatching"].update(logical_errors=pm_errors, ler=pm_errors / shots if shots else 0.0, ci=[lo, hi],
                                      shots=shots)
    if d.per == "window" and runs and pm_errors is not None:  # the windowed decode against whole-shot matching
        k, kept = runs[0].logical_errors_direct, runs[0].workload.shots  # (after a stop: its whole shots)
        lo, hi = doc["stim_pymatching"]["ci"]
        doc["windowed_vs_whole_shot"] = {
            "windowed": {"logical_errors": k, "ler": k / kept,
                         "ci": list(interval(k, kept, d.interval, d.confidence))},
            "whole_shot": {"logical_errors": pm_errors, "ler": pm_errors / shots, "ci": [lo, hi]},
            "windowed_within_whole_shot_ci": bool(lo <= k / kept <= hi)}
    return DecodeStudy(doc, runs, queues, tables, backlogs, interrupted="partial" in doc)


def workload_document(d: Decode) -> dict:
    """The code part of results.json's ``workload``: code, distance, rounds, p, noise (the BB codes'
    distance is their own; noise with its default); for a circuit file ``code: null`` and
    ``circuit``: the file as the scenario names it (the file fixes the rest, given as null)."""
    if d.circuit is not None:
        return {"code": None, "circuit": d.circuit, "distance": None, "rounds": None, "p": None, "noise": None}
    from twin.qec.bb import BB_CODES
    dist = BB_CODES[d.code].d if d.code in BB_CODES else d.distance
    return {"code": d.code, "distance": dist, "rounds": d.rounds, "p": d.p, "noise": d.noise_model}


def traffic_document(sc: DecodeScenario) -> dict:
    """The ``traffic`` mapping of a decode study's results.json: the control side's traffic (mode,
    period, clock, where it sits; in_flight and gaps when set), or the Qblox cluster's."""
    q, t = sc.qblox, sc.traffic
    if q is not None:
        return {"mode": "open_loop", "period_ns": q.period_ns(), "clock": q.clock, "ppm": q.ppm,
                "control": "qblox cluster (aurora)", "device": q.device}
    doc = {"mode": t.mode, "period_ns": time_ps(t.period) / 1000 if t.period else None, "clock": t.clock,
           "control": sc.control}
    if t.in_flight != 1:
        doc["in_flight"] = t.in_flight
    if t.gaps is not None:
        doc["gaps"] = t.gaps.model_dump(exclude_none=True)
    return doc


def placement_label(device: str, mode: str, workers: int = 1, order: str = "in_order",
                    dispatch: str | None = None) -> str:
    """A placement's name in the files and plots: ``device:mode``, with ``:xN:order`` for N > 1 workers
    and ``:dispatch`` for a stream shared over devices (``device`` is then ``a+b``)."""
    return f"{device}:{mode}" + (f":x{workers}:{order}" if workers > 1 else "") + (f":{dispatch}" if dispatch else "")


def _label(s: dict) -> str:
    return placement_label(s["device"], s["mode"], s.get("workers", 1), s.get("order", "in_order"),
                           s.get("dispatch"))


def print_decode(study: DecodeStudy, console) -> None:
    """The terminal table of a decode study: per placement a row of reaction-time percentiles and,
    under it, the decoder's own time per request (``decoder only``)."""
    from rich import box
    from rich.table import Table
    doc = study.document
    w = doc["workload"]
    what = (f"{w['circuit']}" if w.get("circuit") else
            f"{w['code']} d={w['distance']} rounds={w['rounds']} p={w['p']:g}")
    tb = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True,
               title=f"{doc['scenario']}: {what}, "
                     f"{w['shots']} shots, {w['requests']} requests, {doc['decoder']['kind']} decoder")
    for col in ("device", "mode", "differ/mism.", "p50 µs", "p99 µs", "p99.9 µs", "misses", "backlog", "growth",
                "ρ-growth"):
        tb.add_column(col, justify="left" if col in ("device", "mode") else "right", no_wrap=True)
    for s in doc["placements"]:
        b = s["stream"]["backlog"]
        exp = b["expected_growth_per_cycle"]
        tb.add_row(s["device"], s["mode"] + (f" ×{s['workers']} {s['order']}" if "workers" in s else "")
                   + (f" {s['dispatch']}" if "dispatch" in s else ""),
                   f"{s['requests'] - s['identical_corrections']}/{s['card_mismatches']}",
                   *(f"{s['reaction'][k] / 1000:.3f}" for k in ("p50_ns", "p99_ns", "p999_ns")),
                   str(s.get("deadline_misses", "-")), str(s["backlog_max"]),
                   f"{b['growth_per_cycle']:.3f}", "-" if exp is None else f"{exp:.3f}")
        if "decoder_only" in s:  # the decoder's own time per request, beside the reaction time
            tb.add_row("", " decoder only", "",
                       *(f"{s['decoder_only'][k] / 1000:.3f}" for k in ("p50_ns", "p99_ns", "p999_ns")), "", "", "", "")
        for p in s.get("per_device", []):  # each device's part of a shared stream
            pb = p["backlog"]
            pe = pb["expected_growth_per_cycle"]
            tb.add_row(f" {p['device']}", f" {p['requests']} requests", "",
                       *(f"{p['reaction'][k] / 1000:.3f}" for k in ("p50_ns", "p99_ns", "p999_ns")), "",
                       str(pb["max"]), f"{pb['growth_per_cycle']:.3f}", "-" if pe is None else f"{pe:.3f}")
    console.print(tb)
    console.print("p50/p99/p99.9: reaction time, a request's last syndrome round measured -> its correction at the "
                  "control system (decoder only: the decoder's own time); differ/mism.: corrections that differ "
                  "from the direct decode / replies the card found wrong; backlog: "
                  "requests sent and not yet started by a decoder (max); growth: backlog per QEC cycle, ρ-growth "
                  "the expected max(0, 1 - 1/ρ) x arrivals per cycle with ρ = S / (K N T_a), K devices of N decoders")
    for s in doc["placements"]:
        lo, hi = s["ci"]["loop"]
        console.print(f"{_label(s)}: LER in the loop {s['ler']['loop']:.2e} [{lo:.1e}, {hi:.1e}], decoded directly "
                      f"{s['ler']['direct']:.2e}")
    pm = doc["stim_pymatching"]
    if pm["logical_errors"] is not None:
        console.print(f"stim+PyMatching direct on the same shots: {pm['logical_errors']} logical errors, "
                      f"LER {pm['ler']:.2e} [{pm['ci'][0]:.1e}, {pm['ci'][1]:.1e}] "
                      f"({doc['interval']['method']}, {doc['interval']['confidence']:.0%})")
    else:
        console.print(f"stim+PyMatching direct: n/a, {pm['how']}")
    ww = doc.get("windowed_vs_whole_shot")
    if ww:
        win = doc["workload"]["window"]
        console.print(f"sliding windows (W={win['rounds']}, C={win['commit']}): LER {ww['windowed']['ler']:.2e} "
                      f"against whole-shot matching {ww['whole_shot']['ler']:.2e}: "
                      + ("within" if ww["windowed_within_whole_shot_ci"] else "OUTSIDE") + " its interval")
    for s in doc["placements"]:
        tp = {k: (v or float("nan")) for k, v in s["throughput"].items()}
        c = s["cost"]
        drawn = " + a residual drawn from the fit's quantiles" if c["how"] == "fitted" else ""
        compute = (f"compute {c['how']} {c['base_ns']:g} ns + {c['per_event_ns']:g} ns per detection event{drawn} "
                   f"(mean {s['compute_ns_mean']:g} ns)") if "base_ns" in c else f"compute: {c['how']}"
        console.print(f"{_label(s)}: {compute}; decoding in the loop "
                      f"{tp['loop_decode_requests_per_s']:,.0f} requests/s, direct "
                      f"{tp['direct_decode_requests_per_s']:,.0f} requests/s (this machine); engine {s['engine']}, "
                      f"{s['replies_checked']:,} replies checked byte for byte by the card")


LATENCY_POINTS = 10_000  # latency_vs_round.png draws every request up to this many, blocks beyond


def latency_blocks(samples_ps: np.ndarray, points: int = LATENCY_POINTS) -> tuple[np.ndarray, np.ndarray,
                                                                                    np.ndarray, int]:
    """What latency_vs_round.png draws of one series (int64 ps per request, in order): up to
    ``points`` requests, every one (x = request number from 1, the value, the value, block 1);
    beyond, consecutive blocks of ``block`` = ceil(n / (points / 2)) requests (the last may be
    shorter): x = each block's first request, its median (lower, an actual request's value) and its
    maximum, and ``block``. Drawing 1e5+ points took seconds; this is a few thousand."""
    n = len(samples_ps)
    if n <= points:
        x = np.arange(1, n + 1)
        return x, samples_ps, samples_ps, 1
    block = -(-n // (points // 2))
    full = n // block * block
    head = samples_ps[:full].reshape(-1, block)
    tail = [samples_ps[full:]] if full < n else []
    mid = np.array([*np.percentile(head, 50, axis=1, method="lower"),
                    *(np.percentile(t, 50, method="lower") for t in tail)], dtype=np.int64)
    top = np.array([*head.max(axis=1), *(t.max() for t in tail)], dtype=np.int64)
    return np.arange(1, n + 1, block), mid, top, block


DECODE_FILES = ("results.json", "stats.csv", "queue_depth.csv", "requests.csv", "latency_vs_round.png",
                "backlog_vs_time.png")


def write_decode_outputs(study: DecodeStudy, folder) -> list[Path]:
    """Stage in ``folder`` (a :class:`twin.output.files.RunFolder`) results.json (deterministic for
    a seed: no wall-clock numbers; a NaN or infinity refused naming the field), stats.csv (sinter's
    CSV, :mod:`twin.qec.sinter_stats`; also deterministic), queue_depth.csv (requests in the card at
    200 instants per placement: placement, t_ps, depth), requests.csv (every request:
    :func:`twin.qec.streaming.write_requests_csv`; when the runs keep their tables),
    latency_vs_round.png (round trip and reaction time per request), backlog_vs_time.png (requests
    waiting anywhere for a decoder) (:data:`DECODE_FILES`). Returns their paths."""
    import matplotlib

    from twin.qec.streaming import write_requests_csv
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    doc = study.document
    clean = dict(doc)
    clean["placements"] = [{k: v for k, v in s.items() if k != "throughput"} for s in doc["placements"]]
    paths = [folder.write_json(DECODE_FILES[0], clean, default=float)]
    from twin.qec.sinter_stats import stats_csv
    paths.append(folder.write(DECODE_FILES[1], stats_csv(study)))  # sinter's CSV: `sinter plot --in stats.csv`

    def queue_csv(f) -> None:
        f.write("placement,t_ps,depth\n")
        for s, (tq, depth) in zip(doc["placements"], study.queues):
            f.writelines(f"{_label(s)},{int(t)},{int(d)}\n" for t, d in zip(tq, depth))
    paths.append(folder.write(DECODE_FILES[2], queue_csv))
    if study.tables is not None:
        paths.append(folder.write(DECODE_FILES[3], lambda f: write_requests_csv(f, study.tables)))
    fig, ax = plt.subplots(figsize=(8, 4))
    block = 1
    for s, r in zip(doc["placements"], study.runs):
        for what, ps in (("round trip", r.result.rtt_ps), ("reaction", r.result.t_back - r.result.t_send)):
            x, mid, top, block = latency_blocks(ps)
            if block == 1:  # every request a point
                ax.plot(x, mid / 1e6, ".", ms=1, label=f"{_label(s)} {what}")
            else:  # a block's median as a line, its slowest request as a point
                line, = ax.plot(x, mid / 1e6, lw=0.8, label=f"{_label(s)} {what}")
                ax.plot(x, top / 1e6, ".", ms=1.5, color=line.get_color())
    if doc["deadline_ns"]:
        ax.axhline(doc["deadline_ns"] / 1000, color="r", lw=1, label="deadline")
    ax.set_xlabel("request")
    ax.set_ylabel("round trip, reaction time (µs)")
    ax.set_title(f"{doc['scenario']}: latency vs round" + (
        f" (per block of {block:,} requests: median line, slowest as a dot)" if block > 1 else ""), fontsize=9)
    ax.legend(markerscale=8, fontsize=8)
    fig.tight_layout()
    try:
        paths.append(folder.savefig(DECODE_FILES[4], fig, dpi=120))
    finally:
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(8, 4))
    for s, (tq, depth) in zip(doc["placements"], study.backlogs or study.queues):
        ax.step((tq - tq[0]) / 1e6, depth, where="post", label=_label(s))
    ax.set_xlabel("time (µs)")
    ax.set_ylabel("requests waiting for a decoder" if study.backlogs else "requests in the card (queue depth)")
    ax.set_title(f"{doc['scenario']}: backlog vs time")
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        paths.append(folder.savefig(DECODE_FILES[5], fig, dpi=120))
    finally:
        plt.close(fig)
    return paths
