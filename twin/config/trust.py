"""A scenario is a program: the code a scenario names, its announcement, and the user's allowance.

A scenario reaches code on the host by five routes, each named by a key (docs/scenarios.md, "Trust:
a scenario is a program"):

- ``decode.function: pkg.module:callable``: a Python module, imported and called on every request;
- ``decode.function: lib.so:symbol``: a C library, loaded into the process and called likewise;
- ``decode.decoder: sinter:pkg.module:Class``: a sinter decoder class, imported and instantiated;
- ``nodes[i].rtl.sources``: Verilog whose system tasks reach the host (``$system``, ``$fopen``,
  ``$fwrite``, ``$readmemh``, Verilator's ``$c`` and ``\\`systemc_`` blocks of C++, DPI imports);
- ``decode.function`` naming a callable of any importable module (``os:system``): the one that makes a
  shell command of a scenario with no code file of its own.

The loaders list what a scenario names as :class:`CodeRef` (``LoadedScenario.code``,
``LoadedDecode.code``); ``twin run``, ``decode``, ``sweep`` and ``scenarios copy`` say it in one line
on stderr (:func:`announcement`). The twin's own code (a module inside the ``twin`` package) is not
announced; anything else is, the bundled examples included.

``decode.function`` takes a module or a C library only from the user's own files (:func:`own_file`:
under the scenario's folder or the current directory, and not in the standard library or an
installed package) or from the twin's bundled files, unless the user allows more: ``--allow-code
NAME`` on the command line or ``TWIN_ALLOW_CODE=NAME[,NAME...]`` in the environment (a module, a
package covering its modules, or a library's file name). The allowance comes from the user, never
from a scenario file. This module imports the standard library and, when asked, twin.bundled and
the reading in :mod:`twin.config`.
"""
from __future__ import annotations

import os
import re
import sys
import sysconfig
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

ENV = "TWIN_ALLOW_CODE"
_ALLOWED: set[str] = set()  # what --allow-code added in this process
# where announcements go while a command runs (:func:`announcing`), and the scenarios announced already
_SINK: ContextVar[tuple | None] = ContextVar("twin_code_announcements", default=None)


@dataclass(frozen=True)
class CodeRef:
    """One piece of code a scenario names: its ``key`` (``decode.function``), and ``what`` it is in
    words (``module examples.rep3_rule``, ``C library libmine.so``)."""

    key: str
    what: str


def allow(names: list[str] | tuple[str, ...]) -> None:
    """Allow the modules or libraries ``names`` (``--allow-code``) for the rest of this process; the
    environment variable is set too, so a worker process the study starts allows them as well.
    Raises ValueError for a name that is not printable, holds a comma or is over 200 characters."""
    if not any(names):
        return
    for n in names:
        if not n.isprintable() or "," in n or len(n) > 200:
            raise ValueError(f"--allow-code {n!r}: expected a module, package or library name (printable, no comma, "
                             "at most 200 characters)")
    _ALLOWED.update(n for n in names if n)
    os.environ[ENV] = ",".join(sorted(allowed()))


def allowed() -> set[str]:
    """What the user allowed: ``--allow-code`` names and those in ``$TWIN_ALLOW_CODE`` (comma or space separated)."""
    return _ALLOWED | {n for n in re.split(r"[,\s]+", os.environ.get(ENV, "")) if n}


def is_allowed(name: str) -> bool:
    """Whether the user allowed module ``name`` (itself or a package above it) or library ``name``
    (its path as given, or its file name)."""
    ok = allowed()
    parts = name.split(".")
    return (name in ok or Path(name).name in ok
            or any(".".join(parts[:i]) in ok for i in range(1, len(parts))))


def _system_dirs() -> list[Path]:
    """The standard library's and the installed packages' folders (never a user's own files)."""
    out = []
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            out.append(Path(p).resolve())
    return out


def own_file(file: str | Path, roots: list[Path]) -> bool:
    """Whether ``file`` is the user's own: it lies (links resolved) under one of ``roots`` (the
    scenario's folder, the current directory) or among the twin's bundled examples, and not in the
    standard library's or the installed packages' folders (a root inside them lends none of their
    modules)."""
    from twin.bundled import bundled_root
    try:
        f = Path(file).resolve()
        if f.is_relative_to(bundled_root().resolve() / "examples"):
            return True
        if any(f.is_relative_to(d) for d in _system_dirs()):
            return False
        return any(f.is_relative_to(Path(r).resolve()) for r in roots)
    except (OSError, ValueError):
        return False


# Verilog that reaches the host: file and process system tasks, memory files, Verilator's embedded C++
# ($c, `systemc_* blocks) and DPI imports of C functions
HOST_TASKS = re.compile(r"\$(?:system|c|fopen|fclose|fwrite[bho]?|fdisplay[bho]?|fstrobe[bho]?|fmonitor[bho]?|"
                        r"fscanf|fgets|fgetc|fread|ungetc|readmem[bh]|writemem[bh]|dumpfile|dumpvars)\b"
                        r"|`systemc_\w+|\bimport\s+\"DPI(?:-C)?\"")


