"""Build step of twin: the device runtime library (twin/runtime/c) as the extension twin.runtime._qrt,
and the bundled files (scenarios/, calibrations/, rtl/, examples/) as package data.

The project's metadata is in pyproject.toml; setuptools reads both. The packages are listed here
(pyproject cannot combine a package search with extra packages): every ``twin*`` and
``hw_bridge*`` package, plus ``twin._bundled.<folder>`` for each folder of :data:`BUNDLED`, which
pyproject.toml maps (``package-dir``) onto the repository's top-level folder of that name and whose
files it lists (``package-data``). So a wheel holds
``twin/_bundled/scenarios/card_path_64b.yaml`` beside ``twin/_bundled/calibrations/fitted/...``
(a scenario's ``../calibrations/...`` still resolves) without a second copy in git;
twin/bundled.py finds them there, or in a checkout at the top level. The extension is an empty
CPython module (_qrt_module.c) linked with the runtime (qrt_lib.c, plus qrt_functions.c, the C
builds of the registered functions, when present); twin.runtime.native loads the same shared
object with ctypes. The engine's compiled core (twin/engine/c/core.c) is a second extension,
twin.engine._core (linked with qrt_functions.c too: its consumer runs the runtime's C functions),
loaded by twin.engine.native likewise. A C compiler (gcc or clang) is required.
"""
from __future__ import annotations

import hashlib
import importlib.util
import shutil
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
C_DIR = "twin/runtime/c"


def _runtime_sources() -> tuple[str, list[str]]:
    """The build id and the C files of the runtime library, from twin/runtime/native.py (loaded by
    path: it imports only the standard library), so the installed library and native.py agree."""
    spec = importlib.util.spec_from_file_location("_twin_native_build_id", HERE / "twin/runtime/native.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    bid = mod.source_build_id(HERE / C_DIR)
    if bid is None:
        raise SystemExit(f"twin: the runtime sources {mod.BUILD_SOURCES} are missing from {C_DIR}")
    return bid, [f"{C_DIR}/{p.name}" for p in mod.lib_sources(HERE / C_DIR)]


BUILD_ID, LIB_SOURCES = _runtime_sources()
CORE_C = "twin/engine/c/core.c"  # the engine's compiled core (twin/engine/native.py loads it with ctypes)
CORE_H = "twin/engine/c/core_interface.h"  # its index tables, generated (twin/engine/gen_core.py, `twin gen`)
CORE_FN = f"{C_DIR}/qrt_functions.c"  # the runtime's C functions, linked into the core (its consumer runs them)
# = twin.engine.native.build_id(): the hash of native.SOURCES, core.c, the header, the runtime's functions, their tables
CORE_LOOKUP = f"{C_DIR}/qrt_lookup.h"  # the lookup decoders' tables qrt_functions.c reads (twin/qec/gen_lookup.py)
CORE_UF = f"{C_DIR}/qrt_uf_graph.h"  # the union-find decoder's graph qrt_functions.c reads (twin/qec/gen_uf.py)
CORE_STATS = "twin/engine/c/stats.c"  # a flow's statistics batch by batch (twin/engine/flow_counts.py), a second unit
CORE_ID = hashlib.sha256(b"".join((HERE / p).read_bytes() for p in (CORE_C, CORE_H, CORE_FN, CORE_LOOKUP, CORE_UF,
                                                                      CORE_STATS))).hexdigest()[:16]

# the top-level folders a wheel carries as twin._bundled.<folder>; pyproject.toml's [tool.setuptools.package-dir]
# maps each onto its folder and [tool.setuptools.package-data] names the files (it overrides package_data here)
BUNDLED = ("scenarios", "calibrations", "rtl", "examples")
PACKAGES = [*find_packages(include=["twin", "twin.*", "hw_bridge", "hw_bridge.*"]),
            *(f"twin._bundled.{d}" for d in BUNDLED)]


class BuildRuntime(build_ext):
    """build_ext that adds C11 flags and turns a missing or failing compiler into one line."""

    def build_extension(self, ext):
        cc = getattr(self.compiler, "compiler_so", None) or [None]
        if self.compiler.compiler_type == "unix":
            ext.extra_compile_args = ["-std=c11", "-O2", "-fno-strict-aliasing", *ext.extra_compile_args]
            if ext.name == "twin.engine._core":  # its service arithmetic in double must be Python's: no FMA
                ext.extra_compile_args.extend(["-O3", "-ffp-contract=off"])
            if cc[0] is None or shutil.which(cc[0]) is None:
                raise SystemExit("error: twin needs a C compiler (gcc or clang) to build its runtime library: "
                                 f"{cc[0]!r} was not found (install gcc or clang, or set CC)")
        try:
            super().build_extension(ext)
        except Exception as e:  # distutils' CompileError / LinkError / DistutilsExecError / PlatformError
            msg = " ".join(str(e).split()) or type(e).__name__
            if isinstance(e, OSError) or "No such file" in msg or "not found" in msg:
                raise SystemExit("error: twin needs a C compiler (gcc or clang) to build its runtime library: "
                                 f"{msg}") from None
            raise SystemExit(f"error: building twin's runtime library ({C_DIR}) failed: {msg}") from None


setup(
    packages=PACKAGES,
    ext_modules=[
        Extension(
            "twin.runtime._qrt",
            sources=[*LIB_SOURCES, f"{C_DIR}/_qrt_module.c"],
            include_dirs=[C_DIR],
            depends=[f"{C_DIR}/qrt.h", f"{C_DIR}/qrt_contract.h", f"{C_DIR}/qrt_lookup.h", f"{C_DIR}/qrt_uf_graph.h"],
            define_macros=[("QRT_BUILD_ID", f'"{BUILD_ID}"')],
        ),
        Extension(
            "twin.engine._core",
            sources=[CORE_C, CORE_FN, CORE_STATS],
            depends=[CORE_H, CORE_LOOKUP, CORE_UF],
            define_macros=[("TWIN_CORE_BUILD_ID", f'"{CORE_ID}"'), ("TWIN_CORE_PYMODULE", "1")],
            libraries=["m"],  # expm1, log, rint of the consumer's service (core.c)
        ),
    ],
    cmdclass={"build_ext": BuildRuntime},
)
