"""ctypes binding of the engine's compiled core (``twin/engine/c/core.c``).

Which shared object is loaded (:func:`core`), as :mod:`twin.runtime.native` does for the runtime
library: the extension ``twin.engine._core`` built by ``pip install`` (setup.py) when its build id
matches ``core.c`` next to this file; otherwise a private build of ``core.c`` with the system C
compiler, cached under ``$TWIN_CACHE_DIR`` (default ``~/.cache/twin``) by build id; otherwise
:class:`CoreUnavailable` (the engines then run in Python: the direct recurrence and the simpy
reference, with the reason in verbose output). ``TWIN_COMPILED=0`` in the environment turns the
compiled core off (every run on the Python engines).

Parameters cross as int64 arrays whose indices are the C enums: :data:`DIRECT_PARAMS`,
:data:`DIRECT_STATE` (same order as ``P_*`` and ``S_*`` in core.c). This module imports only the
standard library and numpy at top level.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
from pathlib import Path

import numpy as np

C_FILE = Path(__file__).resolve().parent / "c" / "core.c"

DIRECT_PARAMS = ("n", "slots", "closed", "in_flight", "per_piece", "phase", "poll", "cost", "body", "fence",
                 "card_poll", "read", "bridge", "land", "card_clk", "clk_period", "clk_ppb", "clk_phase",
                 "period_cycles", "gap", "aurora", "aur_ser", "aur_lat", "reply_send", "req_lat", "rep_lat",
                 "n_req", "req_ser0", "req_ser1", "req_ser2", "req_ser3", "req_tail0", "req_tail1", "req_tail2",
                 "req_tail3", "rep_ser0", "rep_ser1", "rep_tail0", "rep_tail1", "has_gaps", "has_extra")
"""The direct engine's parameters, in the order of core.c's ``P_*`` (integer ps where timed)."""
DIRECT_STATE = ("i", "ts", "back", "tx", "rx", "bridge", "free_c", "last_have", "req_free", "req_last", "rep_free",
                "rep_last", "scheduled", "heap_n", "writes")
"""The direct engine's state carried between chunks of rounds, in the order of core.c's ``S_*``."""


class CoreUnavailable(RuntimeError):
    """The compiled core is not built and cannot be built here (no C compiler), or is turned off."""


def build_id() -> str | None:
    """The first 16 hex digits of the SHA-256 of core.c (None when core.c is not installed)."""
    return hashlib.sha256(C_FILE.read_bytes()).hexdigest()[:16] if C_FILE.is_file() else None


_LIB: ctypes.CDLL | None = None
_WHY: str | None = None

_P = ctypes.POINTER(ctypes.c_int64)


def _declare(lib: ctypes.CDLL) -> None:
    lib.twin_direct_run.restype = ctypes.c_int64
    lib.twin_direct_run.argtypes = [_P, _P, ctypes.c_int64, *([_P] * 17)]
    lib.twin_event_new.restype = ctypes.c_void_p
    lib.twin_event_new.argtypes = [ctypes.c_int64, _P, _P, ctypes.c_int64, _P, _P, ctypes.c_int64, ctypes.c_int64]
    lib.twin_event_run.restype = ctypes.c_int64
    lib.twin_event_run.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.twin_event_stats.restype = None
    lib.twin_event_stats.argtypes = [ctypes.c_void_p, _P]
    lib.twin_event_free.restype = None
    lib.twin_event_free.argtypes = [ctypes.c_void_p]
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
    if path is None and want is None:
        _WHY = "the compiled core is not installed (twin.engine._core) and core.c is missing: reinstall twin"
        raise CoreUnavailable(_WHY)
    if path is None:
        from twin.runtime.native import build_shared
        try:
            path = str(build_shared("twin-core", "the engine's compiled core", want, [C_FILE], [],
                                    [f'-DTWIN_CORE_BUILD_ID="{want}"', "-O3"], CoreUnavailable))
        except CoreUnavailable as e:
            _WHY = str(e).splitlines()[0]
            raise
    lib = ctypes.CDLL(path)
    _declare(lib)
    _LIB = lib
    return lib


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
