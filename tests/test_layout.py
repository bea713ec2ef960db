"""The package layout of docs/DESIGN ("One engine"): imports point down only.

The import graph is read from the sources, not from a run: every ``.py`` file of ``twin/`` and
``hw_bridge/`` is parsed with :mod:`ast` and every import of a project module is an arrow, at
module level or inside a function (a lazy import still runs, and still ties the two files).
``import a.b`` is an arrow to ``a/b.py`` (or ``a/b/__init__.py``); ``from a import b`` to ``a/b.py``
when ``b`` is a submodule, else to ``a/__init__.py`` (a package's ``__init__`` is its own file: one
that only re-exports stands for its package); relative imports are resolved against the file's
package; ``importlib.import_module("a.b")`` and ``__import__("a.b")`` with a literal name count as
``import a.b`` (an import by a string is still an import). Three rules:

- no import cycle among these files (each cycle is printed with the arrows that tie it);
- ``hw_bridge`` takes from ``twin`` only ``twin.exchange`` and ``twin.runtime`` (it is the live
  endpoint library, below the engine and the studies);
- the commands (``twin.cli``, ``twin.commands``) are imported by no library module: only by
  ``twin/commands/``, ``twin/cli.py``, ``twin/__main__.py`` and ``twin/launch.py`` (the program).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("twin", "hw_bridge")
HW_BRIDGE_MAY_USE = ("twin.exchange", "twin.runtime")
COMMANDS = ("twin.cli", "twin.commands")
COMMAND_FILES = ("twin/cli.py", "twin/__main__.py", "twin/launch.py")


@dataclass(frozen=True)
class Arrow:
    """``src`` (a file, relative to the root) imports module ``module`` (file ``dst``) at ``line``."""

    src: str
    dst: str
    module: str
    line: int


def project_modules(root: Path = ROOT) -> dict[str, str]:
    """Dotted module name -> file (relative to the root) of every .py file of the packages."""
    mods = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root)
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = rel.as_posix()
    return mods


def _package_of(rel: str) -> list[str]:
    parts = list(Path(rel).with_suffix("").parts)
    return parts[:-1]  # a module's package; for an __init__ the package itself ("__init__" dropped)


def _targets(node: ast.AST, rel: str, mods: dict[str, str]) -> list[str]:
    """The project modules one import statement names (dotted), resolved."""
    out = []
    if isinstance(node, ast.Import):
        for a in node.names:
            out.append(a.name)
    elif isinstance(node, ast.Call):
        f = node.func
        fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if (fname in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str) and not node.args[0].value.startswith(".")):
            out.append(node.args[0].value)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            pkg = _package_of(rel)
            base = pkg[:len(pkg) - (node.level - 1)] if node.level > 1 else pkg
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        for a in node.names:
            sub = f"{module}.{a.name}"
            out.append(sub if sub in mods else module)
    found = []
    for name in dict.fromkeys(out):
        while name and name not in mods:  # ``import twin.x.y`` of a name below a module: its module
            name = name.rpartition(".")[0]
        if name and name.split(".")[0] in PACKAGES and name not in found:
            found.append(name)
    return found


def arrows(root: Path = ROOT) -> list[Arrow]:
    """Every import arrow between files of the packages under ``root`` (self-imports left out)."""
    mods = project_modules(root)
    result = []
    for rel in mods.values():
        tree = ast.parse((root / rel).read_text(), filename=rel)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.Call)):
                for name in _targets(node, rel, mods):
                    if mods[name] != rel:
                        result.append(Arrow(rel, mods[name], name, node.lineno))
    return result


def import_cycles(arr: list[Arrow]) -> list[list[str]]:
    """The strongly connected components of more than one file (each holds at least one cycle),
    files sorted, components sorted."""
    g = nx.DiGraph((a.src, a.dst) for a in arr)
    return sorted(sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1)


def describe_cycles(cycles: list[list[str]], arr: list[Arrow]) -> str:
    lines = []
    for i, comp in enumerate(cycles, 1):
        inside = set(comp)
        lines.append(f"cycle {i}: {', '.join(comp)}")
        ties = sorted({(a.src, a.dst, a.line) for a in arr if a.src in inside and a.dst in inside})
        for src, dst, line in ties:
            lines.append(f"  {src}:{line} -> {dst}")
    return "\n".join(lines)


def _listing(arr: list[Arrow]) -> str:
    return "\n".join(f"  {a.src}:{a.line} -> {a.module}" for a in sorted(set(arr), key=lambda a: (a.src, a.line)))


def test_the_finder_sees_lazy_relative_and_submodule_imports(tmp_path):
    """The finder itself: a function-level import, ``from pkg import submodule``, a relative import,
    ``import a.b`` and ``importlib.import_module("a.b")`` each make an arrow, and a two-file cycle is reported as one
    component."""
    pkg = tmp_path / "twin"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from twin.sub.a import f\n")
    (pkg / "sub" / "a.py").write_text("def f():\n    from twin import b\n    return b\n")
    (pkg / "b.py").write_text("from .sub import c\n")
    (pkg / "sub" / "c.py").write_text("import twin.sub.a\nimport os\n")
    (pkg / "d.py").write_text("import importlib\nimportlib.import_module('twin.b')\n__import__('json')\n")
    (tmp_path / "hw_bridge").mkdir()
    (tmp_path / "hw_bridge" / "__init__.py").write_text("from twin.sub import f\n")
    arr = arrows(tmp_path)
    got = {(a.src, a.dst) for a in arr}
    assert got == {("twin/sub/__init__.py", "twin/sub/a.py"), ("twin/sub/a.py", "twin/b.py"),
                   ("twin/b.py", "twin/sub/c.py"), ("twin/sub/c.py", "twin/sub/a.py"), ("twin/d.py", "twin/b.py"),
                   ("hw_bridge/__init__.py", "twin/sub/__init__.py")}
    assert import_cycles(arr) == [["twin/b.py", "twin/sub/a.py", "twin/sub/c.py"]]


@pytest.fixture(scope="module")
def project_arrows() -> list[Arrow]:
    """The arrows of this checkout's twin/ and hw_bridge/, read once for the tests below."""
    return arrows()


