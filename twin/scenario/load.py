"""Loading a scenario: the file, the parameter set it names, and every node's model checked
against the model registry (:mod:`twin.nodes.registry`). The I/O lives here; the schema
(:mod:`twin.scenario.schema`) is pure.

Errors name the file, the key and the value (:class:`twin.config.ConfigError`).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from twin.calibration.params import ParamSet
from twin.config import ConfigError, load_model, named_file, named_input
from twin.config.errors import scrub
from twin.nodes.models import Situation
from twin.scenario.schema import Faults, Scenario, ScenarioBase

S = TypeVar("S", bound=ScenarioBase)

if TYPE_CHECKING:
    from twin.runtime.functions import Function


class LoadedScenario:
    """A validated scenario with its parameter set loaded and paths resolved; ``code``: what code
    outside the twin it names (:func:`twin.config.trust.named_code`: a user's Verilog that reaches
    the host), for the command to announce."""

    def __init__(self, path: Path, scenario: Scenario, params: ParamSet, measured_path: Path | None,
                 calibration_path: Path | None = None, code: list | None = None):
        self.path = path
        self.calibration_path = calibration_path  # the parameter set's file (its fit targets: twin.calibration.targets)
        self.scenario = scenario
        self.params = params
        self.measured_path = measured_path
        self.code = code or []


def check_not_a_scenario(path: Path, key: str, value: str, target: Path) -> None:
    """``target`` (named by ``key: value`` in the scenario ``path``) must be a parameter set, not a
    scenario (a file with ``nodes`` or ``decode``). Raises :class:`ConfigError` naming file, key, value."""
    from twin.config import load_yaml
    doc = load_yaml(target)
    if isinstance(doc, dict) and ("nodes" in doc or "decode" in doc):
        raise ConfigError(path, key, value, f"{target.name} is a scenario, not a parameter set; name a "
                          "parameter set (e.g. calibrations/fitted/card_path.yaml)")


def load_calibration(path: Path, value: str):
    """The parameter set a scenario ``path`` names by ``calibration: value`` (relative to the
    scenario): a card-path or a RoCE one. Returns (its resolved path, the parameter set). Raises
    :class:`ConfigError` naming file, key and value for a missing file or a scenario named instead."""
    from twin.calibration.roce import load_any_params
    cal_path = named_file(path, "calibration", value)
    with named_input(path, cal_path):  # its errors show none of its content
        check_not_a_scenario(path, "calibration", value, cal_path)
        return cal_path, load_any_params(cal_path)


# a file written for the other study: (the key that tells it, the value shown, what it is)
_WRITTEN_FOR = {"decode": ("decode", "{...}", "this is a decode scenario (it has a decode block); run it with "
                           "`twin decode {path}`"),
                "run": ("nodes", "[...]", "this is a loop scenario (nodes, no decode block); run it with "
                        "`twin run {path}`")}


def _written_for(data: object) -> str | None:
    """The study a scenario file is written for: ``decode`` (a decode block, no nodes), ``run``
    (nodes, no decode block), None (neither or both: the schema says what is wrong)."""
    if not isinstance(data, dict) or ("decode" in data) == ("nodes" in data):
        return None
    return "decode" if "decode" in data else "run"


def read_scenario(path: Path, schema: type[S], data: Any = None) -> tuple[S, Path, Any]:
    """What loading any scenario shares (``schema``: :class:`Scenario`, or a subclass of
    :class:`~twin.scenario.schema.ScenarioBase` such as ``twin decode``'s): the YAML, refused when it
    is written for the other study (a ``decode`` block and no ``nodes``, or the reverse), validated
    as ``schema``, and the parameter set its ``calibration`` names (:func:`load_calibration`).
    ``data``: the document to read instead of the file's (the file's with a sweep's values set; its
    file keys still relative to ``path``). Returns (scenario, the parameter set's path, the parameter
    set). Raises :class:`ConfigError` naming file, key and value."""
    from twin.config import load_yaml
    data = load_yaml(path) if data is None else data
    written = _written_for(data)
    if written is not None and written != schema.study:
        key, value, what = _WRITTEN_FOR[written]
        raise ConfigError(path, key, value, what.format(path=path))
    sc = load_model(path, schema, data=data)
    cal_path, params = load_calibration(path, sc.calibration)
    return sc, cal_path, params


def load_scenario(path: str | Path, data: Any = None) -> LoadedScenario:
    """Load a scenario and the parameter set it names; check every device exists there. ``data``:
    a document to load as if the file ``path`` held it (:func:`read_scenario`).

    Raises :class:`ConfigError` naming the file, key and value of the first problem.
    """
    path = Path(path)
    sc, cal_path, params = read_scenario(path, Scenario, data)
    from twin.config.trust import announce, named_code
    code = named_code({"nodes": [{"rtl": {"sources": n.rtl.sources}} if n.rtl else {} for n in sc.nodes]}, path)
    announce(path, code)  # before any of it is built
    check_path(path, sc, params)
    check_nodes(path, sc, params)
    for key, t, n in [("traffic", sc.traffic, sc.rounds)] + [(f"flows[{i}].traffic", f.traffic, f.rounds or sc.rounds)
                                                           for i, f in enumerate(sc.flows)]:
        resolve_gaps_file(path, key, t, n)
    resolve_host_runtimes(path, sc, params)
    measured_path = None
    if sc.measured is not None:
        measured_path = named_file(path, "measured", sc.measured)
    return LoadedScenario(path, sc, params, measured_path, cal_path, code)


def _faults_on(sc: Scenario) -> frozenset[str]:
    f = sc.faults
    if f is None:
        return frozenset()
    return frozenset(k for k, on in (("corrupt_piece", f.corrupt_piece), ("drop_frame", f.drop_frame),
                                    ("stall", f.stall), ("host_freeze", f.host_freeze)) if on)


def check_path(path: Path, sc: Scenario, params) -> None:
    """The route the parameter set's requests take (``params.path``, :func:`twin.scenario.compile.is_roce`)
    is the scenario's: a mesh runs on card-path links; in a loop scenario every consumer is reached over
    ethernet (RoCE) under a RoCE set, over pcie from the link card under a card-path set. Raises
    :class:`ConfigError` naming the calibration."""
    from twin.scenario.compile import is_roce
    roce_params = is_roce(params)
    if sc.flows and roce_params:
        raise ConfigError(path, "calibration", sc.calibration, "a mesh (flows) runs on card-path links (aurora, "
                          "pcie); its calibration must be a card-path parameter set")
    if sc.flows:
        return
    for node in sc.consumers():
        roce = sc.roce_hops(node.name) is not None
        if roce != roce_params:
            raise ConfigError(path, "calibration", sc.calibration,
                              f"node {node.name!r} is reached over " + (
                                  "ethernet (RoCE): the calibration must be a parameter set with kind: roce_path"
                                  if roce else "pcie from the link card: the calibration must be a card-path "
                                  "parameter set"))


def resolve_host_runtimes(path: Path, sc: Scenario, params) -> None:
    """Every consumer's ``host_runtime`` block: its file resolved relative to the scenario and read
    (:func:`twin.devices.host_runtime.read`), the consumer one stage. Raises :class:`ConfigError`
    naming file, key and value."""
    from twin.devices.host_runtime import read
    for i, node in enumerate(sc.nodes):
        hr = node.host_runtime
        if hr is None:
            continue
        key = f"nodes[{i}].host_runtime"
        c = params.consumers.get(node.device)
        if c is not None and c.handoff is not None:
            raise ConfigError(path, key, "{...}", f"consumer {node.device} hands its requests to a second device; "
                              "a host runtime runs in one")
        f = named_file(path, f"{key}.file", hr.file)
        try:
            read(str(f), hr.wake)
        except (OSError, ValueError) as e:
            raise ConfigError(path, f"{key}.file", hr.file, str(e)) from None
        hr.file = str(f)


def check_nodes(path: Path, sc: Scenario, params) -> None:
    """Every node's device exists in ``params`` and its model can stand where the scenario puts it
    (asked of the model registry); a user RTL block's files exist and declare its top; a udp
    bridge's host resolves; a host freeze has a host thread to stop. Raises :class:`ConfigError`
    naming file, key and value."""
    g = sc.topology()  # a loop's without networkx (twin.scenario.graph.Topology)
    mesh = bool(sc.flows)
    pairs: dict[str, int] = {}  # a mesh: the queue pairs of each card and consumer a flow passes
    fn_of: dict[str, str] = {}  # ... and the function of its first flow
    for r in g.graph["routes"] if mesh else ():
        for v in (r.card, r.consumer):
            pairs[v] = pairs.get(v, 0) + 1
            fn_of.setdefault(v, r.function)
    faults = _faults_on(sc)
    if not mesh:
        check_c2c(path, sc, params, g)
    for i, node in enumerate(sc.nodes):
        if node.kind == "consumer" and node.device not in params.consumers:
            raise ConfigError(path, f"nodes[{i}].device", node.device,
                              f"not a consumer of {Path(sc.calibration).name} (have: {', '.join(params.consumers)})")
        if mesh and node.kind in ("consumer", "link_card") and node.name not in pairs:
            continue  # no flow passes it
        c = params.consumers[node.device] if node.kind == "consumer" else None
        from twin.runtime.functions import lookup
        fn = lookup(fn_of.get(node.name, sc.function))
        check_model(path, i, node, fn, Situation(
            device_kind=None if c is None else c.kind, path=params.path, queue_pairs=pairs.get(node.name, 1),
            frame_bytes=sc.frame_bytes, function=fn, faults=faults,
            study="mesh" if mesh else "run", stages=2 if c is not None and c.handoff is not None else 1))
        check_node_files(path, i, node)
        check_pace(path, i, node, faults, sc)
    if sc.faults is not None and sc.faults.host_freeze:
        check_host_freeze(path, sc.faults, params, [n for n in sc.consumers() if not mesh or n.name in pairs])


def check_model(path: Path, i: int, node, function: Function, situation: Situation) -> None:
    """``nodes[i]``'s model can stand in ``situation`` (whose function is ``function``): the model
    registry's refusal (:func:`twin.nodes.models.refusal`), if any, raised as a :class:`ConfigError` on
    the node's model, or on the scenario's ``function`` when the function is what the model cannot serve."""
    why = node.entry.refuse(situation)  # the registry's entry, asked once at validation
    if not why:
        return
    key, value = f"nodes[{i}].model", node.model
    if why == node.entry.cannot_serve(function):
        key, value = "function", function.name  # the function is what cannot be served
    raise ConfigError(path, key, value, f"nodes[{i}] ({node.name}) is model {node.model}: {why}")


def check_pace(path: Path, i: int, node, faults: frozenset[str], sc: Scenario) -> None:
    """``nodes[i].bridge.pace: true`` where the paced loop cannot run the node's flow (what
    :func:`twin.engine.paced.paced_refusal` refuses that the scenario shows at load: the card
    path's faults and host freezes, several requests in flight in a closed loop, a program waiting
    for replies; in a mesh, of the live node's own flow, or more than one live node): raises
    :class:`ConfigError` naming the key."""
    if node.bridge is None or node.bridge.pace is not True:
        return
    why, traffic, key = None, sc.traffic, "traffic"
    if sc.flows:  # a mesh: the live node's own flow (one queue pair), simulated around it (twin.studies.mesh_live)
        live = [n.name for n in sc.nodes if n.kind == "consumer" and n.model == "live"]
        flow = next((r.flow for r in sc.graph().graph["routes"] if r.consumer == node.name), None)
        if len(live) > 1:
            why = f"{len(live)} live nodes in a mesh: the paced loop drives one live device at a time"
        elif flow is not None:
            traffic, key = sc.flows[flow].traffic, f"flows[{flow}].traffic"
    if why is None and faults:
        why = f"faults.{sorted(faults)[0]} runs on the round-by-round path (the event model)"
    elif why is None and traffic.in_flight > 1:
        why = f"{key}.in_flight {traffic.in_flight}: the paced loop keeps one request in flight"
    elif why is None and traffic.program is not None:
        why = f"{key}.program waits for replies: the event model runs it"
    if why:
        raise ConfigError(path, f"nodes[{i}].bridge.pace", True, why)


def check_node_files(path: Path, i: int, node) -> None:
    """What ``nodes[i]`` names outside the scenario: a udp bridge's host resolves to an IPv4
    address; a user RTL block's sources exist and declare its top. Raises :class:`ConfigError`."""
    if node.bridge is not None and node.bridge.backend == "udp":
        import socket
        try:
            socket.getaddrinfo(node.bridge.host, node.bridge.port, socket.AF_INET, socket.SOCK_DGRAM)
        except (socket.gaierror, UnicodeError) as e:
            why = getattr(e, "strerror", None) or e
            raise ConfigError(path, f"nodes[{i}].bridge.host", node.bridge.host,
                              f"cannot resolve it to an IPv4 address ({why})") from None
    if node.rtl:
        for j, src in enumerate(node.rtl.sources):
            named_file(path, f"nodes[{i}].rtl.sources[{j}]", src)
        from twin.rtl.build import check_user_block
        check_user_block(path, i, node.rtl.top, node.rtl.sources)


