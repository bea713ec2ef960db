"""The QEC decoders the runtime serves by function id, registered in :mod:`twin.runtime.functions`.

Ids from the contract's functions list (``C.FUNCTION_DECODE_*``: 16, 17, 18, 19); syndrome bytes in,
correction bytes out, laid out by the contract's syndrome section. ``decode_rep3`` and
``decode_steane7`` are the lookup tables of :data:`twin.qec.lookup.STANDARD` (model ``code`` serves
them compiled by numba, :mod:`twin.qec.native`; their C, ``qrt_fn_decode_*`` in
twin/runtime/c/qrt_functions.c on the generated tables of :mod:`twin.qec.gen_lookup`, runs in the
compiled core, the runtime library and the cuda kernel); ``decode_surface5`` is PyMatching
(:func:`twin.qec.decoders.standard_matching`), Python only; ``decode_uf_surface3`` is the union-find
decoder of :mod:`twin.qec.union_find` on the distance-3 surface code's graph (its C,
``qrt_fn_decode_uf_surface3`` on the generated graph of :mod:`twin.qec.gen_uf`, runs where the lookup
decoders' C runs).

Registration happens when this module is imported: by ``import twin.qec`` (the package imports it)
and, for a program that imported only the runtime, by :func:`twin.runtime.functions.load_providers`
through the entry point ``qec`` of group ``twin.runtime.functions`` (pyproject.toml). The tables,
the matching graph and numba are imported on first use, not here.
"""
from __future__ import annotations

from collections.abc import Callable

from twin.exchange import contract as C
from twin.runtime.functions import REGISTRY, Function, register


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


def _table_rom(name: str) -> Callable[[], str]:
    def rom() -> str:
        from twin.qec.lookup import standard_table
        return standard_table(name).readmemh()
    return rom


def _uf_fn(name: str) -> Callable[[bytes], bytes]:
    def decode(payload: bytes) -> bytes:
        from twin.qec.union_find import decode_payload, standard_graph
        return decode_payload(standard_graph(name), payload)
    decode.__doc__ = f"Union-find decoder {name!r} (:func:`twin.qec.union_find.decode_payload`)."
    return decode


def _matching_fn(name: str) -> Callable[[bytes], bytes]:
    def decode(payload: bytes) -> bytes:
        from twin.qec.decoders import standard_matching
        return standard_matching(name).decode_payload(payload)
    decode.__doc__ = f"PyMatching decoder {name!r} (:func:`twin.qec.decoders.standard_matching`)."
    return decode


DECODERS = (
    Function(C.FUNCTION_DECODE_REP3, "decode_rep3", _table_fn("rep3"), "qrt_fn_decode_rep3",
             "repetition-3 lookup decoder, 4 detectors -> 1 byte", _table_native("rep3"), C.syndrome_bytes(4),
             _table_rom("rep3")),
    Function(C.FUNCTION_DECODE_STEANE7, "decode_steane7", _table_fn("steane7"), "qrt_fn_decode_steane7",
             "Steane-7 lookup decoder, 6 detectors -> 1 byte", _table_native("steane7"), C.syndrome_bytes(6),
             _table_rom("steane7")),
    Function(C.FUNCTION_DECODE_SURFACE5, "decode_surface5", _matching_fn("surface5"), None,
             "rotated surface code d=5, 5 rounds, PyMatching: 120 detectors (15 bytes) -> 1 byte",
             min_payload=C.syndrome_bytes(120)),
    Function(C.FUNCTION_DECODE_UF_SURFACE3, "decode_uf_surface3", _uf_fn("surface3"), "qrt_fn_decode_uf_surface3",
             "rotated surface code d=3, 3 rounds, union-find: 24 detectors (3 bytes) -> 1 byte",
             min_payload=C.syndrome_bytes(24)),
)

for _f in DECODERS:
    held = REGISTRY.get(_f.id)
    if held is None or held.name != _f.name:  # held under its own name: a reload; another name: register raises
        register(_f)