def verilog_host_tasks(text: str) -> list[str]:
    """The distinct host-reaching constructs in Verilog ``text`` (:data:`HOST_TASKS`), in order of
    first use, each as written (``$system``, ``$fopen``, ``import "DPI-C"``)."""
    seen: list[str] = []
    for m in HOST_TASKS.finditer(text):
        word = " ".join(m.group(0).split())
        if word not in seen:
            seen.append(word)
    return seen


def announcement(scenario: str | Path, refs: list[CodeRef]) -> str | None:
    """The one line that says what code ``scenario`` runs (None when it names none):
    ``twin: note: scenario X runs code: module foo (key decode.function), ...``."""
    if not refs:
        return None
    parts = ", ".join(f"{r.what} (key {r.key})" for r in refs)
    return (f"twin: note: scenario {scenario} runs code: {parts}; a scenario is a program: run only "
            "those you trust (docs/scenarios.md, Trust)")


_INCLUDE = re.compile(r"`include\s+\"([^\"\n]+)\"")


def _verilog_tasks(source: Path, seen: set[Path]) -> list[str]:
    """:func:`verilog_host_tasks` of ``source`` and the files it `` `include``s (relative to its
    folder), each read once and bounded (:func:`twin.config.load.read_input_text`); a file that
    cannot be read adds nothing (the loader names it)."""
    from twin.config.errors import ConfigError
    from twin.config.load import read_input_text
    try:
        f = source.resolve()
    except (OSError, ValueError):
        return []
    if f in seen or len(seen) >= 64:
        return []
    seen.add(f)
    try:
        text = read_input_text(f)
    except ConfigError:
        return []
    found = verilog_host_tasks(text)
    for inc in _INCLUDE.findall(text):
        found += [t for t in _verilog_tasks(f.parent / inc, seen) if t not in found]
    return found


def named_code(doc: dict, scenario: Path) -> list[CodeRef]:
    """The code scenario ``scenario`` (its mapping ``doc``, as read or as validated) names outside the
    twin package, by the routes of the module docstring: ``decode.function`` (a module, or a C
    library: ``lib.so:symbol``), ``decode.decoder: sinter:...`` and ``nodes[i].rtl.sources`` whose
    Verilog reaches the host. A registered function's name, and a module of the twin package
    (``twin.``), name no code of the scenario's own."""
    out: list[CodeRef] = []
    decode = doc.get("decode") if isinstance(doc.get("decode"), dict) else {}
    dec = decode.get("decoder")
    if isinstance(dec, str) and dec.startswith("sinter:"):
        mod = dec[len("sinter:"):].partition(":")[0]
        if not _twin_module(mod):
            out.append(CodeRef("decode.decoder", f"sinter class {dec[len('sinter:'):]}"))
    fn = decode.get("function")
    if isinstance(fn, str) and ":" in fn:
        mod = fn.rpartition(":")[0]
        if mod.endswith((".so", ".dylib")):
            out.append(CodeRef("decode.function", f"C library {mod}"))
        elif not _twin_module(mod):
            out.append(CodeRef("decode.function", f"module {mod}"))
    for i, node in enumerate(doc.get("nodes") or []):
        rtl = node.get("rtl") if isinstance(node, dict) else None
        sources = rtl.get("sources") if isinstance(rtl, dict) else None
        for j, src in enumerate(sources if isinstance(sources, list) else []):
            if not isinstance(src, str):
                continue
            from twin.config.errors import ConfigError
            from twin.config.load import named_file
            try:
                tasks = _verilog_tasks(named_file(scenario, f"nodes[{i}].rtl.sources[{j}]", src), set())
            except ConfigError:
                continue  # the loader names a source that is not there
            if tasks:
                out.append(CodeRef(f"nodes[{i}].rtl.sources[{j}]", f"Verilog {src} with {', '.join(tasks)}"))
    return out


def _twin_module(mod: str) -> bool:
    return mod == "twin" or mod.startswith("twin.")


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextmanager
def announcing(sink=_to_stderr):
    """While inside, :func:`announce` hands each scenario's line to ``sink`` (default: stderr), once per
    scenario file; outside (the library, the tests) it says nothing. The ``twin`` command line runs
    every command inside."""
    token = _SINK.set((sink, set()))
    try:
        yield
    finally:
        _SINK.reset(token)


def announce(scenario: str | Path, refs: list[CodeRef]) -> None:
    """Say what code ``scenario`` names (:func:`announcement`), once per file, when inside
    :func:`announcing`; the loaders call it before any of that code is imported or built."""
    got = _SINK.get()
    line = announcement(scenario, refs)
    if got is None or line is None:
        return
    sink, done = got
    try:
        key = str(Path(scenario).resolve())
    except (OSError, ValueError):
        key = str(scenario)
    if key not in done:
        done.add(key)
        sink(line)