def check_host_freeze(path: Path, faults: Faults, params, served: list) -> None:
    """``faults.host_freeze`` stops a host's own threads: one of the ``served`` consumer nodes must be a
    CPU consumer, not a GPU's or an FPGA's. Raises :class:`ConfigError` naming the first freeze."""
    if not any(params.consumers[n.device].kind == "cpu" for n in served):
        raise ConfigError(path, "faults.host_freeze[0].at", str(faults.host_freeze[0].at),
                          "no consumer here is a host thread (" + ", ".join(
                              f"{n.name}: {params.consumers[n.device].kind}" for n in served)
                          + "): GPUs and FPGAs keep answering through a host freeze, so it would change nothing")


def check_c2c(path: Path, sc: Scenario, params, g) -> None:
    """NVLink-C2C in a loop scenario: a ``c2c`` link joins two consumer nodes whose devices are the two
    chips of one host with a ``c2c`` section; a consumer whose device polls over c2c or hands its
    requests off over c2c is joined by one to the other chip's node. Raises :class:`ConfigError`
    naming file, key and value."""
    nodes = {n.name: n for n in sc.nodes}
    for j, link in enumerate(sc.links):
        if link.kind != "c2c":
            continue
        a, b = (params.consumers.get(nodes[x].device) for x in (link.a, link.b))
        if a is None or b is None:
            continue  # the device check names it
        host = params.hosts[a.host]
        if a.host != b.host or host.c2c is None or {a.kind, b.kind} != {"cpu", "gpu"}:
            raise ConfigError(path, f"links[{j}].kind", link.kind,
                              f"NVLink-C2C joins the CPU and the GPU of one superchip: {link.a} ({a.kind} on {a.host}) "
                              f"and {link.b} ({b.kind} on {b.host}) are not (the host needs a c2c section)")
    for i, n in enumerate(sc.nodes):
        c = params.consumers.get(n.device) if n.kind == "consumer" else None
        if c is None or (c.poll != "c2c" and (c.handoff is None or c.handoff.link != "c2c")):
            continue
        peers = [v for v in g.neighbors(n.name) if g.edges[n.name, v]["kind"] == "c2c"]
        if not peers:
            what = ("polls its queue across NVLink-C2C" if c.poll == "c2c" else
                    f"hands its requests to {c.handoff.to} across NVLink-C2C")
            raise ConfigError(path, f"nodes[{i}].device", n.device,
                              f"{what}: join node {n.name!r} by a c2c link to the node of the superchip's other chip")


