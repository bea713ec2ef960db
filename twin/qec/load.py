"""Loading a decode scenario (``twin decode``'s input): the file, calibration and traffic through the
run scenario's loader (:func:`twin.scenario.load.read_scenario`), then the ``decode:`` block checked
against what it names — the devices and their hosting, the circuit (measured from its text before
stim reads it: :mod:`twin.qec.circuit_text`), the decoder (registry, sinter class or a user's
function, resolved from the scenario's folder), the cost model and the feedback plan — each refusal
one line naming file, key and value (:class:`twin.config.ConfigError`). The study that runs a
loaded scenario is :mod:`twin.studies.decode`; the PennyLane device (:mod:`twin.qec.pennylane_device`)
loads through here too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twin.calibration.params import ParamSet
from twin.config import ConfigError, Located
from twin.config.trust import is_allowed, own_file
from twin.qec.hosting import HostingParams, check_mode, load_hosting
from twin.qec.schema import Decode, DecodeScenario, check_shared
from twin.scenario.compile import is_roce


@dataclass
class LoadedDecode:
    """A validated decode scenario with its parameter sets loaded."""

    path: Path
    sc: DecodeScenario
    params: ParamSet
    hosting: HostingParams
    hosting_path: Path
    cost_fit: Any = None  # decode.cost.how fitted: its twin.qec.cost_fit.DecoderFit
    percall: Any = None   # decode.cost.how measured: (twin.qec.percall.PerCall or None, exact, wanted file name)
    circuit: Any = None   # the stim.Circuit the decode block describes (decode_circuit)
    decoder: Any = None   # the decoder built for it at load (decoder_for)
    feedback: Any = None  # decode.feedback: the circuit's twin.qec.feedback.FeedbackPlan
    code: list = field(default_factory=list)  # what code outside the twin it names (twin.config.trust.named_code)


def serving_kind(params, dev: str) -> str:
    """The kind of the device that decodes for placement device ``dev`` (a hand-off: its serving stage)."""
    from twin.calibration.params import serving_kind as kind
    return kind(params, dev)


def load_decode(path: str | Path, find_percall: bool = True) -> LoadedDecode:
    """Load a decode scenario: the file, the parameter set and the traffic as any scenario's
    (:func:`twin.scenario.load.read_scenario`), then the decode block against them: the placements'
    devices and hosting modes, the hosting costs, the circuit, the decoder (built here, so one that
    cannot take the circuit is refused at load), its cost and the feedback plan. ``find_percall``:
    find the per-call file of ``how: measured`` (``twin calibrate decoder``, which writes it, says False).
    Raises :class:`ConfigError` naming file, key and value."""
    from twin.scenario.load import read_scenario, resolve_gaps_file
    path = Path(path)
    sc, cal, params = read_scenario(path, DecodeScenario)
    d = sc.decode
    from twin.config.trust import announce, named_code
    code = named_code({"decode": {"decoder": d.decoder, "function": d.function}}, path)
    _check_named_modules(path, d.function, d.decoder)  # a refused module is never announced as run
    announce(path, code)  # before any of it is imported
    if is_roce(params) and sc.control != "on_card":
        raise ConfigError(path, "control", sc.control, "a RoCE parameter set's controller is the FPGA itself "
                          "(its ERNIC sends the requests): control: on_card")
    resolve_gaps_file(path, "traffic", sc.traffic, d.shots * d.requests_per_shot())
    _check_devices(path, sc, params, cal)
    _check_pace(path, sc)
    from twin.config import named_file, named_input
    hp_path = named_file(path, "hosting", sc.hosting)
    with named_input(path, hp_path):  # its errors show none of its content
        hosting, _ = load_hosting(hp_path)
    from twin.qec.decoders.registry import unavailable
    why = unavailable(d.decoder)
    if why:
        raise ConfigError(path, "decode.decoder", d.decoder, why)
    circuit = decode_circuit(path, d)
    _check_circuit_fits(path, sc, circuit)
    sinter_inner = resolve_sinter_decoder(d.decoder, path) if d.decoder.startswith("sinter:") else None
    fn = _user_function(path, d, params, circuit)
    fit = _check_cost(path, d, params)
    percall = _percall(path, d, params, circuit) if d.cost.how == "measured" and find_percall else None
    _check_syndrome(path, d, circuit)
    try:  # built once here, so a decoder that cannot take this model is refused at load (e.g. no matching graph)
        decoder = decoder_for(d, circuit, path, sinter_inner=sinter_inner, fn=fn)
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(path, "decode.decoder", d.decoder, f"cannot be built for this circuit: "
                          f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}") from None
    _check_gpu_service(path, d, params, decoder)
    return LoadedDecode(path, sc, params, hosting, hp_path, fit, percall, circuit, decoder,
                        _feedback_plan(path, d, circuit), code)


def _check_pace(path: Path, sc: DecodeScenario) -> None:
    """``decode.placements[i].bridge.pace: true`` where the paced loop cannot run the placement's
    stream (what :func:`twin.qec.live_pace.paced_applies` refuses that the scenario shows at load):
    raises :class:`ConfigError` naming the key."""
    t, d = sc.traffic, sc.decode
    why = None
    if t.mode == "closed_loop" and t.in_flight > 1:
        why = f"traffic.in_flight {t.in_flight}: the paced loop keeps one request in flight"
    elif t.program is not None:
        why = "traffic.program waits for replies: the event model runs it"
    elif d.feedback is not None:
        why = "decode.feedback: the circuit's gates wait for the loop's replies: the event model runs them"
    elif sc.qblox is not None and sc.qblox.listens():
        why = "the Qblox cluster's program waits for the replies: the event model runs it"
    for i, pl in enumerate(d.placements):
        if why and pl.bridge is not None and pl.bridge.pace is True:
            raise ConfigError(path, f"decode.placements[{i}].bridge.pace", True, why)


def cost_model(ld: LoadedDecode, pl, seed: int):
    """The :class:`twin.qec.cost.CostModel` of placement ``pl`` (its ``call``) under ``decode.cost``."""
    from twin.qec.cost import CostModel
    from twin.units import time_ps
    d = ld.sc.decode
    pc, exact, wanted = ld.percall or (None, True, None)
    fixed = time_ps(d.cost.fixed) / 1000 if d.cost.fixed else None
    return CostModel(how=d.cost.how, scale=d.cost.scale, fixed_ns=fixed,
                     fit=ld.cost_fit, file=d.cost.file, seed=seed, percall=pc, exact=exact, wanted=wanted,
                     call=pl.call)


def _percall(path: Path, d: Decode, params, circuit):
    """``how: measured``: (the per-call file, whether it was measured on this workload, the file name
    this workload's would have): ``decode.cost.file``, else the shipped one for the workload, else
    the nearest shipped one of the same decoder (:func:`twin.qec.percall.nearest`), else None
    (refused here when a placement would decode on a CPU, unless a lookup or function decoder
    that ``fixed`` could time: then the refusal names the way out). Raises :class:`ConfigError`."""
    import hashlib

    from twin.qec import percall as P
    sha = hashlib.sha256(str(circuit).encode()).hexdigest() if d.circuit is not None else None
    wanted = P.file_name(d.decoder, d.code, d.distance, d.rounds, d.p, d.noise_model, d.per, d.circuit, sha)
    if d.cost.file is not None:
        from twin.config import named_file
        f = named_file(path, "decode.cost.file", d.cost.file)
        try:
            pc = P.load_percall(f, d.cost.file)
        except ConfigError as e:
            raise ConfigError(path, "decode.cost.file", d.cost.file, f"not a per-call file ({e})") from None
        if pc.doc["decoder"] != d.decoder:
            raise ConfigError(path, "decode.cost.file", d.cost.file, f"measured on a {pc.doc['decoder']} decoder; "
                              f"this scenario's decoder is {d.decoder}")
        return pc, Path(d.cost.file).name == wanted, wanted
    from twin.qec.schema import cost_timed
    for i, j, dev, pl in _devices(d):
        if "call" in pl.model_fields_set and serving_kind(params, dev) != "cpu":
            raise ConfigError(path, f"decode.placements[{i}].call", pl.call, f"{dev} decodes on a "
                              f"{serving_kind(params, dev)}; the native and through-Python measurements are a CPU's")
    found, exact = P.shipped(wanted, d.decoder, d.code, d.distance, d.rounds, d.p)
    cpus = [(i, j, dev, pl) for i, j, dev, pl in _devices(d) if serving_kind(params, dev) == "cpu"
            and cost_timed(pl.model)]
    if found is None and cpus and d.per != "window":
        i, j, dev, pl = cpus[0]
        raise ConfigError(path, "decode.cost", "{how: measured}", f"no per-call measurement of decoder {d.decoder} "
                          f"for a CPU placement ({dev}): {P.FOLDER} has none ({wanted}); measure it (twin calibrate "
                          "decoder SCENARIO) and give decode.cost.file, or give decode.cost {how: model, fixed: ...}")
    return (P.load_percall(found, str(P.FOLDER / found.name)) if found else None), exact, wanted


def _devices(d: Decode):
    """``(placement index, device index, device name, placement)`` of every placement's devices."""
    for i, pl in enumerate(d.placements):
        for j, dev in enumerate(pl.names):
            yield i, j, dev, pl


def _check_devices(path: Path, sc: DecodeScenario, params, cal: Path) -> None:
    """Every placement's devices are consumers of ``params`` whose serving device can host the
    placement's mode (:func:`twin.qec.hosting.check_mode`). Raises :class:`ConfigError`."""
    for i, j, dev, pl in _devices(sc.decode):
        if dev not in params.consumers:
            raise ConfigError(path, pl.device_key(i, j), dev,
                              f"not a consumer of {cal.name} (have: {', '.join(params.consumers)})")
        try:
            check_mode(pl.mode, serving_kind(params, dev), dev)
        except ValueError as e:
            raise ConfigError(path, f"decode.placements[{i}].mode", pl.mode, str(e)) from None


def _check_circuit_fits(path: Path, sc: DecodeScenario, circuit) -> None:
    """What only the circuit tells: a circuit file's per-round requests (its rounds, not
    ``decode.rounds``) stay within the simulated horizon; a Qblox program's answer bit is one of
    the correction's observable bits. Raises :class:`ConfigError`."""
    d = sc.decode
    if d.circuit is not None and d.per == "round":  # the file's rounds, not decode.rounds, set the requests
        from twin.qec.workload import sample_circuit
        from twin.scenario.schema import check_horizon
        try:
            check_horizon(sc.traffic, d.shots * sample_circuit(circuit, 1, per="round").requests_per_shot,
                          ("traffic",))
        except Located as e:
            raise ConfigError(path, ".".join(map(str, e.path)), e.value, e.problem) from None
    q = sc.qblox
    if q is not None and q.feedback is not None and q.feedback.answer_bit >= circuit.num_observables:
        raise ConfigError(path, "qblox.feedback.answer_bit", q.feedback.answer_bit,
                          f"the correction has {circuit.num_observables} observable bit(s) (0..."
                          f"{circuit.num_observables - 1}): this bit would always read 0")


def check_shots(ld: LoadedDecode, shots: int) -> int:
    """``shots`` (e.g. ``twin decode --shots``) for the loaded scenario, checked as the scenario's own
    ``decode.shots`` is: within the schema's bound, its requests within the simulated horizon (a
    gaps file's values summed over them: :func:`twin.scenario.load.check_rounds`' rule), and within
    the rounds a Qblox program that waits for every correction publishes. Returns the requests per
    placement (shots x requests per shot). The study's memory is estimated from them
    (:func:`twin.engine.memory.decode_bytes`) and refused where it cannot be allocated. Raises
    :class:`ConfigError` naming ``decode.shots``."""
    from twin.qec.workload import sample_circuit
    from twin.scenario.schema import check_listening_rounds
    d = ld.sc.decode
    most = next(m.le for m in Decode.model_fields["shots"].metadata if getattr(m, "le", None) is not None)
    if shots > most:
        raise ConfigError(ld.path, "decode.shots", shots, f"at most {most:,} shots (the decode study keeps every "
                          "shot's detection events and corrections in memory)")
    circuit = ld.circuit if ld.circuit is not None else decode_circuit(ld.path, d)
    per_shot = sample_circuit(circuit, 1, per=d.per, window=d.window_tuple()).requests_per_shot
    total = shots * per_shot
    from twin.engine.memory import decode_bytes, memory_refusal
    k, dets = len(d.placements), circuit.num_detectors
    why = memory_refusal(decode_bytes(shots, per_shot, k, dets), f"{shots:,} shots of {dets:,} detectors and "
                         f"{per_shot:,} request(s) over {k} placement(s)", "ask for fewer shots")
    if why:
        raise ConfigError(ld.path, "decode.shots", shots, why)
    from twin.scenario.load import check_traffic_rounds
    check_traffic_rounds(ld.path, ("traffic",), ld.sc.traffic, total)
    for i, pl in enumerate(d.placements):
        try:
            check_shared(pl, i, total)
        except Located as e:
            raise ConfigError(ld.path, "decode.shots", shots, e.problem) from None
    if ld.sc.qblox is not None:  # a program that waits for every correction runs its own rounds
        try:
            check_listening_rounds(ld.sc.qblox, total, ("decode", "shots"))
        except Located as e:
            raise ConfigError(ld.path, "decode.shots", shots, e.problem) from None
    return total


def _user_function(path: Path, d: Decode, params, circuit):
    """``decoder: function``: its callable resolved (:func:`resolve_function`), on no FPGA device
    and with a time the cost model can give; None for the other decoders (which take no
    ``function``). Raises :class:`ConfigError`."""
    if d.decoder != "function":
        if d.function:
            raise ConfigError(path, "decode.function", d.function,
                              f"only for decoder: function (decoder is {d.decoder})")
        return None
    if not d.function:
        raise ConfigError(path, "decode.function", "<missing>", "decoder: function needs a function "
                          "('package.module:callable', 'lib.so:symbol' or a registered function name)")
    fn = resolve_function(d.function, path, reply_bytes=-(-circuit.num_observables // 8))
    for i, j, dev, pl in _devices(d):
        if serving_kind(params, dev) == "fpga":
            raise ConfigError(path, pl.device_key(i, j), dev, "a Python function does not run in FPGA logic")
    if d.cost.how == "model" and d.cost.fixed is None:
        raise ConfigError(path, "decode.cost.fixed", "<missing>", "a user function has no entry in the cost "
                          "model: give its time (fixed: '50 ns') or use how: host_timed")
    if d.cost.how == "measured" and d.cost.file is None:
        raise ConfigError(path, "decode.cost.fixed", "<missing>", "a user function has no shipped per-call "
                          "measurement: give its time (fixed: '50 ns'), use how: host_timed, or measure it (twin "
                          "calibrate decoder SCENARIO) and give decode.cost.file")
    return fn


def _check_cost(path: Path, d: Decode, params):
    """``decode.cost`` applies to some placement (a model whose decoder time is the cost model's,
    :data:`twin.nodes.models.COST_MODEL`); the cost model has the decoder on every serving device
    kind (``how: model`` without ``fixed``). Returns the fitted calibration (``how: fitted``) or
    None. Raises :class:`ConfigError`."""
    from twin.qec.schema import CONSUMER_MODELS, cost_timed, cost_timed_models
    if "cost" in d.model_fields_set and not any(cost_timed(pl.model) for pl in d.placements):
        from twin.nodes.models import model_for
        own = "; ".join(f"{m}: {model_for('consumer', m).supports['decoder_time']}" for m in CONSUMER_MODELS
                        if not cost_timed(m))
        raise ConfigError(path, "decode.cost", "{...}", f"no placement uses it (the decoder time of model {own}); "
                          f"cost applies to {cost_timed_models('and')} placements")
    fit = _load_cost_fit(path, d) if d.cost.how == "fitted" else None
    if d.cost.how in ("model", "measured") and d.cost.fixed is None and d.decoder != "function":
        from twin.qec.cost import MODEL_NS
        from twin.qec.decoders.registry import kind_of
        for i, j, dev, pl in _devices(d):
            kind = serving_kind(params, dev)
            if d.cost.how == "measured" and (kind == "cpu" or not cost_timed(pl.model)) or kind == "gpu":
                continue  # a CPU draws the per-call measurement (_percall); rtl and live time themselves; a GPU's
                # is its persistent-kernel measurement (_check_gpu_service, once the decoder is built)
            if (kind_of(d.decoder), kind) not in MODEL_NS:
                raise ConfigError(path, pl.device_key(i, j), dev,
                                  f"the cost model has no {d.decoder} decoder on a {kind}: give decode.cost.fixed "
                                  "or use how: host_timed")
    return fit


def _check_gpu_service(path: Path, d: Decode, params, decoder) -> None:
    """A GPU placement whose decoder time is the cost model's (how ``measured`` or ``model``, no
    ``fixed``) needs the decoder measured in a persistent kernel (:func:`twin.qec.gpu_cost.refusal`);
    a Python user function costs its ``function_ns`` there. Raises :class:`ConfigError` naming the
    placement's device."""
    from twin.qec.schema import cost_timed
    if d.cost.how not in ("measured", "model") or d.cost.fixed is not None or decoder.kind == "function":
        return
    gpus = [(i, j, dev, pl) for i, j, dev, pl in _devices(d) if serving_kind(params, dev) == "gpu"
            and cost_timed(pl.model)]
    if not gpus:
        return
    from twin.qec.gpu_cost import refusal
    why = refusal(decoder)
    if why:
        i, j, dev, pl = gpus[0]
        raise ConfigError(path, pl.device_key(i, j), dev, why)


def _check_syndrome(path: Path, d: Decode, circuit) -> None:
    """A lookup table holds the circuit's detectors; ``decode.frame_bytes`` holds its syndrome.
    Raises :class:`ConfigError`."""
    from twin.qec.lookup import MAX_DETECTORS, syndrome_bytes
    if d.decoder == "lookup" and circuit.num_detectors > MAX_DETECTORS:
        raise ConfigError(path, "decode.decoder", d.decoder, f"{circuit.num_detectors} detectors; a lookup table "
                          f"holds at most {MAX_DETECTORS} (use matching)")
    if d.frame_bytes is not None and d.frame_bytes < syndrome_bytes(circuit.num_detectors):
        need = syndrome_bytes(circuit.num_detectors)
        raise ConfigError(path, "decode.frame_bytes", d.frame_bytes,
                          f"the syndrome of {circuit.num_detectors} detectors needs {need}")


def _feedback_plan(path: Path, d: Decode, circuit):
    """``decode.feedback``: the circuit's :class:`twin.qec.feedback.FeedbackPlan` (its classically
    controlled gates), or None. Raises :class:`ConfigError` naming ``decode.feedback``."""
    if d.feedback is None:
        return None
    from twin.qec.feedback import FeedbackError, analyse
    try:
        return analyse(circuit, d.feedback.qubits)
    except FeedbackError as e:
        raise ConfigError(path, "decode.feedback", d.circuit, str(e)) from None


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


def _check_certain_errors(path: Path, d: Decode, dem) -> None:
    """Refuse a circuit with an error of probability 1 for ``decoder: matching``: matching weighs
    an edge ``log((1 - p) / p)``, infinite at p = 1 (a deterministic flip is part of the circuit, not
    an error; write the gate instead)."""
    if d.decoder != "matching":
        return
    from twin.qec.circuit_text import certain_errors
    n = certain_errors(dem)
    if n:
        raise ConfigError(path, "decode.circuit", d.circuit, f"{n:,} error(s) of probability 1: matching weighs an "
                          "edge log((1 - p)/p), infinite at p = 1 (a certain flip is a gate, not an error: write "
                          "the gate, or use decoder: lookup)")


def decode_circuit(path: Path, d: Decode):
    """The ``stim.Circuit`` a decode block describes: ``decode.circuit`` (a .stim file, relative to
    the scenario's folder) or the named code's memory experiment. Raises ConfigError naming the key:
    a file that is missing, does not parse, or has no detectors or no observables; a noise model the
    code is not built with; a distance the code does not have; stim's own limits (rounds)."""
    if d.circuit is not None:
        from twin.config import named_file, named_input
        f = named_file(path, "decode.circuit", d.circuit)
        with named_input(path, f):  # what an error quotes of the file is taken out of it
            return _file_circuit(path, d, f)
    return _code_circuit(path, d)


def _file_circuit(path: Path, d: Decode, f: Path):
    """:func:`decode_circuit` of a ``decode.circuit`` file ``f``: measured from its text, then parsed."""
    import stim

    from twin.config import read_input_text
    try:
        text = read_input_text(f)  # a regular file of at most 16 MiB of UTF-8
    except ConfigError as e:
        raise ConfigError(path, "decode.circuit", d.circuit, e.problem) from None
    from twin.qec.circuit_text import CircuitTextError, check_counts, measure_circuit_text
    try:
        counts = measure_circuit_text(text)  # before stim parses it: nesting, counts, lookbacks
    except CircuitTextError as e:
        raise ConfigError(path, "decode.circuit", d.circuit, str(e)) from None
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
        check_counts(counts)
    except CircuitTextError as e:
        raise ConfigError(path, "decode.circuit", d.circuit, str(e)) from None
    from twin.qec.lookup import MAX_DETECTORS
    if d.decoder == "lookup" and c.num_detectors > MAX_DETECTORS:  # said before stim builds a model for minutes
        raise ConfigError(path, "decode.decoder", d.decoder, f"{c.num_detectors} detectors; a lookup table holds "
                          f"at most {MAX_DETECTORS} (use matching)")
    try:
        dem = c.detector_error_model(decompose_errors=False, approximate_disjoint_errors=True)
    except ValueError as e:  # e.g. a non-deterministic detector or observable
        raise ConfigError(path, "decode.circuit", d.circuit, f"stim has no detector error model for it: "
                          f"{(str(e).strip().splitlines() or [''])[0][:160]}") from None
    _check_certain_errors(path, d, dem)
    return c


def _code_circuit(path: Path, d: Decode):
    """:func:`decode_circuit` of a named code's memory experiment."""
    from twin.qec.bb import BB_CODES
    from twin.qec.codes import memory_circuit
    noise = d.noise_model
    if d.code is None or noise is None:  # the schema asks for a code without a circuit file (Decode._source)
        raise ConfigError(path, "decode.code", "<missing>", "give either code (a named code) or circuit (a .stim file)")
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
        if d.function is None:
            raise ConfigError(path or "<scenario>", "decode.function", "<missing>", "decoder: function needs the "
                              "function (package.module:callable, lib.so:symbol or a registered function's name)")
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
    _check_own_module(where, spec, mod, path, "decode.decoder", "a sinter class is instantiated and run here")
    try:
        module, _root = _import_from(mod, function_roots(path))
        made = getattr(module, cls)
        if not isinstance(made, type):  # a function would be called here with no arguments (sinter:os:abort)
            raise ConfigError(where, "decode.decoder", spec, f"{mod}:{cls} is a {type(made).__name__}, not a class")
        obj = made()
    except ConfigError:
        raise
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
    from twin.config import named_file, named_input
    from twin.qec.cost_fit import load_fit
    if d.cost.file is None:  # the schema asks for it under how: fitted (Cost._applies)
        raise ConfigError(path, "decode.cost.file", "<missing>", "how: fitted needs the calibration file")
    f = named_file(path, "decode.cost.file", d.cost.file)
    try:
        with named_input(path, f):  # none of its content in the message
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
            found = [getattr(cached, "__file__", None)] + list(getattr(cached, "__path__", []))
            homes = [Path(h).resolve() for h in found if h]
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


ALLOW_HINT = "if you trust it, allow it with --allow-code {name} (or TWIN_ALLOW_CODE={name})"


def module_file(mod: str, path: Path | None) -> Path | str | None:
    """Where ``mod`` would be imported from, without running it: its file in the first of
    :func:`function_roots` that holds one, else the ordinary import path's (the top-level package's
    file for a dotted name, which :func:`importlib.util.find_spec` finds without importing; a
    built-in or frozen module in words), else None."""
    import importlib.util
    for root in function_roots(path):
        f = _module_file(root, mod)
        if f is not None:
            return f
    try:
        spec = importlib.util.find_spec(mod.split(".")[0])
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin in (None, "built-in", "frozen") or not Path(spec.origin).is_absolute():
        return f"{spec.origin or 'namespace package'} module {spec.name}"  # the interpreter's own: not the user's
    return Path(spec.origin)


def _check_named_modules(path: Path, function, decoder) -> None:
    """The trust checks of the modules ``decode.function`` and a ``sinter:`` decoder name
    (:func:`_check_own_module`), before :func:`twin.config.trust.announce` says the scenario runs
    them: a refused module is one line, not a note that it runs followed by the refusal. The twin's
    own modules, a C library (checked where it is loaded) and a registered name pass here."""
    if isinstance(function, str) and ":" in function:
        mod = function.rpartition(":")[0]
        if mod and not mod.endswith((".so", ".dylib")) and not (mod == "twin" or mod.startswith("twin.")):
            _check_own_module(path, function, mod, path)
    if isinstance(decoder, str) and decoder.startswith("sinter:"):
        mod = decoder[len("sinter:"):].partition(":")[0]
        if mod and not (mod == "twin" or mod.startswith("twin.")):
            _check_own_module(path, decoder, mod, path, "decode.decoder", "a sinter class is instantiated and run here")


def _check_own_module(where, spec: str, mod: str, path: Path | None, key: str = "decode.function",
                      why: str = "a decoder function is called with bytes the scenario shapes") -> None:
    """``decode.function``'s module ``mod`` is the user's own (:func:`twin.config.trust.own_file`:
    under one of :func:`function_roots`, not the standard library or an installed package) or
    allowed by the user (``--allow-code``, ``$TWIN_ALLOW_CODE``); checked before it is imported. A
    module that is nowhere is left to the import's own error. Raises :class:`ConfigError` naming
    ``key`` (``decode.function``, or ``decode.decoder`` for a sinter class), saying ``why`` it matters."""
    f = module_file(mod, path)
    if f is None or is_allowed(mod) or (isinstance(f, Path) and own_file(f, function_roots(path))):
        return
    raise ConfigError(where, key, spec, f"module {mod} ({f}) is not one of your own (the scenario's folder or the "
                      f"current directory; not the standard library or an installed package), and {why}: "
                      f"{ALLOW_HINT.format(name=mod)}")


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
        from twin.config import named_file
        from twin.qec.decoders.function import c_function
        try:  # an existing regular file (a symlink loop, a FIFO or a folder refused before dlopen sees it)
            lib = named_file(path if path is not None else Path.cwd() / "<scenario>", "decode.function", mod)
        except ConfigError as e:
            raise ConfigError(where, "decode.function", spec, f"the library: {e.problem}") from None
        lib = Path(lib).resolve()
        if not own_file(lib, [Path.cwd()] + ([path.parent] if path is not None else [])) and not is_allowed(mod):
            raise ConfigError(where, "decode.function", spec, f"the C library {lib} is not one of your own files (the "
                              f"scenario's folder or the current directory) and a decoder runs in this process: "
                              f"{ALLOW_HINT.format(name=Path(mod).name)}")
        try:
            return c_function(lib, attr, reply_bytes)
        except (OSError, AttributeError) as e:
            raise ConfigError(where, "decode.function", spec, f"cannot load the C function: "
                              f"{(str(e).splitlines() or [''])[0][:160]}") from None
    _check_own_module(where, spec, mod, path)
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


