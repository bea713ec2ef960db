"""The functions a consumer serves, addressed by the function id in the request header.

Each function has a Python implementation (what the ``sim`` model runs, and the reference the
card checks every reply against) and, for the ``code`` model, the name of its C implementation
in the runtime library (``twin/runtime/c/qrt_functions.c``). Id 0 is the runtime's built-in
echo. A user function written in Python can also be compiled to native code with numba and
installed in the C runtime's dispatch table (:func:`twin.runtime.numba_fn.user_function`).

Other packages add their functions by registering them here, never the other way round: a
provider module calls :func:`register` when imported and is declared under the entry-point group
:data:`PROVIDERS`, which this module loads when it is imported (:func:`load_providers`). The QEC
decoders (ids 16, 17, 18 from the contract's functions list) are served this way by
:mod:`twin.qec.functions`; the runtime imports nothing of ``twin.qec``.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from twin.exchange import contract as C


@dataclass(frozen=True)
class Function:
    """One served function: ``id`` (u16, the header's function field), ``name``, the Python
    implementation ``python(payload: bytes) -> bytes``, the C symbol (``None``: none in C; for
    id 0 the runtime's built-in echo), a one-line ``doc``, ``native``: for a Python user
    function, a callable returning the address of its numba-compiled build, and ``min_payload``:
    the request payload bytes the function needs (a decoder's syndrome; the Python implementation
    raises ValueError on a shorter payload, and a consumer answers it with status
    ``function_failed``, as the runtime library does when a function returns < 0); ``rom``: for a
    function the RTL function core computes from a table (a lookup decoder), a callable returning
    that table as ``$readmemh`` text (:func:`twin.rtl.build.consumer_sources`)."""

    id: int
    name: str
    python: Callable[[bytes], bytes]
    c_symbol: str | None
    doc: str
    native: Callable[[], int] | None = None  # address of a native build (numba), made on demand
    min_payload: int = 0
    rom: Callable[[], str] | None = None  # a hardware build's ROM image ($readmemh text), made on demand


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

#: Entry-point group of the packages that register functions here (see :func:`load_providers`).
PROVIDERS = "twin.runtime.functions"


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


def load_providers() -> list[str]:
    """Import every function provider declared under the entry-point group :data:`PROVIDERS` (a
    package's ``pyproject.toml``: ``[project.entry-points."twin.runtime.functions"]``); a provider
    module registers its functions with :func:`register` when it is imported. Run once when this
    module is imported, so a program that imported only the runtime still finds them (the QEC
    decoders 16, 17, 18 come from ``twin.qec.functions`` this way); the runtime itself imports no
    provider. Returns the names of the providers loaded; raises ImportError naming the entry point
    of one that fails to import."""
    from importlib.metadata import entry_points
    loaded = []
    for ep in entry_points(group=PROVIDERS):
        try:
            ep.load()
        except Exception as e:
            raise ImportError(f"function provider {ep.name} = {ep.value} (entry point group {PROVIDERS}) "
                              f"failed to load: {e}") from e
        loaded.append(ep.name)
    return loaded


def c_served() -> list[str]:
    """Names of the functions the runtime library serves itself (id 0, the echo, and every
    function with a C symbol), in id order: what a live consumer (shm, cuda, udp agent) runs."""
    return [f.name for f in sorted(REGISTRY.values(), key=lambda f: f.id) if has_c_code(f)]


def numba_available() -> bool:
    """Whether numba (the ``numba`` extra) is importable: model ``code`` serves Python functions and
    the lookup tables as numba builds installed in the C dispatch table."""
    import importlib.util
    return importlib.util.find_spec("numba") is not None


def has_c_code(fn: Function) -> bool:
    """Whether the runtime library serves ``fn`` itself: the echo (id 0) or a function with a C
    symbol (:func:`c_served` lists them). Which model may serve what is the models' rule
    (:func:`twin.nodes.models.function_refusal`)."""
    return fn.id == 0 or bool(fn.c_symbol)


def c_refusal(fn: Function, server: str) -> str | None:
    """Why ``server`` (one phrase: "a live consumer"), which runs the runtime library's own functions
    only, cannot serve ``fn`` (one sentence), or None when it can (:func:`has_c_code`)."""
    if has_c_code(fn):
        return None
    return f"function {fn.name} has no C implementation; {server} serves only the runtime library's functions " \
           f"({', '.join(c_served())})"


def lookup(key: int | str) -> Function:
    """The function with this id or name; raises KeyError naming the known ones."""
    if isinstance(key, int) and key in REGISTRY:
        return REGISTRY[key]
    for f in REGISTRY.values():
        if f.name == key:
            return f
    known = ", ".join(f"{f.id}={f.name}" for f in sorted(REGISTRY.values(), key=lambda f: f.id))
    raise KeyError(f"no function {key!r} (have: {known})")


load_providers()