def resolve_gaps_file(path: Path, key: str, traffic, rounds: int) -> None:
    """A ``gaps: {distribution: file}`` block: resolve its file relative to the scenario, read it
    (one duration per line), check ``rounds`` of them stay within the simulated horizon
    (:func:`twin.scenario.schema.check_horizon`), and keep its absolute path. Raises
    :class:`ConfigError` naming the key."""
    g = traffic.gaps
    if g is None or g.distribution != "file":
        return
    f = named_file(path, f"{key}.gaps.file", g.file)
    _check_horizon(path, _where(key), traffic, rounds, _gaps_values(path, f"{key}.gaps.file", g.file, f))
    g.file = str(f)


def _where(key: str) -> tuple:
    """``flows[2].traffic`` as the path ``("flows", 2, "traffic")``."""
    out: list = []
    for part in key.replace("]", "").split("."):
        name, _, index = part.partition("[")
        out += [name] + ([int(index)] if index else [])
    return tuple(out)


def _gaps_values(path: Path, key: str, value: str, f: Path) -> tuple[int, ...]:
    """The gaps file ``f``'s values; its errors name the scenario's key and never quote the file."""
    from twin.scenario.schema import read_gaps
    try:
        with named_input(path, f):
            return read_gaps(f)
    except (ValueError, UnicodeDecodeError) as e:
        if isinstance(e, ConfigError):
            raise
        from twin.config.load import text_or_empty
        raise ConfigError(path, key, value, scrub(str(e), text_or_empty(f))) from None


