"""ctypes binding of the engine's compiled core (``twin/engine/c/core.c``).

Which shared object is loaded (:func:`core`), as :mod:`twin.runtime.native` does for the runtime
library: the extension ``twin.engine._core`` built by ``pip install`` (setup.py) when its build id
matches ``core.c`` next to this file; otherwise a private build of ``core.c`` with the system C
compiler, cached under ``$TWIN_CACHE_DIR`` (default ``~/.cache/twin``) by build id; otherwise
:class:`CoreUnavailable` (the engines then run in Python: the direct recurrence and the simpy
reference, with the reason in verbose output). ``TWIN_COMPILED=0`` in the environment turns the
compiled core off (every run on the Python engines).

Parameters cross as int64 arrays whose indices are the C enums of ``c/core_interface.h``:
:data:`DIRECT_PARAMS`, :data:`DIRECT_STATE`, :data:`DIRECT_OUTS` (``P_*``, ``S_*``, ``DO_*``) and the
event core's tables, all generated with :mod:`twin.engine.core_interface` from one table
(``core_interface.yaml``, ``twin gen``). The build id covers core.c, that header and the runtime library's
C functions it is linked with (:data:`SOURCES`).
This module imports only the standard library, numpy and the generated tables at top level.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
from pathlib import Path

import numpy as np

from twin.engine.core_interface import DIRECT_OUTS, DIRECT_PARAMS, DIRECT_STATE

__all__ = ["C_FILE", "SOURCES", "DIRECT_OUTS", "DIRECT_PARAMS", "DIRECT_STATE", "CoreUnavailable", "build_id",
           "core", "ptr", "note_fallback"]

C_FILE = Path(__file__).resolve().parent / "c" / "core.c"
FUNCTIONS_C = C_FILE.parents[2] / "runtime" / "c" / "qrt_functions.c"
"""The runtime library's C functions (twin/runtime/functions.py's C builds), compiled into the core as a second
translation unit: the consumer of the event core calls the code the ``code`` model's endpoint dispatches to."""
STATS_C = C_FILE.with_name("stats.c")
"""A flow's statistics counted batch by batch (:mod:`twin.engine.flow_counts`), a third translation unit."""
SOURCES = (C_FILE, C_FILE.with_name("core_interface.h"), FUNCTIONS_C, FUNCTIONS_C.with_name("qrt_lookup.h"),
           FUNCTIONS_C.with_name("qrt_uf_graph.h"), STATS_C)
"""What the core is built from: core.c, the header it includes, the runtime's functions and their tables, and the
statistics (its build id hashes them, in this order)."""


class CoreUnavailable(RuntimeError):
    """The compiled core is not built and cannot be built here (no C compiler), or is turned off."""


def build_id() -> str | None:
    """The first 16 hex digits of the SHA-256 of :data:`SOURCES`' bytes one after the other (None
    when one is not installed); setup.py stamps the installed extension with the same."""
    if not all(p.is_file() for p in SOURCES):
        return None
    return hashlib.sha256(b"".join(p.read_bytes() for p in SOURCES)).hexdigest()[:16]


_LIB: ctypes.CDLL | None = None
_WHY: str | None = None

_P = ctypes.POINTER(ctypes.c_int64)


