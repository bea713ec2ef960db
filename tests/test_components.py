"""Node kinds declare themselves (twin/nodes/declare.py, kinds.py) and `twin components` lists them."""
from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from twin.devices.consumer import ConsumerParams
from twin.devices.generator import Gaps, TrafficParams
from twin.devices.linkcard import LinkCardParams
from twin.engine.hops import INSTANTS, SLOT_WAIT, STAGES
from twin.nodes import kinds as K
from twin.nodes import listing, registry  # noqa: F401
from twin.nodes.declare import REQUIRED, NodeKind, Param, Port, code_defaults, declare
from twin.nodes.kinds import kind, kinds
from twin.qec.hosting import HostingParams

ROOT = Path(__file__).resolve().parents[1]

# The parameter dataclasses each node kind's timing lives in: every field declared, none invented.
DATACLASSES = {"link_card": [LinkCardParams], "consumer": [ConsumerParams, HostingParams],
               "generator": [TrafficParams, Gaps]}


def _defaults(cls) -> dict:
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = REQUIRED
    return out


def _of(cls) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


@pytest.mark.parametrize("name", sorted(DATACLASSES))
def test_declared_params_are_the_dataclass_fields_with_their_defaults(name):
    k = kind(name)
    for cls in DATACLASSES[name]:
        fields = _defaults(cls)
        declared = {p.field: p for p in k.params if p.of == _of(cls)}
        assert set(declared) == set(fields), f"{name}: {cls.__name__} fields vs declarations"
        for f, default in fields.items():
            assert declared[f].default == default or (default is REQUIRED and declared[f].default is REQUIRED), \
                f"{name}.{declared[f].name}: declared default {declared[f].default!r}, code {default!r}"


def test_every_declared_param_names_a_real_field_with_the_code_default():
    for k in kinds():
        for p in k.params:
            assert p.of, f"{k.name}.{p.name} names no class"
            have = code_defaults(p.of)
            assert p.field in have, f"{k.name}.{p.name}: {p.of} has no field {p.field!r}"
            assert p.default == have[p.field] or p.default is have[p.field]
            assert p.source and p.doc, f"{k.name}.{p.name}: needs a source and a doc line"


def test_pydantic_defaults_are_read_from_the_model():
    from twin.calibration.roce import NicModel
    from twin.devices.qblox import QbloxCluster
    qb = {p.field: p.default for p in kind("generator").params if p.of == K.QBLOX}
    assert qb["trigger_network_ns"] == QbloxCluster.model_fields["trigger_network_ns"].default
    assert qb["sequencers"] is REQUIRED
    assert kind("nic").param("nic.doorbell").default == NicModel.model_fields["doorbell"].default


def test_a_declaration_that_drifts_from_the_code_is_refused():
    spec = {n: K.P("ps", "assumption", "x") for n in _defaults(LinkCardParams)}
    assert len(K._fields(K.LINK_CARD, spec)) == len(spec)
    short = dict(spec)
    short.pop("reply_send_ps")
    with pytest.raises(ValueError, match="not declared: reply_send_ps"):
        K._fields(K.LINK_CARD, short)
    with pytest.raises(ValueError, match="not fields: bridge_ps"):
        K._fields(K.LINK_CARD, {**spec, "bridge_ps": K.P("ps", "assumption", "x")})


def test_node_kinds_are_the_registered_kinds_and_the_scenario_kinds():
    import twin.nodes.models  # noqa: F401  (registers every model)
    registered = {k for k, _ in registry._REGISTRY}
    nodes = {k.name for k in kinds("node")}
    assert registered == nodes
    for k in kinds("node"):
        assert registry.models_for(k.name), f"{k.name}: no registered model"
    from pydantic import ValidationError

    from twin.scenario import Link, Node
    for name in nodes:  # the scenario takes every declared node kind, and no other
        assert Node._kind(name) == name
    with pytest.raises(ValueError, match="not a node kind"):
        Node._kind("aurora")
    with pytest.raises(ValidationError):
        Node(name="x", kind="no_such_kind")
    assert set(typing.get_args(Link.model_fields["kind"].annotation)) == {k.name for k in kinds("link")}


def test_stage_and_hop_statistics_are_the_engine_s():
    stats = [s.name for k in kinds() for s in k.stats]
    stages = {s.split(".", 1)[1] for s in stats if s.startswith("stage.")}
    from twin.devices.handoff import INNER_STAGES
    assert stages == set(STAGES) | {SLOT_WAIT} | set(INNER_STAGES)  # a two-stage consumer's hand-off adds its own
    hops = {s.split(".", 1)[1] for s in stats if s.startswith("hops.")}
    assert hops <= set(INSTANTS) | {"inner", "ready"}


def test_ports_name_the_queues_and_paths():
    card, consumer = kind("link_card"), kind("consumer")
    assert {(p.name, p.direction) for p in card.ports} >= {("requests", "out"), ("replies", "memory")}
    assert {(p.name, p.direction) for p in consumer.ports} == {("requests", "memory"), ("reply", "out"),
                                                               ("handoff", "out")}  # a two-stage consumer's
    with pytest.raises(ValueError, match="direction"):
        Port("x", "sideways", "")