def _check_horizon(path: Path, where: tuple, traffic, rounds: int, gaps_ps: Sequence[int] | None = None) -> None:
    from twin.config import Located
    from twin.config.errors import _key
    from twin.scenario.schema import check_horizon
    try:
        check_horizon(traffic, rounds, where, gaps_ps)
    except Located as e:
        raise ConfigError(path, _key(e.path), e.value, e.problem) from None


def check_rounds(loaded: LoadedScenario, rounds: int) -> None:
    """``rounds`` (e.g. ``twin run --rounds``) of the scenario's traffic stay within the simulated
    horizon (a gaps file's values read again and summed over these rounds), and within the rounds a
    Qblox program that waits for replies publishes. Raises :class:`ConfigError` naming the key."""
    from twin.config import Located
    from twin.config.errors import _key
    from twin.scenario.schema import check_control_horizon, check_listening_rounds
    sc = loaded.scenario
    try:
        if sc.qblox is not None:
            check_listening_rounds(sc.qblox, rounds, ("rounds",))
        check_control_horizon(sc, rounds)
    except Located as e:
        raise ConfigError(loaded.path, _key(e.path), e.value, e.problem) from None
    blocks = [(("traffic",), sc.traffic)] + [(("flows", i, "traffic"), f.traffic) for i, f in enumerate(sc.flows)]
    for where, t in blocks:
        check_traffic_rounds(loaded.path, where, t, rounds)


