"""The functions a consumer serves, addressed by the function id in the request header.

Each function has a Python implementation (what the ``sim`` model runs, and the reference the
card checks every reply against) and, for the ``code`` model, the name of its C implementation
in the runtime library (``twin/runtime/c/qrt_functions.c``). Id 0 is the runtime's built-in
echo. A user function written in Python can also be compiled to native code with numba and
installed in the C runtime's dispatch table (:func:`twin.runtime.numba_fn.native_function`).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

from twin.exchange import contract as C


@dataclass(frozen=True)
class Function:
    """One served function: ``id`` (u16, the header's function field), ``name``, the Python
    implementation ``python(payload: bytes) -> bytes``, the C symbol (``None``: none in C; for
    id 0 the runtime's built-in echo), a one-line ``doc``, ``native``: for a Python user
    function, a callable returning the address of its numba-compiled build, and ``min_payload``:
    the request payload bytes the function needs (a decoder's syndrome; the Python implementation
    raises ValueError on a shorter payload, and a consumer answers it with status
    ``function_failed``, as the runtime library does when a function returns < 0)."""

    id: int
    name: str
    python: Callable[[bytes], bytes]
    c_symbol: str | None
    doc: str
    native: Callable[[], int] | None = None  # address of a native build (numba), made on demand
    min_payload: int = 0


def echo(payload: bytes) -> bytes:
    """The reply is the request payload."""
    return bytes(payload)


def invert(payload: bytes) -> bytes:
    """Every byte complemented (a reply that differs from the request in every byte)."""
    return bytes(b ^ 0xFF for b in payload)


def xor_fold(payload: bytes) -> bytes:
    """One byte: the XOR of all payload bytes (the parity of each bit position)."""
    x = 0
    for b in payload:
        x ^= b
    return bytes([x])


def sum32(payload: bytes) -> bytes:
    """Four bytes: the sum of the payload bytes modulo 2**32, little-endian."""
    return struct.pack("<I", sum(payload) & 0xFFFFFFFF)


REGISTRY: dict[int, Function] = {}


def register(fn: Function) -> Function:
    """Add ``fn`` to the registry; raises ValueError if its id or name is taken or out of range."""
    if not 0 <= fn.id < 2**16:
        raise ValueError(f"function id must be 0..65535, got {fn.id}")
    if fn.id in REGISTRY or any(f.name == fn.name for f in REGISTRY.values()):
        raise ValueError(f"function id {fn.id} or name {fn.name!r} already registered")
    REGISTRY[fn.id] = fn
    return fn


for _f in (Function(C.FUNCTION_ECHO, "echo", echo, None, "built-in: reply = request"),
           Function(1, "invert", invert, "qrt_fn_invert", "every byte complemented"),
           Function(2, "xor_fold", xor_fold, "qrt_fn_xor_fold", "XOR of all bytes, one byte"),
           Function(3, "sum32", sum32, "qrt_fn_sum32", "sum of bytes mod 2**32, little-endian u32")):
    register(_f)


def _table_fn(name: str) -> Callable[[bytes], bytes]:
    def decode(payload: bytes) -> bytes:
        from twin.qec.lookup import decode_payload, standard_table
        return decode_payload(standard_table(name), payload)
    decode.__doc__ = f"Lookup-table decoder {name!r} (:func:`twin.qec.lookup.decode_payload`)."
    return decode


def _table_native(name: str) -> Callable[[], int]:
    def address() -> int:
        from twin.qec.native import table_native
        return table_native(name)
    return address


# Decoders: ids from the contract's functions list (C.FUNCTION_DECODE_*: 16, 17, 18); syndrome bytes in,
# correction bytes out, laid out by the contract's syndrome section; tables in twin.qec.lookup.STANDARD;
# model code serves the tables compiled by numba, twin.qec.native
for _f in (Function(C.FUNCTION_DECODE_REP3, "decode_rep3", _table_fn("rep3"), None, "repetition-3 lookup decoder, 4 detectors -> 1 byte",
                    _table_native("rep3"), C.syndrome_bytes(4)),
           Function(C.FUNCTION_DECODE_STEANE7, "decode_steane7", _table_fn("steane7"), None, "Steane-7 lookup decoder, 6 detectors -> 1 byte",
                    _table_native("steane7"), C.syndrome_bytes(6))):
    register(_f)


def _matching_fn(name: str) -> Callable[[bytes], bytes]:
    def decode(payload: bytes) -> bytes:
        from twin.qec.decoders import standard_matching
        return standard_matching(name).decode_payload(payload)
    decode.__doc__ = f"PyMatching decoder {name!r} (:func:`twin.qec.decoders.standard_matching`)."
    return decode


register(Function(C.FUNCTION_DECODE_SURFACE5, "decode_surface5", _matching_fn("surface5"), None,
                  "rotated surface code d=5, 5 rounds, PyMatching: 120 detectors (15 bytes) -> 1 byte",
                  min_payload=C.syndrome_bytes(120)))


def c_served() -> list[str]:
    """Names of the functions the runtime library serves itself (id 0, the echo, and every
    function with a C symbol), in id order: what a live consumer (shm, cuda, udp agent) runs."""
    return [f.name for f in sorted(REGISTRY.values(), key=lambda f: f.id) if f.id == 0 or f.c_symbol]


def cannot_serve(fn: Function, model: str) -> str | None:
    """Why a consumer of ``model`` cannot serve ``fn`` (one sentence), or None when it can.

    ``live`` (hw_bridge shm, cuda, udp agent): the runtime library's own functions only (id 0 or a
    C symbol). ``code``: those, or a function with a ``native`` (numba) build. ``sim`` and ``rtl``:
    any (sim runs the Python implementation; rtl checks its own cores)."""
    if fn.id == 0 or fn.c_symbol:
        return None
    if model == "code" and fn.native is not None:
        return None
    if model == "live":
        return (f"function {fn.name} has no C implementation; a live consumer serves only the runtime "
                f"library's functions ({', '.join(c_served())})")
    if model == "code":
        return (f"function {fn.name} has neither a C implementation nor a native (numba) build for model code "
                f"to run (C: {', '.join(c_served())}); use model sim")
    return None


def lookup(key: int | str) -> Function:
    """The function with this id or name; raises KeyError naming the known ones."""
    if isinstance(key, int) and key in REGISTRY:
        return REGISTRY[key]
    for f in REGISTRY.values():
        if f.name == key:
            return f
    known = ", ".join(f"{f.id}={f.name}" for f in sorted(REGISTRY.values(), key=lambda f: f.id))
    raise KeyError(f"no function {key!r} (have: {known})")