def test_lookup_and_registration_errors():
    with pytest.raises(KeyError, match="known kinds: generator, link_card, consumer"):
        kind("decoder")
    with pytest.raises(ValueError, match="declared already"):
        declare(NodeKind("consumer", "again"))
    with pytest.raises(ValueError, match="twice"):
        NodeKind("x", "", params=(Param("a", "", 0, "s", "d"), Param("a", "", 0, "s", "d")))
    with pytest.raises(KeyError, match="no parameter"):
        kind("link_card").param("nope")


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """`twin components ...` through the `twin` command line itself."""
    from twin.commands import main
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_twin_components_lists_every_kind(capsys):
    rc, out, err = _cli(["components"], capsys)
    assert rc == 0 and err == ""
    for k in kinds():
        assert f"{k.name} ({'node' if k.role == 'node' else 'wire'} kind)" in out
        for p in k.params:
            assert f"{p.name} [{p.unit or '-'}] = {listing.default_text(p)}" in out
            assert f"source: {p.source}" in out
        for x in k.ports:
            assert x.name in out and x.doc in out
        for s in k.stats:
            assert s.doc in out
        for m in registry.models_for(k.name):
            assert f"{m.name}: {m.summary}" in out
            assert f"supports: {listing.supports_text(m.supports)}" in out
    assert "engine_land_ps [ps] = 10000 (10 ns)" in out
    assert "AMD-Qblox blog (amd-qblox-exchange-runtime.txt, docs/sources.md): 10 ns landing" in out


def test_every_measured_source_names_a_public_reference():
    """A seed file name alone cannot be followed: every one cited by a component or a calibration file
    has its public source (title, authors, address where known) in docs/sources.md, every component
    source citing one points there, and no measured file's source rests on a project issue."""
    import re

    import yaml
    sources = (ROOT / "docs" / "sources.md").read_text()
    cal = sorted((ROOT / "calibrations").rglob("*.yaml"))
    text = "\n".join(p.read_text() for p in [ROOT / "twin" / "nodes" / "kinds.py", *cal])
    seeds = set(re.findall(r"[a-z0-9-]+\.txt", text))
    assert seeds == {"amd-qblox-exchange-runtime.txt", "backline-paper-abstract.txt", "backline-announcement.txt"}
    for seed in seeds:
        row = next(ln for ln in sources.splitlines() if f"`{seed}`" in ln)
        assert row.count("|") >= 4 and ('"' in row or "blog" in row), row  # a title or publisher beside the file
    for k in kinds():
        for prm in k.params:
            if ".txt" in prm.source:
                assert "docs/sources.md" in prm.source, (k.name, prm.name, prm.source)
    for f in sorted((ROOT / "calibrations" / "measured").glob("*.yaml")):
        src = str(yaml.safe_load(f.read_text()).get("source", ""))
        assert not re.search(r"\bissue \d+", src), (f.name, src)
        assert ".txt" not in src or "docs/sources.md" in src, (f.name, src)


def test_twin_components_one_kind_and_formats(capsys):
    rc, out, _ = _cli(["components", "link_card"], capsys)
    assert rc == 0 and out.startswith("link_card (node kind)") and "consumer (node kind)" not in out
    rc, out, _ = _cli(["components", "consumer", "--format", "json"], capsys)
    doc = json.loads(out)
    (c,) = doc["kinds"]
    assert c["name"] == "consumer" and {m["name"] for m in c["models"]} == {"sim", "code", "rtl", "live"}
    p = {x["name"]: x for x in c["params"]}
    assert p["service_ps"]["required"] and p["service_ps"]["default"] is None
    assert p["hosting.chain_trigger_ps"]["default"] == 1_920_000 and p["hosting.chain_trigger_ps"]["unit"] == "ps"
    rc, out, _ = _cli(["components", "--format", "markdown"], capsys)
    assert out == listing.render(fmt="markdown")


def test_an_unknown_kind_is_one_line_and_exit_2(capsys):
    rc, out, err = _cli(["components", "decoder"], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "'decoder'" in err and "link_card" in err and "ethernet" in err
    with pytest.raises(ValueError, match="format"):
        listing.render(fmt="html")


def test_docs_components_is_up_to_date():
    assert not listing.stale(), "run `python -m twin.nodes.listing --markdown > docs/components.md`"
    assert "(components.md)" in (ROOT / "docs" / "architecture.md").read_text()


def _imports(path: Path) -> set[str]:
    mods = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            mods |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods.add(node.module)
    return mods


def test_no_import_cycles_through_the_declarations():
    for pkg in ("kernel", "links", "exchange"):
        for f in (ROOT / "twin" / pkg).rglob("*.py"):
            assert not any(m == "twin.nodes" or m.startswith("twin.nodes.") for m in _imports(f)), f
    assert not any(m.startswith("twin.devices") for m in _imports(ROOT / "twin" / "nodes" / "declare.py"))
    code = ("import sys, twin.nodes.declare; "
            "bad = [m for m in sys.modules if m.startswith(('twin.devices', 'twin.nodes.kinds'))]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