def test_no_import_cycles(project_arrows):
    arr = project_arrows
    cycles = import_cycles(arr)
    if cycles:
        pytest.fail("import cycles among twin/ and hw_bridge/ files:\n" + describe_cycles(cycles, arr), pytrace=False)


def test_hw_bridge_imports_only_exchange_and_runtime(project_arrows):
    bad = [a for a in project_arrows if a.src.startswith("hw_bridge/") and a.module.split(".")[0] == "twin"
           and not any(a.module == m or a.module.startswith(m + ".") for m in HW_BRIDGE_MAY_USE)]
    if bad:
        pytest.fail("hw_bridge imports from twin other than " + ", ".join(HW_BRIDGE_MAY_USE) + ":\n"
                    + _listing(bad), pytrace=False)


def test_commands_are_not_imported_by_library_modules(project_arrows):
    def is_command_file(rel: str) -> bool:
        return rel.startswith("twin/commands/") or rel in COMMAND_FILES

    bad = [a for a in project_arrows if not is_command_file(a.src)
           and any(a.module == m or a.module.startswith(m + ".") for m in COMMANDS)]
    if bad:
        pytest.fail("library modules import the commands (" + ", ".join(COMMANDS) + "):\n" + _listing(bad),
                    pytrace=False)


def test_the_runtime_imports_nothing_of_qec(project_arrows):
    """The runtime's function registry is below the QEC package: twin.qec registers its decoders
    into it (twin.qec.functions), the runtime names no twin.qec module."""
    bad = [a for a in project_arrows if a.src.startswith("twin/runtime/") and a.module.startswith("twin.qec")]
    if bad:
        pytest.fail("the runtime imports twin.qec:\n" + _listing(bad), pytrace=False)


BELOW_STUDIES = ("twin/kernel/", "twin/links/", "twin/exchange/", "twin/devices/", "twin/runtime/", "twin/rtl/",
                 "twin/nodes/", "twin/engine/", "twin/scenario/", "twin/output/", "twin/config/",
                 "twin/calibration/", "twin/fitting/", "twin/qec/")
BELOW_SCENARIOS = ("twin/calibration/",)  # the parameter sets a scenario loads; their fits are twin/fitting/


def test_the_parameter_sets_do_not_reach_up_to_the_scenarios_fits_or_studies(project_arrows):
    """The parameter sets and measurements (twin.calibration) are what a scenario loads: they import
    no scenario, fit, study, report or command (the fits that simulate loops are twin.fitting)."""
    up = ("twin.scenario", "twin.fitting", "twin.studies", "twin.reports", "twin.commands", "twin.qec")
    bad = [a for a in project_arrows if a.src.startswith(BELOW_SCENARIOS) and a.module.startswith(up)]
    if bad:
        pytest.fail("a parameter set's module reaches up:\n" + _listing(bad), pytrace=False)


def test_the_studies_do_not_import_their_reports(project_arrows):
    """What a study prints and writes (twin.reports) sits above the studies: no study imports it."""
    bad = [a for a in project_arrows if a.src.startswith(("twin/studies/",) + BELOW_STUDIES)
           and a.module.startswith("twin.reports")]
    if bad:
        pytest.fail("a study (or a layer below) imports a report:\n" + _listing(bad), pytrace=False)


def test_the_layers_below_the_studies_import_none_of_them(project_arrows):
    """The studies (twin.studies) sit on the engine, the scenario and the output (its results
    records, twin/output/summary.py): none of those imports a study."""
    bad = [a for a in project_arrows if a.src.startswith(BELOW_STUDIES) and a.module.startswith("twin.studies")]
    if bad:
        pytest.fail("a layer below the studies imports them:\n" + _listing(bad), pytrace=False)