def check_memory(loaded: LoadedScenario, rounds: int | None = None, streamed: bool = False) -> None:
    """The rounds a run keeps (each loop's, or each mesh flow's: ``rounds`` for every one when given,
    else the scenario's) fit in the memory there is (:func:`twin.engine.memory.memory_refusal`);
    ``streamed``: a loop's rounds streamed by the direct engine, kept nowhere. Raises
    :class:`ConfigError` naming ``rounds`` (``--rounds`` when ``rounds`` is not the scenario's)."""
    from twin.engine.memory import STREAM_HINT, run_refusal
    sc = loaded.scenario
    if sc.flows:
        loops, kept = len(sc.flows), sum(rounds or f.rounds or sc.rounds for f in sc.flows)
    else:
        loops = len(sc.consumers())
        kept = loops * (rounds or sc.rounds)
    why = run_refusal(loops, kept, streamed=streamed and not sc.flows, hint="run the flows as loops of their own "
                         "(a mesh runs on the event engine, which keeps its rounds)" if sc.flows else STREAM_HINT)
    if why:
        given = rounds is not None and rounds != sc.rounds
        raise ConfigError(loaded.path, "--rounds" if given else "rounds", rounds or sc.rounds, why)


def check_traffic_rounds(path: Path, where: tuple, traffic, rounds: int) -> None:
    """``rounds`` requests of the ``traffic`` block at ``where`` of the loaded scenario ``path`` stay
    within the simulated horizon (:func:`twin.scenario.schema.check_horizon`; a gaps file, resolved at
    load, read again and summed over these rounds). Raises :class:`ConfigError` naming the key."""
    from twin.config.errors import _key
    g = traffic.gaps
    values = None
    if g is not None and g.distribution == "file":
        values = _gaps_values(path, _key(where + ("gaps", "file")), g.file, Path(g.file))
    _check_horizon(path, where, traffic, rounds, values)