def _declare(lib: ctypes.CDLL) -> None:
    lib.twin_direct_run.restype = ctypes.c_int64
    lib.twin_direct_run.argtypes = [_P, _P, ctypes.c_int64, *([_P] * 7)]
    lib.twin_event_new.restype = ctypes.c_void_p
    lib.twin_event_new.argtypes = [ctypes.c_int64, _P, _P, ctypes.c_int64, _P, _P, ctypes.c_int64, ctypes.c_int64]
    lib.twin_event_run.restype = ctypes.c_int64
    lib.twin_event_run.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.twin_event_run_all.restype = ctypes.c_int64
    lib.twin_event_run_all.argtypes = [ctypes.c_int64, _P, _P, _P]
    lib.twin_event_stats.restype = None
    lib.twin_event_stats.argtypes = [ctypes.c_void_p, _P]
    lib.twin_event_free.restype = None
    lib.twin_event_free.argtypes = [ctypes.c_void_p]
    lib.twin_event_off.restype = None
    lib.twin_event_off.argtypes = [ctypes.c_void_p, _P]
    _P2 = ctypes.POINTER(_P)
    lib.twin_stats_bounds.restype = ctypes.c_int64
    lib.twin_stats_bounds.argtypes = [ctypes.c_int64, ctypes.c_int64, _P2, _P2, ctypes.c_int64, _P, _P]
    lib.twin_stats_positions.restype = ctypes.c_int64
    lib.twin_stats_positions.argtypes = [ctypes.c_int64, _P, _P, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, _P]
    lib.twin_stats_count.restype = None
    lib.twin_stats_count.argtypes = [ctypes.c_int64, ctypes.c_int64, _P2, _P2, _P2, _P, ctypes.c_int64, _P,
                                     _P, _P, ctypes.c_int64, _P]
    lib.twin_stats_add.restype = ctypes.c_int64
    lib.twin_stats_add.argtypes = [ctypes.c_int64, ctypes.c_int64, _P2, _P2, _P2, _P, _P, ctypes.c_int64,
                                   ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, _P, _P,
                                   ctypes.c_int64, _P, ctypes.c_int64, _P, _P, _P, _P, _P, _P, _P]
    lib.twin_event_columns.restype = ctypes.c_int64  # last: an older build without it has the rest declared
    lib.twin_event_columns.argtypes = []


def core() -> ctypes.CDLL:
    """The compiled core, loaded once. Raises :class:`CoreUnavailable` (its reason, one line) when
    it cannot be had, or ``TWIN_COMPILED=0``."""
    global _LIB, _WHY
    if os.environ.get("TWIN_COMPILED", "1") == "0":
        raise CoreUnavailable("the compiled core is turned off (TWIN_COMPILED=0)")
    if _LIB is not None:
        return _LIB
    if _WHY is not None:
        raise CoreUnavailable(_WHY)
    want = build_id()
    from twin.runtime.native import installed_library
    path = installed_library("twin.engine._core", "twin_core_build_id", want)
    if path is None:
        if want is None:
            _WHY = ("the compiled core is not installed (twin.engine._core) and core.c or core_interface.h is "
                    "missing: reinstall twin")
            raise CoreUnavailable(_WHY)
        from twin.runtime.native import build_shared
        try:
            path = str(build_shared("twin-core", "the engine's compiled core", want, [C_FILE, FUNCTIONS_C, STATS_C], [],
                                    [f'-DTWIN_CORE_BUILD_ID="{want}"', "-O3", "-ffp-contract=off"], CoreUnavailable,
                                    libs=("-lm",)))
        except CoreUnavailable as e:
            _WHY = str(e).splitlines()[0]
            raise
    lib = ctypes.CDLL(path)
    _declare(lib)
    _LIB = lib
    return lib


def function_address(symbol: str) -> int:
    """The address, in the compiled core, of the runtime library's C function ``symbol`` (a
    :class:`twin.runtime.functions.Function`'s ``c_symbol``, e.g. ``"qrt_fn_invert"``), for the event
    core's ``FP_FN``. Raises :class:`CoreUnavailable` when the core lacks it (a function whose C is not
    in twin/runtime/c/qrt_functions.c)."""
    try:
        fn = getattr(core(), symbol)
    except AttributeError:
        raise CoreUnavailable(f"the compiled core has no C function {symbol} (it links "
                              f"twin/runtime/c/{FUNCTIONS_C.name} only)") from None
    return int(ctypes.cast(fn, ctypes.c_void_p).value or 0)


def ptr(a: np.ndarray):
    """A ctypes int64 pointer to ``a`` (C-contiguous int64; kept alive by the caller)."""
    assert a.dtype == np.int64 and a.flags.c_contiguous
    return a.ctypes.data_as(_P)


_NOTED: set[str] = set()


def note_fallback(why: str) -> None:
    """Say once per reason, in verbose output (the ``twin.engine`` logger at INFO), why a run is on
    the Python engines instead of the compiled core."""
    if why not in _NOTED:
        _NOTED.add(why)
        import logging
        logging.getLogger("twin.engine").info(why)
